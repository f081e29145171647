"""Loop stages on the pybullet workcell (``robopin.sim``), for tests that run a whole task in sim.

- :func:`sim_snapshot` renders every view now into a ``MultiViewSnapshot`` (with the arm pose),
  so :class:`~robopin.reasoning.snapshot_stages.SnapshotObserver` and ``SnapshotProjector`` work on it.
- :func:`sim_projector` is a ``robopin.geometry`` projector with the world's true camera mounts.
- :class:`SimScriptedPickPlace` stands in for motion planning + arm driver: it carries out the
  pick-and-place with the simulator's scripted controller on the object nearest the pick target,
  and stops mid-motion when told (a world step callback raises, the arm then holds its position).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from robopin.cameras import Frame, MultiViewSnapshot
from robopin.geometry import CameraMount, ProjectionConfig, Projector, ViewConfig, WorkspaceBox
from robopin.reasoning.protocols import MotionOutcome
from robopin.reasoning.snapshot_stages import SnapshotObserver, SnapshotProjector
from robopin.sim.scripted import ScriptedMotionError, pick_and_place
from robopin.sim.tasks import Scene

VIEWS = ("static", "wrist")
WORKSPACE = WorkspaceBox((0.1, -0.6, -0.05), (0.95, 0.6, 0.6))


def frame_of(view, name: str, index: int, stamp_s: float, holes: np.ndarray | None = None) -> Frame:
    """A camera Frame of a rendered view (NaN where the sensor has no depth, or inside ``holes``)."""
    depth = view.depth_m.astype(np.float32).copy()
    depth[depth <= 0] = np.nan
    if holes is not None:
        depth[holes] = np.nan
    return Frame(view.color, depth, view.model, stamp_s, serial=f"sim/{name}", index=index, camera_name=name)


def sim_snapshot(scene: Scene, views=VIEWS) -> MultiViewSnapshot:
    """Render every view now: one synchronised snapshot with the arm pose for each frame."""
    stamp = time.time()
    rendered = [scene.world.render(name) for name in views]
    frames = {name: frame_of(view, name, 0, stamp) for name, view in zip(views, rendered, strict=True)}
    T_base_ee = scene.world.ee_pose()
    return MultiViewSnapshot(tuple(views), frames, {name: T_base_ee for name in views}, 0.0, 0.0)


def camera_mounts(scene: Scene, views=VIEWS) -> dict[str, CameraMount]:
    """The true mounts of the world's cameras (static: T_base_cam; wrist: T_ee_cam)."""
    mounts = {}
    for name in views:
        spec = scene.world.camera(name)
        kind = "wrist" if spec.mount == "ee" else "static"
        mounts[name] = CameraMount(kind, spec.T_mount_cam, "ee" if kind == "wrist" else "base")
    return mounts


def sim_projector(scene: Scene, views=VIEWS) -> Projector:
    mounts = camera_mounts(scene, views)
    views_config = [ViewConfig(name, index, mounts[name]) for index, name in enumerate(views)]
    return Projector(views_config, ProjectionConfig(workspace=WORKSPACE))


def sim_stages(scene: Scene, views=VIEWS) -> tuple[SnapshotObserver, SnapshotProjector]:
    return SnapshotObserver(lambda: sim_snapshot(scene, views)), SnapshotProjector(sim_projector(scene, views))


class _StopRequestedError(ScriptedMotionError):
    pass


class SimScriptedPickPlace:
    """Pick the object nearest the pick target and place it at the place target (see module docstring)."""

    def __init__(self, scene: Scene, max_pick_distance_m: float = 0.06) -> None:
        self.scene = scene
        self.max_pick_distance_m = max_pick_distance_m
        self.calls: list[tuple[str, np.ndarray, bool]] = []
        self.lock = threading.Lock()

    def nearest_object(self, point: np.ndarray) -> tuple[str | None, float]:
        world = self.scene.world
        best, best_distance = None, float("inf")
        for obj in world.objects.values():
            if not obj.graspable:
                continue
            low, high = world.object_aabb(obj.name)
            closest = np.clip(point, low, high)  # distance to the box, not its centre: big toys too
            distance = float(np.linalg.norm(closest - point))
            if distance < best_distance:
                best, best_distance = obj.name, distance
        return best, best_distance

    def run(self, pick_point, place_point, *, dry_run: bool, should_stop=lambda: False) -> MotionOutcome:
        """Carry out (or, dry run, only check) one pick-and-place; returns a named status."""
        name, distance = self.nearest_object(np.asarray(pick_point, dtype=float))
        with self.lock:
            self.calls.append((name or "", np.asarray(place_point, dtype=float), dry_run))
        if name is None or distance > self.max_pick_distance_m:
            message = f"no object within {self.max_pick_distance_m} m of the pick"
            return MotionOutcome(False, "nothing_to_grasp", message)
        if dry_run:
            return MotionOutcome(True, "success", f"would pick {name}")
        world = self.scene.world

        def check_stop(_t: float) -> None:
            if should_stop():
                raise _StopRequestedError("canceled")

        world.add_step_callback(check_stop)
        try:
            outcome = pick_and_place(world, name, np.asarray(place_point, dtype=float), home_q=self.scene.observe_q)
        finally:
            world.remove_step_callback(check_stop)
        if outcome.message == "canceled":
            world.set_arm_targets(world.joint_positions())  # hold where it stopped
            return MotionOutcome(False, "canceled", f"stopped while {outcome.phases[-1]} {name}", executed=True)
        if not outcome.grasped or outcome.message:
            return MotionOutcome(False, "grasp_failed", outcome.message or f"{name} not held", executed=True)
        return MotionOutcome(True, "success", f"picked {name}", executed=True)

    def pick_place(self, pick, place, *, dry_run, on_stage, should_stop) -> MotionOutcome:
        on_stage("planning", "scripted")
        if not dry_run:
            on_stage("executing", "scripted pick-and-place")
        return self.run(pick.point, place.point, dry_run=dry_run, should_stop=should_stop)
