"""Arm message conversions: trajectory_msgs/JointTrajectory ⇄ JointTrajectory, JointState."""

from __future__ import annotations

import numpy as np
import pytest
from robopin_ros import conversions
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from robopin.robots.errors import TrajectoryError
from robopin.robots.state import JointState
from robopin.robots.trajectory import JointTrajectory


def test_trajectory_round_trips_with_velocities():
    trajectory = JointTrajectory(
        ("a", "b"), [0.0, 0.25, 1.123456789], [[0, 1], [0.5, 1.5], [1, 2]], [[0, 0], [1, 1], [0, 0]]
    )
    back = conversions.msg_to_trajectory(conversions.trajectory_to_msg(trajectory))
    assert back.joint_names == ("a", "b") and back.accelerations is None
    np.testing.assert_allclose(back.times_s, trajectory.times_s, atol=1e-9)
    np.testing.assert_allclose(back.positions, trajectory.positions)
    np.testing.assert_allclose(back.velocities, trajectory.velocities)


def test_points_without_velocities_give_a_linear_trajectory():
    msg = JointTrajectoryMsg(joint_names=["a"])
    msg.points = [JointTrajectoryPoint(positions=[0.0]), JointTrajectoryPoint(positions=[1.0])]
    msg.points[1].time_from_start.sec = 2
    trajectory = conversions.msg_to_trajectory(msg)
    assert trajectory.velocities is None and trajectory.duration_s == pytest.approx(2.0)


def test_malformed_messages_are_named():
    with pytest.raises(TrajectoryError, match="no points"):
        conversions.msg_to_trajectory(JointTrajectoryMsg(joint_names=["a"]))
    msg = JointTrajectoryMsg(joint_names=["a", "b"], points=[JointTrajectoryPoint(positions=[0.0])])
    with pytest.raises(TrajectoryError, match="1 positions for 2 joints"):
        conversions.msg_to_trajectory(msg)


def test_joint_state_round_trips():
    state = JointState(("a", "b"), [0.1, 0.2], [1.0, 2.0], None)
    msg = conversions.joint_state_to_msg(state, 12.5)
    assert msg.header.stamp.sec == 12 and msg.header.stamp.nanosec == 500_000_000
    assert len(msg.effort) == 0
    back = conversions.msg_to_joint_state(msg)
    assert back.names == ("a", "b")
    np.testing.assert_allclose(back.positions, [0.1, 0.2])
    np.testing.assert_allclose(back.velocities, [1.0, 2.0])


def test_joint_tolerances_resolve_as_joint_trajectory_controller_reads_them():
    from control_msgs.msg import JointTolerance

    names = ("a", "b", "c")
    given = [JointTolerance(name="b", position=0.1), JointTolerance(name="c", position=-1.0),
             JointTolerance(name="a", position=0.0)]  # fmt: skip
    np.testing.assert_allclose(conversions.resolve_joint_tolerances(given, names, 0.02), [0.02, 0.1, np.inf])
    with pytest.raises(KeyError, match="unknown joint 'd'"):
        conversions.resolve_joint_tolerances([JointTolerance(name="d", position=0.1)], names, 0.02)
    with pytest.raises(ValueError, match="only > 0, 0 or -1"):
        conversions.resolve_joint_tolerances([JointTolerance(name="a", position=-0.5)], names, 0.02)


def test_robopin_reasons_map_onto_follow_joint_trajectory_error_codes():
    from control_msgs.action import FollowJointTrajectory

    from robopin.robots.errors import Reason

    codes, code = FollowJointTrajectory.Result, conversions.follow_joint_trajectory_error_code
    assert code(Reason.COMPLETED, started=True) == codes.SUCCESSFUL
    assert code(Reason.JOINT_NAMES, started=False) == codes.INVALID_JOINTS
    assert code(Reason.JOINT_LIMIT, started=False) == codes.INVALID_GOAL
    assert code(Reason.GOAL_TOLERANCE, started=True) == codes.GOAL_TOLERANCE_VIOLATED
    assert code(Reason.STALE_STATE, started=True) == codes.PATH_TOLERANCE_VIOLATED
    result = conversions.follow_joint_trajectory_result(codes.INVALID_GOAL, "joint_limit", "j1 beyond 2.9 rad")
    assert result.error_code == codes.INVALID_GOAL and result.error_string == "joint_limit: j1 beyond 2.9 rad"
