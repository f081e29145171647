"""Geometry: camera models, rigid transforms, robust depth and the 2D-point-to-3D-target projection.

Poses are 4x4 float64 matrices ``T_a_b`` (maps frame ``b`` into frame ``a``); quaternions are
``[x, y, z, w]``; image points are pixels of the original image with pixel centres at ``i + 0.5``.
"""

from robopin.geometry.camera_model import DISTORTION_MODELS, CameraModel, CameraModelError
from robopin.geometry.transforms import (
    TransformError,
    as_transform,
    interpolate_transforms,
    invert,
    make_transform,
    matrix_to_quaternion,
    matrix_to_rpy,
    quaternion_to_matrix,
    rotation_angle,
    rpy_to_matrix,
    transform_from_xyz_quaternion,
    transform_from_xyz_rpy,
    transform_points,
    transform_to_xyz_quaternion,
    transform_vectors,
)

__all__ = [
    "DISTORTION_MODELS",
    "CameraModel",
    "CameraModelError",
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
