"""The ``robopin`` command line: one entry point, one module per subcommand group.

Every module ``robopin/cli/<name>.py`` that defines ``register(subparsers)`` adds its subcommands,
so an area adds a command without editing this file. ``register`` creates its parser(s) with
``subparsers.add_parser(...)`` and sets ``func=<callable(args) -> int>`` as a default.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

from robopin.errors import is_named_error, one_line


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand module registered."""
    parser = argparse.ArgumentParser(prog="robopin", description="Language instructions to robot-arm motion.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the robopin command line; return the process exit code."""
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
