"""A batch of trials (``robopin trial``): the operator protocol and its front ends, the console, and the trials in
order: a sim system's trials on one stack, its cell reset between them (or a fresh stack
per trial, ``--fresh-stack``), a real cell's on its one stack.

The command line (:mod:`robopin_ros.cli.trial`) plans the batch (systems, scenarios, seeds, judges) and runs it
here.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["PlannedTrial", "TrialBatch", "finish_batch", "progress_line", "trial_row", "write_results"]


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


@dataclasses.dataclass
class PlannedTrial:
    system: Any
    scenario: str  # as given (name or path)
    seed: int
    trial_id: str
    judge: str


def _method(system: Any) -> str:
    """``<model>[ + E-TTS][ (mode)] / <robot>``: the planner's VLM (the oracle, or the served model) on this arm."""
    import yaml

    model = "vlm"
    for node in system.nodes_running("task_node"):
        vlm = node.parameters.get("vlm", {})
        vlm = yaml.safe_load(vlm) if isinstance(vlm, str) else vlm
        if isinstance(vlm, dict):
            if vlm.get("type") in ("oracle", "imperfect"):
                preset = str(vlm.get("preset") or ("oracle" if vlm.get("type") == "oracle" else "robopin"))
                model = "oracle" if preset == "oracle" else f"imperfect:{preset}"
            else:
                model = str(vlm.get("model") or vlm.get("type") or model)
        # The reason stage and mode a batch row was run with (arguments tts:=, mode:=) tell rows apart too.
        reasoning = node.parameters.get("reasoning", {})
        reasoning = (yaml.safe_load(reasoning) or {}) if isinstance(reasoning, str) else reasoning
        if isinstance(reasoning, dict):
            reasoner = reasoning.get("reasoner") or {}
            if isinstance(reasoner, dict) and reasoner.get("type") == "etts":
                model += " + E-TTS"
            if reasoning.get("mode") in ("point", "subtask", "plan"):
                model += f" ({reasoning['mode']})"
    return f"{model} / {system.robot}"


def _arm_prefix(system: Any) -> str:
    from robopin.interfaces import ARM

    for node in system.nodes_running("arm_driver_node"):
        return str(node.parameters.get("prefix", ARM.prefix))
    return ARM.prefix


def trial_row(summary: Any) -> dict[str, Any]:
    """A finished trial's line in the batch table (the console's and the progress bar's)."""
    from robopin.trials.judging import Judgement

    judgement = Judgement.from_dict(summary.extra.get("judgement") or {"success": summary.success,
                                                                       "reason": summary.failure})
    stack = summary.extra.get("stack") or {}
    said = ("success" if stack.get("success") else f"failure ({stack.get('failure', '')})") if stack else "–"
    return {"trial_id": summary.trial_id, "task": summary.task, "success": summary.success,
            "judgement": judgement.describe(), "stack": said}


def progress_line(done: int, total: int, summary: Any, where: str = "") -> str:
    row = trial_row(summary)
    return f"{_bar(done, total)} {row['trial_id']}: {row['judgement']} (stack: {row['stack']}){where}"


def write_results(out: Path, command: str) -> None:
    """results.md and the report of every finished trial under ``out``."""
    from robopin.trials import write_report
    from robopin.trials.results import judged_results_markdown, load_summaries

    summaries = load_summaries(out)
    if summaries:
        (out / "results.md").write_text(judged_results_markdown(summaries, command=command), encoding="utf-8")
        write_report(out)


def finish_batch(out: Path, plan: list[PlannedTrial], *, operator: bool) -> int:
    """Show the results; the exit code: 0 once every trial is judged (an operator judging) or succeeded."""
    from robopin.trials.results import load_summaries

    results = out / "results.md"
    if results.is_file():
        print("\n" + results.read_text(encoding="utf-8"))
        print(f"report: {out / 'report.html'}\nresults: {results}")
    summaries = load_summaries(out)
    if operator:
        judged = {s.trial_id for s in summaries}
        return 0 if all(p.trial_id in judged for p in plan) else 1
    return 0 if summaries and all(s.success for s in summaries) else 1


class TrialBatch:
    """One batch: the operator protocol and its front ends, the console, and the trials in order."""

    def __init__(self, args: argparse.Namespace, out: Path, plan: list[PlannedTrial], *, answers: list | None,
                 command: str, overrides: dict[str, str]) -> None:
        from robopin.trials.operator import OperatorProtocol, ScriptedOperator

        self.args, self.out, self.plan, self.command, self.overrides = args, out, plan, command, overrides
        self.protocol = OperatorProtocol()
        self.operator = any(p.judge == "operator" for p in plan)
        self.console = self.link = None
        self.real_bringup = None
        self.sim_stack: tuple[Any, Any] | None = None  # (system, its Bringup): trials run on it, reset between
        self.references: dict[str, Path] = {}
        views = list(dict.fromkeys(v for p in plan for v in p.system.views))
        if answers is not None:
            scripted = ScriptedOperator(self.protocol, answers, source=f"judge file {Path(args.judge_file).name}")
            scripted.assign([p.trial_id for p in plan if p.judge == "operator"])
        from robopin_ros.operator_console import open_console_link

        # The console's link keeps the live views; the trial runner takes each trial's initial views from it.
        self.link = open_console_link(views, arm_prefix=_arm_prefix(plan[0].system),
                                      namespace=plan[0].system.namespace, initialize_logging=False,
                                      topics=plan[0].system.view_topics())
        try:
            self._open_front_ends(args, out, answers)
        except BaseException:
            self.close()
            raise

    def _open_front_ends(self, args: argparse.Namespace, out: Path, answers: list | None) -> None:
        from robopin.trials.operator import TerminalOperator

        if self.operator and answers is None:
            url = ""
            if not args.no_console:
                from robopin.trials.console import ConsoleServer

                self.console = ConsoleServer(self.link.link, self.protocol, port=args.console_port,
                                             title=f"robopin trial — {out.name}").start()
                url = self.console.url
                print(f"robopin trial: operator console at {url} (open it in a browser on this machine)", flush=True)
                if not args.no_browser:
                    self.console.open_in_browser()
            TerminalOperator(self.protocol, console_url=url)

    def close(self) -> None:
        """Wake anything waiting for the operator, stop the real cell's stack, the console and its link."""
        self.protocol.close()
        self._close_sim_stack()
        if self.real_bringup is not None:
            self.real_bringup.close()
            self.real_bringup = None
        if self.console is not None:
            self.console.close()
            self.console = None
        if self.link is not None:
            self.link.close()
            self.link = None

    # ------------------------------------------------------------------ results
    def write_results(self) -> None:
        write_results(self.out, self.command)

    def _row(self, summary: Any) -> dict[str, Any]:
        return trial_row(summary)

    # ------------------------------------------------------------------ the trials
    def run_planned(self, planned: PlannedTrial) -> tuple[Any, bool]:
        """``planned`` to its judged summary, and whether it was kept from before (``--resume``): kept, judged again
        (stopped while waiting for its judgement) or run. An int instead of a summary: the system did not start
        (reported; the exit code)."""
        from robopin.trials.judging import read_stack_verdict
        from robopin.trials.log import read_trial

        folder = self.out / planned.trial_id
        summary, _ = read_trial(folder) if folder.is_dir() else (None, [])
        if summary is not None and self.args.resume:
            return summary, True
        if folder.exists() and not self.args.resume:
            raise SystemExit(f"robopin trial: {folder} exists; use --resume or another --out")
        if folder.exists() and read_stack_verdict(folder) is not None:
            return self._judge_again(planned, folder), False
        if folder.exists():
            shutil.rmtree(folder)  # a trial interrupted before its task ended: run it again
        return self._run_one(planned), False

    def run(self) -> int:
        from robopin.trials.judging import JudgementError
        from robopin.trials.operator import OperatorClosedError

        done = 0
        for planned in self.plan:
            folder = self.out / planned.trial_id
            try:
                summary, kept = self.run_planned(planned)
                if isinstance(summary, int):
                    return summary  # the system did not start (reported)
                if kept:
                    self.protocol.trial_done(self._row(summary))
                    done += 1
                    continue
            except (OperatorClosedError, KeyboardInterrupt):
                self.write_results()
                again = self.command if "--resume" in self.command.split() else f"{self.command} --resume"
                print(f"\nrobopin trial: stopped at {planned.trial_id}; what it recorded is kept. Continue with: "
                      f"{again}", file=sys.stderr)
                return 130
            except JudgementError as error:
                self.write_results()
                print(f"robopin trial: {error}\n  {planned.trial_id} waits for its judgement (kept in {folder}); "
                      "fix the answer and continue with --resume", file=sys.stderr)
                return 2
            done += 1
            self.protocol.trial_done(self._row(summary))
            print(progress_line(done, len(self.plan), summary), flush=True)
            self.write_results()
        self.write_results()
        return finish_batch(self.out, self.plan, operator=self.operator)

    def _judge_again(self, planned: PlannedTrial, folder: Path) -> Any:
        from robopin.trials.judging import finish_judged_trial, read_stack_verdict, sim_judgement

        stack, context = read_stack_verdict(folder)
        summary = context.get("summary") or {}
        if planned.judge == "sim":
            return finish_judged_trial(folder, sim_judgement(stack))
        print(f"robopin trial: {planned.trial_id} stopped while waiting for its judgement; asking again", flush=True)
        return finish_judged_trial(folder, self._ask_judgement(planned, stack, summary.get("task", ""),
                                                               summary.get("instruction", ""),
                                                               context.get("subgoals_total")))

    def _ask_judgement(self, planned: PlannedTrial, stack: Any, task: str, instruction: str,
                       subgoals_total: int | None) -> Any:
        from robopin.trials.operator import JudgementRequest

        return self.protocol.ask_judgement(JudgementRequest(planned.trial_id, task, instruction, stack,
                                                            subgoals_total or stack.goals_total))

    def _run_one(self, planned: PlannedTrial) -> Any:
        from robopin.trials.judging import sim_judgement, write_stack_verdict
        from robopin.trials.scenes import load_trial_scenario
        from robopin.trials.stack_trial import run_trial
        from robopin_ros.bringup import Bringup, NodeStartError
        from robopin_ros.cli.up import report_start_failure, stage_printer

        system = planned.system
        scenario = load_trial_scenario(planned.scenario)
        folder = self.out / planned.trial_id
        facts: dict[str, Any] = {}

        def prepare() -> None:
            self._prepare(planned, scenario, bringup, folder, facts)

        def judge(stack: Any) -> Any:
            subgoals = facts.get("subgoals_total")
            # The judgement request needs the sub-goal count again after a restart: keep it with the verdict.
            if subgoals:
                from robopin.trials.judging import read_stack_verdict

                _, context = read_stack_verdict(folder)
                write_stack_verdict(folder, stack, **{**context, "subgoals_total": subgoals})
            if planned.judge == "sim":
                return sim_judgement(stack)
            return self._ask_judgement(planned, stack, facts.get("task", scenario.name),
                                       facts.get("instruction", scenario.instruction), subgoals)

        method = _method(system)
        printer = stage_printer(sys.stdout) if planned.judge == "operator" else None
        try:
            if system.is_sim:
                bringup = self._sim_bringup(planned)
                try:
                    outcome = run_trial(bringup, self.out, planned.trial_id, method=method, prepare=prepare,
                                        judge=judge, on_event=printer)
                finally:
                    if getattr(self.args, "fresh_stack", False):
                        self._close_sim_stack()
            else:
                if self.real_bringup is None:
                    self.real_bringup = Bringup(system).start()
                bringup = self.real_bringup
                outcome = run_trial(bringup, self.out, planned.trial_id, method=method, prepare=prepare,
                                    judge=judge, on_event=printer, task=scenario.name,
                                    instruction=scenario.instruction)
        except NodeStartError as error:  # the system itself is wrong: every further trial would fail alike
            self.write_results()
            return report_start_failure(f"robopin trial ({planned.trial_id})", system, error, self.overrides,
                                        verbose=bool(self.args.verbose))
        from robopin.trials.log import read_trial

        summary, _ = read_trial(outcome.folder)
        return summary

    def _sim_bringup(self, planned: PlannedTrial) -> Any:
        """The sim stack for ``planned``: the running one reset to its scenario and layout when it runs the same
        system (``Bringup.reset_scene``: the cell laid out anew, every node told the trial boundary; a scenario with
        other cameras needs a new stack), else a new one. ``--fresh-stack`` brings a stack up per trial instead, as
        after power-cycling the cell."""
        from robopin.system.task_run import BringupError
        from robopin_ros.bringup import Bringup

        if self.sim_stack is not None:
            held, bringup = self.sim_stack
            if held is planned.system and bringup.running:
                try:
                    bringup.reset_scene(planned.seed, planned.scenario)
                    return bringup
                except BringupError as error:  # a goal still running, a layout that does not fit: start afresh
                    print(f"robopin trial: a new stack for {planned.trial_id} ({error})", file=sys.stderr, flush=True)
            self._close_sim_stack()
        bringup = Bringup(planned.system.with_sim(scenario=planned.scenario, seed=planned.seed)).start()
        self.sim_stack = (planned.system, bringup)
        return bringup

    def _close_sim_stack(self) -> None:
        if self.sim_stack is not None:
            _, bringup = self.sim_stack
            self.sim_stack = None
            bringup.close()

    def _prepare(self, planned: PlannedTrial, scenario: Any, bringup: Any, folder: Path, facts: dict) -> None:
        """Show the scene to set up, wait for "scene ready", keep the initial views."""
        from robopin.trials.log import write_png
        from robopin.trials.operator import SceneRequest
        from robopin.trials.scenes import describe_sim_scene

        scene = bringup.scene
        setup, reference, caption = scenario.setup, scenario.reference_image, "the scenario's reference picture"
        subgoals = scenario.subgoals
        task, instruction = scenario.name, scenario.instruction
        if scene is not None:
            setup, subgoals = describe_sim_scene(scene), len(scene.task.goals)
            task, instruction = scene.spec.name, scene.spec.instruction
        elif scenario.sim is not None:
            setup, reference, subgoals = self._sim_layout(planned, scenario)
            caption = f"the simulator's render of this layout (seed {planned.seed})"
        facts.update(subgoals_total=subgoals, task=task, instruction=instruction)
        static = planned.system.views[0]
        if reference is None and scene is not None and planned.judge == "operator":
            image = self._fresh_view(static, after=0)
            if image is not None:
                reference = write_png(folder / "reference.png", image)
                caption = "the simulator's render of this trial's scene (static camera)"
        if reference is None and task in self.references:
            reference, caption = self.references[task], "the first trial's photo of this task"
        if planned.judge == "operator":
            request = SceneRequest(planned.trial_id, task, instruction, tuple(setup), scenario.description,
                                   reference, caption)
            self.protocol.ask_scene(request)
        else:
            self.protocol.trial_running(planned.trial_id)
        # Initial views: frames that arrived after the scene was declared ready.
        marks = {view: self._seq(view) for view in planned.system.views}
        for view in planned.system.views:
            image = self._fresh_view(view, after=marks[view])
            if image is not None:
                path = write_png(folder / "views" / f"initial_{view}.png", image)
                if view == static and task not in self.references and scenario.reference_image is None:
                    self.references[task] = path
        self.protocol.trial_running(planned.trial_id)

    def _seq(self, view: str) -> int:
        for entry in self.link.link.views():
            if entry["kind"] == "camera" and entry["name"] == view:
                return int(entry["seq"])
        return 0

    def _fresh_view(self, view: str, *, after: int, timeout_s: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._seq(view) > after:
                return self.link.link.latest_color("camera", view)
            time.sleep(0.1)
        return self.link.link.latest_color("camera", view)

    def _sim_layout(self, planned: PlannedTrial, scenario: Any) -> tuple:
        """A real cell running a simulator scenario: its seeded layout in words and rendered."""
        from robopin.sim.tasks import build_scene
        from robopin.trials.log import write_png
        from robopin.trials.scenes import describe_sim_scene

        path = self.out / f"reference-{scenario.name}-seed{planned.seed:03d}.png"
        with build_scene(scenario.sim, planned.seed, world_name=f"layout-{planned.trial_id}",
                         robot=planned.system.robot, register=False) as scene:
            if not path.is_file():
                write_png(path, scene.world.render(planned.system.views[0]).color)
            return describe_sim_scene(scene), path, len(scene.task.goals)
