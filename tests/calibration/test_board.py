"""Board detection on synthetic views: pose accuracy, and every named rejection."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from robopin.calibration import BoardConfig, BoardConfigError, BoardDetector, DetectionConfig, Rejection
from robopin.geometry import CameraModel, rotation_angle
from tests.calibration.synthetic import CAMERA, board_pose_facing_camera, render_board_view

CHARUCO = BoardConfig()
GRID = BoardConfig(type="aruco_grid", squares_x=5, squares_y=4, marker_length_m=0.04, marker_separation_m=0.01)


def pose_error(T_a: np.ndarray, T_b: np.ndarray) -> tuple[float, float]:
    return 1000 * float(np.linalg.norm(T_a[:3, 3] - T_b[:3, 3])), float(np.degrees(rotation_angle(T_a, T_b)))


@pytest.mark.parametrize("board", [CHARUCO, GRID], ids=["charuco", "aruco_grid"])
@pytest.mark.parametrize("tilt", [(0.0, 0.0, 0.0), (0.35, -0.2, 0.6), (-0.3, 0.4, -1.2)])
def test_detected_pose_matches_the_rendered_pose(board, tilt):
    truth = board_pose_facing_camera(board, 0.5, tilt)
    view = BoardDetector(board).detect(render_board_view(board, truth), CAMERA)
    assert view.ok, view.message
    translation_mm, rotation_deg = pose_error(view.T_cam_board, truth)
    assert translation_mm < 1.0
    assert rotation_deg < 0.25
    assert view.reprojection_rms_px < 0.3
    assert view.corner_count == board.corner_count  # whole board in view


def test_distorted_camera_is_undistorted_before_the_pose():
    """A plumb_bob lens: the detector's pose uses the camera model's undistortion (not a pinhole)."""
    distorted = CameraModel(640, 480, 600.0, 600.0, 319.5, 239.5, "plumb_bob", (-0.12, 0.05, 0.0, 0.0, 0.0))
    truth = board_pose_facing_camera(CHARUCO, 0.5, (0.2, 0.1, 0.3))
    ideal = render_board_view(CHARUCO, truth)
    # Warp the ideal image through the lens: for each distorted pixel, sample where its ideal ray lands.
    u, v = np.meshgrid(np.arange(640, dtype=np.float64), np.arange(480, dtype=np.float64))
    x, y = distorted.undistort_normalized((u - 319.5) / 600.0, (v - 239.5) / 600.0)
    image = cv2.remap(
        ideal, (x * 600 + 319.5).astype(np.float32), (y * 600 + 239.5).astype(np.float32), cv2.INTER_LINEAR
    )
    with_model = BoardDetector(CHARUCO).detect(image, distorted)
    assert with_model.ok, with_model.message
    assert pose_error(with_model.T_cam_board, truth)[0] < 1.5
    # The same image read as a pinhole camera does not explain the corners as well.
    as_pinhole = BoardDetector(CHARUCO, DetectionConfig(max_reprojection_px=100)).detect(image, CAMERA)
    assert as_pinhole.reprojection_rms_px > 3 * with_model.reprojection_rms_px


def test_missing_board_is_named():
    view = BoardDetector(CHARUCO).detect(np.full((480, 640, 3), 128, np.uint8), CAMERA)
    assert not view.ok and view.rejection is Rejection.BOARD_NOT_FOUND


def test_a_smaller_configured_board_sees_foreign_marker_ids():
    image = render_board_view(CHARUCO, board_pose_facing_camera(CHARUCO, 0.5))
    smaller = BoardConfig(squares_x=5, squares_y=4)  # ids 0..9; the printed 7x5 board has 0..16
    view = BoardDetector(smaller).detect(image, CAMERA)
    assert not view.ok and view.rejection is Rejection.WRONG_BOARD
    assert "wrong board size" in view.message


def test_a_larger_configured_board_does_not_yield_a_pose():
    """Every printed id exists on a 9x7 board, but the corners' layout does not: no accepted pose."""
    image = render_board_view(CHARUCO, board_pose_facing_camera(CHARUCO, 0.5))
    view = BoardDetector(BoardConfig(squares_x=9, squares_y=7)).detect(image, CAMERA)
    assert not view.ok
    assert view.rejection in (Rejection.REPROJECTION, Rejection.PARTIAL, Rejection.WRONG_BOARD)


def test_partial_view_is_refused():
    truth = board_pose_facing_camera(CHARUCO, 0.5, (0.0, 0.0, 0.0))
    truth[0, 3] += 0.27  # slide the board mostly out of the image to the right
    view = BoardDetector(CHARUCO, DetectionConfig(min_corner_fraction=0.5)).detect(
        render_board_view(CHARUCO, truth), CAMERA
    )
    assert not view.ok and view.rejection is Rejection.PARTIAL


def test_blurred_view_is_refused_and_sharp_one_is_not():
    image = render_board_view(CHARUCO, board_pose_facing_camera(CHARUCO, 0.5))
    detector = BoardDetector(CHARUCO)
    sharp = detector.detect(image, CAMERA)
    blurred = detector.detect(cv2.GaussianBlur(image, (0, 0), 2.0), CAMERA)
    assert sharp.ok
    assert not blurred.ok and blurred.rejection is Rejection.BLURRY
    assert blurred.sharpness < sharp.sharpness


def test_oblique_view_is_ill_conditioned():
    truth = board_pose_facing_camera(CHARUCO, 0.45, (1.2, 0.0, 0.0))  # ~69 deg from facing the camera
    view = BoardDetector(CHARUCO, DetectionConfig(min_corner_fraction=0.1)).detect(
        render_board_view(CHARUCO, truth), CAMERA
    )
    assert not view.ok and view.rejection is Rejection.ILL_CONDITIONED
    assert view.tilt_deg > 65


def test_image_and_camera_model_must_agree():
    with pytest.raises(ValueError, match="640x480"):
        BoardDetector(CHARUCO).detect(np.zeros((240, 320, 3), np.uint8), CAMERA)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"squares_x": 1}, "squares_x"),
        ({"marker_length_m": 0.05}, "smaller than"),
        ({"dictionary": "DICT_9X9_1"}, "not an OpenCV predefined dictionary"),
        ({"squares_x": 20, "squares_y": 20, "dictionary": "DICT_4X4_50"}, "needs 200 markers"),
        ({"type": "checkerboard"}, "board type"),
    ],
)
def test_bad_board_configs_name_the_value(kwargs, match):
    with pytest.raises(BoardConfigError, match=match):
        BoardConfig(**kwargs)


def test_board_config_round_trips_and_refuses_unknown_keys():
    assert BoardConfig.from_dict(CHARUCO.to_dict()) == CHARUCO
    with pytest.raises(BoardConfigError, match="squares"):
        BoardConfig.from_dict({"squares": 7})
