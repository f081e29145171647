"""Exceptions of the motion-planning layer; each names the bad value and what was expected."""

from __future__ import annotations

from robopin.registry import UnknownTypeError


class MotionError(Exception):
    """Base class of every motion-planning error."""


class MotionConfigError(MotionError, ValueError):
    """A planner, grasp or robot configuration value is out of range or of the wrong shape."""


class UnknownPlannerError(MotionError, UnknownTypeError):
    """A planner type name that the factory does not know."""


class UnknownRobotError(MotionError, KeyError):
    """A robot name that has no planning description."""


class BackendUnavailableError(MotionError, ImportError):
    """The library behind a planner backend (OMPL, roboplan, cuRobo, CUDA) cannot be imported here."""


class WorldError(MotionError, ValueError):
    """A collision-world update with bad geometry (non-positive size, wrong array shape, NaN)."""


class MotionGoalError(MotionError):
    """A motion goal ends now with a named status (``outside_workspace``, ``stale_world``, ``grasp_missed``...).

    ``executed``: the arm had moved for this goal before it ended.
    """

    def __init__(self, status: str, message: str, *, executed: bool = False) -> None:
        super().__init__(message)
        self.status, self.executed = status, executed
