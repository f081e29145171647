"""``robopin cameras list``: find connected cameras and print their serials and stream profiles.

Like LeRobot's ``find-cameras``: it asks every device backend whose SDK is importable (RealSense, ZED)
and says which SDKs are missing instead of failing. Also runnable as ``python -m robopin.cameras list``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from robopin.cameras.base import CameraBackendUnavailableError, CameraDescription, camera_class

# Backends that discover devices (sim and bag have nothing to find).
DEVICE_BACKENDS = ("realsense", "zed")


def find_all_cameras(backends: Sequence[str] = DEVICE_BACKENDS) -> tuple[list[CameraDescription], dict[str, str]]:
    """Return (cameras found, {backend: why it could not be asked}) over ``backends``."""
    found: list[CameraDescription] = []
    unavailable: dict[str, str] = {}
    for backend in backends:
        try:
            cls = camera_class(backend)
            if backend == "zed":
                # find_cameras() answers [] without the SDK; say so instead of "no ZED".
                from robopin.cameras.zed import import_pyzed

                import_pyzed()
            found.extend(cls.find_cameras())
        except CameraBackendUnavailableError as error:
            unavailable[backend] = str(error)
    return found, unavailable


def _print_table(found: list[CameraDescription], unavailable: dict[str, str], out: TextIO) -> None:
    if not found:
        print("no cameras found", file=out)
    for camera in found:
        details = " ".join(x for x in (camera.name, f"firmware {camera.firmware}" if camera.firmware else "") if x)
        print(f"{camera.type:<10} serial {camera.serial:<16} {details}".rstrip(), file=out)
        for profile in camera.profiles:
            print(f"    {profile}", file=out)
    for backend, reason in unavailable.items():
        print(f"({backend}: not checked, {reason})", file=out)


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Add the camera subcommands (``list``) to ``parser``: ``robopin cameras`` and ``python -m robopin.cameras``."""
    commands = parser.add_subparsers(dest="camera_command", metavar="CAMERA_COMMAND", required=True)
    listing = commands.add_parser("list", help="find connected RealSense and ZED cameras")
    listing.add_argument("--backend", choices=DEVICE_BACKENDS, action="append",
                         help="only this backend (repeatable); default all")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the camera subcommand parsed into ``args``; returns the process exit code."""
    out = out or sys.stdout
    found, unavailable = find_all_cameras(args.backend or DEVICE_BACKENDS)
    if args.json:
        json.dump({"cameras": [dataclasses.asdict(c) for c in found], "unavailable": unavailable}, out, indent=2)
        out.write("\n")
    else:
        _print_table(found, unavailable, out)
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``python -m robopin.cameras``; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="robopin cameras", description="Camera utilities.")
    add_commands(parser)
    return run(parser.parse_args(argv), out)
