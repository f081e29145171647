"""Calibration files: one YAML per camera in ``calibration/``, with the transform and how it was made.

The transform keys are the ones :func:`robopin.geometry.mount_from_dict` reads, so the projection
layer loads a file written here directly. The direction is stated in the file itself::

    parent_frame: ee                 # "ee": wrist camera (eye-in-hand); "base": static camera
    child_frame: wrist_optical
    direction: T_parent_child maps points in child_frame into parent_frame; translation is the
      child_frame origin in parent_frame
    translation: [x, y, z]           # metres
    rotation: [qx, qy, qz, qw]       # quaternion [x, y, z, w]
    method, date, sample_count, residuals, camera (serial + intrinsics used), board, target

``target`` is the board pose the calibration implies (``T_base_board`` for a wrist calibration with a
fixed board, ``T_ee_board`` for a static one with a held board); ``verify`` re-measures against it.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from robopin.calibration.errors import CalibrationFileError
from robopin.calibration.handeye import HandEyeResult
from robopin.geometry.camera_model import CameraModel
from robopin.geometry.extrinsics import CameraMount, mount_from_dict
from robopin.geometry.transforms import as_transform, transform_from_xyz_quaternion, transform_to_xyz_quaternion

__all__ = [
    "DIRECTION_TEXT",
    "CalibrationRecord",
    "camera_info_dict",
    "load_calibration",
    "load_mount_for_view",
    "record_from_result",
    "save_calibration",
]

FORMAT_VERSION = 1
DIRECTION_TEXT = (
    "T_parent_child maps points in child_frame into parent_frame; translation is the child_frame origin in parent_frame"
)
# A stored calibration is refused for a camera whose focal length or principal point differs by more
# than this (pixels): a different resolution or a different unit has other intrinsics.
INTRINSICS_TOLERANCE_PX = 2.0


def camera_info_dict(model: CameraModel, name: str = "", serial: str = "", frame_id: str = "") -> dict[str, Any]:
    """The camera block of a calibration file: identity and the intrinsics the calibration used."""
    return {
        "name": name,
        "serial": serial,
        "frame_id": frame_id,
        "width": model.width,
        "height": model.height,
        "fx": round(model.fx, 6),
        "fy": round(model.fy, 6),
        "cx": round(model.cx, 6),
        "cy": round(model.cy, 6),
        "distortion_model": model.distortion_model,
        "coeffs": [float(c) for c in model.coeffs],
    }


def _pose_dict(T: NDArray[np.float64]) -> dict[str, list[float]]:
    xyz, quaternion = transform_to_xyz_quaternion(T)
    return {"translation": [round(float(v), 9) for v in xyz], "rotation": [round(float(v), 12) for v in quaternion]}


@dataclass
class CalibrationRecord:
    """One stored calibration (see the module docstring for the file layout)."""

    name: str
    parent_frame: str
    child_frame: str
    T_parent_child: NDArray[np.float64]
    method: str
    sample_count: int
    residuals: dict[str, Any] = field(default_factory=dict)
    camera: dict[str, Any] = field(default_factory=dict)
    board: dict[str, Any] = field(default_factory=dict)
    target_frame: str = ""
    T_target: NDArray[np.float64] | None = None
    date: str = ""
    notes: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise CalibrationFileError("a calibration needs a name (the camera view it belongs to)")
        if not self.parent_frame or not self.child_frame or self.parent_frame == self.child_frame:
            raise CalibrationFileError(
                f"parent_frame and child_frame must be two different frame names, got "
                f"{self.parent_frame!r} and {self.child_frame!r}"
            )
        self.T_parent_child = as_transform(self.T_parent_child, "T_parent_child").copy()
        if self.T_target is not None:
            self.T_target = as_transform(self.T_target, "T_target").copy()
        if not self.date:
            self.date = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()

    @property
    def kind(self) -> str:
        """``eye_in_hand`` when the camera hangs off the end effector, else ``eye_to_hand``."""
        return "eye_in_hand" if self.parent_frame == "ee" else "eye_to_hand"

    def camera_mount(self) -> CameraMount:
        """The :class:`~robopin.geometry.CameraMount` the projection layer uses."""
        return mount_from_dict(self.to_dict(), source=f"calibration {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The YAML mapping (keys in a reading order)."""
        data: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "name": self.name,
            "kind": self.kind,
            "parent_frame": self.parent_frame,
            "child_frame": self.child_frame,
            "direction": DIRECTION_TEXT,
            **_pose_dict(self.T_parent_child),
            "method": self.method,
            "date": self.date,
            "sample_count": int(self.sample_count),
            "residuals": self.residuals,
            "camera": self.camera,
            "board": self.board,
        }
        if self.T_target is not None:
            data["target"] = {"parent_frame": self.target_frame, "child_frame": "board", **_pose_dict(self.T_target)}
        if self.notes:
            data["notes"] = self.notes
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "calibration") -> CalibrationRecord:
        """Parse a mapping written by :meth:`to_dict` (bare transform files, as geometry reads, work too)."""
        if not isinstance(data, dict):
            raise CalibrationFileError(f"{source}: expected a mapping, got {type(data).__name__}")
        version = data.get("format", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise CalibrationFileError(
                f"{source}: format {version!r} is not supported (this reader knows {FORMAT_VERSION})"
            )
        try:
            mount = mount_from_dict(data, source=source)
        except ValueError as error:
            raise CalibrationFileError(str(error)) from error
        target = data.get("target")
        T_target = None
        target_frame = ""
        if target is not None:
            try:
                T_target = transform_from_xyz_quaternion(target["translation"], target["rotation"])
                target_frame = str(target["parent_frame"])
            except (KeyError, TypeError, ValueError) as error:
                raise CalibrationFileError(f"{source}: bad target block ({error})") from error
        kind = data.get("kind")
        if kind is not None and kind != ("eye_in_hand" if mount.parent_frame == "ee" else "eye_to_hand"):
            raise CalibrationFileError(
                f"{source}: kind {kind!r} contradicts parent_frame {mount.parent_frame!r} "
                "(eye_in_hand calibrations hang off 'ee', eye_to_hand off 'base')"
            )
        return cls(
            name=str(data.get("name") or Path(source).stem),
            parent_frame=mount.parent_frame,
            child_frame=mount.child_frame or f"{Path(source).stem}_optical",
            T_parent_child=mount.T_parent_cam,
            method=str(data.get("method", "unknown")),
            sample_count=int(data.get("sample_count", 0)),
            residuals=dict(data.get("residuals") or {}),
            camera=dict(data.get("camera") or {}),
            board=dict(data.get("board") or {}),
            target_frame=target_frame,
            T_target=T_target,
            date=str(data.get("date", "")),
            notes=str(data.get("notes", "")),
        )

    def check_camera(self, model: CameraModel | None = None, serial: str = "") -> None:
        """Refuse (CalibrationFileError) when used with another camera unit or other intrinsics."""
        stored_serial = str(self.camera.get("serial") or "")
        if serial and stored_serial and serial != stored_serial:
            raise CalibrationFileError(
                f"calibration {self.name!r} was made with camera serial {stored_serial!r}, "
                f"but this camera is {serial!r}: recalibrate or pick the right file"
            )
        if model is None or "fx" not in self.camera:
            return
        if (model.width, model.height) != (self.camera.get("width"), self.camera.get("height")):
            raise CalibrationFileError(
                f"calibration {self.name!r} used {self.camera.get('width')}x{self.camera.get('height')} images, "
                f"the camera now streams {model.width}x{model.height}"
            )
        for key in ("fx", "fy", "cx", "cy"):
            stored, now = float(self.camera[key]), float(getattr(model, key))
            if not math.isclose(stored, now, abs_tol=INTRINSICS_TOLERANCE_PX):
                raise CalibrationFileError(
                    f"calibration {self.name!r} used {key}={stored:.2f} px, the camera reports {now:.2f} px "
                    f"(tolerance {INTRINSICS_TOLERANCE_PX} px)"
                )


def record_from_result(
    name: str,
    result: HandEyeResult,
    camera: dict[str, Any],
    board: dict[str, Any] | None = None,
    *,
    child_frame: str = "",
    notes: str = "",
) -> CalibrationRecord:
    """A record for a solved mount; ``child_frame`` defaults to ``<name>_optical``."""
    residuals: dict[str, Any] = {"fit": result.fit.to_dict()}
    if result.heldout is not None:
        residuals["heldout"] = result.heldout.to_dict()
    residuals["methods"] = result.per_method
    return CalibrationRecord(
        name=name,
        parent_frame=result.mount_frame,
        child_frame=child_frame or f"{name}_optical",
        T_parent_child=result.T_mount_cam,
        method=result.method,
        sample_count=result.sample_count,
        residuals=residuals,
        camera=camera,
        board=dict(board or {}),
        target_frame="base" if result.kind == "eye_in_hand" else "ee",
        T_target=result.T_anchor_board,
        notes=notes,
    )


class _Dumper(yaml.SafeDumper):
    """Short numeric lists on one line, mappings in insertion order."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = len(data) <= 16 and all(isinstance(v, (int, float)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def save_calibration(record: CalibrationRecord, path: str | Path) -> Path:
    """Write ``record`` as YAML (atomically: a reader never sees half a file); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# robopin camera calibration '{record.name}' ({record.kind}): T_{record.parent_frame}_{record.child_frame}\n"
        "# Written by 'robopin calibrate'; loaded by the projection layer (robopin.calibration.load_mount_for_view).\n"
    )
    text = header + yaml.dump(record.to_dict(), Dumper=_Dumper, sort_keys=False, width=120)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def load_calibration(path: str | Path) -> CalibrationRecord:
    """Read a calibration YAML (raises :class:`CalibrationFileError` naming the file and the problem)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise CalibrationFileError(f"cannot read calibration file {path}: {error}") from error
    except yaml.YAMLError as error:
        raise CalibrationFileError(f"calibration file {path} is not valid YAML: {error}") from error
    return CalibrationRecord.from_dict(data, source=str(path))


def load_mount_for_view(
    calibration_dir: str | Path, view: str, camera: CameraModel | None = None, serial: str = ""
) -> CameraMount:
    """The projection layer's hook: ``<calibration_dir>/<view>.yaml`` as a mount, checked against the
    camera it will serve (serial and intrinsics, when given)."""
    record = load_calibration(Path(calibration_dir) / f"{view}.yaml")
    record.check_camera(camera, serial)
    return record.camera_mount()
