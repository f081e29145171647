"""Dense collision check of a timed trajectory: the last gate before a plan leaves any planner.

Interpolates between consecutive trajectory samples so no joint moves more than ``max_step_rad``
between checks and checks every configuration with the planner-independent pinocchio/coal model,
at zero padding unless told otherwise. A planner that returns a path through an obstacle is caught
here whatever its own checker believed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.motion.robot import RobotModel
from robopin.motion.types import JointTrajectory


@dataclass(frozen=True)
class VerificationResult:
    """Outcome of a dense check; on failure the first colliding time and geometry pairs."""

    collision_free: bool
    checked_configurations: int
    first_collision_time_s: float | None = None
    first_collision_q: NDArray[np.float64] | None = None
    colliding_pairs: tuple[tuple[str, str], ...] = ()
    outside_limits: bool = False

    def describe(self) -> str:
        """One line for logs and action results."""
        if self.collision_free:
            return f"collision-free over {self.checked_configurations} configurations"
        if self.outside_limits:
            return f"leaves the joint limits at t={self.first_collision_time_s:.3f} s"
        pairs = ", ".join(f"{a}↔{b}" for a, b in self.colliding_pairs) or "unknown pair"
        return f"collides at t={self.first_collision_time_s:.3f} s ({pairs})"


def verify_path(
    robot: RobotModel,
    positions: NDArray[np.float64],
    times_s: NDArray[np.float64] | None = None,
    *,
    max_step_rad: float = 0.01,
    margin_m: float = 0.0,
) -> VerificationResult:
    """Check every configuration along the piecewise-linear interpolation of ``positions``."""
    positions = np.asarray(positions, dtype=np.float64)
    if times_s is None:
        times_s = np.arange(len(positions), dtype=np.float64)
    checked = 0
    for i in range(len(positions)):
        if i == 0:
            samples = [(positions[0], float(times_s[0]))]
        else:
            a, b = positions[i - 1], positions[i]
            steps = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step_rad)))
            samples = [
                (a + (b - a) * (k / steps), float(times_s[i - 1] + (times_s[i] - times_s[i - 1]) * k / steps))
                for k in range(1, steps + 1)
            ]
        for q, t in samples:
            checked += 1
            if not robot.within_limits(q):
                return VerificationResult(False, checked, t, q, (), outside_limits=True)
            if robot.in_collision(q, margin_m=margin_m):
                robot_pairs = tuple(robot.colliding_pairs(q, margin_m=margin_m))
                return VerificationResult(False, checked, t, q, robot_pairs)
    return VerificationResult(True, checked)


def verify_trajectory(
    robot: RobotModel, trajectory: JointTrajectory, *, max_step_rad: float = 0.01, margin_m: float = 0.0
) -> VerificationResult:
    """Dense check of a timed trajectory (see :func:`verify_path`)."""
    return verify_path(robot, trajectory.positions, trajectory.times_s, max_step_rad=max_step_rad, margin_m=margin_m)
