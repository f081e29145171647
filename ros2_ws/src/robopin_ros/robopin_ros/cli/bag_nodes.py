"""``robopin bag play`` and ``robopin bag record``: the bag commands that run a node (replay_node, recorder_node).

Added to the core's ``robopin bag`` group (:mod:`robopin.cli.bag`, registered first: command modules register in
name order), so the core's bag commands stay free of ROS and one ``robopin bag`` offers them all.
"""

from __future__ import annotations

import argparse
import json
import sys

from robopin.cli.arguments import add_namespace_argument
from robopin.system.node_settings import DEFAULT_FLUSH_INTERVAL_S, DEFAULT_OUTPUT_DIR


def _run_node(main, params: list[str], namespace: str = "") -> int:
    remap = ["-r", f"__ns:={namespace}"] if namespace else []  # its relative names go under the robot's namespace
    return int(main([sys.argv[0], "--ros-args", *remap, *[p for kv in params for p in ("-p", kv)]]) or 0)


def _play(args: argparse.Namespace) -> int:
    from robopin_ros.replay_node import main

    params = [f"bag:={args.bag}", f"rate:={args.rate}", f"loop:={str(args.loop).lower()}",
              f"start_offset_s:={args.start}"]
    if args.topics:
        params.append(f"topics:={json.dumps(args.topics)}")
    if args.exclude:
        params.append(f"exclude:={json.dumps(args.exclude)}")
    return _run_node(main, params, args.namespace)


def _record(args: argparse.Namespace) -> int:
    from robopin_ros.recorder_node import main

    params = [f"output_dir:={args.output}", f"flush_interval_s:={args.flush_interval_s}"]
    if args.topics:
        params.append(f"topics:={json.dumps(args.topics)}")
    return _run_node(main, params, args.namespace)


def register(subparsers) -> None:
    """Add ``robopin bag play`` and ``robopin bag record`` to the core's ``robopin bag``."""
    commands = subparsers.choices["bag"].commands
    play = commands.add_parser("play", help="republish a bag on its original schedule (needs ROS 2)")
    play.add_argument("bag")
    play.add_argument("--rate", type=float, default=1.0, help="speed factor; 0 = as fast as possible")
    play.add_argument("--loop", action="store_true")
    play.add_argument("--start", type=float, default=0.0, metavar="SECONDS", help="skip the first SECONDS")
    play.add_argument("--topics", nargs="*", default=[], help="shell patterns of topics to play")
    play.add_argument("--exclude", nargs="*", default=[], help="shell patterns of topics to leave out")
    add_namespace_argument(play)
    play.set_defaults(func=_play)
    record = commands.add_parser("record", help="run the recorder node: one bag per task (needs ROS 2)")
    record.add_argument("--output", default=DEFAULT_OUTPUT_DIR)
    record.add_argument("--topics", nargs="*", default=[], help="shell patterns (default: the trial topics)")
    record.add_argument("--flush-interval-s", type=float, default=DEFAULT_FLUSH_INTERVAL_S,
                        help="close the MCAP chunk this often: the most a killed recorder loses (see bag recover)")
    add_namespace_argument(record)
    record.set_defaults(func=_record)
