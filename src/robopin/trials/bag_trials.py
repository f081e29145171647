"""A recorder bag of a real session read as a trial: reasoning, the views the model saw, targets, timing, outcome.

``recorder_node`` writes one bag per ExecuteTask goal. A real session has no simulator to judge it, so
the outcome is the task's own result as recorded (``<task action>/_action/result``): success, or its
named reason; a bag without a result (the stack was killed) fails with ``no_result``. Stage timing
comes from the task's feedback (the receive times in the bag), the views from the frames each
reasoning step was made on (:func:`robopin.bags.task_replay.recorded_steps`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from robopin.interfaces import EXECUTE_TASK, REASONING, action_feedback, action_result
from robopin.system.names import absolute_name
from robopin.trials.log import TrialStep, TrialSummary

__all__ = ["BagTrial", "bag_folders", "read_bag_trial"]

TASK_ACTION = absolute_name(EXECUTE_TASK)  # as a bag names it
_SUCCEEDED = 4  # action_msgs/GoalStatus STATUS_SUCCEEDED


@dataclasses.dataclass
class BagTrial:
    summary: TrialSummary
    steps: list[TrialStep]
    images: dict[tuple[int, str], np.ndarray]  # (step, view) → the RGB image the model saw


def bag_folders(root: str | Path) -> Iterator[Path]:
    """Recorder bags under ``root`` (folders with metadata.yaml) that are not part of a trial folder."""
    root = Path(root)
    for metadata in sorted(root.rglob("metadata.yaml")):
        if not _in_trial_folder(metadata.parent, root):
            yield metadata.parent


def _in_trial_folder(folder: Path, root: Path) -> bool:
    """A sim trial's bag: its trial log (summary.json above it) already says everything."""
    for parent in (folder, *folder.parents):
        if (parent / "summary.json").is_file():
            return True
        if parent == root:
            return False
    return False


def read_bag_trial(folder: str | Path, root: str | Path | None = None) -> BagTrial:
    """The trial a recorder bag holds (see the module docstring)."""
    from robopin.bags import TrialBag
    from robopin.bags.task_replay import recorded_steps
    from robopin.system.timing import FeedbackEvent, step_timings

    folder = Path(folder)
    with TrialBag(folder) as bag:
        topics = bag.topics
        feedback, result = action_feedback(TASK_ACTION), action_result(TASK_ACTION)
        steps = recorded_steps(bag) if absolute_name(REASONING) in topics else []
        events = [FeedbackEvent(m.stamp_ns * 1e-9, f.feedback.stage, int(f.feedback.step), f.feedback.detail)
                  for m, f in bag.decoded([feedback])] if feedback in topics else []
        results = [r for _, r in bag.decoded([result])] if result in topics else []
        start_s, end_s = bag.start_ns * 1e-9, bag.end_ns * 1e-9
        duration_s = bag.duration_s
    timings = {t.step: t for t in step_timings(events, events[0].time_s if events else start_s, end_s,
                                               {s.reasoning.step: s.reasoning.generation_time_s for s in steps})}
    trial_steps, images = [], {}
    for step in steps:
        reasoning = step.reasoning
        number = int(reasoning.step)
        timing = timings.get(number)
        trial_steps.append(TrialStep(
            number, reasoning.instruction, views={v.name: "" for v in step.views}, raw_output=reasoning.raw_text,
            errors=[f"{e.code}: {e.message}" for e in reasoning.errors],
            targets=[{"id": t.id, "name": t.name, "point": [t.point.x, t.point.y, t.point.z], "valid": bool(t.valid),
                      "reason": t.reason, "view": t.source_view} for t in step.targets],
            durations_s=dict(timing.durations_s) if timing else {},
            stage_starts_s=dict(timing.starts_s) if timing else {}, model=reasoning.model))
        for view in step.views:
            images[(number, view.name)] = view.rgb
    result = results[-1] if results else None
    if result is None:
        success, failure, message = False, "no_result", "the bag holds no task result (the recorder stopped first)"
    else:
        success = bool(result.result.success) and int(result.status) == _SUCCEEDED
        failure = "" if success else (result.result.reason or "failed")
        message = result.result.message
    instruction = steps[0].instruction if steps else ""
    models = sorted({s.reasoning.model for s in steps if s.reasoning.model})
    trial_id = str(folder.relative_to(root)) if root is not None else folder.name
    summary = TrialSummary(trial_id, "recorded session", " + ".join(models) or "unknown model", success, failure,
                           len(steps), duration_s, instruction, folder.name, {"detail": message})
    return BagTrial(summary, trial_steps, images)
