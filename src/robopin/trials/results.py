"""A batch of trials as numbers: RoboPIN's Table 6, failures by named reason, stage timing, and what the
operator's judgements make possible (how often the judge and the stack's own verdict agree, sub-goal
progress).

Reads the trial folders only (``summary.json`` of each, see :mod:`robopin.trials.log`; ``extra.judgement``
and ``extra.stack`` are written by ``robopin trial``), so ``results.md`` can be rebuilt while a batch
runs, after a crash, or on another machine. RoboPIN's Table 6 format: one row per task, one column per
method, cells ``successes/trials``.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from robopin.system.timing import StepTiming, TimingSummary, summarize_timings
from robopin.trials.log import TrialSummary, read_trial, trial_folders

__all__ = [
    "TASK_TITLES", "agreement", "failure_table", "failures_by_reason", "judged_results_markdown", "load_summaries",
    "model_errors", "reasoning_measures", "reasoning_quality", "results_markdown", "subgoal_progress",
    "success_table", "timing_summary",
]  # fmt: skip

TASK_TITLES = {"spatial": "Spatial", "multi_view": "Multi-view", "long_horizon": "Long-horizon"}


def load_summaries(root: str | Path) -> list[TrialSummary]:
    """Every finished trial (folder with ``summary.json``) under ``root``, in folder order."""
    summaries = []
    for folder in trial_folders(Path(root)):
        summary, _ = read_trial(folder)
        if summary is not None:
            summaries.append(summary)
    return summaries


def _tasks(summaries: Sequence[TrialSummary]) -> list[str]:
    present = list(dict.fromkeys(s.task for s in summaries))
    known = [t for t in TASK_TITLES if t in present]
    return known + [t for t in present if t not in TASK_TITLES]


def success_table(summaries: Sequence[TrialSummary]) -> str:
    """RoboPIN's table: ``Task | method ... `` with ``successes/trials`` per cell (Markdown)."""
    methods = list(dict.fromkeys(s.method for s in summaries))
    counts: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0])
    for s in summaries:
        cell = counts[(s.task, s.method)]
        cell[0] += int(s.success)
        cell[1] += 1
    lines = ["| Task | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for task in _tasks(summaries):
        cells = [f"{counts[(task, m)][0]}/{counts[(task, m)][1]}" if (task, m) in counts else "–" for m in methods]
        lines.append(f"| {TASK_TITLES.get(task, task)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failure_table(summaries: Sequence[TrialSummary]) -> str:
    """Every failed trial with its named reason and detail (Markdown), then the count per reason."""
    failed = [s for s in summaries if not s.success]
    if not failed:
        return "No failures."
    lines = ["| trial | task | method | seed | reason | detail |", "|---|---|---|---|---|---|"]
    for s in failed:
        detail = str(s.extra.get("detail", "")).replace("|", "/").replace("\n", " ")[:300]
        lines.append(f"| {s.trial_id} | {s.task} | {s.method} | {s.extra.get('seed', '')} | `{s.failure}` | "
                     f"{detail} |")
    by_reason = collections.Counter(s.failure for s in failed)
    lines.append("")
    lines.append("Failures by reason: " + ", ".join(f"`{r}` {n}" for r, n in by_reason.most_common()))
    return "\n".join(lines)


def _step_timings(summaries: Iterable[TrialSummary]) -> list[StepTiming]:
    steps = []
    for s in summaries:
        for t in s.extra.get("timings", []):
            steps.append(StepTiming(int(t["step"]), dict(t["durations_s"]), dict(t.get("starts_s", {})),
                                    float(t.get("model_s", 0.0))))
    return steps


def timing_summary(summaries: Iterable[TrialSummary]) -> TimingSummary:
    """Per-stage timing over every step of every trial given."""
    return summarize_timings(_step_timings(summaries))


def results_markdown(summaries: Sequence[TrialSummary], *, title: str = "robopin trials", command: str = "") -> str:
    """The whole batch as Markdown: success table, failures, and timing per robot and overall."""
    parts = [f"# {title}", ""]
    if command:
        parts += [f"Command: `{command}`", ""]
    parts += [f"{len(summaries)} trial(s). Success per task (RoboPIN Table 6 format):", "", success_table(summaries),
              "", "## Failures", "", failure_table(summaries), "", "## Timing per step (seconds)", ""]
    for method in dict.fromkeys(s.method for s in summaries):
        parts += [f"### {method}", "", "```", timing_summary([s for s in summaries if s.method == method]).table(),
                  "```", ""]
    return "\n".join(parts)


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
