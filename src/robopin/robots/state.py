"""Plain value types the arm layer reports: joint and gripper state, execution progress."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from robopin.robots.errors import ArmFault, Reason


def _readonly(values: object, name: str) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence, got shape {array.shape}")
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class JointState:
    """Measured joint state; ``stamp_s`` is on the ``time.monotonic()`` clock (for staleness checks)."""

    names: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray | None = None
    efforts: np.ndarray | None = None
    stamp_s: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "positions", _readonly(self.positions, "positions"))
        n = len(self.names)
        if self.positions.shape != (n,):
            raise ValueError(f"positions has {self.positions.shape[0]} values for {n} joint names")
        for attr in ("velocities", "efforts"):
            value = getattr(self, attr)
            if value is not None:
                array = _readonly(value, attr)
                if array.shape != (n,):
                    raise ValueError(f"{attr} has {array.shape[0]} values for {n} joint names")
                object.__setattr__(self, attr, array)

    def age_s(self, now_s: float | None = None) -> float:
        """Seconds since the state was measured."""
        return (time.monotonic() if now_s is None else now_s) - self.stamp_s


@dataclass(frozen=True)
class GripperState:
    """Gripper opening and grasp flag; ``force_n`` is NaN where the backend cannot report it."""

    width_m: float
    is_grasped: bool
    max_width_m: float
    force_n: float = math.nan
    stamp_s: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class GripperResult:
    """Outcome of one gripper command (the fields of control_msgs/GripperCommand's result)."""

    width_m: float
    effort_n: float
    stalled: bool
    reached_goal: bool


@dataclass(frozen=True)
class ExecutionProgress:
    """Progress of a running trajectory, reported by the backend through :class:`Execution`."""

    time_from_start_s: float
    duration_s: float
    waypoint: int
    tracking_error_rad: float

    @property
    def progress(self) -> float:
        """Fraction 0..1 of the trajectory duration reached."""
        if self.duration_s <= 0.0:
            return 1.0
        return min(1.0, max(0.0, self.time_from_start_s / self.duration_s))


@dataclass(frozen=True)
class ExecutionResult:
    """How an execution ended once motion had started (refusals raise instead)."""

    success: bool
    reason: Reason
    message: str = ""
    final_error_rad: float = math.nan
    duration_s: float = 0.0
    fault: ArmFault | None = None
