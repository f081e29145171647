"""Camera calibration: board detection, hand-eye / extrinsic solvers, guided capture, stored results.

A wrist camera is calibrated eye-in-hand (``T_ee_cam``), a static camera eye-to-hand
(``T_base_cam``); results are YAML files in ``calibration/`` that the projection layer loads with
:func:`load_mount_for_view` (:func:`load_calibration` gives the metadata too).
"""

from robopin.calibration.board import BoardConfig, BoardDetector, BoardView, DetectionConfig, board_image
from robopin.calibration.capture import (
    CaptureReport,
    CaptureSample,
    Frame,
    capture_sample,
    keep_planner_inside_safety_limits,
    run_guided_capture,
)
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
from robopin.calibration.poses import PoseGeneratorConfig, eye_in_hand_poses, eye_to_hand_poses
from robopin.calibration.storage import (
    CalibrationRecord,
    camera_info_dict,
    load_calibration,
    load_mount_for_view,
    save_calibration,
)
from robopin.calibration.verify import VerificationReport, verify_calibration
from robopin.calibration.workflow import load_samples, save_samples, solve_samples

__all__ = [
    "HAND_EYE_METHODS",
    "BoardConfig",
    "BoardConfigError",
    "BoardDetector",
    "BoardView",
    "CalibrationError",
    "CalibrationFileError",
    "CalibrationRecord",
    "CaptureAbortedError",
    "CaptureReport",
    "CaptureSample",
    "DegenerateSamplesError",
    "DetectionConfig",
    "Frame",
    "HandEyeResult",
    "PoseGeneratorConfig",
    "Rejection",
    "Residuals",
    "SolverConfig",
    "VerificationReport",
    "board_image",
    "camera_info_dict",
    "capture_sample",
    "check_motion_diversity",
    "eye_in_hand_poses",
    "eye_to_hand_poses",
    "keep_planner_inside_safety_limits",
    "load_calibration",
    "load_mount_for_view",
    "load_samples",
    "residuals",
    "run_guided_capture",
    "save_calibration",
    "save_samples",
    "solve_hand_eye",
    "solve_samples",
    "verify_calibration",
]
