"""One batch over simulated models and reasoning modes, in-process (``robopin.trials.inprocess``).

Rows, in this order (the most telling first, so a batch cut short still has them):

1. ``point``: point mode, single sample: ``--models`` × ``--tasks`` × ``--seeds``;
2. ``modes``: long-horizon task in plan (RoboGPT-R1) and subtask (R^3) modes: ``--models`` × ``--seeds``;
3. ``tts``: point mode with E-TTS (``tts:=etts``): ``--models`` × ``--tasks`` × ``--seeds``.

Each trial is one line of ``<out>/trials.jsonl`` as soon as it ends (``--resume`` skips the ones there);
``<out>/results.md`` is rewritten after each trial: success per task and preset, named failures,
executed-but-wrong vs refused, the model errors drawn, and the run-time reasoning measures. Nothing passes
or fails. The trials go through the system file's loop, projection, planner and sim arm without ROS (see
``robopin.trials.inprocess`` for what that leaves out); ``robopin trial`` is the node path.

Run: .venv/bin/python benchmarks/batch_models.py --system config/sim_xarm6.yaml --seeds 10 --out DIR [--jobs 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time
import traceback
from pathlib import Path


def _plan(args) -> list[tuple[str, int, dict[str, str]]]:
    runs = []
    if "point" in args.rows:
        for model in args.models:
            for task in args.tasks:
                runs += [(task, seed, {"model": model, "mode": "point", "tts": "single"}) for seed in _seeds(args)]
    if "long_horizon" in args.tasks and "modes" in args.rows:
        for mode in args.long_horizon_modes:
            for model in args.models:
                runs += [("long_horizon", seed, {"model": model, "mode": mode, "tts": "single"})
                         for seed in _seeds(args)]
    if "tts" in args.rows:
        for model in args.models:
            for task in args.tasks:
                runs += [(task, seed, {"model": model, "mode": "point", "tts": "etts"}) for seed in _seeds(args)]
    extra = _settings(args.set)
    return [(task, seed, {**arguments, **extra}) for task, seed, arguments in runs]


def _seeds(args) -> range:
    """The layouts of the batch: ``--seeds`` of them from ``--seed-start``."""
    return range(args.seed_start, args.seed_start + args.seeds)


def _settings(pairs: list[str]) -> dict[str, str]:
    """``--set name:=value`` pairs (system-file arguments, as ``robopin trial --set`` takes them)."""
    settings = {}
    for pair in pairs:
        name, sep, value = pair.partition(":=")
        if not sep or not name:
            raise SystemExit(f"--set takes name:=value, got {pair!r}")
        settings[name] = value
    return settings


def _key(task: str, seed: int, arguments: dict[str, str]) -> str:
    return json.dumps([task, seed, sorted(arguments.items())])


def _run(system_path: str, task: str, seed: int, arguments: dict[str, str]) -> dict:
    # The loop logs each task; a batch prints one line per trial instead.
    import logging

    from robopin.system import load_system
    from robopin.trials.inprocess import run_inprocess_trial

    logging.getLogger("robopin").setLevel(logging.ERROR)
    try:
        return run_inprocess_trial(load_system(system_path), task, seed, arguments).as_dict()
    except Exception as error:  # one broken trial must not end the batch: it is a row with its reason
        return {"task": task, "seed": seed, "arguments": arguments, "success": False, "failure": "internal_error",
                "detail": f"{type(error).__name__}: {error}"[:300], "loop_success": False, "steps_executed": 0,
                "goals_reached": None, "goals_total": None, "model_errors": {}, "samples": 0, "measures": [],
                "duration_s": 0.0, "path": "in-process", "executed_but_wrong": False,
                "traceback": traceback.format_exc()[-2000:]}


def _write_results(out: Path, rows: list[dict], command: str) -> None:
    from robopin.trials.inprocess import InProcessTrial, batch_markdown

    fields = set(InProcessTrial.__dataclass_fields__)
    trials = [InProcessTrial(**{k: v for k, v in r.items() if k in fields}) for r in rows]
    point = [t for t in trials if t.arguments.get("mode") == "point"]
    modes = [t for t in trials if t.arguments.get("mode") != "point"]
    # Arguments beyond model/mode/tts (--set) split the rows too.
    keys = ("model", "mode", "tts", *sorted({k for t in trials for k in t.arguments} - {"model", "mode", "tts"}))
    text = [f"# Simulated models and modes ({len(trials)} trials, in-process path)", "", f"Command: `{command}`", ""]
    if point:
        text += ["## Point mode (RoboPIN), with and without E-TTS", "", batch_markdown(point, keys), ""]
    if modes:
        text += ["## Long-horizon task: plan (RoboGPT-R1) and subtask (R^3) modes", "", batch_markdown(modes, keys), ""]
    (out / "results.md").write_text("\n".join(text), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="config/sim_xarm6.yaml")
    parser.add_argument("--tasks", nargs="+", default=["spatial", "multi_view", "long_horizon"])
    parser.add_argument("--models", nargs="+", default=["oracle", "robopin", "without_rft"])
    parser.add_argument("--long-horizon-modes", nargs="*", default=["plan", "subtask"])
    parser.add_argument("--seeds", type=int, default=10, help="how many layouts (seeds) per row")
    parser.add_argument("--seed-start", type=int, default=0, help="the first seed (e.g. a held-out layout: "
                        "--seed-start 1003 --seeds 1)")
    parser.add_argument("--rows", nargs="+", choices=["point", "modes", "tts"], default=["point", "modes", "tts"],
                        help="which rows to run (several processes can share a batch: one --out each, then "
                             "--results-only over the joined trials.jsonl)")
    parser.add_argument("--reverse", action="store_true", help="run the rows' trials last first (a second process "
                        "working the same rows from the other end)")
    parser.add_argument("--results-only", action="store_true", help="write results.md from trials.jsonl and stop")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="name:=value",
                        help="a system-file argument for every trial of the batch (e.g. verifier_error:=0.2)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "trials.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if args.resume and \
        log.exists() else []
    rows = list({_key(r["task"], r["seed"], r["arguments"]): r for r in rows}.values())  # joined logs: once each
    done = {_key(r["task"], r["seed"], r["arguments"]) for r in rows}
    if args.results_only:
        _write_results(out, rows, "python benchmarks/batch_models.py " + " ".join(sys.argv[1:]))
        print(f"results: {out / 'results.md'} ({len(rows)} trials)")
        return
    runs = [r for r in _plan(args) if _key(*r) not in done]
    if args.reverse:
        runs.reverse()
    command = "python benchmarks/batch_models.py " + " ".join(sys.argv[1:])
    print(f"{len(runs)} trial(s) to run ({len(done)} already in {log})", flush=True)
    started = time.monotonic()
    context = multiprocessing.get_context("spawn")
    # No max_tasks_per_child: on Python 3.11 the pool stops replacing workers that retire (every job hangs).
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool, \
            log.open("a", encoding="utf-8") as sink:
        futures = {pool.submit(_run, args.system, *run): run for run in runs}
        for index, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            row = future.result()
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            _write_results(out, rows, command)
            print(f"[{index}/{len(runs)} {time.monotonic() - started:6.0f} s] {row['task']} seed {row['seed']} "
                  f"{row['arguments']}: {'success' if row['success'] else row['failure']} "
                  f"({row['duration_s']:.1f} s) errors {row['model_errors']}", flush=True)
    print(f"results: {out / 'results.md'}")


if __name__ == "__main__":
    main()
