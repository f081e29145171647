"""Motion conversions: robopin trajectories ↔ trajectory_msgs/JointTrajectory, Target3D points."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from robopin_interfaces.msg import Target3D
from robopin_ros import conversions
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

from robopin.motion.types import JointTrajectory

pytestmark = pytest.mark.ros


def test_trajectory_round_trip_through_serialization():
    rng = np.random.default_rng(0)
    times = np.array([0.0, 0.25, 1.0, 2.123456789])
    trajectory = JointTrajectory(("j1", "j2", "j3"), times, rng.normal(size=(4, 3)), rng.normal(size=(4, 3)),
                                 rng.normal(size=(4, 3)))
    msg = conversions.motion_trajectory_to_msg(trajectory)
    assert msg.points[3].time_from_start.sec == 2 and msg.points[3].time_from_start.nanosec == 123456789
    back = conversions.msg_to_motion_trajectory(deserialize_message(serialize_message(msg), JointTrajectoryMsg))
    assert back.joint_names == trajectory.joint_names
    np.testing.assert_allclose(back.times_s, times, atol=1e-9)
    np.testing.assert_allclose(back.positions, trajectory.positions)
    np.testing.assert_allclose(back.velocities, trajectory.velocities)


def test_trajectory_without_rates_gets_zeros():
    msg = conversions.motion_trajectory_to_msg(
        JointTrajectory(("a",), [0.0, 1.0], [[0.0], [1.0]], np.zeros((2, 1)), np.zeros((2, 1))))
    for point in msg.points:
        point.velocities = []
        point.accelerations = []
    back = conversions.msg_to_motion_trajectory(msg)
    assert np.all(back.velocities == 0.0) and back.accelerations.shape == (2, 1)


def test_target_point_and_normal():
    target = Target3D()
    target.point = conversions.vector_to_point([0.4, 0.1, 0.05])
    point, normal = conversions.target3d_to_pick_point(target)
    np.testing.assert_allclose(point, [0.4, 0.1, 0.05])
    assert normal is None  # a zero normal means "not estimated"
    target.normal = conversions.vector_to_vector3([0.0, 0.0, 2.0])
    _, normal = conversions.target3d_to_pick_point(target)
    np.testing.assert_allclose(normal, [0.0, 0.0, 1.0])
