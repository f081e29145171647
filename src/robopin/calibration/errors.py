"""Named errors of camera calibration; all derive from geometry's :class:`CalibrationError` (a ValueError)."""

from __future__ import annotations

import enum

from robopin.geometry.extrinsics import CalibrationError

__all__ = [
    "BoardConfigError",
    "CalibrationError",
    "CalibrationFileError",
    "CaptureAbortedError",
    "DegenerateSamplesError",
    "Rejection",
]


class BoardConfigError(CalibrationError):
    """A board description that OpenCV cannot build (bad size, unknown dictionary, marker >= square)."""


class DegenerateSamplesError(CalibrationError):
    """Samples from which no reliable hand-eye transform follows (too few, rotations too alike)."""


class CalibrationFileError(CalibrationError):
    """A calibration YAML that is missing, malformed, or does not match the camera it is used for."""


class CaptureAbortedError(RuntimeError):
    """The guided capture stopped: a safety refusal, a planning failure in dry run, or a cancel.

    ``reason`` names why (``safety_refusal``, ``unreachable``, ``canceled``, ``arm_error``) and
    ``pose_index`` which generated pose it stopped at.
    """

    def __init__(self, reason: str, pose_index: int, message: str) -> None:
        super().__init__(f"capture stopped at pose {pose_index} ({reason}): {message}")
        self.reason = reason
        self.pose_index = pose_index


class Rejection(str, enum.Enum):
    """Why one camera view of the board was not used (the string goes into logs and results)."""

    BOARD_NOT_FOUND = "board_not_found"
    WRONG_BOARD = "wrong_board"  # marker ids or geometry that the configured board cannot produce
    PARTIAL = "partial"  # too few corners of the board seen
    BLURRY = "blurry"
    ILL_CONDITIONED = "ill_conditioned"  # too oblique, too small or collinear corners
    REPROJECTION = "reprojection"  # pose does not explain the corners (wrong size or distortion)
