"""E-TTS's two verifiers: the reasoning verifier (a VLM's P(yes) on a drawn trace) and the action
verifier (a feasibility score in [0, 1] from what the stack knows, behind a replaceable interface).

- :class:`ReasoningVerifier` asks "is this reasoning logical, grounded and promising?" with the
  trace's anchors and answer drawn on the views (``robopin.pincot.draw``), optional few-shot
  examples and the history of the last K steps; the score is ``score_yes_no(...).p_yes``. The
  request puts the static text first, then the drawn images, then the trace, so a vLLM server's
  prefix cache shares the instructions across candidates.
  The verifier defaults to the reasoning model, and RoboPIN-4B opens every turn with ``<think>``:
  the OpenAI backend therefore prefills the answer turn with a closed, empty thinking block
  (``OpenAIBackendConfig.yes_no_answer_prefix``, sent with vLLM's ``continue_final_message``), so
  yes/no is the first token scored; set it empty for a verifier model that answers directly.
- :class:`ActionVerifier` is the interface a learned verifier implements;
  :class:`FeasibilityVerifier` reads run-time evidence only (never the simulator's ground truth): it
  scores depth quality at the points, the pick point's distance to the centre of its depth segment
  (a pick on no object above the support is refused, ``pick_not_on_object``), the 3D agreement of
  the anchor across views (with a bound projector: a pick whose other-view pins the projection's
  cross-view rule puts on another object is refused, ``pick_views_disagree``); whether a candidate
  plans is the step's own planning, where the loop takes the next-best pair while the chosen one finds
  no plan (``plan_check_top_k``); :class:`NoActionVerifier` gives every action 1.
  :func:`make_action_verifier` picks one by type name.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from robopin.geometry import DepthConfig, PointRequest, Target, robust_depth
from robopin.pincot.draw import draw_trace
from robopin.pincot.prompts import HistoryEntry, PromptTemplates, verifier_prompt
from robopin.pincot.trace import Trace
from robopin.reasoning.protocols import Observation, TargetProjector
from robopin.reasoning.tts.candidates import ActionCandidate, DepthSegment, SegmentCache
from robopin.reasoning.tts.config import ActionVerifierConfig, ReasoningVerifierConfig, TTSConfigError
from robopin.vlm.base import ChatMessage, MessagePart, ViewImage, VLMBackend

_MARKER = "\x00ROBOPIN_TTS_REASONING\x00"


def split_around_reasoning(render: Callable[[str], str]) -> tuple[str, str]:
    """Render a prompt with a marker for the reasoning and split it: (static head, tail after it)."""
    text = render(_MARKER)
    if text.count(_MARKER) != 1:
        raise TTSConfigError("the verifier template must use $reasoning exactly once")
    head, tail = text.split(_MARKER)
    return head, tail


def drawn_views(observation: Observation, trace: Trace | None) -> list[ViewImage]:
    """The observation's views with the trace drawn on them (the views themselves without a trace)."""
    if trace is None:
        return list(observation.views)
    canvases = draw_trace([view.rgb for view in observation.views], trace)
    views = observation.views
    return [ViewImage(canvas, view.name, view.img_idx) for canvas, view in zip(canvases, views, strict=True)]


class ReasoningVerifier:
    """Scores traces with a VLM's yes/no answer (see the module docstring)."""

    def __init__(
        self,
        backend: VLMBackend,
        config: ReasoningVerifierConfig | None = None,
        *,
        templates: PromptTemplates | None = None,
    ) -> None:
        self.backend = backend
        self.config = config or ReasoningVerifierConfig()
        self.templates = templates

    def messages(
        self,
        instruction: str,
        observation: Observation,
        text: str,
        trace: Trace | None,
        history: Sequence[HistoryEntry] = (),
    ) -> list[ChatMessage]:
        """One verifier request: static instructions, the (drawn) views, then the reasoning."""
        head, tail = split_around_reasoning(
            lambda reasoning: verifier_prompt(
                instruction,
                reasoning,
                examples=self.config.examples,
                history=tuple(history)[-self.config.history :] if self.config.history else (),
                templates=self.templates,
            )
        )
        images = drawn_views(observation, trace if self.config.draw else None)
        parts: list[MessagePart] = [head, *images, text.strip() + tail]
        return [ChatMessage("user", tuple(parts))]

    def score(
        self,
        instruction: str,
        observation: Observation,
        text: str,
        trace: Trace | None,
        history: Sequence[HistoryEntry] = (),
    ) -> float:
        """P(yes) of one trace, normalised over yes/no."""
        return float(self.backend.score_yes_no(self.messages(instruction, observation, text, trace, history)).p_yes)

    def score_many(
        self,
        instruction: str,
        observation: Observation,
        items: Sequence[tuple[str, Trace | None]],
        history: Sequence[HistoryEntry] = (),
        executor: ThreadPoolExecutor | None = None,
    ) -> list[float]:
        """Score several traces, concurrently when an executor is given (the calls are independent)."""
        if executor is None or len(items) < 2:
            return [self.score(instruction, observation, text, trace, history) for text, trace in items]
        futures = [executor.submit(self.score, instruction, observation, text, trace, history) for text, trace in items]
        return [future.result() for future in futures]


# ------------------------------------------------------------------------------------------ actions


@dataclass
class ActionContext:
    """What an action verifier may use: the observation, the traces, and optional bound stages.

    ``projector`` (the loop's :class:`TargetProjector`) carries points to 3D targets; None when not bound.
    """

    instruction: str
    observation: Observation
    traces: Sequence[Trace | None]
    segments: SegmentCache | None = None
    projector: TargetProjector | None = None
    history: Sequence[HistoryEntry] = ()
    timings_s: dict[str, float] = field(default_factory=dict)  # the verifier's own parts, for the step's log


@dataclass(frozen=True)
class ActionScore:
    """A verifier's score of one action: ``value`` in [0, 1], the features behind it, and ``refusal``
    naming a hard infeasibility (the value is then 0)."""

    value: float
    features: Mapping[str, float] = field(default_factory=dict)
    refusal: str = ""


class ActionVerifier(abc.ABC):
    """Scores the actions of one step (all traces' candidates at once, so calls can be batched)."""

    @abc.abstractmethod
    def score(self, candidates: Sequence[ActionCandidate], context: ActionContext) -> list[ActionScore]:
        """One score per candidate, same order."""


class NoActionVerifier(ActionVerifier):
    """Action scaling off: every action scores 1 (Ŝa = 1, so S = Sc)."""

    def score(self, candidates: Sequence[ActionCandidate], context: ActionContext) -> list[ActionScore]:
        return [ActionScore(1.0) for _ in candidates]


def _point_key(request: PointRequest) -> tuple[int, float, float, str]:
    return (request.img_idx, round(request.u, 2), round(request.v, 2), request.id)


def _group_key(requests: Sequence[PointRequest]) -> tuple:
    """A pick with its other-view pins (the pick first, the place left out)."""
    return tuple(_point_key(r) for r in [requests[0], *requests[2:]])


@dataclass
class _Scoring:
    """State of one ``score`` call: a memo of projections (the place point, and the pins, recur across a trace's
    candidates) and of the cross-view verdicts on pick groups."""

    memo: dict[tuple[int, float, float, str], Target] = field(default_factory=dict)
    agreement: dict[tuple, bool] = field(default_factory=dict)

    def prefetch(self, context: ActionContext, points: Sequence[PointRequest],
                 groups: Sequence[Sequence[PointRequest]]) -> None:
        """Project every point and every pick group the candidates will ask for, in one call.

        Through the nodes each call is a ProjectPoints round trip on the same frames, so one call for a batch
        of candidates instead of one per point. Each point gets an ID of its own in the call (the projection
        fuses pins that share an ID across views: these must stay apart), each group one ID for its members
        (fused as the loop would fuse them); the answers are kept under the original requests.
        """
        assert context.projector is not None
        points = list({_point_key(r): r for r in points if _point_key(r) not in self.memo}.values())
        groups = list({_group_key(g): g for g in groups if _group_key(g) not in self.agreement}.values())
        if not points and not groups:
            return
        batch = [replace(r, id=f"point-{k}") for k, r in enumerate(points)]
        starts = []
        for k, group in enumerate(groups):
            starts.append(len(batch))
            batch += [replace(r, id=f"group-{k}") for r in [group[0], *group[2:]]]
        targets = context.projector.project(batch, context.observation)
        for request, target in zip(points, targets, strict=False):
            self.memo[_point_key(request)] = replace(target, id=request.id)
        for group, start in zip(groups, starts, strict=True):
            self.agreement[_group_key(group)] = bool(targets[start].valid)

    def same_object(self, context: ActionContext, requests: Sequence[PointRequest]) -> bool:
        """Whether the projection, given the pick with its other-view pins, keeps the pick valid: its
        cross-view rule (:mod:`robopin.geometry.crossview`) found them on one object."""
        assert context.projector is not None
        key = _group_key(requests)
        if key not in self.agreement:
            group = [requests[0], *requests[2:]]
            self.agreement[key] = bool(context.projector.project(group, context.observation)[0].valid)
        return self.agreement[key]

    def project(self, context: ActionContext, request: PointRequest) -> Target:
        assert context.projector is not None
        key = _point_key(request)
        if key not in self.memo:
            self.memo[key] = context.projector.project([request], context.observation)[0]
        return self.memo[key]


class FeasibilityVerifier(ActionVerifier):
    """Feasibility from depth, segments, views and the planner (see :class:`ActionVerifierConfig`)."""

    def __init__(self, config: ActionVerifierConfig | None = None, depth: DepthConfig | None = None) -> None:
        self.config = config or ActionVerifierConfig()
        self.depth = depth or DepthConfig()

    def score(self, candidates: Sequence[ActionCandidate], context: ActionContext) -> list[ActionScore]:
        state = _Scoring()
        if context.projector is not None:
            started = time.perf_counter()
            state.prefetch(context, *self._projections(candidates, context))
            context.timings_s["project_actions"] = time.perf_counter() - started
        return [self._local(candidate, context, state) for candidate in candidates]

    def _projections(self, candidates: Sequence[ActionCandidate],
                     context: ActionContext) -> tuple[list[PointRequest], list[list[PointRequest]]]:
        """The points and pick groups :meth:`_local` may project for ``candidates`` (some it will not need:
        a candidate refused on depth first; they ride along in the same call)."""
        config = self.config
        points: list[PointRequest] = []
        groups: list[list[PointRequest]] = []
        views = context.segments.views if context.segments is not None else {}
        for candidate in candidates:
            if candidate.pick is None or candidate.place is None:
                continue
            pins = [r for r in candidate.support if r.id == candidate.pick.id]
            points += [candidate.pick, candidate.place, *pins]
            if pins and config.agreement > 0:
                groups.append([candidate.pick, candidate.place, *pins])
            if config.centrality > 0 and config.visibility > 0 and candidate.pick.img_idx in views:
                segment = context.segments(candidate.pick.img_idx, candidate.pick.u, candidate.pick.v)
                if segment is None:
                    continue
                points.append(replace(candidate.pick, u=segment.centre_u, v=segment.centre_v))
                for pin in pins:
                    other = context.segments(pin.img_idx, pin.u, pin.v)
                    if other is not None:
                        points.append(replace(pin, u=other.centre_u, v=other.centre_v))
        return points, groups

    # -- per-candidate features from the images and (when bound) the projection
    def _local(self, candidate: ActionCandidate, context: ActionContext, state: _Scoring) -> ActionScore:
        if candidate.pick is None or candidate.place is None:
            return ActionScore(1.0, {"no_points": 1.0})
        config = self.config
        features: dict[str, float] = {}
        views = context.segments.views if context.segments is not None else {}
        if config.depth > 0 and views:
            quality = 1.0
            for role, request in (("pick", candidate.pick), ("place", candidate.place)):
                view = views.get(request.img_idx)
                if view is None:
                    continue
                sample = robust_depth(view.depth_m, request.u, request.v, self.depth)
                if not sample.valid:
                    return ActionScore(0.0, {**features, f"{role}_depth": 0.0}, f"{role}_{sample.reason}")
                quality *= sample.valid_fraction * math.exp(-sample.spread_m / config.spread_scale_m)
            features["depth"] = quality
        if config.centrality > 0 and context.segments is not None and candidate.pick.img_idx in views:
            segment = context.segments(candidate.pick.img_idx, candidate.pick.u, candidate.pick.v)
            if segment is None:
                # The pick point is on the support (or has no depth): a grasp there closes on nothing,
                # and the loop's own checks could not see it. Infeasible, not merely unlikely.
                return ActionScore(0.0, {**features, "centrality": 0.0}, "pick_not_on_object")
            else:
                distance = segment.distance_px(candidate.pick.u, candidate.pick.v)
                features["centrality"] = math.exp(-((distance / max(segment.radius_px, 1.0)) ** 2))
                if config.visibility > 0 and context.projector is not None:
                    visibility = self._visibility(candidate, segment, context, state)
                    if visibility is not None:
                        features["visibility"] = visibility
        if config.answer_view > 0 and candidate.answer_img_idx is not None:
            # The answer's view is the model's decision; another view's pin of the same ID only supports it.
            features["answer_view"] = (
                1.0 if candidate.pick.img_idx == candidate.answer_img_idx else config.other_view_prior
            )
        if context.projector is not None:
            refusal = self._project(candidate, context, features, state)
            if refusal:
                return ActionScore(0.0, features, refusal)
        value = 1.0
        weights = {
            "depth": config.depth,
            "centrality": config.centrality,
            "visibility": config.visibility,
            "agreement": config.agreement,
            "answer_view": config.answer_view,
        }
        for name, weight in weights.items():
            if name in features and weight > 0:
                value *= max(features[name], 0.0) ** weight
        return ActionScore(float(value), features)

    def _visibility(
        self, candidate: ActionCandidate, segment: DepthSegment, context: ActionContext, state: _Scoring
    ) -> float | None:
        """How much of the object this view sees, against the other views that pinned the same ID.

        A view that sees the object partly hidden gives a segment centre that is not the object's
        centre. Only segments whose centres meet in 3D (within ``same_object_m``) are compared: a
        pin on another object in the other view is a disagreement (``agreement``), not occlusion.
        """
        assert candidate.pick is not None and context.segments is not None
        here = state.project(context, replace(candidate.pick, u=segment.centre_u, v=segment.centre_v))
        if not here.valid:
            return None
        areas = []
        for pin in candidate.support:
            if pin.id != candidate.pick.id:
                continue
            other = context.segments(pin.img_idx, pin.u, pin.v)
            if other is None:
                continue
            there = state.project(context, replace(pin, u=other.centre_u, v=other.centre_v))
            if there.valid and float(np.linalg.norm(there.point - here.point)) <= self.config.same_object_m:
                areas.append(other.area_m2)
        return segment.area_m2 / max(*areas, segment.area_m2) if areas else None

    def _project(
        self,
        candidate: ActionCandidate,
        context: ActionContext,
        features: dict[str, float],
        state: _Scoring,
    ) -> str:
        """Project pick, place and their other-view pins; record agreement; name a refusal if any."""
        assert candidate.pick is not None and candidate.place is not None and context.projector is not None
        requests: list[PointRequest] = [candidate.pick, candidate.place]
        requests += [r for r in candidate.support if r.id == candidate.pick.id]
        # Fusion across views would merge or refuse the alternatives; project each point on its own.
        projected = [state.project(context, r) for r in requests]
        pick, place = projected[0], projected[1]
        for role, target in (("pick", pick), ("place", place)):
            if not target.valid:
                return f"{role}_{target.reason or 'invalid'}"
        others = [t for t in projected[2:] if t.valid]
        if others and self.config.agreement > 0:
            # The loop projects the chosen pick with these pins and refuses it (views_disagree) unless
            # the cross-view rule finds them on one object: such a candidate is infeasible here too.
            if not state.same_object(context, requests):
                features["agreement"] = 0.0
                return "pick_views_disagree"
            distance = min(float(np.linalg.norm(t.point - pick.point)) for t in others)
            # On one object, closer pins are still better evidence; soft, with a floor, because two
            # views rarely pin one surface point.
            agreement = math.exp(-((distance / self.config.agreement_scale_m) ** 2))
            features["agreement"] = max(agreement, self.config.agreement_floor)
        return ""


ActionVerifierFactory = Callable[[ActionVerifierConfig], ActionVerifier]

_ACTION_VERIFIERS: dict[str, ActionVerifierFactory] = {
    "feasibility": FeasibilityVerifier,
    "none": lambda config: NoActionVerifier(),
}


def register_action_verifier(type_name: str, factory: ActionVerifierFactory) -> None:
    """Add an action verifier type (e.g. a learned one): ``factory(config) -> ActionVerifier``."""
    if not type_name or not type_name.isidentifier():
        raise TTSConfigError(f"action verifier type must be an identifier, got {type_name!r}")
    _ACTION_VERIFIERS[type_name] = factory


def make_action_verifier(config: ActionVerifierConfig) -> ActionVerifier:
    """Build the action verifier ``config.type`` names."""
    factory = _ACTION_VERIFIERS.get(config.type)
    if factory is None:
        raise TTSConfigError(
            f"unknown action verifier type {config.type!r}; expected one of {sorted(_ACTION_VERIFIERS)}"
        )
    return factory(config)
