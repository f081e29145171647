"""One pick-and-place task: check the targets, plan every phase against the scene, run them on an arm.

The motion planner node adapts it to ROS (its PickPlace action, FollowJointTrajectory and GripperCommand
goals); :class:`DirectArm` adapts it to an arm backend called directly (tests). Neither holds any of the steps
below.
Shape after cuRobo's split of a config built once (``MotionGenConfig``, here :class:`PickPlaceSettings`)
from per-call options (``MotionGenPlanConfig``, here :class:`PickPlaceRequest`); the outcome carries its
status and stage times as cuRobo's ``MotionGenResult`` does.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.motion.errors import MotionGoalError
from robopin.motion.grasps import GraspConfig
from robopin.motion.pick_place import PickPlaceConfig, PickPlacePlan, plan_pick_place
from robopin.motion.planner import MotionPlanner
from robopin.motion.scene import SceneKeeper, StaleWorldError
from robopin.motion.types import JointTrajectory
from robopin.settings import setting


@dataclasses.dataclass
class PickPlaceSettings:
    """A cell's pick-and-place options, set once (the motion planner node's parameters of the same names)."""

    grasp: GraspConfig = dataclasses.field(default_factory=GraspConfig)
    gripper_open_m: float = setting(0.08, "gripper opening width for approach and release, metres", min=0.0)
    gripper_max_effort_n: float = setting(20.0, "gripper grasp force, newtons", min=0.0)
    min_held_width_m: float = setting(0.003, "finger width below this after closing means nothing is held, metres",
                                      min=0.0)
    object_footprint_m: float = setting(0.05, "object width and depth assumed for place collision checks, metres",
                                        min=0.0)
    place_search_radius_m: float = setting(0.02, "a blocked place point may move this far on its surface, metres "
                                                 "(0: never)", min=0.0)


@dataclasses.dataclass
class PickPlaceRequest:
    """One pick-and-place: the points in the base frame and the per-call options."""

    pick: NDArray[np.float64]
    place: NDArray[np.float64]
    pick_normal: NDArray[np.float64] | None = None  # the picked surface's normal, when the cloud gave one
    yaw_rad: float | None = None  # grasp yaw about the base z; None: the planner chooses
    approach_distance_m: float = 0.0  # > 0: overrides pre-grasp and pre-place distances
    velocity_scale: float | None = None
    dry_run: bool = False


class GripperReading(Protocol):
    width_m: float
    stalled: bool
    reached_goal: bool


class PickPlaceArm(Protocol):
    """What the task needs of an arm: run a trajectory, move the fingers. Failures raise MotionGoalError."""

    def run_trajectory(self, trajectory: JointTrajectory, stage: str) -> None: ...

    def move_gripper(self, width_m: float, max_effort_n: float) -> GripperReading: ...


@dataclasses.dataclass
class PickPlaceOutcome:
    """How a pick-and-place ended: ``status`` ``success`` or the failure's name; the plan when one was made."""

    success: bool
    status: str
    message: str
    plan: PickPlacePlan | None = None
    executed: bool = False  # the arm moved
    stages_s: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def planning_time_s(self) -> float:
        return self.plan.planning_time_s if self.plan is not None else 0.0


class PickPlaceTask:
    """Checks, plans and runs pick-and-places for one arm against one scene (not thread-safe: one at a time)."""

    def __init__(self, planner: MotionPlanner, scene: SceneKeeper, settings: PickPlaceSettings | None = None,
                 *, clock: Callable[[], float] = time.monotonic) -> None:
        self.planner, self.scene = planner, scene
        self.settings = settings or PickPlaceSettings()
        self.clock = clock  # the scene's stamps' clock (the node's ROS clock)
        self.lock = threading.Lock()  # planners are not thread-safe; other users of the planner take it too

    def check(self, request: PickPlaceRequest) -> None:
        """Refuse targets outside the workspace (raise MotionGoalError ``outside_workspace``)."""
        for name, point in (("pick", request.pick), ("place", request.place)):
            if not self.scene.inside_workspace(point):
                raise MotionGoalError("outside_workspace",
                                       f"{name} point {np.round(point, 3).tolist()} is outside the workspace")

    def world(self):
        """The scene's collision world now; a stale one refuses with ``stale_world``."""
        try:
            return self.scene.world(self.clock())
        except StaleWorldError as error:
            raise MotionGoalError("stale_world", str(error)) from None

    def plan(self, q_start: ArrayLike, request: PickPlaceRequest) -> PickPlaceOutcome:
        """Plan every phase; the outcome holds the plan and the world, collision model and plan stage times."""
        self.check(request)
        settings = self.settings
        grasp = dataclasses.replace(settings.grasp)
        if request.approach_distance_m > 0.0:
            grasp.pre_grasp_distance_m = grasp.pre_place_distance_m = float(request.approach_distance_m)
        table = self.scene.config.table_height_m
        # The object reaches from the table up to the picked point (a point on its top).
        height = max(float(request.pick[2] - table), 0.01) if table is not None else 0.05
        config = PickPlaceConfig(grasp=grasp, object_size_m=(settings.object_footprint_m,
                                                             settings.object_footprint_m, height),
                                 gripper_open_width_m=settings.gripper_open_m,
                                 place_search_radius_m=settings.place_search_radius_m)
        q_start = np.asarray(q_start, dtype=np.float64)
        with self.lock:
            started = time.perf_counter()
            world = self.world()
            object_points = None
            if world.points is not None and len(world.points):
                distance = np.linalg.norm(world.points[:, :2] - request.pick[:2], axis=1)
                near = distance <= config.target_clearance_radius_m
                object_points = world.points[near] if near.sum() >= 3 else None
            world_done = time.perf_counter()
            self.planner.update_world(world)
            model_done = time.perf_counter()
            plan = plan_pick_place(self.planner, q_start, request.pick, request.place, config,
                                   yaw_rad=request.yaw_rad, object_points=object_points,
                                   pick_normal=_unit_or_none(request.pick_normal),
                                   velocity_scale=request.velocity_scale)
            stages = {"world": world_done - started, "collision_model": model_done - world_done,
                      "plan": plan.planning_time_s}
            if not plan.success:
                return PickPlaceOutcome(False, plan.status.value, plan.message, plan, stages_s=stages)
            return PickPlaceOutcome(True, "success", "planned (dry run)" if request.dry_run else "planned", plan,
                                    stages_s=stages)

    def run(self, plan: PickPlacePlan, arm: PickPlaceArm, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Run the planned phases with the gripper between them; raise MotionGoalError on the first failure.

        ``should_stop()`` is asked before each phase (a cancel during a phase is the arm adapter's to end).
        A gripper that closed without stalling to below ``min_held_width_m`` holds nothing: ``grasp_missed``.
        Closing grasps with ``gripper_max_effort_n``; opening is a plain move (no effort: franka::Gripper::move,
        not grasp). Fingers that did not reach the release width still hold the object, and the retreat would
        carry it off: ``release_failed``, the arm left where it released.
        """
        settings = self.settings
        for index, phase in enumerate(plan.phases):
            if should_stop():
                raise MotionGoalError("canceled", f"stopped before {phase.stage}", executed=index > 0)
            arm.run_trajectory(phase.result.trajectory, phase.stage)
            if phase.gripper_after_m is None:
                continue
            closing = phase.gripper_after_m < settings.gripper_open_m / 2
            gripper = arm.move_gripper(phase.gripper_after_m, settings.gripper_max_effort_n if closing else 0.0)
            if closing and not gripper.stalled and gripper.width_m < settings.min_held_width_m:
                raise MotionGoalError("grasp_missed", f"gripper closed to {gripper.width_m * 1e3:.1f} mm: "
                                       "nothing held", executed=True)
            if not closing and not gripper.reached_goal:
                raise MotionGoalError("release_failed", f"after {phase.stage} the gripper opened to "
                                       f"{gripper.width_m * 1e3:.1f} mm of {phase.gripper_after_m * 1e3:.1f} mm: "
                                       "something still holds the fingers", executed=True)

    def pick_place(self, q_start: ArrayLike, request: PickPlaceRequest, arm: PickPlaceArm,
                   should_stop: Callable[[], bool] = lambda: False) -> PickPlaceOutcome:
        """Plan, then (unless a dry run) run: the whole task as one call, every failure as an outcome."""
        try:
            outcome = self.plan(q_start, request)
        except MotionGoalError as failure:
            return PickPlaceOutcome(False, failure.status, str(failure))
        if not outcome.success or request.dry_run:
            return outcome
        try:
            self.run(outcome.plan, arm, should_stop)
        except MotionGoalError as failure:
            return dataclasses.replace(outcome, success=False, status=failure.status, message=str(failure),
                                       executed=failure.executed)
        message = "picked and placed" + (f"; {outcome.plan.message}" if outcome.plan.place_offset_m > 0.0 else "")
        return dataclasses.replace(outcome, message=message, executed=True)


class DirectArm:
    """The task's arm for an arm object of this process (``robopin.robots``: the sim arm, an SDK-backed arm).

    ``on_stage(stage)`` is told each phase as it starts. The arm's safety-layer refusal (an exception with a
    ``reason``) ends the task with that reason's name, as its ROS driver names it.
    """

    def __init__(self, arm: Any, on_stage: Callable[[str], None] | None = None) -> None:
        self.arm, self.on_stage = arm, on_stage

    def run_trajectory(self, trajectory: JointTrajectory, stage: str) -> None:
        if self.on_stage is not None:
            self.on_stage(stage)
        try:
            result = self.arm.execute(trajectory)
        except Exception as error:
            reason = getattr(getattr(error, "reason", None), "value", "") or type(error).__name__
            raise MotionGoalError(str(reason), f"{stage}: {error}") from error
        if not result.success:
            raise MotionGoalError("execution_failed", f"{stage}: {result.message}", executed=True)

    def move_gripper(self, width_m: float, max_effort_n: float) -> GripperReading:
        return self.arm.gripper_move(width_m, max_effort_n)


def _unit_or_none(normal: ArrayLike | None) -> NDArray[np.float64] | None:
    """The normal scaled to length 1; None when missing, not finite or zero (then the planner picks grasps)."""
    if normal is None:
        return None
    vector = np.asarray(normal, dtype=np.float64).reshape(3)
    length = float(np.linalg.norm(vector))
    return vector / length if math.isfinite(length) and length > 1e-9 else None
