"""Continuous collision check of a timed trajectory: the last gate before a plan leaves any planner.

Every segment between consecutive trajectory samples is checked without gaps: with ``D`` an upper
bound on how far any robot point moves over the segment (:meth:`RobotModel.displacement_bound`), the
segment, its ends included, is safe when its midpoint keeps every pair ``D/2`` apart: from the midpoint to
either end a point moves at most ``D/2``, so a link closes on the still world at most that much, and two links
close at most that much too, since seen from the upstream one only the joints between them move the other and
their terms are part of ``D``. Otherwise the segment is halved and both halves are checked, down to
``tolerance_m``, where the ends themselves are checked and a configuration in contact is reported.
Far from obstacles one check covers a whole segment; near them the check refines, so a thin obstacle
can never fall between two samples. The judge is the planner-independent pinocchio/coal model
(convex link hulls), at zero padding unless told otherwise.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.motion.robot import RobotModel
from robopin.motion.types import JointTrajectory
from robopin.motion.world import CLOUD_GEOMETRY_NAME

# Margins are rounded up (a larger margin only refines more) to a ladder so the per-margin collision
# data can be cached: steps of _MARGIN_QUANTUM_M up to _MARGIN_LADDER_FROM_M, then a factor of
# _MARGIN_LADDER_RATIO per rung, which keeps the distinct margins of one world to a few dozen.
_MARGIN_QUANTUM_M = 0.0005
_MARGIN_LADDER_FROM_M = 0.002
_MARGIN_LADDER_RATIO = 1.25


@dataclass(frozen=True)
class VerificationResult:
    """Outcome of a check; on failure the first colliding time, configuration and geometry pairs."""

    collision_free: bool
    checked_configurations: int
    first_collision_time_s: float | None = None
    first_collision_q: NDArray[np.float64] | None = None
    colliding_pairs: tuple[tuple[str, str], ...] = ()
    outside_limits: bool = False
    # For a contact with the point cloud: the cloud point nearest the robot geometry involved (base
    # frame) and its distance to that geometry's bounding box (0 inside): where the contact is.
    cloud_contact: tuple[float, float, float] | None = None
    cloud_contact_distance_m: float = float("nan")

    def describe(self) -> str:
        """One line for logs and action results."""
        if self.collision_free:
            return f"collision-free ({self.checked_configurations} checks)"
        if self.outside_limits:
            return f"leaves the joint limits at t={self.first_collision_time_s:.3f} s"
        pairs = ", ".join(f"{a}↔{b}" for a, b in self.colliding_pairs) or "unknown pair"
        where = ""
        if self.cloud_contact is not None:
            x, y, z = self.cloud_contact
            where = (f"; nearest cloud point [{x:.3f}, {y:.3f}, {z:.3f}] m, "
                     f"{self.cloud_contact_distance_m * 1000:.0f} mm from its box")
        return f"collides at t={self.first_collision_time_s:.3f} s ({pairs}{where})"


def _quantized(margin: float) -> float:
    """The smallest rung of the margin ladder at or above ``margin``."""
    if margin <= _MARGIN_LADDER_FROM_M:
        return float(np.ceil(margin / _MARGIN_QUANTUM_M) * _MARGIN_QUANTUM_M)
    rung = int(np.ceil(np.log(margin / _MARGIN_LADDER_FROM_M) / np.log(_MARGIN_LADDER_RATIO)))
    value = _MARGIN_LADDER_FROM_M * _MARGIN_LADDER_RATIO**rung
    return float(value if value >= margin else value * _MARGIN_LADDER_RATIO)


def _failure(robot: RobotModel, q, t, margin_m: float, checks: int, *, outside: bool = False) -> VerificationResult:
    """The failed check at ``q`` (time ``t``): the pairs in contact, and where a cloud contact is."""
    pairs = () if outside else tuple(robot.colliding_pairs(q, margin_m=margin_m))
    contact, distance = None, float("nan")
    touching = next((a for a, b in pairs if b == CLOUD_GEOMETRY_NAME), None)
    if touching is not None:
        points, distances = robot.nearest_cloud_points(q, touching, count=1)
        if len(points):
            contact, distance = tuple(float(c) for c in points[0]), float(distances[0])
    return VerificationResult(False, checks, float(t), q, pairs, outside_limits=outside,
                              cloud_contact=contact, cloud_contact_distance_m=distance)


def verify_path(
    robot: RobotModel,
    positions: NDArray[np.float64],
    times_s: NDArray[np.float64] | None = None,
    *,
    tolerance_m: float = 0.001,
    margin_m: float = 0.0,
) -> VerificationResult:
    """Check the piecewise-linear joint path through ``positions`` continuously (see the module docstring).

    ``margin_m`` is the clearance demanded from world obstacles; ``tolerance_m`` the largest robot-point
    travel left unchecked between two configurations proven clear.
    """
    positions = np.asarray(positions, dtype=np.float64)
    if times_s is None:
        times_s = np.arange(len(positions), dtype=np.float64)
    times_s = np.asarray(times_s, dtype=np.float64)
    if len(positions) == 0:
        return VerificationResult(True, 0)
    # Limits are a box in joint space: samples inside it keep every straight segment between them inside.
    inside = np.all((positions >= robot.lower - 1e-6) & (positions <= robot.upper + 1e-6), axis=1)
    if not np.all(inside):
        first = int(np.argmin(inside))
        return _failure(robot, positions[first], times_s[first], margin_m, first + 1, outside=True)
    # A configuration is clear when checked on its own (``tested``) or when it lies in a segment whose
    # midpoint keeps the clearance that covers the whole segment (``covered``): most samples need no
    # check of their own.
    tested: set[bytes] = set()
    covered: set[bytes] = set()
    midpoint_checks = 0

    def endpoint_clear(q) -> bool:
        key = q.tobytes()
        if key in covered or key in tested:
            return True
        if robot.in_collision(q, margin_m=margin_m):
            return False
        tested.add(key)
        return True

    if len(positions) == 1 and not endpoint_clear(positions[0]):
        return _failure(robot, positions[0], times_s[0], margin_m, 1)
    # Segments as a stack of (q_a, q_b, t_a, t_b), earliest on top.
    stack = [(positions[i], positions[i + 1], times_s[i], times_s[i + 1]) for i in range(len(positions) - 1)][::-1]
    while stack:
        q_a, q_b, t_a, t_b = stack.pop()
        travel = robot.displacement_bound(q_a, q_b)
        if travel <= tolerance_m:
            for q, t in ((q_a, t_a), (q_b, t_b)):
                if not endpoint_clear(q):
                    return _failure(robot, q, t, margin_m, midpoint_checks + len(tested) + 1)
            continue
        q_mid, t_mid = 0.5 * (q_a + q_b), 0.5 * (t_a + t_b)
        midpoint_checks += 1
        # Half the travel on either side of the midpoint, for links against the world and against each other
        # alike (module docstring). The link-to-link margin decides how often a segment splits: a Panda's hand
        # passes a few centimetres from its own forearm throughout a transfer.
        half = 0.5 * _quantized(travel)
        if robot.within_clearance(q_mid, half, world_clearance_m=half + margin_m):
            covered.update((q_a.tobytes(), q_b.tobytes()))
            continue
        if not endpoint_clear(q_mid):
            return _failure(robot, q_mid, t_mid, margin_m, midpoint_checks + len(tested) + 1)
        stack.append((q_mid, q_b, t_mid, t_b))
        stack.append((q_a, q_mid, t_a, t_mid))
    checks = midpoint_checks + len(tested)
    return VerificationResult(True, checks)


def verify_trajectory(
    robot: RobotModel, trajectory: JointTrajectory, *, tolerance_m: float = 0.001, margin_m: float = 0.0
) -> VerificationResult:
    """Continuous check of a timed trajectory (see :func:`verify_path`)."""
    return verify_path(robot, trajectory.positions, trajectory.times_s, tolerance_m=tolerance_m, margin_m=margin_m)


def sampled_check(
    robot: RobotModel, positions: NDArray[np.float64], *, max_step_rad: float = 0.002, margin_m: float = 0.0
) -> bool:
    """Plain uniform sampling (no joint moves more than ``max_step_rad`` between checks): a second,
    differently built judge for benchmarks and tests."""
    positions = np.asarray(positions, dtype=np.float64)
    for a, b in itertools.pairwise(positions):
        steps = max(1, int(np.ceil(np.max(np.abs(b - a)) / max_step_rad)))
        for k in range(steps + 1):
            if robot.in_collision(a + (b - a) * (k / steps), margin_m=margin_m):
                return False
    return True
