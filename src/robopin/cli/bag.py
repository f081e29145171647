"""``robopin bag``: inspect, step through, re-plan, record and play trial bags."""

from __future__ import annotations

import argparse
import importlib
import json
import sys

__all__ = ["register"]


def _info(args: argparse.Namespace) -> int:
    from robopin.bags import TrialBag

    with TrialBag(args.bag) as bag:
        print(f"{bag.path}: {bag.duration_s:.3f} s, {sum(t.count for t in bag.topics.values())} messages")
        for info in sorted(bag.topics.values(), key=lambda i: i.topic):
            print(f"  {info.count:6d}  {info.topic}  [{info.msgtype}]")
    return 0


def _recover(args: argparse.Namespace) -> int:
    from robopin.bags.recover import recover_bag

    report = recover_bag(args.bag)
    if report.was_complete:
        print(f"{report.path}: already complete ({report.messages} messages); nothing to recover")
        return 0
    print(f"{report.path}: recovered {report.messages} messages over {report.duration_s:.3f} s "
          f"on {len(report.topics)} topics; the damaged original is {report.damaged_path}")
    return 0


def _step(args: argparse.Namespace) -> int:
    from robopin.bags import TrialBag, frames

    interactive = args.all or sys.stdin.isatty()
    if not interactive:  # piped or run by a script: nobody can press Enter, so print every frame
        print("(standard input is not a terminal: printing every frame, as --all)", file=sys.stderr)
    with TrialBag(args.bag) as bag:
        for number, (message, between) in enumerate(frames(bag, args.topic)):
            stamp = (message.stamp_ns - bag.start_ns) * 1e-9
            others = ", ".join(sorted({m.topic for m in between})) or "nothing else"
            print(f"frame {number} at +{stamp:.3f} s; since the previous: {others}")
            if args.show:
                decoded = bag.decode(message)
                print("  " + repr(decoded)[:args.show])
            if not args.all and interactive and input("[Enter] next, q quit: ").strip().lower() == "q":
                break
    return 0


def _replan_backend(path: str):
    """``recorded`` (the text in the bag), else a YAML file with a VLM backend config (``type: …``)."""
    import yaml

    from robopin.bags.planner_replay import RecordedTextBackend
    from robopin.vlm.base import make_backend

    if path == "recorded":
        return RecordedTextBackend()
    with open(path, encoding="utf-8") as stream:
        config = yaml.safe_load(stream)
    if isinstance(config, dict) and config.get("type") == "recorded":
        return RecordedTextBackend()
    return make_backend(config)


def _replan(args: argparse.Namespace) -> int:
    import yaml

    from robopin.bags import TrialBag
    from robopin.bags.planner_replay import (
        PlannerReplayError,
        ReasoningLoopPlanner,
        RecordedTextBackend,
        check_replay_inputs,
        recorded_projection_config,
        recorded_steps,
        replay_with_planner,
        summarize,
    )

    backend = _replan_backend(args.backend)
    config = None
    if args.reasoning:
        from robopin.reasoning.config import ReasoningConfig

        with open(args.reasoning, encoding="utf-8") as stream:
            config = ReasoningConfig.from_dict(yaml.safe_load(stream) or {})
    try:
        with TrialBag(args.bag) as bag:
            steps = recorded_steps(bag)
            check_replay_inputs(bag, steps, need_targets=isinstance(backend, RecordedTextBackend))
            projection = recorded_projection_config(bag)
    except PlannerReplayError as error:
        print(f"robopin bag replan: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    planner = ReasoningLoopPlanner(backend, config, projection=projection)
    replays = replay_with_planner(steps, planner, tolerance_px=args.tolerance_px,
                                  tolerance_m=args.tolerance_m)
    summary = summarize(replays)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for step in summary["steps"]:
            verdict = "reproduced" if step["identical"] else "differs"
            targets = "; ".join(f"{t['key']} {'at ' + _xyz(t['point']) if t['valid'] else 'refused: ' + t['reason']}"
                                for t in step["replayed_targets"]) or "no targets"
            print(f"step {step['index']}: {verdict}: {targets}")
            if step["replayed_model"].startswith("no reasoning"):
                print(f"    the replay produced {step['replayed_model']}")
            for difference in step["differences"]:
                print(f"    {difference}")
        print("identical within tolerance" if summary["identical"] else
              f"differs (tolerance {args.tolerance_px} px, {args.tolerance_m} m)")
    return 0 if summary["identical"] else 1


def _xyz(point) -> str:
    return "(" + ", ".join(f"{c:.4f}" for c in point) + ") m"


def _ros_node(module: str, params: list[str], namespace: str = "") -> int:
    # The CLI lives in the rclpy-free core; the node module is only imported when asked for.
    node = importlib.import_module(f"robopin_ros.{module}")
    remap = ["-r", f"__ns:={namespace}"] if namespace else []  # its relative names go under the robot's namespace
    return int(node.main([sys.argv[0], "--ros-args", *remap, *[p for kv in params for p in ("-p", kv)]]) or 0)


def _play(args: argparse.Namespace) -> int:
    params = [f"bag:={args.bag}", f"rate:={args.rate}", f"loop:={str(args.loop).lower()}",
              f"start_offset_s:={args.start}"]
    if args.topics:
        params.append(f"topics:={json.dumps(args.topics)}")
    if args.exclude:
        params.append(f"exclude:={json.dumps(args.exclude)}")
    return _ros_node("replay_node", params, args.namespace)


def _record(args: argparse.Namespace) -> int:
    params = [f"output_dir:={args.output}", f"flush_interval_s:={args.flush_interval_s}"]
    if args.topics:
        params.append(f"topics:={json.dumps(args.topics)}")
    return _ros_node("recorder_node", params, args.namespace)


def register(subparsers) -> None:
    """Add ``robopin bag …``."""
    from robopin.cli.up import add_namespace_argument

    parser = subparsers.add_parser("bag", help="inspect, step through, re-plan, record and play trial bags")
    commands = parser.add_subparsers(dest="bag_command", metavar="BAG_COMMAND", required=True)
    info = commands.add_parser("info", help="topics, types, counts and duration of a bag")
    info.add_argument("bag")
    info.set_defaults(func=_info)
    step = commands.add_parser("step", help="step through a bag one message of a topic at a time")
    step.add_argument("bag")
    step.add_argument("--topic", default="/cameras/static/color/image_raw")
    step.add_argument("--all", action="store_true", help="print every frame without waiting for Enter")
    step.add_argument("--show", type=int, default=0, metavar="CHARS", help="print the decoded message (truncated)")
    step.set_defaults(func=_step)
    replan = commands.add_parser("replan", help="re-run the reasoning loop (dry run) on the recorded views and diff; "
                                                "exit 0 identical, 1 differs, 2 the bag lacks what replay needs")
    replan.add_argument("bag")
    replan.add_argument("--backend", required=True,
                        help="'recorded' (answer each step with the bag's own text: must reproduce the recorded "
                             "targets) or a YAML file with a VLM backend config (type: …)")
    replan.add_argument("--reasoning", default="",
                        help="YAML file with the reasoning loop config (default: point mode, one step)")
    replan.add_argument("--tolerance-px", type=float, default=0.0)
    replan.add_argument("--tolerance-m", type=float, default=0.0)
    replan.add_argument("--json", action="store_true", help="print the diff as JSON")
    replan.set_defaults(func=_replan)
    recover = commands.add_parser("recover", help="rebuild a killed recorder's bag (MCAP summary, footer, "
                                                  "metadata.yaml) from its complete chunks")
    recover.add_argument("bag")
    recover.set_defaults(func=_recover)
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
    record.add_argument("--output", default="trials/bags")
    record.add_argument("--topics", nargs="*", default=[], help="shell patterns (default: the trial topics)")
    record.add_argument("--flush-interval-s", type=float, default=1.0,
                        help="close the MCAP chunk this often: the most a killed recorder loses (see bag recover)")
    add_namespace_argument(record)
    record.set_defaults(func=_record)
