"""Build a scenario with a seed into a populated world, find the scene a world was built for, judge it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.sim.assets import CATALOG, asset
from robopin.sim.render import DepthNoiseConfig, SimCameraSpec
from robopin.sim.tasks.errors import LayoutError, ScenarioError
from robopin.sim.tasks.layouts import LAYOUTS, Layout, layout_reach_m
from robopin.sim.tasks.spec import ScenarioSpec, WristCameraConfig, load_scenario
from robopin.sim.tasks.success import GoalResult, SuccessReport, TaskSpec, on_plate
from robopin.sim.world import TABLE_TOP_Z, ByName, SimWorld, look_at


@dataclass
class Scene:
    """A built scenario: the world, its task, and where everything started."""

    spec: ScenarioSpec
    seed: int
    world: SimWorld
    task: TaskSpec
    layout: Layout
    initial_positions: dict[str, NDArray[np.float64]]
    observe_q: NDArray[np.float64]
    camera_names: tuple[str, ...] = ("static", "wrist")

    def close(self) -> None:
        _SCENES.discard(self.world.name, self)
        self.world.close()

    def __enter__(self) -> Scene:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SCENES: ByName[Scene] = ByName("no scene registered on world", ScenarioError)


def get_scene(world_name: str) -> Scene:
    """The scene built (registered) on the world called ``world_name``: how the oracle backend finds its task."""
    return _SCENES.get(world_name)


def build_scene(
    spec: ScenarioSpec | str,
    seed: int,
    *,
    world_name: str | None = None,
    robot: str | None = None,
    register: bool = True,
    max_layout_attempts: int = 20,
) -> Scene:
    """Build ``spec`` with ``seed``: same (spec, seed) always gives the same scene.

    The arm starts at the wrist camera's observation pose. A layout that runs out of room, or
    whose goal already holds once objects settle, is redrawn with a seed derived from the first,
    deterministically.
    """
    if isinstance(spec, str):
        spec = load_scenario(spec)
    robot = robot or spec.robot
    name = world_name or f"{spec.name}-{seed}"
    return _lay_out(spec, int(seed), robot, lambda: SimWorld(name, robot, seed=seed, register=register),
                    register=register, max_layout_attempts=max_layout_attempts)


def reset_scene(scene: Scene, seed: int, spec: ScenarioSpec | str | None = None, *,
                max_layout_attempts: int = 20) -> Scene:
    """Scenario ``spec`` (default: ``scene``'s) laid out with ``seed`` in ``scene``'s world, as :func:`build_scene`
    lays it out in a fresh one (same layout, bodies and physics): how a running stack moves on to its next trial, as
    an operator resets a real cell. The world keeps its name, clock and attached backends; the new scene takes the
    old one's place in the registry (the oracle finds it there). The caller makes sure the arm is idle.

    A scenario whose cameras differ is refused (:class:`ScenarioError`): the stack's camera intrinsics, transforms
    and calibrations were set up for the cameras it started with.
    """
    spec = scene.spec if spec is None else (load_scenario(spec) if isinstance(spec, str) else spec)
    differ = [what for what in ("static_camera", "wrist_camera", "depth_noise")
              if getattr(spec, what) != getattr(scene.spec, what)]
    if differ:
        raise ScenarioError(f"scenario {spec.name!r} differs from {scene.spec.name!r} in {', '.join(differ)}: "
                            "a running stack cannot switch to it (its cameras were set up for the first)")
    world = scene.world

    def emptied() -> SimWorld:
        world.reset(seed)
        return world

    registered = _SCENES.holds(world.name, scene)
    with world.held():  # cameras and the arm's state readers see the old layout or the new one, nothing between
        return _lay_out(spec, int(seed), world.model.name, emptied, register=registered,
                        max_layout_attempts=max_layout_attempts, keep_world=True)


def _lay_out(spec: ScenarioSpec, seed: int, robot: str, empty_world: Callable[[], SimWorld], *, register: bool,
             max_layout_attempts: int, keep_world: bool = False) -> Scene:
    """Draw layouts until one fits and its goal does not already hold; ``empty_world()`` gives the world to fill."""
    reach_m = layout_reach_m(robot)
    for attempt in range(max_layout_attempts):
        rng = np.random.default_rng([seed, attempt])
        try:
            layout = LAYOUTS[spec.layout](rng, spec.layout_params, reach_m)
        except LayoutError:
            continue
        scene = _populate(spec, seed, layout, empty_world(), close_on_error=not keep_world)
        if not any(on_plate(scene.world, g.object, g.target)[0] for g in scene.task.goals):
            if register:
                _SCENES.add(scene.world.name, scene, replace=True)
            return scene
        if not keep_world:
            scene.close()
    raise LayoutError(f"scenario {spec.name!r} seed {seed}: no layout fits after {max_layout_attempts} attempts")


def _populate(spec: ScenarioSpec, seed: int, layout: Layout, world: SimWorld, *, close_on_error: bool) -> Scene:
    try:
        for placement in layout.placements:
            if placement.kind not in CATALOG:
                raise ScenarioError(f"layout {spec.layout!r} placed unknown kind {placement.kind!r}")
            # Objects resting on a plate start just above its top surface.
            z = None
            for other in layout.placements:
                if (
                    other.kind == "plate"
                    and other is not placement
                    and placement.kind != "plate"
                    and (
                        math.hypot(placement.xy[0] - other.xy[0], placement.xy[1] - other.xy[1]) < (other.radius_m or 0)
                    )
                ):
                    z = TABLE_TOP_Z + asset("plate").size_m[2] + 0.002
            world.add_object(
                placement.kind,
                placement.name,
                placement.xy,
                placement.yaw_rad,
                color=placement.color,
                radius_m=placement.radius_m,
                z_m=z,
            )
        noise = DepthNoiseConfig.realsense() if spec.depth_noise else DepthNoiseConfig()
        static = spec.static_camera
        world.add_camera(
            SimCameraSpec(
                "static",
                look_at(static.eye, static.target),
                vertical_fov_deg=static.vertical_fov_deg,
                depth_noise=noise,
            )
        )
        world.add_camera(
            SimCameraSpec(
                "wrist",
                world.model.T_ee_wrist_camera,
                mount="ee",
                vertical_fov_deg=spec.wrist_camera.vertical_fov_deg,
                depth_noise=noise,
            )
        )
        observe_q = observation_configuration(world, spec.wrist_camera)
        world.reset_arm(observe_q)
        world.settle(2.0)
        initial = {name: world.object_center(name) for name in world.objects}
    except Exception:
        if close_on_error:
            world.close()
        raise
    task = TaskSpec(spec.instruction, spec.task_type, layout.goals, layout.must_stay, dict(layout.roles))
    return Scene(spec, seed, world, task, layout, initial, observe_q)


def observation_configuration(world: SimWorld, wrist: WristCameraConfig) -> NDArray[np.float64]:
    """Joint positions that put the wrist camera at ``observe_eye`` looking at ``observe_target``.

    Image 'up' points away from the robot, so the hand keeps its usual yaw (ee x forward).
    """
    T_base_cam = look_at(wrist.observe_eye, wrist.observe_target, up=(1.0, 0.0, 0.0))
    T_base_ee = T_base_cam @ np.linalg.inv(world.model.T_ee_wrist_camera)
    q = world.inverse_kinematics(T_base_ee, q_seed=world.model.home_q, iterations=500)
    reached = world.forward_kinematics(q)
    if np.linalg.norm(reached[:3, 3] - T_base_ee[:3, 3]) > 0.02:
        raise ScenarioError(f"{world.model.name} cannot reach the wrist observation pose at {wrist.observe_eye}")
    return q


def check_success(scene: Scene) -> SuccessReport:
    """Judge the scene's current state against its task."""
    world, task = scene.world, scene.task
    results = []
    for goal in task.goals:
        ok, reason = on_plate(world, goal.object, goal.target)
        results.append(GoalResult(goal, ok, reason))
    violations = []
    for name in task.must_stay:
        moved = float(np.linalg.norm(world.object_center(name)[:2] - scene.initial_positions[name][:2]))
        if moved > task.stay_tolerance_m:
            violations.append(f"{name} moved {moved:.3f} m (must stay within {task.stay_tolerance_m} m)")
    goal_objects = {g.object for g in task.goals}
    for goal in task.goals:
        for obj in world.objects.values():
            if obj.graspable and obj.name not in goal_objects and obj.name not in task.must_stay:
                ok, _ = on_plate(world, obj.name, goal.target)
                was = scene.initial_positions[obj.name]
                if ok and np.linalg.norm(world.object_center(obj.name)[:2] - was[:2]) > task.stay_tolerance_m:
                    violations.append(f"{obj.name} was put on {goal.target} but is not part of the task")
    success = all(r.ok for r in results) and not violations
    return SuccessReport(success, tuple(results), tuple(dict.fromkeys(violations)))
