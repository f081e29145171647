"""SIMULATION-STUDY helpers for E-TTS: a ground-truth policy with injected errors, a ground-truth
verifier of a chosen accuracy, and a success model for a chosen pick/place. Not models, not physics.

- :class:`StudyScene` renders a simulated scene once and serves it as the loop's ``Observation``
  (a ``MultiViewSnapshot`` with depth) plus an in-process projector with the true camera mounts.
- :class:`StudyPolicyBackend` writes PinCoT traces with the simulator's ground-truth oracle, each
  sample drawing :class:`~robopin.sim.oracle.OracleErrors` independently (wrong target, point
  jitter, …). It ignores the prompt: feedback appended to it changes nothing, so the study measures
  what feedback costs, not what it might gain.
- :class:`StudyVerifierBackend` answers the yes/no verifier question with the ground-truth verdict
  with probability ``accuracy`` (else the opposite), as a soft P(yes); feedback requests get a
  fixed critique.
- :func:`action_outcome` judges a chosen pick/place without running physics: the pick point (true
  depth, true camera pose) must lie on the goal object within ``grasp_tolerance_m`` of its centre
  (horizontally), and the place point within the target plate's radius less ``place_margin_m``.
  The scripted physics pick in ``robopin.sim`` grasps whole objects by pose, so it cannot judge a
  point's grasp quality; this model is an assumption, stated wherever its numbers are shown.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robopin.geometry import CameraMount, PointRequest, ProjectionConfig, Projector, ViewConfig, WorkspaceBox
from robopin.pincot.coords import normalized_to_pixels
from robopin.pincot.parser import parse
from robopin.reasoning.protocols import Observation
from robopin.vlm.base import (
    ChatMessage,
    GenerationResult,
    Sample,
    SamplingParams,
    VLMBackend,
    VLMConfig,
    YesNoScore,
)

if TYPE_CHECKING:
    from robopin.sim.tasks import Scene

STUDY_WORKSPACE = WorkspaceBox((0.1, -0.6, -0.05), (0.95, 0.6, 0.6))


class StudyScene:
    """One simulated scene rendered once (its state when built), as an observation the loop's stages
    understand, with the ground truth to judge traces and actions against."""

    def __init__(self, scene: Scene, views: Sequence[str] = ("static", "wrist")) -> None:
        from robopin.cameras import Frame, MultiViewSnapshot
        from robopin.reasoning.snapshot_stages import SnapshotProjector, observation_from_snapshot

        self.scene = scene
        self.views = tuple(views)
        self.rendered = [self.scene.world.render(name) for name in self.views]
        stamp = time.time()
        frames = {}
        for index, (name, view) in enumerate(zip(self.views, self.rendered, strict=True)):
            depth = view.depth_m.astype(np.float32).copy()
            depth[depth <= 0] = np.nan
            frames[name] = Frame(
                view.color, depth, view.model, stamp, serial=f"sim/{name}", index=index, camera_name=name
            )
        T_base_ee = self.scene.world.ee_pose()
        snapshot = MultiViewSnapshot(self.views, frames, {name: T_base_ee for name in self.views}, 0.0, 0.0)
        self.observation: Observation = observation_from_snapshot(snapshot)
        mounts = []
        for index, name in enumerate(self.views):
            spec = self.scene.world.camera(name)
            kind = "wrist" if spec.mount == "ee" else "static"
            mount = CameraMount(kind, spec.T_mount_cam, "ee" if kind == "wrist" else "base")
            mounts.append(ViewConfig(name, index, mount))
        self.projector = SnapshotProjector(Projector(mounts, ProjectionConfig(workspace=STUDY_WORKSPACE)))
        goal = self.scene.task.goals[0]
        self.goal_object, self.goal_target = goal.object, goal.target
        self._sightings = None

    @classmethod
    def build(cls, scenario: str, seed: int, views: Sequence[str] = ("static", "wrist")) -> StudyScene:
        """Build scenario ``scenario`` with ``seed`` (``robopin.sim.tasks.build_scene``) and render it."""
        from robopin.sim.tasks import build_scene

        return cls(build_scene(scenario, seed, world_name=f"tts-study-{scenario}-{seed}"), views)

    @property
    def instruction(self) -> str:
        return self.scene.spec.instruction

    def sightings(self, rendered=None):
        """The oracle's per-object sightings of the (fixed) rendered views, computed once."""
        if self._sightings is None:
            from robopin.sim.oracle import GroundTruthOracle

            self._sightings = GroundTruthOracle(self.scene, self.views).sightings(self.rendered)
        return self._sightings

    def on_object(self, img_idx: int, u: float, v: float, name: str, window_px: int = 3) -> bool:
        """Whether pixel ``(u, v)`` of a view is within ``window_px`` of ``name``'s visible mask."""
        if not 0 <= img_idx < len(self.rendered):
            return False
        segmentation = self.rendered[img_idx].segmentation
        height, width = segmentation.shape
        col, row = min(max(math.floor(u), 0), width - 1), min(max(math.floor(v), 0), height - 1)
        window = segmentation[
            max(row - window_px, 0) : row + window_px + 1, max(col - window_px, 0) : col + window_px + 1
        ]
        return bool(np.any(window == self.scene.world.object(name).body_id))

    def point_base(self, request: PointRequest) -> np.ndarray | None:
        """The true 3D point (base frame) under a pixel, or None where the view has no depth."""
        view = self.rendered[request.img_idx]
        height, width = view.depth_m.shape
        col, row = math.floor(request.u), math.floor(request.v)
        if not (0 <= col < width and 0 <= row < height) or view.depth_m[row, col] <= 0:
            return None
        p_cam = view.model.deproject(request.u, request.v, float(view.depth_m[row, col]))
        return (view.T_base_cam @ np.append(np.asarray(p_cam, dtype=np.float64).reshape(3), 1.0))[:3]

    def close(self) -> None:
        self.scene.close()


def judge_trace(study: StudyScene, text: str) -> bool:
    """Ground truth: the answer picks the goal object and places on the goal target (format valid)."""
    trace = parse(text, len(study.rendered))
    if trace.errors or len(trace.answer_points) < 2:
        return False
    for point, name in zip(trace.answer_points[:2], (study.goal_object, study.goal_target), strict=True):
        img_idx = point.img_idx if point.img_idx is not None else 0
        if not 0 <= img_idx < len(study.rendered):
            return False
        height, width = study.rendered[img_idx].segmentation.shape
        u, v = normalized_to_pixels(point.x, point.y, (width, height))
        if not study.on_object(img_idx, u, v, name):
            return False
    return True


@dataclass(frozen=True)
class ActionOutcome:
    success: bool
    reason: str = ""


def action_outcome(
    study: StudyScene,
    pick: PointRequest | None,
    place: PointRequest | None,
    *,
    grasp_tolerance_m: float = 0.025,
    place_margin_m: float = 0.01,
) -> ActionOutcome:
    """Success model of one pick-and-place (see the module docstring; an assumption, not physics)."""
    if pick is None or place is None:
        return ActionOutcome(False, "no_action")
    world = study.scene.world
    pick_point, place_point = study.point_base(pick), study.point_base(place)
    if pick_point is None or place_point is None:
        return ActionOutcome(False, "no_depth")
    best, best_distance = None, math.inf
    for obj in world.objects.values():
        if not obj.graspable:
            continue
        low, high = world.object_aabb(obj.name)
        distance = float(np.linalg.norm(np.clip(pick_point, low, high) - pick_point))
        if distance < best_distance:
            best, best_distance = obj.name, distance
    if best is None or best_distance > 0.01:
        return ActionOutcome(False, "pick_missed")
    if best != study.goal_object:
        return ActionOutcome(False, "wrong_object")
    centre = world.object_center(best)
    if math.hypot(*(pick_point[:2] - centre[:2])) > grasp_tolerance_m:
        return ActionOutcome(False, "grasp_off_centre")
    plate = world.object(study.goal_target)
    plate_centre = world.object_center(study.goal_target)
    if math.hypot(*(place_point[:2] - plate_centre[:2])) > plate.radius_m - place_margin_m:
        return ActionOutcome(False, "place_off_target")
    return ActionOutcome(True)


def _study_config(model: str) -> VLMConfig:
    return VLMConfig(model=model)


class StudyPolicyBackend(VLMBackend):
    """The ground-truth oracle as a sampling policy with injected errors (see the module docstring)."""

    def __init__(self, study: StudyScene, errors: dict, seed: int = 0) -> None:
        from robopin.sim.oracle import OracleErrors

        super().__init__(_study_config("sim-oracle-policy"))
        self.study = study
        self.errors = OracleErrors.from_mapping(errors)
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """Start a new trial: a new random stream and a zero sample count."""
        self.rng = np.random.default_rng(seed)
        self.samples = 0

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        from robopin.sim.oracle import GroundTruthOracle

        start = time.perf_counter()
        samples = []
        for _ in range(params.n):
            oracle = GroundTruthOracle(
                self.study.scene, self.study.views, errors=self.errors, seed=int(self.rng.integers(2**31 - 1))
            )
            oracle.sightings = self.study.sightings  # type: ignore[method-assign] # the scene does not move
            samples.append(Sample(oracle.write(self.study.rendered).text))
        self.samples += params.n
        return GenerationResult(tuple(samples), self.config.model, latency_s=time.perf_counter() - start)

    def score_yes_no(self, messages: Sequence[ChatMessage], *, yes: str = "yes", no: str = "no") -> YesNoScore:
        raise NotImplementedError("the study policy is not a verifier; use StudyVerifierBackend")


class StudyVerifierBackend(VLMBackend):
    """A verifier that knows the truth and reports it with probability ``accuracy``."""

    CRITIQUE = (
        "The chosen object may not be the one the instruction describes. Check which duck stands in the "
        "described relation to the toys, and place it on the plate the instruction names."
    )

    def __init__(self, study: StudyScene, accuracy: float, seed: int = 0) -> None:
        super().__init__(_study_config("sim-ground-truth-verifier"))
        if not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"verifier accuracy must be in [0, 1], got {accuracy!r}")
        self.study = study
        self.accuracy = accuracy
        self.reseed(seed)

    def reseed(self, seed: int) -> None:
        """Start a new trial: a new seed and a zero call count."""
        self.seed = int(seed)
        self.calls = 0

    def score_yes_no(self, messages: Sequence[ChatMessage], *, yes: str = "yes", no: str = "no") -> YesNoScore:
        text = next((m.text for m in reversed(messages) if "<answer>" in m.text), "")
        reasoning = text[text.find("<think>") :] if text else ""
        truth = judge_trace(self.study, reasoning) if reasoning else False
        # The noise is a function of (trial seed, reasoning): concurrent calls in any order, and a
        # repeated trace, get the same answer.
        rng = np.random.default_rng([self.seed, zlib.crc32(reasoning.encode())])
        verdict = truth if rng.random() < self.accuracy else not truth
        confidence = float(rng.uniform(0.2, 1.0))
        p_yes = 0.5 + 0.5 * confidence if verdict else 0.5 - 0.5 * confidence
        p_yes = min(max(p_yes, 1e-6), 1 - 1e-6)
        self.calls += 1
        return YesNoScore(math.log(p_yes), math.log(1.0 - p_yes))

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        return GenerationResult(tuple(Sample(self.CRITIQUE) for _ in range(params.n)), self.config.model)
