"""Time parameterisation of geometric joint paths with TOPP-RA (velocity and acceleration limits).

The path is first densified so the spline TOPP-RA fits through it stays within a few millimetres of
the straight segments the planner checked; the dense verifier then judges the timed result anyway.
Where the path runs into a joint limit and stays there (a straight-line move whose IK holds a joint
at its limit), the interpolating spline overshoots the limit by a fraction of a milliradian; given the
limits, the samples are held at them instead, so the verifier does not reject a path that never left them.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from numpy.typing import NDArray

from robopin.motion.errors import BackendUnavailableError, MotionConfigError
from robopin.motion.types import JointTrajectory


def densify_path(path: NDArray[np.float64], max_step_rad: float) -> NDArray[np.float64]:
    """Insert waypoints on each straight segment so no joint moves more than ``max_step_rad`` per step."""
    path = np.asarray(path, dtype=np.float64)
    if max_step_rad <= 0.0:
        raise MotionConfigError(f"max_step_rad must be > 0, got {max_step_rad}")
    rows = [path[0]]
    for a, b in itertools.pairwise(path):
        steps = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step_rad)))
        for k in range(1, steps + 1):
            rows.append(a + (b - a) * (k / steps))
    return np.asarray(rows)


def _drop_duplicates(path: NDArray[np.float64]) -> NDArray[np.float64]:
    keep = [0]
    for i in range(1, len(path)):
        if np.max(np.abs(path[i] - path[keep[-1]])) > 1e-9:
            keep.append(i)
    return path[keep]


@functools.cache
def _quiet_toppra() -> None:
    """toppra's own logging at WARNING, set once (reconfiguring its logger on every call costs ~0.2 ms)."""
    import toppra

    toppra.setup_logging("WARNING")


@functools.lru_cache(maxsize=32)
def _limit_constraints(vlim: tuple[float, ...], alim: tuple[float, ...]) -> tuple:
    """TOPP-RA's joint velocity and acceleration constraints for these limits.

    Built once per limit set: they hold only the limits, and building them formats every limit
    into a description string (toppra constraint/linear_joint_*.py), a few ms per segment.
    """
    import toppra.constraint

    v, a = np.asarray(vlim), np.asarray(alim)
    return (
        toppra.constraint.JointVelocityConstraint(np.stack([-v, v], axis=1)),
        toppra.constraint.JointAccelerationConstraint(np.stack([-a, a], axis=1)),
    )


def time_parameterize(
    path: NDArray[np.float64],
    joint_names: tuple[str, ...],
    max_velocity: NDArray[np.float64],
    max_acceleration: NDArray[np.float64],
    *,
    velocity_scale: float = 1.0,
    acceleration_scale: float = 1.0,
    sample_dt_s: float = 0.02,
    max_step_rad: float = 0.05,
    position_limits: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
) -> JointTrajectory | None:
    """A trajectory through ``path`` at rest at both ends, or None when TOPP-RA finds no solution.

    ``position_limits`` (lower, upper): samples of the spline beyond a limit the path itself keeps are
    held at that limit, at rest.
    """
    if not 0.0 < velocity_scale <= 1.0 or not 0.0 < acceleration_scale <= 1.0:
        raise MotionConfigError(
            f"velocity_scale and acceleration_scale must be in (0, 1], got {velocity_scale}, {acceleration_scale}"
        )
    try:
        import toppra
        import toppra.algorithm
        import toppra.constraint
    except ImportError as exc:  # pragma: no cover
        raise BackendUnavailableError(f"time parameterisation needs toppra: {exc}") from exc
    _quiet_toppra()
    path = _drop_duplicates(np.asarray(path, dtype=np.float64))
    if len(path) == 1:
        return JointTrajectory.stationary(joint_names, path[0])
    dense = densify_path(path, max_step_rad)
    lengths = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(dense, axis=0), axis=1))])
    s = lengths / lengths[-1]
    spline = toppra.SplineInterpolator(s, dense)
    vlim = np.asarray(max_velocity, dtype=np.float64) * velocity_scale
    alim = np.asarray(max_acceleration, dtype=np.float64) * acceleration_scale
    constraints = _limit_constraints(tuple(vlim.tolist()), tuple(alim.tolist()))
    # Enough grid points to resolve every dense segment, capped to keep the LP sweep cheap.
    gridpoints = np.linspace(0.0, 1.0, int(np.clip(2 * len(dense), 50, 200)))
    instance = toppra.algorithm.TOPPRA(
        list(constraints), spline, gridpoints=gridpoints, parametrizer="ParametrizeConstAccel"
    )
    timed = instance.compute_trajectory(0.0, 0.0)
    if timed is None:
        return None
    duration = float(timed.duration)
    count = max(2, int(np.ceil(duration / sample_dt_s)) + 1)
    times = np.linspace(0.0, duration, count)
    positions = timed(times)
    positions[0], positions[-1] = path[0], path[-1]
    velocities = timed(times, 1)
    velocities[0] = velocities[-1] = 0.0
    accelerations = timed(times, 2)
    if position_limits is not None:
        # Hold only what the spline adds: the path's own range stays as it is (the verifier judges it).
        lower = np.minimum(np.asarray(position_limits[0], dtype=np.float64), path.min(axis=0))
        upper = np.maximum(np.asarray(position_limits[1], dtype=np.float64), path.max(axis=0))
        held = (positions < lower) | (positions > upper)
        if np.any(held):
            positions = np.clip(positions, lower, upper)
            velocities[held] = 0.0
            accelerations[held] = 0.0
    return JointTrajectory(joint_names, times, positions, velocities, accelerations)
