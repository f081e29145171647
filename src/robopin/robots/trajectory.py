"""The one joint trajectory of robopin: planners return it, the arm layer checks and runs it, the ROS layer
encodes it as trajectory_msgs/JointTrajectory. Validation, sampling, speed scaling, point-to-point moves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robopin.robots.errors import TrajectoryError

# Peak velocity and acceleration of a unit min-jerk (quintic) move over unit time.
_MIN_JERK_PEAK_VELOCITY = 1.875
_MIN_JERK_PEAK_ACCELERATION = 5.773502691896258


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class JointTrajectory:
    """Joint waypoints with times from the start of execution: ``positions[i]`` is reached at ``times_s[i]``.

    ``positions`` is (N, dof) in rad, columns in ``joint_names`` order; ``times_s`` (N,) is >= 0 and strictly
    increasing. ``velocities`` (rad/s) and ``accelerations`` (rad/s²) are optional, each (N, dof) or None, as
    trajectory_msgs/JointTrajectoryPoint leaves them empty. Between waypoints the trajectory is a cubic
    Hermite spline when velocities are given, else linear (as joint_trajectory_controller interpolates).
    A first waypoint after t = 0 means "move there from wherever the arm is" (see :meth:`with_start`).
    """

    joint_names: tuple[str, ...]
    times_s: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None

    def __post_init__(self) -> None:
        names = tuple(self.joint_names)
        if len(set(names)) != len(names) or not names:
            raise TrajectoryError(f"joint names must be unique and non-empty, got {names}")
        times = np.array(self.times_s, dtype=np.float64).reshape(-1)
        positions = np.array(self.positions, dtype=np.float64)
        if positions.ndim == 1:
            positions = positions.reshape(1, -1)
        expected = (times.size, len(names))
        if positions.shape != expected:
            raise TrajectoryError(
                f"trajectory positions has shape {positions.shape}, expected {expected} for {times.size} times "
                f"and {len(names)} joints"
            )
        if times.size == 0:
            raise TrajectoryError("a trajectory needs at least one waypoint")
        if not (np.all(np.isfinite(times)) and np.all(np.isfinite(positions))):
            raise TrajectoryError("trajectory times and positions must be finite")
        if times[0] < 0.0:
            raise TrajectoryError(f"times_s must be >= 0 and strictly increasing, but the first is {times[0]} s")
        stalled = np.flatnonzero(np.diff(times) <= 0.0)
        if stalled.size:
            k = int(stalled[0]) + 1
            raise TrajectoryError(
                f"times_s must be >= 0 and strictly increasing, but waypoint {k} at {times[k]} s does not "
                f"strictly increase on {times[k - 1]} s"
            )
        object.__setattr__(self, "joint_names", names)
        object.__setattr__(self, "times_s", _frozen(times))
        object.__setattr__(self, "positions", _frozen(positions))
        for name in ("velocities", "accelerations"):
            object.__setattr__(self, name, self._checked_rates(name, expected))

    def _checked_rates(self, name: str, expected: tuple[int, int]) -> np.ndarray | None:
        value = getattr(self, name)
        if value is None:
            return None
        rates = np.array(value, dtype=np.float64)
        if rates.shape != expected:
            raise TrajectoryError(f"trajectory {name} has shape {rates.shape}, expected {expected}")
        if not np.all(np.isfinite(rates)):
            raise TrajectoryError(f"trajectory {name} must be finite")
        return _frozen(rates)

    @classmethod
    def stationary(cls, joint_names: Sequence[str], q: np.ndarray) -> JointTrajectory:
        """A one-point trajectory that holds ``q`` at rest (a plan whose start already is its goal)."""
        zeros = np.zeros((1, len(joint_names)))
        return cls(tuple(joint_names), np.zeros(1), np.asarray(q, dtype=np.float64)[None, :], zeros, zeros)

    @property
    def dof(self) -> int:
        return len(self.joint_names)

    @property
    def num_waypoints(self) -> int:
        return int(self.times_s.size)

    @property
    def duration_s(self) -> float:
        """Time of the last waypoint."""
        return float(self.times_s[-1])

    def segment_index(self, t_s: float) -> int:
        """Index of the last waypoint whose time is <= ``t_s`` (0 before the first)."""
        return max(0, int(np.searchsorted(self.times_s, t_s, side="right")) - 1)

    def sample(self, t_s: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities at time(s) ``t_s``, held constant (at rest) outside the time span."""
        t = np.atleast_1d(np.asarray(t_s, dtype=np.float64))
        times, q = self.times_s, self.positions
        if times.size == 1:
            return self._squeeze(np.repeat(q, t.size, axis=0), np.zeros((t.size, self.dof)), t_s)
        clipped = np.clip(t, times[0], times[-1])
        k = np.clip(np.searchsorted(times, clipped, side="right") - 1, 0, times.size - 2)
        dt = (times[k + 1] - times[k])[:, None]
        s = ((clipped - times[k])[:, None]) / dt
        q0, q1 = q[k], q[k + 1]
        if self.velocities is None:
            pos = q0 + s * (q1 - q0)
            vel = (q1 - q0) / dt
        else:
            v0, v1 = self.velocities[k] * dt, self.velocities[k + 1] * dt
            h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
            h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
            pos = h00 * q0 + h10 * v0 + h01 * q1 + h11 * v1
            d00, d10 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1
            d01, d11 = -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
            vel = (d00 * q0 + d10 * v0 + d01 * q1 + d11 * v1) / dt
        outside = (t < times[0]) | (t > times[-1])
        vel[outside] = 0.0
        return self._squeeze(pos, vel, t_s)

    @staticmethod
    def _squeeze(pos: np.ndarray, vel: np.ndarray, t_s: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if np.ndim(t_s) == 0:
            return pos[0], vel[0]
        return pos, vel

    def scaled(self, speed_scale: float) -> JointTrajectory:
        """The same path run ``speed_scale`` times as fast (0 < scale; < 1 slows it down)."""
        if not speed_scale > 0.0:
            raise TrajectoryError(f"speed_scale must be > 0, got {speed_scale}")
        velocities = None if self.velocities is None else self.velocities * speed_scale
        accelerations = None if self.accelerations is None else self.accelerations * speed_scale**2
        return JointTrajectory(self.joint_names, self.times_s / speed_scale, self.positions, velocities, accelerations)

    def reordered(self, joint_names: Sequence[str]) -> JointTrajectory:
        """This trajectory with columns in ``joint_names`` order; the name sets must be equal."""
        names = tuple(joint_names)
        if names == self.joint_names:
            return self
        if set(names) != set(self.joint_names) or len(names) != len(self.joint_names):
            raise TrajectoryError(f"trajectory joints {self.joint_names} do not match the arm's joints {names}")
        order = [self.joint_names.index(name) for name in names]
        velocities = None if self.velocities is None else self.velocities[:, order]
        accelerations = None if self.accelerations is None else self.accelerations[:, order]
        return JointTrajectory(names, self.times_s, self.positions[:, order], velocities, accelerations)

    def with_start(self, positions: np.ndarray) -> JointTrajectory:
        """Prepend ``positions`` at rest at t = 0 (for trajectories whose first waypoint is at t > 0)."""
        if self.times_s[0] <= 0.0:
            raise TrajectoryError("the first waypoint is already at t = 0")
        start = np.asarray(positions, dtype=np.float64).reshape(1, -1)

        def at_rest_first(rates: np.ndarray | None) -> np.ndarray | None:
            return None if rates is None else np.vstack([np.zeros_like(start), rates])

        return JointTrajectory(
            self.joint_names,
            np.concatenate([[0.0], self.times_s]),
            np.vstack([start, self.positions]),
            at_rest_first(self.velocities),
            at_rest_first(self.accelerations),
        )

    def dense_times(self, max_step_s: float) -> np.ndarray:
        """Every waypoint time plus enough samples between them that no step exceeds ``max_step_s``."""
        if not max_step_s > 0.0:
            raise TrajectoryError(f"max_step_s must be > 0, got {max_step_s}")
        pieces = [self.times_s[:1]]
        for t0, t1 in zip(self.times_s[:-1], self.times_s[1:], strict=True):
            n = max(1, int(np.ceil((t1 - t0) / max_step_s)))
            pieces.append(np.linspace(t0, t1, n + 1)[1:])
        return np.concatenate(pieces)


def min_jerk_move(
    joint_names: Sequence[str],
    start: np.ndarray,
    goal: np.ndarray,
    max_velocity_rad_s: np.ndarray,
    max_acceleration_rad_s2: np.ndarray,
    *,
    min_duration_s: float = 0.2,
    sample_period_s: float = 0.02,
) -> JointTrajectory:
    """A rest-to-rest quintic (min-jerk) joint move whose peak velocity and acceleration respect the limits.

    The slowest joint sets the duration; samples every ``sample_period_s`` carry exact velocities.
    """
    start = np.asarray(start, dtype=np.float64)
    goal = np.asarray(goal, dtype=np.float64)
    if start.shape != goal.shape or start.shape != (len(joint_names),):
        raise TrajectoryError(f"start {start.shape} and goal {goal.shape} must both have {len(joint_names)} values")
    vmax = np.asarray(max_velocity_rad_s, dtype=np.float64)
    amax = np.asarray(max_acceleration_rad_s2, dtype=np.float64)
    if np.any(vmax <= 0) or np.any(amax <= 0):
        raise TrajectoryError("velocity and acceleration limits must be > 0")
    distance = np.abs(goal - start)
    duration = float(
        max(
            min_duration_s,
            np.max(_MIN_JERK_PEAK_VELOCITY * distance / vmax),
            np.max(np.sqrt(_MIN_JERK_PEAK_ACCELERATION * distance / amax)),
        )
    )
    n = max(2, int(np.ceil(duration / sample_period_s)) + 1)
    times = np.linspace(0.0, duration, n)
    s = times / duration
    shape = 10 * s**3 - 15 * s**4 + 6 * s**5
    shape_rate = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
    delta = goal - start
    positions = start + shape[:, None] * delta
    velocities = shape_rate[:, None] * delta
    return JointTrajectory(tuple(joint_names), times, positions, velocities)
