"""Stamps, durations, headers, points and poses: the builtin_interfaces, std_msgs and geometry_msgs pieces that
every other conversion module uses.

Seconds become nanoseconds by rounding to the nearest one (``round``: halves to even), split as
rclpy's ``Duration.to_msg`` splits them (rclpy duration.py: ``divmod(nanoseconds, 10**9)``), so
``0 <= nanosec < 10**9`` and a negative duration has a negative ``sec``.
"""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
from std_msgs.msg import Header

from robopin.geometry import transforms

_NS_PER_S = 1_000_000_000


def _split_nanoseconds(seconds: float, kind: str) -> tuple[int, int]:
    if not math.isfinite(seconds):
        raise ValueError(f"a ROS {kind} must be finite, got {seconds!r}")
    return divmod(round(seconds * _NS_PER_S), _NS_PER_S)


def seconds_to_duration(seconds: float) -> Duration:
    """Return float seconds as builtin_interfaces/Duration (rounded to the nanosecond; see the module docstring)."""
    sec, nanosec = _split_nanoseconds(float(seconds), "duration")
    return Duration(sec=sec, nanosec=nanosec)


def duration_to_seconds(duration: Duration) -> float:
    """Return a builtin_interfaces/Duration as float seconds."""
    return duration.sec + duration.nanosec * 1e-9


def stamp_to_seconds(stamp: Time) -> float:
    """Return a builtin_interfaces/Time as float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_stamp(seconds: float) -> Time:
    """Return float seconds as builtin_interfaces/Time (rounded to the nanosecond, as durations are)."""
    if seconds < 0:
        raise ValueError(f"a ROS time must be finite and non-negative, got {seconds!r}")
    sec, nanosec = _split_nanoseconds(float(seconds), "time")
    return Time(sec=sec, nanosec=nanosec)


def make_header(stamp_s: float, frame_id: str):
    """Return a std_msgs/Header for ``stamp_s`` (float seconds) and ``frame_id``."""
    return Header(stamp=seconds_to_stamp(stamp_s), frame_id=frame_id)


def vector_to_point(xyz) -> Point:
    """Return a 3-vector as geometry_msgs/Point."""
    x, y, z = (float(c) for c in xyz)
    return Point(x=x, y=y, z=z)


def vector_to_vector3(xyz) -> Vector3:
    """Return a 3-vector as geometry_msgs/Vector3."""
    x, y, z = (float(c) for c in xyz)
    return Vector3(x=x, y=y, z=z)


def point_to_vector(point: Point | Vector3) -> np.ndarray:
    """Return a geometry_msgs Point or Vector3 as a float64 3-vector."""
    return np.array([point.x, point.y, point.z], dtype=np.float64)


def matrix_to_pose(T: np.ndarray) -> Pose:
    """Return a 4x4 homogeneous transform as geometry_msgs/Pose."""
    T = np.asarray(T, dtype=np.float64)
    qx, qy, qz, qw = transforms.matrix_to_quaternion(T[:3, :3])
    return Pose(position=vector_to_point(T[:3, 3]), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw))


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """Return geometry_msgs/Pose as a 4x4 homogeneous transform."""
    q = pose.orientation
    R = transforms.quaternion_to_matrix([q.x, q.y, q.z, q.w])
    return transforms.make_transform(R, point_to_vector(pose.position))


def pose_stamped_to_seconds_and_matrix(msg) -> tuple[float, np.ndarray]:
    """Return (stamp seconds, 4x4 T_frame_child) of a geometry_msgs/PoseStamped."""
    return stamp_to_seconds(msg.header.stamp), pose_to_matrix(msg.pose)
