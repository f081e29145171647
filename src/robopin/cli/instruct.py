"""``robopin instruct "<text>"`` and ``robopin cancel [task]``: give a running stack a task, or stop it.

``instruct`` sends the task as a goal of the planner's ``/robopin/execute_task`` action (what
``ros2 service call /robopin/instruct robopin_interfaces/srv/Instruct "{instruction: '...'}"`` starts
too), then prints each stage of the task and its result. The task belongs to this command: Ctrl-C,
SIGTERM or ``--timeout`` cancel it, the planner stops the arm, and the command waits for the task's
final status before it exits (130 when interrupted). ``cancel`` cancels a running task by its id (or
every running task) from any shell. The stack runs elsewhere (``robopin up`` or ``ros2 launch``) in the
same ROS domain; ``--namespace left`` reaches a stack whose system file says ``namespace: left``
(``/left/robopin/execute_task``). Exit code 0 when the task succeeded (``instruct``) or was canceled (``cancel``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

__all__ = ["register"]


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0:  # a timeout of 0 would end the wait before the task could even be named
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def _utf8_instruction(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as surrogate escapes
        raise argparse.ArgumentTypeError("the instruction is not valid UTF-8 text") from None
    return text


def _instruct(args: argparse.Namespace) -> int:
    from robopin_ros.runtime import stop_signals
    from robopin_ros.task_client import instruct_running_stack

    from robopin.cli.up import stage_printer
    from robopin.system.timing import summarize_timings

    stop = threading.Event()

    def request_stop(signum: int) -> None:
        if not stop.is_set():
            print(f"\n{signal.Signals(signum).name}: canceling the task (the arm stops first) ...", file=sys.stderr,
                  flush=True)
        stop.set()

    with stop_signals(request_stop):
        run = instruct_running_stack(args.instruction, views=args.views, mode=args.mode, dry_run=args.dry_run,
                                     max_steps=args.max_steps, timeout_s=args.timeout, wait_s=args.wait,
                                     on_event=stage_printer(), stop=stop, namespace=args.namespace)
    if not run.accepted:
        if stop.is_set():
            return 130
        print(f"not started: {run.message}")
        return 2 if not run.task_id else 1  # no task id: no stack answered in this ROS domain
    print(f"task {run.task_id}: " + ("SUCCESS" if run.success else f"FAILURE ({run.reason})"))
    if run.result is not None and run.result.message:
        print(f"  {run.result.message}")
    if (run.interrupted or run.timed_out) and run.result is None:
        print("  the task did not report a final status after the cancel: check the arm", file=sys.stderr)
    timings = run.timings()
    if timings:
        print(summarize_timings(timings).table())
    if run.interrupted:
        return 130
    return 0 if run.success else 1


def _cancel(args: argparse.Namespace) -> int:
    from robopin_ros.task_client import cancel_running_tasks

    outcome = cancel_running_tasks(args.task, wait_s=args.wait, namespace=args.namespace)
    if not outcome.requested:
        print(outcome.message)
        return 1
    for task, status in outcome.final.items():
        print(f"task {task}: {status}")
    return 0 if all(status != "still running" for status in outcome.final.values()) else 1


def register(subparsers) -> None:
    """Add ``robopin instruct`` and ``robopin cancel``."""
    from robopin.cli.up import add_namespace_argument

    parser = subparsers.add_parser("instruct", help="give a running stack a language instruction",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("instruction", type=_utf8_instruction, help="what the robot should do, in plain language")
    parser.add_argument("--mode", default="", choices=("", "auto", "point", "subtask", "plan"))
    parser.add_argument("--dry-run", action="store_true", help="reason, project and plan, never move the arm")
    parser.add_argument("--max-steps", type=int, default=0, help="0: the planner's default")
    parser.add_argument("--timeout", type=_positive_seconds, default=600.0,
                        help="cancel the task (the arm stops) after this many seconds")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the planner's task action")
    parser.add_argument("--views", nargs="+", default=["static", "wrist"], help="camera views to watch")
    add_namespace_argument(parser)
    parser.set_defaults(func=_instruct)

    cancel = subparsers.add_parser("cancel", help="cancel the running task (the arm stops first)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cancel.add_argument("task", nargs="?", default="", help="the task id `instruct` printed (a prefix is enough); "
                                                            "empty: every running task")
    cancel.add_argument("--wait", type=float, default=10.0, help="seconds to wait for each task's final status")
    add_namespace_argument(cancel)
    cancel.set_defaults(func=_cancel)
