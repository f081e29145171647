"""Planner in the loop on a recorded trial: feed each recorded step's views to a planner again and diff.

:func:`recorded_steps` cuts a trial bag into the planner's steps: each recorded ``PinnedReasoning``
with the newest color, aligned depth and camera info of every view at its stamp, the camera mounts
from ``/tf_static`` (wrist views through the recorded end-effector poses), and the targets and
trajectories that followed it. A :class:`StepPlanner` plans a step again — the arm is never involved
(dry run) — and :func:`replay_with_planner` diffs its outcome with the recorded one.

:class:`ReasoningLoopPlanner` runs the real :class:`robopin.reasoning.loop.ReasoningLoop` (any VLM
backend, E-TTS or not) on the recorded observation through :class:`RecordedObserver` and
:class:`RecordedProjector`, in dry run, with :class:`DryRunActor` or a plan-only motion actor. Plan
endpoints are compared when the actor reports them in ``MotionOutcome.details["trajectory_endpoints"]``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from robopin.bags.diff import StepDiff, StepOutcome, TargetPoint, diff_steps, outcome_from_messages
from robopin.bags.reader import TrialBag
from robopin.bags.recorder import REASONING_TYPE, TF_STATIC_TOPIC
from robopin.cameras.images import image_message_to_color, image_message_to_depth_m
from robopin.cameras.topics import CAMERA_ROOT, CameraTopicsError, ViewTopics, view_topics
from robopin.geometry.camera_model import CameraModel
from robopin.geometry.extrinsics import CameraMount, PoseBuffer
from robopin.geometry.projection import PointRequest, ProjectionConfig, Projector, ViewConfig, ViewData
from robopin.interfaces import ARM, PLANNED_TRAJECTORY, REASONING, TARGETS
from robopin.messages import pose_to_matrix, stamp_to_seconds, transform_to_matrix
from robopin.system.names import absolute_name

__all__ = [
    "DryRunActor",
    "ReasoningLoopPlanner",
    "RecordedObserver",
    "RecordedProjector",
    "RecordedStep",
    "RecordedTextBackend",
    "RecordedView",
    "ReplayModelError",
    "StepPlanner",
    "StepReplay",
    "TaskReplayError",
    "TrialTopics",
    "check_replay_inputs",
    "projection_config_from_parameters",
    "recorded_projection_config",
    "recorded_steps",
    "replay_with_planner",
]

logger = logging.getLogger(__name__)


class TaskReplayError(RuntimeError):
    """A planner replay cannot be done: the bag lacks what it needs (no reasoning, a view without images or
    camera info), or the model could not be asked (:class:`ReplayModelError`)."""


class ReplayModelError(TaskReplayError):
    """The replay's model gave no answer to diff: unreachable, timed out, or its request failed."""


MODEL_FAILURES = frozenset({"vlm_unavailable", "vlm_timeout", "vlm_error", "internal_error"})
"""Task reasons (robopin.reasoning.errors) that end a replayed step before any model answer: nothing to compare."""


@dataclasses.dataclass(frozen=True)
class TrialTopics:
    """Where a trial's planner inputs and outputs are recorded."""

    reasoning: str = absolute_name(REASONING)
    targets: str = absolute_name(TARGETS)
    trajectory: str = absolute_name(PLANNED_TRAJECTORY)
    ee_pose: str = absolute_name(ARM.ee_pose)
    camera_prefix: str = f"/{CAMERA_ROOT}"

    def view(self, view: str) -> ViewTopics:
        """Where our camera_node's layout puts ``view`` under ``camera_prefix``."""
        return view_topics(view, robopin_root=self.camera_prefix)

    def color(self, view: str) -> str:
        return self.view(view).color

    def info(self, view: str) -> str:
        return self.view(view).info

    def depth(self, view: str) -> str:
        return self.view(view).depth

    def is_view_topic(self, topic: str) -> bool:
        """Whether ``topic`` is some view's color, camera info or aligned depth under ``camera_prefix``."""
        if not topic.startswith(self.camera_prefix.rstrip("/") + "/"):
            return False
        view = topic[len(self.camera_prefix.rstrip("/")) + 1:].partition("/")[0]
        try:
            return topic in self.view(view).names().values()
        except CameraTopicsError:
            return False


@dataclasses.dataclass(frozen=True)
class RecordedView:
    name: str
    img_idx: int
    rgb: np.ndarray
    depth_m: np.ndarray | None
    camera: CameraModel
    stamp_s: float


@dataclasses.dataclass
class RecordedStep:
    """One recorded planner step and what it was given and produced."""

    index: int
    stamp_s: float
    instruction: str
    reasoning: Any  # decoded PinnedReasoning
    views: list[RecordedView]
    mounts: dict[str, CameraMount]
    poses: PoseBuffer
    targets: list[Any] = dataclasses.field(default_factory=list)
    trajectories: list[Any] = dataclasses.field(default_factory=list)

    @property
    def outcome(self) -> StepOutcome:
        return outcome_from_messages(self.reasoning, self.targets, self.trajectories)


class StepPlanner(Protocol):
    """Plans a recorded step again (never moving an arm) and says what it decided."""

    def plan(self, step: RecordedStep) -> StepOutcome: ...


@dataclasses.dataclass
class StepReplay:
    step: RecordedStep
    replayed: StepOutcome
    diff: StepDiff


def _stamp_s(header: Any) -> float:
    return stamp_to_seconds(header.stamp)


def _mounts(bag: TrialBag) -> dict[str, CameraMount]:
    mounts: dict[str, CameraMount] = {}
    if TF_STATIC_TOPIC not in bag.topics:
        return mounts
    for _, message in bag.decoded([TF_STATIC_TOPIC]):
        for transform in message.transforms:
            parent = transform.header.frame_id.lstrip("/")
            if parent not in ("base", "ee"):
                continue
            kind = "static" if parent == "base" else "wrist"
            child = transform.child_frame_id
            mounts[child] = CameraMount(kind, transform_to_matrix(transform.transform), parent, child)
    return mounts


def recorded_steps(bag: TrialBag, topics: TrialTopics | None = None) -> list[RecordedStep]:
    """The planner steps of a trial bag, in order (see the module docstring).

    Each step gets, per view, the frames the model reasoned on: the newest color image, aligned depth and
    camera info stamped no later than the reasoning's stamp (the observation's newest frame), which is
    the rule projection_node applies to a ProjectPoints request carrying that stamp.
    """
    topics = topics or TrialTopics()
    available = bag.topics
    if topics.reasoning not in available or available[topics.reasoning].msgtype != REASONING_TYPE:
        raise TaskReplayError(f"bag {str(bag.path)!r} has no {REASONING_TYPE} on {topics.reasoning!r}; "
                                 f"topics: {sorted(available)}")
    mounts = _mounts(bag)
    poses = PoseBuffer()
    reasonings = [decoded for _, decoded in bag.decoded([topics.reasoning])]
    stamps = [_stamp_s(r.header) for r in reasonings]
    # (step index, topic) → newest frame message at or before the step's stamp
    frames: list[dict[str, Any]] = [{} for _ in reasonings]
    wanted = [t for t in available if topics.is_view_topic(t)]
    wanted += [t for t in (topics.reasoning, topics.targets, topics.trajectory, topics.ee_pose) if t in available]
    step = -1
    targets: list[list[Any]] = [[] for _ in reasonings]
    trajectories: list[list[Any]] = [[] for _ in reasonings]
    for message, decoded in bag.decoded(wanted):
        if message.topic == topics.ee_pose:
            poses.add(_stamp_s(decoded.header), pose_to_matrix(decoded.pose))
        elif message.topic == topics.reasoning:
            step += 1
        elif message.topic == topics.targets and step >= 0:
            targets[step].append(decoded)
        elif message.topic == topics.trajectory and step >= 0:
            trajectories[step].append(decoded)
        else:
            stamp = _stamp_s(decoded.header)
            for index, step_stamp in enumerate(stamps):
                # A frame stamped after the observation is never the one it saw (1 µs: stamp rounding).
                if stamp <= step_stamp + 1e-6:
                    frames[index][message.topic] = decoded
    steps = []
    for index, reasoning in enumerate(reasonings):
        recorded = _make_step(index, reasoning, frames[index], mounts=mounts, poses=poses, topics=topics)
        recorded.targets, recorded.trajectories = targets[index], trajectories[index]
        steps.append(recorded)
    return steps


def projection_config_from_parameters(values: Mapping[str, Any]) -> ProjectionConfig:
    """The ProjectionConfig projection_node builds from these parameter values (its defaults where absent).

    The names and defaults are projection_node's own (ros2_ws/src/robopin_ros/robopin_ros/projection_node.py);
    a recorder bag carries the live node's values on ``/robopin/parameters/projection_node``.
    """
    from robopin.geometry import DepthConfig, WorkspaceBox
    from robopin.system.nested import setting_from_parameters

    def get(name: str, default: Any) -> Any:
        return values.get(name, default)

    # Dotted workspace.* parameters, or the one YAML string older bags carry.
    workspace = setting_from_parameters("workspace", values) or None
    depth = DepthConfig(window_px=int(get("window_px", 7)), min_depth_m=float(get("min_depth_m", 0.1)),
                        max_depth_m=float(get("max_depth_m", 3.0)),
                        min_valid_fraction=float(get("min_valid_fraction", 0.3)),
                        edge_gap_m=float(get("edge_gap_m", 0.015)))
    return ProjectionConfig(
        depth=depth, normal_window_px=int(get("normal_window_px", 9)),
        workspace=WorkspaceBox.from_dict(workspace) if workspace else None,
        pose_tolerance_s=float(get("pose_tolerance_s", 0.05)),
        fusion_tolerance_m=float(get("fusion_tolerance_m", 0.02)),
        fusion_policy=str(get("fusion_policy", "refuse")),
        view_priority=tuple(v for v in get("view_priority", [""]) if v),
        max_frame_age_s=float(get("max_frame_age_s", 1.0)))


def recorded_projection_config(bag: TrialBag, node: str = "projection_node") -> ProjectionConfig | None:
    """The live projection_node's configuration as the recorder wrote it, None when the bag has none."""
    import yaml

    from robopin.bags.recorder import PARAMETERS_PREFIX

    topic = f"{PARAMETERS_PREFIX}/{node}"
    if topic not in bag.topics:
        return None
    text = None
    for _, message in bag.decoded([topic]):
        text = message.data
    values = (yaml.safe_load(text) or {}).get(node, {})
    return projection_config_from_parameters(values)


def check_replay_inputs(bag: TrialBag, steps: Sequence[RecordedStep], topics: TrialTopics | None = None, *,
                        need_targets: bool = False) -> None:
    """Raise :class:`TaskReplayError` naming the topic when the bag lacks what replaying ``steps`` needs.

    Each view needs its camera mount on ``/tf_static`` (``<view>_optical``) and its aligned depth; a wrist
    view needs the arm poses; ``need_targets`` (the recorded backend's self-check) needs the recorded targets.
    """
    topics = topics or TrialTopics()
    available = bag.topics
    if TF_STATIC_TOPIC not in available:
        raise TaskReplayError(f"bag {str(bag.path)!r} has no {TF_STATIC_TOPIC}: replay needs the camera mounts "
                                 "it carries to place each view")
    for step in steps:
        for view in step.views:
            frame = f"{view.name}_optical"
            mount = step.mounts.get(frame)
            if mount is None:
                raise TaskReplayError(f"step {step.index}: {TF_STATIC_TOPIC} has no transform to {frame!r} (base "
                                         f"or ee to the camera of view {view.name!r}); frames: {sorted(step.mounts)}")
            if view.depth_m is None:
                raise TaskReplayError(f"step {step.index}: view {view.name!r} has no depth on "
                                         f"{topics.depth(view.name)} at or before the reasoning's stamp")
            if mount.kind == "wrist" and topics.ee_pose not in available:
                raise TaskReplayError(f"bag has no {topics.ee_pose}: the wrist view {view.name!r} is placed "
                                         "through the arm pose at its frame")
    if need_targets and steps and topics.targets not in available:
        raise TaskReplayError(f"bag has no {topics.targets}: there are no recorded targets to reproduce")


def _make_step(index: int, reasoning: Any, latest: Mapping[str, Any], *, mounts: dict[str, CameraMount],
               poses: PoseBuffer, topics: TrialTopics) -> RecordedStep:
    views = []
    for img_idx, name in enumerate(reasoning.view_names):
        color, info = latest.get(topics.color(name)), latest.get(topics.info(name))
        if color is None or info is None:
            raise TaskReplayError(f"step {index}: view {name!r} has no color image or camera info recorded "
                                     f"before the reasoning ({topics.color(name)}, {topics.info(name)})")
        rgb = image_message_to_color(color)
        depth = latest.get(topics.depth(name))
        depth_m = None if depth is None else image_message_to_depth_m(depth)
        views.append(RecordedView(name, img_idx, rgb.copy(), None if depth_m is None else depth_m.copy(),
                                  CameraModel.from_camera_info(info), _stamp_s(color.header)))
    return RecordedStep(index, _stamp_s(reasoning.header), reasoning.instruction, reasoning, views, mounts, poses)


class RecordedObserver:
    """The loop's Observer for a recorded step: its views, with the step as the observation's source."""

    def __init__(self, step: RecordedStep) -> None:
        self.step = step

    def observe(self) -> Any:
        """The recorded views of the step, as the loop's observation."""
        from robopin.reasoning.protocols import Observation
        from robopin.vlm.base import ViewImage

        views = tuple(ViewImage(v.rgb, v.name, v.img_idx) for v in self.step.views)
        return Observation(views, max(v.stamp_s for v in self.step.views), source=self.step)


class RecordedProjector:
    """The loop's TargetProjector for a recorded step: its depth, camera mounts and arm poses."""

    def __init__(self, projection: ProjectionConfig) -> None:
        self.projection = projection

    def project(self, requests: Sequence[PointRequest], observation: Any) -> list[Any]:
        """Project with the recorded depth, mounts and arm poses of the observed step."""
        step: RecordedStep = observation.source
        return _project(step, list(requests), self.projection)


class DryRunActor:
    """Plans nothing and moves nothing: the outcome says the arm was not involved."""

    def pick_place(self, pick: Any, place: Any, *, dry_run: bool, on_stage: Any, should_stop: Any) -> Any:
        from robopin.reasoning.protocols import MotionOutcome

        return MotionOutcome(True, "dry_run", "replay: no motion planner configured", executed=False)


def _project(step: RecordedStep, requests: list[PointRequest], projection: ProjectionConfig) -> list[Any]:
    projector = Projector([ViewConfig(v.name, v.img_idx, step.mounts.get(f"{v.name}_optical")) for v in step.views],
                          projection, step.poses)
    frames = {v.img_idx: ViewData(v.depth_m, v.camera, v.stamp_s) for v in step.views if v.depth_m is not None}
    return projector.project(requests, frames)


class RecordedTextBackend:
    """The VLM backend ``--backend recorded``: answers each step with the raw text the bag recorded for it.

    Replaying a bag on its own frames, mounts and reasoning must reproduce the recorded targets; this is
    the check that replay is faithful. :class:`ReasoningLoopPlanner` hands it each step before planning.
    The point convention is the recorded model's: the one that maps the recorded anchors' model
    coordinates (``x``, ``y``) to the recorded pixels (``u``, ``v``), ``norm1000`` when no anchor says.
    """

    def __init__(self) -> None:
        from robopin.vlm.base import VLMConfig

        self.config = VLMConfig(model="recorded")
        self._text: str | None = None

    def use_step(self, step: RecordedStep) -> None:
        """Answer with ``step``'s recorded text, in the point convention it was written in."""
        from robopin.vlm.base import VLMConfig

        self._text = step.reasoning.raw_text
        self.config = VLMConfig(model=step.reasoning.model or "recorded",
                                point_convention=_recorded_convention(step))

    @property
    def point_convention(self) -> Any:
        return self.config.convention()

    def generate(self, messages: Any, params: Any = None) -> Any:
        """The recorded text, ``params.n`` times (once without params)."""
        from robopin.vlm.base import GenerationResult, Sample

        if self._text is None:
            raise TaskReplayError("the recorded backend was asked before a recorded step was given to it")
        n = 1 if params is None else params.n
        return GenerationResult(tuple(Sample(self._text) for _ in range(n)), self.config.model)

    def score_yes_no(self, messages: Any, *, yes: str = "yes", no: str = "no") -> Any:
        """A bag records no verifier scores: every sample is judged equally likely."""
        from robopin.vlm.base import YesNoScore

        return YesNoScore(0.0, 0.0, exact=False)

    def close(self) -> None:
        self._text = None


def _recorded_convention(step: RecordedStep) -> str:
    from robopin.vlm.base import VLMConfig
    from robopin.vlm.points import POINT_CONVENTIONS

    sizes = {v.img_idx: (v.camera.width, v.camera.height) for v in step.views}
    for anchor in step.reasoning.anchors:
        size = sizes.get(int(anchor.img_idx))
        if size is None or not (math.isfinite(anchor.u) and math.isfinite(anchor.v)):
            continue
        for name in POINT_CONVENTIONS:
            u, v = VLMConfig(point_convention=name).convention().to_pixels([float(anchor.x), float(anchor.y)], *size)
            if abs(u - anchor.u) <= 0.5 and abs(v - anchor.v) <= 0.5:
                return name
    return "norm1000"


class ReasoningLoopPlanner:
    """The reasoning loop on a recorded step: recorded views in, dry run, optional motion actor.

    ``actor`` is any :class:`robopin.reasoning.protocols.Actor` (a motion planner in plan-only mode);
    it is always called with ``dry_run=True``. Its ``details["trajectory_endpoints"]`` (final joint
    positions per planned phase) are compared with the recorded trajectories.
    """

    def __init__(self, backend: Any, config: Any = None, *, actor: Any = None,
                 projection: ProjectionConfig | None = None) -> None:
        from robopin.reasoning.config import ReasoningConfig

        self.backend = backend
        self.config = config if config is not None else ReasoningConfig(mode="point", max_steps=1)
        self.actor = actor or DryRunActor()
        self.projection = projection or ProjectionConfig()

    def plan(self, step: RecordedStep) -> StepOutcome:
        from robopin.bags.diff import AnchorPoint
        from robopin.reasoning.loop import ReasoningLoop, TaskRequest

        if isinstance(self.backend, RecordedTextBackend):
            self.backend.use_step(step)
        loop = ReasoningLoop(self.config, self.backend, RecordedObserver(step), RecordedProjector(self.projection),
                             self.actor)
        result = loop.run(TaskRequest(step.instruction, mode="point", dry_run=True, max_steps=1,
                                      task_id=f"replay-{step.index}"))
        planned = not isinstance(self.actor, DryRunActor)
        if not result.reasoning:
            if result.reason in MODEL_FAILURES:
                raise ReplayModelError(f"step {step.index}: the model gave no answer: {result.reason}: "
                                       f"{result.message}")
            return StepOutcome(valid=False, model=f"no reasoning: {result.reason}: {result.message}", planned=planned)
        record = result.reasoning[-1]
        sizes = record.image_sizes
        trace = record.trace

        def pixels(x: float, y: float, img_idx: int | None) -> tuple[float, float]:
            from robopin.pincot.coords import normalized_to_pixels

            if img_idx is None or not 0 <= img_idx < len(sizes):
                return float("nan"), float("nan")
            return normalized_to_pixels(x, y, sizes[img_idx])

        anchors = tuple(AnchorPoint(a.id, a.name, a.img_idx, *pixels(a.x, a.y, a.img_idx))
                        for a in (trace.anchors if trace else ()))
        answers = tuple(AnchorPoint(f"answer{k}", p.label or p.id or "", -1 if p.img_idx is None else p.img_idx,
                                    *pixels(p.x, p.y, p.img_idx))
                        for k, p in enumerate(trace.answer_points if trace else ()))
        targets = result.steps[-1].targets if result.steps else ()
        motion = result.steps[-1].motion if result.steps else None
        endpoints = tuple(tuple(float(q) for q in end) for end in
                          (motion.details.get("trajectory_endpoints", ()) if motion is not None else ()))
        target_points = tuple(
            TargetPoint(f"{t.id or f'target{k}'}@{t.img_idx}", tuple(float(c) for c in t.point), t.valid,
                        t.reason.value if t.reason is not None else "")
            for k, t in enumerate(targets))
        return StepOutcome(anchors, answers, target_points, endpoints, bool(record.valid), record.model, planned)


def replay_with_planner(steps: Iterable[RecordedStep], planner: StepPlanner, *, tolerance_px: float = 0.0,
                        tolerance_m: float = 0.0, tolerance_rad: float = 0.0) -> list[StepReplay]:
    """Plan every recorded step again and diff each outcome with the recorded one."""
    replays = []
    for step in steps:
        replayed = planner.plan(step)
        replays.append(StepReplay(step, replayed, diff_steps(step.outcome, replayed, tolerance_px=tolerance_px,
                                                             tolerance_m=tolerance_m, tolerance_rad=tolerance_rad)))
    return replays


def summarize(replays: Sequence[StepReplay]) -> dict[str, Any]:
    """A JSON-ready summary of a planner replay: per step identical or the differences."""
    def targets(outcome: StepOutcome) -> list[dict[str, Any]]:
        return [{"key": t.key, "point": list(t.point), "valid": t.valid, "reason": t.reason} for t in outcome.targets]

    return {"steps": [{"index": r.step.index, "instruction": r.step.instruction,
                       "recorded_model": r.step.reasoning.model, "replayed_model": r.replayed.model,
                       "recorded_targets": targets(r.step.outcome), "replayed_targets": targets(r.replayed),
                       **r.diff.to_dict()} for r in replays],
            "identical": all(r.diff.identical for r in replays),
            # The largest differences found (0 when nothing was compared): what the tolerances were measured against.
            "max_pixel_error": max((e for r in replays for e in r.diff.pixel_errors.values()), default=0.0),
            "max_target_error_m": max((e for r in replays for e in r.diff.target_errors_m.values()), default=0.0)}
