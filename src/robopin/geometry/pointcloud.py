"""A frame's depth as a point cloud in the base frame, cropped to the workspace and voxel-downsampled.

This feeds the motion planner's collision world, so it favours speed: the per-pixel rays of a camera
are computed once and cached, and downsampling keeps one centroid per occupied voxel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.geometry.camera_model import CameraModel, pixel_rays
from robopin.geometry.workspace import WorkspaceBox

__all__ = ["PointCloud", "depth_to_point_cloud", "pixel_rays", "voxel_downsample"]


@dataclass(frozen=True)
class PointCloud:
    """Points ``(N, 3)`` float32 in ``frame``; ``colors`` ``(N, 3)`` uint8 RGB or None."""

    points: NDArray[np.float32]
    colors: NDArray[np.uint8] | None = None
    frame: str = "base"

    def __len__(self) -> int:
        return len(self.points)


def voxel_downsample(
    points: ArrayLike, voxel_size_m: float, colors: ArrayLike | None = None
) -> tuple[NDArray[np.float32], NDArray[np.uint8] | None]:
    """One point per occupied voxel: the centroid of its points (and their mean color)."""
    if not voxel_size_m > 0:
        raise ValueError(f"voxel_size_m must be positive metres, got {voxel_size_m}")
    p = np.asarray(points, dtype=np.float32)
    if len(p) == 0:
        return p.reshape(0, 3), None if colors is None else np.zeros((0, 3), np.uint8)
    cells = np.floor(p / np.float32(voxel_size_m)).astype(np.int64)
    cells -= cells.min(axis=0)
    dims = cells.max(axis=0) + 1
    keys = (cells[:, 0] * dims[1] + cells[:, 1]) * dims[2] + cells[:, 2]
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    n = len(counts)
    out = np.empty((n, 3), dtype=np.float32)
    for axis in range(3):
        out[:, axis] = np.bincount(inverse, weights=p[:, axis], minlength=n) / counts
    out_colors = None
    if colors is not None:
        c = np.asarray(colors, dtype=np.float64).reshape(-1, 3)
        out_colors = np.empty((n, 3), dtype=np.uint8)
        for axis in range(3):
            out_colors[:, axis] = np.round(np.bincount(inverse, weights=c[:, axis], minlength=n) / counts)
    return out, out_colors


def depth_to_point_cloud(
    depth_m: NDArray,
    camera: CameraModel,
    T_base_cam: ArrayLike,
    *,
    workspace: WorkspaceBox | None = None,
    voxel_size_m: float | None = 0.01,
    color: NDArray[np.uint8] | None = None,
    min_depth_m: float = 0.05,
    max_depth_m: float = 5.0,
    stride: int = 1,
    frame: str = "base",
) -> PointCloud:
    """Valid depth pixels as points in the base frame, cropped to ``workspace`` and downsampled.

    ``stride`` > 1 samples every ``stride``-th row and column first (a cheap pre-thinning when the
    voxel is much larger than a pixel's footprint).
    """
    if depth_m.shape != (camera.height, camera.width):
        raise ValueError(
            f"depth image {depth_m.shape[1]}x{depth_m.shape[0]} does not match camera {camera.width}x{camera.height}"
        )
    rays = pixel_rays(camera)
    d = depth_m
    if stride > 1:
        rays = rays[::stride, ::stride]
        d = d[::stride, ::stride]
        color = None if color is None else color[::stride, ::stride]
    # Column-wise (structure of arrays) float32 maths on the flat image: several times faster than
    # (N, 3) fancy indexing and reductions over the last axis.
    d = np.ascontiguousarray(d, dtype=np.float32).ravel()
    ok = d >= np.float32(min_depth_m)  # NaN compares false: holes drop out here
    ok &= d <= np.float32(max_depth_m)
    index = np.flatnonzero(ok)
    z = d[index]
    ray_x = np.ascontiguousarray(rays[..., 0]).ravel()[index]
    ray_y = np.ascontiguousarray(rays[..., 1]).ravel()[index]
    T = np.asarray(T_base_cam, dtype=np.float32)
    columns = []
    for axis in range(3):
        # p_base[axis] = z * (R[axis, 0] x + R[axis, 1] y + R[axis, 2]) + t[axis], with (x, y, 1) the ray.
        columns.append(z * (T[axis, 0] * ray_x + T[axis, 1] * ray_y + T[axis, 2]) + T[axis, 3])
    keep = None
    if workspace is not None:
        keep = np.ones(len(z), dtype=bool)
        for axis in range(3):
            keep &= columns[axis] >= np.float32(workspace.min_xyz[axis])
            keep &= columns[axis] <= np.float32(workspace.max_xyz[axis])
        columns = [c[keep] for c in columns]
    pts = np.stack(columns, axis=1)
    cols = None
    if color is not None:
        cols = np.asarray(color).reshape(-1, 3)[index]
        cols = cols if keep is None else cols[keep]
    if voxel_size_m:
        pts, cols = voxel_downsample(pts, voxel_size_m, cols)
    return PointCloud(pts, cols, frame)
