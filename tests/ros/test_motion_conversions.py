"""Motion conversions: planned trajectories ↔ trajectory_msgs/JointTrajectory, durations, Target3D points."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from robopin_interfaces.msg import Target3D
from robopin_ros import conversions
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

from robopin.motion.types import JointTrajectory
from robopin.robots.errors import TrajectoryError

pytestmark = pytest.mark.ros


def test_trajectory_round_trip_through_serialization():
    rng = np.random.default_rng(0)
    times = np.array([0.0, 0.25, 1.0, 2.123456789])
    trajectory = JointTrajectory(("j1", "j2", "j3"), times, rng.normal(size=(4, 3)), rng.normal(size=(4, 3)),
                                 rng.normal(size=(4, 3)))
    msg = conversions.trajectory_to_msg(trajectory)
    assert msg.points[3].time_from_start.sec == 2 and msg.points[3].time_from_start.nanosec == 123456789
    assert msg.header.frame_id == "base"
    back = conversions.msg_to_trajectory(deserialize_message(serialize_message(msg), JointTrajectoryMsg))
    assert back.joint_names == trajectory.joint_names
    np.testing.assert_allclose(back.times_s, times, atol=1e-9)
    np.testing.assert_allclose(back.positions, trajectory.positions)
    np.testing.assert_allclose(back.velocities, trajectory.velocities)
    np.testing.assert_allclose(back.accelerations, trajectory.accelerations)


def test_trajectory_without_rates_keeps_none_and_partial_rates_are_refused():
    # Empty rates mean "interpolate linearly" to joint_trajectory_controller; zeros would stop at every point.
    msg = conversions.trajectory_to_msg(
        JointTrajectory(("a",), [0.0, 1.0], [[0.0], [1.0]], np.zeros((2, 1)), np.zeros((2, 1))))
    for point in msg.points:
        point.velocities = []
        point.accelerations = []
    back = conversions.msg_to_trajectory(msg)
    assert back.velocities is None and back.accelerations is None
    np.testing.assert_allclose(back.sample(0.5)[1], [1.0])
    msg.points[1].velocities = [0.0]
    with pytest.raises(TrajectoryError, match="some points give velocities"):
        conversions.msg_to_trajectory(msg)
    msg.points[0].velocities = [0.0, 1.0]
    with pytest.raises(TrajectoryError, match="point 0 has 2 velocities for 1 joints"):
        conversions.msg_to_trajectory(msg)


@pytest.mark.parametrize(("seconds", "sec", "nanosec"), [
    (2.123456789, 2, 123_456_789),
    (0.9999999999, 1, 0),  # the nearest nanosecond, carried into sec
    (2.5e-9, 0, 2),  # halves to even, as round() does
    (-0.25, -1, 750_000_000),  # nanosec stays in [0, 1e9), as rclpy splits a negative duration
])
def test_durations_round_to_the_nearest_nanosecond_as_rclpy_reads_them(seconds, sec, nanosec):
    from rclpy.duration import Duration

    msg = conversions.seconds_to_duration(seconds)
    assert (msg.sec, msg.nanosec) == (sec, nanosec)
    assert Duration.from_msg(msg).nanoseconds == sec * 1_000_000_000 + nanosec
    assert Duration(nanoseconds=sec * 1_000_000_000 + nanosec).to_msg() == msg
    assert conversions.duration_to_seconds(msg) == pytest.approx(seconds, abs=1e-9)


def test_non_finite_durations_are_refused():
    with pytest.raises(ValueError, match="finite"):
        conversions.seconds_to_duration(float("nan"))


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
