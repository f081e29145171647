"""robopin's arm reasons ⇄ control_msgs: FollowJointTrajectory error codes and results, JointTolerance lists."""

from __future__ import annotations

import math

import numpy as np
from control_msgs.action import FollowJointTrajectory

from robopin.robots.errors import Reason

_FJT = FollowJointTrajectory.Result
# How a robopin reason maps onto FollowJointTrajectory's error codes (control_msgs jazzy,
# action/FollowJointTrajectory.action). Refusals before motion are INVALID_GOAL (joint names:
# INVALID_JOINTS); an end off the goal is GOAL_TOLERANCE_VIOLATED; anything that cut a started motion
# short (tracking, watchdog, fault) is PATH_TOLERANCE_VIOLATED. error_string always starts with the reason.
_GOAL_REASONS = {Reason.JOINT_NAMES: _FJT.INVALID_JOINTS, Reason.GOAL_TOLERANCE: _FJT.GOAL_TOLERANCE_VIOLATED}


def follow_joint_trajectory_error_code(reason: Reason, *, started: bool) -> int:
    """The FollowJointTrajectory error code for a robopin ``reason`` (``started``: the arm had moved)."""
    if reason in (Reason.COMPLETED, Reason.DRY_RUN):
        return _FJT.SUCCESSFUL
    if reason in _GOAL_REASONS:
        return _GOAL_REASONS[reason]
    return _FJT.PATH_TOLERANCE_VIOLATED if started else _FJT.INVALID_GOAL


def follow_joint_trajectory_result(error_code: int, reason: str, message: str) -> _FJT:
    """A FollowJointTrajectory result whose error_string reads ``<reason>: <message>``."""
    return _FJT(error_code=int(error_code), error_string=f"{reason}: {message}" if message else reason)


def resolve_joint_tolerances(tolerances, joint_names, default: float, field: str = "position") -> np.ndarray:
    """Per-joint tolerances from control_msgs/JointTolerance[] (``field`` of each), in ``joint_names`` order.

    As joint_trajectory_controller reads them (ros2_controllers tolerances.hpp, resolve_tolerance_source):
    > 0 replaces the default, 0 keeps it, -1 erases it (no limit: inf here); other negative values and
    joints the arm does not have are refused (ValueError; the controller logs and uses its defaults).
    """
    result = np.full(len(joint_names), float(default))
    index = {name: i for i, name in enumerate(joint_names)}
    for tolerance in tolerances:
        if tolerance.name not in index:
            raise KeyError(f"tolerance for unknown joint {tolerance.name!r}; the arm has {list(joint_names)}")
        value = float(getattr(tolerance, field))
        if value > 0.0:
            result[index[tolerance.name]] = value
        elif abs(value + 1.0) < 1e-6:
            result[index[tolerance.name]] = math.inf
        elif value < 0.0:
            raise ValueError(f"{field} tolerance {value} for {tolerance.name!r}: only > 0, 0 or -1 are allowed")
    return result
