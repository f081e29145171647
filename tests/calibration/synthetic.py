"""Synthetic board images for calibration tests: a board rendered into a pinhole camera by a homography.

Independent of the detector and of PnP: the image is the printed board warped by ``K [r1 r2 t]``,
supersampled 4x and area-averaged so corners are as sharp and as accurate as a real lens would give.
"""

from __future__ import annotations

import cv2
import numpy as np

from robopin.calibration import BoardConfig, board_image
from robopin.geometry import CameraModel, make_transform, rpy_to_matrix

CAMERA = CameraModel(640, 480, 600.0, 600.0, 319.5, 239.5)
PIXELS_PER_METRE = 6000.0
MARGIN_M = 0.01
_SUPERSAMPLE = 4


def board_pose_facing_camera(
    board: BoardConfig, distance_m: float = 0.45, tilt_rpy: tuple[float, float, float] = (0.2, -0.15, 0.1)
) -> np.ndarray:
    """``T_cam_board`` with the board centre on the optical axis, tilted by ``tilt_rpy`` (radians)."""
    R = rpy_to_matrix(*tilt_rpy)
    return make_transform(R, np.array([0.0, 0.0, distance_m]) - R @ board.center_m())


def render_board_view(
    board: BoardConfig, T_cam_board: np.ndarray, camera: CameraModel = CAMERA, background: int = 140
) -> np.ndarray:
    """RGB image of ``board`` at ``T_cam_board`` seen by an undistorted ``camera``."""
    printed = board_image(board, PIXELS_PER_METRE, MARGIN_M)
    s = _SUPERSAMPLE
    # Camera matrix of the supersampled image (continuous-coordinate scaling, OpenCV pixel centres).
    K = np.array(
        [
            [camera.fx * s, 0.0, (camera.cx + 0.5) * s - 0.5],
            [0.0, camera.fy * s, (camera.cy + 0.5) * s - 0.5],
            [0, 0, 1],
        ]
    )
    # Printed-image pixel (OpenCV centres) of board point (x, y): (x + margin) * ppm - 0.5.
    offset = MARGIN_M * PIXELS_PER_METRE - 0.5
    A = np.array([[PIXELS_PER_METRE, 0.0, offset], [0.0, PIXELS_PER_METRE, offset], [0.0, 0.0, 1.0]])
    H = K @ np.column_stack([T_cam_board[:3, 0], T_cam_board[:3, 1], T_cam_board[:3, 3]]) @ np.linalg.inv(A)
    big = cv2.warpPerspective(
        printed,
        H,
        (camera.width * s, camera.height * s),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=background,
    )
    small = cv2.resize(big, (camera.width, camera.height), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(np.repeat(small[:, :, None], 3, axis=2))
