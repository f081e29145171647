"""Motion planning: collision world, planner backends (CPU: roboplan, OMPL; GPU: cuRobo), grasp and
place primitives, and pick-and-place sequencing. Heavy libraries load only when a backend is built."""

from robopin.motion.errors import (
    BackendUnavailableError,
    MotionConfigError,
    MotionError,
    UnknownPlannerError,
    UnknownRobotError,
    WorldError,
)
from robopin.motion.grasps import GraspConfig, grasp_candidates, place_candidates
from robopin.motion.pick_place import PickPlaceConfig, PickPlacePlan, plan_pick_place
from robopin.motion.planner import (
    MotionPlanner,
    OmplPlannerConfig,
    PlannerConfig,
    RoboplanPlannerConfig,
    make_planner,
    planner_config_from_dict,
)
from robopin.motion.types import AttachedObject, Box, JointTrajectory, PlanResult, PlanStatus
from robopin.motion.world import CollisionWorld

__all__ = [
    "AttachedObject",
    "BackendUnavailableError",
    "Box",
    "CollisionWorld",
    "GraspConfig",
    "JointTrajectory",
    "MotionConfigError",
    "MotionError",
    "MotionPlanner",
    "OmplPlannerConfig",
    "PickPlaceConfig",
    "PickPlacePlan",
    "PlanResult",
    "PlanStatus",
    "PlannerConfig",
    "RoboplanPlannerConfig",
    "UnknownPlannerError",
    "UnknownRobotError",
    "WorldError",
    "grasp_candidates",
    "make_planner",
    "place_candidates",
    "plan_pick_place",
    "planner_config_from_dict",
]
