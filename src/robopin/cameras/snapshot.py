"""Multi-view snapshots for the planner: one frame per configured view, all taken at (nearly) the same time.

Feed every view's frames into a :class:`SnapshotSynchronizer` as they arrive (from cameras in-process or
from camera topics); ``snapshot()`` returns the newest set with one frame per view whose timestamps lie
within ``sync_tolerance_s`` of each other (approximate-time matching, as ``message_filters`` would do),
each with the arm pose at that frame's time when a pose source is given. It refuses, with a named
reason, rather than hand the planner views of two different worlds:

* ``stale_frame`` — a view has no frame, or the frames are older than ``max_age_s``;
* ``views_out_of_sync`` — the views are fresh but no set lies within ``sync_tolerance_s``;
* ``stale_arm_pose`` — no arm pose lies within ``arm_pose_tolerance_s`` of a frame's time;
* ``camera_qos_mismatch`` — raised by a topic subscriber (robopin_ros.camera_snapshot) for a view without
  frames whose publisher offers a QoS its subscription cannot match.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from robopin.cameras.base import CameraError, Frame
from robopin.settings import check_fields, positive

__all__ = [
    "SNAPSHOT_REFUSALS",
    "MultiViewSnapshot",
    "PoseSource",
    "SnapshotConfig",
    "SnapshotError",
    "SnapshotSynchronizer",
]

SNAPSHOT_REFUSALS = ("stale_frame", "views_out_of_sync", "stale_arm_pose", "camera_qos_mismatch")


class SnapshotError(CameraError):
    """No usable multi-view snapshot; ``reason`` is one of ``SNAPSHOT_REFUSALS``, ``views`` the culprits."""

    def __init__(self, reason: str, message: str, views: Sequence[str] = ()) -> None:
        if reason not in SNAPSHOT_REFUSALS:
            raise ValueError(f"unknown snapshot refusal {reason!r}; expected one of {SNAPSHOT_REFUSALS}")
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.views = tuple(views)


class PoseSource(Protocol):
    """Anything that gives the arm pose ``T_base_ee`` at a time (e.g. ``robopin.geometry.PoseBuffer``);
    raises ``LookupError`` when it has none within ``tolerance_s``."""

    def lookup(self, stamp_s: float, tolerance_s: float) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True)
class SnapshotConfig:
    """Tolerances of a multi-view snapshot.

    Attributes:
        views: view names in image-index order (static camera = index 0, wrist = 1, ... by config).
        sync_tolerance_s: the largest spread of timestamps inside one snapshot. One frame period at
            30 Hz (33 ms) would allow mixing neighbouring frames; 20 ms does not.
        max_age_s: the oldest a snapshot's frames may be when it is taken.
        history: frames kept per view to search for a synchronised set.
        arm_pose_tolerance_s: how far the nearest arm pose may be from a frame's time.
    """

    views: tuple[str, ...]
    sync_tolerance_s: float = 0.02
    max_age_s: float = 0.5
    history: int = 30
    arm_pose_tolerance_s: float = 0.05

    def __post_init__(self) -> None:
        views = tuple(self.views)
        object.__setattr__(self, "views", views)
        if not views or len(set(views)) != len(views) or not all(isinstance(v, str) and v for v in views):
            raise ValueError(f"views must be distinct non-empty names, got {list(views)}")
        check_fields(self, ("sync_tolerance_s", "max_age_s", "arm_pose_tolerance_s"), positive, ValueError,
                     "a positive number of seconds")
        if self.history < 1:
            raise ValueError(f"history must be at least 1 frame, got {self.history!r}")


@dataclasses.dataclass(frozen=True)
class MultiViewSnapshot:
    """One synchronised set: ``frames[view]`` and, when a pose source was given, ``T_base_ee[view]``
    (the arm pose at that frame's timestamp). ``views`` keeps the configured image-index order."""

    views: tuple[str, ...]
    frames: Mapping[str, Frame]
    T_base_ee: Mapping[str, np.ndarray] | None
    spread_s: float
    age_s: float

    @property
    def timestamp_s(self) -> float:
        """The newest frame time in the set."""
        return max(f.timestamp_s for f in self.frames.values())

    def ordered_frames(self) -> list[Frame]:
        """Frames in image-index order."""
        return [self.frames[v] for v in self.views]


class SnapshotSynchronizer:
    """Keeps recent frames of every view and picks the newest synchronised set (thread-safe)."""

    def __init__(
        self,
        config: SnapshotConfig,
        *,
        poses: PoseSource | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: now on the frames' clock (the cell's: wall time for a real one, the simulator's for a
        simulated one; a ROS node's clock is either)."""
        self.config = config
        self.poses = poses
        self._clock = clock
        self._frames: dict[str, collections.deque[Frame]] = {
            v: collections.deque(maxlen=config.history) for v in config.views
        }
        self._lock = threading.Lock()

    def add(self, view: str, frame: Frame) -> None:
        """Record a new frame of ``view`` (frames may arrive out of order)."""
        try:
            queue = self._frames[view]
        except KeyError:
            raise KeyError(f"unknown view {view!r}; configured views are {list(self.config.views)}") from None
        with self._lock:
            if queue and frame.timestamp_s < queue[-1].timestamp_s:
                items = sorted([*queue, frame], key=lambda f: f.timestamp_s)
                queue.clear()
                queue.extend(items[-self.config.history:])
            else:
                queue.append(frame)

    def latest(self, view: str) -> Frame | None:
        """The newest frame of ``view``, or None."""
        with self._lock:
            queue = self._frames[view]
            return queue[-1] if queue else None

    def snapshot(self, now_s: float | None = None) -> MultiViewSnapshot:
        """The newest synchronised, fresh set of frames; raises :class:`SnapshotError` otherwise."""
        now_s = self._clock() if now_s is None else now_s
        config = self.config
        with self._lock:
            history = {v: list(q) for v, q in self._frames.items()}
        missing = [v for v, frames in history.items() if not frames]
        if missing:
            raise SnapshotError("stale_frame", f"no frame yet from view(s) {missing}", missing)
        ages = {v: now_s - frames[-1].timestamp_s for v, frames in history.items()}
        stale = {v: age for v, age in ages.items() if age > config.max_age_s}
        if stale:
            ages = ", ".join(f"{v} {age:.3f} s" for v, age in stale.items())
            raise SnapshotError("stale_frame", f"newest frame too old ({ages} old; max_age_s "
                                               f"{config.max_age_s:g} s)", list(stale))
        # Only fresh frames may form a set: if they do not match, the views are out of sync now, even
        # if some older set matched.
        fresh = {v: [f for f in frames if now_s - f.timestamp_s <= config.max_age_s]
                 for v, frames in history.items()}
        chosen, spread = self._newest_synchronised(fresh)
        if chosen is None:
            latest = ", ".join(f"{v} {frames[-1].timestamp_s:.3f}" for v, frames in history.items())
            raise SnapshotError(
                "views_out_of_sync",
                f"no set of fresh frames lies within {config.sync_tolerance_s * 1000:.0f} ms (best spread "
                f"{spread * 1000:.0f} ms; latest stamps {latest})",
                list(config.views),
            )
        age = now_s - min(f.timestamp_s for f in chosen.values())
        poses = None
        if self.poses is not None:
            poses = {}
            for view, frame in chosen.items():
                try:
                    poses[view] = np.asarray(self.poses.lookup(frame.timestamp_s, config.arm_pose_tolerance_s))
                except LookupError as exc:
                    raise SnapshotError("stale_arm_pose", f"view {view!r}: {exc}", [view]) from exc
        true_spread = max(f.timestamp_s for f in chosen.values()) - min(f.timestamp_s for f in chosen.values())
        return MultiViewSnapshot(views=config.views, frames=chosen, T_base_ee=poses, spread_s=true_spread,
                                 age_s=age)

    def _newest_synchronised(self, history: dict[str, list[Frame]]) -> tuple[dict[str, Frame] | None, float]:
        # Each frame in turn (newest first) is a pivot; every other view contributes its frame nearest
        # the pivot. The first set within tolerance is the newest one. Frames per view are few (history),
        # so the quadratic search is cheap.
        pivots = sorted(((f.timestamp_s, v, f) for v, frames in history.items() for f in frames),
                        key=lambda item: item[0], reverse=True)
        best_spread = math.inf
        for stamp, view, frame in pivots:
            chosen = {view: frame}
            for other, frames in history.items():
                if other != view:
                    chosen[other] = min(frames, key=lambda f: abs(f.timestamp_s - stamp))
            stamps = [f.timestamp_s for f in chosen.values()]
            spread = max(stamps) - min(stamps)
            best_spread = min(best_spread, spread)
            if spread <= self.config.sync_tolerance_s:
                return {v: chosen[v] for v in self.config.views}, spread
        return None, best_spread
