"""Results of a batch of trials: RoboPIN's success table, failures by named reason, stage timing.

Reads only the trial folders (``summary.json`` of each, see :mod:`robopin.trials.log`), so a batch
can be summarised while it runs, after a crash, or on another machine. RoboPIN's Table 6 format:
one row per task, one column per method, cells ``successes/trials``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from pathlib import Path

from robopin.system.timing import StepTiming, TimingSummary, summarize_timings
from robopin.trials.log import TrialSummary, read_trial, trial_folders

__all__ = ["TASK_TITLES", "failure_table", "load_summaries", "results_markdown", "success_table", "timing_summary"]

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
