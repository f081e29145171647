"""Where each camera is: static mounts (``T_base_cam``), wrist mounts (``T_base_ee(t) · T_ee_cam``).

A wrist camera's pose depends on the arm pose *when the frame was taken*, so arm poses go into a
:class:`PoseBuffer` indexed by time and are interpolated at the frame's timestamp; when no pose lies
within tolerance of it the lookup refuses (``stale_pose``) instead of using a pose from another moment.

Calibration files (``calibration/<camera>.yaml``) hold one transform each::

    parent_frame: base            # "base" for a static camera, "ee" for a wrist camera
    child_frame: static_cam_optical
    translation: [0.5, 0.0, 0.8]  # metres, child origin in the parent frame
    rotation: [0.0, 0.0, 0.0, 1.0]  # quaternion [x, y, z, w] (or ``rpy: [r, p, y]`` in radians)

``T_parent_child`` maps points in the camera's optical frame into the parent frame. easy_handeye2
style ``transformation: {x, y, z, qx, qy, qz, qw}`` and a 4x4 ``matrix:`` are accepted too.
:func:`mount_from_dict` turns such a mapping into a :class:`CameraMount`; files are read in one place,
:func:`robopin.calibration.load_calibration` (format version, metadata, camera checks).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.geometry.transforms import (
    _interpolate_unchecked,
    as_transform,
    rotation_angle,
    transform_from_xyz_quaternion,
    transform_from_xyz_rpy,
)

__all__ = [
    "STILL_ROTATION_RAD",
    "STILL_TRANSLATION_M",
    "CalibrationError",
    "CameraMount",
    "PoseBuffer",
    "StalePoseError",
    "mount_from_dict",
]

MountKind = Literal["static", "wrist"]
# An arm at rest, as its joint states report it: the xArm's and the FR3's datasheets give a pose repeatability of
# +-0.1 mm; ten times that (and a quarter degree) tolerates a resting arm's reported jitter, and no motion a step makes.
STILL_TRANSLATION_M = 0.001
STILL_ROTATION_RAD = math.radians(0.25)


class CalibrationError(ValueError):
    """A calibration file or mount description that cannot be used."""


class StalePoseError(LookupError):
    """No arm pose lies within tolerance of the requested time."""


@dataclass(frozen=True)
class CameraMount:
    """How a camera's optical frame hangs off the robot.

    ``kind == "static"``: ``T_parent_cam`` is ``T_base_cam``. ``kind == "wrist"``: it is ``T_ee_cam``
    and the base pose needs the arm's ``T_base_ee`` at the frame's time.
    """

    kind: MountKind
    T_parent_cam: NDArray[np.float64]
    parent_frame: str = "base"
    child_frame: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("static", "wrist"):
            raise CalibrationError(f"mount kind must be 'static' or 'wrist', got {self.kind!r}")
        object.__setattr__(self, "T_parent_cam", as_transform(self.T_parent_cam, "T_parent_cam").copy())

    def T_base_cam(self, T_base_ee: NDArray[np.float64] | None = None, validate: bool = True) -> NDArray[np.float64]:
        """Camera pose in the base frame (a wrist mount needs the arm pose at the frame's time).

        ``validate=False`` skips the rigidity check of ``T_base_ee`` (for poses from a
        :class:`PoseBuffer`, which validated them on insertion).
        """
        if self.kind == "static":
            return self.T_parent_cam
        if T_base_ee is None:
            raise StalePoseError(f"wrist camera {self.child_frame or '?'} needs an arm pose T_base_ee")
        if validate:
            T_base_ee = as_transform(T_base_ee, "T_base_ee")
        return T_base_ee @ self.T_parent_cam


def _transform_from_dict(data: Mapping[str, Any], source: str) -> NDArray[np.float64]:
    try:
        if "matrix" in data:
            return as_transform(np.asarray(data["matrix"], dtype=np.float64), f"matrix in {source}")
        if "transformation" in data:
            t = data["transformation"]
            return transform_from_xyz_quaternion([t["x"], t["y"], t["z"]], [t["qx"], t["qy"], t["qz"], t["qw"]])
        if "translation" in data and "rotation" in data:
            return transform_from_xyz_quaternion(data["translation"], data["rotation"])
        if "translation" in data and "rpy" in data:
            return transform_from_xyz_rpy(data["translation"], data["rpy"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{source}: bad transform ({exc})") from exc
    raise CalibrationError(
        f"{source}: expected 'translation' + 'rotation' (quaternion x, y, z, w) or 'rpy', "
        f"'transformation' {{x, y, z, qx, qy, qz, qw}} or a 4x4 'matrix'; got keys {sorted(data)}"
    )


def mount_from_dict(
    data: Mapping[str, Any], ee_frames: tuple[str, ...] = ("ee",), source: str = "mount"
) -> CameraMount:
    """A :class:`CameraMount` from a calibration mapping (see the module docstring for the keys)."""
    if not isinstance(data, Mapping):
        raise CalibrationError(f"{source}: expected a mapping, got {type(data).__name__}")
    parent = str(data.get("parent_frame", "base"))
    kind = data.get("mount") or ("wrist" if parent in ee_frames else "static")
    return CameraMount(kind, _transform_from_dict(data, source), parent, str(data.get("child_frame", "")))


@dataclass
class PoseBuffer:
    """Thread-safe, time-indexed buffer of arm poses ``T_base_ee`` with interpolation.

    ``lookup(t)`` interpolates between the poses around ``t`` when they are at most
    ``max_interpolation_gap_s`` apart; otherwise it uses the nearest pose. Either way the nearest pose
    must lie within ``tolerance_s`` of ``t``, else :class:`StalePoseError`. It never extrapolates.
    """

    capacity: int = 2000
    max_interpolation_gap_s: float = 0.1
    _stamps: list[float] = field(default_factory=list, init=False, repr=False)
    _poses: list[NDArray[np.float64]] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.capacity < 2:
            raise ValueError(f"capacity must be at least 2 poses, got {self.capacity}")
        if not self.max_interpolation_gap_s > 0:
            raise ValueError(f"max_interpolation_gap_s must be positive, got {self.max_interpolation_gap_s}")

    def __len__(self) -> int:
        return len(self._stamps)

    def add(self, stamp_s: float, T_base_ee: ArrayLike) -> None:
        """Insert the arm pose at ``stamp_s`` (seconds, the frames' clock); out-of-order stamps are fine."""
        if not math.isfinite(stamp_s):
            raise ValueError(f"stamp_s must be finite, got {stamp_s}")
        T = as_transform(T_base_ee, "T_base_ee").copy()
        with self._lock:
            i = bisect.bisect_right(self._stamps, stamp_s)
            if i > 0 and self._stamps[i - 1] == stamp_s:
                self._poses[i - 1] = T
                return
            self._stamps.insert(i, stamp_s)
            self._poses.insert(i, T)
            if len(self._stamps) > self.capacity:
                del self._stamps[0], self._poses[0]

    def forget_before(self, stamp_s: float) -> None:
        """Drop the poses taken before ``stamp_s``: the arm was moved there without motion (a simulated cell reset
        between trials teleports it), so no frame after then may be interpolated towards an older pose."""
        with self._lock:
            keep = bisect.bisect_left(self._stamps, stamp_s)
            del self._stamps[:keep], self._poses[:keep]

    def latest(self) -> tuple[float, NDArray[np.float64]] | None:
        """``(stamp_s, T_base_ee)`` of the newest pose, or None when empty."""
        with self._lock:
            if not self._stamps:
                return None
            return self._stamps[-1], self._poses[-1].copy()

    def why_not_still(self, start_s: float, end_s: float, tolerance_s: float) -> str:
        """Why the poses do not show the arm still from ``start_s`` to ``end_s`` ("" when they do).

        Still: the poses at both ends (:meth:`lookup`, ``tolerance_s``) and every pose received between them lie
        within :data:`STILL_TRANSLATION_M` and :data:`STILL_ROTATION_RAD` of the pose at ``start_s``. A motion
        made and undone between two received poses is not seen; robopin moves the arm only on a command of its
        own, sent after the step that asks this.
        """
        try:
            first = self.lookup(start_s, tolerance_s)
            last = self.lookup(end_s, tolerance_s)
        except StalePoseError as error:
            return str(error)
        with self._lock:
            between = self._poses[bisect.bisect_right(self._stamps, start_s):bisect.bisect_left(self._stamps, end_s)]
        shift = max(float(np.linalg.norm(T[:3, 3] - first[:3, 3])) for T in [last, *between])
        turn = max(rotation_angle(first, T) for T in [last, *between])
        if shift > STILL_TRANSLATION_M or turn > STILL_ROTATION_RAD:
            return (f"the arm moved {shift * 1000:.1f} mm / {math.degrees(turn):.2f} deg between t={start_s:.3f} s and "
                    f"t={end_s:.3f} s (still: within {STILL_TRANSLATION_M * 1000:.0f} mm / "
                    f"{math.degrees(STILL_ROTATION_RAD):.2f} deg)")
        return ""

    def lookup(self, stamp_s: float, tolerance_s: float) -> NDArray[np.float64]:
        """Arm pose at ``stamp_s`` (see the class docstring); raises :class:`StalePoseError`."""
        with self._lock:
            stamps, poses = self._stamps, self._poses
            if not stamps:
                raise StalePoseError(f"no arm pose received yet (wanted one at t={stamp_s:.3f} s)")
            i = bisect.bisect_left(stamps, stamp_s)
            before = i - 1 if i > 0 else None
            after = i if i < len(stamps) else None
            if after is not None and stamps[after] == stamp_s:
                return poses[after].copy()
            candidates = [j for j in (before, after) if j is not None]
            nearest = min(candidates, key=lambda j: abs(stamps[j] - stamp_s))
            offset = abs(stamps[nearest] - stamp_s)
            if offset > tolerance_s:
                raise StalePoseError(
                    f"nearest arm pose is {offset * 1000:.1f} ms from the frame at t={stamp_s:.3f} s; "
                    f"tolerance is {tolerance_s * 1000:.1f} ms "
                    f"(poses span {stamps[0]:.3f}..{stamps[-1]:.3f} s)"
                )
            if before is not None and after is not None:
                gap = stamps[after] - stamps[before]
                if gap <= self.max_interpolation_gap_s:
                    alpha = (stamp_s - stamps[before]) / gap
                    # Both poses were validated on add(); skip re-validating on every lookup.
                    return _interpolate_unchecked(poses[before], poses[after], alpha)
            return poses[nearest].copy()
