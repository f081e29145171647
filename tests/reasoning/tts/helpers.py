"""Test parts for E-TTS that need no simulator: a synthetic top-down tabletop observation with depth,
PinCoT traces written for it, and a scripted model (the one edge that cannot run here: a GPU VLM).

- :func:`tabletop` renders a camera 1 m above a table looking straight down (fx = fy = 500), with
  boxes standing on the table, optional depth holes, and as many identical views as asked.
- :func:`trace` writes a PinCoT answer picking one point and placing at another, with a ``tag``
  word in the reasoning so a scripted verifier can recognise the trace.
- :class:`ScriptedModel` is a real ``VLMBackend``: ``generate`` answers from a script (one tuple of
  texts per request), ``score_yes_no`` gives P(yes) by the tag found in the reasoning, and every
  request is recorded; an optional barrier proves verifier calls are in flight together.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from robopin.cameras import Frame, MultiViewSnapshot
from robopin.geometry import CameraModel
from robopin.reasoning import ReasoningQuery, interpret_pointing
from robopin.reasoning.protocols import Observation
from robopin.reasoning.snapshot_stages import observation_from_snapshot
from robopin.vlm.base import ChatMessage, GenerationResult, Sample, SamplingParams, VLMBackend, VLMConfig, YesNoScore
from robopin.vlm.prompts import build_messages

WIDTH, HEIGHT = 640, 480
CAMERA = CameraModel(WIDTH, HEIGHT, 500.0, 500.0, 319.5, 239.5)
TABLE_DEPTH_M = 1.0

Box = tuple[int, int, int, int, float]
"""(u0, v0, u1, v1, height_m): pixel columns u0..u1-1 and rows v0..v1-1 rise height_m above the table."""


def depth_image(boxes: Sequence[Box] = (), holes: Sequence[tuple[int, int, int, int]] = ()) -> np.ndarray:
    depth = np.full((HEIGHT, WIDTH), TABLE_DEPTH_M, dtype=np.float32)
    for u0, v0, u1, v1, height in boxes:
        depth[v0:v1, u0:u1] = TABLE_DEPTH_M - height
    for u0, v0, u1, v1 in holes:
        depth[v0:v1, u0:u1] = np.nan
    return depth


def tabletop(boxes: Sequence[Box] = (), holes: Sequence[tuple[int, int, int, int]] = (), views: int = 1) -> Observation:
    """A synthetic observation: ``views`` identical top-down views of the same table."""
    color = np.full((HEIGHT, WIDTH, 3), 90, dtype=np.uint8)
    for u0, v0, u1, v1, _ in boxes:
        color[v0:v1, u0:u1] = (200, 60, 40)
    names = tuple(f"view{k}" for k in range(views))
    depth = depth_image(boxes, holes)
    frames = {name: Frame(color.copy(), depth.copy(), CAMERA, 100.0, camera_name=name) for name in names}
    return observation_from_snapshot(MultiViewSnapshot(names, frames, None, 0.0, 0.0))


def norm(u: float, v: float) -> tuple[int, int]:
    """Pixel → RoboPIN's 0–1000 point."""
    return round(u * 1000 / WIDTH), round(v * 1000 / HEIGHT)


def trace(
    pick: tuple[float, float],
    place: tuple[float, float],
    *,
    tag: str = "",
    pick_view: int = 0,
    extra_pick_views: Mapping[int, tuple[float, float]] | None = None,
) -> str:
    """A PinCoT trace picking ``obj_01`` at pixel ``pick`` and placing at ``space_01`` (pixel ``place``)."""
    px, py = norm(*pick)
    qx, qy = norm(*place)
    others = "".join(
        f' Seen again: <obj name="cup" id="obj_01" img_idx="{k}" point="[{norm(*uv)[0]}, {norm(*uv)[1]}]">.'
        for k, uv in (extra_pick_views or {}).items()
    )
    return (
        f'<think>{tag} I see the cup <obj name="cup" id="obj_01" img_idx="{pick_view}" point="[{px}, {py}]">.'
        f'{others} The free spot <space name="free spot" id="space_01" img_idx="0" point="[{qx}, {qy}]"> '
        f'is where it goes.</think><answer>[{{"point_2d": [{px}, {py}], "label": "pick", "id": "obj_01", '
        f'"img_idx": {pick_view}}}, {{"point_2d": [{qx}, {qy}], "label": "place", "id": "space_01", '
        f'"img_idx": 0}}]</answer>'
    )


def query(observation: Observation, instruction: str = "put the cup on the free spot", step: int = 0, history=()):
    prompt = f"{instruction}. Answer in PinCoT."
    messages = tuple(build_messages(prompt, observation.views))
    return ReasoningQuery(
        "pointing",
        instruction,
        prompt,
        messages,
        observation,
        lambda text: interpret_pointing(text, observation),
        step,
        tuple(history),
    )


class ScriptedModel(VLMBackend):
    """A scripted policy + verifier (see the module docstring)."""

    def __init__(
        self,
        script: Sequence[Sequence[str]] = (),
        verdicts: Mapping[str, float] | None = None,
        *,
        critique: str = "Pick the red cup, not the blue one.",
        barrier: threading.Barrier | None = None,
        on_verify: Callable[[list[ChatMessage]], Any] | None = None,
    ) -> None:
        super().__init__(VLMConfig(model="scripted"))
        self.script = [tuple(batch) for batch in script]
        self.verdicts = dict(verdicts or {})
        self.critique = critique
        self.barrier = barrier
        self.on_verify = on_verify
        self.generate_requests: list[list[ChatMessage]] = []
        self.feedback_requests: list[list[ChatMessage]] = []
        self.verify_requests: list[list[ChatMessage]] = []
        self._lock = threading.Lock()
        self._batches = 0

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        text = "".join(m.text for m in messages)
        if "supervisor providing constructive feedback" in text:
            with self._lock:
                self.feedback_requests.append(list(messages))
            return GenerationResult((Sample(self.critique),), "scripted")
        with self._lock:
            self.generate_requests.append(list(messages))
            batch = self.script[min(self._batches, len(self.script) - 1)]
            self._batches += 1
        return GenerationResult(tuple(Sample(batch[k % len(batch)]) for k in range(params.n)), "scripted")

    def score_yes_no(self, messages, *, yes="yes", no="no") -> YesNoScore:
        with self._lock:
            self.verify_requests.append(list(messages))
        if self.barrier is not None:
            self.barrier.wait()
        if self.on_verify is not None:
            self.on_verify(list(messages))
        text = "".join(m.text for m in messages)
        reasoning = text[text.rfind("<think>") :]
        p_yes = next((p for tag, p in self.verdicts.items() if tag in reasoning), 0.5)
        p_yes = min(max(p_yes, 1e-9), 1 - 1e-9)
        return YesNoScore(math.log(p_yes), math.log(1 - p_yes))
