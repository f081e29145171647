"""Do two views' pins of one anchor ID lie on the same object? The multi-view cross-check's rule.

Two cameras rarely pin the same surface point of an object: the static camera sees its front, the
wrist camera its top, and the two pins can be the object's size apart while both are right. A fixed
distance tolerance either refuses those (too tight) or lets a pin on the neighbouring object through
(too loose). The rule here compares against the object itself: the depth of each view around its
own pin, in the base frame, is fused into one cloud; the support plane is removed (RANSAC) and the
rest is clustered by Euclidean density (DBSCAN). The pins agree when both fall on one cluster, that
is on one connected object, or both on the support within ``support_tolerance_m`` of each other (a
place on the table). Plane fit and clustering are open3d's (``segment_plane``, ``cluster_dbscan``).

Touching objects form one cluster, so a pin on an object in contact with the pinned one is not
caught: the rule catches a pin on a separate object, which is what a grounding error looks like.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.geometry.camera_model import CameraModel, pixel_rays
from robopin.geometry.transforms import transform_points
from robopin.settings import check_fields, positive, setting

__all__ = ["CROSS_VIEW_RULES", "CrossViewConfig", "CrossViewError", "CrossViewVerdict", "ViewDepth", "same_object"]

CROSS_VIEW_RULES: tuple[str, ...] = ("object_extent", "distance")
"""``object_extent``: pins agree when they lie on one object (this module); ``distance``: only when
within ``fusion_tolerance_m`` of each other (one surface point seen twice)."""

# open3d's RANSAC draws from a process-wide generator: seeding it and fitting under one lock makes a
# verdict a function of the depth alone, whatever other thread projects at the same time. Its plane fit
# also spreads its iterations over TBB threads and keeps the best plane the threads happen to reach first
# (open3d 0.20, seeded: two different planes in 300 fits of one cloud on 2 cores, one with
# ``utility.set_max_threads(1)``), so on a busy machine the support plane, and with it the verdict, moved:
# the fit runs on one thread.
_OPEN3D_LOCK = threading.Lock()


class CrossViewError(ValueError):
    """A cross-view setting that cannot work (the message names the value)."""


@dataclass(frozen=True)
class CrossViewConfig:
    """Parameters of the object-extent rule.

    Attributes:
        rule: one of :data:`CROSS_VIEW_RULES`.
        radius_m: depth within this distance of each pin (in 3D) is taken into the cloud; about the
            largest object the arm picks.
        voxel_m: voxel size of the fused cloud (speed; well below ``cluster_eps_m``).
        plane_distance_m: RANSAC inlier distance of the support plane (depth noise at the range).
        max_plane_tilt_deg: the support plane's normal is within this of ``up`` (else no plane is
            removed: the crop holds no table, e.g. the wrist camera close over a large object).
        cluster_eps_m: DBSCAN neighbourhood: points closer than this belong to one object.
        min_cluster_points: DBSCAN core-point count.
        pin_snap_m: a pin belongs to the cluster of its nearest object point within this distance.
        support_tolerance_m: two pins both on the support agree within this distance.
    """

    rule: str = setting("object_extent", "estimates of one anchor further apart than fusion_tolerance_m: "
                                         "object_extent = agree when on one object, distance = disagree",
                        parameter="cross_view_rule")
    radius_m: float = setting(0.15, "depth this close to each pin is searched for its object, metres", min=0.0,
                              parameter="cross_view_radius_m")
    voxel_m: float = 0.004
    plane_distance_m: float = 0.006
    max_plane_tilt_deg: float = 20.0
    cluster_eps_m: float = 0.012
    min_cluster_points: int = 8
    pin_snap_m: float = 0.025
    support_tolerance_m: float = 0.04

    def __post_init__(self) -> None:
        if self.rule not in CROSS_VIEW_RULES:
            raise CrossViewError(f"cross-view rule {self.rule!r} is unknown; expected one of {CROSS_VIEW_RULES}")
        check_fields(self, ("radius_m", "voxel_m", "plane_distance_m", "cluster_eps_m", "pin_snap_m",
                            "support_tolerance_m"), positive, CrossViewError, "a positive number of metres",
                     prefix="cross-view ")
        if not 0 < self.max_plane_tilt_deg < 90:
            raise CrossViewError(f"cross-view max_plane_tilt_deg must be in (0, 90), got {self.max_plane_tilt_deg!r}")
        if not isinstance(self.min_cluster_points, int) or self.min_cluster_points < 1:
            raise CrossViewError(
                f"cross-view min_cluster_points must be an integer >= 1, got {self.min_cluster_points!r}"
            )


@dataclass(frozen=True)
class ViewDepth:
    """One view's depth as the rule needs it: metric depth, its camera model and ``T_base_cam``."""

    depth_m: NDArray
    camera: CameraModel
    T_base_cam: NDArray[np.float64]


@dataclass(frozen=True)
class CrossViewVerdict:
    """Whether the pins lie on one object, and what each pin landed on (cluster label, ``support``,
    ``none``), for the refusal's detail."""

    same: bool
    detail: str
    labels: tuple[str, ...] = ()


def _crop(
    view: ViewDepth, pin_base: NDArray[np.float64], pin_uv: tuple[float, float], radius_m: float, voxel_m: float
) -> NDArray:
    """Base-frame points of ``view`` within ``radius_m`` of the pin (a pixel window bounds the ball),
    every few pixels: a pixel spacing of half a voxel loses nothing the voxel grid keeps.

    The window holds 25-80 thousand pixels and the ball a fraction of them, so the work is ordered to touch
    each pixel least: a depth slab first, each ray from the camera's cached ray image (undistorted once per
    camera model), the ball tested in the camera frame (a rigid transform keeps distances), and only the
    points inside it moved to the base frame.
    """
    depth = view.depth_m
    h, w = depth.shape
    u, v = pin_uv
    col, row = min(max(math.floor(u), 0), w - 1), min(max(math.floor(v), 0), h - 1)
    pin_cam = transform_points(np.linalg.inv(view.T_base_cam), pin_base)
    z = float(pin_cam[2])
    if not math.isfinite(z) or z <= 0:
        return np.zeros((0, 3))
    half = int(min(max(view.camera.fx, view.camera.fy) * radius_m / max(z - radius_m, 0.05 * z), max(h, w)))
    r0, r1 = max(row - half, 0), min(row + half + 1, h)
    c0, c1 = max(col - half, 0), min(col + half + 1, w)
    stride = max(1, int(voxel_m / 2 / (z / max(view.camera.fx, view.camera.fy))))
    patch = depth[r0:r1:stride, c0:c1:stride]
    # A point of the ball lies within radius_m of the pin's depth too: that slab (which also drops holes, as
    # NaN compares false) leaves the far table and background out before any point is made. 1 um wider: a
    # float32 depth image compares in float32.
    slab = radius_m + 1e-6
    near = (patch >= z - slab) & (patch <= z + slab) & (patch > 0)
    depths = patch[near].astype(np.float64)
    if depths.size == 0:
        return np.zeros((0, 3))
    rays = pixel_rays(view.camera)[r0:r1:stride, c0:c1:stride]  # (x, y, 1) per pixel
    x, y = rays[..., 0][near] * depths, rays[..., 1][near] * depths
    dx, dy, dz = x - pin_cam[0], y - pin_cam[1], depths - pin_cam[2]
    inside = dx * dx + dy * dy + dz * dz <= radius_m * radius_m
    return transform_points(view.T_base_cam, np.column_stack((x[inside], y[inside], depths[inside])))


def _support_plane(pcd, cfg: CrossViewConfig, up: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """The lowest large horizontal plane of the cloud, ``[a, b, c, d]`` with ``(a, b, c)`` = up, or None.

    RANSAC returns the largest plane, which close up can be a plate or a box top rather than the
    table under it: while a tenth of the points lie below the plane found, fit again below it.
    """
    candidate = pcd
    plane = None
    total = len(pcd.points)
    for _ in range(3):
        if len(candidate.points) < max(3, 0.1 * total):
            break
        model, inliers = candidate.segment_plane(cfg.plane_distance_m, 3, 200)
        normal = np.asarray(model[:3], dtype=np.float64)
        norm = float(np.linalg.norm(normal))
        if norm == 0 or len(inliers) < 0.1 * total:
            break
        cos = float(np.dot(normal, up)) / norm
        if abs(cos) < math.cos(math.radians(cfg.max_plane_tilt_deg)):
            break
        plane = np.append(normal, model[3]) / norm * (1.0 if cos > 0 else -1.0)
        height = np.asarray(pcd.points) @ plane[:3] + plane[3]
        below = np.flatnonzero(height < -2.0 * cfg.plane_distance_m)
        if below.size < 0.1 * total:
            break
        candidate = pcd.select_by_index(below.tolist())
    return plane


def warm_up() -> None:
    """Import open3d now (2-4 s the first time in a process), so the first step's projection does not pay it."""
    import open3d  # noqa: F401


def same_object(
    pins_base: ArrayLike,
    pins_uv: ArrayLike,
    views: list[ViewDepth],
    config: CrossViewConfig | None = None,
    up: ArrayLike = (0.0, 0.0, 1.0),
) -> CrossViewVerdict:
    """Whether every pin (``pins_base[i]`` at pixel ``pins_uv[i]`` of ``views[i]``) lies on one object.

    See the module docstring for the rule.
    """
    import open3d as o3d

    cfg = config or CrossViewConfig()
    pins = np.asarray(pins_base, dtype=np.float64).reshape(-1, 3)
    uvs = np.asarray(pins_uv, dtype=np.float64).reshape(-1, 2)
    if not len(pins) == len(uvs) == len(views) or len(pins) < 2:
        raise CrossViewError(f"same_object needs >= 2 pins with one pixel and one view each, got {len(pins)}")
    up_vec = np.asarray(up, dtype=np.float64)
    up_vec = up_vec / np.linalg.norm(up_vec)
    cloud = np.concatenate(
        [
            _crop(view, pin, (uv[0], uv[1]), cfg.radius_m, cfg.voxel_m)
            for pin, uv, view in zip(pins, uvs, views, strict=True)
        ]
    )
    if len(cloud) < cfg.min_cluster_points:
        return CrossViewVerdict(False, f"only {len(cloud)} depth points around the pins")
    with _OPEN3D_LOCK:
        # Its warnings (a plane fit on few points) go to stdout, outside our logging; the verdict's
        # detail says what the rule found.
        o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
        o3d.utility.random.seed(0)
        pcd = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(cloud)).voxel_down_sample(cfg.voxel_m)
        points = np.asarray(pcd.points)
        threads = o3d.utility.get_max_threads()
        o3d.utility.set_max_threads(1)
        try:
            plane = _support_plane(pcd, cfg, up_vec)
        finally:
            o3d.utility.set_max_threads(threads)
        if plane is not None:
            height = points @ plane[:3] + plane[3]
            objects = pcd.select_by_index(np.flatnonzero(height > cfg.plane_distance_m).tolist())
        else:
            objects = pcd
        object_points = np.asarray(objects.points)
        labels = (
            np.asarray(objects.cluster_dbscan(cfg.cluster_eps_m, cfg.min_cluster_points, print_progress=False))
            if len(object_points)
            else np.zeros(0, dtype=np.int64)
        )
    found: list[str] = []
    for pin in pins:
        # An object point within the snap distance first: a pin at an object's foot (on its outline,
        # where the support begins) is a pin on that object.
        near_labels = np.zeros(0, dtype=np.int64)
        if len(object_points):
            near = np.linalg.norm(object_points - pin, axis=1) <= cfg.pin_snap_m
            near_labels = labels[near & (labels >= 0)]
        if near_labels.size:
            found.append(f"object {int(np.bincount(near_labels).argmax())}")
        elif plane is not None and float(pin @ plane[:3] + plane[3]) <= cfg.plane_distance_m:
            found.append("support")
        else:
            found.append("none")
    spread = float(np.max(np.linalg.norm(pins[:, None] - pins[None], axis=-1)))
    if all(label == "support" for label in found):
        same = spread <= cfg.support_tolerance_m
        detail = f"every pin on the support, {spread:.3f} m apart (tolerance {cfg.support_tolerance_m:.3f} m)"
    else:
        same = found[0].startswith("object") and len(set(found)) == 1
        detail = f"pins {spread:.3f} m apart lie on {found}"
    return CrossViewVerdict(same, detail, tuple(found))
