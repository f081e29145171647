"""``robopin report``: a folder of trials → one self-contained HTML page and its JSON."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def _report(args: argparse.Namespace) -> int:
    from robopin.trials import write_report

    html_path, json_path = write_report(args.trials, args.output)
    print(f"wrote {html_path} and {json_path}")
    return 0


def register(subparsers) -> None:
    """Add ``robopin report``."""
    parser = subparsers.add_parser("report", help="HTML + JSON report of a folder of trials")
    parser.add_argument("trials", help="folder holding trial folders (each with summary.json) and/or recorder bags")
    parser.add_argument("-o", "--output", default=None, help="HTML path (default: <trials>/report.html)")
    parser.set_defaults(func=_report)
