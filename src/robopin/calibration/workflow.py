"""The calibration steps every front end shares (CLI, ROS node, benchmark): samples in, a stored file out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from robopin.calibration.board import BoardConfig
from robopin.calibration.capture import CaptureSample
from robopin.calibration.errors import CalibrationFileError, DegenerateSamplesError
from robopin.calibration.handeye import Corners, HandEyeResult, MountKind, SolverConfig, solve_hand_eye
from robopin.calibration.storage import CalibrationRecord, camera_info_dict, record_from_result
from robopin.geometry.camera_model import CameraModel
from robopin.geometry.transforms import transform_from_xyz_quaternion, transform_to_xyz_quaternion

__all__ = ["load_samples", "save_samples", "solve_samples"]


def solve_samples(
    name: str,
    kind: MountKind,
    samples: Sequence[CaptureSample],
    camera: CameraModel,
    *,
    board: BoardConfig,
    serial: str = "",
    child_frame: str = "",
    solver: SolverConfig | None = None,
) -> tuple[HandEyeResult, CalibrationRecord]:
    """Solve the mount from the accepted samples and build the record to store (not yet written)."""
    usable = [s for s in samples if s.view.ok]
    rejected = len(samples) - len(usable)
    try:
        corners = None
        if all(s.view.ideal_points is not None and s.view.object_points is not None for s in usable):
            corners = [Corners(s.view.object_points, s.view.ideal_points, camera.K) for s in usable]
        result = solve_hand_eye(
            kind, [s.T_base_ee for s in usable], [s.view.T_cam_board for s in usable], solver, corners
        )
    except DegenerateSamplesError as error:
        if rejected:
            raise DegenerateSamplesError(f"{error} ({rejected} of {len(samples)} views were rejected)") from error
        raise
    reprojection = [s.view.reprojection_rms_px for s in usable]
    notes = f"{len(samples)} views captured, {rejected} rejected"
    record = record_from_result(
        name,
        result,
        camera_info_dict(camera, name=name, serial=serial, frame_id=child_frame or f"{name}_optical"),
        board.to_dict(),
        child_frame=child_frame,
        notes=notes,
    )
    record.residuals["reprojection_rms_px_max"] = round(float(max(reprojection)), 4)
    return result, record


def save_samples(path: str | Path, kind: MountKind, samples: Sequence[CaptureSample]) -> Path:
    """Keep the raw pairs (arm pose, board pose) so a calibration can be solved again offline."""
    rows = []
    for s in samples:
        row: dict = {"index": s.index, "ok": s.view.ok}
        xyz, q = transform_to_xyz_quaternion(s.T_base_ee)
        row["T_base_ee"] = {"translation": xyz.tolist(), "rotation": q.tolist()}
        if s.view.T_cam_board is not None and s.view.ok:
            xyz, q = transform_to_xyz_quaternion(s.view.T_cam_board)
            row["T_cam_board"] = {"translation": xyz.tolist(), "rotation": q.tolist()}
            row["reprojection_rms_px"] = round(s.view.reprojection_rms_px, 4)
        else:
            row["rejection"] = s.view.rejection.value if s.view.rejection else ""
            row["message"] = s.view.message
        rows.append(row)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"kind": kind, "samples": rows}, sort_keys=False))
    return path


def load_samples(path: str | Path) -> tuple[MountKind, list[CaptureSample]]:
    """Read pairs written by :func:`save_samples` (rejected views come back rejected)."""
    from robopin.calibration.board import BoardView
    from robopin.calibration.errors import Rejection

    try:
        data = yaml.safe_load(Path(path).read_text())
        samples = []
        for row in data["samples"]:
            T_base_ee = transform_from_xyz_quaternion(row["T_base_ee"]["translation"], row["T_base_ee"]["rotation"])
            if row.get("ok"):
                T = transform_from_xyz_quaternion(row["T_cam_board"]["translation"], row["T_cam_board"]["rotation"])
                view = BoardView(True, T_cam_board=T, reprojection_rms_px=float(row.get("reprojection_rms_px", 0.0)))
            else:
                view = BoardView(False, Rejection(row.get("rejection") or "board_not_found"), row.get("message", ""))
            samples.append(CaptureSample(int(row["index"]), T_base_ee, view))
        kind = data["kind"]
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as error:
        raise CalibrationFileError(f"cannot read calibration samples {path}: {error}") from error
    if kind not in ("eye_in_hand", "eye_to_hand"):
        raise CalibrationFileError(f"{path}: kind must be eye_in_hand or eye_to_hand, got {kind!r}")
    return kind, samples
