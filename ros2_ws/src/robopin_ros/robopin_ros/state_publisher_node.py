"""state_publisher_node: robot_state_publisher's topics for machines without it, plus the camera mounts.

Publishes, as ``robot_state_publisher`` (ros/robot_state_publisher) does, the URDF on
``/robot_description`` (std_msgs/String, transient local: latched), its fixed joints on ``/tf_static``
(transient local) and one ``/tf`` message per ``/joint_states`` message with each movable joint's
transform, stamped with the joint state's stamp. Frame names are the URDF's links (``panda_link0``,
``link_base``, …); robopin's own frames join the same tree on ``/tf_static``: ``base`` (identity
under the URDF base link: the frame every robopin message names), ``ee`` (the TCP under its link),
``<view>_optical`` for every calibrated camera (under ``base`` for a static mount, under ``ee`` for the
wrist hand-eye) and ``<view>_depth_optical`` under it for views whose depth is not aligned to color.
Mounts come from the ``calibrations`` parameter, the simulator's true mounts (``sim_world``) or
``<calibration_dir>/<view>.yaml``, in that order — the sources projection_node reads. Run::

    ros2 run robopin_ros state_publisher_node --ros-args -p robot:=xarm6 -p views:="['static', 'wrist']"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from robopin.calibration import load_mount_for_view
from robopin.geometry import CalibrationError, CameraMount, mount_from_dict
from robopin.interfaces import ROBOT_DESCRIPTION, TF, TF_STATIC
from robopin.robots.description import load_description
from robopin.robots.state_publisher import robopin_frame_transforms
from robopin.system.node_settings import StatePublisherSettings, settings_from
from robopin_ros import conversions
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import run_node

# ros/robot_state_publisher, src/robot_state_publisher.cpp: /robot_description with QoS(1).transient_local(),
# fixed joints through tf2_ros' StaticTransformBroadcaster (/tf_static, depth 1, transient local),
# /joint_states taken with SensorDataQoS, /tf stamped with the joint state's stamp, mimic joints as
# multiplier * leader + offset.
LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
TF_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)


class StatePublisherNode(LoggedNode):
    """Publishes /robot_description and /tf_static once and /tf per joint state (see the module docstring)."""

    # Joint states in, TF out: short callbacks only.
    EXECUTOR_THREADS = 1  # robopin_ros.runtime.make_executor

    def __init__(self, **node_options: Any) -> None:
        super().__init__("state_publisher_node", **node_options)
        settings = settings_from(StatePublisherSettings, declare_settings(self, StatePublisherSettings()))
        robot, views, calibrations = settings.robot, settings.views, settings.calibrations
        calibration_dir, sim_world = Path(settings.calibration_dir), settings.sim_world
        unaligned, joint_states_topic = settings.unaligned_depth, settings.joint_states_topic
        description = load_description(robot)
        urdf_text = description.urdf_path.read_text(encoding="utf-8")
        self.tree = description.urdf_tree
        mounts = []
        for view in views:
            mount = self._mount(view, calibrations, sim_world, calibration_dir)
            if mount is not None:
                mounts.append((view, mount))
        depth_to_color = {v: mount_from_dict(d, source=f"unaligned_depth[{v!r}]").T_parent_cam
                          for v, d in unaligned.items()}
        self.static_edges = self.tree.fixed_transforms() + robopin_frame_transforms(
            description.base_link, description.tcp_link, description.T_link_tcp, mounts, depth_to_color)
        self.description_pub = self.create_publisher(String, ROBOT_DESCRIPTION, LATCHED_QOS)
        # TF under the robot's namespace (/left/tf), not frame prefixes: nav2_bringup's launch files remap
        # ('/tf', 'tf') and ('/tf_static', 'tf_static') for every namespaced node (navigation2,
        # nav2_bringup/launch/navigation_launch.py, "there doesn't seem to be a better alternative"), so each
        # robot keeps one tree with the frame names every robopin node and calibration file uses (base, ee,
        # <view>_optical). Frame prefixes (xarm_ros2's prefix:=) would rename every frame the core reads.
        self.static_pub = self.create_publisher(TFMessage, TF_STATIC, LATCHED_QOS)
        self.tf_pub = self.create_publisher(TFMessage, TF, TF_QOS)
        self.description_pub.publish(String(data=urdf_text))
        self.static_pub.publish(conversions.frame_transforms_to_tf_message(
            self.static_edges, self.get_clock().now().to_msg()))
        self._closing = False
        self._last_stamp: tuple[int, int] | None = None
        self.create_subscription(JointState, joint_states_topic, self._on_joint_state, qos_profile_sensor_data)
        self.get_logger().info(
            f"state publisher ready: {robot} ({self.tree.root_link} root, {len(self.static_edges)} static frames, "
            f"cameras {[v for v, _ in mounts]})")

    def _mount(self, view: str, calibrations: dict, sim_world: str, calibration_dir: Path) -> CameraMount | None:
        if view in calibrations:
            return mount_from_dict(calibrations[view], source=f"calibrations[{view!r}]")
        if sim_world:
            from robopin.sim.world import get_world

            spec = get_world(sim_world).camera(view)
            kind = "wrist" if spec.mount == "ee" else "static"
            return CameraMount(kind, np.asarray(spec.T_mount_cam, dtype=np.float64),
                               "ee" if kind == "wrist" else "base", f"{view}_optical")
        if not (calibration_dir / f"{view}.yaml").is_file():
            self.get_logger().warning(f"view {view!r} has no calibration in {calibration_dir}: not on /tf_static")
            return None
        try:
            return load_mount_for_view(calibration_dir, view)
        except CalibrationError as error:
            self.get_logger().warning(f"view {view!r} has no camera mount on /tf_static: {error}")
            return None

    def _on_joint_state(self, msg: JointState) -> None:
        """Publish the movable joints' transforms at the joint state's stamp, once per stamp: a still simulated
        cell's clock stands, and tf2 refuses a transform again at a time it has (TF_REPEATED_DATA)."""
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        if stamp == self._last_stamp:
            return
        edges = self.tree.moving_transforms(conversions.joint_state_positions(msg))
        if not edges or self._closing:
            return
        self._last_stamp = stamp
        try:
            self.tf_pub.publish(conversions.frame_transforms_to_tf_message(edges, msg.header.stamp))
        except RuntimeError:  # rclpy's InvalidHandle: a callback still running while the node is destroyed
            if not self._closing:
                raise

    def destroy_node(self) -> None:
        self._closing = True
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    return run_node(StatePublisherNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
