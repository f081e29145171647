"""In-process stages for the loop: observe from a snapshot source, project with ``robopin.geometry``.

These are what the loop uses where no ROS graph runs (tests, benchmarks, the simulator, a future
single-process runner); ``task_node`` has its own ROS versions of the same protocols.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from robopin.cameras import MultiViewSnapshot, SnapshotError
from robopin.geometry import PointRequest, Projector, Target, ViewData
from robopin.reasoning.errors import TaskRefusal
from robopin.reasoning.protocols import Observation
from robopin.vlm.base import ViewImage


def observation_from_snapshot(snapshot: MultiViewSnapshot) -> Observation:
    """The model's view of a snapshot: each frame's color as ``ViewImage`` in image-index order."""
    views = tuple(
        ViewImage(frame.color, name=name, img_idx=index)
        for index, (name, frame) in enumerate(zip(snapshot.views, snapshot.ordered_frames(), strict=True))
    )
    return Observation(views, snapshot.timestamp_s, source=snapshot)


class SnapshotObserver:
    """Observes by calling ``take_snapshot`` (e.g. ``SnapshotSynchronizer.snapshot``); names its refusals."""

    def __init__(self, take_snapshot: Callable[[], MultiViewSnapshot]) -> None:
        self.take_snapshot = take_snapshot

    def observe(self) -> Observation:
        """Take a snapshot; a camera refusal becomes the task's refusal with the same name."""
        try:
            snapshot = self.take_snapshot()
        except SnapshotError as error:
            raise TaskRefusal(error.reason, str(error)) from None
        return observation_from_snapshot(snapshot)


class SnapshotProjector:
    """Projects with a ``robopin.geometry.Projector`` on the depth of the observation's own snapshot.

    Wrist views need the arm pose at the frame time: the snapshot's ``T_base_ee`` (when it was taken
    with a pose source) is added to the projector's pose buffer first. ``check_age`` refuses frames
    older than the projector's ``max_frame_age_s`` at projection time.
    """

    def __init__(self, projector: Projector, *, check_age: bool = False) -> None:
        self.projector = projector
        self.check_age = check_age

    def project(self, requests: Sequence[PointRequest], observation: Observation) -> list[Target]:
        """One target per request, in order (refused targets carry their reason)."""
        snapshot = observation.source
        if not isinstance(snapshot, MultiViewSnapshot):
            raise TaskRefusal(
                "projection_unavailable",
                f"the observation carries no snapshot with depth (got {type(snapshot).__name__})",
            )
        frames: dict[int, ViewData] = {}
        for index, name in enumerate(snapshot.views):
            frame = snapshot.frames[name]
            if frame.depth_m is None:
                continue
            # A camera leaving depth unaligned (RealSense align_depth: false) is registered here, for the
            # one frame a step projects from.
            frames[index] = ViewData(frame.aligned_depth_m(), frame.intrinsics, frame.timestamp_s)
            if snapshot.T_base_ee is not None and name in snapshot.T_base_ee and math.isfinite(frame.timestamp_s):
                self.projector.pose_buffer.add(frame.timestamp_s, snapshot.T_base_ee[name])
        if not frames:
            raise TaskRefusal("projection_unavailable", f"no view of {list(snapshot.views)} has depth")
        return self.projector.project(list(requests), frames, now_s=time.time() if self.check_age else None)
