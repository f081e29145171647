"""Simulated tasks: scenario specs (``scenarios/*.yaml``), seeded layouts, scene building, success checks."""

from robopin.sim.tasks.errors import LayoutError, ScenarioError
from robopin.sim.tasks.layouts import (
    LAYOUTS,
    WORKSPACE_MAX_RADIUS_M,
    WORKSPACE_X,
    WORKSPACE_Y,
    Layout,
    Placement,
    layout_reach_m,
)
from robopin.sim.tasks.scene import (
    Scene,
    build_scene,
    check_success,
    get_scene,
    observation_configuration,
    reset_scene,
)
from robopin.sim.tasks.spec import (
    SCENARIO_DIR,
    TASK_TYPES,
    ScenarioSpec,
    StaticCameraConfig,
    WristCameraConfig,
    list_scenarios,
    load_scenario,
    scenario_from_dict,
)
from robopin.sim.tasks.success import GoalResult, PlaceGoal, SuccessReport, TaskSpec, on_plate

__all__ = [
    "LAYOUTS",
    "SCENARIO_DIR",
    "TASK_TYPES",
    "WORKSPACE_MAX_RADIUS_M",
    "WORKSPACE_X",
    "WORKSPACE_Y",
    "GoalResult",
    "Layout",
    "LayoutError",
    "PlaceGoal",
    "Placement",
    "ScenarioError",
    "ScenarioSpec",
    "Scene",
    "StaticCameraConfig",
    "SuccessReport",
    "TaskSpec",
    "WristCameraConfig",
    "build_scene",
    "check_success",
    "get_scene",
    "layout_reach_m",
    "list_scenarios",
    "load_scenario",
    "observation_configuration",
    "on_plate",
    "reset_scene",
    "scenario_from_dict",
]
