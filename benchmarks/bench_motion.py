"""Motion-planning benchmark: CPU planner candidates on the fixed tabletop problem set.

For each candidate library (roboplan, OMPL; mplib cannot join a numpy 2 environment) and each robot
(Panda, xArm 6): success rate, planning time median / p95 (IK + search + TOPP-RA + dense check, i.e.
what a caller waits for; and the process CPU time of the same calls, which other load on a shared
machine does not inflate), and the share of returned paths that an independent, twice as dense
collision check finds collision-free. Ratios are to OMPL RRT-Connect measured in the same run;
cuRobo's published figures (RTX 6000 Ada) are printed as the reference line.

Run: python benchmarks/bench_motion.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import time

from robopin.motion.planner import OmplPlannerConfig, RoboplanPlannerConfig, make_planner
from robopin.motion.problems import tabletop_problems
from robopin.motion.verify import sampled_check
from robopin.stats import summarize

CUROBO_REFERENCE = "cuRobo v2 docs, RTX 6000 Ada, MotionBenchMaker+MπNets: 99.73 % success, mean 38 ms, p98 81 ms"
CANDIDATES = {"ompl": OmplPlannerConfig, "roboplan": RoboplanPlannerConfig}
ROBOTS = ("panda", "xarm6")


def run_candidate(kind: str, robot: str, problems) -> dict[str, float]:
    planner = make_planner(CANDIDATES[kind](robot=robot, timeout_s=2.0))
    planner.warmup()
    times, cpu, successes, clean = [], [], 0, 0
    for k, problem in enumerate(problems):
        planner.update_world(problem.world)
        planner.robot.reseed(k)
        start = planner.robot.inverse_kinematics(problem.T_base_start, planner.robot.home, restarts=50)
        if start is None:
            raise RuntimeError(f"{robot} {problem.name}: start pose has no collision-free IK")
        planner.robot.reseed(1000 + k)
        cpu_started = time.process_time()
        result = planner.plan_to_pose(start, problem.T_base_goal)
        cpu.append(time.process_time() - cpu_started)
        times.append(result.planning_time_s)
        if result.success:
            successes += 1
            clean += int(sampled_check(planner.robot, result.trajectory.positions, max_step_rad=0.002))
    wall_ms, cpu_ms = summarize(times).scaled(1e3), summarize(cpu).scaled(1e3)
    return {
        "success_rate": successes / len(problems),
        "median_ms": wall_ms.median,
        "p95_ms": wall_ms.p95,
        "mean_ms": wall_ms.mean,
        "cpu_median_ms": cpu_ms.median,
        "cpu_p95_ms": cpu_ms.p95,
        "collision_free": clean / max(successes, 1),
        "problems": len(problems),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two problems per world")
    args = parser.parse_args()
    problems = tabletop_problems()
    if args.quick:
        problems = [p for p in problems if p.name.endswith(("/0", "/1"))]
    print(f"reference line: {CUROBO_REFERENCE}")
    print("mplib: not measured here (its wheel pins numpy<2, which the stack's numpy 2.4 cannot satisfy)")
    began = time.perf_counter()
    results: dict[tuple[str, str], dict[str, float]] = {}
    for robot in ROBOTS:
        for kind in ("ompl", "roboplan"):
            results[kind, robot] = run_candidate(kind, robot, problems)
    print(
        f"{'candidate':<10} {'robot':<6} {'n':>3} {'success':>8} {'median ms':>10} {'p95 ms':>8} "
        f"{'mean ms':>8} {'cpu med':>8} {'cpu p95':>8} {'free %':>7}  ratio to ompl (median, p95)  "
        "ratio to cuRobo (mean 38 ms, p98 81 ms)"
    )
    for (kind, robot), r in results.items():
        base = results["ompl", robot]
        print(
            f"{kind:<10} {robot:<6} {r['problems']:>3} {100 * r['success_rate']:>7.1f}% {r['median_ms']:>10.1f} "
            f"{r['p95_ms']:>8.1f} {r['mean_ms']:>8.1f} {r['cpu_median_ms']:>8.1f} {r['cpu_p95_ms']:>8.1f} "
            f"{100 * r['collision_free']:>6.1f}%  "
            f"{r['median_ms'] / base['median_ms']:>6.2f}x, {r['p95_ms'] / base['p95_ms']:>5.2f}x"
            f"{'':>16}{r['mean_ms'] / 38.0:>6.2f}x, {r['p95_ms'] / 81.0:>5.2f}x"
        )
    print(
        f"total benchmark time {time.perf_counter() - began:.1f} s; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores (wall-clock figures grow with other load, CPU figures do not)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
