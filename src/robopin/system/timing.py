"""Per-stage timing of a task from its ExecuteTask feedback, and the summary over many trials.

The planner reports every stage change of a task as feedback (observing, reasoning, validating,
projecting, planning, executing, done). A stage lasts from its feedback to the next one, so a
client that timestamps feedback on arrival measures the whole stack as a user sees it, DDS
included. The model's own time comes from each PinnedReasoning (``generation_time_s``); what is
left of the step is the stack's overhead, compared with RoboPIN's per-sample model time of 0.281 s
(the RoboPIN paper: 411.67 tokens per sample on one A800 with vLLM).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from robopin.stats import summarize

__all__ = [
    "FEEDBACK_STAGES",
    "OVERHEAD_STAGES",
    "ROBOPIN_MODEL_TIME_S",
    "FeedbackEvent",
    "StepTiming",
    "TimingSummary",
    "step_timings",
    "summarize_timings",
]

ROBOPIN_MODEL_TIME_S = 0.281
"""RoboPIN's per-sample model time (the RoboPIN paper, vLLM on one A800): the yardstick for our overhead."""

FEEDBACK_STAGES = {
    "observing": "observe",
    "reasoning": "reason",
    "validating": "validate",
    "projecting": "project",
    "planning": "plan",
    "executing": "execute",
}
"""ExecuteTask feedback stage -> trial-log stage (robopin.trials.log.STAGES)."""

OVERHEAD_STAGES = ("observe", "reason_overhead", "validate", "project")
"""What the stack adds around one model call before motion: capture, prompt/parse, validation, 3D."""


@dataclasses.dataclass(frozen=True)
class FeedbackEvent:
    """One feedback message as received: ``time_s`` on the client's monotonic clock."""

    time_s: float
    stage: str
    step: int
    detail: str = ""


@dataclasses.dataclass
class StepTiming:
    """Seconds per stage of one step, when each began (relative to the task start), and model time."""

    step: int
    durations_s: dict[str, float] = dataclasses.field(default_factory=dict)
    starts_s: dict[str, float] = dataclasses.field(default_factory=dict)
    model_s: float = 0.0

    @property
    def reason_overhead_s(self) -> float:
        """Reasoning time the model did not spend: prompt building, image encoding, parsing, transport."""
        return max(self.durations_s.get("reason", 0.0) - self.model_s, 0.0)

    @property
    def overhead_s(self) -> float:
        """Non-model time before motion planning (see OVERHEAD_STAGES)."""
        return (self.durations_s.get("observe", 0.0) + self.reason_overhead_s
                + self.durations_s.get("validate", 0.0) + self.durations_s.get("project", 0.0))

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "durations_s": dict(self.durations_s), "starts_s": dict(self.starts_s),
                "model_s": self.model_s, "reason_overhead_s": self.reason_overhead_s, "overhead_s": self.overhead_s}


def step_timings(events: Sequence[FeedbackEvent], start_s: float, end_s: float,
                 model_times_s: Mapping[int, float] | None = None) -> list[StepTiming]:
    """Split a task's feedback into per-step stage durations.

    A stage lasts until the next feedback (or ``end_s`` for the last); repeated feedback of the same
    stage (e.g. motion progress relayed as ``executing``) extends it. ``model_times_s`` maps step
    -> the model's generation time of that step. Unknown stages (``done``) close the previous one.
    """
    ordered = sorted(events, key=lambda e: e.time_s)
    timings: dict[int, StepTiming] = {}
    for index, event in enumerate(ordered):
        stage = FEEDBACK_STAGES.get(event.stage)
        if stage is None:
            continue
        following = ordered[index + 1].time_s if index + 1 < len(ordered) else end_s
        timing = timings.setdefault(event.step, StepTiming(event.step))
        timing.durations_s[stage] = timing.durations_s.get(stage, 0.0) + max(following - event.time_s, 0.0)
        timing.starts_s.setdefault(stage, max(event.time_s - start_s, 0.0))
    for step, seconds in (model_times_s or {}).items():
        timings.setdefault(step, StepTiming(step)).model_s = float(seconds)
    return [timings[s] for s in sorted(timings)]


@dataclasses.dataclass(frozen=True)
class TimingSummary:
    """Mean, median and 95th-percentile seconds per stage over the steps of many trials, and the overhead
    against RoboPIN's 0.281 s."""

    steps: int
    mean_s: Mapping[str, float]
    median_s: Mapping[str, float]
    overhead_mean_s: float
    overhead_with_planning_mean_s: float
    p95_s: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def overhead_ratio(self) -> float:
        """Mean non-model overhead before planning / RoboPIN's per-sample model time."""
        return self.overhead_mean_s / ROBOPIN_MODEL_TIME_S

    @property
    def overhead_with_planning_ratio(self) -> float:
        return self.overhead_with_planning_mean_s / ROBOPIN_MODEL_TIME_S

    def as_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "mean_s": dict(self.mean_s), "median_s": dict(self.median_s),
                "p95_s": dict(self.p95_s),
                "overhead_mean_s": self.overhead_mean_s, "overhead_ratio_to_robopin_0.281s": self.overhead_ratio,
                "overhead_with_planning_mean_s": self.overhead_with_planning_mean_s,
                "overhead_with_planning_ratio_to_robopin_0.281s": self.overhead_with_planning_ratio}

    def table(self) -> str:
        """A plain-text table: stage, mean and median seconds, then the overhead lines."""
        lines = [f"{'stage':<16}{'mean s':>10}{'median s':>10}{'p95 s':>10}   (over {self.steps} step(s))"]
        for stage in self.mean_s:
            lines.append(f"{stage:<16}{self.mean_s[stage]:>10.3f}{self.median_s[stage]:>10.3f}"
                         f"{self.p95_s.get(stage, float('nan')):>10.3f}")
        lines.append(f"non-model overhead before planning (capture + reasoning overhead + validation + projection): "
                     f"{self.overhead_mean_s:.3f} s = {self.overhead_ratio:.2f} x RoboPIN's "
                     f"{ROBOPIN_MODEL_TIME_S} s model time")
        lines.append(f"non-model overhead including planning: {self.overhead_with_planning_mean_s:.3f} s = "
                     f"{self.overhead_with_planning_ratio:.2f} x {ROBOPIN_MODEL_TIME_S} s")
        return "\n".join(lines)


_SUMMARY_STAGES = ("observe", "reason", "model", "reason_overhead", "validate", "project", "plan", "execute")


def summarize_timings(steps: Iterable[StepTiming]) -> TimingSummary:
    """Mean, median and p95 per stage over every step given (a stage a step skipped counts as absent)."""
    steps = list(steps)
    values: dict[str, list[float]] = {stage: [] for stage in _SUMMARY_STAGES}
    overheads, with_planning = [], []
    for step in steps:
        for stage in ("observe", "reason", "validate", "project", "plan", "execute"):
            if stage in step.durations_s:
                values[stage].append(step.durations_s[stage])
        if "reason" in step.durations_s:
            values["model"].append(step.model_s)
            values["reason_overhead"].append(step.reason_overhead_s)
        if "project" in step.durations_s:  # a step that reached 3D targets: the full pre-motion path
            overheads.append(step.overhead_s)
            with_planning.append(step.overhead_s + step.durations_s.get("plan", 0.0))
    summaries = {k: summarize(v) for k, v in values.items() if v}
    return TimingSummary(len(steps), {k: s.mean for k, s in summaries.items()},
                         {k: s.median for k, s in summaries.items()},
                         summarize(overheads).mean if overheads else 0.0,
                         summarize(with_planning).mean if with_planning else 0.0,
                         {k: s.p95 for k, s in summaries.items()})

