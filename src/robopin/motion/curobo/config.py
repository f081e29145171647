"""Configuration of the cuRobo backend (plain dataclass: importable without CUDA or cuRobo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from robopin.motion.errors import MotionConfigError
from robopin.motion.planner import PlannerConfig

COLLISION_CHECKERS = ("primitive", "mesh", "voxel", "blox")


@dataclass
class CuroboPlannerConfig(PlannerConfig):
    """cuRobo v1 ``MotionGen`` settings; defaults follow isaac_ros_cumotion's parameters."""

    type: ClassVar[str] = "curobo"
    # cuRobo robot yml; empty = robopin's own for the robot (robots/panda.yml for Panda and FR3,
    # robots/xarm6.yml), generated from the URDF robopin plans and checks with.
    robot_file: str = ""
    interpolation_dt_s: float = 0.025
    num_trajopt_seeds: int = 6
    num_graph_seeds: int = 6
    max_attempts: int = 10
    time_dilation_factor: float = 0.5  # used when a request gives no velocity_scale (that one wins)
    collision_checker: str = "primitive"  # primitive (cuboids, incl. voxelised depth) | mesh | voxel | blox
    voxel_size_m: float = 0.05  # occupancy voxels made from the depth point cloud
    # cuRobo's preallocated obstacle cache (its collision_cache "obb"): with CUDA graphs the world cannot
    # grow past it. Cloud voxels beyond it are dropped farthest-from-the-base first, with a warning and
    # the count in each plan's details (curobo_dropped_voxels).
    max_world_cuboids: int = 400
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
        if not self.robot_file:
            from robopin.motion.curobo.spheres import ROBOT_FILES

            if self.robot not in ROBOT_FILES:
                raise MotionConfigError(
                    f"no cuRobo robot config known for robot {self.robot!r} (known: {sorted(ROBOT_FILES)}); "
                    "set robot_file"
                )
