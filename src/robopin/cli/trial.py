"""``robopin trial <scenario>... --seeds N``: a batch of recorded simulated trials and their report.

Each trial brings the system (``--system``, default ``sim_panda``) up afresh in this process with the
scenario's scene for its seed, gives the instruction through ``Instruct``, judges the final world
and writes the trial log with its bag. At the end (and
after every trial) it writes ``report.html`` / ``report.json`` and ``results.md``: RoboPIN's success
table, every failure with its named reason, and the per-stage timing. ``--resume`` skips trials
already finished in the output folder, so a long batch can be continued.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from pathlib import Path

__all__ = ["register"]

DEFAULT_SCENARIOS = ("spatial", "multi_view", "long_horizon")


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


def _trial(args: argparse.Namespace) -> int:
    import os

    from robopin.env import apply_ros_environment, test_domain_id
    from robopin.system import SystemFileError, load_system, parse_argument_overrides

    if "ROS_DOMAIN_ID" not in os.environ:
        # A batch talks only to itself: a domain of its own keeps other stacks on this machine out.
        os.environ["ROS_DOMAIN_ID"] = str(test_domain_id())
    apply_ros_environment()
    from robopin_ros.bringup import Bringup, NodeStartError, run_trial

    from robopin.cli.up import report_start_failure
    from robopin.system.results import load_summaries, results_markdown
    from robopin.trials import write_report
    from robopin.trials.log import read_trial

    out = Path(args.out or time.strftime("trials/trial-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    if args.results_only:
        summaries = load_summaries(out)
        if not summaries:
            raise SystemExit(f"robopin trial: no finished trials under {out}")
        command = f"robopin trial --results-only --out {out}"
        (out / "results.md").write_text(results_markdown(summaries, command=command), encoding="utf-8")
        html, _ = write_report(out)
        print((out / "results.md").read_text(encoding="utf-8") + f"\nreport: {html}")
        return 0 if all(s.success for s in summaries) else 1
    overrides = parse_argument_overrides(args.arguments)
    try:
        systems = [load_system(name, overrides) for name in (args.system or ["sim_panda"])]
    except SystemFileError as error:
        print(f"robopin trial: {error}", file=sys.stderr)
        return 2
    for system in systems:
        if system.sim is None:
            raise SystemExit(f"robopin trial: system {system.name!r} is not simulated; trials need a 'sim' section")

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    # Seed-major order: a batch stopped early still has every task and system measured on the same seeds.
    # "name@N" runs that scenario with seed N only (e.g. to re-run one trial).
    plan = []
    for seed in seeds:
        for system in systems:
            for scenario in args.scenarios:
                name, _, pinned = scenario.rpartition("@") if "@" in scenario else (scenario, "", "")
                if not pinned:
                    plan.append((system, scenario, seed))
                elif seed == seeds[0]:
                    plan.append((system, name, int(pinned)))
    command = "robopin trial " + shlex.join(sys.argv[2:] if sys.argv[1:2] == ["trial"] else sys.argv[1:])
    print(f"robopin trial: {len(plan)} trial(s) into {out} (ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']})", flush=True)

    def finished(trial_id: str) -> bool:
        summary, _ = read_trial(out / trial_id) if (out / trial_id).is_dir() else (None, [])
        return summary is not None

    def write_results() -> None:
        summaries = load_summaries(out)
        if summaries:
            (out / "results.md").write_text(results_markdown(summaries, command=command), encoding="utf-8")
            write_report(out)

    done = 0
    for system, scenario, seed in plan:
        method = f"oracle / {system.robot}"
        trial_id = f"{system.robot}-{Path(scenario).stem}-seed{seed:03d}"
        if args.resume and finished(trial_id):
            done += 1
            continue
        if (out / trial_id).exists():
            if not args.resume:
                raise SystemExit(f"robopin trial: {out / trial_id} exists; use --resume or another --out")
            shutil.rmtree(out / trial_id)  # a trial interrupted before its summary: run it again
        # A fresh stack per trial (about 5 s once the first has warmed the planner up): no frames,
        # poses or goals carry over from the previous trial, as after power-cycling the workcell.
        try:
            with Bringup(system.with_sim(scenario=scenario, seed=seed)) as bringup:
                outcome = run_trial(bringup, out, trial_id, method=method)
        except NodeStartError as error:  # the system itself is wrong: every further trial would fail alike
            write_results()
            return report_start_failure(f"robopin trial ({trial_id})", system, error, overrides,
                                        verbose=bool(args.verbose))
        done += 1
        verdict = "success" if outcome.success else f"FAILURE {outcome.failure}"
        print(f"{_bar(done, len(plan))} {trial_id}: {verdict} ({outcome.duration_s:.0f} s)"
              + ("" if outcome.success else f" — {outcome.detail[:160]}"), flush=True)
        write_results()
    write_results()
    results = out / "results.md"
    if results.is_file():
        print("\n" + results.read_text(encoding="utf-8"))
        print(f"report: {out / 'report.html'}\nresults: {results}")
    summaries = load_summaries(out)
    return 0 if summaries and all(s.success for s in summaries) else 1


def register(subparsers) -> None:
    """Add ``robopin trial``."""
    parser = subparsers.add_parser("trial", help="a batch of recorded simulated trials and their report",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", default=list(DEFAULT_SCENARIOS),
                        help=f"scenario names or YAML paths, name@SEED for one seed (default: "
                             f"{' '.join(DEFAULT_SCENARIOS)})")
    parser.add_argument("--seeds", type=int, default=1, help="trials per scenario (seeds first-seed, +1, ...)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--system", action="append", default=None,
                        help="simulated system file or name; repeat for several (default: sim_panda)")
    parser.add_argument("--set", dest="arguments", action="append", default=[], metavar="name:=value",
                        help="a system argument, e.g. --set camera_fps:=2 (repeatable)")
    parser.add_argument("--out", default=None, help="output folder (default: trials/trial-<time>)")
    parser.add_argument("--resume", action="store_true", help="skip trials already finished in --out")
    parser.add_argument("--results-only", action="store_true",
                        help="run nothing: rewrite results.md and the report from the trials under --out")
    parser.set_defaults(func=_trial)
