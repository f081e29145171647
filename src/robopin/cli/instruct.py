"""``robopin instruct "<text>"``: give a running stack an instruction and follow the task to its end.

Calls ``/robopin/instruct`` (the same as ``ros2 service call /robopin/instruct
robopin_interfaces/srv/Instruct "{instruction: '...'}"``), then prints each stage of the task it
started and its result. The stack runs elsewhere (``robopin up`` or ``ros2 launch``) in the same
ROS domain. Exit code 0 when the task succeeded.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def _instruct(args: argparse.Namespace) -> int:
    from robopin_ros.bringup import instruct_running_stack

    from robopin.cli.up import stage_printer
    from robopin.system.timing import summarize_timings

    try:
        run = instruct_running_stack(args.instruction, views=args.views, mode=args.mode, dry_run=args.dry_run,
                                     max_steps=args.max_steps, timeout_s=args.timeout, wait_s=args.wait,
                                     on_event=stage_printer())
    except KeyboardInterrupt:
        return 130
    if not run.accepted:
        print(f"not started: {run.message}")
        return 2 if not run.task_id and "no /robopin/instruct" in run.message else 1
    print(f"task {run.task_id}: " + ("SUCCESS" if run.success else f"FAILURE ({run.reason})"))
    if run.result is not None and run.result.message:
        print(f"  {run.result.message}")
    timings = run.timings()
    if timings:
        print(summarize_timings(timings).table())
    return 0 if run.success else 1


def register(subparsers) -> None:
    """Add ``robopin instruct``."""
    parser = subparsers.add_parser("instruct", help="give a running stack a language instruction",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("instruction", help="what the robot should do, in plain language")
    parser.add_argument("--mode", default="", choices=("", "auto", "point", "subtask", "plan"))
    parser.add_argument("--dry-run", action="store_true", help="reason, project and plan, never move the arm")
    parser.add_argument("--max-steps", type=int, default=0, help="0: the planner's default")
    parser.add_argument("--timeout", type=float, default=600.0, help="cancel the task after this many seconds")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the Instruct service")
    parser.add_argument("--views", nargs="+", default=["static", "wrist"], help="camera views to watch")
    parser.set_defaults(func=_instruct)
