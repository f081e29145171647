"""``robopin up <system file>``: every node of a system in this process (the recorder in a child process of its
own), until Ctrl-C or SIGTERM.

With ``--demo`` it instead runs the system's task once (the scenario's instruction in simulation)
through the ``Instruct`` service, prints success, the per-stage timing and where the bag and the
report are, and exits. Launch arguments use the ros2 launch syntax: ``robopin up
config/real_xarm6.yaml robot_ip:=192.168.1.200 vlm_url:=http://gpu:8000/v1``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from pathlib import Path

from robopin.cli.arguments import add_system_arguments, ros_namespace

__all__ = ["register"]


def load_cli_system(args: argparse.Namespace):
    """The system file named on the command line, with its arguments and sim overrides applied."""
    from robopin.system import load_system, parse_argument_overrides

    system = load_system(args.system, parse_argument_overrides(args.arguments))
    changes = {k: v for k, v in (("scenario", getattr(args, "scenario", None)),
                                 ("seed", getattr(args, "seed", None))) if v is not None}
    if changes:
        system = system.with_sim(**changes)
    if getattr(args, "namespace", None) is not None:
        from robopin.system.loading import in_namespace

        system = in_namespace(system, args.namespace)
    return system


def report_start_failure(command: str, system, error: BaseException, overrides=None, *, verbose: bool = False,
                         stream=None) -> int:
    """Print why the stack did not come up, and the launch arguments that set the failing node; return 1.

    The nodes created before the failure have already been stopped (Bringup.start). ``verbose`` (``-v``)
    logs the traceback as well.
    """
    import os

    from robopin.errors import is_named_error
    from robopin.system import SystemFileError, load_system

    stream = sys.stderr if stream is None else stream
    print(f"{command}: {error}", file=stream)
    node = getattr(error, "node", None)
    arguments = []
    if node and system.source is not None:
        try:  # the loaded system has its arguments applied (and dropped): read what the file declares
            arguments = load_system(system.source).arguments_setting(node)
        except (OSError, SystemFileError):
            arguments = []
    if arguments:
        print(f"  arguments of system {system.name!r} that set node {node!r}:", file=stream)
        for argument in arguments:
            value = argument.value(overrides or {}, os.environ)
            print(f"    {argument.name}:={value}  {argument.description}".rstrip(), file=stream)
    cause = getattr(error, "cause", error)
    if verbose:
        logging.getLogger(__name__).error("%s failed to start", system.name, exc_info=error)
    elif not is_named_error(cause):  # not a refusal of ours: maybe a bug
        print(f"  ({type(cause).__name__}; `robopin -v` prints the traceback)", file=stream)
    return 1


def stage_printer(stream=sys.stdout):
    """A feedback callback printing each stage change of a task on one line."""
    last: list[tuple[int, str]] = []
    started = time.monotonic()

    def on_event(event) -> None:
        key = (event.step, event.stage)
        if last and last[-1] == key:
            return
        last.append(key)
        detail = f": {event.detail}" if event.detail and event.stage in ("reasoning", "done") else ""
        print(f"  [{event.time_s - started:7.2f} s] step {event.step} {event.stage}{detail[:100]}", file=stream,
              flush=True)

    return on_event


def print_outcome(outcome, stream=sys.stdout) -> None:
    """Success or the named failure, per-stage timing, and where the trial's files are."""
    from robopin.system.timing import summarize_timings

    verdict = "SUCCESS" if outcome.success else f"FAILURE ({outcome.failure})"
    print(f"\n{outcome.trial_id}: {verdict} in {outcome.duration_s:.1f} s", file=stream)
    if outcome.detail:
        print(f"  {outcome.detail}", file=stream)
    for timing in outcome.timings:
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in timing.durations_s.items())
        print(f"  step {timing.step}: {stages} (model {timing.model_s:.3f} s)", file=stream)
    if outcome.timings:
        print(summarize_timings(outcome.timings).table(), file=stream)
    print(f"  trial log: {outcome.folder}", file=stream)
    print(f"  bag:       {outcome.bag if outcome.bag is not None else '(none recorded)'}", file=stream)


def _up(args: argparse.Namespace) -> int:
    from robopin.env import apply_ros_environment

    apply_ros_environment()
    from robopin.system import SystemFileError

    try:
        system = load_cli_system(args)
    except SystemFileError as error:
        print(f"robopin up: {error}", file=sys.stderr)
        return 2
    from robopin.system.task_run import BringupError

    try:
        return _run(args, system)
    except BringupError as error:
        from robopin.system import parse_argument_overrides

        return report_start_failure("robopin up", system, error, parse_argument_overrides(args.arguments),
                                    verbose=bool(args.verbose))


def _run(args: argparse.Namespace, system) -> int:
    from robopin.trials.stack_trial import run_trial
    from robopin_ros.bringup import Bringup, spin_until_signal

    if args.demo:
        from robopin.trials import write_report

        root = Path(args.out) / time.strftime(f"{system.name}-%Y%m%d-%H%M%S")
        scenario = Path(system.sim.scenario).stem if system.sim else "task"
        seed = system.sim.seed if system.sim else 0
        trial_id = f"{system.robot}-{scenario}-seed{seed:03d}"
        print(f"robopin up {system.name}: {len(system.nodes)} nodes; running {trial_id} through the Instruct service",
              flush=True)
        quiet = not args.verbose  # the stages and the verdict are the demo's output; -v shows every node's log
        if quiet:
            logging.getLogger().setLevel(logging.WARNING)
        with Bringup(system, log_level="warn" if quiet else "") as bringup:
            outcome = run_trial(bringup, root, trial_id, method=f"{_model(system)} / {system.robot}",
                                on_event=stage_printer())
        print_outcome(outcome)
        html, _ = write_report(root)
        print(f"  report:    {html}")
        return 0 if outcome.success else 1
    with Bringup(system, client=False, check_model=not args.no_model_check) as bringup:
        where = f" in namespace {system.namespace}" if system.namespace else ""
        print(f"robopin up {system.name}: nodes {[n.name for n in system.nodes]} running{where}; Ctrl-C to stop",
              flush=True)
        if args.ready_timeout > 0:
            bringup.wait_ready(args.ready_timeout)
            print("ready", flush=True)
        else:
            # Tasks sent before this wait in the planner until the stack is ready (the recorder hears every
            # camera), so the first task is recorded as every other.
            threading.Thread(target=_report_ready, args=(bringup,), name="ready-report", daemon=True).start()
            if not args.no_model_check:
                threading.Thread(target=_report_model, args=(bringup,), name="model-report", daemon=True).start()
        return spin_until_signal(bringup)


def _report_ready(bringup) -> None:
    """Print 'ready' once the planners take tasks (``robopin up`` without --ready-timeout)."""
    while bringup.running and not bringup.released:
        time.sleep(0.1)
    if bringup.released and bringup.running:
        print("ready", flush=True)


def _report_model(bringup, timeout_s: float = 30.0) -> None:
    """Say once whether each planner's model server serves its model (``robopin up`` without --ready-timeout)."""
    planners = {name: node for name, node in bringup.nodes.items() if hasattr(node, "model_not_ready")}
    deadline = time.monotonic() + timeout_s
    while planners:
        status = {name: node.model_not_ready() for name, node in planners.items()}
        for name in [name for name, why in status.items() if not why]:
            planners.pop(name)
            print(f"{name}: model ready", flush=True)
        if planners and time.monotonic() > deadline:
            for name, why in status.items():
                print(f"warning: {name}: {why} (tasks will fail with vlm_unavailable until it answers)",
                      file=sys.stderr, flush=True)
            return
        time.sleep(0.5)


def _model(system) -> str:
    from robopin.system.checks import mapping_parameter

    planners = system.nodes_running("task_node")
    return str(mapping_parameter(planners[0], "vlm").get("type", "vlm")) if planners else "vlm"


def register(subparsers) -> None:
    """Add ``robopin up``."""
    parser = subparsers.add_parser("up", help="run every node of a system file (one process; the recorder in its own)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_system_arguments(parser)
    parser.add_argument("--demo", action="store_true",
                        help="run the system's task once through Instruct, print the outcome and exit")
    parser.add_argument("--scenario", default=None, help="simulated systems: scenario name or YAML (default: file's)")
    parser.add_argument("--seed", type=int, default=None, help="simulated systems: scene seed (default: file's)")
    parser.add_argument("--out", default="trials/demo", help="--demo: folder for the trial log, bag and report")
    parser.add_argument("--ready-timeout", type=float, default=0.0,
                        help="wait this long for arms, cameras and the model server and print 'ready' (0: do not "
                             "wait; the model server's answer is printed when it comes)")
    parser.add_argument("--no-model-check", action="store_true",
                        help="do not ask the VLM server for its model list (readiness then ignores the model)")
    parser.add_argument("--namespace", type=ros_namespace, default=None,
                        help="run every node in this ROS namespace (default: the system file's namespace:, else the "
                             "root namespace); two robots share one graph under two namespaces")
    parser.set_defaults(func=_up)
