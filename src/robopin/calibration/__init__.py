"""Camera calibration: board detection, hand-eye / extrinsic solvers, guided capture, stored results.

A wrist camera is calibrated eye-in-hand (``T_ee_cam``), a static camera eye-to-hand
(``T_base_cam``); results are YAML files in ``calibration/`` that the projection layer loads with
:func:`robopin.geometry.load_camera_mount` (or :func:`load_calibration` for the metadata too).
"""

from robopin.calibration.board import BoardConfig, BoardDetector, BoardView, DetectionConfig, board_image
from robopin.calibration.errors import (
    BoardConfigError,
    CalibrationError,
    CalibrationFileError,
    CaptureAbortedError,
    DegenerateSamplesError,
    Rejection,
)
from robopin.calibration.handeye import (
    HAND_EYE_METHODS,
    HandEyeResult,
    Residuals,
    SolverConfig,
    check_motion_diversity,
    residuals,
    solve_hand_eye,
)

__all__ = [
    "HAND_EYE_METHODS",
    "BoardConfig",
    "BoardConfigError",
    "BoardDetector",
    "BoardView",
    "CalibrationError",
    "CalibrationFileError",
    "CaptureAbortedError",
    "DegenerateSamplesError",
    "DetectionConfig",
    "HandEyeResult",
    "Rejection",
    "Residuals",
    "SolverConfig",
    "board_image",
    "check_motion_diversity",
    "residuals",
    "solve_hand_eye",
]
