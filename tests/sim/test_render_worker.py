"""Renders drawn in a worker process (render_worker.py) or reused for a still scene are the world's own renders.

Each test compares the worker's frame with TinyRenderer run on the world's own client at the same state;
moving bodies (the arm after a motion, settled objects) go through the worker's state mirroring. Bodies the
worker cannot know (created on the world's client directly) and a worker that died make the world render
in its own process again, with the same frames. A scene in which nothing moved reuses its last render.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from robopin.sim.render import SimCameraSpec, camera_buffers
from robopin.sim.world import SimWorld, look_at

from .helpers import unique_world_name


@pytest.fixture
def world():
    world = SimWorld(unique_world_name("render-worker"), register=False)
    world.add_object("cube", "cube", [0.45, 0.12], 0.5, color="red")
    world.add_object("plate", "plate", [0.5, -0.2], color="green", radius_m=0.07)
    world.add_object("duck", "duck", [0.38, -0.05], 1.0)
    world.add_camera(SimCameraSpec("static", look_at([1.25, 0.0, 0.4], [0.5, 0.0, 0.0]), vertical_fov_deg=43))
    world.add_camera(SimCameraSpec("wrist", world.model.T_ee_wrist_camera, mount="ee", vertical_fov_deg=42))
    world.settle()
    yield world
    world.close()


def _own_render(world: SimWorld, camera: str):
    """TinyRenderer on the world's own client, at the world's state now."""
    with world.lock:
        return camera_buffers(world.client, world.camera(camera), world.camera_pose(camera))


def _assert_same_frame(world: SimWorld, camera: str) -> None:
    expected = _own_render(world, camera)
    view = world.render(camera)
    rgba, depth_buffer, segmentation = expected
    reference = world_view_from(world, camera, expected)
    np.testing.assert_array_equal(view.color, reference.color)
    np.testing.assert_array_equal(view.depth_m, reference.depth_m)
    np.testing.assert_array_equal(view.segmentation, reference.segmentation)
    assert rgba.shape[:2] == depth_buffer.shape == segmentation.shape


def world_view_from(world: SimWorld, camera: str, buffers):
    from robopin.sim.render import view_from_buffers

    return view_from_buffers(world.camera(camera), world.camera_pose(camera), world.sim_time_s, buffers)


def test_worker_frames_are_bit_identical_after_the_arm_and_objects_moved(world):
    world.start_render_worker()
    for camera in ("static", "wrist"):
        _assert_same_frame(world, camera)
    # The arm moves (the wrist camera with it) and the objects settle again: the mirror follows.
    q = world.joint_positions() + np.array([0.3, 0.1, 0.0, 0.2, 0.0, -0.2, 0.4])
    world.set_arm_targets(q)
    world.step(240)
    world.reset_arm(q)
    world.add_object("ball", "ball", [0.62, 0.15], color="yellow")  # added after the worker started
    world.settle(0.5)
    for camera in ("static", "wrist"):
        _assert_same_frame(world, camera)
    assert world._render_worker is not None and world._render_worker.bodies == len(world._body_states()[0])


def test_a_render_does_not_hold_the_world_or_the_interpreter(world):
    import pybullet as p

    world.start_render_worker()
    world.render("static")  # warm
    # Moved by a millimetre: the next render cannot reuse the last one.
    cube = world.object("cube").body_id
    with world.lock:
        xyz, quat = p.getBasePositionAndOrientation(cube, physicsClientId=world.client)
        p.resetBasePositionAndOrientation(cube, [xyz[0] + 0.001, xyz[1], xyz[2]], quat, physicsClientId=world.client)
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            with world.lock:
                ticks.append(time.perf_counter())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        started = time.perf_counter()
        world.render("static")
        ended = time.perf_counter()
    finally:
        done.set()
        ticker.join()
    # In this process a render holds the lock and the GIL throughout: no tick could land inside it.
    assert sum(started < t < ended for t in ticks) >= 2


def test_a_still_scene_reuses_its_last_render_and_a_moved_one_does_not(world):
    import pybullet as p

    world.render("wrist")
    first = world._render_cache["wrist"][1]
    _assert_same_frame(world, "wrist")  # nothing moved: the same buffers, equal to a fresh render
    assert world._render_cache["wrist"][1] is first
    q = world.joint_positions()
    q[0] += 0.01
    world.reset_arm(q)  # the wrist camera moved with the arm
    _assert_same_frame(world, "wrist")
    assert world._render_cache["wrist"][1] is not first
    second = world._render_cache["wrist"][1]
    cube = world.object("cube").body_id
    with world.lock:
        xyz, quat = p.getBasePositionAndOrientation(cube, physicsClientId=world.client)
        p.resetBasePositionAndOrientation(cube, [xyz[0], xyz[1] + 0.002, xyz[2]], quat, physicsClientId=world.client)
    _assert_same_frame(world, "wrist")
    assert world._render_cache["wrist"][1] is not second


def test_bodies_made_outside_add_object_render_in_this_process(world):
    import pybullet as p

    world.start_render_worker()
    with world.lock:
        visual = p.createVisualShape(p.GEOM_BOX, halfExtents=[0.05, 0.05, 0.05], physicsClientId=world.client)
        board = p.createMultiBody(0, -1, visual, [0.5, 0.0, 0.2], physicsClientId=world.client)
    view = world.render("static")
    assert board in np.unique(view.segmentation)  # drawn here: the worker does not know the board
    _assert_same_frame(world, "static")
    assert world._render_worker is not None  # the worker stays for when the board is gone


def test_a_dead_worker_falls_back_to_rendering_here(world, caplog):
    world.start_render_worker()
    os.kill(world._render_worker.pid, signal.SIGKILL)
    world._render_worker._process.wait(timeout=10)
    with caplog.at_level("WARNING"):
        _assert_same_frame(world, "static")
    assert world._render_worker is None
    assert "render worker failed" in caplog.text
