"""A scripted pick-and-place driven straight from simulator ground truth, to prove scenes solvable.

No perception and no planner: object poses come from pybullet, grasps are top-down across the
object's narrower side, motions are pybullet IK plus smooth joint interpolation executed by the
simulated position controllers. If this fails on a scene, the scene is at fault, not the stack.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.transforms import make_transform
from robopin.robots.trajectory import JointTrajectory
from robopin.sim.controllers import execute_joint_trajectory, min_jerk_trajectory
from robopin.sim.world import SimWorld

logger = logging.getLogger(__name__)

APPROACH_HEIGHT_M = 0.12
"""Height above the grasp/place point from which the gripper descends vertically."""
TRANSIT_CLEARANCE_M = 0.03
"""Gap kept between a carried object's bottom and the highest other object's top while carrying it."""
MIN_GRASP_Z_M = 0.018
"""Lowest TCP height above the table: below it the fingertips would scrape the table."""


class ScriptedMotionError(RuntimeError):
    """A scripted motion that could not be executed (no IK solution, tracking failure)."""


@dataclass
class PickPlaceOutcome:
    """What one scripted pick-and-place did: whether the object was held after lifting, phases run,
    the simulated and wall time it took."""

    object_name: str
    grasped: bool
    phases: list[str] = field(default_factory=list)
    sim_time_s: float = 0.0
    wall_time_s: float = 0.0
    message: str = ""


def grasp_pose(position: NDArray[np.float64], closing_yaw_rad: float) -> NDArray[np.float64]:
    """``T_base_ee`` of a top-down grasp: ee z points down, the fingers close along ``closing_yaw_rad``."""
    closing = np.array([math.cos(closing_yaw_rad), math.sin(closing_yaw_rad), 0.0])
    z_axis = np.array([0.0, 0.0, -1.0])
    x_axis = np.cross(closing, z_axis)
    return make_transform(np.column_stack([x_axis, closing, z_axis]), position)


def closing_yaw(world: SimWorld, object_name: str) -> float:
    """World yaw along which to close the fingers: across the object's narrower horizontal side."""
    obj = world.object(object_name)
    T = world.object_pose(object_name)
    yaw = math.atan2(T[1, 0], T[0, 0])
    extent_x, extent_y = obj.local_extent_xy
    angle = yaw if extent_x <= extent_y else yaw + math.pi / 2
    # Keep the hand's yaw within ±90° so the wrist never winds a full turn.
    return (angle + math.pi / 2) % math.pi - math.pi / 2


def solve_ik(
    world: SimWorld, T_base_ee: NDArray[np.float64], q_seed: NDArray[np.float64], tolerance_m: float = 0.002
) -> tuple[NDArray[np.float64], float]:
    """Best IK solution over a few seeds (current, home, then deterministic perturbations of home),
    with its position error (m); pybullet's damped least squares stalls from some starts."""
    home = np.asarray(world.model.home_q, dtype=np.float64)
    rng = np.random.default_rng(0)
    seeds = [q_seed, home] + [
        np.clip(home + rng.normal(0.0, 0.4, home.shape), world.arm_lower, world.arm_upper) for _ in range(4)
    ]
    best, best_miss = q_seed, math.inf
    for seed in seeds:
        q = world.inverse_kinematics(T_base_ee, q_seed=seed)
        reached = world.forward_kinematics(q)
        miss = float(np.linalg.norm(reached[:3, 3] - T_base_ee[:3, 3]))
        miss += 0.05 * float(np.linalg.norm(reached[:3, :3] - T_base_ee[:3, :3]))
        if miss < best_miss:
            best, best_miss = q, miss
        if best_miss <= tolerance_m:
            break
    return best, best_miss


def move_to_pose(
    world: SimWorld, T_base_ee: NDArray[np.float64], duration_s: float, *, position_tolerance_m: float = 0.01
) -> None:
    """Move the TCP to ``T_base_ee`` along a smooth joint-space path; raise if it cannot be reached."""
    q_start = world.joint_positions()
    q_goal, miss = solve_ik(world, T_base_ee, q_start)
    if miss > position_tolerance_m:
        raise ScriptedMotionError(
            f"no IK solution within {position_tolerance_m} m of {T_base_ee[:3, 3]} (best {miss:.3f} m off)"
        )
    trajectory = min_jerk_trajectory(world.model.arm_joints, q_start, q_goal, duration_s)
    result = execute_joint_trajectory(world, trajectory, settle_s=0.15, tolerance_rad=0.05)
    if not result.success:
        raise ScriptedMotionError(f"arm did not reach {T_base_ee[:3, 3]}: {result.message}")


def move_linear(
    world: SimWorld, T_start: NDArray[np.float64], T_goal: NDArray[np.float64], duration_s: float, waypoints: int = 6
) -> None:
    """Move the TCP along a straight line (IK at ``waypoints`` points, same orientation as ``T_goal``)."""
    q = world.joint_positions()
    times = []
    path = []
    for k in range(1, waypoints + 1):
        s = k / waypoints
        T = T_goal.copy()
        T[:3, 3] = (1 - s) * T_start[:3, 3] + s * T_goal[:3, 3]
        q = world.inverse_kinematics(T, q_seed=q)
        times.append(duration_s * s)
        path.append(q)
    trajectory = JointTrajectory(world.model.arm_joints, times, path)
    result = execute_joint_trajectory(world, trajectory, settle_s=0.15, tolerance_rad=0.05)
    if not result.success:
        raise ScriptedMotionError(f"linear move to {T_goal[:3, 3]} failed: {result.message}")


def pick_and_place(
    world: SimWorld,
    object_name: str,
    place_xyz: NDArray[np.float64],
    *,
    home_q: NDArray[np.float64] | None = None,
    speed_scale: float = 1.0,
) -> PickPlaceOutcome:
    """Pick ``object_name`` from above and release it with its centre over ``place_xyz`` (base frame).

    ``place_xyz`` is the point on the support surface (e.g. a plate's top centre); the object is
    released a little above it so it drops onto it rather than being pressed into it.
    """
    wall_start = time.perf_counter()
    sim_start = world.sim_time_s
    outcome = PickPlaceOutcome(object_name, grasped=False)
    obj = world.object(object_name)
    home = np.asarray(world.model.home_q if home_q is None else home_q, dtype=np.float64)
    slow = 1.0 / max(speed_scale, 1e-3)
    yaw = closing_yaw(world, object_name)
    try:
        # A second try across the other side: a slipped grasp of a near-square object (the duck)
        # usually holds when turned a quarter.
        for attempt, closing in enumerate((yaw, (yaw + math.pi) % math.pi - math.pi / 2)):
            low, high = world.object_aabb(object_name)
            center = (low + high) / 2
            grasp_z = max(center[2], MIN_GRASP_Z_M, high[2] - 0.035)
            T_grasp = grasp_pose(np.array([center[0], center[1], grasp_z]), closing)
            T_above = T_grasp.copy()
            T_above[:3, 3] += [0.0, 0.0, APPROACH_HEIGHT_M]
            world.set_gripper(0.0)
            outcome.phases.append("approaching")
            move_to_pose(world, T_above, 1.5 * slow)
            move_linear(world, T_above, T_grasp, 1.0 * slow)
            outcome.phases.append("grasping")
            world.set_gripper(1.0)
            world.advance(0.6)
            outcome.phases.append("lifting")
            move_linear(world, T_grasp, T_above, 1.0 * slow)
            outcome.grasped = world.grasped_object() == object_name
            if outcome.grasped:
                yaw = closing
                break
            world.set_gripper(0.0)
            world.advance(0.4)
            world.settle(1.0)
            outcome.message = f"{object_name} not held after lifting on try {attempt + 1}"
        else:
            return outcome
        outcome.message = ""
        outcome.phases.append("placing")
        # Where in the hand the object ended up: aim so the object's centre, not the TCP, lands on target.
        held_offset = world.object_center(object_name)[:2] - world.ee_pose()[:2, 3]
        target_xy = np.asarray(place_xyz[:2], dtype=np.float64) - held_offset
        release_z = float(place_xyz[2]) + (grasp_z - low[2]) + 0.01
        T_place = grasp_pose(np.array([target_xy[0], target_xy[1], release_z]), yaw)
        T_place_above = T_place.copy()
        T_place_above[:3, 3] = [target_xy[0], target_xy[1], max(release_z, 0.0) + APPROACH_HEIGHT_M]
        # The joint-space transit checks no collisions: carry the object's bottom clear of every top.
        tops = [world.object_aabb(name)[1][2] for name in world.objects if name != object_name]
        transit_z = max(tops, default=0.0) + (grasp_z - low[2]) + TRANSIT_CLEARANCE_M
        if transit_z > T_above[2, 3]:
            T_lifted = T_above.copy()
            T_lifted[2, 3] = transit_z
            move_linear(world, T_above, T_lifted, 0.6 * slow)
            T_transit = T_place_above.copy()
            T_transit[2, 3] = max(transit_z, T_place_above[2, 3])
            move_to_pose(world, T_transit, 1.5 * slow)
            move_linear(world, T_transit, T_place_above, 0.6 * slow)
        else:
            move_to_pose(world, T_place_above, 1.5 * slow)
        move_linear(world, T_place_above, T_place, 1.0 * slow)
        world.set_gripper(0.0)
        world.advance(0.5)
        outcome.phases.append("retreating")
        move_linear(world, T_place, T_place_above, 0.8 * slow)
        homing = min_jerk_trajectory(world.model.arm_joints, world.joint_positions(), home, 1.5 * slow)
        execute_joint_trajectory(world, homing, settle_s=0.2, tolerance_rad=0.1)
        world.settle(1.0)
    except ScriptedMotionError as error:
        outcome.message = str(error)
    finally:
        outcome.sim_time_s = world.sim_time_s - sim_start
        outcome.wall_time_s = time.perf_counter() - wall_start
    logger.info("scripted pick-and-place of %s: %s %s", obj.name, outcome.phases, outcome.message)
    return outcome
