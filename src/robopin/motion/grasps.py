"""Grasp and place poses from 3D targets: top-down (or normal-aligned) grasps with yaw variants.

All offsets are :class:`GraspConfig` values in metres. The TCP frame's z axis is the approach
direction (pointing into the object), its y axis the finger-closing direction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.motion.errors import MotionConfigError
from robopin.settings import check_fields, positive, setting


@dataclass
class GraspConfig:
    """Offsets and choices of the pick-and-place primitives (metres, radians)."""

    pre_grasp_distance_m: float = setting(0.10, "approach distance before the grasp along the gripper axis, metres",
                                          min=0.0)
    grasp_depth_m: float = setting(0.02, "how far below the picked surface point the TCP goes, metres")
    # Lowest TCP height above the support surface at a grasp: the fingertips reach ~1.1 cm (Panda) and
    # ~0.6 cm (xArm gripper) past the TCP, and the planner pads links, so a small object is grasped
    # this high instead of pushing the fingers into the table.
    min_tcp_height_m: float = 0.018
    # A pick point is where the object was seen, often on a side face: with the object's points the
    # grasp centres on the points within this radius (xy) of it, moving at most max_centring_m.
    centring_radius_m: float = 0.035
    max_centring_m: float = 0.025
    lift_height_m: float = setting(0.12, "lift height after the grasp, metres", min=0.0)
    place_clearance_m: float = setting(0.01, "gap left under the object when releasing, metres")
    pre_place_distance_m: float = setting(0.10, "approach distance before the place pose, metres", min=0.0)
    retreat_distance_m: float = setting(0.10, "retreat distance after releasing, metres", min=0.0)
    object_height_m: float = 0.05  # used when the object's height is not measured
    yaw_variants: int = 4  # yaw candidates tried, spread over a half turn (the gripper is symmetric)
    normal_aligned: bool = False  # approach against the surface normal instead of straight down
    max_normal_tilt_rad: float = 0.6  # normals tilted more than this from vertical fall back to top-down

    def __post_init__(self) -> None:
        check_fields(self, ("pre_grasp_distance_m", "lift_height_m", "pre_place_distance_m", "retreat_distance_m",
                            "object_height_m"), positive, MotionConfigError, "> 0 m", prefix="GraspConfig.")
        for name in ("grasp_depth_m", "place_clearance_m", "min_tcp_height_m", "centring_radius_m", "max_centring_m"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise MotionConfigError(f"GraspConfig.{name} must be >= 0 m, got {value}")
        if self.yaw_variants < 1:
            raise MotionConfigError(f"GraspConfig.yaw_variants must be >= 1, got {self.yaw_variants}")


def interpolate_pose(T0: NDArray[np.float64], T1: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """Pose ``alpha`` of the way from T0 to T1: linear in position, geodesic in rotation."""
    R0, R1 = T0[:3, :3], T1[:3, :3]
    R_delta = R0.T @ R1
    angle = float(np.arccos(np.clip((np.trace(R_delta) - 1.0) / 2.0, -1.0, 1.0)))
    T = np.eye(4)
    T[:3, 3] = (1.0 - alpha) * T0[:3, 3] + alpha * T1[:3, 3]
    if angle < 1e-9:
        T[:3, :3] = R0
        return T
    axis = np.array([R_delta[2, 1] - R_delta[1, 2], R_delta[0, 2] - R_delta[2, 0], R_delta[1, 0] - R_delta[0, 1]])
    norm = np.linalg.norm(axis)
    if norm < 1e-9:  # angle near π: take the axis from the symmetric part
        eigenvalues, eigenvectors = np.linalg.eigh(R_delta + np.eye(3))
        axis = eigenvectors[:, int(np.argmax(eigenvalues))]
    else:
        axis = axis / norm
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    theta = alpha * angle
    T[:3, :3] = R0 @ (np.eye(3) + np.sin(theta) * K + (1 - np.cos(theta)) * K @ K)
    return T


def principal_yaw(points_xy: ArrayLike) -> float | None:
    """Yaw (rad, about base z) of the long horizontal axis of an object's points, None if round.

    A parallel gripper closes along the TCP y axis, which :func:`top_down_rotation` puts at yaw + π/2,
    so grasping at yaw = this closes the fingers across the short side.
    """
    xy = np.asarray(points_xy, dtype=np.float64)[:, :2]
    if len(xy) < 3:
        return None
    centred = xy - xy.mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred / len(xy))
    if eigenvalues[1] < 1e-12 or eigenvalues[0] / eigenvalues[1] > 0.8:
        return None  # nearly round: no preferred axis
    major = eigenvectors[:, 1]
    return float(np.arctan2(major[1], major[0]))


def _wrap_half_turn(yaw: float) -> float:
    """Map a yaw to (-π/2, π/2]: a parallel gripper at yaw and yaw+π is the same grasp."""
    return float((yaw + np.pi / 2) % np.pi - np.pi / 2)


def top_down_rotation(yaw: float) -> NDArray[np.float64]:
    """TCP orientation pointing straight down (z = −base z) with the fingers closing along ``yaw``+π/2."""
    c, s = np.cos(yaw), np.sin(yaw)
    # x along the yaw direction, z down, y = z × x.
    x = np.array([c, s, 0.0])
    z = np.array([0.0, 0.0, -1.0])
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


def aligned_rotation(approach: NDArray[np.float64], yaw: float) -> NDArray[np.float64]:
    """TCP orientation approaching along ``approach`` (unit, into the surface), x as close to ``yaw`` as it can be."""
    z = approach / np.linalg.norm(approach)
    reference = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    x = reference - z * float(reference @ z)
    if np.linalg.norm(x) < 1e-6:
        x = np.array([1.0, 0.0, 0.0]) - z * z[0]
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


@dataclass
class GraspCandidate:
    """One grasp: where the TCP closes, where the approach starts, and where the lift ends."""

    yaw_rad: float
    T_base_grasp: NDArray[np.float64]
    T_base_pre_grasp: NDArray[np.float64]
    T_base_lift: NDArray[np.float64]


@dataclass
class PlaceCandidate:
    """One place: where the TCP releases, where the descent starts, and where the retreat ends."""

    yaw_rad: float
    T_base_place: NDArray[np.float64]
    T_base_pre_place: NDArray[np.float64]
    T_base_retreat: NDArray[np.float64]


def centre_on_object(
    pick_point: ArrayLike,
    object_points: ArrayLike,
    config: GraspConfig,
    *,
    support_height_m: float | None = None,
) -> NDArray[np.float64]:
    """The top centre of the object around ``pick_point``, from its points (base frame).

    Points within ``centring_radius_m`` (xy) of the estimate and clear of the support surface (1.5 cm
    above it: plates and table noise stay out) are the object. Its top is their 90th-percentile
    height (never below the pick point); the xy centre is the centroid of its top band (the upper
    30 %, at least 1 cm: side faces a camera saw would pull a full centroid towards that camera),
    re-estimated a few times around the new centre, and moved at most ``max_centring_m`` in all.
    Fewer than 3 such points: the pick point unchanged.
    """
    point = np.asarray(pick_point, dtype=np.float64).reshape(3)
    points = np.asarray(object_points, dtype=np.float64).reshape(-1, 3)
    if support_height_m is not None:
        points = points[points[:, 2] > support_height_m + 0.015]
    centre = point[:2].copy()
    top = point[2]
    for step in range(3):  # a few mean-shift steps: the first neighbourhood is centred on a side face
        cluster = points[np.linalg.norm(points[:, :2] - centre, axis=1) <= config.centring_radius_m]
        if len(cluster) < 3:
            return point if step == 0 else np.array([centre[0], centre[1], top])
        top = max(point[2], float(np.percentile(cluster[:, 2], 90)))
        floor = support_height_m if support_height_m is not None else float(cluster[:, 2].min())
        band = cluster[cluster[:, 2] >= top - max(0.01, 0.3 * (top - floor))]
        if len(band) < 3:
            band = cluster
        shift = band[:, :2].mean(axis=0) - point[:2]
        distance = float(np.linalg.norm(shift))
        if distance > config.max_centring_m:
            shift *= config.max_centring_m / distance
        centre = point[:2] + shift
    return np.array([centre[0], centre[1], top])


def _above_support(tcp: NDArray[np.float64], approach: NDArray[np.float64], lowest_z: float) -> NDArray[np.float64]:
    """``tcp`` moved back along the approach axis until it is at least at ``lowest_z`` (base z)."""
    if tcp[2] >= lowest_z:
        return tcp
    # Back out along the approach so a tilted grasp keeps its line into the object.
    return tcp - approach * (lowest_z - tcp[2]) / max(-approach[2], 1e-6)


def _yaws(preferred: float, count: int) -> list[float]:
    step = np.pi / count
    return [_wrap_half_turn(preferred + k * step) for k in range(count)]


def grasp_candidates(
    pick_point: ArrayLike,
    config: GraspConfig,
    *,
    yaw_rad: float | None = None,
    object_points: ArrayLike | None = None,
    surface_normal: ArrayLike | None = None,
    support_height_m: float | None = None,
) -> list[GraspCandidate]:
    """Grasp poses at ``pick_point`` (base frame), best first.

    Yaw: ``yaw_rad`` if given (not NaN), else the fingers close across the object's principal axis from
    ``object_points``, else 0; the other ``yaw_variants`` − 1 yaws follow, spread over a half turn.
    With ``support_height_m`` (the table top under the object, base z) the TCP never closes lower
    than ``min_tcp_height_m`` above it, however low the pick point lies (small objects, depth noise).
    Top-down grasps with ``object_points`` close over the object's centre and top (see
    :func:`centre_on_object`), not over the seen point.
    """
    point = np.asarray(pick_point, dtype=np.float64).reshape(3)
    if not np.all(np.isfinite(point)):
        raise MotionConfigError(f"pick point must be finite, got {point.tolist()}")
    if object_points is not None and not config.normal_aligned and np.shape(object_points)[-1] == 3:
        point = centre_on_object(point, object_points, config, support_height_m=support_height_m)
    if yaw_rad is None or not np.isfinite(yaw_rad):
        axis = principal_yaw(object_points) if object_points is not None else None
        preferred = 0.0 if axis is None else axis
    else:
        preferred = float(yaw_rad)
    approach = np.array([0.0, 0.0, -1.0])
    if config.normal_aligned and surface_normal is not None:
        normal = np.asarray(surface_normal, dtype=np.float64).reshape(3)
        if np.linalg.norm(normal) > 1e-6:
            normal = normal / np.linalg.norm(normal)
            if np.arccos(np.clip(normal[2], -1.0, 1.0)) <= config.max_normal_tilt_rad:
                approach = -normal
    candidates = []
    for yaw in _yaws(preferred, config.yaw_variants):
        R = top_down_rotation(yaw) if approach[2] == -1.0 else aligned_rotation(approach, yaw)
        grasp = np.eye(4)
        grasp[:3, :3] = R
        grasp[:3, 3] = point + approach * config.grasp_depth_m
        if support_height_m is not None:
            grasp[:3, 3] = _above_support(grasp[:3, 3], approach, support_height_m + config.min_tcp_height_m)
        pre = grasp.copy()
        pre[:3, 3] = grasp[:3, 3] - approach * config.pre_grasp_distance_m
        lift = grasp.copy()
        lift[2, 3] += config.lift_height_m
        candidates.append(GraspCandidate(yaw, grasp, pre, lift))
    return candidates


def place_candidates(
    place_point: ArrayLike,
    grasp: GraspCandidate,
    pick_point: ArrayLike,
    config: GraspConfig,
    *,
    object_height_m: float | None = None,
) -> list[PlaceCandidate]:
    """Place poses putting the held object on the surface at ``place_point``, best first.

    The TCP ends at surface height + object height + clearance − how far below the object's top the
    grasp closed, so the object's bottom clears the surface by ``place_clearance_m``. The held yaw is
    preferred (no wrist turn); other yaws follow.
    """
    point = np.asarray(place_point, dtype=np.float64).reshape(3)
    if not np.all(np.isfinite(point)):
        raise MotionConfigError(f"place point must be finite, got {point.tolist()}")
    height = config.object_height_m if object_height_m is None else float(object_height_m)
    if not height > 0.0:
        raise MotionConfigError(f"object height must be > 0 m, got {height}")
    # The pick point is on the object's top; the TCP closed grasp_depth below it.
    tcp_below_top = float(np.asarray(pick_point, dtype=np.float64).reshape(3)[2] - grasp.T_base_grasp[2, 3])
    tcp_height = point[2] + height + config.place_clearance_m - tcp_below_top
    result = []
    for yaw in _yaws(grasp.yaw_rad, config.yaw_variants):
        place = np.eye(4)
        place[:3, :3] = top_down_rotation(yaw)
        place[:3, 3] = [point[0], point[1], tcp_height]
        pre = place.copy()
        pre[2, 3] += config.pre_place_distance_m
        retreat = place.copy()
        retreat[2, 3] += config.retreat_distance_m
        result.append(PlaceCandidate(yaw, place, pre, retreat))
    return result
