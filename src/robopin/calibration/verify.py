"""Checking a stored calibration against fresh views of the board it was made with.

The stored file holds the board pose the calibration implied (``target``: ``T_base_board`` for a wrist
camera over a fixed board, ``T_ee_board`` for a static camera and a held board). For every new view
the calibration predicts where the camera should see the board; the difference to where it *does*
see it is the calibration's error now (a bumped camera or a moved mount shows up here), judged in
pixels (the detected corners against the corners reprojected from the prediction) and in millimetres
(the centre of the corners seen). A single view's PnP rotation is too noisy to judge by (tenths of a
degree at 640x480), so rotation is reported but decides only when no corners are at hand. Without a
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
    reprojection_rms_px: float = math.nan
    reprojection_max_px: float = math.nan
    tolerance_px: float = 2.0

    @property
    def ok(self) -> bool:
        """True when the worst view is within tolerance: mm and pixels (mm and degrees without corners)."""
        if self.translation_max_mm > self.tolerance_mm:
            return False
        if math.isfinite(self.reprojection_max_px):
            return self.reprojection_max_px <= self.tolerance_px
        return self.rotation_max_deg <= self.tolerance_deg

    def summary(self) -> str:
        """One line for logs and the CLI."""
        verdict = "OK" if self.ok else "FAILED"
        pixels = ""
        if math.isfinite(self.reprojection_max_px):
            pixels = (
                f"reprojection rms {self.reprojection_rms_px:.2f} / max {self.reprojection_max_px:.2f} px "
                f"(tolerance {self.tolerance_px} px), "
            )
        return (
            f"calibration {self.name!r} {verdict} over {self.views} views ({self.against}): {pixels}board "
            f"position rms {self.translation_rms_mm:.2f} / max {self.translation_max_mm:.2f} mm "
            f"(tolerance {self.tolerance_mm} mm), rotation rms {self.rotation_rms_deg:.3f} / max "
            f"{self.rotation_max_deg:.3f} deg"
        )


def verify_calibration(
    record: CalibrationRecord,
    samples: Sequence[CaptureSample],
    *,
    tolerance_mm: float = 3.0,
    tolerance_deg: float = 0.3,
    tolerance_px: float = 2.0,
    K: NDArray[np.float64] | None = None,
) -> VerificationReport:
    """Compare ``record`` with new board views (rejected views are skipped; at least one is needed).

    ``K`` (the camera matrix the views were detected with) enables the pixel check.
    """
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
    # Where the centre of the corners seen lands (the board origin is a corner: a lever for noise).
    centres = [s.view.object_points.mean(axis=0) if s.view.object_points is not None else np.zeros(3) for s in views]
    translation = np.array(
        [
            1000.0 * np.linalg.norm((p[:3, :3] - m[:3, :3]) @ c + p[:3, 3] - m[:3, 3])
            for (p, m), c in zip(pairs, centres, strict=True)
        ]
    )
    rotation = np.array([math.degrees(rotation_angle(p, m)) for p, m in pairs])
    pixel_rms = pixel_max = math.nan
    if K is not None and against == "stored_target" and all(s.view.ideal_points is not None for s in views):
        errors = []
        for (p, _), s in zip(pairs, views, strict=True):
            q = s.view.object_points @ p[:3, :3].T + p[:3, 3]
            uv = q[:, :2] / q[:, 2:3] * np.array([K[0, 0], K[1, 1]]) + np.array([K[0, 2], K[1, 2]])
            errors.append(np.linalg.norm(uv - s.view.ideal_points, axis=1))
        all_errors = np.concatenate(errors)
        pixel_rms, pixel_max = _rms(all_errors), float(max(float(np.sqrt(np.mean(e**2))) for e in errors))
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
        pixel_rms,
        pixel_max,
        tolerance_px,
    )


def _rms(values: NDArray[np.float64]) -> float:
    return float(np.sqrt(np.mean(values**2)))
