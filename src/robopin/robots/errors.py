"""Named exceptions, refusal reasons and controller faults of the arm layer.

Every refusal or stop carries a :class:`Reason` so the driver node, the logs and the action results
all say the same word for the same cause ("joint_limit", "stale_state", ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from robopin.registry import UnknownTypeError


class Reason(str, Enum):
    """Why a command was refused or a motion ended; the value is the word reported to users."""

    COMPLETED = "completed"
    DRY_RUN = "dry_run"
    CANCELED = "canceled"
    NOT_CONNECTED = "not_connected"
    CONNECTION = "connection"
    NOT_ENABLED = "not_enabled"
    BUSY = "busy"
    FAULT = "fault"
    INVALID_TRAJECTORY = "invalid_trajectory"
    JOINT_NAMES = "joint_names"
    START_MISMATCH = "start_mismatch"
    JOINT_LIMIT = "joint_limit"
    VELOCITY_LIMIT = "velocity_limit"
    ACCELERATION_LIMIT = "acceleration_limit"
    JUMP = "jump"
    WORKSPACE = "workspace"
    TCP_SPEED = "tcp_speed"
    DURATION = "duration"
    STALE_STATE = "stale_state"
    STALE_COMMAND = "stale_command"
    GOAL_TOLERANCE = "goal_tolerance"
    GRIPPER = "gripper"
    CONFIG = "config"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ArmFault:
    """A controller fault mapped to a name; ``code`` is the controller's own number where it has one."""

    name: str
    message: str
    code: int | None = None
    recoverable: bool = True


class ArmError(Exception):
    """Base of every arm-layer error; ``reason`` names the cause in one word."""

    reason: Reason = Reason.FAULT

    def __init__(self, message: str, *, reason: Reason | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class ArmConfigError(ArmError, ValueError):
    """A configuration value is invalid (the message names the value and what was expected)."""

    reason = Reason.CONFIG


class UnknownArmTypeError(ArmConfigError, UnknownTypeError):
    """No arm backend is registered under the requested type name."""


class ArmNotConnectedError(ArmError):
    """A command needs a connected arm and the arm is not connected."""

    reason = Reason.NOT_CONNECTED


class ArmConnectionError(ArmError):
    """The controller could not be reached or the connection was lost."""

    reason = Reason.CONNECTION


class ArmNotEnabledError(ArmError):
    """Motion was requested while the arm is disabled."""

    reason = Reason.NOT_ENABLED


class ArmBusyError(ArmError):
    """A second motion was requested while one runs (single-motion policy)."""

    reason = Reason.BUSY


class ArmFaultError(ArmError):
    """The controller reports a fault; ``fault`` holds the mapped, named fault."""

    reason = Reason.FAULT

    def __init__(self, fault: ArmFault, message: str | None = None) -> None:
        super().__init__(message or f"arm fault {fault.name}: {fault.message}")
        self.fault = fault


class TrajectoryError(ArmError, ValueError):
    """A trajectory is malformed (shapes, non-finite values, times not increasing, names)."""

    reason = Reason.INVALID_TRAJECTORY


class SafetyViolationError(ArmError):
    """The safety layer refused a command before anything was sent to the arm.

    ``waypoint`` is the index of the first offending waypoint (or sample) when one applies and
    ``joint`` the offending joint name.
    """

    def __init__(self, reason: Reason, message: str, *, waypoint: int | None = None, joint: str | None = None) -> None:
        super().__init__(f"{reason.value}: {message}", reason=reason)
        self.waypoint = waypoint
        self.joint = joint


class GripperError(ArmError):
    """The gripper refused a command or reported a failure."""

    reason = Reason.GRIPPER
