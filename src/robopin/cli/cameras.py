"""``robopin cameras …``: camera utilities (the commands of robopin.cameras.cli)."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add ``robopin cameras`` with its subcommands (``list``), so ``--help`` answers at every level."""
    from robopin.cameras.cli import add_commands

    parser = subparsers.add_parser("cameras", help="find connected cameras (robopin cameras list)",
                                   description="Camera utilities.")
    add_commands(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from robopin.cameras.cli import run

    return run(args)
