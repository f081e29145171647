"""The ``robopin`` command line: one entry point, one module per subcommand group.

Every module ``robopin/cli/<name>.py`` that defines ``register(subparsers)`` adds its subcommands,
so an area adds a command without editing this file. ``register`` creates its parser(s) with
``subparsers.add_parser(...)`` and sets ``func=<callable(args) -> int>`` as a default. The commands
that start or drive the ROS stack (``up``, ``trial``, ``instruct``, ``console``, ``bag play|record``) are
modules of the ROS package's ``robopin_ros.cli``, registered the same way when that package is installed: the core never
imports ROS code, and one ``robopin`` command still offers everything.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

from robopin.errors import is_named_error, one_line

ROS_COMMANDS = "robopin_ros.cli"
"""The ROS package's command modules (``up``, ``trial``, ``instruct``, ``console``, ``bag_nodes``)."""


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand module registered."""
    parser = argparse.ArgumentParser(prog="robopin", description="Language instructions to robot-arm motion.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    packages = [importlib.import_module(__name__)]
    try:
        packages.append(importlib.import_module(ROS_COMMANDS))
    except ImportError as error:  # the core installed alone: its own commands only
        if error.name is None or not ROS_COMMANDS.startswith(error.name):
            raise  # the ROS package is there but broken: say so rather than hide its commands
        parser.epilog = f"robopin up, trial, instruct and console need the ROS package ({ROS_COMMANDS}: {error})"
    modules = [(info.name, package) for package in packages for info in pkgutil.iter_modules(package.__path__)]
    for name, package in sorted(modules, key=lambda item: item[0]):
        if name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the robopin command line; return the process exit code."""
    if not faulthandler.is_enabled():
        # A crash inside a native library (pybullet, rclpy, librealsense) then names every thread's Python stack on
        # stderr instead of ending the process with a bare signal.
        faulthandler.enable(all_threads=True)
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2) if args.verbose else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except Exception as error:
        if not is_named_error(error):
            raise  # a bug: the traceback is what a report needs
        # One of robopin's named errors (a missing bag, no finished trials, a bad calibration file...):
        # its message is written for the user; -v adds the traceback.
        print(f"robopin {args.command}: {one_line(error)}", file=sys.stderr)
        if args.verbose:
            logging.getLogger(__name__).error("traceback", exc_info=error)
        return 1


if __name__ == "__main__":
    sys.exit(main())
