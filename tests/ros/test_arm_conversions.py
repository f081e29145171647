"""Arm message conversions: trajectory_msgs/JointTrajectory ⇄ the arm layer's trajectory, JointState."""

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
    back = conversions.msg_to_arm_trajectory(conversions.arm_trajectory_to_msg(trajectory))
    assert back.joint_names == ("a", "b")
    np.testing.assert_allclose(back.times_s, trajectory.times_s, atol=1e-9)
    np.testing.assert_allclose(back.positions, trajectory.positions)
    np.testing.assert_allclose(back.velocities, trajectory.velocities)


def test_points_without_velocities_give_a_linear_trajectory():
    msg = JointTrajectoryMsg(joint_names=["a"])
    msg.points = [JointTrajectoryPoint(positions=[0.0]), JointTrajectoryPoint(positions=[1.0])]
    msg.points[1].time_from_start.sec = 2
    trajectory = conversions.msg_to_arm_trajectory(msg)
    assert trajectory.velocities is None and trajectory.duration_s == pytest.approx(2.0)


def test_malformed_messages_are_named():
    with pytest.raises(TrajectoryError, match="no points"):
        conversions.msg_to_arm_trajectory(JointTrajectoryMsg(joint_names=["a"]))
    msg = JointTrajectoryMsg(joint_names=["a", "b"], points=[JointTrajectoryPoint(positions=[0.0])])
    with pytest.raises(TrajectoryError, match="1 positions for 2 joints"):
        conversions.msg_to_arm_trajectory(msg)


def test_joint_state_round_trips():
    state = JointState(("a", "b"), [0.1, 0.2], [1.0, 2.0], None)
    msg = conversions.joint_state_to_msg(state, 12.5)
    assert msg.header.stamp.sec == 12 and msg.header.stamp.nanosec == 500_000_000
    assert len(msg.effort) == 0
    back = conversions.msg_to_joint_state(msg)
    assert back.names == ("a", "b")
    np.testing.assert_allclose(back.positions, [0.1, 0.2])
    np.testing.assert_allclose(back.velocities, [1.0, 2.0])
