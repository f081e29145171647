"""Model text → a validated decision, or a named refusal: the *validating* stage of the loop.

- :func:`interpret_pointing`: a PinCoT trace (RoboPIN) → pick and place points in pixels of the
  original images, plus the other-view anchors of the same IDs (so the projection can check that
  the views agree), or ``done``.
- :func:`interpret_subtask`: an R^3 response → one instruction of the skill library, or ``done``.
- :func:`interpret_plan`: a RoboGPT-R1 response → an executable plan over the action dictionary.

Nothing here raises on any model text; every rejection is a :class:`TaskRefusal` in ``refusal``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from robopin.geometry import PointRequest
from robopin.pincot import Trace, parse
from robopin.pincot.plan import PlanResponse, parse_plan
from robopin.pincot.r3 import SkillGrammar, SubtaskResponse, parse_subtask
from robopin.pincot.trace import AnswerPoint
from robopin.reasoning.errors import ID_CONFLICT_CODES, TaskRefusal
from robopin.reasoning.protocols import Observation
from robopin.vlm.points import PointConvention

PICK_LABELS = frozenset({"pick", "grasp", "pick up", "object", "source"})
PLACE_LABELS = frozenset({"place", "put", "target", "destination", "goal", "place target"})
_NORM1000 = PointConvention("norm1000")
_TAG = re.compile(r'<(?:obj|space)\b[^>]*?\bid="([^"]*)"[^>]*>')


def _issues_text(issues) -> str:
    shown = "; ".join(str(issue) for issue in issues[:3])
    more = f" (+{len(issues) - 3} more)" if len(issues) > 3 else ""
    return shown + more


@dataclass(frozen=True)
class PointingDecision:
    """A validated pointing answer: where to pick and where to place (pixels), or ``done``.

    ``alternatives`` are a reasoner's next-best answers (E-TTS's next-best pairs), best first: the loop plans them
    in turn while the ones before found no plan for their targets and nothing moved."""

    trace: Trace
    pick: PointRequest | None = None
    place: PointRequest | None = None
    support: tuple[PointRequest, ...] = ()
    done: bool = False
    refusal: TaskRefusal | None = None
    alternatives: tuple[PointingDecision, ...] = ()

    @property
    def valid(self) -> bool:
        return self.refusal is None

    def requests(self) -> list[PointRequest]:
        """Pick, place, then the support anchors: what to send to the projection, in that order."""
        if self.pick is None or self.place is None:
            return []
        return [self.pick, self.place, *self.support]


def _choose(points: tuple[AnswerPoint, ...]) -> tuple[AnswerPoint | None, AnswerPoint | None]:
    """Pick and place among the answer points: by label when labelled, else the first two in order."""
    pick = next((p for p in points if (p.label or "").strip().lower() in PICK_LABELS), None)
    place = next((p for p in points if (p.label or "").strip().lower() in PLACE_LABELS), None)
    rest = [p for p in points if p is not pick and p is not place]
    if pick is None and rest:
        pick = rest.pop(0)
    if place is None and rest:
        place = rest.pop(0)
    return pick, place


def interpret_pointing(
    text: str, observation: Observation, convention: PointConvention = _NORM1000
) -> PointingDecision:
    """Parse and validate a PinCoT answer against the observation's views (never raises)."""
    sizes = observation.image_sizes
    if convention.name in ("pixels_resized", "pixels"):
        frames = [convention.model_frame_size(w, h) for w, h in sizes]
        trace = parse(text, len(sizes), coordinates="pixels", view_sizes=frames)
    else:
        trace = parse(text, len(sizes))
    if trace.has_think and trace.answer.strip() == "[]" and set(trace.error_codes()) <= {"unparsable_answer"}:
        # An explicit empty list: the model found nothing it was asked to act on. Its reasoning says why
        # (its pins read as their IDs, so the tail kept is words, not tag markup).
        why = " ".join(_TAG.sub(lambda m: m.group(1), trace.think).split())
        return PointingDecision(
            trace, refusal=TaskRefusal("model_declined", f"the model gave no target: {why[-400:]}", ("empty_answer",))
        )
    if trace.errors:
        codes = trace.error_codes()
        reason = "id_conflict" if any(c in ID_CONFLICT_CODES for c in codes) else "invalid_reasoning"
        return PointingDecision(trace, refusal=TaskRefusal(reason, _issues_text(trace.errors), codes))
    if trace.done:
        return PointingDecision(trace, done=True)
    pick, place = _choose(trace.answer_points)
    if pick is None or place is None:
        found = len(trace.answer_points)
        return PointingDecision(
            trace,
            refusal=TaskRefusal(
                "invalid_answer", f"the answer needs a pick point and a place point, found {found} point(s)"
            ),
        )
    names = trace.names()
    requests = []
    for role, point in (("pick", pick), ("place", place)):
        img_idx = point.img_idx
        if img_idx is None and len(sizes) == 1:
            img_idx = 0
        if img_idx is None or not 0 <= img_idx < len(sizes):
            return PointingDecision(
                trace,
                refusal=TaskRefusal(
                    "invalid_answer",
                    f"the {role} point [{point.x:g}, {point.y:g}] names no view among {len(sizes)} "
                    f"(img_idx {point.img_idx!r}) and is tied to no anchor",
                ),
            )
        width, height = sizes[img_idx]
        # The trace holds 0–1000 points whatever the model wrote (parse normalised pixel answers).
        u, v = _NORM1000.to_pixels([point.x, point.y], width, height)
        anchor_id = point.id or ""
        requests.append(PointRequest(float(u), float(v), img_idx, anchor_id, names.get(anchor_id, point.label or role)))
    support = []
    for request in requests:
        if not request.id:
            continue
        for anchor in trace.anchors_for(request.id):
            if anchor.img_idx == request.img_idx or anchor.in_answer:
                continue
            width, height = sizes[anchor.img_idx]
            u, v = _NORM1000.to_pixels([anchor.x, anchor.y], width, height)
            support.append(PointRequest(float(u), float(v), anchor.img_idx, anchor.id, anchor.name))
    return PointingDecision(trace, requests[0], requests[1], tuple(support))


@dataclass(frozen=True)
class SubtaskDecision:
    """A validated R^3 step: the instruction, its skill and slot values, or ``done``."""

    response: SubtaskResponse
    skill: str = ""
    done: bool = False
    refusal: TaskRefusal | None = None

    @property
    def valid(self) -> bool:
        return self.refusal is None

    @property
    def instruction(self) -> str:
        return self.response.instruction


def interpret_subtask(text: str, grammar: SkillGrammar, skills: Mapping[str, str]) -> SubtaskDecision:
    """Parse an R^3 response against the skill library (``skills``: format → skill name)."""
    response = parse_subtask(text, grammar)
    if response.errors:
        codes = tuple(e.code for e in response.errors)
        return SubtaskDecision(response, refusal=TaskRefusal("invalid_subtask", _issues_text(response.errors), codes))
    if response.done:
        return SubtaskDecision(response, done=True)
    assert response.skill_format is not None  # a valid, not-done response matched a format
    skill = skills.get(response.skill_format.pattern, "")
    if not skill:
        return SubtaskDecision(
            response,
            refusal=TaskRefusal("unknown_skill", f"{response.instruction!r} matched a format with no executable skill"),
        )
    return SubtaskDecision(response, skill=skill)


@dataclass(frozen=True)
class PlanDecision:
    """A validated RoboGPT-R1 plan: the action names to run in order."""

    response: PlanResponse
    steps: tuple[str, ...] = ()
    refusal: TaskRefusal | None = None
    done: bool = field(default=False)

    @property
    def valid(self) -> bool:
        return self.refusal is None


def interpret_plan(text: str, actions: Mapping[int, str]) -> PlanDecision:
    """Parse a RoboGPT-R1 plan against the action dictionary; only a fully executable plan is valid."""
    response = parse_plan(text, actions)
    if response.errors:
        codes = tuple(e.code for e in response.errors)
        return PlanDecision(response, refusal=TaskRefusal("invalid_plan", _issues_text(response.errors), codes))
    return PlanDecision(response, steps=tuple(actions[s.action_id] for s in response.steps))
