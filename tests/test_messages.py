"""robopin.messages: one set of stamp, header, pose and transform conversions for rclpy's and rosbags' messages."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from robopin import messages
from robopin.geometry.transforms import rpy_to_matrix

rosbags_typesys = pytest.importorskip("rosbags.typesys")


@pytest.fixture(scope="module")
def typestore():
    return rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_JAZZY)


def _pose(x=0.1, y=-0.2, z=0.3):
    T = np.eye(4)
    T[:3, :3] = rpy_to_matrix(0.3, -0.2, 1.1)
    T[:3, 3] = [x, y, z]
    return T


def test_time_splits_as_rclpy_does_and_reads_back(typestore):
    types = typestore.types
    stamp = messages.time_msg(types, 12.5)
    assert (stamp.sec, stamp.nanosec) == (12, 500_000_000)
    assert messages.stamp_to_seconds(stamp) == 12.5
    exact = messages.time_msg_ns(types, 3 * 10**9 + 7)
    assert (exact.sec, exact.nanosec) == (3, 7)
    duration = messages.duration_msg(types, -0.25)
    assert (duration.sec, duration.nanosec) == (-1, 750_000_000)


@pytest.mark.parametrize(("seconds", "match"), [(-1.0, "non-negative"), (math.nan, "finite"), (math.inf, "finite")])
def test_a_time_that_is_not_one_is_refused(typestore, seconds, match):
    with pytest.raises(ValueError, match=match):
        messages.time_msg(typestore.types, seconds)


def test_pose_and_transform_round_trip_through_serialized_bag_messages(typestore):
    types = typestore.types
    T = _pose()
    for build, read, msgtype in ((messages.pose_msg, messages.pose_to_matrix, "geometry_msgs/msg/Pose"),
                                 (messages.transform_msg, messages.transform_to_matrix, "geometry_msgs/msg/Transform")):
        message = build(types, T)
        decoded = typestore.deserialize_cdr(typestore.serialize_cdr(message, msgtype), msgtype)
        np.testing.assert_allclose(read(decoded), T, atol=1e-12)


def test_reading_needs_only_the_field_names():
    q = SimpleNamespace(x=0.0, y=0.0, z=math.sqrt(0.5), w=math.sqrt(0.5))
    pose = SimpleNamespace(position=SimpleNamespace(x=1.0, y=2.0, z=3.0), orientation=q)
    T = messages.pose_to_matrix(pose)
    np.testing.assert_allclose(T[:3, :3], rpy_to_matrix(0, 0, math.pi / 2), atol=1e-12)
    np.testing.assert_allclose(T[:3, 3], [1.0, 2.0, 3.0])
    header = messages.header_msg({"std_msgs/msg/Header": SimpleNamespace,
                                  "builtin_interfaces/msg/Time": SimpleNamespace}, 1.25, "base")
    assert header.frame_id == "base" and messages.stamp_to_seconds(header.stamp) == 1.25
