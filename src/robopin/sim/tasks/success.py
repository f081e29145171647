"""What a simulated task asks for, what its judged result holds, and when an object rests on a plate."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from robopin.sim.world import TABLE_TOP_Z, SimWorld


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
