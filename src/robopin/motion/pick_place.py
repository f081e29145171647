"""Pick-and-place as a sequence of planned phases: approach, grasp, lift, place, retreat.

Every phase is planned (and verified) before anything moves, so a dry run returns the full plan and
a failure in any phase refuses the whole task with that phase's named status. The picked object is
removed from the collision world around the pick point (the fingers must reach it) and attached to
the hand from the grasp on, so the transport keeps it clear of everything else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.motion.errors import MotionConfigError
from robopin.motion.grasps import GraspCandidate, GraspConfig, grasp_candidates, place_candidates
from robopin.motion.planner import MotionPlanner
from robopin.motion.types import PlanResult, PlanStatus
from robopin.motion.world import TABLE_BOX_NAME, CollisionWorld

STAGES = ("approaching", "grasping", "lifting", "placing", "retreating")
LIFT_FRACTIONS = (1.0, 0.6, 0.35)
"""Lift heights tried, as fractions of ``GraspConfig.lift_height_m``, highest first."""
HELD_OBJECT_TABLE_GAP_M = 0.003
"""Gap kept between the held-object box and the table it was picked from (so lifting starts clear)."""


@dataclass
class PickPlaceConfig:
    """Object and world handling of a pick-and-place (metres)."""

    grasp: GraspConfig = field(default_factory=GraspConfig)
    object_size_m: tuple[float, float, float] = (0.05, 0.05, 0.05)  # default held-object box (x, y, height)
    target_clearance_radius_m: float = 0.06  # cloud points/boxes this close (xy) to the pick point are the object
    gripper_open_width_m: float = 0.08
    gripper_closed_width_m: float = 0.0
    # Support surface under picked objects (base z); None: the top of the world's "table" box, if any.
    table_height_m: float | None = None

    def __post_init__(self) -> None:
        if len(self.object_size_m) != 3 or not all(s > 0.0 for s in self.object_size_m):
            raise MotionConfigError(f"object_size_m must be three positive lengths, got {self.object_size_m}")
        if not self.target_clearance_radius_m > 0.0:
            raise MotionConfigError(f"target_clearance_radius_m must be > 0, got {self.target_clearance_radius_m}")


@dataclass
class PickPlacePhase:
    """One planned motion; ``gripper_after_m`` is the width to command once it has run (None: none)."""

    stage: str
    result: PlanResult
    gripper_after_m: float | None = None


@dataclass
class PickPlacePlan:
    """All phases in order, or the first failure (its status, the stage it happened in)."""

    status: PlanStatus
    phases: list[PickPlacePhase]
    planning_time_s: float
    failed_stage: str = ""
    message: str = ""
    grasp: GraspCandidate | None = None

    @property
    def success(self) -> bool:
        """True when every phase planned and verified."""
        return self.status is PlanStatus.SUCCESS


def support_height(world: CollisionWorld, table_height_m: float | None) -> float | None:
    """The table top under picked objects: ``table_height_m``, else the top face of the world's table box."""
    if table_height_m is not None:
        return float(table_height_m)
    table = world.boxes.get(TABLE_BOX_NAME)
    if table is None:
        return None
    return float(table.T_base_box[2, 3] + table.size_m[2] / 2.0)


def world_without_target(
    world: CollisionWorld, pick_point: NDArray[np.float64], radius_m: float, object_height_m: float
) -> CollisionWorld:
    """A copy of ``world`` without the picked object.

    Removed: boxes centred within ``radius_m`` (xy) of the pick point and below it, and cloud points in
    that column above the object's bottom (pick height − object height + one voxel), so the support
    surface under the object stays an obstacle.
    """
    result = world.copy()
    for name, box in list(result.boxes.items()):
        if np.linalg.norm(box.T_base_box[:2, 3] - pick_point[:2]) <= radius_m and box.T_base_box[2, 3] <= pick_point[2]:
            result.remove(name)
    if result.points is not None and len(result.points):
        horizontal = np.linalg.norm(result.points[:, :2] - pick_point[:2], axis=1)
        bottom = pick_point[2] - object_height_m + result.voxel_size_m
        column = (horizontal <= radius_m) & (result.points[:, 2] > bottom)
        if np.any(column):
            result.set_point_cloud(result.points[~column])
    return result


def plan_pick_place(
    planner: MotionPlanner,
    q_start: ArrayLike,
    pick_point: ArrayLike,
    place_point: ArrayLike,
    config: PickPlaceConfig | None = None,
    *,
    yaw_rad: float | None = None,
    object_points: ArrayLike | None = None,
    pick_normal: ArrayLike | None = None,
    velocity_scale: float | None = None,
) -> PickPlacePlan:
    """Plan every phase of picking at ``pick_point`` and placing on the surface at ``place_point``."""
    config = config or PickPlaceConfig()
    started = time.perf_counter()
    pick = np.asarray(pick_point, dtype=np.float64).reshape(3)
    place = np.asarray(place_point, dtype=np.float64).reshape(3)
    original_world = planner.world
    phases: list[PickPlacePhase] = []

    def fail(stage: str, result: PlanResult, grasp=None) -> PickPlacePlan:
        planner.update_world(original_world)
        return PickPlacePlan(
            result.status,
            phases,
            time.perf_counter() - started,
            stage,
            f"{stage}: {result.status.value} {result.message}".strip(),
            grasp,
        )

    support = support_height(original_world, config.table_height_m)
    grasps = grasp_candidates(
        pick,
        config.grasp,
        yaw_rad=yaw_rad,
        object_points=object_points,
        surface_normal=pick_normal,
        support_height_m=support,
    )
    q = np.asarray(q_start, dtype=np.float64)
    # Approach: free-space move to the first reachable pre-grasp whose descent also works.
    approach_world = original_world
    target_free = world_without_target(original_world, pick, config.target_clearance_radius_m, config.object_size_m[2])
    chosen: GraspCandidate | None = None
    approach: PlanResult | None = None
    descent: PlanResult | None = None
    last_failure: tuple[str, PlanResult] | None = None
    for grasp in grasps:
        planner.update_world(approach_world)
        approach = planner.plan_to_pose(q, grasp.T_base_pre_grasp, velocity_scale=velocity_scale)
        if not approach.success:
            last_failure = ("approaching", approach)
            continue
        planner.update_world(target_free)
        descent = planner.plan_linear(
            approach.trajectory.positions[-1], grasp.T_base_grasp, velocity_scale=velocity_scale
        )
        if not descent.success:
            last_failure = ("grasping", descent)
            continue
        chosen = grasp
        break
    if chosen is None or approach is None or descent is None:
        stage, result = last_failure if last_failure else ("approaching", PlanResult(PlanStatus.IK_FAIL, 0.0))
        return fail(stage, result)
    phases.append(PickPlacePhase("approaching", approach, config.gripper_open_width_m))
    phases.append(PickPlacePhase("grasping", descent, config.gripper_closed_width_m))

    # Lift with the object attached to the hand: it now collides with the world like the arm does.
    # The held box spans from the object's top (the pick point, or the TCP if the grasp had to stay
    # higher) down by the object height, but never into the table it was standing on.
    grasp_z = float(chosen.T_base_grasp[2, 3])
    top = max(float(pick[2]), grasp_z)
    bottom = top - config.object_size_m[2]
    if support is not None:
        bottom = max(bottom, support + HELD_OBJECT_TABLE_GAP_M)
    height = max(top - bottom, HELD_OBJECT_TABLE_GAP_M)
    size = (config.object_size_m[0], config.object_size_m[1], height)
    T_ee_object = np.eye(4)
    T_ee_object[2, 3] = grasp_z - (top - height / 2.0)  # TCP z points down, into the object
    holding = target_free.copy()
    holding.attach("held_object", size, T_ee_object)
    planner.update_world(holding)
    # Lift as high as the arm goes straight up, down to a third of lift_height_m: near the edge of the
    # workspace the last centimetres of a full lift can have no IK solution near the previous one
    # (Panda long-horizon seed 14), while the transport from a lower lift still clears the world.
    for fraction in LIFT_FRACTIONS:
        T_lift = chosen.T_base_lift.copy()
        T_lift[2, 3] = chosen.T_base_grasp[2, 3] + fraction * (chosen.T_base_lift[2, 3] - chosen.T_base_grasp[2, 3])
        lift = planner.plan_linear(descent.trajectory.positions[-1], T_lift, velocity_scale=velocity_scale)
        if lift.success:
            break
    if not lift.success:
        return fail("lifting", lift, chosen)
    phases.append(PickPlacePhase("lifting", lift))

    place_world = holding
    transport: PlanResult | None = None
    lower: PlanResult | None = None
    held_top = np.array([pick[0], pick[1], top])
    for candidate in place_candidates(place, chosen, held_top, config.grasp, object_height_m=height):
        transport = planner.plan_to_pose(
            lift.trajectory.positions[-1], candidate.T_base_pre_place, velocity_scale=velocity_scale
        )
        if not transport.success:
            last_failure = ("placing", transport)
            continue
        lower = planner.plan_linear(
            transport.trajectory.positions[-1], candidate.T_base_place, velocity_scale=velocity_scale
        )
        if not lower.success:
            last_failure = ("placing", lower)
            continue
        retreat_pose = candidate.T_base_retreat
        break
    else:
        stage, result = last_failure if last_failure else ("placing", PlanResult(PlanStatus.IK_FAIL, 0.0))
        return fail(stage, result, chosen)
    phases.append(PickPlacePhase("placing", transport))
    phases.append(PickPlacePhase("placing", lower, config.gripper_open_width_m))

    # Retreat without the object (it stays on the surface, now an obstacle we do not model).
    released = place_world.copy()
    released.detach()
    planner.update_world(released)
    retreat = planner.plan_linear(lower.trajectory.positions[-1], retreat_pose, velocity_scale=velocity_scale)
    planner.update_world(original_world)
    if not retreat.success:
        return fail("retreating", retreat, chosen)
    phases.append(PickPlacePhase("retreating", retreat))
    return PickPlacePlan(PlanStatus.SUCCESS, phases, time.perf_counter() - started, grasp=chosen)
