"""Rigid transforms as 4x4 float64 homogeneous matrices, and the rotation conversions around them.

Conventions used everywhere in robopin:

* A pose is a 4x4 ``numpy.float64`` matrix named ``T_a_b``: it maps coordinates expressed in frame ``b``
  into frame ``a`` (``p_a = T_a_b @ p_b``), so ``T_a_c = T_a_b @ T_b_c`` chains left to right.
* Quaternions are ``[x, y, z, w]`` (ROS order) unless a call says ``order="wxyz"`` (scalar first, as cuRobo
  writes them). Returned quaternions have ``w >= 0``.
* Roll-pitch-yaw are fixed-axis X-Y-Z angles in radians, ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``
  (the ROS / URDF ``rpy`` convention).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "QUATERNION_ORDERS",
    "TransformError",
    "as_transform",
    "interpolate_transforms",
    "invert",
    "make_transform",
    "matrix_to_quaternion",
    "matrix_to_rpy",
    "quaternion_to_matrix",
    "rotation_angle",
    "rpy_to_matrix",
    "transform_from_xyz_quaternion",
    "transform_from_xyz_rpy",
    "transform_points",
    "transform_to_xyz_quaternion",
    "transform_vectors",
]

# Tolerances for accepting a matrix as a rotation: loose enough for float32 round-trips through
# ROS messages and YAML, tight enough to catch a scaled or sheared matrix.
_ORTHONORMAL_TOL = 1e-5

QUATERNION_ORDERS = ("xyzw", "wxyz")
"""Component orders a quaternion may be given in: ``xyzw`` (ROS, robopin's default) or ``wxyz`` (scalar first)."""


class TransformError(ValueError):
    """A matrix, quaternion or angle set that is not a valid rigid transform or rotation."""


def _finite(a: ArrayLike, shape: tuple[int, ...], name: str, what: str) -> NDArray[np.float64]:
    a = np.asarray(a, dtype=np.float64)
    if a.shape != shape:
        raise TransformError(f"{name} must be {what}, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise TransformError(f"{name} contains non-finite values: {a.tolist()}")
    return a


def _as_rotation(R: ArrayLike, name: str = "R") -> NDArray[np.float64]:
    R = _finite(R, (3, 3), name, "a 3x3 rotation matrix")
    err = np.abs(R @ R.T - np.eye(3)).max()
    if err > _ORTHONORMAL_TOL:
        raise TransformError(f"{name} is not orthonormal (max |R R^T - I| = {err:.3g}, expected < {_ORTHONORMAL_TOL})")
    det = np.linalg.det(R)
    if det < 0:
        raise TransformError(f"{name} is a reflection (det = {det:.6f}), expected a proper rotation (det = +1)")
    return R


def as_transform(T: ArrayLike, name: str = "T") -> NDArray[np.float64]:
    """Return ``T`` as a validated 4x4 float64 rigid transform (raises :class:`TransformError`)."""
    T = _finite(T, (4, 4), name, "a 4x4 homogeneous matrix")
    if not np.allclose(T[3], (0.0, 0.0, 0.0, 1.0), atol=1e-9):
        raise TransformError(f"{name} bottom row must be [0, 0, 0, 1], got {T[3].tolist()}")
    _as_rotation(T[:3, :3], name=f"rotation part of {name}")
    return T


def make_transform(R: ArrayLike | None = None, t: ArrayLike | None = None) -> NDArray[np.float64]:
    """Build ``T`` from a 3x3 rotation ``R`` (default identity) and a translation ``t`` in metres."""
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = _as_rotation(R)
    if t is not None:
        t = np.asarray(t, dtype=np.float64).reshape(-1)
        if t.shape != (3,) or not np.all(np.isfinite(t)):
            raise TransformError(f"t must be 3 finite numbers (metres), got {t.tolist()}")
        T[:3, 3] = t
    return T


def invert(T: ArrayLike) -> NDArray[np.float64]:
    """Inverse of a rigid transform (``T_b_a`` from ``T_a_b``), exact for rigid motions."""
    T = np.asarray(T, dtype=np.float64)
    if T.shape != (4, 4):
        raise TransformError(f"T must be a 4x4 homogeneous matrix, got shape {T.shape}")
    R = T[:3, :3]
    out = np.eye(4)
    out[:3, :3] = R.T
    out[:3, 3] = -R.T @ T[:3, 3]
    return out


def transform_points(T: ArrayLike, points: ArrayLike) -> NDArray[np.float64]:
    """Map points (shape ``(3,)`` or ``(N, 3)``) from frame b into frame a with ``T_a_b``."""
    T = np.asarray(T, dtype=np.float64)
    p = np.asarray(points, dtype=np.float64)
    if T.shape != (4, 4):
        raise TransformError(f"T must be a 4x4 homogeneous matrix, got shape {T.shape}")
    if p.shape[-1:] != (3,) or p.ndim > 2:
        raise TransformError(f"points must have shape (3,) or (N, 3), got {p.shape}")
    # np.dot with a contiguous 3x3 is several times faster than ``@`` for tall (N, 3) inputs.
    return np.dot(p, np.ascontiguousarray(T[:3, :3].T)) + T[:3, 3]


def transform_vectors(T: ArrayLike, vectors: ArrayLike) -> NDArray[np.float64]:
    """Rotate directions (normals, axes; shape ``(3,)`` or ``(N, 3)``) by ``T``; translation is ignored."""
    T = np.asarray(T, dtype=np.float64)
    v = np.asarray(vectors, dtype=np.float64)
    if v.shape[-1:] != (3,) or v.ndim > 2:
        raise TransformError(f"vectors must have shape (3,) or (N, 3), got {v.shape}")
    return np.dot(v, np.ascontiguousarray(T[:3, :3].T))


def _check_order(order: str) -> str:
    if order not in QUATERNION_ORDERS:
        raise TransformError(f"quaternion order must be one of {QUATERNION_ORDERS}, got {order!r}")
    return order


def quaternion_to_matrix(q: ArrayLike, order: str = "xyzw") -> NDArray[np.float64]:
    """Rotation matrix from a quaternion ``[x, y, z, w]`` (``order="wxyz"``: ``[w, x, y, z]``); normalised here,
    zero norm is refused."""
    components = ", ".join(_check_order(order))
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    if q.shape != (4,) or not np.all(np.isfinite(q)):
        raise TransformError(f"quaternion must be 4 finite numbers [{components}], got {q.tolist()}")
    n = np.linalg.norm(q)
    if n < 1e-9:
        raise TransformError(f"quaternion {q.tolist()} has zero norm, expected a unit quaternion [{components}]")
    if order == "wxyz":
        w, x, y, z = q / n
    else:
        x, y, z, w = q / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quaternion(R: ArrayLike, order: str = "xyzw") -> NDArray[np.float64]:
    """Quaternion ``[x, y, z, w]`` (``order="wxyz"``: ``[w, x, y, z]``) with ``w >= 0`` from a rotation matrix
    (or the rotation of a 4x4)."""
    _check_order(order)
    R = np.asarray(R, dtype=np.float64)
    if R.shape == (4, 4):
        R = R[:3, :3]
    q = _rotation_to_quaternion(_as_rotation(R))
    return np.roll(q, 1) if order == "wxyz" else q


def _rotation_to_quaternion(R: NDArray[np.float64]) -> NDArray[np.float64]:
    """Unchecked core of :func:`matrix_to_quaternion` for rotations already validated."""
    # Shepperd's method: branch on the largest diagonal term so the square root is never tiny.
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    if trace > 0:
        s = 2.0 * np.sqrt(1.0 + trace)
        q = np.array([(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s])
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = np.array([0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s, (R[2, 1] - R[1, 2]) / s])
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = np.array([(R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s, (R[0, 2] - R[2, 0]) / s])
    else:
        s = 2.0 * np.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = np.array([(R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s, (R[1, 0] - R[0, 1]) / s])
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> NDArray[np.float64]:
    """Rotation ``Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (fixed axes X, Y, Z; radians; URDF convention)."""
    for name, value in (("roll", roll), ("pitch", pitch), ("yaw", yaw)):
        if not np.isfinite(value):
            raise TransformError(f"{name} must be a finite angle in radians, got {value}")
    cr, sr = np.cos(roll), np.sin(roll)
    cp, sp = np.cos(pitch), np.sin(pitch)
    cy, sy = np.cos(yaw), np.sin(yaw)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_to_rpy(R: ArrayLike) -> NDArray[np.float64]:
    """``[roll, pitch, yaw]`` in radians from a rotation (pitch in [-pi/2, pi/2]; at gimbal lock roll = 0)."""
    R = np.asarray(R, dtype=np.float64)
    if R.shape == (4, 4):
        R = R[:3, :3]
    R = _as_rotation(R)
    sp = -R[2, 0]
    pitch = float(np.arcsin(np.clip(sp, -1.0, 1.0)))
    if abs(sp) > 1.0 - 1e-10:
        # Gimbal lock: only yaw - roll (or yaw + roll) is defined; report it all as yaw.
        roll = 0.0
        yaw = float(np.arctan2(-R[0, 1], R[1, 1]))
    else:
        roll = float(np.arctan2(R[2, 1], R[2, 2]))
        yaw = float(np.arctan2(R[1, 0], R[0, 0]))
    return np.array([roll, pitch, yaw])


def transform_from_xyz_quaternion(xyz: Sequence[float] | ArrayLike, quaternion: ArrayLike) -> NDArray[np.float64]:
    """``T`` from a translation in metres and a quaternion ``[x, y, z, w]``."""
    return make_transform(quaternion_to_matrix(quaternion), xyz)


def transform_to_xyz_quaternion(T: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(xyz, [x, y, z, w])`` of a rigid transform."""
    T = as_transform(T)
    return T[:3, 3].copy(), matrix_to_quaternion(T[:3, :3])


def transform_from_xyz_rpy(xyz: Sequence[float] | ArrayLike, rpy: Sequence[float] | ArrayLike) -> NDArray[np.float64]:
    """``T`` from a translation in metres and ``[roll, pitch, yaw]`` in radians (URDF ``origin``)."""
    r = np.asarray(rpy, dtype=np.float64).reshape(-1)
    if r.shape != (3,):
        raise TransformError(f"rpy must be 3 angles [roll, pitch, yaw] in radians, got {r.tolist()}")
    return make_transform(rpy_to_matrix(*r), xyz)


def rotation_angle(R_a: ArrayLike, R_b: ArrayLike | None = None) -> float:
    """Angle in radians of the rotation ``R_a`` (or of the relative rotation between ``R_a`` and ``R_b``)."""
    A = np.asarray(R_a, dtype=np.float64)
    A = A[:3, :3] if A.shape == (4, 4) else A
    if R_b is not None:
        B = np.asarray(R_b, dtype=np.float64)
        B = B[:3, :3] if B.shape == (4, 4) else B
        A = A.T @ B
    # arccos loses precision near 0; the quaternion form keeps it.
    q = matrix_to_quaternion(A)
    return float(2.0 * np.arctan2(np.linalg.norm(q[:3]), abs(q[3])))


def _slerp(q0: NDArray[np.float64], q1: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # take the short way round
        q1, dot = -q1, -dot
    if dot > 0.9995:  # nearly identical: linear interpolation is exact to float precision
        q = q0 + alpha * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    s = np.sin(theta)
    return (np.sin((1 - alpha) * theta) * q0 + np.sin(alpha * theta) * q1) / s


def interpolate_transforms(T0: ArrayLike, T1: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """Pose ``alpha`` (0..1) of the way from ``T0`` to ``T1``: linear in translation, slerp in rotation."""
    if not np.isfinite(alpha):
        raise TransformError(f"alpha must be a finite fraction, got {alpha}")
    return _interpolate_unchecked(as_transform(T0, "T0"), as_transform(T1, "T1"), float(alpha))


def _interpolate_unchecked(A: NDArray[np.float64], B: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """:func:`interpolate_transforms` for transforms already validated (the pose buffer's hot path)."""
    q = _slerp(_rotation_to_quaternion(A[:3, :3]), _rotation_to_quaternion(B[:3, :3]), alpha)
    out = np.eye(4)
    out[:3, :3] = quaternion_to_matrix(q)
    out[:3, 3] = (1.0 - alpha) * A[:3, 3] + alpha * B[:3, 3]
    return out
