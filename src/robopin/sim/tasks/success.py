"""What a simulated task asks for and how a final world state is judged against it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from robopin.sim.world import TABLE_TOP_Z, SimWorld

if TYPE_CHECKING:
    from robopin.sim.tasks.scene import Scene


@dataclass(frozen=True)
class PlaceGoal:
    """``object`` must end resting on plate ``target``."""

    object: str
    target: str


@dataclass(frozen=True)
class TaskSpec:
    """The machine-checkable task of one scene.

    ``goals`` must all hold at the end (any order unless ``ordered``); ``must_stay`` objects may
    move at most ``stay_tolerance_m`` (the wrong duck, a yellow object already on a plate);
    ``roles`` names the entities the instruction talks about (``target``, ``toy_a``, ``place``…),
    which the oracle pins.
    """

    instruction: str
    task_type: str
    goals: tuple[PlaceGoal, ...]
    must_stay: tuple[str, ...] = ()
    roles: Mapping[str, str] = field(default_factory=dict)
    ordered: bool = False
    stay_tolerance_m: float = 0.05


@dataclass(frozen=True)
class GoalResult:
    """One goal judged: ``ok`` and why not."""

    goal: PlaceGoal
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class SuccessReport:
    """The verdict on a final world state."""

    success: bool
    goals: tuple[GoalResult, ...]
    violations: tuple[str, ...]

    def __str__(self) -> str:
        if self.success:
            return "success"
        problems = [f"{g.goal.object}->{g.goal.target}: {g.reason}" for g in self.goals if not g.ok]
        return "failure: " + "; ".join(problems + list(self.violations))


def on_plate(world: SimWorld, object_name: str, plate_name: str) -> tuple[bool, str]:
    """Whether ``object_name`` rests on ``plate_name``: centre over the plate, bottom at its top, not held."""
    plate = world.object(plate_name)
    low, high = world.object_aabb(object_name)
    center = (low + high) / 2
    plate_center = world.object_center(plate_name)
    distance = math.hypot(center[0] - plate_center[0], center[1] - plate_center[1])
    plate_top = plate_center[2] + plate.height_m / 2
    if plate.kind == "tray":
        plate_top = TABLE_TOP_Z
    if distance > plate.radius_m:
        return False, f"centre {distance:.3f} m from the {plate_name} centre (radius {plate.radius_m:.3f} m)"
    if low[2] > plate_top + 0.03:
        return False, f"bottom {low[2]:.3f} m is above the {plate_name} top {plate_top:.3f} m (not resting on it)"
    if world.grasped_object() == object_name:
        return False, "still held by the gripper"
    return True, ""


def check_success(scene: Scene) -> SuccessReport:
    """Judge the scene's current state against its task."""
    world, task = scene.world, scene.task
    results = []
    for goal in task.goals:
        ok, reason = on_plate(world, goal.object, goal.target)
        results.append(GoalResult(goal, ok, reason))
    violations = []
    for name in task.must_stay:
        moved = float(np.linalg.norm(world.object_center(name)[:2] - scene.initial_positions[name][:2]))
        if moved > task.stay_tolerance_m:
            violations.append(f"{name} moved {moved:.3f} m (must stay within {task.stay_tolerance_m} m)")
    goal_objects = {g.object for g in task.goals}
    for goal in task.goals:
        for obj in world.objects.values():
            if obj.graspable and obj.name not in goal_objects and obj.name not in task.must_stay:
                ok, _ = on_plate(world, obj.name, goal.target)
                was = scene.initial_positions[obj.name]
                if ok and np.linalg.norm(world.object_center(obj.name)[:2] - was[:2]) > task.stay_tolerance_m:
                    violations.append(f"{obj.name} was put on {goal.target} but is not part of the task")
    success = all(r.ok for r in results) and not violations
    return SuccessReport(success, tuple(results), tuple(dict.fromkeys(violations)))
