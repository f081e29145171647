"""Keeps the planner's collision world fresh: a fixed table and boxes plus the latest depth cloud.

The cloud (base frame, e.g. the projection node's workspace cloud) is cropped to the workspace, has
the robot masked out with the sphere model at the joint state of its capture time, and expires after
``max_cloud_age_s`` so a plan is never made against a stale view of the table.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.geometry.workspace import WorkspaceBox
from robopin.motion.errors import MotionConfigError, MotionError
from robopin.motion.robot import RobotModel
from robopin.motion.world import CollisionWorld


class StaleWorldError(MotionError):
    """The depth cloud the world needs is missing or older than allowed."""


@dataclass
class SceneConfig:
    """World settings of one workcell (metres, seconds). ``table_height_m`` None: no table slab."""

    workspace: WorkspaceBox = field(default_factory=lambda: WorkspaceBox((0.1, -0.6, -0.05), (0.9, 0.6, 0.8)))
    table_height_m: float | None = 0.0
    robot_mask_padding_m: float = 0.03
    voxel_size_m: float = 0.01
    max_cloud_age_s: float = 2.0
    require_cloud: bool = False
    min_cloud_height_m: float = 0.01  # points at or below the table top are the table (a primitive already)
    # With require_cloud, how long world() waits for a fresh cloud before refusing: the first one
    # can arrive a few seconds after start-up (cameras at ~1 Hz, DDS discovery).
    cloud_wait_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("robot_mask_padding_m", "voxel_size_m", "max_cloud_age_s"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0.0):
                raise MotionConfigError(f"SceneConfig.{name} must be > 0, got {value}")
        if not (np.isfinite(self.cloud_wait_s) and self.cloud_wait_s >= 0.0):
            raise MotionConfigError(f"SceneConfig.cloud_wait_s must be >= 0 s, got {self.cloud_wait_s}")


class SceneKeeper:
    """Builds the current :class:`CollisionWorld`; thread-safe (the cloud arrives on another thread)."""

    def __init__(self, robot: RobotModel, config: SceneConfig, spheres=None) -> None:
        from robopin.motion.curobo.spheres import RobotSpheres

        self.robot = robot
        self.config = config
        self.spheres = spheres if spheres is not None else RobotSpheres.fit(robot)
        self._lock = threading.Lock()
        self._cloud_arrived = threading.Condition(self._lock)
        self._points: NDArray[np.float64] | None = None
        self._stamp_s: float | None = None
        self.masked_points = 0

    def update_cloud(self, points: ArrayLike, q_at_capture: ArrayLike | None, stamp_s: float) -> int:
        """Take a new cloud; returns how many points remain after cropping and masking the robot."""
        array = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        array = array[np.all(np.isfinite(array), axis=1)]
        array = array[np.asarray(self.config.workspace.contains(array), dtype=bool)]
        if self.config.table_height_m is not None:
            array = array[array[:, 2] > self.config.table_height_m + self.config.min_cloud_height_m]
        masked = 0
        if q_at_capture is not None and len(array):
            on_robot = self.spheres.mask_points(array, np.asarray(q_at_capture), self.config.robot_mask_padding_m)
            masked = int(on_robot.sum())
            array = array[~on_robot]
        with self._lock:
            self._points, self._stamp_s, self.masked_points = array, float(stamp_s), masked
            self._cloud_arrived.notify_all()
        return len(array)

    def cloud_age_s(self, now_s: float) -> float | None:
        """Seconds since the last cloud was captured, None before the first."""
        with self._lock:
            return None if self._stamp_s is None else now_s - self._stamp_s

    def world(self, now_s: float, extra_boxes: dict | None = None) -> CollisionWorld:
        """The collision world now: table, ``extra_boxes`` (name → (size, T)) and a fresh cloud."""
        world = CollisionWorld(voxel_size_m=self.config.voxel_size_m)
        if self.config.table_height_m is not None:
            world.add_table(self.config.table_height_m - 0.002)
        for name, (size, T) in (extra_boxes or {}).items():
            world.add_box(name, size, T)
        with self._lock:
            points, stamp = self._points, self._stamp_s
            fresh = stamp is not None and now_s - stamp <= self.config.max_cloud_age_s
            if self.config.require_cloud and not fresh and self.config.cloud_wait_s > 0.0:
                # Wait (bounded) for the next cloud; now_s moves on by the time waited.
                started = time.monotonic()
                self._cloud_arrived.wait_for(
                    lambda: self._stamp_s is not None and self._stamp_s != stamp, self.config.cloud_wait_s
                )
                now_s += time.monotonic() - started
                points, stamp = self._points, self._stamp_s
                fresh = stamp is not None and now_s - stamp <= self.config.max_cloud_age_s
        if self.config.require_cloud and not fresh:
            age = "no cloud yet" if stamp is None else f"cloud is {now_s - stamp:.2f} s old"
            raise StaleWorldError(f"{age}; max_cloud_age_s is {self.config.max_cloud_age_s}")
        if fresh and points is not None and len(points):
            world.set_point_cloud(points)
        return world

    def inside_workspace(self, point: ArrayLike) -> bool:
        """True when ``point`` (base frame) lies inside the configured workspace box."""
        return bool(self.config.workspace.contains(np.asarray(point, dtype=np.float64).reshape(1, 3))[0])
