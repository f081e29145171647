"""The collision world a planner plans against: box primitives, a point cloud, a held object.

Pure data with a version counter, so every backend (pinocchio/coal, roboplan, cuRobo) rebuilds its
own representation only when something changed. Point clouds are in the base frame (from
:func:`robopin.geometry.pointcloud.depth_to_point_cloud`) with the robot already masked out
(:meth:`robopin.motion.curobo.spheres.RobotSpheres.mask_points`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.motion.errors import WorldError
from robopin.motion.types import AttachedObject, Box

TABLE_BOX_NAME = "table"
"""Name of the slab :meth:`CollisionWorld.add_table` adds (the support surface picks clamp to)."""
CLOUD_GEOMETRY_NAME = "world/point_cloud"
"""The collision geometry the point cloud becomes in the robot model (as contact pairs name it)."""


@dataclass
class CollisionWorld:
    """Obstacles in the base frame. Mutate only through the methods so ``version`` stays honest."""

    boxes: dict[str, Box] = field(default_factory=dict)
    points: NDArray[np.float64] | None = None
    voxel_size_m: float = 0.02
    attached: AttachedObject | None = None
    version: int = 0

    def add_box(self, name: str, size_m: ArrayLike, T_base_box: ArrayLike) -> Box:
        """Add (or replace) the box ``name``; returns it."""
        box = Box(name, tuple(np.asarray(size_m, dtype=np.float64).reshape(-1)), np.asarray(T_base_box))
        self.boxes[name] = box
        self.version += 1
        return box

    def add_table(
        self,
        top_height_m: float,
        *,
        size_xy_m: tuple[float, float] = (2.0, 2.0),
        thickness_m: float = 0.05,
        name: str = TABLE_BOX_NAME,
    ) -> Box:
        """Add a horizontal slab whose top face lies at ``top_height_m`` (base z)."""
        T = np.eye(4)
        T[2, 3] = top_height_m - thickness_m / 2.0
        return self.add_box(name, (size_xy_m[0], size_xy_m[1], thickness_m), T)

    def remove(self, name: str) -> None:
        """Remove the box ``name``; raises WorldError when there is none."""
        if name not in self.boxes:
            raise WorldError(f"no box named {name!r} in the world; have {sorted(self.boxes)}")
        del self.boxes[name]
        self.version += 1

    def set_point_cloud(self, points: ArrayLike, voxel_size_m: float | None = None) -> None:
        """Replace the point-cloud obstacle by ``points`` (N×3, base frame, robot already removed)."""
        array = np.asarray(points, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != 3:
            raise WorldError(f"point cloud must be an N×3 array, got shape {array.shape}")
        array = array[np.all(np.isfinite(array), axis=1)]
        if voxel_size_m is not None:
            if not voxel_size_m > 0.0:
                raise WorldError(f"voxel_size_m must be > 0, got {voxel_size_m}")
            self.voxel_size_m = float(voxel_size_m)
        self.points = array
        self.version += 1

    def attach(self, name: str, size_m: ArrayLike, T_ee_object: ArrayLike) -> AttachedObject:
        """Carry a box-shaped object in the gripper (it then collides with the world and the arm)."""
        self.attached = AttachedObject(
            name, tuple(np.asarray(size_m, dtype=np.float64).reshape(-1)), np.asarray(T_ee_object)
        )
        self.version += 1
        return self.attached

    def detach(self) -> None:
        """Release the held object."""
        self.attached = None
        self.version += 1

    def copy(self) -> CollisionWorld:
        """An independent copy (same version number)."""
        return CollisionWorld(
            boxes=dict(self.boxes),
            points=None if self.points is None else self.points.copy(),
            voxel_size_m=self.voxel_size_m,
            attached=self.attached,
            version=self.version,
        )
