"""A judged batch as numbers: RoboPIN's Table 6 from the judgements, failures by the judge's reason,
how often the judge and the stack's own verdict agree, sub-goal progress and stage timing.

Reads the trial summaries only (``summary.json``: ``extra.judgement`` and ``extra.stack`` are written by
``robopin trial``), so ``results.md`` can be rebuilt at any time. The success table and the timing
come from :mod:`robopin.system.results`; this module adds what the operator's judgements make possible.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from typing import Any

from robopin.system.results import TASK_TITLES, success_table, timing_summary
from robopin.trials.log import TrialSummary

__all__ = [
    "agreement", "failures_by_reason", "judged_results_markdown", "model_errors", "reasoning_measures",
    "reasoning_quality", "subgoal_progress",
]  # fmt: skip

REASONING_MEASURES = (("format", "format_score"), ("consistency", "identity_consistency"),
                      ("anchor_coverage", "anchor_coverage"), ("cross_step_id_coverage", "cross_step_id_coverage"),
                      ("pin_accuracy", "pin_accuracy"), ("answer_accuracy", "answer_accuracy"),
                      ("instruction_validity", "instruction_validity"), ("plan_accuracy", "plan_accuracy"))  # fmt: skip
"""Run-time measures of each published reasoning step (PinnedReasoning field → summary key)."""
_MEASURE_TITLES = {"consistency": "identity consistency", "cross_step_id_coverage": "cross-step ID coverage",
                   "plan_accuracy": "plan LCS accuracy"}


def _judge(summary: TrialSummary) -> str:
    return str((summary.extra.get("judgement") or {}).get("judge") or summary.extra.get("judge") or "sim")


def _stack_success(summary: TrialSummary) -> bool | None:
    stack = summary.extra.get("stack")
    return None if not isinstance(stack, dict) else bool(stack.get("success"))


def _stack_said(stack: dict[str, Any]) -> str:
    """The stack's own verdict in a cell: its task result, and the simulator's world check when there was one."""
    if not stack:
        return "–"
    text = "success" if stack.get("success") else f"failure `{stack.get('failure', '')}`"
    if stack.get("world_success") is not None:
        text += "; world check " + ("success" if stack["world_success"] else "failure")
    return text


def _cell(text: Any) -> str:
    return str(text).replace("|", "/").replace("\n", " ")[:240]


def failures_by_reason(summaries: Sequence[TrialSummary]) -> str:
    """Every failed trial with the judge's reason, note and the stack's own verdict; then counts per reason."""
    failed = [s for s in summaries if not s.success]
    if not failed:
        return "No failures."
    lines = ["| trial | task | method | seed | judged by | reason | note / detail | stack said |",
             "|---|---|---|---|---|---|---|---|"]
    for s in failed:
        judgement = s.extra.get("judgement") or {}
        stack = s.extra.get("stack") or {}
        reason = f"`{s.failure}`" + (f" (`{judgement['refusal']}`)" if judgement.get("refusal") else "")
        said = _stack_said(stack)
        # An operator's note is theirs; the simulator's judgement carries the stack's detail instead.
        note = judgement.get("note", "") if _judge(s) == "operator" else s.extra.get("detail", "")
        seed = "" if s.extra.get("seed") is None else s.extra["seed"]
        lines.append(f"| {s.trial_id} | {s.task} | {s.method} | {seed} | {_judge(s)} | {reason} | "
                     f"{_cell(note)} | {said} |")
    counts = collections.Counter(s.failure for s in failed)
    lines += ["", "Failures by reason: " + ", ".join(f"`{r}` {n}" for r, n in counts.most_common())]
    return "\n".join(lines)


def agreement(summaries: Sequence[TrialSummary]) -> str:
    """Per task and method: trials where the judge and the stack's own verdict agree, and each disagreement."""
    rows: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0, 0])  # n, agree, j+s-, j-s+
    for s in summaries:
        stack = _stack_success(s)
        if stack is None:
            continue
        row = rows[(s.task, s.method)]
        row[0] += 1
        row[1] += int(stack == s.success)
        row[2] += int(s.success and not stack)
        row[3] += int(stack and not s.success)
    if not rows:
        return "No trial recorded the stack's own verdict."
    lines = ["| task | method | trials | agree | judge success, stack failure | judge failure, stack success |",
             "|---|---|---|---|---|---|"]
    total = [0, 0]
    for (task, method), (n, agree, judge_only, stack_only) in rows.items():
        lines.append(f"| {TASK_TITLES.get(task, task)} | {method} | {n} | {agree}/{n} | {judge_only} | {stack_only} |")
        total[0] += n
        total[1] += agree
    lines += ["", f"Agreement overall: {total[1]}/{total[0]} ({100.0 * total[1] / total[0]:.0f} %)."]
    return "\n".join(lines)


def subgoal_progress(summaries: Sequence[TrialSummary]) -> str:
    """Sub-goals reached per long-horizon trial (judge's count, and the stack's executed steps)."""
    lines = []
    reached_sum = total_sum = 0
    for s in summaries:
        judgement = s.extra.get("judgement") or {}
        total = judgement.get("subgoals_total")
        if not total or total < 2:
            continue
        reached = judgement.get("subgoals_reached")
        stack = s.extra.get("stack") or {}
        lines.append(f"| {s.trial_id} | {s.method} | {reached if reached is not None else '–'}/{total} | "
                     f"{stack.get('steps_executed', '–')} | {'success' if s.success else s.failure} |")
        reached_sum += int(reached or 0)
        total_sum += int(total)
    if not lines:
        return "No long-horizon trials."
    head = ["| trial | method | sub-goals reached | steps the stack executed | verdict |", "|---|---|---|---|---|"]
    return "\n".join(head + lines + ["", f"Sub-goals reached overall: {reached_sum}/{total_sum}."])


def reasoning_measures(message: Any) -> dict[str, Any]:
    """One published reasoning step (a PinnedReasoning) as the measures a trial summary keeps; a measure
    that does not apply (NaN: no anchors in an R^3 or RoboGPT-R1 response) is None."""
    values: dict[str, Any] = {"step": int(message.step), "valid": bool(message.valid)}
    for key, field_name in REASONING_MEASURES:
        value = float(getattr(message, field_name, math.nan))  # a bag recorded before the field existed
        values[key] = value if math.isfinite(value) else None
    return values


def reasoning_quality(summaries: Sequence[TrialSummary]) -> str:
    """Per method: valid steps and the mean of each run-time measure over the steps it applies to."""
    by_method: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for s in summaries:
        by_method[s.method].extend(s.extra.get("reasoning") or [])
    lines = []
    for method, steps in by_method.items():
        if not steps:
            continue
        cells = [f"{sum(bool(x.get('valid')) for x in steps)}/{len(steps)}"]
        for key, _ in REASONING_MEASURES:
            values = [x[key] for x in steps if x.get(key) is not None]
            cells.append(f"{sum(values) / len(values):.3f}" if values else "–")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    if not lines:
        return "No reasoning steps recorded."
    names = [_MEASURE_TITLES.get(key, key.replace("_", " ")) for key, _ in REASONING_MEASURES]
    head = ["| method | valid steps | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    return "\n".join(head + lines)


def model_errors(summaries: Sequence[TrialSummary]) -> str:
    """Per method: the simulated model's samples and the errors it drew, by kind (robopin.sim.model_errors)."""
    by_method: dict[str, collections.Counter] = {}
    samples: collections.Counter = collections.Counter()
    for s in summaries:
        counts = by_method.setdefault(s.method, collections.Counter())
        counts.update(s.extra.get("model_errors") or {})
        samples[s.method] += int(s.extra.get("model_samples") or 0)
    kinds = sorted({k for c in by_method.values() for k in c}) or ["none"]  # samples drawn, none erred
    if not any(samples.values()):
        return "No simulated model errors (the oracle, or a real model)."
    lines = ["| method | samples | " + " | ".join(kinds) + " |", "|---|---|" + "---|" * len(kinds)]
    for method, counts in by_method.items():
        lines.append(f"| {method} | {samples[method]} | " + " | ".join(str(counts.get(k, 0)) for k in kinds) + " |")
    return "\n".join(lines)


def judged_results_markdown(summaries: Sequence[TrialSummary], *, title: str = "robopin trials",
                            command: str = "") -> str:
    """The whole batch as Markdown (see the module docstring)."""
    judges = collections.Counter(_judge(s) for s in summaries)
    parts = [f"# {title}", ""]
    if command:
        parts += [f"Command: `{command}`", ""]
    names = {"operator": "the operator", "sim": "the simulator", "stack": "the stack's own verdict"}
    judged = ", ".join(f"{n} by {names.get(j, j)}" for j, n in judges.items())
    parts += [f"{len(summaries)} trial(s), judged {judged}. Success per task (RoboPIN Table 6 format, from the "
              "judgements):", "", success_table(summaries), "",
              "## Failures by the judge's reason", "", failures_by_reason(summaries), "",
              "## Judge and stack agreement", "", agreement(summaries), "",
              "## Sub-goal progress (long-horizon)", "", subgoal_progress(summaries), "",
              "## Reasoning quality at run time (every model call)", "", reasoning_quality(summaries), "",
              "## Simulated model errors drawn", "", model_errors(summaries), "",
              "## Timing per step (seconds)", ""]
    for method in dict.fromkeys(s.method for s in summaries):
        parts += [f"### {method}", "", "```", timing_summary([s for s in summaries if s.method == method]).table(),
                  "```", ""]
    return "\n".join(parts)
