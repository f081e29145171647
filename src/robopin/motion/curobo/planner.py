"""GPU backend: cuRobo v1 ``MotionGen`` (the API isaac_ros_cumotion uses) behind the robopin contract.

Importing this module needs no cuRobo; building a planner does (built from source, with a CUDA torch):
:func:`curobo_available` says whether both are there. The robot config is loaded and checked by
cuRobo's own rules before cuRobo is imported (:mod:`robopin.motion.curobo.robot_config`), so a bad
config is named on any machine. cuRobo plans its ee_link, so TCP goals are converted with the
offset between the two; the world is mirrored as cuboids (boxes and occupancy voxels from the depth
cloud), cleared first because cuRobo keeps old obstacles when a world has none; a held object is
attached to the robot's ``attached_object`` link. Every returned trajectory still goes through the
robopin dense collision check on the pinocchio model before it leaves the planner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from robopin.motion.curobo.config import CuroboPlannerConfig
from robopin.motion.curobo.conversions import (
    matrix_to_curobo_pose,
    status_from_curobo,
    tcp_goal_to_link_goal,
    trajectory_from_curobo,
    world_to_curobo_dict,
)
from robopin.motion.curobo.robot_config import PreparedRobotConfig, prepare_robot_config
from robopin.motion.curobo.spheres import robot_config_path
from robopin.motion.errors import BackendUnavailableError
from robopin.motion.planner import MotionPlanner
from robopin.motion.robot import RobotModel
from robopin.motion.types import PlanResult, PlanStatus
from robopin.motion.world import CollisionWorld

logger = logging.getLogger(__name__)


def curobo_available() -> tuple[bool, str]:
    """Whether cuRobo and a CUDA device can be used here, and why not."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    try:
        import curobo  # noqa: F401
    except ImportError:
        return False, "cuRobo is not installed (it is built from source, see docker/ CUDA image)"
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    return True, ""


def time_dilation_for(config: CuroboPlannerConfig, velocity_scale: float | None) -> float:
    """cuRobo's ``MotionGenPlanConfig.time_dilation_factor`` for a request.

    cuRobo stretches the optimised dt by 1 / factor (``MotionGenResult.retime_trajectory``), so
    velocities scale by the factor: a request's ``velocity_scale`` is the factor; without one, the
    configured default.
    """
    if not velocity_scale:
        return float(config.time_dilation_factor)
    scale = float(velocity_scale)
    if not 0.0 < scale <= 1.0:
        from robopin.motion.errors import MotionConfigError

        raise MotionConfigError(f"velocity_scale must be in (0, 1], got {velocity_scale}")
    return scale


def _import_curobo():
    ok, why = curobo_available()
    if not ok:
        raise BackendUnavailableError(f"the 'curobo' planner cannot run here: {why}")
    import torch
    from curobo.geom.sdf.world import CollisionCheckerType
    from curobo.geom.types import Cuboid, WorldConfig
    from curobo.types.base import TensorDeviceType
    from curobo.types.math import Pose
    from curobo.types.state import JointState
    from curobo.wrap.reacher.motion_gen import MotionGen, MotionGenConfig, MotionGenPlanConfig

    return {
        "torch": torch,
        "CollisionCheckerType": CollisionCheckerType,
        "Cuboid": Cuboid,
        "WorldConfig": WorldConfig,
        "TensorDeviceType": TensorDeviceType,
        "Pose": Pose,
        "JointState": JointState,
        "MotionGen": MotionGen,
        "MotionGenConfig": MotionGenConfig,
        "MotionGenPlanConfig": MotionGenPlanConfig,
    }


class CuroboPlanner(MotionPlanner):
    """cuRobo MotionGen (graph search + parallel trajectory optimisation on the GPU)."""

    config_class = CuroboPlannerConfig
    config: CuroboPlannerConfig

    def __init__(self, config: CuroboPlannerConfig, robot: RobotModel | None = None) -> None:
        super().__init__(config, robot)
        self.prepared: PreparedRobotConfig = prepare_robot_config(
            config.robot_file or robot_config_path(config.robot), self.robot
        )
        self._cu = _import_curobo()
        cu = self._cu
        self._tensor_args = cu["TensorDeviceType"](device=cu["torch"].device(config.device))
        self._robot_cfg = self.prepared.robot_cfg
        self._dropped_voxels = 0
        checker = cu["CollisionCheckerType"][
            {"primitive": "PRIMITIVE", "mesh": "MESH", "voxel": "VOXEL", "blox": "BLOX"}[config.collision_checker]
        ]
        world = cu["WorldConfig"].from_dict(self._world_dict(self.world))
        motion_gen_config = cu["MotionGenConfig"].load_from_robot_config(
            self._robot_cfg,
            world,
            self._tensor_args,
            interpolation_dt=config.interpolation_dt_s,
            collision_checker_type=checker,
            num_trajopt_seeds=config.num_trajopt_seeds,
            num_graph_seeds=config.num_graph_seeds,
            use_cuda_graph=config.use_cuda_graph,
            collision_cache={"obb": config.max_world_cuboids},
        )
        self._motion_gen = cu["MotionGen"](motion_gen_config)
        self._curobo_joint_names = list(self._motion_gen.kinematics.joint_names)
        self._attached_name: str | None = None
        self.warmup_time_s = float("nan")
        if config.warmup_on_start:
            self.warmup()

    def _world_dict(self, world: CollisionWorld) -> dict:
        mapping, dropped = world_to_curobo_dict(
            world, voxel_size_m=self.config.voxel_size_m, max_cuboids=self.config.max_world_cuboids
        )
        if dropped:
            logger.warning(
                "%s: %d cloud voxels farthest from the base do not fit max_world_cuboids=%d and are not "
                "in cuRobo's world (robopin's dense check still sees them)",
                self,
                dropped,
                self.config.max_world_cuboids,
            )
        self._dropped_voxels = dropped
        return mapping

    def warmup(self) -> None:
        """Build CUDA graphs and caches now (seconds to tens of seconds), not on the first request."""
        super().warmup()
        began = time.perf_counter()
        self._motion_gen.warmup(enable_graph=True)
        self.warmup_time_s = time.perf_counter() - began
        logger.info("%s warmed up in %.1f s", self, self.warmup_time_s)

    def update_world(self, world: CollisionWorld) -> None:
        """Mirror ``world`` into cuRobo (obstacles, and the held object on the robot)."""
        super().update_world(world)
        cu = self._cu
        # WorldPrimitiveCollision._load_collision_model_in_cache returns early on a world without
        # cuboids, keeping the old ones enabled: clear the cache first.
        self._motion_gen.clear_world_cache()
        self._motion_gen.update_world(cu["WorldConfig"].from_dict(self._world_dict(world)))
        if self._attached_name is not None and world.attached is None:
            self._motion_gen.detach_object_from_robot()
            self._attached_name = None

    def _attach(self, start: NDArray[np.float64]) -> None:
        attached = self.world.attached
        if attached is None or attached.name == self._attached_name:
            return
        cu = self._cu
        T_base_object = self.robot.forward_kinematics(start) @ attached.T_ee_object
        cuboid = cu["Cuboid"](name=attached.name, pose=matrix_to_curobo_pose(T_base_object), dims=list(attached.size_m))
        self._motion_gen.attach_external_objects_to_robot(self._joint_state(start), [cuboid])
        self._attached_name = attached.name

    def _joint_state(self, q: NDArray[np.float64]):
        cu = self._cu
        full = np.array([q[self.joint_names.index(n)] for n in self._curobo_joint_names], dtype=np.float32)
        position = self._tensor_args.to_device(full[None, :])
        return cu["JointState"].from_position(position, joint_names=self._curobo_joint_names)

    def _plan_config(self, timeout_s: float | None, velocity_scale: float | None):
        cu = self._cu
        return cu["MotionGenPlanConfig"](
            max_attempts=self.config.max_attempts,
            enable_graph_attempt=2,
            timeout=float(self.config.timeout_s if timeout_s is None else timeout_s),
            time_dilation_factor=time_dilation_for(self.config, velocity_scale),
        )

    def _result(self, result, started: float) -> PlanResult:
        success = bool(result.success.view(-1)[0].item()) if result.success is not None else False
        status = status_from_curobo(result.status, success)
        if status is not PlanStatus.SUCCESS:
            return PlanResult(status, time.perf_counter() - started, message=f"cuRobo: {result.status}")
        plan = result.get_interpolated_plan()
        trajectory = trajectory_from_curobo(
            self.joint_names,
            list(plan.joint_names),
            plan.position.cpu().numpy(),
            plan.velocity.cpu().numpy(),
            plan.acceleration.cpu().numpy(),
            dt_s=float(result.interpolation_dt),
        )
        verified = self._verified(trajectory, trajectory.positions, started)
        verified.details["curobo_solve_time_s"] = float(result.solve_time)
        verified.details["curobo_dropped_voxels"] = self._dropped_voxels
        return verified

    def plan_to_pose(self, q_start: Sequence[float], T_base_ee, *, velocity_scale=None, timeout_s=None) -> PlanResult:
        """Plan with cuRobo to a TCP pose (the first of several candidates that succeeds)."""
        started = time.perf_counter()
        start = self._as_configuration(q_start, "q_start")
        checked = self._check_endpoints(start, None)
        if checked is not None:
            return PlanResult(checked[0], time.perf_counter() - started, message=checked[1])
        self._attach(start)
        cu = self._cu
        last = PlanResult(PlanStatus.IK_FAIL, 0.0)
        for T in self._as_pose_list(T_base_ee):
            link_goal = tcp_goal_to_link_goal(T, self.prepared.T_ee_tcp)
            pose = matrix_to_curobo_pose(link_goal)
            goal = cu["Pose"](
                position=self._tensor_args.to_device(np.asarray([pose[:3]], dtype=np.float32)),
                quaternion=self._tensor_args.to_device(np.asarray([pose[3:]], dtype=np.float32)),
            )
            result = self._motion_gen.plan_single(
                self._joint_state(start), goal, self._plan_config(timeout_s, velocity_scale)
            )
            last = self._result(result, started)
            if last.success:
                return last
        return last

    def plan_to_joints(self, q_start, q_goal, *, velocity_scale=None, timeout_s=None) -> PlanResult:
        """Plan with cuRobo to a joint configuration."""
        started = time.perf_counter()
        start = self._as_configuration(q_start, "q_start")
        goal = self._as_configuration(q_goal, "q_goal")
        checked = self._check_endpoints(start, goal)
        if checked is not None:
            return PlanResult(checked[0], time.perf_counter() - started, message=checked[1])
        self._attach(start)
        result = self._motion_gen.plan_single_js(
            self._joint_state(start), self._joint_state(goal), self._plan_config(timeout_s, velocity_scale)
        )
        return self._result(result, started)

    def _solve_path(self, start, goal, timeout_s):  # pragma: no cover - plan_to_* are overridden
        raise NotImplementedError("cuRobo plans whole trajectories; see plan_to_pose / plan_to_joints")
