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
    times_s = np.asarray(times_s, dtype=np.float64)
    # Walk the polyline by accumulated joint travel: the largest joint move between two checked
    # configurations never exceeds max_step_rad, and slow stretches are not checked over and over.
    travel = np.concatenate([[0.0], np.cumsum(np.max(np.abs(np.diff(positions, axis=0)), axis=1))])
    count = max(2, int(np.ceil(travel[-1] / max_step_rad)) + 1)
    arc = np.linspace(0.0, travel[-1], count) if travel[-1] > 0.0 else np.zeros(1)
    segment = np.clip(np.searchsorted(travel, arc, side="right") - 1, 0, max(len(positions) - 2, 0))
    if len(positions) == 1:
        samples, sample_times = positions, times_s
    else:
        length = travel[segment + 1] - travel[segment]
        alpha = np.divide(arc - travel[segment], length, out=np.zeros_like(arc), where=length > 0.0)[:, None]
        samples = (1.0 - alpha) * positions[segment] + alpha * positions[segment + 1]
        sample_times = (1.0 - alpha[:, 0]) * times_s[segment] + alpha[:, 0] * times_s[segment + 1]
    for checked, (q, t) in enumerate(zip(samples, sample_times, strict=True), start=1):
        if not robot.within_limits(q):
            return VerificationResult(False, checked, float(t), q, (), outside_limits=True)
        if robot.in_collision(q, margin_m=margin_m):
            pairs = tuple(robot.colliding_pairs(q, margin_m=margin_m))
            return VerificationResult(False, checked, float(t), q, pairs)
    return VerificationResult(True, len(samples))


def verify_trajectory(
    robot: RobotModel, trajectory: JointTrajectory, *, max_step_rad: float = 0.01, margin_m: float = 0.0
) -> VerificationResult:
    """Dense check of a timed trajectory (see :func:`verify_path`)."""
    return verify_path(robot, trajectory.positions, trajectory.times_s, max_step_rad=max_step_rad, margin_m=margin_m)
