"""Joint trajectories ⇄ trajectory_msgs/JointTrajectory: the one encoder and the one decoder of
:class:`robopin.robots.trajectory.JointTrajectory`, for planners, the arm driver and FollowJointTrajectory.

Times from start are builtin_interfaces/Duration, encoded by :func:`~robopin_ros.conversions.common.seconds_to_duration`
(nearest nanosecond, ``0 <= nanosec < 10**9``).
"""

from __future__ import annotations

from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from robopin.robots.errors import TrajectoryError
from robopin.robots.trajectory import JointTrajectory
from robopin_ros.conversions.common import duration_to_seconds, seconds_to_duration


def _floats(values) -> list[float]:
    return [float(v) for v in values]


def trajectory_to_msg(trajectory: JointTrajectory, frame_id: str = "base") -> JointTrajectoryMsg:
    """Return a JointTrajectory as trajectory_msgs/JointTrajectory (stamp 0: start on receipt).

    Velocities and accelerations are written when the trajectory has them, else left empty, which
    joint_trajectory_controller reads as "interpolate linearly" (cubic with velocities, quintic with both).
    """
    msg = JointTrajectoryMsg(joint_names=list(trajectory.joint_names))
    msg.header.frame_id = frame_id
    for index, t in enumerate(trajectory.times_s):
        point = JointTrajectoryPoint(positions=_floats(trajectory.positions[index]),
                                     time_from_start=seconds_to_duration(float(t)))
        if trajectory.velocities is not None:
            point.velocities = _floats(trajectory.velocities[index])
        if trajectory.accelerations is not None:
            point.accelerations = _floats(trajectory.accelerations[index])
        msg.points.append(point)
    return msg


def _rates(msg: JointTrajectoryMsg, field: str):
    """One field's rows when every point fills it, None when every point leaves it empty."""
    dof = len(msg.joint_names)
    lengths = {len(getattr(point, field)) for point in msg.points}
    for index, point in enumerate(msg.points):
        if len(getattr(point, field)) not in (0, dof):
            raise TrajectoryError(f"point {index} has {len(getattr(point, field))} {field} for {dof} joints")
    if lengths == {0}:
        return None
    if 0 in lengths:
        raise TrajectoryError(f"some points give {field} and others do not; give them for every point or none")
    return [list(getattr(point, field)) for point in msg.points]


def msg_to_trajectory(msg: JointTrajectoryMsg) -> JointTrajectory:
    """Return a trajectory_msgs/JointTrajectory as a JointTrajectory; raise TrajectoryError naming the fault.

    Checked as joint_trajectory_controller checks a goal (ros2_controllers joint_trajectory_controller.cpp,
    validate_trajectory_msg): every point has one position per joint; velocities and accelerations are empty
    or one per joint; times strictly increase. Empty rates stay None (linear interpolation).
    """
    names = tuple(msg.joint_names)
    if not msg.points:
        raise TrajectoryError("the trajectory has no points")
    dof = len(names)
    for index, point in enumerate(msg.points):
        if len(point.positions) != dof:
            raise TrajectoryError(f"point {index} has {len(point.positions)} positions for {dof} joints {names}")
    times = [duration_to_seconds(point.time_from_start) for point in msg.points]
    positions = [list(point.positions) for point in msg.points]
    return JointTrajectory(names, times, positions, _rates(msg, "velocities"), _rates(msg, "accelerations"))


def trajectory_point_msg(positions, velocities=None, time_from_start_s: float = 0.0) -> JointTrajectoryPoint:
    """A trajectory_msgs/JointTrajectoryPoint (for FollowJointTrajectory feedback; times before 0 read as 0)."""
    point = JointTrajectoryPoint(positions=_floats(positions),
                                 time_from_start=seconds_to_duration(max(0.0, float(time_from_start_s))))
    if velocities is not None:
        point.velocities = _floats(velocities)
    return point
