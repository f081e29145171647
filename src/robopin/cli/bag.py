"""``robopin bag``: inspect, step through, re-plan, record and play trial bags."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["register"]

# Defined here, not in robopin.bags (whose import reads rosbags): building the parser stays fast.
DEFAULT_TOLERANCE_M = 1e-6
"""``bag replan``'s default target tolerance: a replay of a bag's own text on its own frames reproduces the recorded
targets to float rounding (about 2e-16 m measured on a live demo bag), far below a micrometre."""
DEFAULT_TOLERANCE_PX = 1e-3
"""``bag replan``'s default pixel tolerance (the recorded pins are reproduced exactly; 1e-3 px of slack)."""


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
    from robopin.interfaces import view_topics
    from robopin.system.names import absolute_name

    topic = args.topic or absolute_name(view_topics("static").color)  # as a bag names it
    interactive = args.all or sys.stdin.isatty()
    if not interactive:  # piped or run by a script: nobody can press Enter, so print every frame
        print("(standard input is not a terminal: printing every frame, as --all)", file=sys.stderr)
    with TrialBag(args.bag) as bag:
        for number, (message, between) in enumerate(frames(bag, topic)):
            stamp = (message.stamp_ns - bag.start_ns) * 1e-9
            others = ", ".join(sorted({m.topic for m in between})) or "nothing else"
            print(f"frame {number} at +{stamp:.3f} s; since the previous: {others}")
            if args.show:
                decoded = bag.decode(message)
                print("  " + repr(decoded)[:args.show])
            if not args.all and interactive and input("[Enter] next, q quit: ").strip().lower() == "q":
                break
    return 0


REPLAN_SAME, REPLAN_DIFFERS, REPLAN_CANNOT = 0, 1, 2
"""``robopin bag replan``'s exit codes: reproduced within the tolerances, differs, cannot replay."""


class ReplanConfigError(ValueError):
    """A ``--backend`` or ``--reasoning`` file ``bag replan`` cannot use (the message says what it expected)."""


def _yaml_mapping(value, what: str) -> dict:
    """A mapping, or a YAML string of one (a planner parameter block may hold either); {} for nothing."""
    import yaml

    if isinstance(value, str):
        value = yaml.safe_load(value)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReplanConfigError(f"{what} must be a mapping, got {type(value).__name__}: {value!r}")
    return value


def _replan_backend(path: str):
    """The backend and the model's own reasoning settings (``{}`` for none) that ``--backend`` names.

    ``recorded`` (the text in the bag), else a YAML file holding either one VLM backend config
    (``type: …``) or the planner's block as ``robopin models show NAME --vlm-config`` prints it:
    ``vlm: {type: …}`` with an optional ``reasoning:`` (the model's prompt template and answer format).
    """
    import yaml

    from robopin.bags.task_replay import RecordedTextBackend
    from robopin.vlm.base import make_backend

    if path == "recorded":
        return RecordedTextBackend(), {}
    with open(path, encoding="utf-8") as stream:
        config = _yaml_mapping(yaml.safe_load(stream), f"--backend file {path}")
    reasoning: dict = {}
    if "type" not in config and "vlm" in config:
        unknown = sorted(set(config) - {"vlm", "reasoning"})
        if unknown:
            raise ReplanConfigError(f"--backend file {path}: unknown key(s) {unknown} beside 'vlm' "
                                    "(expected what `robopin models show NAME --vlm-config` prints: vlm, reasoning)")
        reasoning = _yaml_mapping(config.get("reasoning"), f"'reasoning' in {path}")
        config = _yaml_mapping(config["vlm"], f"'vlm' in {path}")
    if "type" not in config:
        raise ReplanConfigError(f"--backend file {path} holds neither a VLM backend config (type: …) nor a planner "
                                f"block (vlm: {{type: …}}, as `robopin models show NAME --vlm-config` prints); "
                                f"keys: {sorted(config)}")
    if config.get("type") == "recorded":
        return RecordedTextBackend(), reasoning
    return make_backend(config), reasoning


def _replan_reasoning(model_settings: dict, path: str):
    """The loop's config: point mode and one step unless ``--reasoning`` says, the model's settings, the file's."""
    import yaml

    from robopin.reasoning.config import ReasoningConfig

    values: dict = {} if path else {"mode": "point", "max_steps": 1}
    values.update(model_settings)
    if path:
        with open(path, encoding="utf-8") as stream:
            values.update(_yaml_mapping(yaml.safe_load(stream), f"--reasoning file {path}"))
    return ReasoningConfig.from_dict(values)


def replan_one(bag: str, backend_path: str, reasoning_path: str, tolerance_px: float,
               tolerance_m: float) -> dict:
    """Replay one bag: ``{"bag", "code", "summary", "error"}`` with ``code`` one of the exit codes above and
    ``summary`` the diff (:func:`robopin.bags.task_replay.summarize`), or ``error`` when it cannot replay.

    Module-level and plain in, plain out, so Ray runs it as a task in a worker process."""
    import yaml

    from robopin.bags import BagNotFoundError, TrialBag
    from robopin.bags.task_replay import (
        ReasoningLoopPlanner,
        RecordedTextBackend,
        TaskReplayError,
        check_replay_inputs,
        recorded_projection_config,
        recorded_steps,
        replay_with_planner,
        summarize,
    )
    from robopin.errors import one_line
    from robopin.reasoning.errors import ReasoningConfigError
    from robopin.vlm.errors import VLMError

    try:  # everything that decides whether a replay can run at all: exit 2 when it cannot
        backend, model_settings = _replan_backend(backend_path)
        config = _replan_reasoning(model_settings, reasoning_path)
        with TrialBag(bag) as opened:
            steps = recorded_steps(opened)
            check_replay_inputs(opened, steps, need_targets=isinstance(backend, RecordedTextBackend))
            projection = recorded_projection_config(opened)
        planner = ReasoningLoopPlanner(backend, config, projection=projection)
        replays = replay_with_planner(steps, planner, tolerance_px=tolerance_px, tolerance_m=tolerance_m)
    except (TaskReplayError, BagNotFoundError, ReplanConfigError, VLMError, ReasoningConfigError,
            yaml.YAMLError, OSError) as error:
        return {"bag": bag, "code": REPLAN_CANNOT, "summary": None, "error": one_line(error)}
    summary = summarize(replays)
    return {"bag": bag, "code": REPLAN_SAME if summary["identical"] else REPLAN_DIFFERS, "summary": summary,
            "error": ""}


def _is_bag(path: Path) -> bool:
    """A rosbag2 folder (closed or not): what ``bag replan`` replays, as opposed to a folder of them."""
    return any(path.glob("metadata.yaml")) or any(path.glob("*.mcap")) or any(path.glob("*.db3"))


def _largest(summary: dict, args: argparse.Namespace) -> str:
    return (f"largest differences {summary['max_target_error_m']:.2g} m, {summary['max_pixel_error']:.2g} px; "
            f"tolerance {args.tolerance_m:g} m, {args.tolerance_px:g} px")


def _replan(args: argparse.Namespace) -> int:
    path = Path(args.bag)
    if path.is_dir() and not _is_bag(path):
        return _replan_folder(args, path)
    if args.workers > 1 or args.ray_address:
        print("robopin bag replan: --workers and --ray-address replay a folder of bags; this is one bag",
              file=sys.stderr)
        return REPLAN_CANNOT
    result = replan_one(args.bag, args.backend, args.reasoning, args.tolerance_px, args.tolerance_m)
    if result["code"] == REPLAN_CANNOT:
        print(f"robopin bag replan: cannot replay: {result['error']}", file=sys.stderr)
        return REPLAN_CANNOT
    summary = result["summary"]
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
        largest = _largest(summary, args)
        print(f"identical within tolerance ({largest})" if summary["identical"] else f"differs ({largest})")
    return result["code"]


def _replan_folder(args: argparse.Namespace, folder: Path) -> int:
    """Every bag under ``folder`` (a trial batch's, say), one line each as it finishes, on Ray with ``--workers``."""
    import os

    bags = sorted({p.parent for pattern in ("metadata.yaml", "*.mcap", "*.db3") for p in folder.rglob(pattern)})
    if not bags:
        print(f"robopin bag replan: no bags under {folder}", file=sys.stderr)
        return REPLAN_CANNOT
    # Absolute paths: a Ray worker does not run in this directory.
    backend = args.backend if args.backend == "recorded" else os.path.abspath(args.backend)
    reasoning = os.path.abspath(args.reasoning) if args.reasoning else ""
    jobs = [(str(bag.resolve()), backend, reasoning, args.tolerance_px, args.tolerance_m) for bag in bags]
    results: list[dict] = []

    def report(result: dict) -> None:
        results.append(result)
        name = os.path.relpath(result["bag"], folder.resolve())
        if result["code"] == REPLAN_CANNOT:
            line = f"cannot replay: {result['error']}"
        else:
            summary = result["summary"]
            verdict = "reproduced" if summary["identical"] else "differs"
            line = f"{verdict}, {len(summary['steps'])} step(s) ({_largest(summary, args)})"
        if not args.json:
            print(f"[{len(results)}/{len(jobs)}] {name}: {line}", flush=True)

    if args.workers > 1 or args.ray_address:
        from robopin.distributed import start_ray

        ray = start_ray(args.ray_address, args.workers)
        try:
            task = ray.remote(num_cpus=1)(replan_one)
            pending = [task.remote(*job) for job in jobs]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                report(ray.get(ready[0]))
        finally:
            ray.shutdown()
    else:
        for job in jobs:
            report(replan_one(*job))
    codes = [r["code"] for r in results]
    if args.json:
        print(json.dumps(sorted(results, key=lambda r: r["bag"]), indent=2))
    else:
        print(f"{codes.count(REPLAN_SAME)}/{len(codes)} reproduced, {codes.count(REPLAN_DIFFERS)} differ, "
              f"{codes.count(REPLAN_CANNOT)} cannot replay")
    return max(codes)


def _xyz(point) -> str:
    return "(" + ", ".join(f"{c:.4f}" for c in point) + ") m"


def register(subparsers) -> None:
    """Add ``robopin bag …``."""
    parser = subparsers.add_parser("bag", help="inspect, step through, re-plan, record and play trial bags")
    commands = parser.add_subparsers(dest="bag_command", metavar="BAG_COMMAND", required=True)
    info = commands.add_parser("info", help="topics, types, counts and duration of a bag")
    info.add_argument("bag")
    info.set_defaults(func=_info)
    step = commands.add_parser("step", help="step through a bag one message of a topic at a time")
    step.add_argument("bag")
    step.add_argument("--topic", default="", help="topic stepped through (default: the static view's color image)")
    step.add_argument("--all", action="store_true", help="print every frame without waiting for Enter")
    step.add_argument("--show", type=int, default=0, metavar="CHARS", help="print the decoded message (truncated)")
    step.set_defaults(func=_step)
    about = ("re-run the reasoning loop (dry run) on the recorded views and diff; exit 0 reproduced, 1 differs, "
             "2 cannot replay (bag missing or lacking a topic, bad config, model unreachable); given a folder, "
             "every bag under it (the worst exit code of them)")
    replan = commands.add_parser("replan", help=about, description=about[0].upper() + about[1:] + ".")
    replan.add_argument("bag")
    replan.add_argument("--backend", required=True,
                        help="'recorded' (answer each step with the bag's own text: must reproduce the recorded "
                             "targets) or a YAML file: a VLM backend config (type: …) or what "
                             "`robopin models show NAME --vlm-config` prints (vlm: …, reasoning: …)")
    replan.add_argument("--reasoning", default="",
                        help="YAML file with the reasoning loop config (default: point mode, one step, and the "
                             "--backend file's reasoning settings)")
    replan.add_argument("--tolerance-px", type=float, default=DEFAULT_TOLERANCE_PX,
                        help="a pinned point that moved more than this many pixels differs (default: %(default)g; "
                             "the recorded backend reproduces the pins exactly)")
    replan.add_argument("--tolerance-m", type=float, default=DEFAULT_TOLERANCE_M,
                        help="a 3D target that moved more than this many metres differs (default: %(default)g; "
                             "the recorded backend reproduces a live bag's targets to float rounding, ~1e-16 m)")
    replan.add_argument("--json", action="store_true", help="print the diff as JSON")
    replan.add_argument("--workers", type=int, default=1, metavar="N",
                        help="with a folder of bags (a trial batch's): replay them on N Ray workers (a local Ray on "
                             "loopback; default 1: one after another in this process)")
    replan.add_argument("--ray-address", default="", metavar="ADDRESS",
                        help="with a folder of bags: replay them on this Ray cluster (from `ray start --head`)")
    replan.set_defaults(func=_replan)
    recover = commands.add_parser("recover", help="rebuild a killed recorder's bag (MCAP summary, footer, "
                                                  "metadata.yaml) from its complete chunks")
    recover.add_argument("bag")
    recover.set_defaults(func=_recover)
    # play and record run ROS nodes: robopin_ros.cli.bag_nodes adds them here when that package is installed.
    parser.commands = commands
