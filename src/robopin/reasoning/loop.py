"""The reasoning loop: observe → reason → validate → project → plan/execute, once or until done.

Modes (:data:`~robopin.reasoning.config.MODES`):

- ``point`` (RoboPIN): the model pins the entities in Pinned Chain-of-Thought and answers a pick
  point and a place point; both are projected to 3D and one pick-and-place runs. With a step limit
  above one (a long-horizon task) each step uses the step prompt with the history of earlier steps
  and the loop runs until the model answers ``done`` or ``max_steps``.
- ``subtask`` (R^3): the model reasons and writes one instruction of the skill library; the
  instruction is grounded with a pointing query on the same observation and executed; then the
  loop re-observes. The next prompt carries the previous response and tells the model to trust
  the current images over it.
- ``plan`` (RoboGPT-R1): the model writes an executable plan over the action dictionary once; each
  action is grounded and executed in order, re-observing before each.
- ``auto``: :meth:`ReasoningConfig.choose_mode`.

Nothing moves unless the reasoning validated, both targets are valid 3D points inside the
workspace, and the request is not a dry run (the actor plans only). Every failure ends the task
with a named reason (:mod:`robopin.reasoning.errors`); cancel is checked before every stage.
The loop only sees the stage protocols of :mod:`robopin.reasoning.protocols`, so it runs the same
in-process (tests, benchmarks) and inside ``task_node``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from robopin.geometry import Target
from robopin.motion.types import TARGET_FAILURES
from robopin.pincot import Issue, Trace
from robopin.pincot.prompts import PromptTemplates, StepRecord, View, plan_prompt
from robopin.pincot.prompts import subtask_prompt as _subtask_prompt
from robopin.reasoning.config import ReasoningConfig
from robopin.reasoning.errors import ReasoningConfigError, TaskCanceled, TaskRefusal
from robopin.reasoning.ground_truth import GroundTruth, plan_measures, pointing_measures
from robopin.reasoning.interpret import (
    PlanDecision,
    PointingDecision,
    SubtaskDecision,
    interpret_plan,
    interpret_pointing,
    interpret_subtask,
)
from robopin.reasoning.prompting import PointingRequest, pointing_request
from robopin.reasoning.protocols import Actor, MotionOutcome, Observation, Observer, StageCallback, TargetProjector
from robopin.reasoning.reasoner import QueryKind, Reasoner, Reasoning, ReasoningQuery, make_reasoner
from robopin.vlm.base import VLMBackend
from robopin.vlm.errors import VLMRequestError
from robopin.vlm.points import PointConvention
from robopin.vlm.prompts import build_messages, check_instruction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskRequest:
    """One instruction to carry out. ``max_steps`` 0 = the configured default for the mode."""

    instruction: str
    mode: str = "auto"
    dry_run: bool = False
    max_steps: int = 0
    task_id: str = ""


@dataclass(frozen=True)
class ReasoningRecord:
    """One model call of a task, validated: what was asked, what came back, and what it meant.

    ``trace`` is set for PinCoT answers (``pointing``/``step``); ``think``/``answer`` hold the
    reasoning and the decision for every kind; ``errors`` forbid execution.
    """

    task_id: str
    step: int
    kind: QueryKind
    instruction: str
    text: str
    model: str
    generation_time_s: float
    stamp_s: float
    view_names: tuple[str, ...]
    image_sizes: tuple[tuple[int, int], ...]
    valid: bool
    think: str = ""
    answer: str = ""
    trace: Trace | None = None
    errors: tuple[Issue, ...] = ()
    warnings: tuple[Issue, ...] = ()
    candidates: int = 1
    metrics: Mapping[str, float] = field(default_factory=dict)
    """Quality of this response, measured at run time from the text alone: RoboPIN's PinCoT measures
    (``format``, ``consistency``, ``anchor_coverage``, ``cross_step_id_coverage``, …) for pointing and
    step queries; R^3's ``instruction_validity`` for subtask steps; RoboGPT-R1's ``format``
    (0.3 sections + 0.3 types + 0.4 validity) for plans. With a ground-truth source (simulation) also
    ``pin_accuracy`` and ``answer_accuracy`` (pointing, step) and ``plan_accuracy`` (RoboGPT-R1's LCS
    accuracy; plans). A measure that does not apply, or has no ground truth, is absent."""
    search: Mapping[str, Any] = field(default_factory=dict)
    """How a test-time search chose this answer (E-TTS's step log: every batch's traces with their verdicts and
    drawn model errors, every scored pair, each selection, the chosen pair); empty for a single sample."""


@dataclass
class StepReport:
    """One step of a task: what was decided, the targets, the motion, and how long each stage took.

    ``notes`` say where the step deviated from the answer as written without refusing (a target taken
    from another view's pin of the same ID)."""

    step: int
    description: str = ""
    outcome: str = ""
    targets: tuple[Target, ...] = ()
    motion: MotionOutcome | None = None
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class TaskResult:
    """The end of a task: success, or the named reason it stopped, with every step and model call."""

    task_id: str
    instruction: str
    mode: str
    success: bool = False
    reason: str = ""
    message: str = ""
    dry_run: bool = False
    steps: list[StepReport] = field(default_factory=list)
    reasoning: list[ReasoningRecord] = field(default_factory=list)
    details: tuple[str, ...] = ()

    @property
    def steps_executed(self) -> int:
        """Steps whose pick-and-place ran (or, in a dry run, was planned successfully)."""
        return sum(1 for s in self.steps if s.motion is not None and s.motion.success)


class _Task:
    """Per-task state threaded through the stages."""

    def __init__(
        self,
        request: TaskRequest,
        mode: str,
        should_stop: Callable[[], bool],
        on_stage: StageCallback | None,
        on_reasoning: Callable[[ReasoningRecord], None] | None,
    ) -> None:
        self.request = request
        self.result = TaskResult(request.task_id, request.instruction, mode, dry_run=request.dry_run)
        self.should_stop = should_stop
        self._on_stage = on_stage
        self._on_reasoning = on_reasoning
        self.timings_s: dict[str, float] = {}

    def stage(self, stage: str, step: int, detail: str = "") -> None:
        """Enter a stage: stop here if the task was canceled, else report it."""
        if self.should_stop():
            raise TaskCanceled(f"canceled before {stage} of step {step}")
        self.notify(stage, step, detail)

    def notify(self, stage: str, step: int, detail: str = "") -> None:
        """Report a stage without checking for cancel (for the actor, which stops the arm itself)."""
        if self._on_stage is not None:
            self._on_stage(stage, step, detail)

    def add_time(self, name: str, seconds: float) -> None:
        self.timings_s[name] = self.timings_s.get(name, 0.0) + seconds

    def record(self, record: ReasoningRecord) -> None:
        self.result.reasoning.append(record)
        if self._on_reasoning is not None:
            self._on_reasoning(record)


class ReasoningLoop:
    """Carries out :class:`TaskRequest` s with the injected stages (see the module docstring).

    ``backend`` supplies the point convention (and, unless ``reasoner`` is given, the reasoner built
    from ``config.reasoner``). ``ground_truth`` (simulation only) adds the measures that need it to each
    record (:mod:`robopin.reasoning.ground_truth`). One loop runs one task at a time; the caller enforces that.
    """

    def __init__(
        self,
        config: ReasoningConfig,
        backend: VLMBackend,
        observer: Observer,
        projector: TargetProjector,
        actor: Actor,
        *,
        reasoner: Reasoner | None = None,
        ground_truth: GroundTruth | None = None,
    ) -> None:
        self.config = config
        self.ground_truth = ground_truth
        self.backend = backend
        self.observer = observer
        self.projector = projector
        self.actor = actor
        self.reasoner = reasoner or make_reasoner(
            config.reasoner, backend, defaults={"temperature": config.temperature, "max_tokens": config.max_tokens}
        )
        # A reasoner that checks candidate actions (E-TTS's action verifier) projects them with the loop's own
        # projector; whether they plan is the step's planning (a decision's alternatives).
        bind_stages = getattr(self.reasoner, "bind_stages", None)
        if callable(bind_stages):
            bind_stages(projector=projector)
        self.convention: PointConvention = backend.point_convention
        self.templates = PromptTemplates(config.prompt_dir) if config.prompt_dir else None
        self._skills = {spec.format: spec.skill for spec in config.skills}

    # ------------------------------------------------------------------ entry point
    def run(
        self,
        request: TaskRequest,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        on_stage: StageCallback | None = None,
        on_reasoning: Callable[[ReasoningRecord], None] | None = None,
    ) -> TaskResult:
        """Carry out one task; never raises for a task failure (the result names the reason)."""
        if not request.task_id:
            request = TaskRequest(
                request.instruction, request.mode, request.dry_run, request.max_steps, uuid.uuid4().hex[:8]
            )
        task = _Task(request, request.mode or "auto", should_stop, on_stage, on_reasoning)
        result = task.result
        start = time.perf_counter()
        try:
            instruction, mode, limit = self._prepare(request)
            result.mode = mode
            run_mode = {"point": self._run_point, "subtask": self._run_subtask, "plan": self._run_plan}[mode]
            result.message = run_mode(task, instruction, limit)
            result.success = True
            task.notify("done", len(result.steps), result.message)  # finished: a late cancel changes nothing
        except TaskRefusal as refusal:
            result.success, result.reason, result.message, result.details = (
                False,
                refusal.reason,
                refusal.message,
                refusal.details,
            )
        except Exception as error:  # a bug must end the task with a reason, never leave the client hanging
            logger.exception("task %s: unexpected error", request.task_id)
            result.success, result.reason = False, "internal_error"
            result.message = f"{type(error).__name__}: {error}"
        level = logging.INFO if result.success else logging.WARNING
        logger.log(
            level,
            "task %s (%s%s) %s after %d step(s), %.2f s: %s%s",
            request.task_id,
            result.mode,
            ", dry run" if request.dry_run else "",
            "succeeded" if result.success else f"ended with {result.reason}",
            len(result.steps),
            time.perf_counter() - start,
            result.message,
            "" if not result.details else f" {list(result.details)}",
        )
        return result

    def _prepare(self, request: TaskRequest) -> tuple[str, str, int]:
        try:
            instruction = check_instruction(request.instruction)
        except VLMRequestError as error:
            raise TaskRefusal("invalid_instruction", str(error)) from None
        try:
            mode = self.config.choose_mode(request.mode, instruction)
        except ReasoningConfigError as error:
            raise TaskRefusal("invalid_mode", str(error)) from None
        if mode == "plan" and not self.config.actions:
            raise TaskRefusal("invalid_mode", "plan mode needs an action dictionary (reasoning config 'actions')")
        if isinstance(request.max_steps, bool) or not isinstance(request.max_steps, int) or request.max_steps < 0:
            raise TaskRefusal("invalid_instruction", f"max_steps must be an integer >= 0, got {request.max_steps!r}")
        if request.max_steps:
            limit = request.max_steps
        elif mode == "point" and not self.config.is_long_horizon(instruction):
            limit = 1
        else:
            limit = self.config.max_steps
        return instruction, mode, limit

    # ------------------------------------------------------------------ modes
    def _run_point(self, task: _Task, instruction: str, limit: int) -> str:
        history: list[StepRecord] = []
        looping = limit > 1
        for step in range(limit):
            observation = self._observe(task, step)
            shown = history[-self.config.history_limit :] if looping and self.config.history_limit else []
            request = self._pointing_request("step" if looping else "pointing", instruction, observation, shown)
            decision = self._ask(
                task, "step" if looping else "pointing", instruction, request, observation=observation, step=step
            )
            assert isinstance(decision, PointingDecision)
            if decision.done:
                return self._finished(task, step)
            report = self._pick_place(task, decision, observation, step)
            history.append(StepRecord(report.description, "planned only (dry run)" if task.request.dry_run else "done"))
            if not looping:
                notes = f" ({'; '.join(report.notes)})" if report.notes else ""
                return f"{report.description}: {report.outcome}{notes}"
            if task.request.dry_run:
                return f"dry run: step 1 planned ({report.description}); later steps need the arm to move"
        raise TaskRefusal("max_steps_reached", f"the model did not report the task done within {limit} step(s)")

    def _run_subtask(self, task: _Task, instruction: str, limit: int) -> str:
        previous: str | None = None
        formats = self.config.grammar.format_strings()
        for step in range(limit):
            observation = self._observe(task, step)
            views = self._views(observation)
            prompt = _subtask_prompt(instruction, views, formats, previous, templates=self.templates)
            decision = self._ask(task, "subtask", instruction, prompt, observation=observation, step=step)
            assert isinstance(decision, SubtaskDecision)
            if decision.done:
                return self._finished(task, step)
            report = self._ground_and_act(task, decision.instruction, observation, step)
            # R^3: the next step sees what was asked, never an assumed success; the images decide.
            outcome = "was only planned (dry run)" if task.request.dry_run else "was executed"
            previous = (
                f"{decision.response.text.strip()}\n(The instruction {decision.instruction!r} {outcome}; "
                f"whether it succeeded must be judged from the current images.)"
            )
            if task.request.dry_run:
                return f"dry run: subtask 1 planned ({report.description})"
        raise TaskRefusal("max_steps_reached", f"the model did not report the task done within {limit} step(s)")

    def _run_plan(self, task: _Task, instruction: str, limit: int) -> str:
        observation = self._observe(task, 0)
        prompt = plan_prompt(instruction, self._views(observation), self.config.actions, templates=self.templates)
        decision = self._ask(task, "plan", instruction, prompt, observation=observation, step=0)
        assert isinstance(decision, PlanDecision)
        if len(decision.steps) > limit:
            raise TaskRefusal(
                "max_steps_reached", f"the plan has {len(decision.steps)} steps, more than max_steps={limit}"
            )
        for index, action in enumerate(decision.steps):
            if index > 0:
                observation = self._observe(task, index)
            self._ground_and_act(task, action, observation, index)
            if task.request.dry_run:
                return f"dry run: plan of {len(decision.steps)} step(s); step 1 planned ({action})"
        return f"plan of {len(decision.steps)} step(s) executed: {list(decision.steps)}"

    # ------------------------------------------------------------------ stages
    def _finished(self, task: _Task, step: int) -> str:
        task.result.steps.append(StepReport(step, "the model reported the task complete", "done"))
        return f"task complete after {task.result.steps_executed} executed step(s)"

    def _pointing_request(
        self, kind: QueryKind, instruction: str, observation: Observation, history: list[StepRecord] | tuple = ()
    ) -> PointingRequest:
        """The pointing/step query in the form the model's registry entry names (``prompt_template``)."""
        return pointing_request(
            self.config,
            self.convention.name,
            instruction,
            self._views(observation),
            observation.views,
            kind="step" if kind == "step" else "pointing",
            history=history,
            templates=self.templates,
        )

    def _views(self, observation: Observation) -> list[View]:
        return [
            View(name or f"view{i}", self.config.view_roles.get(name, ""))
            for i, name in enumerate(observation.view_names)
        ]

    def _observe(self, task: _Task, step: int) -> Observation:
        task.stage("observing", step)
        task.timings_s = {}
        start = time.perf_counter()
        observation = self.observer.observe()
        task.add_time("observe", time.perf_counter() - start)
        return observation

    def _ask(
        self,
        task: _Task,
        kind: QueryKind,
        instruction: str,
        prompt: str | PointingRequest,
        *,
        observation: Observation,
        step: int,
    ):
        """Reason and validate; record the call; return the decision or raise its refusal.

        ``prompt`` is the text of the query (sent with the views) or a ready :class:`PointingRequest`.
        """
        task.stage("reasoning", step, f"{kind}: {instruction}")
        start = time.perf_counter()
        if isinstance(prompt, PointingRequest):
            prompt, messages = prompt.text, list(prompt.messages)
        else:
            messages = build_messages(
                prompt,
                observation.views,
                system_prompt=self.config.system_prompt,
                label_views=self.config.label_views,
            )
        interpret = self._interpreter(kind, observation)
        history = tuple(r.answer for r in task.result.reasoning if r.valid)
        query = ReasoningQuery(
            kind, instruction, prompt, tuple(messages), observation, interpret, step, history, task.should_stop
        )
        reasoning = self.reasoner.reason(query)
        task.add_time("model", reasoning.generation_time_s)
        # Prompt building, request encoding and validation: the stack's own share of the reason stage.
        task.add_time("reason_overhead", time.perf_counter() - start - reasoning.generation_time_s)
        task.stage("validating", step, f"{len(reasoning.text)} characters from {reasoning.model}")
        decision = reasoning.interpretation
        task.record(self._record(task, kind, instruction, reasoning, observation=observation, step=step))
        if decision.refusal is not None:
            raise decision.refusal
        return decision

    def _interpreter(self, kind: QueryKind, observation: Observation) -> Callable[[str], Any]:
        if kind in ("pointing", "step"):
            return lambda text: interpret_pointing(text, observation, self.convention)
        if kind == "subtask":
            return lambda text: interpret_subtask(text, self.config.grammar, self._skills)
        return lambda text: interpret_plan(text, self.config.actions)

    def _record(
        self,
        task: _Task,
        kind: QueryKind,
        instruction: str,
        reasoning: Reasoning,
        *,
        observation: Observation,
        step: int,
    ) -> ReasoningRecord:
        decision = reasoning.interpretation
        trace = getattr(decision, "trace", None)
        refusal = decision.refusal
        if trace is not None:
            think, answer, errors, warnings = trace.think, trace.answer, trace.errors, trace.warnings
            metrics = {k: float(v) for k, v in trace.metrics.items()}
            if refusal is not None and not errors:
                errors = (Issue(refusal.reason, refusal.message),)
        else:
            response = decision.response
            if kind == "subtask":
                think, answer = response.reasoning, response.instruction
                metrics = {"instruction_validity": 1.0 if response.valid else 0.0}
            else:
                think = str(response.fields.get("reasoning_and_reflection", ""))
                answer = str(response.fields.get("language_plan", "")) or "; ".join(getattr(decision, "steps", ()))
                metrics = {"format": float(response.format_score)}
            errors, warnings = response.errors, response.warnings
            if refusal is not None and not errors:
                errors = (Issue(refusal.reason, refusal.message),)
        metrics.update(self._ground_truth_measures(kind, instruction, decision, trace, observation))
        return ReasoningRecord(
            task_id=task.request.task_id,
            step=step,
            kind=kind,
            instruction=instruction,
            text=reasoning.text,
            model=reasoning.model,
            generation_time_s=reasoning.generation_time_s,
            stamp_s=observation.stamp_s,
            view_names=observation.view_names,
            image_sizes=observation.image_sizes,
            valid=refusal is None,
            think=think,
            answer=answer,
            trace=trace,
            errors=tuple(errors),
            warnings=tuple(warnings),
            candidates=max(1, len(reasoning.candidates)),
            metrics=metrics,
            search=dict(reasoning.extra.get("tts") or {}),
        )

    def _ground_truth_measures(self, kind: QueryKind, instruction: str, decision, trace, observation) -> dict:
        """Pin, answer and plan accuracy against the ground-truth source (none: empty)."""
        if self.ground_truth is None or kind == "subtask":
            return {}
        try:
            if trace is not None:
                regions = self.ground_truth.regions(observation, instruction)
                return pointing_measures(trace, regions) if regions is not None else {}
            if kind == "plan":
                steps = tuple(getattr(decision, "steps", ()) or decision.response.action_names)
                return plan_measures(steps, self.ground_truth.reference_plan(instruction, self.config.actions))
        except Exception:  # a measurement must never end the task
            logger.exception("ground truth %r failed to measure a %s response", self.ground_truth, kind)
        return {}

    def _ground_and_act(self, task: _Task, instruction: str, observation: Observation, step: int) -> StepReport:
        """Ground a skill instruction with a pointing query on ``observation``, then pick and place."""
        request = self._pointing_request("pointing", instruction, observation)
        decision = self._ask(task, "pointing", instruction, request, observation=observation, step=step)
        assert isinstance(decision, PointingDecision)
        if decision.done:
            raise TaskRefusal(
                "invalid_answer", f"the model answered 'done' when asked where to act for {instruction!r}"
            )
        return self._pick_place(task, decision, observation, step, label=instruction)

    def _pick_place(
        self, task: _Task, decision: PointingDecision, observation: Observation, step: int, label: str = ""
    ) -> StepReport:
        assert decision.pick is not None and decision.place is not None
        pick_name = f"{decision.pick.id} {decision.pick.name}".strip()
        place_name = f"{decision.place.id} {decision.place.name}".strip()
        report = StepReport(step, label or f"pick {pick_name} and place it at {place_name}")
        report.timings_s = task.timings_s
        task.result.steps.append(report)
        task.stage("projecting", step, report.description)
        start = time.perf_counter()
        pick, place = self._targets(decision, observation, report)
        report.timings_s["project"] = time.perf_counter() - start
        task.stage("planning", step, report.description)
        start = time.perf_counter()
        outcome = self._act(task, step, pick, place)
        # A reasoner's next-best pairs (E-TTS's) are planned in turn while the chosen pair finds no plan for its
        # targets and nothing moved: the plan check that chooses among them is the step's own planning.
        for index, alternative in enumerate(decision.alternatives, 1):
            if outcome.success or outcome.executed or outcome.status not in TARGET_FAILURES or task.should_stop():
                break
            report.notes.append(f"{_pair_name(pick, place)} found no plan ({outcome.status}: {outcome.message}); "
                                f"planning the reasoner's next-best pair {index}")
            tried = StepReport(step)
            try:
                pick, place = self._targets(alternative, observation, tried)
            except TaskRefusal as refusal:
                report.notes.append(f"next-best pair {index} refused: {refusal.reason}: {refusal.message}")
                continue
            report.targets = tried.targets
            report.notes += tried.notes
            outcome = self._act(task, step, pick, place)
        report.timings_s["motion"] = time.perf_counter() - start
        report.motion = outcome
        if task.should_stop() or outcome.status == "canceled":
            raise TaskCanceled(f"canceled during step {step} ({outcome.message or 'motion stopped'})")
        if not outcome.success:
            raise TaskRefusal(outcome.status or "motion_failed", outcome.message or "pick-and-place failed")
        report.outcome = "planned (dry run)" if task.request.dry_run else "executed"
        logger.info(
            "task %s step %d: %s %s; timings %s",
            task.request.task_id,
            step,
            report.description,
            report.outcome,
            {k: round(v, 3) for k, v in report.timings_s.items()},
        )
        return report

    def _targets(self, decision: PointingDecision, observation: Observation,
                 report: StepReport) -> tuple[Target, Target]:
        """Project ``decision``'s pick, place and their other-view pins into ``report.targets`` (with its notes);
        the pick and place, or a TaskRefusal naming the target the projection or the workspace refused."""
        requests = decision.requests() if self.config.cross_view_check else decision.requests()[:2]
        targets = self.projector.project(requests, observation)
        if len(targets) != len(requests):
            raise TaskRefusal("projection_unavailable", f"asked to project {len(requests)} points, got {len(targets)}")
        pick, place = targets[0], targets[1]
        # Pick and place first, then the other views' pins of their IDs (the cross-view check's): every
        # projected point, as projection_node publishes them on /robopin/targets.
        report.targets = tuple(targets)
        for role, request, target in (("pick", requests[0], pick), ("place", requests[1], place)):
            if target.valid and target.img_idx != request.img_idx:
                # Another view's pin of the same ID stood in for one its own view could not be trusted with.
                why = target.detail or f"view {request.img_idx}'s pin of {target.id!r} was refused"
                report.notes.append(f"{role}: {why}")
        for role, target in (("pick", pick), ("place", place)):
            if not target.valid:
                reason = str(target.reason) if target.reason else "no_depth"
                detail = f" ({target.detail})" if target.detail else ""
                raise TaskRefusal(
                    reason,
                    f"{role} target {target.id or '?'} {target.name!r} at pixel ({target.u:.1f}, {target.v:.1f}) "
                    f"of view {target.source_view or target.img_idx} refused: {reason}{detail}",
                )
            workspace = self.config.workspace
            if workspace is not None and not workspace.contains(target.point):
                raise TaskRefusal(
                    "outside_workspace",
                    f"{role} target {target.id or '?'} {target.name!r} at "
                    f"{[round(float(c), 3) for c in target.point]} m "
                    f"lies outside the workspace {workspace.min_xyz}..{workspace.max_xyz}",
                )
        return pick, place

    def _act(self, task: _Task, step: int, pick: Target, place: Target) -> MotionOutcome:
        """One pick-and-place through the actor (planned only, on a dry run)."""
        return self.actor.pick_place(
            pick,
            place,
            dry_run=task.request.dry_run,
            on_stage=lambda stage, detail: task.notify(stage, step, detail),
            should_stop=task.should_stop,
        )


def _pair_name(pick: Target, place: Target) -> str:
    """``pick obj_01 'duck' at [x, y, z] for place ...``: one pick-and-place's targets, for a note."""
    def name(target: Target) -> str:
        return f"{target.id or '?'} {target.name!r} at {[round(float(c), 3) for c in target.point]}"

    return f"pick {name(pick)} for place {name(place)}"
