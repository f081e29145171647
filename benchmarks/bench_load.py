"""Verdicts under load: one trial batch run idle, then again beside CPU-bound processes; what changed.

The batch is what a user runs (``robopin trial spatial multi_view long_horizon --seeds N`` on the simulated Panda
and xArm 6, the oracle model, every node, ``--workers 1``), in a scratch folder on a ROS domain of its own. The
second run has ``--hogs`` processes beside it that spin at normal priority on every core they get (on this 2-core
machine, two of them take a core each from the batch). Per trial, printed: both verdicts (success or the named
failure), how far the objects came to rest apart between the two runs (the largest distance over every object's
bounding-box centre, from each trial's ``object_centers_m``), and both trial durations. Then how many verdicts
agree, the largest rest-position difference, and the median duration ratio loaded / idle. A simulated trial's
verdict should not depend on how busy the machine is. Nothing passes or fails here.

Run: .venv/bin/python benchmarks/bench_load.py [--seeds 2] [--hogs 2] [--system sim_panda --system sim_xarm6]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from robopin.env import REPO_ROOT

ROBOPIN = [sys.executable, "-m", "robopin.cli"]


def _spin() -> None:
    while True:
        pass


def _batch(args, out: Path, env: dict[str, str]) -> float:
    command = [*ROBOPIN, "trial", "spatial", "multi_view", "long_horizon", "--seeds", str(args.seeds)]
    for system in args.system:
        command += ["--system", system]
    command += ["--no-console", "--out", str(out)]
    started = time.monotonic()
    with (out.parent / f"{out.name}.log").open("w") as log:
        subprocess.run(command, cwd=out.parent, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    return time.monotonic() - started


def _trials(out: Path) -> dict[str, dict]:
    from robopin.trials.log import read_trial

    found = {}
    for folder in sorted(p.parent for p in out.glob("*/summary.json")):
        summary, _ = read_trial(folder)
        if summary is not None:
            found[folder.name] = {"verdict": "success" if summary.success else summary.failure or "failure",
                                  "centers": summary.extra.get("object_centers_m", {}),
                                  "duration_s": summary.duration_s}
    return found


def _apart_m(a: dict[str, list[float]], b: dict[str, list[float]]) -> float:
    """The largest distance between one object's rest positions in the two runs (nan when they name different
    objects or hold none)."""
    if not a or set(a) != set(b):
        return math.nan
    return max(math.dist(a[name], b[name]) for name in a)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="layouts per task (0..N-1)")
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the second run")
    parser.add_argument("--system", action="append", help="system file(s); default sim_panda and sim_xarm6")
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0")) or 153)
    args = parser.parse_args()
    args.system = args.system or ["sim_panda", "sim_xarm6"]
    env = {**os.environ, "ROS_DOMAIN_ID": str(args.domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    scratch = Path(tempfile.mkdtemp(prefix="robopin-load-"))
    print(f"scratch {scratch}; {os.cpu_count()} cores; batch of {3 * args.seeds * len(args.system)} trials", flush=True)

    idle_s = _batch(args, scratch / "idle", env)
    print(f"idle run: {idle_s:.0f} s", flush=True)
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    try:
        loaded_s = _batch(args, scratch / "loaded", env)
    finally:
        for hog in hogs:
            hog.kill()
    print(f"run beside {args.hogs} CPU hogs: {loaded_s:.0f} s (x{loaded_s / idle_s:.2f})\n", flush=True)

    idle, loaded = _trials(scratch / "idle"), _trials(scratch / "loaded")
    agree, apart, ratios = 0, [], []
    print(f"{'trial':32} {'idle':22} {'loaded':22} {'apart (mm)':>10} {'idle s':>7} {'loaded s':>8}")
    for name in sorted(set(idle) | set(loaded)):
        a, b = idle.get(name), loaded.get(name)
        if a is None or b is None:
            print(f"{name:32} {'-' if a is None else a['verdict']:22} {'-' if b is None else b['verdict']:22}")
            continue
        agree += a["verdict"] == b["verdict"]
        distance = _apart_m(a["centers"], b["centers"])
        if not math.isnan(distance):
            apart.append(distance)
        ratios.append(b["duration_s"] / a["duration_s"])
        print(f"{name:32} {a['verdict']:22} {b['verdict']:22} {distance * 1000:10.1f} {a['duration_s']:7.1f} "
              f"{b['duration_s']:8.1f}")
    total = len(set(idle) | set(loaded))
    ratios.sort()
    print(f"\nverdicts equal idle and loaded: {agree}/{total}; objects' rest positions at most "
          f"{max(apart, default=math.nan) * 1000:.1f} mm apart ({len(apart)} trials compared); trial duration "
          f"loaded / idle: median x{ratios[len(ratios) // 2] if ratios else math.nan:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
