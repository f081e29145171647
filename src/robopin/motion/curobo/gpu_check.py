"""Check the cuRobo backend on a machine with an NVIDIA GPU: build, warm-up, the benchmark problems.

Run ``python -m robopin.motion.curobo.gpu_check [--robots panda fr3 xarm6]`` where cuRobo v1 is installed
(the CUDA image). Prints, per robot: the MotionGen build and warm-up times, then success rate and
planning time median / p95 on the tabletop problems, each plan also passed through robopin's dense
collision check; exits 1 when cuRobo cannot run here or any returned plan collides.
"""

from __future__ import annotations

import argparse
import sys
import time

from robopin.motion.curobo.config import CuroboPlannerConfig
from robopin.motion.curobo.planner import CuroboPlanner, curobo_available
from robopin.motion.problems import tabletop_problems
from robopin.motion.verify import sampled_check
from robopin.stats import summarize


def check_robot(robot: str) -> bool:
    """Build, warm up and benchmark one robot; True when every returned plan is collision-free."""
    began = time.perf_counter()
    planner = CuroboPlanner(CuroboPlannerConfig(robot=robot, warmup_on_start=False))
    built = time.perf_counter() - began
    planner.warmup()
    print(f"{robot}: MotionGen built in {built:.1f} s, warm-up {planner.warmup_time_s:.1f} s")
    times, successes, clean = [], 0, True
    problems = tabletop_problems()
    for k, problem in enumerate(problems):
        planner.update_world(problem.world)
        planner.robot.reseed(k)
        start = planner.robot.inverse_kinematics(problem.T_base_start, planner.robot.home, restarts=50)
        if start is None:
            print(f"  {problem.name}: start pose has no IK (skipped)")
            continue
        result = planner.plan_to_pose(start, problem.T_base_goal)
        times.append(result.planning_time_s)
        if result.success:
            successes += 1
            if not sampled_check(planner.robot, result.trajectory.positions):
                clean = False
                print(f"  {problem.name}: cuRobo's plan collides under the dense check")
        else:
            print(f"  {problem.name}: {result.status.value} {result.message}")
    ms = summarize(times).scaled(1e3)
    print(
        f"{robot}: success {successes}/{len(problems)}, median {ms.median:.1f} ms, "
        f"p95 {ms.p95:.1f} ms (published: mean 38 ms, p98 81 ms, RTX 6000 Ada)"
    )
    return clean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=["panda", "fr3", "xarm6"])
    args = parser.parse_args(argv)
    ok, why = curobo_available()
    if not ok:
        print(f"cuRobo cannot run here: {why}", file=sys.stderr)
        return 1
    return 0 if all([check_robot(robot) for robot in args.robots]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
