"""Local surface shape at a target: the surface normal and the object's extent above its support.

Both read only a window of the depth image around the point: estimating normals over a whole cloud
costs hundreds of milliseconds, a plane fit to one patch costs microseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.geometry.camera_model import CameraModel, pixel_rays
from robopin.geometry.depth import DepthConfig, _split_surfaces
from robopin.geometry.transforms import transform_points

__all__ = ["ObjectExtent", "SurfaceNormal", "estimate_normal", "estimate_object_extent"]


@dataclass(frozen=True)
class SurfaceNormal:
    """Unit normal in the camera optical frame, pointing toward the camera; NaN when not estimable."""

    normal: NDArray[np.float64]
    rms_m: float  # RMS distance of the patch points from the fitted plane
    n_points: int
    centroid: NDArray[np.float64] = field(default_factory=lambda: np.full(3, np.nan))  # a point on the plane

    def depth_along_ray(self, ray: NDArray[np.float64], min_cos: float = 0.2) -> float:
        """Optical-axis depth where the ray ``(x, y, 1)`` meets the fitted plane (NaN at grazing angles)."""
        if not self.valid:
            return math.nan
        denominator = float(np.dot(self.normal, ray))
        if abs(denominator) < min_cos * float(np.linalg.norm(ray)):
            return math.nan
        return float(np.dot(self.normal, self.centroid)) / denominator

    @property
    def valid(self) -> bool:
        return bool(np.all(np.isfinite(self.normal)))


_NO_NORMAL = SurfaceNormal(np.full(3, np.nan), math.nan, 0)


def estimate_normal(
    depth_m: NDArray,
    camera: CameraModel,
    u: float,
    v: float,
    surface_depth_m: float,
    *,
    window_px: int = 9,
    config: DepthConfig | None = None,
    min_points: int = 8,
) -> SurfaceNormal:
    """Plane-fit normal of the surface at ``(u, v)`` whose depth is ``surface_depth_m``.

    Only the samples of the same surface are fitted (depth gaps split surfaces exactly as
    :func:`robopin.geometry.depth.robust_depth` does), so a normal next to an edge is not bent by
    the background. The normal is oriented toward the camera.
    """
    cfg = config or DepthConfig()
    h, w = depth_m.shape
    if not (math.isfinite(surface_depth_m) and 0 <= u < w and 0 <= v < h):
        return _NO_NORMAL
    col, row = math.floor(u), math.floor(v)
    half = window_px // 2
    r0, r1 = max(row - half, 0), min(row + half + 1, h)
    c0, c1 = max(col - half, 0), min(col + half + 1, w)
    patch = np.asarray(depth_m[r0:r1, c0:c1], dtype=np.float64)
    ok = np.isfinite(patch) & (patch >= cfg.min_depth_m) & (patch <= cfg.max_depth_m)
    rows, cols = np.nonzero(ok)
    if rows.size < min_points:
        return _NO_NORMAL
    values = patch[rows, cols]
    labels = _split_surfaces(values, cfg)
    own = labels[np.argmin(np.abs(values - surface_depth_m))]
    member = labels == own
    if member.sum() < min_points:
        return _NO_NORMAL
    rays = pixel_rays(camera)[rows[member] + r0, cols[member] + c0].astype(np.float64)
    points = rays * values[member][:, None]
    return _fit_plane_normal(points)


def _fit_plane_normal(points: NDArray[np.float64]) -> SurfaceNormal:
    centroid = points.mean(axis=0)
    centred = points - centroid
    # The smallest right-singular vector of the centred points is the plane normal.
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    if s[1] < 1e-9 * max(s[0], 1e-12):  # points on a line: the plane is undetermined
        return _NO_NORMAL
    n = vt[2]
    if np.dot(n, centroid) > 0:  # camera at the origin: the normal must point back toward it
        n = -n
    rms = float(s[2] / math.sqrt(len(points)))
    return SurfaceNormal(n / np.linalg.norm(n), rms, len(points), centroid)


@dataclass(frozen=True)
class ObjectExtent:
    """Shape of the object under a target, in the target frame (normally ``base``).

    ``height_m`` is how far the object rises above its support surface; ``principal_axis`` is the
    unit direction of its longest horizontal extent (in the support plane); ``length_m`` and
    ``width_m`` are its extents along and across that axis; ``centroid`` is the mean of the object
    points. An empty support (the target is on the support itself) gives ``height_m = 0``.
    """

    height_m: float
    support_height_m: float
    centroid: NDArray[np.float64]
    principal_axis: NDArray[np.float64]
    length_m: float
    width_m: float
    n_points: int


def estimate_object_extent(
    depth_m: NDArray,
    camera: CameraModel,
    T_target_cam: ArrayLike,
    u: float,
    v: float,
    *,
    radius_m: float = 0.15,
    min_height_m: float = 0.008,
    up: ArrayLike = (0.0, 0.0, 1.0),
    max_window_px: int = 201,
) -> ObjectExtent | None:
    """Height above the support and principal axis of the object at ``(u, v)``, or None without depth.

    The window around the point covers about ``radius_m`` on the surface. The support height is the
    most populated height level in the window below the target; the object is the connected set of
    pixels rising more than ``min_height_m`` above it that contains (or touches) the point.
    """
    from scipy import ndimage

    up_vec = np.asarray(up, dtype=np.float64)
    up_vec = up_vec / np.linalg.norm(up_vec)
    h, w = depth_m.shape
    if not (0 <= u < w and 0 <= v < h):
        return None
    col, row = math.floor(u), math.floor(v)
    centre = depth_m[max(row - 2, 0) : row + 3, max(col - 2, 0) : col + 3]
    centre = centre[np.isfinite(centre) & (centre > 0)]
    if centre.size == 0:
        return None
    half = int(min(max_window_px // 2, math.ceil(camera.fx * radius_m / float(np.median(centre)))))
    r0, r1 = max(row - half, 0), min(row + half + 1, h)
    c0, c1 = max(col - half, 0), min(col + half + 1, w)
    patch = np.asarray(depth_m[r0:r1, c0:c1], dtype=np.float64)
    ok = np.isfinite(patch) & (patch > 0)
    vv, uu = np.mgrid[r0:r1, c0:c1]
    pts = np.full((*patch.shape, 3), np.nan)
    pts[ok] = transform_points(T_target_cam, camera.deproject(uu[ok] + 0.5, vv[ok] + 0.5, patch[ok]))
    height = pts @ up_vec  # NaN where no depth
    target_h = np.nanmedian(height[max(row - r0 - 2, 0) : row - r0 + 3, max(col - c0 - 2, 0) : col - c0 + 3])

    # Support: the densest 5 mm height bin at or below the target's own height.
    levels = height[ok & (height <= target_h + min_height_m)]
    if levels.size == 0:
        return None
    bin_m = 0.005
    bins = np.floor(levels / bin_m).astype(np.int64)
    values, counts = np.unique(bins, return_counts=True)
    support_bin = values[np.argmax(counts)]
    near_support = levels[np.abs(bins - support_bin) <= 1]
    support = float(np.median(near_support))

    above = ok & (height > support + min_height_m)
    labels, _ = ndimage.label(above, structure=np.ones((3, 3), dtype=bool))
    lr, lc = row - r0, col - c0
    label = labels[lr, lc]
    if label == 0:
        # The point may sit on a pixel without depth or just off the object: take the nearest object
        # pixel within two pixels, else the target lies on the support itself.
        near = labels[max(lr - 2, 0) : lr + 3, max(lc - 2, 0) : lc + 3]
        found = near[near > 0]
        if found.size == 0:
            return ObjectExtent(0.0, support, np.array(pts[lr, lc]), np.full(3, np.nan), 0.0, 0.0, 0)
        label = np.bincount(found).argmax()
    obj = pts[labels == label]
    rel_h = obj @ up_vec - support
    centroid = obj.mean(axis=0)
    # Principal axis in the support plane: PCA of the points projected onto it.
    flat = obj - np.outer(obj @ up_vec, up_vec)
    flat_c = flat - flat.mean(axis=0)
    _, _, vt = np.linalg.svd(flat_c, full_matrices=False)
    axis = vt[0] - np.dot(vt[0], up_vec) * up_vec
    axis /= np.linalg.norm(axis)
    if axis[np.argmax(np.abs(axis))] < 0:  # fixed sign so the same object gives the same axis
        axis = -axis
    across = np.cross(up_vec, axis)
    along_proj = flat_c @ axis
    across_proj = flat_c @ across
    return ObjectExtent(
        height_m=float(np.percentile(rel_h, 98)),
        support_height_m=support,
        centroid=centroid,
        principal_axis=axis,
        length_m=float(np.ptp(along_proj)),
        width_m=float(np.ptp(across_proj)),
        n_points=len(obj),
    )
