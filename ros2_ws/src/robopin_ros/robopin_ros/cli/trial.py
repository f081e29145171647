"""``robopin trial <scenario>... --system FILE``: a batch of recorded, judged trials on a sim or a real system.

Per trial: the operator is shown the scene to set up (the scenario's objects and places in words and a
reference picture) and says "scene ready"; the initial views are kept; the instruction goes through
``Instruct`` and its stages are shown as they happen; then the trial is judged — by the operator
(``--judge operator``: success, or failure with a reason from a fixed list, sub-goals reached on
long-horizon tasks) or by the simulator (``--judge sim``: the task's result and the world check).
Sim systems default to ``sim``, real ones to ``operator``; ``--judge operator`` on a sim system rehearses
the protocol. The operator answers in the browser console (served on 127.0.0.1, see ``--console-port``)
or in this terminal; ``--judge-file FILE`` (a YAML list, one judgement per trial in batch order, e.g.
``- success`` / ``- {failure: grasp_failed, note: "..."}``) answers instead of a person.

Each trial folder holds the trial log, the bag, ``stack.json`` (the stack's own verdict) and
``judgement.json``; after every trial ``results.md`` and ``report.html`` show RoboPIN's Table 6 from the
judgements, failures by the judge's reason, judge/stack agreement, sub-goal progress and stage timing.
``--out`` holds one batch: a folder that already holds trials (an earlier batch, ``make demo`` runs) is refused
unless ``--resume`` continues the batch there, since results.md counts every trial under it. ``--resume``
continues a batch: finished trials are skipped and a trial that stopped while waiting for its judgement is asked
again, not re-run. Sim systems get a fresh stack per trial; a real system is
brought up once for the batch. Exit code: with the operator judging, 0 once every trial is judged;
with the simulator judging, 0 when every trial succeeded.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["register"]

DEFAULT_SCENARIOS = ("spatial", "multi_view", "long_horizon")


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


@dataclasses.dataclass
class _Planned:
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


def _trial(args: argparse.Namespace) -> int:
    from robopin.env import apply_ros_environment, test_domain_id
    from robopin.system import SystemFileError, load_system, parse_argument_overrides
    from robopin.trials.judging import JudgementError, load_judge_file

    if "ROS_DOMAIN_ID" not in os.environ:
        # A batch talks only to itself: a domain of its own keeps other stacks on this machine out.
        os.environ["ROS_DOMAIN_ID"] = str(test_domain_id())
    apply_ros_environment()
    from robopin.trials import write_report
    from robopin.trials.results import judged_results_markdown, load_summaries

    out = Path(args.out or time.strftime("trials/trial-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    if args.results_only:
        summaries = load_summaries(out)
        if not summaries:
            raise SystemExit(f"robopin trial: no finished trials under {out}")
        command = f"robopin trial --results-only --out {out}"
        (out / "results.md").write_text(judged_results_markdown(summaries, command=command), encoding="utf-8")
        html, _ = write_report(out)
        print((out / "results.md").read_text(encoding="utf-8") + f"\nreport: {html}")
        return 0 if all(s.success for s in summaries) else 1
    try:
        overrides = parse_argument_overrides(args.arguments)
        systems = [load_system(name, overrides) for name in (args.system or ["sim_panda"])]
        answers = load_judge_file(args.judge_file) if args.judge_file else None
    except (SystemFileError, JudgementError) as error:
        print(f"robopin trial: {error}", file=sys.stderr)
        return 2
    judges = {}
    for system in systems:
        judge = args.judge or ("operator" if answers is not None or not system.is_sim else "sim")
        if judge == "sim" and not system.is_sim:
            print(f"robopin trial: system {system.name!r} is a real cell: only an operator can judge it "
                  "(--judge operator)", file=sys.stderr)
            return 2
        if judge == "sim" and answers is not None:
            print("robopin trial: --judge-file answers for the operator; it needs --judge operator", file=sys.stderr)
            return 2
        judges[system.name] = judge

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    # Seed-major order: a batch stopped early still has every task and system measured on the same seeds.
    # "name@N" runs that scenario with seed N only (e.g. to re-run one trial).
    plan: list[_Planned] = []
    for seed in seeds:
        for system in systems:
            for scenario in args.scenarios:
                name, _, pinned = scenario.rpartition("@") if "@" in scenario else (scenario, "", "")
                if pinned and seed != seeds[0]:
                    continue
                trial_seed = int(pinned) if pinned else seed
                trial_id = f"{system.robot}-{Path(name).stem}-seed{trial_seed:03d}"
                plan.append(_Planned(system, name, trial_seed, trial_id, judges[system.name]))
    if not args.resume:
        refusal = _other_trials(out)
        if refusal:
            print(refusal, file=sys.stderr)
            return 2
    command = "robopin trial " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["trial"] else sys.argv[1:])
    print(f"robopin trial: {len(plan)} trial(s) into {out} (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}), judged by "
          + ", ".join(sorted({p.judge for p in plan})), flush=True)
    from robopin.trials.console import ConsoleError

    try:
        batch = _Batch(args, out, plan, answers=answers, command=command, overrides=overrides)
    except (JudgementError, ConsoleError) as error:
        print(f"robopin trial: {error}", file=sys.stderr)
        return 2
    try:
        return batch.run()
    finally:
        batch.close()


def _other_trials(out: Path) -> str:
    """Why a new batch cannot go into ``out`` (it holds trials already), or "" when it can.

    One folder holds one batch: results.md, the report and the exit code count every trial under it (as
    ``--results-only`` and ``robopin report`` do), so a new batch among earlier ones (``make demo`` runs in
    trials/demo, another batch) would count theirs as its own. ``--resume`` continues the batch a folder holds,
    as ``make trial`` does on trials/oracle.
    """
    from robopin.trials.log import trial_folders

    found = [folder.relative_to(out).as_posix() for folder in trial_folders(out)]
    if not found:
        return ""
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return (f"robopin trial: {out} already holds {len(found)} trial(s) ({shown}); results.md would count them "
            f"with this batch's. Continue the batch there with --resume (its trials are kept and counted), or give "
            f"another --out")


class _Batch:
    """One batch: the operator protocol and its front ends, the console, and the trials in order."""

    def __init__(self, args: argparse.Namespace, out: Path, plan: list[_Planned], *, answers: list | None,
                 command: str, overrides: dict[str, str]) -> None:
        from robopin.trials.operator import OperatorProtocol, ScriptedOperator

        self.args, self.out, self.plan, self.command, self.overrides = args, out, plan, command, overrides
        self.protocol = OperatorProtocol()
        self.operator = any(p.judge == "operator" for p in plan)
        self.console = self.link = None
        self.real_bringup = None
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
        from robopin.trials import write_report
        from robopin.trials.results import judged_results_markdown, load_summaries

        summaries = load_summaries(self.out)
        if summaries:
            (self.out / "results.md").write_text(judged_results_markdown(summaries, command=self.command),
                                                 encoding="utf-8")
            write_report(self.out)

    def _row(self, summary: Any) -> dict[str, Any]:
        from robopin.trials.judging import Judgement

        judgement = Judgement.from_dict(summary.extra.get("judgement") or {"success": summary.success,
                                                                           "reason": summary.failure})
        stack = summary.extra.get("stack") or {}
        said = ("success" if stack.get("success") else f"failure ({stack.get('failure', '')})") if stack else "–"
        return {"trial_id": summary.trial_id, "task": summary.task, "success": summary.success,
                "judgement": judgement.describe(), "stack": said}

    # ------------------------------------------------------------------ the trials
    def run(self) -> int:
        from robopin.trials.judging import JudgementError, read_stack_verdict
        from robopin.trials.log import read_trial
        from robopin.trials.operator import OperatorClosedError

        done = 0
        for planned in self.plan:
            folder = self.out / planned.trial_id
            summary, _ = read_trial(folder) if folder.is_dir() else (None, [])
            try:
                if summary is not None and self.args.resume:
                    self.protocol.trial_done(self._row(summary))
                    done += 1
                    continue
                if folder.exists() and not self.args.resume:
                    raise SystemExit(f"robopin trial: {folder} exists; use --resume or another --out")
                if folder.exists() and read_stack_verdict(folder) is not None:
                    summary = self._judge_again(planned, folder)  # stopped while waiting for its judgement
                else:
                    if folder.exists():
                        shutil.rmtree(folder)  # a trial interrupted before its task ended: run it again
                    summary = self._run_one(planned)
                    if isinstance(summary, int):
                        return summary  # the system did not start (reported)
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
            verdict = self._row(summary)["judgement"]
            print(f"{_bar(done, len(self.plan))} {planned.trial_id}: {verdict} (stack: {self._row(summary)['stack']})",
                  flush=True)
            self.write_results()
        self.write_results()
        results = self.out / "results.md"
        if results.is_file():
            print("\n" + results.read_text(encoding="utf-8"))
            print(f"report: {self.out / 'report.html'}\nresults: {results}")
        from robopin.trials.results import load_summaries

        summaries = load_summaries(self.out)
        if self.operator:
            judged = {s.trial_id for s in summaries}
            return 0 if all(p.trial_id in judged for p in self.plan) else 1
        return 0 if summaries and all(s.success for s in summaries) else 1

    def _judge_again(self, planned: _Planned, folder: Path) -> Any:
        from robopin.trials.judging import finish_judged_trial, read_stack_verdict, sim_judgement

        stack, context = read_stack_verdict(folder)
        summary = context.get("summary") or {}
        if planned.judge == "sim":
            return finish_judged_trial(folder, sim_judgement(stack))
        print(f"robopin trial: {planned.trial_id} stopped while waiting for its judgement; asking again", flush=True)
        return finish_judged_trial(folder, self._ask_judgement(planned, stack, summary.get("task", ""),
                                                               summary.get("instruction", ""),
                                                               context.get("subgoals_total")))

    def _ask_judgement(self, planned: _Planned, stack: Any, task: str, instruction: str,
                       subgoals_total: int | None) -> Any:
        from robopin.trials.operator import JudgementRequest

        return self.protocol.ask_judgement(JudgementRequest(planned.trial_id, task, instruction, stack,
                                                            subgoals_total or stack.goals_total))

    def _run_one(self, planned: _Planned) -> Any:
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
                # A fresh stack per trial: no frames, poses or goals carry over, as after power-cycling the cell.
                with Bringup(system.with_sim(scenario=planned.scenario, seed=planned.seed)) as bringup:
                    outcome = run_trial(bringup, self.out, planned.trial_id, method=method, prepare=prepare,
                                        judge=judge, on_event=printer)
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

    def _prepare(self, planned: _Planned, scenario: Any, bringup: Any, folder: Path, facts: dict) -> None:
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

    def _sim_layout(self, planned: _Planned, scenario: Any) -> tuple:
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


def register(subparsers) -> None:
    """Add ``robopin trial``."""
    parser = subparsers.add_parser("trial", help="a batch of recorded, judged trials on a sim or real system",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", default=list(DEFAULT_SCENARIOS),
                        help=f"scenario names or YAML paths (simulator or real-cell scenarios), name@SEED for one "
                             f"seed (default: {' '.join(DEFAULT_SCENARIOS)})")
    parser.add_argument("--seeds", type=int, default=1, help="trials per scenario (seeds first-seed, +1, ...)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--system", action="append", default=None,
                        help="system file or name (sim or real); repeat for several (default: sim_panda)")
    parser.add_argument("--judge", choices=("operator", "sim"), default=None,
                        help="who judges success (default: sim for simulated systems, operator for real ones)")
    parser.add_argument("--judge-file", default=None, metavar="FILE",
                        help="a YAML list of judgements, one per trial, answering instead of a person")
    parser.add_argument("--console-port", type=int, default=8765, help="port of the operator console (0: any free)")
    parser.add_argument("--no-console", action="store_true", help="judge in this terminal only")
    parser.add_argument("--no-browser", action="store_true",
                        help="do not open the console in this machine's browser (opened when a desktop is there)")
    parser.add_argument("--set", dest="arguments", action="append", default=[], metavar="name:=value",
                        help="a system argument, e.g. --set camera_fps:=2 (repeatable)")
    parser.add_argument("--out", default=None,
                        help="output folder of this batch (default: trials/trial-<time>); one that already holds "
                             "trials is refused without --resume")
    parser.add_argument("--resume", action="store_true",
                        help="continue the batch in --out, counting every trial there: skip judged trials, ask "
                             "pending judgements again")
    parser.add_argument("--results-only", action="store_true",
                        help="run nothing: rewrite results.md and the report from the trials under --out")
    parser.set_defaults(func=_trial)
