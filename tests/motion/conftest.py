"""Shared planners and robot models for the motion tests (loading a URDF model takes about a second)."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.motion.planner import OmplPlannerConfig, RoboplanPlannerConfig, make_planner
from robopin.motion.robot import RobotModel, robot_spec

ROBOTS = ("panda", "xarm6")
CPU_BACKENDS = {"roboplan": RoboplanPlannerConfig, "ompl": OmplPlannerConfig}

_models: dict[str, RobotModel] = {}
_planners: dict[tuple[str, str], object] = {}


def robot_model(name: str) -> RobotModel:
    """One RobotModel per robot for the whole run (tests must restore any world they set)."""
    if name not in _models:
        _models[name] = RobotModel(robot_spec(name))
    return _models[name]


def planner(backend: str, robot: str):
    """One planner per (backend, robot) for the whole run, each with its own robot model."""
    key = (backend, robot)
    if key not in _planners:
        _planners[key] = make_planner(CPU_BACKENDS[backend](robot=robot, timeout_s=3.0))
        _planners[key].warmup()
    return _planners[key]


def top_down(x: float, y: float, z: float, yaw: float = 0.0) -> np.ndarray:
    """A TCP pose pointing straight down at (x, y, z)."""
    from robopin.motion.grasps import top_down_rotation

    T = np.eye(4)
    T[:3, :3] = top_down_rotation(yaw)
    T[:3, 3] = [x, y, z]
    return T


@pytest.fixture(params=ROBOTS)
def robot_name(request) -> str:
    return request.param
