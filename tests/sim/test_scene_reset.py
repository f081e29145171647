"""A world laid out anew (``reset_scene``, how a batch moves its one stack to the next trial) is the world a fresh
``build_scene`` gives: the same bodies, rest poses, renders (through the render worker) and physics from there."""

from __future__ import annotations

import numpy as np

from robopin.sim.tasks import build_scene, get_scene, reset_scene

from .helpers import unique_world_name


def _poses(scene) -> dict[str, np.ndarray]:
    return {name: scene.world.object_pose(name) for name in scene.world.objects}


def test_a_reset_world_is_the_fresh_world_of_the_new_seed():
    name = unique_world_name("reset")
    scene = build_scene("long_horizon", 0, world_name=name, robot="panda")
    fresh = build_scene("long_horizon", 3, world_name=unique_world_name("fresh"), robot="panda")
    current = scene
    try:
        world = scene.world
        world.start_render_worker()  # as in `robopin up`: the worker's mirror is rebuilt too
        calls = []
        world.add_step_callback(calls.append)  # an attached controller stays attached
        world.step(10)
        before_s = world.sim_time_s
        old = scene.world.objects.copy()
        reset = current = reset_scene(scene, 3)
        assert reset.world is world and world.name == name and get_scene(name) is reset
        assert reset.seed == 3 and reset.task == fresh.task and set(world.objects) == set(fresh.world.objects)
        assert set(old) != set(world.objects) or any(
            not np.allclose(scene.initial_positions[n], reset.initial_positions[n]) for n in old)
        assert world.sim_time_s > before_s  # the simulated clock only moves on (stamps stay monotonic)
        assert [world.objects[n].body_id for n in sorted(world.objects)] == [
            fresh.world.objects[n].body_id for n in sorted(world.objects)]
        for name_, pose in _poses(fresh).items():
            np.testing.assert_allclose(world.object_pose(name_), pose, atol=1e-9, err_msg=name_)
        np.testing.assert_allclose(world.joint_positions(), fresh.world.joint_positions(), atol=1e-9)
        for view in ("static", "wrist"):
            mine, theirs = world.render(view), fresh.world.render(view)
            assert np.array_equal(mine.color, theirs.color), view
            assert np.array_equal(mine.depth_m, theirs.depth_m, equal_nan=True), view  # depth noise drawn alike
            assert np.array_equal(mine.segmentation, theirs.segmentation), view
        assert world._render_worker is not None and world._worker_recipe == len(world._recipe)
        ticks = len(calls)
        world.step(240)
        fresh.world.step(240)
        assert len(calls) == ticks + 240
        for name_, pose in _poses(fresh).items():
            np.testing.assert_allclose(world.object_pose(name_), pose, atol=1e-9, err_msg=name_)
    finally:
        current.close()  # the registered scene: unregistered, and the world closed
        fresh.close()
