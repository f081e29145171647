"""Checking a stored calibration against fresh views of the board it was made with.

The stored file holds the board pose the calibration implied (``target``: ``T_base_board`` for a wrist
camera over a fixed board, ``T_ee_board`` for a static camera and a held board). For every new view
the calibration predicts where the camera should see the board; the difference to where it *does*
see it is the calibration's error now (a bumped camera or a moved mount shows up here). Without a
stored target, the spread of the board poses the new views imply is reported instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.calibration.capture import CaptureSample
from robopin.calibration.errors import DegenerateSamplesError
from robopin.calibration.handeye import mean_transform, predicted_cam_board
from robopin.calibration.storage import CalibrationRecord
from robopin.geometry.transforms import invert, rotation_angle

__all__ = ["VerificationReport", "verify_calibration"]


@dataclass(frozen=True)
class VerificationReport:
    """Errors of a stored calibration over new views (mm and degrees), and whether they pass."""

    name: str
    views: int
    translation_rms_mm: float
    translation_max_mm: float
    rotation_rms_deg: float
    rotation_max_deg: float
    against: str  # "stored_target" or "view_consistency"
    tolerance_mm: float
    tolerance_deg: float

    @property
    def ok(self) -> bool:
        """True when the worst view is within both tolerances."""
        return self.translation_max_mm <= self.tolerance_mm and self.rotation_max_deg <= self.tolerance_deg

    def summary(self) -> str:
        """One line for logs and the CLI."""
        verdict = "OK" if self.ok else "FAILED"
        return (
            f"calibration {self.name!r} {verdict} over {self.views} views ({self.against}): translation "
            f"rms {self.translation_rms_mm:.2f} / max {self.translation_max_mm:.2f} mm, rotation rms "
            f"{self.rotation_rms_deg:.3f} / max {self.rotation_max_deg:.3f} deg "
            f"(tolerance {self.tolerance_mm} mm, {self.tolerance_deg} deg)"
        )


def verify_calibration(
    record: CalibrationRecord,
    samples: Sequence[CaptureSample],
    *,
    tolerance_mm: float = 3.0,
    tolerance_deg: float = 0.3,
) -> VerificationReport:
    """Compare ``record`` with new board views (rejected views are skipped; at least one is needed)."""
    views = [s for s in samples if s.view.ok and s.view.T_cam_board is not None]
    if not views:
        raise DegenerateSamplesError(f"no usable board view to verify calibration {record.name!r} with")
    kind = record.kind
    if record.T_target is not None:
        predicted = [predicted_cam_board(kind, record.T_parent_child, record.T_target, s.T_base_ee) for s in views]
        measured = [s.view.T_cam_board for s in views]
        against = "stored_target"
    else:
        if len(views) < 2:
            raise DegenerateSamplesError(
                f"calibration {record.name!r} stores no board pose; checking consistency needs >= 2 views"
            )
        # Each view's board pose in the anchor frame; they agree when the calibration is right.
        anchors = []
        for s in views:
            if kind == "eye_in_hand":
                anchors.append(s.T_base_ee @ record.T_parent_child @ s.view.T_cam_board)
            else:
                anchors.append(invert(s.T_base_ee) @ record.T_parent_child @ s.view.T_cam_board)
        mean = mean_transform(np.stack(anchors))
        predicted, measured = [mean] * len(anchors), anchors
        against = "view_consistency"
    pairs = list(zip(predicted, measured, strict=True))
    translation = np.array([1000.0 * np.linalg.norm(p[:3, 3] - m[:3, 3]) for p, m in pairs])
    rotation = np.array([math.degrees(rotation_angle(p, m)) for p, m in pairs])
    return VerificationReport(
        record.name,
        len(views),
        _rms(translation),
        float(translation.max()),
        _rms(rotation),
        float(rotation.max()),
        against,
        tolerance_mm,
        tolerance_deg,
    )


def _rms(values: NDArray[np.float64]) -> float:
    return float(np.sqrt(np.mean(values**2)))
