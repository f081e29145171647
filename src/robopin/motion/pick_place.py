"""Pick-and-place as phases (approach, grasp, lift, place, retreat), planned before anything moves.

A failure in any phase refuses the whole task with that phase's named status.
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
PLACE_NUDGE_DIRECTIONS = 8
"""Directions (evenly spread) in which a blocked place point is moved, per ring of ``place_search_step_m``."""
STANDING_ABOVE_SURFACE_M = 0.015
"""Cloud points this far above the place surface stand on it (objects); those nearer are the surface."""
ON_TABLE_M = 0.006
"""A place point this close above the table top is on the table (whose points the cloud leaves out)."""
SUPPORT_MARGIN_M = 0.02
"""A moved place point needs the surface seen this far beyond it, in the direction it moved."""


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
    # When no place pose at the place point is collision-free, points up to this far beside it on the
    # same surface with more room are tried (0: never move the place point), in rings this far apart,
    # at most place_search_points of them.
    place_search_radius_m: float = 0.02
    place_search_step_m: float = 0.01
    place_search_points: int = 3

    def __post_init__(self) -> None:
        if len(self.object_size_m) != 3 or not all(s > 0.0 for s in self.object_size_m):
            raise MotionConfigError(f"object_size_m must be three positive lengths, got {self.object_size_m}")
        if not self.target_clearance_radius_m > 0.0:
            raise MotionConfigError(f"target_clearance_radius_m must be > 0, got {self.target_clearance_radius_m}")
        if not (np.isfinite(self.place_search_radius_m) and self.place_search_radius_m >= 0.0):
            raise MotionConfigError(f"place_search_radius_m must be >= 0, got {self.place_search_radius_m}")
        if not (np.isfinite(self.place_search_step_m) and self.place_search_step_m > 0.0):
            raise MotionConfigError(f"place_search_step_m must be > 0, got {self.place_search_step_m}")
        if self.place_search_points < 0:
            raise MotionConfigError(f"place_search_points must be >= 0, got {self.place_search_points}")


@dataclass
class PickPlacePhase:
    """One planned motion; ``gripper_after_m`` is the width to command once it has run (None: none).

    ``world`` is the collision world the motion was planned and verified against (the picked object
    removed for the descent, attached to the hand while held).
    """

    stage: str
    result: PlanResult
    gripper_after_m: float | None = None
    world: CollisionWorld | None = None


@dataclass
class PickPlacePlan:
    """All phases in order, or the first failure (its status, the stage it happened in)."""

    status: PlanStatus
    phases: list[PickPlacePhase]
    planning_time_s: float
    failed_stage: str = ""
    message: str = ""
    grasp: GraspCandidate | None = None
    # The place point asked for, and the one the plan places at (moved when the first was blocked).
    requested_place: NDArray[np.float64] | None = None
    place_point: NDArray[np.float64] | None = None

    @property
    def place_offset_m(self) -> float:
        """How far (xy) the place point was moved from the requested one (0 when not, or not planned)."""
        if self.place_point is None or self.requested_place is None:
            return 0.0
        return float(np.linalg.norm(self.place_point[:2] - self.requested_place[:2]))

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


BLOCKED_PLACE_STATUSES = frozenset(
    {PlanStatus.GOAL_IN_COLLISION, PlanStatus.COLLISION_IN_RESULT, PlanStatus.NO_PATH, PlanStatus.TIMEOUT}
)
"""Place failures a place point beside the requested one can cure (not reach or limits: those stay)."""


def nearby_place_points(
    world: CollisionWorld,
    place_point: ArrayLike,
    config: PickPlaceConfig,
    support_height_m: float | None,
) -> list[NDArray[np.float64]]:
    """Points beside a blocked place point on the same surface, with more room, most room first.

    A model's "free area" point is a pixel projected through depth: a centre a centimetre or two off is
    as good an answer, and one where the hand fits may be right beside it (on a full plate every place
    pose at the point itself can touch the neighbours). Candidates lie on
    rings of ``place_search_step_m`` up to ``place_search_radius_m`` in ``PLACE_NUDGE_DIRECTIONS``
    directions. Room is the horizontal distance to the nearest cloud point standing on the surface
    (``STANDING_ABOVE_SURFACE_M`` above it); a candidate must have more of it than the requested point.
    Off the table (on a plate, a tray) a candidate needs surface points under it and ``SUPPORT_MARGIN_M``
    further in the direction it moved, so the object stays on what the cameras saw of that surface.
    Without a cloud, or with nothing standing near the point, nothing moves.
    """
    place = np.asarray(place_point, dtype=np.float64).reshape(3)
    points = world.points
    if config.place_search_radius_m <= 0.0 or config.place_search_points == 0 or points is None or not len(points):
        return []
    step = config.place_search_step_m
    reach = config.place_search_radius_m + step + 0.15  # points that can matter to any candidate's room
    local = points[np.linalg.norm(points[:, :2] - place[:2], axis=1) <= reach]
    height = local[:, 2] - place[2]
    standing = local[height > STANDING_ABOVE_SURFACE_M][:, :2]
    surface = local[np.abs(height) <= STANDING_ABOVE_SURFACE_M][:, :2]
    on_table = support_height_m is not None and place[2] - support_height_m <= ON_TABLE_M
    near = 0.75 * max(world.voxel_size_m, 0.005)  # on a voxel-sampled surface, a point this close is under

    def room(xy: NDArray[np.float64]) -> float:
        return float(np.min(np.linalg.norm(standing - xy, axis=1))) if len(standing) else np.inf

    def supported(xy: NDArray[np.float64]) -> bool:
        return on_table or (len(surface) > 0 and float(np.min(np.linalg.norm(surface - xy, axis=1))) <= near)

    here = room(place[:2])
    if not np.isfinite(here):
        return []  # nothing stands near the point: moving it cannot make room
    ranked = []
    rings = np.arange(step, config.place_search_radius_m + 1e-9, step)
    for radius in rings:
        for angle in np.arange(PLACE_NUDGE_DIRECTIONS) * (2.0 * np.pi / PLACE_NUDGE_DIRECTIONS):
            direction = np.array([np.cos(angle), np.sin(angle)])
            xy = place[:2] + radius * direction
            gain = room(xy) - here
            if gain <= 1e-3 or not (supported(xy) and supported(xy + SUPPORT_MARGIN_M * direction)):
                continue
            ranked.append((-gain, float(radius), np.array([xy[0], xy[1], place[2]])))
    ranked.sort(key=lambda item: item[:2])
    return [point for _, _, point in ranked[: config.place_search_points]]


@dataclass
class _Request:
    """What every phase of one pick-and-place shares."""

    planner: MotionPlanner
    config: PickPlaceConfig
    pick: NDArray[np.float64]
    place: NDArray[np.float64]
    support: float | None
    velocity_scale: float | None

    def to_pose(self, world: CollisionWorld, q: NDArray[np.float64], T: NDArray[np.float64]) -> PlanResult:
        self.planner.update_world(world)
        return self.planner.plan_to_pose(q, T, velocity_scale=self.velocity_scale)

    def linear(self, world: CollisionWorld, q: NDArray[np.float64], T: NDArray[np.float64]) -> PlanResult:
        self.planner.update_world(world)
        return self.planner.plan_linear(q, T, velocity_scale=self.velocity_scale)


@dataclass
class _Failure:
    """The stage that failed and the last planner result that failed in it."""

    stage: str
    result: PlanResult


@dataclass
class _Held:
    """The picked object as the hand carries it: the world with it attached, its height and top point."""

    world: CollisionWorld
    height_m: float
    top: NDArray[np.float64]


@dataclass
class _Placement:
    transport: PlanResult
    lower: PlanResult
    retreat: PlanResult
    released: CollisionWorld
    point: NDArray[np.float64]


def _no_candidate(stage: str) -> _Failure:
    return _Failure(stage, PlanResult(PlanStatus.IK_FAIL, 0.0))


def _hand_blocked(
    request: _Request, world: CollisionWorld, q_seed: NDArray[np.float64], T_base_tcp: NDArray[np.float64]
) -> bool:
    """True when the gripper (and what it holds) at TCP pose ``T_base_tcp`` touches ``world`` at the dense
    check's margin.

    A cheap look-ahead (one IK from the seed or home, one collision check) before an expensive phase;
    the hand's place depends on the TCP pose alone. A pose without IK here is not judged (False).
    """
    planner = request.planner
    planner.update_world(world)
    q = planner.robot.inverse_kinematics(T_base_tcp, q_seed, restarts=0, collision_free=False)
    if q is None:
        return False
    return bool(planner.robot.hand_world_contacts(q, margin_m=planner.config.verify_margin_m))


def _plan_grasp(
    request: _Request, q: NDArray[np.float64], grasps: list[GraspCandidate], world: CollisionWorld,
    target_free: CollisionWorld,
) -> tuple[GraspCandidate, PlanResult, PlanResult] | _Failure:
    """Approach (free-space, full world) and descent (object removed) of the first grasp where both plan.

    A grasp whose hand touches the world at the bottom of the descent is tried last: its descent would
    end in contact, and the dense check would reject it after an approach had been searched for nothing.
    """
    failure = _no_candidate("approaching")
    clear = [g for g in grasps if not _hand_blocked(request, target_free, q, g.T_base_grasp)]
    blocked = [g for g in grasps if all(g is not c for c in clear)]
    for grasp in clear + blocked:
        approach = request.to_pose(world, q, grasp.T_base_pre_grasp)
        if not approach.success:
            failure = _Failure("approaching", approach)
            continue
        descent = request.linear(target_free, approach.trajectory.positions[-1], grasp.T_base_grasp)
        if not descent.success:
            failure = _Failure("grasping", descent)
            retried = _approach_on_the_grasps_branch(request, q, grasp, world, target_free)
            if retried is None:
                continue
            approach, descent = retried
        return grasp, approach, descent
    return failure


def _approach_on_the_grasps_branch(
    request: _Request, q: NDArray[np.float64], grasp: GraspCandidate, world: CollisionWorld,
    target_free: CollisionWorld,
) -> tuple[PlanResult, PlanResult] | None:
    """Approach and descent through a pre-grasp configuration chosen from the grasp's end, or None.

    The approach's IK is seeded from where the arm is. After a place far to one side the arm can rest
    twisted (the Panda with joint 1 near 2.6 rad and joint 3 near -2.2 rad): the pre-grasp solution
    closest to that is on a branch from which the straight descent runs into a joint limit part way
    down, although the grasp is reachable. Here the grasp's IK is seeded from the home configuration,
    the pre-grasp's from the grasp's, and the approach plans to that configuration.
    """
    planner = request.planner
    robot = planner.robot
    q_grasp = robot.inverse_kinematics(grasp.T_base_grasp, robot.home, collision_free=False)
    if q_grasp is None:
        return None
    planner.update_world(world)
    q_pre = robot.inverse_kinematics(grasp.T_base_pre_grasp, q_grasp, restarts=0)
    if q_pre is None:
        return None
    approach = planner.plan_to_joints(q, q_pre, velocity_scale=request.velocity_scale)
    if not approach.success:
        return None
    descent = request.linear(target_free, approach.trajectory.positions[-1], grasp.T_base_grasp)
    return (approach, descent) if descent.success else None


def _held_object(request: _Request, grasp: GraspCandidate, target_free: CollisionWorld) -> _Held:
    """The world with the picked object attached to the hand: it now collides with the world like the arm.

    The held box spans from the object's top (the pick point, or the TCP if the grasp had to stay
    higher) down by the object height, but never into the table it was standing on.
    """
    config, pick = request.config, request.pick
    grasp_z = float(grasp.T_base_grasp[2, 3])
    top = max(float(pick[2]), grasp_z)
    bottom = top - config.object_size_m[2]
    if request.support is not None:
        bottom = max(bottom, request.support + HELD_OBJECT_TABLE_GAP_M)
    height = max(top - bottom, HELD_OBJECT_TABLE_GAP_M)
    T_ee_object = np.eye(4)
    T_ee_object[2, 3] = grasp_z - (top - height / 2.0)  # TCP z points down, into the object
    holding = target_free.copy()
    holding.attach("held_object", (config.object_size_m[0], config.object_size_m[1], height), T_ee_object)
    return _Held(holding, height, np.array([pick[0], pick[1], top]))


def _plan_lift(request: _Request, held: _Held, grasp: GraspCandidate, q: NDArray[np.float64]) -> PlanResult:
    """Straight up as high as the arm goes, down to the lowest of ``LIFT_FRACTIONS`` of the lift height.

    Near the edge of the workspace the last centimetres of a full lift can have no IK solution near
    the previous one, while the transport from a lower lift still clears the world.
    """
    rise = grasp.T_base_lift[2, 3] - grasp.T_base_grasp[2, 3]
    for fraction in LIFT_FRACTIONS:
        T_lift = grasp.T_base_lift.copy()
        T_lift[2, 3] = grasp.T_base_grasp[2, 3] + fraction * rise
        lift = request.linear(held.world, q, T_lift)
        if lift.success:
            break
    return lift


def _plan_place_at(
    request: _Request, held: _Held, grasp: GraspCandidate, q: NDArray[np.float64], point: NDArray[np.float64]
) -> _Placement | _Failure:
    """Transport to the first place pose at ``point`` whose pre-place, straight descent and straight retreat all
    plan.

    A place pose where the hand or the object it holds touches the world is tried last, as a blocked grasp
    is: its descent would end in contact and be rejected after a transport had been searched for it. The
    retreat belongs to the pose: from some place configurations of a 7-joint arm a straight rise drifts toward
    a singular posture (joints 1, 3 and 5 swinging several tenths of a radian a centimetre), where another
    hand yaw at the same point rises cleanly.
    """
    failure = _no_candidate("placing")
    candidates = place_candidates(point, grasp, held.top, request.config.grasp, object_height_m=held.height_m)
    clear = [c for c in candidates if not _hand_blocked(request, held.world, q, c.T_base_place)]
    blocked = [c for c in candidates if all(c is not free for free in clear)]
    # Retreat without the object (it stays on the surface, now an obstacle we do not model).
    released = held.world.copy()
    released.detach()
    for candidate in clear + blocked:
        moved = request.to_pose(held.world, q, candidate.T_base_pre_place)
        if not moved.success:
            failure = _Failure("placing", moved)
            continue
        lowered = request.linear(held.world, moved.trajectory.positions[-1], candidate.T_base_place)
        if not lowered.success:
            failure = _Failure("placing", lowered)
            continue
        retreat = request.linear(released, lowered.trajectory.positions[-1], candidate.T_base_retreat)
        if not retreat.success:
            failure = _Failure("retreating", retreat)
            continue
        return _Placement(moved, lowered, retreat, released, point)
    return failure


def _plan_place(
    request: _Request, held: _Held, grasp: GraspCandidate, q: NDArray[np.float64]
) -> _Placement | _Failure:
    """Place at the requested point, or (blocked there) at a point beside it with more room."""
    placed = _plan_place_at(request, held, grasp, q, request.place)
    if isinstance(placed, _Placement):
        return placed
    config = request.config
    blocked = placed.result.status in BLOCKED_PLACE_STATUSES
    beside = nearby_place_points(held.world, request.place, config, request.support) if blocked else []
    for point in beside:
        moved = _plan_place_at(request, held, grasp, q, point)
        if isinstance(moved, _Placement):
            return moved
    if beside:  # reported as the failure where asked, with how far beside it was tried
        result = placed.result
        message = (f"{result.message} (and at {len(beside)} point(s) up to "
                   f"{config.place_search_radius_m * 1e3:.0f} mm beside it)").strip()
        placed = _Failure(placed.stage, PlanResult(result.status, result.planning_time_s, message=message))
    return placed


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
    """Plan every phase of picking at ``pick_point`` and placing on the surface at ``place_point``.

    Each phase is planned and densely verified against the world it runs in (``PickPlacePhase.world``);
    the planner's world is the caller's again when this returns.
    """
    config = config or PickPlaceConfig()
    started = time.perf_counter()
    world = planner.world
    request = _Request(
        planner,
        config,
        np.asarray(pick_point, dtype=np.float64).reshape(3),
        np.asarray(place_point, dtype=np.float64).reshape(3),
        support_height(world, config.table_height_m),
        velocity_scale,
    )
    phases: list[PickPlacePhase] = []
    chosen: GraspCandidate | None = None

    def finish(outcome: _Failure | None, placed_at: NDArray[np.float64] | None = None) -> PickPlacePlan:
        planner.update_world(world)
        elapsed = time.perf_counter() - started
        if outcome is not None:
            message = f"{outcome.stage}: {outcome.result.status.value} {outcome.result.message}".strip()
            return PickPlacePlan(outcome.result.status, phases, elapsed, outcome.stage, message, chosen,
                                 requested_place=request.place)
        return PickPlacePlan(PlanStatus.SUCCESS, phases, elapsed, grasp=chosen, requested_place=request.place,
                             place_point=placed_at)

    grasps = grasp_candidates(request.pick, config.grasp, yaw_rad=yaw_rad, object_points=object_points,
                              surface_normal=pick_normal, support_height_m=request.support)
    target_free = world_without_target(world, request.pick, config.target_clearance_radius_m, config.object_size_m[2])
    grasped = _plan_grasp(request, np.asarray(q_start, dtype=np.float64), grasps, world, target_free)
    if isinstance(grasped, _Failure):
        return finish(grasped)
    chosen, approach, descent = grasped
    phases.append(PickPlacePhase("approaching", approach, config.gripper_open_width_m, world))
    phases.append(PickPlacePhase("grasping", descent, config.gripper_closed_width_m, target_free))

    held = _held_object(request, chosen, target_free)
    lift = _plan_lift(request, held, chosen, descent.trajectory.positions[-1])
    if not lift.success:
        return finish(_Failure("lifting", lift))
    phases.append(PickPlacePhase("lifting", lift, world=held.world))

    placed = _plan_place(request, held, chosen, lift.trajectory.positions[-1])
    if isinstance(placed, _Failure):
        return finish(placed)
    phases.append(PickPlacePhase("placing", placed.transport, world=held.world))
    phases.append(PickPlacePhase("placing", placed.lower, config.gripper_open_width_m, held.world))

    phases.append(PickPlacePhase("retreating", placed.retreat, world=placed.released))
    plan = finish(None, placed.point)
    if plan.place_offset_m > 0.0:
        plan.message = (
            f"place point moved {plan.place_offset_m * 1e3:.0f} mm to {np.round(placed.point, 3).tolist()}: "
            f"no place pose at the requested point was collision-free"
        )
    return plan
