"""Arm joint states ⇄ sensor_msgs/JointState, and the arm's frames as tf2_msgs/TFMessage."""

from __future__ import annotations

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import JointState as JointStateMsg
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

from robopin import messages
from robopin.robots.state import JointState
from robopin_ros.conversions.common import RCLPY_TYPES, seconds_to_stamp


def joint_state_to_msg(state: JointState, stamp_s: float) -> JointStateMsg:
    """A measured joint state as sensor_msgs/JointState stamped ``stamp_s`` (ROS time, seconds)."""
    msg = JointStateMsg(name=list(state.names), position=[float(v) for v in state.positions])
    msg.header.stamp = seconds_to_stamp(stamp_s)
    if state.velocities is not None:
        msg.velocity = [float(v) for v in state.velocities]
    if state.efforts is not None:
        msg.effort = [float(v) for v in state.efforts]
    return msg


def msg_to_joint_state(msg: JointStateMsg) -> JointState:
    """A sensor_msgs/JointState as the arm layer's JointState (stamped now on the monotonic clock)."""
    n = len(msg.name)
    velocities = list(msg.velocity) if len(msg.velocity) == n else None
    efforts = list(msg.effort) if len(msg.effort) == n else None
    return JointState(tuple(msg.name), list(msg.position), velocities, efforts)


def joint_state_positions(msg: JointStateMsg) -> dict[str, float]:
    """Joint name → position of a sensor_msgs/JointState (names without a position are left out)."""
    return {name: float(value) for name, value in zip(msg.name, msg.position, strict=False)}


def frame_transforms_to_tf_message(edges, stamp: Time):
    """``robopin.robots.urdf.FrameTransform`` edges as one tf2_msgs/TFMessage stamped ``stamp``."""
    stamped = []
    for edge in edges:
        stamped.append(TransformStamped(
            header=Header(stamp=stamp, frame_id=edge.parent), child_frame_id=edge.child,
            transform=messages.transform_msg(RCLPY_TYPES, edge.T_parent_child)))
    return TFMessage(transforms=stamped)
