"""Keeps the planner's collision world fresh: a fixed table and boxes plus the latest depth cloud.

The cloud (base frame) is cropped to the workspace, has the robot masked out with the sphere model at
the joint state of its capture time, and expires after ``max_cloud_age_s``. A cloud captured before the
arm last moved is stale however young: the mask misses where the arm and its load were then, and they
would stay behind as phantom obstacles and phantom object points a grasp centres on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from robopin.geometry.workspace import WorkspaceBox
from robopin.motion.errors import MotionConfigError, MotionError
from robopin.motion.robot import RobotModel
from robopin.motion.world import CollisionWorld
from robopin.settings import check_fields, positive, setting


class StaleWorldError(MotionError):
    """The depth cloud the world needs is missing or older than allowed."""


@dataclass
class SceneConfig:
    """World settings of one workcell (metres, seconds). ``table_height_m`` None: no table slab."""

    workspace: WorkspaceBox = field(default_factory=lambda: WorkspaceBox((0.1, -0.6, -0.05), (0.9, 0.6, 0.8)))
    table_height_m: float | None = 0.0
    robot_mask_padding_m: float = setting(0.03, "padding around the robot's links removed from the obstacle cloud, "
                                                "metres", min=0.0)
    voxel_size_m: float = setting(0.01, "obstacle cloud voxel size, metres", min=0.0)
    max_cloud_age_s: float = setting(2.0, "an obstacle cloud older than this many seconds is stale", min=0.0)
    require_cloud: bool = setting(False, "refuse to plan without a fresh obstacle cloud")
    # Points at or below the table top are the table (a primitive already).
    min_cloud_height_m: float = setting(0.01, "cloud points at most this many metres above the table are the table, "
                                              "not obstacles")
    # With require_cloud, how long world() waits for a fresh cloud before refusing: the first one
    # can arrive a few seconds after start-up (cameras at ~1 Hz, DDS discovery).
    cloud_wait_s: float = setting(5.0, "seconds a goal waits for a cloud taken while the arm was still", min=0.0)
    arm_still_tolerance_rad: float = setting(0.005, "the arm moved when a joint leaves its rest pose by more than "
                                                    "this, rad", min=0.0)

    def __post_init__(self) -> None:
        check_fields(self, ("robot_mask_padding_m", "voxel_size_m", "max_cloud_age_s", "arm_still_tolerance_rad"),
                     positive, MotionConfigError, "> 0", prefix="SceneConfig.")
        if not (np.isfinite(self.cloud_wait_s) and self.cloud_wait_s >= 0.0):
            raise MotionConfigError(f"SceneConfig.cloud_wait_s must be >= 0 s, got {self.cloud_wait_s}")


class SceneKeeper:
    """Builds the current :class:`CollisionWorld`; thread-safe (the cloud arrives on another thread)."""

    def __init__(self, robot: RobotModel, config: SceneConfig, spheres=None,
                 clock: Callable[[], float] = time.time) -> None:
        """``clock``: now on the cell's clock, which stamps its clouds (wall time for a real cell, the simulator's
        time for a simulated one; a ROS node's clock is either)."""
        from robopin.motion.curobo.spheres import RobotSpheres

        self.robot = robot
        self.config = config
        self.clock = clock
        self.spheres = spheres if spheres is not None else RobotSpheres.shipped_or_fit(robot)
        self._lock = threading.Lock()
        self._cloud_arrived = threading.Condition(self._lock)
        self._points: NDArray[np.float64] | None = None
        self._stamp_s: float | None = None
        self.masked_points = 0
        self._rest_q: NDArray[np.float64] | None = None
        self._still_since_s: float | None = None
        self._changed_at_s: float | None = None  # when the scene itself last changed (a trial boundary)

    def update_joint_state(self, stamp_s: float, q: ArrayLike) -> None:
        """Track since when the arm has rested where it is (clouds from before then are stale)."""
        q = np.asarray(q, dtype=np.float64)
        tolerance = self.config.arm_still_tolerance_rad
        with self._lock:
            if self._rest_q is None or float(np.max(np.abs(q - self._rest_q))) > tolerance:
                self._rest_q, self._still_since_s = q.copy(), float(stamp_s)

    @property
    def arm_still_since_s(self) -> float | None:
        """When the arm came to the pose it rests at now (None before the first joint state)."""
        with self._lock:
            return self._still_since_s

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

    def forget_before(self, changed_at_s: float) -> None:
        """The scene changed at ``changed_at_s`` without the arm moving (the cell was reset between trials):
        clouds captured before then are stale whatever the arm did."""
        with self._lock:
            self._changed_at_s = float(changed_at_s)

    def restamp_cloud(self, stamp_s: float) -> None:
        """The last cloud again, captured at ``stamp_s``: the caller saw the same points at the same joint state
        (a still scene), whose cropping and robot masking would give the same points."""
        with self._lock:
            if self._stamp_s is None:
                raise ValueError("restamp_cloud before any update_cloud")
            self._stamp_s = max(self._stamp_s, float(stamp_s))
            self._cloud_arrived.notify_all()

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
            fresh = self._fresh(stamp, now_s)
            if self.config.require_cloud and not fresh and self.config.cloud_wait_s > 0.0:
                # Wait (bounded) for the next fresh cloud; now moves on (on the cell's clock) meanwhile.
                started = self.clock()
                self._cloud_arrived.wait_for(
                    lambda: self._fresh(self._stamp_s, now_s + self.clock() - started), self.config.cloud_wait_s
                )
                now_s += self.clock() - started
                points, stamp = self._points, self._stamp_s
                fresh = self._fresh(stamp, now_s)
            still_since, changed_at = self._still_since_s, self._changed_at_s
        if self.config.require_cloud and not fresh:
            if stamp is None:
                reason = "no cloud yet"
            elif changed_at is not None and stamp < changed_at:
                reason = f"the newest cloud was captured {changed_at - stamp:.2f} s before the scene was reset"
            elif still_since is not None and stamp < still_since:
                reason = (f"the newest cloud was captured {still_since - stamp:.2f} s before the arm came to rest "
                          f"where it is (the arm and anything it held would be phantom obstacles)")
            else:
                reason = f"cloud is {now_s - stamp:.2f} s old"
            raise StaleWorldError(
                f"{reason}; max_cloud_age_s is {self.config.max_cloud_age_s}, waited {self.config.cloud_wait_s} s"
            )
        if fresh and points is not None and len(points):
            world.set_point_cloud(points)
        return world

    def _fresh(self, stamp: float | None, now_s: float) -> bool:
        """Young enough and captured with the arm where it rests now (call with the lock held)."""
        if stamp is None or now_s - stamp > self.config.max_cloud_age_s:
            return False
        if self._changed_at_s is not None and stamp < self._changed_at_s:
            return False
        return self._still_since_s is None or stamp >= self._still_since_s

    def inside_workspace(self, point: ArrayLike) -> bool:
        """True when ``point`` (base frame) lies inside the configured workspace box."""
        return bool(self.config.workspace.contains(np.asarray(point, dtype=np.float64).reshape(1, 3))[0])
