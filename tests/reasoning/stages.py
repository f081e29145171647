"""Test stages for the reasoning loop that need no simulator: a scripted model, a synthetic tabletop
observation with real projection, and an arm that records what it was asked to do.

- :class:`ScriptedBackend` is a real :class:`~robopin.vlm.base.VLMBackend` that answers from a script
  instead of a GPU model (the one edge that cannot run here); each entry is a text, an exception to
  raise, or a function of the request's messages.
- :func:`tabletop_stages` builds an observer and a ``robopin.geometry`` projector for a camera 1 m
  above a flat table (so every pixel has a known 3D point), with optional depth holes.
- :class:`RecordingArm` is the outermost edge (the arm): it records each pick-and-place.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from robopin.cameras import Frame, MultiViewSnapshot
from robopin.geometry import CameraModel, CameraMount, Projector, Target, ViewConfig, make_transform
from robopin.reasoning.protocols import MotionOutcome
from robopin.reasoning.snapshot_stages import SnapshotObserver, SnapshotProjector
from robopin.vlm.base import ChatMessage, GenerationResult, Sample, SamplingParams, VLMBackend, VLMConfig, YesNoScore

WIDTH, HEIGHT = 640, 480
CAMERA_HEIGHT_M = 1.0
CAMERA_XY = (0.5, 0.0)


@dataclass(kw_only=True)
class ScriptedBackendConfig(VLMConfig):
    """A scripted model: ``texts`` are answered in order (the last one repeats); a tuple entry gives one
    text per sample of an ``n`` > 1 request."""

    type: ClassVar[str] = "scripted"
    model: str = "scripted"
    texts: tuple[Any, ...] = ()
    delay_s: float = 0.0


class ScriptedBackend(VLMBackend):
    """Answers each request with the next entry of the script; records every request."""

    config_class = ScriptedBackendConfig
    config: ScriptedBackendConfig

    def __init__(self, config: ScriptedBackendConfig) -> None:
        super().__init__(config)
        self.requests: list[list[ChatMessage]] = []
        self._lock = threading.Lock()

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        n = params.n
        with self._lock:
            index = min(len(self.requests), len(self.config.texts) - 1)
            self.requests.append(list(messages))
        if self.config.delay_s:
            time.sleep(self.config.delay_s)
        entry = self.config.texts[index]
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, tuple):
            texts = [str(entry[k % len(entry)]) for k in range(n)]
        else:
            texts = [entry(messages) if callable(entry) else str(entry)] * n
        return GenerationResult(tuple(Sample(t) for t in texts), self.config.model, latency_s=0.001)

    def score_yes_no(self, messages, *, yes="yes", no="no") -> YesNoScore:
        return YesNoScore(0.0, -5.0)

    def prompt(self, index: int) -> str:
        """The text of request ``index``."""
        return "".join(m.text for m in self.requests[index])


def scripted(*texts: Any, convention: str = "norm1000", delay_s: float = 0.0) -> ScriptedBackend:
    return ScriptedBackend(ScriptedBackendConfig(texts=tuple(texts), point_convention=convention, delay_s=delay_s))


# ---------------------------------------------------------------------------- a synthetic tabletop
CAMERA = CameraModel(WIDTH, HEIGHT, 500.0, 500.0, WIDTH / 2, HEIGHT / 2)
# Optical frame looking straight down: x right = base -y, y down = base -x, z forward = base -z.
T_BASE_CAM = make_transform(
    np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]), [CAMERA_XY[0], CAMERA_XY[1], CAMERA_HEIGHT_M]
)


def table_point(u: float, v: float) -> np.ndarray:
    """The base-frame point of the table (z = 0) seen at pixel (u, v)."""
    ray = np.array([(u - CAMERA.cx) / CAMERA.fx, (v - CAMERA.cy) / CAMERA.fy, 1.0]) * CAMERA_HEIGHT_M
    return (T_BASE_CAM @ np.append(ray, 1.0))[:3]


def norm_point(u: float, v: float) -> tuple[int, int]:
    """Pixel (u, v) as RoboPIN writes it (0-1000)."""
    return round(u * 1000 / WIDTH), round(v * 1000 / HEIGHT)


def pincot_text(pick_px=(200.0, 240.0), place_px=(450.0, 300.0), *, pick_name="duck", place_name="red plate") -> str:
    """A well-formed one-view RoboPIN trace picking at ``pick_px`` and placing at ``place_px``."""
    px, py = norm_point(*pick_px)
    qx, qy = norm_point(*place_px)
    return (
        f'<think>I see the <obj name="{pick_name}" id="obj_01" img_idx="0" point="[{px}, {py}]"> and the '
        f'<space name="{place_name}" id="space_01" img_idx="0" point="[{qx}, {qy}]">. obj_01 must go onto space_01.'
        f'</think><answer>[{{"point_2d": [{px}, {py}], "label": "pick", "id": "obj_01", "img_idx": 0}}, '
        f'{{"point_2d": [{qx}, {qy}], "label": "place", "id": "space_01", "img_idx": 0}}]</answer>'
    )


DONE_TEXT = '<think>Everything is where it belongs.</think><answer>[{"label": "done"}]</answer>'


@dataclass
class Tabletop:
    """A synthetic static camera over a flat table; ``holes`` are pixel discs (u, v, radius) without depth."""

    holes: list[tuple[float, float, float]] = field(default_factory=list)
    observations: int = 0

    def snapshot(self) -> MultiViewSnapshot:
        self.observations += 1
        depth = np.full((HEIGHT, WIDTH), CAMERA_HEIGHT_M, dtype=np.float32)
        rows, cols = np.mgrid[0:HEIGHT, 0:WIDTH]
        for u, v, radius in self.holes:
            depth[(cols + 0.5 - u) ** 2 + (rows + 0.5 - v) ** 2 <= radius**2] = np.nan
        color = np.full((HEIGHT, WIDTH, 3), 128, dtype=np.uint8)
        frame = Frame(color, depth, CAMERA, time.time(), camera_name="static")
        return MultiViewSnapshot(("static",), {"static": frame}, None, 0.0, 0.0)


def tabletop_stages(tabletop: Tabletop | None = None) -> tuple[Tabletop, SnapshotObserver, SnapshotProjector]:
    tabletop = tabletop or Tabletop()
    projector = Projector([ViewConfig("static", 0, CameraMount("static", T_BASE_CAM))])
    return tabletop, SnapshotObserver(tabletop.snapshot), SnapshotProjector(projector)


@dataclass
class PickPlaceCall:
    pick: Target
    place: Target
    dry_run: bool


class RecordingArm:
    """The arm edge: records each pick-and-place; ``outcomes`` script the results (default success).

    ``duration_s`` makes a motion take time, polling ``should_stop`` like a driver honouring cancel.
    """

    def __init__(self, outcomes: Sequence[MotionOutcome] = (), duration_s: float = 0.0) -> None:
        self.calls: list[PickPlaceCall] = []
        self.outcomes = list(outcomes)
        self.duration_s = duration_s
        self.stopped = False

    def pick_place(self, pick, place, *, dry_run, on_stage: Callable[[str, str], None], should_stop) -> MotionOutcome:
        self.calls.append(PickPlaceCall(pick, place, dry_run))
        on_stage("planning", "scripted plan")
        if not dry_run:
            on_stage("executing", "moving")
            deadline = time.monotonic() + self.duration_s
            while time.monotonic() < deadline:
                if should_stop():
                    self.stopped = True
                    return MotionOutcome(False, "canceled", "stopped by cancel", executed=True)
                time.sleep(0.01)
        if self.outcomes:
            return self.outcomes.pop(0)
        return MotionOutcome(True, "success", "planned" if dry_run else "done", 0.01, executed=not dry_run)


def distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(math.dist(a, b))
