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
again, not re-run. A sim system is brought up once and its cell reset between trials (the next trial's scenario
and layout; every node told the trial boundary); ``--fresh-stack`` brings it up per trial instead. A real system is
brought up once for the batch. Exit code: with the operator judging, 0 once every trial is judged;
with the simulator judging, 0 when every trial succeeded.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
from pathlib import Path

__all__ = ["register"]

DEFAULT_SCENARIOS = ("spatial", "multi_view", "long_horizon")


def _trial(args: argparse.Namespace) -> int:
    from robopin.env import apply_ros_environment, test_domain_id
    from robopin_ros.cli.output import PipeSafeOutput

    # A batch's record is its folder: a reader that went (Ctrl-C ends `| tee` with the batch) must not turn a
    # print into an exception that loses the stop's own handling and exit code (130, resumable).
    sys.stdout, sys.stderr = PipeSafeOutput(sys.stdout, lambda: None), PipeSafeOutput(sys.stderr, lambda: None)
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
    if args.workers < 1:
        print(f"robopin trial: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    if (args.workers > 1 or args.ray_address) and set(judges.values()) != {"sim"}:
        print("robopin trial: --workers and --ray-address run simulated systems judged by the simulator; an operator "
              "judges one trial at a time on one cell", file=sys.stderr)
        return 2

    from robopin_ros.trial_batch import PlannedTrial

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    # Seed-major order: a batch stopped early still has every task measured on the same seeds. With stacks kept
    # across trials each system runs its trials in one block (one bring-up each); with --fresh-stack the systems
    # alternate per seed too. "name@N" runs that scenario with seed N only (e.g. to re-run one trial).
    plan: list[PlannedTrial] = []
    blocks = [systems] if args.fresh_stack else [[system] for system in systems]
    for block in blocks:
        for seed in seeds:
            for system in block:
                for scenario in args.scenarios:
                    name, _, pinned = scenario.rpartition("@") if "@" in scenario else (scenario, "", "")
                    if pinned and seed != seeds[0]:
                        continue
                    trial_seed = int(pinned) if pinned else seed
                    trial_id = f"{system.robot}-{Path(name).stem}-seed{trial_seed:03d}"
                    plan.append(PlannedTrial(system, name, trial_seed, trial_id, judges[system.name]))
    if not args.resume:
        refusal = _other_trials(out)
        if refusal:
            print(refusal, file=sys.stderr)
            return 2
    command = "robopin trial " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["trial"] else sys.argv[1:])
    print(f"robopin trial: {len(plan)} trial(s) into {out} (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}), judged by "
          + ", ".join(sorted({p.judge for p in plan})), flush=True)
    from robopin_ros.runtime import stop_signals

    received: list[int] = []

    def interrupt(signum: int) -> None:
        # SIGTERM (a scheduler, `timeout`, `kill`) and SIGHUP (a closed terminal) stop the batch as Ctrl-C does:
        # finished trials kept, every stack brought down with its arm stopped first, Ray shut down. Only the
        # first signal interrupts; the stop that follows is not cut short by another.
        if not received:
            received.append(signum)
            raise KeyboardInterrupt
        print(f"robopin trial: {signal.Signals(signum).name}: already stopping", file=sys.stderr, flush=True)

    with stop_signals(interrupt, extra=(signal.SIGHUP,)):
        code = _run_plan(args, out, plan, answers=answers, command=command, overrides=overrides)
    return 128 + received[0] if received and code == 130 else code


def _run_plan(args, out, plan, *, answers, command, overrides) -> int:
    from robopin.trials.console import ConsoleError
    from robopin.trials.judging import JudgementError

    if args.workers > 1 or args.ray_address:
        from robopin_ros.trial_workers import run_on_workers

        return run_on_workers(args, out, plan, command=command, overrides=overrides)
    from robopin_ros.trial_batch import TrialBatch

    try:
        batch = TrialBatch(args, out, plan, answers=answers, command=command, overrides=overrides)
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
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="run the trials on N Ray workers, each with its own ROS domain, world and stack (sim "
                             "systems judged by the simulator; default 1: in this process, no Ray)")
    parser.add_argument("--ray-address", default=None, metavar="ADDRESS",
                        help="run the workers on this Ray cluster (e.g. 10.0.0.5:6379, from `ray start --head`) "
                             "instead of a local Ray bound to 127.0.0.1")
    parser.add_argument("--fresh-stack", action="store_true",
                        help="bring a sim system up afresh for every trial (default: once, the cell reset "
                             "between trials)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the batch in --out, counting every trial there: skip judged trials, ask "
                             "pending judgements again")
    parser.add_argument("--results-only", action="store_true",
                        help="run nothing: rewrite results.md and the report from the trials under --out")
    parser.set_defaults(func=_trial)
