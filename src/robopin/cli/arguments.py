"""Arguments several ``robopin`` subcommands share: the system file with its arguments, the ROS namespace."""

from __future__ import annotations

import argparse

__all__ = ["add_namespace_argument", "add_system_arguments", "ros_namespace"]


def add_system_arguments(parser: argparse.ArgumentParser, *, system_required: bool = True) -> None:
    """The system file and its name:=value arguments (shared by up and trial)."""
    if system_required:
        parser.add_argument("system", help="system file (config/sim_panda.yaml) or its name in config/ (sim_panda)")
    parser.add_argument("arguments", nargs="*", default=[], metavar="name:=value",
                        help="arguments the system file declares (robot_ip:=..., vlm_url:=..., dry_run:=true)")


def ros_namespace(text: str) -> str:
    """A ``--namespace`` value: a ROS namespace (``left``, ``/lab/left``), normalized; refused by name otherwise."""
    from robopin.system.names import NamespaceError, normalize_namespace

    try:
        return normalize_namespace(text)
    except NamespaceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_namespace_argument(parser: argparse.ArgumentParser) -> None:
    """``--namespace``: the robot's ROS namespace (its system file's ``namespace``)."""
    parser.add_argument("--namespace", type=ros_namespace, default="",
                        help="the robot's ROS namespace, as its system file's namespace: (default: the root namespace)")
