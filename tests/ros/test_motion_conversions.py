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


def test_markers_read_back_as_targets():
    # The trial runner only sees the marker topic; what it reads back must be what projection drew.
    from builtin_interfaces.msg import Time
    from visualization_msgs.msg import MarkerArray

    from robopin.geometry import RefusalReason
    from robopin.geometry.projection import Target

    pick = Target("obj_02", "yellow duck", "static", 0, 320.0, 200.0, point=np.array([0.4, -0.1, 0.03]),
                  normal=np.array([0.0, 0.0, 1.0]), valid=True)
    refused = Target("space_01", "free area", "wrist", 1, 10.0, 470.0, point=np.array([0.5, 0.1, 0.2]),
                     valid=False, reason=RefusalReason.DEPTH_EDGE_AMBIGUOUS)
    holeless = Target("obj_09", "never projected", "static", 0, 5.0, 5.0)  # NaN point: not drawn
    msg = conversions.targets_to_marker_array([pick, refused, holeless], "base", Time())
    msg = deserialize_message(serialize_message(msg), MarkerArray)
    read = conversions.marker_array_to_targets(msg)
    assert [t["id"] for t in read] == ["obj_02", "space_01"]
    assert read[0]["name"] == "yellow duck" and read[0]["valid"] is True
    assert read[0]["point"] == pytest.approx([0.4, -0.1, 0.03], abs=1e-9)
    assert read[1]["valid"] is False and read[1]["reason"] == "depth_edge_ambiguous"
    assert read[1]["point"] == pytest.approx([0.5, 0.1, 0.2], abs=1e-9)
    assert read[0]["frame"] == "base"
