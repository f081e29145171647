"""Where a pick-and-place plan spends its time: ``plan_pick_place`` on the sim tasks' seeds, per robot.

Plans each case of ``pick_place_cases.sim_cases`` with the ``sim_*`` systems' planner (roboplan,
timeout 3 s), prints the planning time per case (and its median / p95), the shares of the pipeline
stages the planner reports (search, timing, verification), and with ``--profile`` the cProfile
functions by cumulative time. Nothing passes or fails.

Run: .venv/bin/python benchmarks/profile_pick_place.py [--seeds 5] [--robot panda] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from pick_place_cases import sim_cases

from robopin.motion import plan_pick_place
from robopin.motion.planner import RoboplanPlannerConfig, make_planner
from robopin.stats import summarize


def plan_cases(robot: str, seeds: int, profile: cProfile.Profile | None = None
               ) -> list[tuple[str, float, float, bool]]:
    """(case, planning time s, its process CPU time s, success) per case; ``profile`` sees planning only."""
    planner = make_planner(RoboplanPlannerConfig(robot=robot, timeout_s=3.0))
    planner.warmup()
    rows = []
    for case in sim_cases(planner.robot, robot, range(seeds)):
        planner.update_world(case.world)
        if profile is not None:
            profile.enable()
        started, cpu_started = time.perf_counter(), time.process_time()
        plan = plan_pick_place(planner, case.q_start, case.pick, case.place, case.config,
                               object_points=case.object_points)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        if profile is not None:
            profile.disable()
        rows.append((case.name, elapsed, cpu, plan.success))
        detail = plan.message if not plan.success else ""
        print(f"  {robot:<7}{case.name:<18}{elapsed:7.3f} s (CPU {cpu:.3f} s)  {'ok' if plan.success else 'FAILED'} "
              f"{detail}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--robot", action="append", choices=("panda", "xarm6"))
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    profile = cProfile.Profile() if args.profile else None
    for robot in args.robot or ["panda", "xarm6"]:
        rows = plan_cases(robot, args.seeds, profile)
        wall, cpu = summarize(row[1] for row in rows), summarize(row[2] for row in rows)
        print(f"{robot}: {sum(row[3] for row in rows)}/{len(rows)} planned; median {wall.median:.3f} s, "
              f"p95 {wall.p95:.3f} s, max {wall.max:.3f} s; CPU median "
              f"{cpu.median:.3f} s, p95 {cpu.p95:.3f} s")
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
