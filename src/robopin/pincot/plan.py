"""RoboGPT-R1 executable plans: parse the JSON plan, score its format, and score it against a reference.

The model answers one JSON object (optionally inside ``<answer>`` and/or a ```json fence)::

    {"visual_state_description": str, "reasoning_and_reflection": str, "language_plan": str,
     "executable_plan": [{"action_id": int, "action_name": str}, ...]}

with action IDs from a per-task action dictionary D_action (ID → name). Measures (RoboGPT-R1 §3.4):

- R_format = 0.3·R_section + 0.3·R_type + 0.4·R_validity, where
  R_section = (1/|S|) Σ_{s∈S} 1[type(o_s) = T_s] over the four fields,
  R_type = (1/m) Σ_i 1[id_i ∈ Int ∧ name_i ∈ Str≠∅] over the m plan steps (0 when m = 0), and
  R_validity = (1/|C|) Σ_{i∈C} 1[norm(name_i) = norm(D_action[id_i])] over the steps C whose ID is in
  the dictionary (0 when C is empty); norm lower-cases and trims.
- Plan accuracy R_lcs = k / n: k = LCS of the predicted and reference action-name sequences, n = |reference|.

Only a plan whose every step is a dictionary action under its own name is executable
(``PlanResponse.valid``). Nothing here raises on any text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from robopin.pincot.answer import decode_json, strip_fence
from robopin.pincot.trace import Issue

SECTIONS: dict[str, type] = {
    "visual_state_description": str,
    "reasoning_and_reflection": str,
    "language_plan": str,
    "executable_plan": list,
}
"""The four required fields and their expected JSON types."""

FORMAT_WEIGHTS = (0.3, 0.3, 0.4)
"""Weights of R_section, R_type and R_validity in R_format."""


def normalize_action_name(name: str) -> str:
    """RoboGPT-R1's norm(·): lower-case and trim (inner whitespace collapsed as well)."""
    return " ".join(str(name).lower().split())


@dataclass(frozen=True)
class PlanStep:
    """One step of the executable plan as written (ID may be any JSON value when malformed)."""

    action_id: Any
    action_name: Any

    @property
    def well_typed(self) -> bool:
        """True when the ID is an int (not a bool) and the name a non-empty string."""
        return (
            isinstance(self.action_id, int)
            and not isinstance(self.action_id, bool)
            and isinstance(self.action_name, str)
            and bool(self.action_name.strip())
        )


@dataclass(frozen=True)
class PlanResponse:
    """A parsed RoboGPT-R1 answer with its format components."""

    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    steps: tuple[PlanStep, ...] = ()
    section_score: float = 0.0
    type_score: float = 0.0
    validity_score: float = 0.0
    errors: tuple[Issue, ...] = ()
    warnings: tuple[Issue, ...] = ()

    @property
    def format_score(self) -> float:
        """R_format = 0.3·R_section + 0.3·R_type + 0.4·R_validity."""
        w_section, w_type, w_validity = FORMAT_WEIGHTS
        return w_section * self.section_score + w_type * self.type_score + w_validity * self.validity_score

    @property
    def valid(self) -> bool:
        """True when every step is a dictionary action under its own name (executable as written)."""
        return not self.errors

    @property
    def action_names(self) -> tuple[str, ...]:
        """Normalized names of the steps, in order (for plan accuracy)."""
        return tuple(normalize_action_name(s.action_name) for s in self.steps if isinstance(s.action_name, str))

    @property
    def action_ids(self) -> tuple[int, ...]:
        """IDs of the well-typed steps, in order."""
        return tuple(s.action_id for s in self.steps if s.well_typed)


def _extract_json(text: str, warnings: list[Issue]) -> tuple[bool, Any]:
    lower = text.lower()
    start = lower.find("<answer>")
    body = text
    if start >= 0:
        end = lower.find("</answer>", start)
        body = text[start + len("<answer>") : end if end >= 0 else len(text)]
    body, _fenced = strip_fence(body)
    return decode_json(body, warnings)


def parse_plan(text: str, actions: Mapping[int, str]) -> PlanResponse:
    """Parse a RoboGPT-R1 answer against this task's action dictionary; never raises."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    warnings: list[Issue] = []
    errors: list[Issue] = []
    ok, value = _extract_json(text, warnings)
    if not ok or not isinstance(value, dict):
        errors.append(Issue("missing_plan", "the answer holds no JSON object"))
        return PlanResponse(text, errors=tuple(errors), warnings=tuple(warnings))
    present = sum(1 for name, kind in SECTIONS.items() if isinstance(value.get(name), kind))
    section_score = present / len(SECTIONS)
    for name, kind in SECTIONS.items():
        if name not in value:
            errors.append(Issue("missing_section", f"field {name!r} is missing"))
        elif not isinstance(value[name], kind):
            errors.append(
                Issue("bad_section", f"field {name!r} is a {type(value[name]).__name__}, expected {kind.__name__}")
            )
    raw_steps = value.get("executable_plan") if isinstance(value.get("executable_plan"), list) else []
    steps = []
    for index, raw in enumerate(raw_steps):
        if isinstance(raw, dict):
            steps.append(PlanStep(raw.get("action_id"), raw.get("action_name")))
        else:
            steps.append(PlanStep(None, None))
            errors.append(Issue("bad_step", f"plan step {index} is {raw!r}, not an object"))
    well_typed = [s for s in steps if s.well_typed]
    type_score = len(well_typed) / len(steps) if steps else 0.0
    known = [s for s in well_typed if s.action_id in actions]
    matching = [s for s in known if normalize_action_name(s.action_name) == normalize_action_name(actions[s.action_id])]
    validity_score = len(matching) / len(known) if known else 0.0
    for index, step in enumerate(steps):
        if not step.well_typed:
            if isinstance(raw_steps[index], dict):
                errors.append(
                    Issue("bad_step", f"plan step {index} {raw_steps[index]!r} needs an int action_id and a name")
                )
        elif step.action_id not in actions:
            errors.append(
                Issue("unknown_action", f"plan step {index}: action_id {step.action_id} is not in the dictionary")
            )
        elif normalize_action_name(step.action_name) != normalize_action_name(actions[step.action_id]):
            errors.append(
                Issue(
                    "action_name_mismatch",
                    f"plan step {index}: action_id {step.action_id} is {actions[step.action_id]!r}, "
                    f"not {step.action_name!r}",
                )
            )
    if isinstance(value.get("executable_plan"), list) and not steps:
        errors.append(Issue("empty_plan", "executable_plan is empty"))
    return PlanResponse(
        text,
        fields=dict(value),
        steps=tuple(steps),
        section_score=section_score,
        type_score=type_score,
        validity_score=validity_score,
        errors=tuple(errors),
        warnings=tuple(warnings),
    )


def lcs_length(predicted: Sequence[str], reference: Sequence[str]) -> int:
    """Length of the longest common subsequence of two sequences (O(m·n) time, O(n) memory)."""
    previous = [0] * (len(reference) + 1)
    for item in predicted:
        current = [0]
        for j, ref in enumerate(reference, start=1):
            current.append(previous[j - 1] + 1 if item == ref else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def plan_accuracy(predicted: PlanResponse | Sequence[str], reference: Sequence[str]) -> float:
    """R_lcs = LCS(predicted names, reference names) / |reference| (names normalized; 0 if reference empty)."""
    names = predicted.action_names if isinstance(predicted, PlanResponse) else predicted
    if not reference:
        return 0.0
    return lcs_length([normalize_action_name(n) for n in names], [normalize_action_name(r) for r in reference]) / len(
        reference
    )
