"""Stamps, headers, points, poses and transforms ⇄ numpy, for rclpy's messages and rosbags' alike.

Both libraries give a message the same field names, so one definition serves both. Reading takes any
object with the message's fields (an rclpy message, a message rosbags decoded, a test's namespace).
Building takes ``types``, a mapping from a type name (``"geometry_msgs/msg/Pose"``) to its class: a
rosbags typestore's ``types``, or ``robopin_ros.conversions.common.RCLPY_TYPES`` for rclpy's classes.
No rclpy here: the core reads and writes bags without a ROS installation.

Seconds become nanoseconds by rounding to the nearest one (``round``: halves to even), split as
rclpy's ``Duration.to_msg`` splits them (rclpy duration.py: ``divmod(nanoseconds, 10**9)``), so
``0 <= nanosec < 10**9`` and a negative duration has a negative ``sec``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from robopin.geometry import transforms

__all__ = [
    "NS_PER_S",
    "duration_msg",
    "header_msg",
    "point_msg",
    "point_to_vector",
    "pose_msg",
    "pose_to_matrix",
    "seconds_to_nanoseconds",
    "stamp_to_seconds",
    "time_msg",
    "time_msg_ns",
    "transform_msg",
    "transform_to_matrix",
    "vector3_msg",
]

NS_PER_S = 1_000_000_000

MessageTypes = Mapping[str, Any]
"""Type name (``"std_msgs/msg/Header"``) → message class."""


def seconds_to_nanoseconds(seconds: float, kind: str = "time") -> int:
    """Float seconds as whole nanoseconds (see the module docstring); a ``time`` must also be non-negative."""
    seconds = float(seconds)
    if kind == "time" and seconds < 0:
        raise ValueError(f"a ROS time must be finite and non-negative, got {seconds!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"a ROS {kind} must be finite, got {seconds!r}")
    return round(seconds * NS_PER_S)


def stamp_to_seconds(stamp: Any) -> float:
    """A builtin_interfaces Time or Duration as float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def time_msg_ns(types: MessageTypes, stamp_ns: int) -> Any:
    """builtin_interfaces/Time of whole nanoseconds."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def time_msg(types: MessageTypes, seconds: float) -> Any:
    """builtin_interfaces/Time of float seconds (rounded to the nanosecond)."""
    return time_msg_ns(types, seconds_to_nanoseconds(seconds, "time"))


def duration_msg(types: MessageTypes, seconds: float) -> Any:
    """builtin_interfaces/Duration of float seconds (rounded to the nanosecond; negative allowed)."""
    sec, nanosec = divmod(seconds_to_nanoseconds(seconds, "duration"), NS_PER_S)
    return types["builtin_interfaces/msg/Duration"](sec=sec, nanosec=nanosec)


def header_msg(types: MessageTypes, stamp_s: float, frame_id: str) -> Any:
    """std_msgs/Header stamped ``stamp_s`` (float seconds) in ``frame_id``."""
    return types["std_msgs/msg/Header"](stamp=time_msg(types, stamp_s), frame_id=frame_id)


def point_msg(types: MessageTypes, xyz: Any) -> Any:
    """geometry_msgs/Point of a 3-vector."""
    x, y, z = (float(c) for c in xyz)
    return types["geometry_msgs/msg/Point"](x=x, y=y, z=z)


def vector3_msg(types: MessageTypes, xyz: Any) -> Any:
    """geometry_msgs/Vector3 of a 3-vector."""
    x, y, z = (float(c) for c in xyz)
    return types["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)


def point_to_vector(point: Any) -> np.ndarray:
    """A geometry_msgs Point or Vector3 as a float64 3-vector."""
    return np.array([point.x, point.y, point.z], dtype=np.float64)


def _quaternion_msg(types: MessageTypes, T: np.ndarray) -> Any:
    qx, qy, qz, qw = (float(c) for c in transforms.matrix_to_quaternion(T[:3, :3]))
    return types["geometry_msgs/msg/Quaternion"](x=qx, y=qy, z=qz, w=qw)


def pose_msg(types: MessageTypes, T: Any) -> Any:
    """geometry_msgs/Pose of a 4x4 homogeneous transform."""
    T = np.asarray(T, dtype=np.float64)
    return types["geometry_msgs/msg/Pose"](position=point_msg(types, T[:3, 3]), orientation=_quaternion_msg(types, T))


def transform_msg(types: MessageTypes, T: Any) -> Any:
    """geometry_msgs/Transform of a 4x4 homogeneous transform."""
    T = np.asarray(T, dtype=np.float64)
    return types["geometry_msgs/msg/Transform"](translation=vector3_msg(types, T[:3, 3]),
                                                rotation=_quaternion_msg(types, T))


def _matrix(translation: Any, rotation: Any) -> np.ndarray:
    R = transforms.quaternion_to_matrix([rotation.x, rotation.y, rotation.z, rotation.w])
    return transforms.make_transform(R, point_to_vector(translation))


def pose_to_matrix(pose: Any) -> np.ndarray:
    """A geometry_msgs/Pose as a 4x4 homogeneous transform."""
    return _matrix(pose.position, pose.orientation)


def transform_to_matrix(transform: Any) -> np.ndarray:
    """A geometry_msgs/Transform as a 4x4 homogeneous transform."""
    return _matrix(transform.translation, transform.rotation)
