"""``robopin instruct "<text>"`` and ``robopin cancel [task]``: give a running stack a task, or stop it.

``instruct`` sends the task as a goal of the planner's ``/robopin/execute_task`` action (what
``ros2 service call /robopin/instruct robopin_interfaces/srv/Instruct "{instruction: '...'}"`` starts
too), then prints each stage of the task and its result. The task belongs to this command: Ctrl-C,
SIGTERM, SIGHUP, a closed output pipe or ``--timeout`` cancel it, the planner stops the arm, and the command
waits for the task's final status before it exits (128 + the signal's number: 130 for Ctrl-C, 141 for a
closed pipe). Killed outright, its heartbeat stops and the planner cancels the task within a second. A
stack that stops answering mid-task ends the command with exit code 3 (check the arm).
``cancel`` cancels a running task by its id (or every running task) from any shell. The stack runs
elsewhere (``robopin up`` or ``ros2 launch``) in the same ROS domain; ``--namespace left`` reaches a stack
whose system file says ``namespace: left`` (``/left/robopin/execute_task``). Exit code 0 when the task
succeeded (``instruct``) or was canceled (``cancel``); 1 when it failed; 2 when it did not start.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import stat
import sys
import threading
import time

from robopin_ros.cli.output import PipeSafeOutput

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


def _watch_outputs(streams, on_closed, stop: threading.Event) -> None:
    """Call ``on_closed`` once the reader of a piped stdout or stderr has gone, before anything is written.

    A pipe's write end polls POLLERR once its last reader closed (Linux pipe_poll); a terminal polls
    POLLHUP when it hangs up. Regular files never close under us and are not watched.
    """
    poller = select.poll()
    watched = 0
    for stream in streams:
        try:
            fd = stream.fileno()
            mode = os.fstat(fd).st_mode
        except (OSError, ValueError, AttributeError):
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode):
            poller.register(fd, select.POLLERR | select.POLLHUP)
            watched += 1
    while watched and not stop.is_set():
        if poller.poll(100):
            on_closed()
            return


_PIPE_CAUSES = ("stdout closed", "stderr closed", "output closed")


def _instruct(args: argparse.Namespace) -> int:
    from robopin.system.timing import summarize_timings
    from robopin_ros.cli.up import stage_printer
    from robopin_ros.runtime import stop_signals
    from robopin_ros.task_client import instruct_running_stack

    stop = threading.Event()
    why: list[str] = []  # what stopped the task, first cause first
    code: list[int] = []  # the exit code that cause asks for
    when: list[float] = []  # when it came (monotonic)

    def request_stop(cause: str, exit_code: int) -> None:
        stop.set()  # first: the cancel must go out whatever printing does next
        if not why:
            why.append(cause)
            code.append(exit_code)
            when.append(time.monotonic())
        elif cause not in _PIPE_CAUSES and why[0] in _PIPE_CAUSES and time.monotonic() - when[0] < 0.5:
            # Ctrl-C to a pipeline ends the reader at the same moment: the signal is what happened, the closed
            # pipe its echo (a reader that left earlier stays the cause).
            why[0], code[0] = cause, exit_code

    out = PipeSafeOutput(sys.stdout, lambda: request_stop("stdout closed", 128 + signal.SIGPIPE))
    err = PipeSafeOutput(sys.stderr, lambda: request_stop("stderr closed", 128 + signal.SIGPIPE))
    sys.stdout, sys.stderr = out, err  # every print of this process, the node's log lines too
    outputs_done = threading.Event()
    threading.Thread(target=_watch_outputs, args=((sys.__stdout__, sys.__stderr__),
                     lambda: request_stop("output closed", 128 + signal.SIGPIPE), outputs_done),
                     name="output-watch", daemon=True).start()

    def on_signal(signum: int) -> None:
        first = not stop.is_set()
        request_stop(signal.Signals(signum).name, 128 + signum)
        if first:
            print(f"\n{signal.Signals(signum).name}: canceling the task (the arm stops first) ...", file=err)

    try:
        with stop_signals(on_signal, extra=(signal.SIGHUP,)):
            run = instruct_running_stack(args.instruction, views=args.views, mode=args.mode, dry_run=args.dry_run,
                                         max_steps=args.max_steps, timeout_s=args.timeout, wait_s=args.wait,
                                         on_event=stage_printer(out), stop=stop, namespace=args.namespace)
    finally:
        outputs_done.set()
    stopped = code[0] if code else 0
    if not run.accepted:
        if stopped:
            return stopped
        print(f"not started: {run.message}", file=out)
        return 2 if not run.task_id else 1  # no task id: no stack answered in this ROS domain
    if run.stack_lost:
        print(f"task {run.task_id}: {run.stack_lost}", file=err)
        return 3
    print(f"task {run.task_id}: " + ("SUCCESS" if run.success else f"FAILURE ({run.reason})"), file=out)
    if run.result is not None and run.result.message:
        print(f"  {run.result.message}", file=out)
    if (run.interrupted or run.timed_out) and run.result is None:
        print("  the task did not report a final status after the cancel: check the arm", file=err)
    timings = run.timings()
    if timings:
        print(summarize_timings(timings).table(), file=out)
    if run.interrupted:
        return stopped or 130
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
    from robopin.cli.arguments import add_namespace_argument

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
