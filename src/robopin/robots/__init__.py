"""Arm drivers (xArm, Franka, simulator) behind one safe interface; see :mod:`robopin.robots.base`."""

from robopin.robots.base import (
    Arm,
    ArmConfig,
    JointTrajectory,
    make_arm,
    make_arm_config,
)
from robopin.robots.description import RobotDescription, load_description
from robopin.robots.errors import ArmError, Reason, SafetyViolationError
from robopin.robots.safety import SafetyConfig

__all__ = [
    "Arm",
    "ArmConfig",
    "ArmError",
    "JointTrajectory",
    "Reason",
    "RobotDescription",
    "SafetyConfig",
    "SafetyViolationError",
    "load_description",
    "make_arm",
    "make_arm_config",
]
