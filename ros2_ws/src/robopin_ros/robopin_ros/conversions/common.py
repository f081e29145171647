"""Stamps, durations, headers, points and poses: the builtin_interfaces, std_msgs and geometry_msgs pieces that
every other conversion module uses.

The conversions themselves are :mod:`robopin.messages` (one definition for rclpy's messages and the ones
rosbags reads and writes); here they are bound to rclpy's classes through :data:`RCLPY_TYPES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Pose, Vector3

from robopin import messages


class _RclpyTypes(Mapping[str, Any]):
    """``"pkg/msg/Name"`` → the rclpy message class ``pkg.msg.Name`` (imported on first use)."""

    def __init__(self) -> None:
        self._classes: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        found = self._classes.get(name)
        if found is None:
            package, kind, class_name = name.split("/")
            try:
                found = getattr(importlib.import_module(f"{package}.{kind}"), class_name)
            except (ImportError, AttributeError) as error:
                raise KeyError(name) from error
            self._classes[name] = found
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)


RCLPY_TYPES: Mapping[str, Any] = _RclpyTypes()
"""The ``types`` argument of :mod:`robopin.messages`'s builders for rclpy messages."""


def seconds_to_duration(seconds: float) -> Duration:
    """Return float seconds as builtin_interfaces/Duration (rounded to the nanosecond; see robopin.messages)."""
    return messages.duration_msg(RCLPY_TYPES, seconds)


def duration_to_seconds(duration: Duration) -> float:
    """Return a builtin_interfaces/Duration as float seconds."""
    return messages.stamp_to_seconds(duration)


def stamp_to_seconds(stamp: Time) -> float:
    """Return a builtin_interfaces/Time as float seconds."""
    return messages.stamp_to_seconds(stamp)


def seconds_to_stamp(seconds: float) -> Time:
    """Return float seconds as builtin_interfaces/Time (rounded to the nanosecond, as durations are)."""
    return messages.time_msg(RCLPY_TYPES, seconds)


def make_header(stamp_s: float, frame_id: str):
    """Return a std_msgs/Header for ``stamp_s`` (float seconds) and ``frame_id``."""
    return messages.header_msg(RCLPY_TYPES, stamp_s, frame_id)


def vector_to_point(xyz) -> Point:
    """Return a 3-vector as geometry_msgs/Point."""
    return messages.point_msg(RCLPY_TYPES, xyz)


def vector_to_vector3(xyz) -> Vector3:
    """Return a 3-vector as geometry_msgs/Vector3."""
    return messages.vector3_msg(RCLPY_TYPES, xyz)


def point_to_vector(point: Point | Vector3) -> np.ndarray:
    """Return a geometry_msgs Point or Vector3 as a float64 3-vector."""
    return messages.point_to_vector(point)


def matrix_to_pose(T: np.ndarray) -> Pose:
    """Return a 4x4 homogeneous transform as geometry_msgs/Pose."""
    return messages.pose_msg(RCLPY_TYPES, T)


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """Return geometry_msgs/Pose as a 4x4 homogeneous transform."""
    return messages.pose_to_matrix(pose)


def pose_stamped_to_seconds_and_matrix(msg) -> tuple[float, np.ndarray]:
    """Return (stamp seconds, 4x4 T_frame_child) of a geometry_msgs/PoseStamped."""
    return messages.stamp_to_seconds(msg.header.stamp), messages.pose_to_matrix(msg.pose)
