"""Geometry: camera models, rigid transforms, robust depth and the 2D-point-to-3D-target projection.

Poses are 4x4 float64 matrices ``T_a_b`` (maps frame ``b`` into frame ``a``); quaternions are
``[x, y, z, w]``; image points are pixels of the original image with pixel centres at ``i + 0.5``.
"""

from robopin.geometry.camera_model import DISTORTION_MODELS, CameraModel, CameraModelError, pixel_rays
from robopin.geometry.crossview import (
    CROSS_VIEW_RULES,
    CrossViewConfig,
    CrossViewError,
    CrossViewVerdict,
    ViewDepth,
    same_object,
)
from robopin.geometry.depth import (
    DepthConfig,
    DepthError,
    DepthSample,
    align_depth_to_color,
    depth_image_to_meters,
    robust_depth,
)
from robopin.geometry.extrinsics import (
    CalibrationError,
    CameraMount,
    PoseBuffer,
    StalePoseError,
    mount_from_dict,
)
from robopin.geometry.pointcloud import PointCloud, depth_to_point_cloud, voxel_downsample
from robopin.geometry.projection import (
    FUSION_POLICIES,
    PointRequest,
    ProjectionConfig,
    ProjectionError,
    Projector,
    Target,
    ViewConfig,
    ViewData,
    fall_back_to_other_views,
    fuse_targets,
)
from robopin.geometry.reasons import RefusalReason
from robopin.geometry.surface import ObjectExtent, SurfaceNormal, estimate_normal, estimate_object_extent
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
from robopin.geometry.workspace import WorkspaceBox, WorkspaceError

__all__ = [
    "CROSS_VIEW_RULES",
    "DISTORTION_MODELS",
    "FUSION_POLICIES",
    "CalibrationError",
    "CameraModel",
    "CameraModelError",
    "CameraMount",
    "CrossViewConfig",
    "CrossViewError",
    "CrossViewVerdict",
    "DepthConfig",
    "DepthError",
    "DepthSample",
    "ObjectExtent",
    "PointCloud",
    "PointRequest",
    "PoseBuffer",
    "ProjectionConfig",
    "ProjectionError",
    "Projector",
    "RefusalReason",
    "StalePoseError",
    "SurfaceNormal",
    "Target",
    "TransformError",
    "ViewConfig",
    "ViewData",
    "ViewDepth",
    "WorkspaceBox",
    "WorkspaceError",
    "align_depth_to_color",
    "as_transform",
    "depth_image_to_meters",
    "depth_to_point_cloud",
    "estimate_normal",
    "estimate_object_extent",
    "fall_back_to_other_views",
    "fuse_targets",
    "interpolate_transforms",
    "invert",
    "make_transform",
    "matrix_to_quaternion",
    "matrix_to_rpy",
    "mount_from_dict",
    "pixel_rays",
    "quaternion_to_matrix",
    "robust_depth",
    "rotation_angle",
    "rpy_to_matrix",
    "same_object",
    "transform_from_xyz_quaternion",
    "transform_from_xyz_rpy",
    "transform_points",
    "transform_to_xyz_quaternion",
    "transform_vectors",
    "voxel_downsample",
]
