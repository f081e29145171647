"""Diverse capture poses for the guided calibration: where the hand should go so the camera sees the board.

Eye-in-hand (wrist camera, board fixed): camera positions on a spherical cap above the board, each
looking at a point near the board centre with a varied roll about the optical axis; the hand pose
follows from a nominal ``T_ee_cam`` (a rough mount guess is enough: it only aims the camera).
Eye-to-hand (static camera, board held): board positions spread through the camera's view, each
facing the camera with a varied tilt; the hand pose follows from a nominal ``T_ee_board``.
Rotations are spread over several axes on purpose: hand-eye calibration is unobservable from
rotations about one axis (see :func:`robopin.calibration.handeye.check_motion_diversity`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.transforms import as_transform, invert, make_transform
from robopin.settings import check_ranges, setting

__all__ = ["PoseGeneratorConfig", "eye_in_hand_poses", "eye_to_hand_poses", "look_at_rotation"]

_GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))


@dataclass(frozen=True)
class PoseGeneratorConfig:
    """Where guided capture poses go: the calibration node's parameters of its pose generator."""

    count: int = setting(20, "guided capture poses generated", min=1, parameter="pose_count")
    min_distance_m: float = setting(0.35, "closest camera-to-board distance of generated poses, metres", min=0.05)
    max_distance_m: float = setting(0.55, "farthest camera-to-board distance of generated poses, metres", min=0.05)
    max_tilt_deg: float = setting(
        35.0, "largest viewing angle off the board normal of generated poses, degrees", min=0.0, max=80.0)
    max_roll_deg: float = setting(30.0, "largest roll of generated views about their axis, degrees", min=0.0,
                                  max=180.0)
    aim_jitter_m: float = setting(0.03, "farthest a generated view aims from the board centre, metres", min=0.0)
    seed: int = setting(0, "random seed of the pose generator")

    def __post_init__(self) -> None:
        check_ranges(self, ValueError)
        if self.min_distance_m > self.max_distance_m:
            raise ValueError(f"need min_distance_m <= max_distance_m, got {self.min_distance_m}, {self.max_distance_m}")


def look_at_rotation(forward: NDArray[np.float64], up_hint: NDArray[np.float64]) -> NDArray[np.float64]:
    """Optical-frame rotation (z along ``forward``, image up toward ``up_hint``)."""
    z = np.asarray(forward, dtype=np.float64)
    z = z / np.linalg.norm(z)
    x = np.cross(z, up_hint)
    if np.linalg.norm(x) < 1e-6:
        x = np.cross(z, [0.0, 1.0, 0.0] if abs(z[1]) < 0.9 else [1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def _roll(angle_rad: float) -> NDArray[np.float64]:
    c, s = math.cos(angle_rad), math.sin(angle_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def eye_in_hand_poses(
    T_base_board: NDArray[np.float64],
    board_center_m: NDArray[np.float64],
    T_ee_cam_nominal: NDArray[np.float64],
    config: PoseGeneratorConfig | None = None,
    up_hint: tuple[float, float, float] = (1.0, 0.0, 0.0),
) -> list[NDArray[np.float64]]:
    """``T_base_ee`` targets that put a wrist camera over a board lying at ``T_base_board``.

    ``board_center_m`` is the pattern centre in the board frame; ``up_hint`` is the base-frame
    direction image 'up' roughly keeps (away from the robot keeps the hand's usual yaw).
    """
    config = config or PoseGeneratorConfig()
    T_base_board = as_transform(T_base_board, "T_base_board")
    T_cam_ee = invert(as_transform(T_ee_cam_nominal, "T_ee_cam_nominal"))
    rng = np.random.default_rng(config.seed)
    center = T_base_board[:3, :3] @ np.asarray(board_center_m, dtype=np.float64) + T_base_board[:3, 3]
    normal = -T_base_board[:3, 2]  # board z points into the board; the camera sits on the other side
    u = np.cross(normal, [0.0, 0.0, 1.0] if abs(normal[2]) < 0.9 else [1.0, 0.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(normal, u)
    poses = []
    max_tilt = math.radians(config.max_tilt_deg)
    for k in range(config.count):
        # Spread directions evenly over the cap (sunflower pattern), distances and rolls at random.
        fraction = (k + 0.5) / config.count
        tilt = math.acos(1.0 - fraction * (1.0 - math.cos(max_tilt)))
        azimuth = k * _GOLDEN_ANGLE
        direction = math.cos(tilt) * normal + math.sin(tilt) * (math.cos(azimuth) * u + math.sin(azimuth) * v)
        distance = rng.uniform(config.min_distance_m, config.max_distance_m)
        aim = center + rng.uniform(-config.aim_jitter_m, config.aim_jitter_m, 3) * np.array([1.0, 1.0, 0.0])
        eye = center + distance * direction
        R = look_at_rotation(aim - eye, np.asarray(up_hint, dtype=np.float64))
        R = R @ _roll(math.radians(rng.uniform(-config.max_roll_deg, config.max_roll_deg)))
        poses.append(make_transform(R, eye) @ T_cam_ee)
    return poses


def eye_to_hand_poses(
    T_base_cam_nominal: NDArray[np.float64],
    T_ee_board_nominal: NDArray[np.float64],
    board_center_m: NDArray[np.float64],
    config: PoseGeneratorConfig | None = None,
    *,
    field_of_view_deg: tuple[float, float] = (40.0, 30.0),
    min_center_height_m: float = -np.inf,
) -> list[NDArray[np.float64]]:
    """``T_base_ee`` targets that show a hand-held board to a static camera at ``T_base_cam_nominal``.

    Board centres fill the central part of the (horizontal, vertical) field of view; each board
    faces the camera, tilted up to ``max_tilt_deg`` about a direction that changes from pose to pose.
    Board centres lower than ``min_center_height_m`` (base z) are drawn again: a board held near the
    table puts the hand into it.
    """
    config = config or PoseGeneratorConfig()
    T_base_cam = as_transform(T_base_cam_nominal, "T_base_cam_nominal")
    T_board_ee = invert(as_transform(T_ee_board_nominal, "T_ee_board_nominal"))
    board_center_m = np.asarray(board_center_m, dtype=np.float64)
    rng = np.random.default_rng(config.seed)
    half_h, half_v = (math.radians(a) / 2.0 for a in field_of_view_deg)
    poses = []
    for k in range(config.count):
        for _ in range(200):
            distance = rng.uniform(config.min_distance_m, config.max_distance_m)
            x = math.tan(rng.uniform(-0.6, 0.6) * half_h)
            y = math.tan(rng.uniform(-0.6, 0.6) * half_v)
            center_cam = distance * np.array([x, y, 1.0]) / math.sqrt(1 + x * x + y * y)
            if (T_base_cam[:3, :3] @ center_cam + T_base_cam[:3, 3])[2] >= min_center_height_m:
                break
        else:
            raise ValueError(
                f"no board position in the camera's view lies above z = {min_center_height_m} m "
                f"at {config.min_distance_m}..{config.max_distance_m} m from the camera"
            )
        # Facing the camera: board z (into the board) along the ray, board x roughly along image x.
        R_cam_board = look_at_rotation(center_cam, np.array([0.0, -1.0, 0.0]))
        axis_angle = k * _GOLDEN_ANGLE
        axis = np.array([math.cos(axis_angle), math.sin(axis_angle), 0.0])
        tilt = math.radians(config.max_tilt_deg) * math.sqrt(rng.uniform(0.2, 1.0))
        R_cam_board = (
            R_cam_board
            @ _axis_angle(axis, tilt)
            @ _roll(math.radians(rng.uniform(-config.max_roll_deg, config.max_roll_deg)))
        )
        # Place the board so its pattern centre (not its origin corner) sits at center_cam.
        T_cam_board = make_transform(R_cam_board, center_cam - R_cam_board @ board_center_m)
        poses.append(T_base_cam @ T_cam_board @ T_board_ee)
    return poses


def _axis_angle(axis: NDArray[np.float64], angle: float) -> NDArray[np.float64]:
    axis = axis / np.linalg.norm(axis)
    K = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * K @ K
