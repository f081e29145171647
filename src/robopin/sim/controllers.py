"""Joint trajectory execution in the simulator: a follower that feeds the arm's position controllers.

A time-parameterised joint trajectory (times from its start, one joint vector per point) is
interpolated at every physics step and sent as position + velocity targets, which is what a
``JointTrajectoryController`` does on the real arm. The simulator's motors then track it under
their force limits, so collisions and tracking error are real, not teleported.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.sim.world import SimWorld


class TrajectoryError(ValueError):
    """A joint trajectory that cannot be executed (shape, ordering, limits)."""


@dataclass(frozen=True)
class ExecutionResult:
    """How an executed trajectory ended: final tracking error per joint (rad) and simulated duration."""

    completed: bool
    final_error_rad: NDArray[np.float64]
    duration_s: float
    message: str = ""


def check_trajectory(
    world: SimWorld, times_s: Sequence[float], positions: Sequence[Sequence[float]]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate and return (times, positions) as arrays; raise :class:`TrajectoryError` naming the problem."""
    times = np.asarray(times_s, dtype=np.float64)
    q = np.asarray(positions, dtype=np.float64)
    n = len(world.arm_joint_indices)
    if times.ndim != 1 or len(times) == 0:
        raise TrajectoryError(f"times_s must be a non-empty 1-D sequence, got shape {times.shape}")
    if q.shape != (len(times), n):
        raise TrajectoryError(f"positions must have shape ({len(times)}, {n}), got {q.shape}")
    if not (np.all(np.isfinite(times)) and np.all(np.isfinite(q))):
        raise TrajectoryError("trajectory contains non-finite values")
    if times[0] < 0 or np.any(np.diff(times) <= 0):
        raise TrajectoryError(f"times_s must start at >= 0 and strictly increase, got {times.tolist()}")
    below = q < world.arm_lower - 1e-6
    above = q > world.arm_upper + 1e-6
    if below.any() or above.any():
        point, joint = np.argwhere(below | above)[0]
        raise TrajectoryError(
            f"point {point} joint {world.model.arm_joints[joint]} = {q[point, joint]:.4f} rad is outside "
            f"[{world.arm_lower[joint]:.4f}, {world.arm_upper[joint]:.4f}]"
        )
    return times, q


class JointTrajectoryFollower:
    """Interpolates a trajectory against simulated time and commands the arm each physics step."""

    def __init__(self, world: SimWorld, times_s: Sequence[float], positions: Sequence[Sequence[float]]) -> None:
        times, q = check_trajectory(world, times_s, positions)
        self.world = world
        start_q = world.joint_positions()
        if times[0] > 0:
            times = np.concatenate([[0.0], times])
            q = np.vstack([start_q, q])
        self.times = times
        self.positions = q
        self.velocities = np.gradient(q, times, axis=0) if len(times) > 1 else np.zeros_like(q)
        self.start_time_s: float | None = None
        self.done = threading.Event()
        self.cancelled = False

    @property
    def duration_s(self) -> float:
        return float(self.times[-1])

    def target(self, elapsed_s: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Position and velocity targets ``elapsed_s`` after the start."""
        t = float(np.clip(elapsed_s, 0.0, self.times[-1]))
        q = np.array([np.interp(t, self.times, self.positions[:, j]) for j in range(self.positions.shape[1])])
        if elapsed_s >= self.times[-1]:
            return q, np.zeros_like(q)
        k = int(np.searchsorted(self.times, t, side="right") - 1)
        k = min(max(k, 0), len(self.times) - 2)
        qd = (self.positions[k + 1] - self.positions[k]) / (self.times[k + 1] - self.times[k])
        return q, qd

    def __call__(self, sim_time_s: float) -> None:
        if self.start_time_s is None:
            self.start_time_s = sim_time_s
        if self.cancelled:
            return
        elapsed = sim_time_s - self.start_time_s
        q, qd = self.target(elapsed)
        self.world.set_arm_targets(q, qd)
        if elapsed >= self.times[-1]:
            self.done.set()


def execute_joint_trajectory(
    world: SimWorld,
    times_s: Sequence[float],
    positions: Sequence[Sequence[float]],
    *,
    settle_s: float = 0.3,
    tolerance_rad: float = 0.02,
    timeout_s: float | None = 60.0,
    cancel: threading.Event | None = None,
) -> ExecutionResult:
    """Execute a joint trajectory and block until it ends (stepping the world unless its thread runs).

    Returns an :class:`ExecutionResult`; ``completed`` is False when cancelled or when the final
    tracking error exceeds ``tolerance_rad`` after ``settle_s`` of holding the last point.
    """
    follower = JointTrajectoryFollower(world, times_s, positions)
    start = world.sim_time_s
    world.add_step_callback(follower)
    try:
        step_s = 0.05
        while not follower.done.is_set():
            if cancel is not None and cancel.is_set():
                follower.cancelled = True
                world.set_arm_targets(world.joint_positions())
                return ExecutionResult(False, _error(world, follower), world.sim_time_s - start, "cancelled")
            world.advance(step_s, timeout_s=timeout_s)
            if world.sim_time_s - start > follower.duration_s + 5.0:
                break
        world.advance(settle_s, timeout_s=timeout_s)
    finally:
        world.remove_step_callback(follower)
    error = _error(world, follower)
    completed = bool(np.max(np.abs(error)) <= tolerance_rad)
    message = "" if completed else f"final tracking error {np.max(np.abs(error)):.4f} rad > {tolerance_rad} rad"
    return ExecutionResult(completed, error, world.sim_time_s - start, message)


def _error(world: SimWorld, follower: JointTrajectoryFollower) -> NDArray[np.float64]:
    return world.joint_positions() - follower.positions[-1]


def min_jerk_trajectory(
    q_start: Sequence[float], q_goal: Sequence[float], duration_s: float, points: int = 20
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A smooth (minimum-jerk profile) straight joint-space path from ``q_start`` to ``q_goal``."""
    if duration_s <= 0:
        raise TrajectoryError(f"duration_s must be > 0, got {duration_s}")
    s = np.linspace(0.0, 1.0, max(points, 2))
    blend = 10 * s**3 - 15 * s**4 + 6 * s**5
    q0 = np.asarray(q_start, dtype=np.float64)
    q1 = np.asarray(q_goal, dtype=np.float64)
    return s * duration_s, q0 + np.outer(blend, q1 - q0)
