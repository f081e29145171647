"""``robopin cameras …``: camera utilities (delegates to robopin.cameras.cli)."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add ``robopin cameras`` (everything after it goes to robopin.cameras.cli)."""
    parser = subparsers.add_parser("cameras", help="find connected cameras (robopin cameras list)", add_help=False)
    parser.add_argument("camera_args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from robopin.cameras.cli import main

    return main(args.camera_args)
