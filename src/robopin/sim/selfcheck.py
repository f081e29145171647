"""Scripted self-check: solve a scenario from ground truth so a scene is known solvable.

For every goal of a scene's task, :func:`run_self_check` runs the scripted ground-truth
pick-and-place (:mod:`robopin.sim.scripted`) and then judges the final state with the scenario's own
success check. A scenario/seed that fails here is a broken scene, not a stack failure.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from robopin.sim.scripted import PickPlaceOutcome, pick_and_place
from robopin.sim.tasks import ScenarioSpec, Scene, SuccessReport, build_scene, check_success


@dataclass
class SelfCheckResult:
    """One scenario/seed solved from ground truth."""

    scenario: str
    seed: int
    success: bool
    report: SuccessReport
    outcomes: list[PickPlaceOutcome] = field(default_factory=list)
    wall_time_s: float = 0.0
    sim_time_s: float = 0.0


def place_points(scene: Scene) -> dict[str, np.ndarray]:
    """Release point (base frame) for each goal object: the target's top centre, spread on a ring when
    several objects share one target so they do not land on each other."""
    world = scene.world
    by_target: dict[str, list[str]] = defaultdict(list)
    for goal in scene.task.goals:
        by_target[goal.target].append(goal.object)
    points = {}
    for target, names in by_target.items():
        plate = world.object(target)
        center = world.object_center(target)
        top = center[2] + plate.height_m / 2 if plate.kind == "plate" else 0.0
        ring = 0.0 if len(names) == 1 else min(0.05, 0.5 * plate.radius_m)
        for k, name in enumerate(names):
            angle = 2 * math.pi * k / len(names)
            points[name] = np.array([center[0] + ring * math.cos(angle), center[1] + ring * math.sin(angle), top])
    return points


def solve_scene(scene: Scene) -> SelfCheckResult:
    """Run the scripted pick-and-place for every goal of ``scene`` and judge the result."""
    wall_start = time.perf_counter()
    sim_start = scene.world.sim_time_s
    outcomes = []
    targets = place_points(scene)
    for goal in scene.task.goals:
        outcome = pick_and_place(scene.world, goal.object, targets[goal.object], home_q=scene.observe_q)
        outcomes.append(outcome)
        if not outcome.grasped:
            break
    report = check_success(scene)
    return SelfCheckResult(
        scene.spec.name,
        scene.seed,
        report.success,
        report,
        outcomes,
        time.perf_counter() - wall_start,
        scene.world.sim_time_s - sim_start,
    )


def run_self_check(spec: ScenarioSpec | str, seed: int, *, robot: str | None = None) -> SelfCheckResult:
    """Build ``spec`` with ``seed`` (unregistered world), solve it from ground truth, close it."""
    with build_scene(spec, seed, robot=robot, register=False) as scene:
        return solve_scene(scene)
