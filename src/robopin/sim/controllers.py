"""Joint trajectory execution in the simulator: a follower that feeds the arm's position controllers.

A :class:`~robopin.robots.trajectory.JointTrajectory` is sampled at every physics step and sent as
position + velocity targets, which is what a ``JointTrajectoryController`` does on the real arm. The
simulator's motors then track it under their force limits, so collisions and tracking error are real,
not teleported.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from robopin.robots.errors import Reason, TrajectoryError
from robopin.robots.state import ExecutionResult
from robopin.robots.trajectory import JointTrajectory
from robopin.sim.world import SimWorld


def check_trajectory(world: SimWorld, trajectory: JointTrajectory) -> JointTrajectory:
    """``trajectory`` in the world's arm joint order, inside its joint limits; else :class:`TrajectoryError`."""
    trajectory = trajectory.reordered(world.model.arm_joints)
    q = trajectory.positions
    below = q < world.arm_lower - 1e-6
    above = q > world.arm_upper + 1e-6
    if below.any() or above.any():
        point, joint = np.argwhere(below | above)[0]
        raise TrajectoryError(
            f"point {point} joint {world.model.arm_joints[joint]} = {q[point, joint]:.4f} rad is outside "
            f"[{world.arm_lower[joint]:.4f}, {world.arm_upper[joint]:.4f}]"
        )
    return trajectory


class JointTrajectoryFollower:
    """Samples a trajectory against simulated time and commands the arm each physics step."""

    def __init__(self, world: SimWorld, trajectory: JointTrajectory) -> None:
        trajectory = check_trajectory(world, trajectory)
        self.world = world
        if trajectory.times_s[0] > 0:
            trajectory = trajectory.with_start(world.joint_positions())
        self.trajectory = trajectory
        self.start_time_s: float | None = None
        self.done = threading.Event()
        self.cancelled = False

    @property
    def duration_s(self) -> float:
        return self.trajectory.duration_s

    @property
    def final_positions(self) -> NDArray[np.float64]:
        return self.trajectory.positions[-1]

    def target(self, elapsed_s: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Position and velocity targets ``elapsed_s`` after the start (at rest on the last point from its time)."""
        q, qd = self.trajectory.sample(min(max(elapsed_s, 0.0), self.duration_s))
        if elapsed_s >= self.duration_s:
            return q, np.zeros_like(q)
        return q, qd

    def __call__(self, sim_time_s: float) -> None:
        if self.start_time_s is None:
            self.start_time_s = sim_time_s
        if self.cancelled:
            return
        elapsed = sim_time_s - self.start_time_s
        q, qd = self.target(elapsed)
        self.world.set_arm_targets(q, qd)
        if elapsed >= self.duration_s:
            self.done.set()


def execute_joint_trajectory(
    world: SimWorld,
    trajectory: JointTrajectory,
    *,
    settle_s: float = 0.3,
    tolerance_rad: float = 0.02,
    timeout_s: float | None = 60.0,
    cancel: threading.Event | None = None,
) -> ExecutionResult:
    """Execute a joint trajectory and block until it ends (stepping the world unless its thread runs).

    Returns the arm layer's :class:`~robopin.robots.state.ExecutionResult` (``final_error_rad``: the largest
    joint error from the last point, ``duration_s``: simulated seconds); ``success`` is False when cancelled
    or when that error exceeds ``tolerance_rad`` after ``settle_s`` of holding the last point.
    """
    follower = JointTrajectoryFollower(world, trajectory)
    start = world.sim_time_s
    world.add_step_callback(follower)
    try:
        step_s = 0.05
        while not follower.done.is_set():
            if cancel is not None and cancel.is_set():
                follower.cancelled = True
                world.set_arm_targets(world.joint_positions())
                return ExecutionResult(False, Reason.CANCELED, "cancelled", _error(world, follower),
                                       world.sim_time_s - start)
            world.advance(step_s, timeout_s=timeout_s)
            if world.sim_time_s - start > follower.duration_s + 5.0:
                break
        world.advance(settle_s, timeout_s=timeout_s)
    finally:
        world.remove_step_callback(follower)
    error = _error(world, follower)
    if error <= tolerance_rad:
        return ExecutionResult(True, Reason.COMPLETED, "", error, world.sim_time_s - start)
    return ExecutionResult(False, Reason.GOAL_TOLERANCE, f"final tracking error {error:.4f} rad > {tolerance_rad} rad",
                           error, world.sim_time_s - start)


def _error(world: SimWorld, follower: JointTrajectoryFollower) -> float:
    """The largest joint error (rad) from the trajectory's last point."""
    return float(np.max(np.abs(world.joint_positions() - follower.final_positions)))


def min_jerk_trajectory(
    joint_names: Sequence[str], q_start: Sequence[float], q_goal: Sequence[float], duration_s: float, points: int = 20
) -> JointTrajectory:
    """A smooth (minimum-jerk profile) straight joint-space path from ``q_start`` to ``q_goal``, sampled at
    ``points`` waypoints and followed linearly between them."""
    if duration_s <= 0:
        raise TrajectoryError(f"duration_s must be > 0, got {duration_s}")
    s = np.linspace(0.0, 1.0, max(points, 2))
    blend = 10 * s**3 - 15 * s**4 + 6 * s**5
    q0 = np.asarray(q_start, dtype=np.float64)
    q1 = np.asarray(q_goal, dtype=np.float64)
    return JointTrajectory(tuple(joint_names), s * duration_s, q0 + np.outer(blend, q1 - q0))
