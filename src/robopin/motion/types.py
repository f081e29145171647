"""Plain data passed in and out of every motion planner: statuses, results, primitives.

Planners return the one :class:`~robopin.robots.trajectory.JointTrajectory` the arm layer runs.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from robopin.motion.errors import MotionConfigError
from robopin.robots.trajectory import JointTrajectory

__all__ = ["TARGET_FAILURES", "AttachedObject", "Box", "JointTrajectory", "PlanResult", "PlanStatus"]


class PlanStatus(str, enum.Enum):
    """Named outcome of one planning request (the ``status`` string of the ROS actions)."""

    SUCCESS = "success"
    IK_FAIL = "ik_fail"
    START_IN_COLLISION = "start_in_collision"
    GOAL_IN_COLLISION = "goal_in_collision"
    START_OUTSIDE_LIMITS = "start_outside_limits"
    GOAL_OUTSIDE_LIMITS = "goal_outside_limits"
    OUTSIDE_WORKSPACE = "outside_workspace"
    NO_PATH = "no_path"
    TIMEOUT = "timeout"
    TIME_PARAMETERIZATION_FAIL = "time_parameterization_fail"
    COLLISION_IN_RESULT = "collision_in_result"
    BACKEND_ERROR = "backend_error"


TARGET_FAILURES = frozenset({PlanStatus.IK_FAIL.value, PlanStatus.GOAL_IN_COLLISION.value,
                             PlanStatus.GOAL_OUTSIDE_LIMITS.value, PlanStatus.OUTSIDE_WORKSPACE.value,
                             PlanStatus.NO_PATH.value, PlanStatus.TIMEOUT.value,
                             PlanStatus.TIME_PARAMETERIZATION_FAIL.value, PlanStatus.COLLISION_IN_RESULT.value,
                             "invalid_target"})
"""Statuses of a pick-and-place that found no plan for its targets, before anything moved: other targets may plan
where these did not. Not among them: a start in collision or outside the limits, a stale world, a busy or absent
planner, a cancel (another target changes none of those)."""


@dataclass
class PlanResult:
    """What every planner returns: a named status, the trajectory on success, and the time it took."""

    status: PlanStatus
    planning_time_s: float
    trajectory: JointTrajectory | None = None
    message: str = ""
    path: NDArray[np.float64] | None = None  # geometric path (waypoints × dof) before timing
    goal_q: NDArray[np.float64] | None = None
    details: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A plan leaves from its start state: its first waypoint is that state, at t = 0.
        if self.trajectory is not None and self.trajectory.times_s[0] != 0.0:
            raise MotionConfigError(
                f"a planned trajectory must start at 0 s (the start state), its first waypoint is at "
                f"{self.trajectory.times_s[0]} s"
            )

    @property
    def success(self) -> bool:
        """True when a verified trajectory came back."""
        return self.status is PlanStatus.SUCCESS and self.trajectory is not None


def _check_pose(T: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    T = np.asarray(T, dtype=np.float64)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise MotionConfigError(f"{name} must be a finite 4x4 homogeneous matrix, got shape {T.shape}")
    if not np.allclose(T[3], [0.0, 0.0, 0.0, 1.0]) or not np.allclose(T[:3, :3] @ T[:3, :3].T, np.eye(3), atol=1e-6):
        raise MotionConfigError(f"{name} is not a rigid transform (rotation not orthonormal or bad last row)")
    return T


def _box_size(size_m: Sequence[float], what: str) -> tuple[float, float, float]:
    size = tuple(float(s) for s in size_m)
    if len(size) != 3 or not all(np.isfinite(s) and s > 0.0 for s in size):
        raise MotionConfigError(f"{what} size_m must be three positive lengths, got {size_m}")
    return size  # type: ignore[return-value]


@dataclass
class Box:
    """A box obstacle: full edge lengths ``size_m`` (x, y, z) centred at ``T_base_box``."""

    name: str
    size_m: tuple[float, float, float]
    T_base_box: NDArray[np.float64]

    def __post_init__(self) -> None:
        self.size_m = _box_size(self.size_m, f"box {self.name!r}")
        self.T_base_box = _check_pose(self.T_base_box, f"box {self.name!r} T_base_box")


@dataclass
class AttachedObject:
    """An object held in the gripper, a box of ``size_m`` at ``T_ee_object`` in the TCP frame."""

    name: str
    size_m: tuple[float, float, float]
    T_ee_object: NDArray[np.float64]

    def __post_init__(self) -> None:
        self.size_m = _box_size(self.size_m, f"attached object {self.name!r}")
        self.T_ee_object = _check_pose(self.T_ee_object, f"attached object {self.name!r} T_ee_object")
