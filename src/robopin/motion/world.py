"""The collision world a planner plans against: box primitives, a point cloud, a held object.

Pure data with a version counter, so every backend (pinocchio/coal, roboplan, cuRobo) rebuilds its
own representation only when something changed. Point clouds are in the base frame, with the robot
already masked out (:func:`points_from_depth` and :class:`robopin.motion.spheres.RobotSpheres`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.motion.errors import WorldError
from robopin.motion.types import AttachedObject, Box


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
        name: str = "table",
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

    def clear_point_cloud(self) -> None:
        """Forget the point-cloud obstacle."""
        self.points = None
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


def voxel_downsample(points: ArrayLike, voxel_size_m: float) -> NDArray[np.float64]:
    """One point per occupied voxel (the centroid of its points)."""
    array = np.asarray(points, dtype=np.float64)
    if len(array) == 0:
        return array.reshape(0, 3)
    keys = np.floor(array / voxel_size_m).astype(np.int64)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    sums = np.zeros((len(counts), 3))
    np.add.at(sums, inverse.reshape(-1), array)
    return sums / counts[:, None]


def points_from_depth(
    depth_m: ArrayLike,
    intrinsics: ArrayLike,
    T_base_camera: ArrayLike,
    *,
    stride: int = 4,
    min_depth_m: float = 0.1,
    max_depth_m: float = 2.0,
) -> NDArray[np.float64]:
    """Deproject a depth image (metres along the optical axis) into base-frame points.

    ``intrinsics`` is the 3x3 K of the optical frame (z forward, x right, y down); pixel centres are
    at u + 0.5. Every ``stride``-th pixel in each direction is used; invalid depth (0, NaN, out of
    range) is skipped.
    """
    depth = np.asarray(depth_m, dtype=np.float64)
    K = np.asarray(intrinsics, dtype=np.float64)
    if depth.ndim != 2 or K.shape != (3, 3):
        raise WorldError(f"need a 2-D depth image and a 3x3 K, got {depth.shape} and {K.shape}")
    rows, cols = np.mgrid[0 : depth.shape[0] : stride, 0 : depth.shape[1] : stride]
    z = depth[rows, cols]
    valid = np.isfinite(z) & (z >= min_depth_m) & (z <= max_depth_m)
    u = cols[valid] + 0.5
    v = rows[valid] + 0.5
    z = z[valid]
    x = (u - K[0, 2]) * z / K[0, 0]
    y = (v - K[1, 2]) * z / K[1, 1]
    camera_points = np.stack([x, y, z], axis=1)
    T = np.asarray(T_base_camera, dtype=np.float64)
    return camera_points @ T[:3, :3].T + T[:3, 3]
