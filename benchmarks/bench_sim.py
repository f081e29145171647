"""Simulator figures: render time per view, physics steps per second, a scripted pick-and-place's wall
time, and the ground-truth self-check success rate per RoboPIN task.

Run: ``.venv/bin/python benchmarks/bench_sim.py`` (a couple of seeds per task, under 2 minutes) or
``--seeds 20`` for the full self-check rate (the rate to quote; several minutes). Every time is
printed with its ratio to a reference workload timed in the same run (sorting 10^6 floats), so
figures from differently loaded machines can be compared. Nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from robopin.sim.selfcheck import run_self_check, solve_scene
from robopin.sim.tasks import build_scene
from robopin.stats import summarize


def reference_ms(repeats: int = 5) -> float:
    """Median time of a fixed CPU workload: sorting 10^6 random float64."""
    data = np.random.default_rng(0).random(1_000_000)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.sort(data)
        times.append((time.perf_counter() - start) * 1000)
    return summarize(times).median


def show(label: str, value: float, unit: str, reference: float) -> None:
    print(f"{label:<48} {value:10.2f} {unit:<6} ({value / reference:8.1f} x reference)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="self-check seeds per task (issue figure: 20)")
    parser.add_argument("--robot", default=None, help="override the scenarios' robot (panda, xarm6)")
    args = parser.parse_args()

    reference = reference_ms()
    print(f"reference workload (sort 1e6 floats): {reference:.2f} ms")

    with build_scene("spatial", 0, register=False, robot=args.robot) as scene:
        world = scene.world
        for camera in ("static", "wrist"):
            world.render(camera)  # first render builds the renderer's caches
            times = []
            for _ in range(5):
                start = time.perf_counter()
                world.render(camera)
                times.append((time.perf_counter() - start) * 1000)
            show(f"render {camera} 640x480 RGB-D+seg (median of 5)", summarize(times).median, "ms", reference)
        steps = 480
        start = time.perf_counter()
        world.step(steps)
        elapsed = time.perf_counter() - start
        rate = steps / elapsed
        step_ratio = 1000 / rate / reference
        print(f"{'physics steps per second (240 Hz, spatial scene)':<48} {rate:10.0f} steps/s "
              f"(real-time factor {rate * world.time_step_s:.1f}; one step = {step_ratio:.3f} x reference)")

    with build_scene("sanity_cube", 0, register=False, robot=args.robot) as scene:
        start = time.perf_counter()
        result = solve_scene(scene)
        wall = time.perf_counter() - start
        label = f"scripted pick-and-place wall time ({result.sim_time_s:.1f} s simulated)"
        show(label, wall * 1000, "ms", reference)
        print(f"  ... succeeded: {result.success}")

    for task in ("spatial", "multi_view", "long_horizon"):
        successes, walls, failures = 0, [], []
        for seed in range(args.seeds):
            start = time.perf_counter()
            try:
                outcome = run_self_check(task, seed, robot=args.robot)
                ok = outcome.success
                reason = str(outcome.report)
            except Exception as error:  # a scene that cannot even be built counts as a failure
                ok, reason = False, f"{type(error).__name__}: {error}"
            walls.append(time.perf_counter() - start)
            successes += ok
            if not ok:
                failures.append(f"seed {seed}: {reason}")
        rate = successes / max(args.seeds, 1)
        print(f"self-check {task:<13} {successes}/{args.seeds} = {rate:.0%} success; "
              f"median wall {summarize(walls).median:.1f} s per trial")
        for failure in failures:
            print(f"    {failure}")


if __name__ == "__main__":
    main()
