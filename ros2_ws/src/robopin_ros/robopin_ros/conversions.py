"""Every conversion between ROS messages and robopin core types lives here (one module, by area).

Nodes call these; the core library never sees a message. Areas append their own block below,
headed ``# --- <area> ---``. Node processes start through ``robopin_ros.runtime.run_node``.
"""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3

from robopin.geometry import transforms as _tf

# --- common ---


def stamp_to_seconds(stamp: Time) -> float:
    """Return a builtin_interfaces/Time as float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_stamp(seconds: float) -> Time:
    """Return float seconds as builtin_interfaces/Time (rounded to the nanosecond)."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"a ROS time must be finite and non-negative, got {seconds!r}")
    total_ns = round(seconds * 1e9)
    return Time(sec=total_ns // 1_000_000_000, nanosec=total_ns % 1_000_000_000)


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
    qx, qy, qz, qw = _tf.matrix_to_quaternion(T[:3, :3])
    return Pose(position=vector_to_point(T[:3, 3]), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw))


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """Return geometry_msgs/Pose as a 4x4 homogeneous transform."""
    q = pose.orientation
    R = _tf.quaternion_to_matrix([q.x, q.y, q.z, q.w])
    return _tf.make_transform(R, point_to_vector(pose.position))
