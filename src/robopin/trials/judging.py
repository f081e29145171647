"""Who says a trial succeeded: the operator's judgement (or the simulator's), next to the stack's own verdict.

On a real cell only a person can tell whether the duck is on the middle plate, so a trial's success is
a :class:`Judgement`: success, or failure with one reason from :data:`FAILURE_REASONS` (``other`` needs
a note; ``refused`` carries the stack's own named reason), plus the sub-goals reached on long-horizon
tasks. The stack's view of the same trial (its task result, and in simulation the world check) is a
:class:`StackVerdict`, kept beside the judgement so the report can say how often the two agree.

A trial folder holds ``stack.json`` (written as soon as the task has ended, before anyone is asked)
and ``judgement.json``; a trial with the first and not the second is waiting for its judgement, which
``robopin trial --resume`` asks again instead of re-running the trial.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import yaml

from robopin.registry import config_fields

__all__ = [
    "FAILURE_REASONS",
    "JUDGES",
    "Judgement",
    "JudgementError",
    "StackVerdict",
    "judgement_from_answer",
    "load_judge_file",
    "parse_answer",
    "read_judgement",
    "read_stack_verdict",
    "sim_judgement",
    "write_judgement",
    "write_stack_verdict",
]

FAILURE_REASONS: dict[str, str] = {
    "wrong_object": "picked (or went for) another object than the instruction meant",
    "wrong_place": "put the object somewhere else than the instruction meant",
    "grasp_failed": "closed the gripper without holding the object",
    "dropped": "held the object, then lost it before the place",
    "collision": "the arm or the object hit something",
    "safety_stop": "the controller or a person stopped the arm (e-stop, protective stop, Stop button)",
    "refused": "the stack refused the task with a named reason (no motion, or motion ended by it)",
    "timeout": "the task did not end within its time limit",
    "other": "anything else (say what in the note)",
}
"""The fixed list an operator picks a failure reason from (in the console, the terminal and judge files)."""

JUDGES = ("operator", "sim", "stack")
STACK_FILE = "stack.json"
JUDGEMENT_FILE = "judgement.json"


class JudgementError(ValueError):
    """A judgement that cannot be taken: unknown reason, missing note, sub-goals out of range, bad file."""

    def __init__(self, message: str, code: str = "bad_judgement") -> None:
        super().__init__(message)
        self.code = code


class _Record:
    """A verdict as a trial's JSON record holds it; keys a newer record adds are ignored when it is read."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = config_fields(cls)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclasses.dataclass(frozen=True)
class StackVerdict(_Record):
    """What the stack itself said about a trial: its task result and, in simulation, the world check.

    ``failure`` is the stack's named reason (``grasp_missed``, ``depth_hole``, ``task_timeout``…),
    empty when the task reported success. ``world_success`` is None on a real cell.
    """

    success: bool
    failure: str = ""
    detail: str = ""
    task_id: str = ""
    steps_executed: int = 0
    world_success: bool | None = None
    world_detail: str = ""
    goals_reached: int | None = None
    goals_total: int | None = None


@dataclasses.dataclass(frozen=True)
class Judgement(_Record):
    """The verdict a trial is counted by. ``judge``: operator or sim; ``source``: who answered."""

    success: bool
    reason: str = ""
    note: str = ""
    subgoals_reached: int | None = None
    subgoals_total: int | None = None
    refusal: str = ""
    judge: str = "operator"
    source: str = ""
    judged_at: str = ""

    @property
    def failure(self) -> str:
        """The named failure the trial log records (empty on success)."""
        return "" if self.success else self.reason

    def describe(self) -> str:
        """One line for the terminal and the console's table."""
        if self.success:
            text = "success"
        else:
            text = f"failure: {self.reason}" + (f" ({self.refusal})" if self.refusal else "")
        if self.subgoals_total and self.subgoals_total > 1 and self.subgoals_reached is not None:
            text += f", sub-goals {self.subgoals_reached}/{self.subgoals_total}"
        return text + (f" — {self.note}" if self.note else "")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def parse_answer(entry: Any, where: str = "judgement") -> dict[str, Any]:
    """A judgement as a person or a judge file writes it → ``{success, reason, note, subgoals}``.

    Accepted forms: ``success``; a reason name (``grasp_failed``); ``{failure: grasp_failed}``;
    ``{success: false, reason: grasp_failed, note: "..."}``; any of the mappings with ``subgoals: N``.
    Checks what can be checked without the trial (the reason is known, ``other`` has a note).
    """
    if isinstance(entry, str):
        text = entry.strip()
        entry = {"success": True} if text == "success" else {"success": False, "reason": text}
    if not isinstance(entry, Mapping):
        raise JudgementError(f"{where}: expected 'success', a failure reason or a mapping, got {entry!r}")
    known = {"success", "failure", "reason", "note", "subgoals"}
    unknown = sorted(set(map(str, entry)) - known)
    if unknown:
        raise JudgementError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")
    reason = entry.get("reason", entry.get("failure", ""))
    if "failure" in entry and "reason" in entry and entry["failure"] != entry["reason"]:
        raise JudgementError(f"{where}: 'failure' and 'reason' disagree ({entry['failure']!r} vs {entry['reason']!r})")
    success = entry.get("success", not reason)
    if not isinstance(success, bool):
        raise JudgementError(f"{where}: success must be true or false, got {success!r}")
    reason = "" if reason is None else str(reason).strip()
    note = str(entry.get("note") or "").strip()
    if success and reason:
        raise JudgementError(f"{where}: a success has no failure reason (got {reason!r})")
    if not success:
        if not reason:
            raise JudgementError(f"{where}: a failure needs a reason, one of {list(FAILURE_REASONS)}",
                                 "missing_reason")
        if reason not in FAILURE_REASONS:
            raise JudgementError(f"{where}: unknown failure reason {reason!r}; expected one of {list(FAILURE_REASONS)}",
                                 "unknown_reason")
        if reason == "other" and not note:
            raise JudgementError(f"{where}: reason 'other' needs a note saying what happened", "note_required")
    subgoals = entry.get("subgoals")
    if subgoals is not None and (isinstance(subgoals, bool) or not isinstance(subgoals, int) or subgoals < 0):
        raise JudgementError(f"{where}: subgoals must be a whole number >= 0, got {subgoals!r}", "bad_subgoals")
    return {"success": success, "reason": reason, "note": note, "subgoals": subgoals}


def judgement_from_answer(answer: Any, stack: StackVerdict, *, subgoals_total: int | None = None,
                          source: str = "", where: str = "judgement") -> Judgement:
    """Validate an operator's answer against the trial it judges and return the :class:`Judgement`.

    ``refused`` takes the stack's own named reason and is refused when the stack reported success;
    sub-goals must lie in ``0..subgoals_total`` and a success reaches all of them.
    """
    parsed = parse_answer(answer, where)
    success, reason = parsed["success"], parsed["reason"]
    refusal = ""
    if reason == "refused":
        if stack.success:
            raise JudgementError(f"{where}: 'refused' names the stack's refusal, but the stack reported success "
                                 "for this trial; pick the reason you saw", "not_refused")
        refusal = stack.failure
    reached = parsed["subgoals"]
    total = subgoals_total if subgoals_total and subgoals_total > 1 else None  # one goal: nothing to count
    if total is not None:
        if reached is None:
            reached = total if success else None
        if reached is not None and reached > total:
            raise JudgementError(f"{where}: {reached} sub-goals reached, but the task has {total}", "bad_subgoals")
        if success and reached != total:
            raise JudgementError(f"{where}: a success reaches every sub-goal ({total}), not {reached}",
                                 "bad_subgoals")
        if reached is None:
            raise JudgementError(f"{where}: a failed long-horizon trial needs the number of sub-goals reached "
                                 f"(0..{total})", "bad_subgoals")
    elif reached is not None and reached > 1:
        raise JudgementError(f"{where}: this task has no sub-goals to count (got {reached})", "bad_subgoals")
    return Judgement(success, reason, parsed["note"], reached, total, refusal, "operator", source, _now())


def sim_judgement(stack: StackVerdict) -> Judgement:
    """The simulator as the judge: the stack's task succeeded and the world check holds (judge ``sim``).

    A task that reported success on a world that disagrees fails with ``goal_not_met``; otherwise the
    stack's own named failure stands.
    """
    if stack.success and stack.world_success is False:
        reason, note = "goal_not_met", stack.world_detail
    else:
        reason = stack.failure
        note = stack.detail + (f" | world: {stack.world_detail}" if stack.world_success is False else "")
    # Without a simulated world (``robopin up --demo`` on a real cell) this is only the stack's own word.
    judge, source = ("sim", "simulator") if stack.world_success is not None else ("stack", "the stack's verdict")
    return Judgement(not reason, reason, note if reason else "", stack.goals_reached, stack.goals_total, "", judge,
                     source, _now())


def load_judge_file(path: str | Path) -> list[dict[str, Any]]:
    """A scripted operator: a YAML list of judgements, one per trial in the batch's order (all checked now)."""
    path = Path(path)
    if not path.is_file():
        raise JudgementError(f"judge file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise JudgementError(f"judge file {path}: not valid YAML: {error}") from None
    if not isinstance(data, list) or not data:
        raise JudgementError(f"judge file {path}: expected a YAML list of judgements (one per trial), got {data!r}")
    return [parse_answer(entry, f"judge file {path}, entry {index + 1}") for index, entry in enumerate(data)]


def _write(folder: Path, name: str, data: Mapping[str, Any]) -> Path:
    path = Path(folder) / name
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(dict(data), indent=2, allow_nan=False), encoding="utf-8")
    scratch.replace(path)  # never a half-written verdict after a crash
    return path


def _read(folder: Path, name: str) -> dict[str, Any] | None:
    path = Path(folder) / name
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise JudgementError(f"{path}: not JSON: {error}") from None


def write_stack_verdict(folder: str | Path, verdict: StackVerdict, **context: Any) -> Path:
    """Keep the stack's verdict (and what the judgement needs later: task, sub-goals) in the trial folder."""
    return _write(Path(folder), STACK_FILE, {**verdict.as_dict(), "context": context})


def read_stack_verdict(folder: str | Path) -> tuple[StackVerdict, dict[str, Any]] | None:
    data = _read(Path(folder), STACK_FILE)
    if data is None:
        return None
    return StackVerdict.from_dict(data), dict(data.get("context") or {})


def write_judgement(folder: str | Path, judgement: Judgement) -> Path:
    return _write(Path(folder), JUDGEMENT_FILE, judgement.as_dict())


def read_judgement(folder: str | Path) -> Judgement | None:
    data = _read(Path(folder), JUDGEMENT_FILE)
    return None if data is None else Judgement.from_dict(data)


def reasons_table(reasons: Sequence[str] = tuple(FAILURE_REASONS)) -> str:
    """The failure reasons with what each means, one per line (terminal help)."""
    return "\n".join(f"  {name:<13} {FAILURE_REASONS[name]}" for name in reasons)


def finish_judged_trial(folder: str | Path, judgement: Judgement) -> Any:
    """Write ``judgement.json`` and the trial's ``summary.json`` from its ``stack.json``; return the summary.

    The summary counts the trial by the judgement (success or the judge's reason) and keeps the stack's
    verdict and the whole judgement in ``extra`` (``judge``, ``judgement``, ``stack``).
    """
    from robopin.trials.log import TrialLog, TrialSummary

    folder = Path(folder)
    found = read_stack_verdict(folder)
    if found is None:
        raise JudgementError(f"{folder}: no {STACK_FILE}; the trial has not run to its end")
    stack, context = found
    summary = dict(context.get("summary") or {})
    if not summary.get("trial_id"):
        raise JudgementError(f"{folder / STACK_FILE}: no summary context to finish the trial with")
    write_judgement(folder, judgement)
    extra = dict(summary.pop("extra", {}) or {})
    extra.update(judge=judgement.judge, judgement=judgement.as_dict(), stack=stack.as_dict(),
                 detail=judgement.note or stack.detail)
    result = TrialSummary(**summary, success=judgement.success, failure=judgement.failure, extra=extra)
    TrialLog(folder.parent, folder.name).finish(result)
    return result
