"""Configuration of the cuRobo backend (plain dataclass: importable without CUDA or cuRobo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from robopin.motion.errors import MotionConfigError
from robopin.motion.planner import PlannerConfig

# cuRobo v1 ships a Franka config; the xArm 6 one is ours (robots/xarm6.yml, spheres fitted to the URDF).
SHIPPED_ROBOT_FILES = {"panda": "franka.yml"}
COLLISION_CHECKERS = ("primitive", "mesh", "voxel", "blox")


@dataclass
class CuroboPlannerConfig(PlannerConfig):
    """cuRobo v1 ``MotionGen`` settings; defaults follow isaac_ros_cumotion's parameters."""

    type: ClassVar[str] = "curobo"
    robot_file: str = ""  # cuRobo robot yml; empty = shipped Franka config or robopin's xArm 6 config
    interpolation_dt_s: float = 0.025
    num_trajopt_seeds: int = 6
    num_graph_seeds: int = 6
    max_attempts: int = 10
    time_dilation_factor: float = 0.5
    collision_checker: str = "primitive"  # primitive (cuboids, incl. voxelised depth) | mesh | voxel | blox
    voxel_size_m: float = 0.05  # occupancy voxels made from the depth point cloud
    max_world_cuboids: int = 400  # cuRobo's preallocated obstacle cache; cloud voxels beyond it are dropped
    use_cuda_graph: bool = True
    warmup_on_start: bool = True
    device: str = "cuda:0"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.collision_checker not in COLLISION_CHECKERS:
            raise MotionConfigError(
                f"collision_checker {self.collision_checker!r} is unknown; expected one of {COLLISION_CHECKERS}"
            )
        for name in ("num_trajopt_seeds", "num_graph_seeds", "max_attempts", "max_world_cuboids"):
            if getattr(self, name) < 1:
                raise MotionConfigError(f"CuroboPlannerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.time_dilation_factor <= 1.0:
            raise MotionConfigError(f"time_dilation_factor must be in (0, 1], got {self.time_dilation_factor}")
        if not self.interpolation_dt_s > 0.0 or not self.voxel_size_m > 0.0:
            raise MotionConfigError(
                f"interpolation_dt_s and voxel_size_m must be > 0, got {self.interpolation_dt_s}, {self.voxel_size_m}"
            )
        if not self.robot_file and self.robot not in SHIPPED_ROBOT_FILES and self.robot != "xarm6":
            raise MotionConfigError(f"no cuRobo robot config known for robot {self.robot!r}; set robot_file")
