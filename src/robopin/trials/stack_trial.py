"""One recorded, judged trial on a running stack: give the task, judge it, write the trial log and bag.

The stack is a started ``robopin_ros.bringup.Bringup`` (its nodes, its task client and, in simulation,
its scene); nothing here imports rclpy: the stack is reached through those objects.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robopin.system.task_run import BringupError, TaskRun
from robopin.system.timing import FeedbackEvent, StepTiming
from robopin.trials.results import reasoning_measures

__all__ = ["TrialOutcome", "run_trial"]


@dataclasses.dataclass
class TrialOutcome:
    """The verdict on one trial, the task as the client saw it, and where its files are."""

    trial_id: str
    success: bool
    failure: str
    detail: str
    run: TaskRun
    folder: Path
    bag: Path | None
    timings: list[StepTiming]
    duration_s: float


def run_trial(bringup: Any, root: str | Path, trial_id: str, *, method: str = "",
              on_event: Callable[[FeedbackEvent], None] | None = None,
              ready_timeout_s: float = 180.0, prepare: Callable[[], None] | None = None,
              judge: Callable[[Any], Any] | None = None, task: str = "", instruction: str = "") -> TrialOutcome:
    """Give a started system's task through Instruct, judge it, and write the trial log and bag.

    ``prepare()`` runs once the stack is ready, before the instruction (the operator's scene set-up);
    ``task`` and ``instruction`` name a real cell's scenario (a sim system takes both from its scene).
    The stack's own verdict (its task result and, in simulation, the scenario's success check on the
    final world) is written to ``stack.json`` first; then ``judge(verdict)`` returns the
    :class:`robopin.trials.judging.Judgement` the trial counts by (default: the simulator's,
    :func:`~robopin.trials.judging.sim_judgement`: the planner's named reason, ``task_timeout``,
    ``instruct_rejected``, ``not_ready`` or ``goal_not_met``). The recorder's bag of the task is moved
    into the trial folder.
    """
    from robopin.sim.tasks import check_success
    from robopin.trials.judging import StackVerdict, finish_judged_trial, sim_judgement, write_stack_verdict
    from robopin.trials.log import TrialLog

    started = time.monotonic()
    system = bringup.system
    log = TrialLog(root, trial_id)
    instruction = instruction or system.task.instruction
    task_name = task or system.name
    if bringup.scene is not None:
        instruction = instruction or bringup.scene.spec.instruction
        task_name = bringup.scene.spec.name
    run = TaskRun(instruction)
    failure, detail, world, positions = "", "", None, {}
    try:
        bringup.wait_ready(ready_timeout_s)
        if prepare is not None:
            prepare()
        assert bringup.client is not None, "run_trial needs a Bringup with its task client"
        run = bringup.client.run_task(instruction, mode=system.task.mode, dry_run=system.task.dry_run,
                                 max_steps=system.task.max_steps, timeout_s=system.task.timeout_s, on_event=on_event)
        failure = run.reason
        detail = run.message if run.result is None else run.result.message
        if bringup.scene is not None and not system.task.dry_run:
            bringup.scene.world.settle(1.0)
            world = check_success(bringup.scene)
            # Where every object came to rest (mm): two runs of one trial compare by it, not by the verdict alone.
            positions = {name: [round(float(c), 4) for c in bringup.scene.world.object_center(name)]
                         for name in sorted(bringup.scene.world.objects)}
    except BringupError as error:
        failure, detail = "not_ready", str(error)
    bag = _collect_bag(bringup, run.task_id, log.folder) if run.task_id else None
    timings = run.timings() if run.start_s else []
    world_failed = world is not None and not world.success
    _write_steps(log, run, timings, failure or ("goal_not_met" if world_failed else ""), dry_run=system.task.dry_run)
    _write_search(log.folder, bringup, run.task_id)
    stack = StackVerdict(
        success=not failure, failure=failure, detail=detail, task_id=run.task_id,
        steps_executed=int(run.result.steps_executed) if run.result is not None else 0,
        world_success=None if world is None else world.success, world_detail="" if world is None else str(world),
        goals_reached=None if world is None else sum(g.ok for g in world.goals),
        goals_total=None if world is None else len(world.goals))
    summary = dict(
        trial_id=trial_id, task=task_name, method=method or system.name,
        steps=len(run.result.reasoning_steps) if run.result is not None else 0, duration_s=time.monotonic() - started,
        instruction=instruction, bag=str(bag.relative_to(log.folder)) if bag is not None else "",
        extra={"system": system.name, "robot": system.robot, "task_id": run.task_id,
               "scenario": system.sim.scenario if system.sim else "", "seed": system.sim.seed if system.sim else None,
               "timings": [t.as_dict() for t in timings],
               "reasoning": [reasoning_measures(m) for m in (run.result.reasoning_steps if run.result else ())],
               "object_centers_m": positions,
               **_model_errors(bringup)})
    # Kept before anyone is asked: a batch stopped while the operator judges loses nothing (--resume asks again).
    write_stack_verdict(log.folder, stack, summary=summary)
    judgement = (judge or sim_judgement)(stack)
    result = finish_judged_trial(log.folder, judgement)
    return TrialOutcome(trial_id, result.success, result.failure, str(result.extra.get("detail", "")), run,
                        log.folder, bag, timings, time.monotonic() - started)


def _model_errors(bringup: Any) -> dict[str, Any]:
    """The simulated model's drawn errors of this trial, by kind (drawn afresh each trial): empty unless one erred."""
    samples = [e for node in bringup.nodes.values() if callable(getattr(node, "drawn_model_errors", None))
               for e in node.drawn_model_errors()]
    if not samples:
        return {}
    from robopin.sim.model_errors import error_kind

    counts = collections.Counter(error_kind(name) for sample in samples for name in sample)
    return {"model_errors": dict(counts), "model_samples": len(samples)}


SEARCH_LOG = "search.jsonl"
"""A trial folder's E-TTS log: one JSON line per step (REASONING_SEARCH's messages); absent for one sample."""


def _write_search(folder: Path, bringup: Any, task_id: str) -> None:
    """The planner's search log of the task, one line per step, beside the trial's steps."""
    entries = [e for node in bringup.nodes.values() if callable(getattr(node, "search_logs", None))
               for e in node.search_logs(task_id)] if task_id else []
    if entries:
        text = "".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in entries)
        (folder / SEARCH_LOG).write_text(text, encoding="utf-8")


def _collect_bag(bringup: Any, task_id: str, folder: Path, timeout_s: float = 20.0) -> Path | None:
    """Move the recorder's bag of ``task_id`` into ``folder`` once the recorder has closed it."""
    roots = bringup.bag_roots()
    deadline = time.monotonic() + timeout_s
    while roots and time.monotonic() < deadline:
        for root in roots:
            for bag in sorted(root.glob(f"task-{task_id}*")):
                if (bag / "metadata.yaml").is_file():  # written when the bag is closed
                    target = folder / bag.name
                    if bag.resolve() != target.resolve():
                        bag.rename(target)
                    return target
        time.sleep(0.2)
    return None


def _write_steps(log: Any, run: TaskRun, timings: list[StepTiming], failure: str, *, dry_run: bool) -> None:
    """One trial-log step per reasoning step: views, PinCoT text and parse, errors, stage timing."""
    from robopin.pincot import parse
    from robopin.trials.log import TrialStep, trace_to_json

    messages = list(run.result.reasoning_steps) if run.result is not None else []
    by_step = {t.step: t for t in timings}
    for index, message in enumerate(messages):
        step = int(message.step)
        images = run.views.get(step, {})
        sizes = [(img.shape[1], img.shape[0]) for img in images.values()] or None
        trace = parse(message.raw_text, len(list(message.view_names)) or 2) if message.raw_text else None
        timing = by_step.get(step, StepTiming(step))
        last = index == len(messages) - 1
        log.add_step(TrialStep(
            step=step, instruction=message.instruction or run.instruction,
            views={view: log.save_view(step, view, image) for view, image in images.items()},
            raw_output=message.raw_text, trace=trace_to_json(trace, sizes) if trace is not None else {},
            errors=[f"{e.code}: {e.message}" for e in message.errors],
            targets=list(run.targets.get(step, [])),
            planner_status=(failure or "success") if last else "success",
            planning_time_s=timing.durations_s.get("plan", 0.0),
            execution="dry_run" if dry_run else ("executed" if "execute" in timing.durations_s else ""),
            durations_s=dict(timing.durations_s), stage_starts_s=dict(timing.starts_s), model=message.model))
