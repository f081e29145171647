"""The sim camera, sim arm and oracle VLM backends, built through the project's factories."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

from robopin.cameras.base import CameraNotFoundError, camera_config_from_dict, make_camera
from robopin.robots.base import ArmConnectionError, ArmFaultError, make_arm, make_arm_config
from robopin.robots.errors import ArmFault, Reason
from robopin.sim.scripted import grasp_pose, move_linear, move_to_pose
from robopin.sim.tasks import build_scene
from robopin.vlm.base import ChatMessage, SamplingParams, ViewImage, config_from_dict, make_backend
from robopin.vlm.errors import VLMConfigError, VLMRequestError

from .helpers import unique_world_name


@pytest.fixture(scope="module")
def scene():
    scene = build_scene("sanity_cube", 2, world_name=unique_world_name("backends"))
    yield scene
    scene.close()


@pytest.fixture
def arm(scene):
    arm = make_arm(make_arm_config("sim", {"world": scene.world.name, "robot": "panda"}))
    arm.connect()
    arm.enable()
    yield arm
    arm.disconnect()
    scene.world.reset_arm(scene.observe_q)


def test_sim_camera_frames_follow_the_camera_contract(scene):
    camera = make_camera(camera_config_from_dict({"type": "sim", "name": "static", "world": scene.world.name}))
    with camera:
        frame = camera.read()
        second = camera.read()
    assert frame.color.shape == (480, 640, 3) and frame.color.dtype == np.uint8
    assert frame.depth_m.dtype == np.float32
    assert np.isnan(frame.depth_m).sum() == 0 or np.nanmin(frame.depth_m) > 0  # invalid is NaN, never 0
    assert not np.any(frame.depth_m == 0)
    assert (frame.intrinsics.width, frame.intrinsics.height) == (640, 480)
    assert frame.optical_frame_id == "static_optical"
    assert second.index == frame.index + 1
    np.testing.assert_allclose(camera.last_pose, scene.world.camera_pose("static"))


def test_sim_camera_depth_matches_its_intrinsics_and_pose(scene):
    camera = make_camera(camera_config_from_dict({"type": "sim", "name": "wrist", "world": scene.world.name}))
    with camera:
        frame = camera.read()
        pose = camera.last_pose
    body = scene.world.object("object_0").body_id
    view = scene.world.render("wrist")
    rows, cols = np.nonzero(view.segmentation == body)
    k = len(rows) // 2
    point_cam = frame.intrinsics.deproject(cols[k] + 0.5, rows[k] + 0.5, frame.depth_m[rows[k], cols[k]])
    point = (pose @ np.append(point_cam, 1.0))[:3]
    low, high = scene.world.object_aabb("object_0")
    assert np.all(point > low - 0.005) and np.all(point < high + 0.005)


def test_sim_camera_refuses_unknown_world_and_camera(scene):
    with pytest.raises(CameraNotFoundError, match="no-world"):
        make_camera(camera_config_from_dict({"type": "sim", "name": "static", "world": "no-world"})).connect()
    with pytest.raises(CameraNotFoundError, match="ceiling"):
        make_camera(camera_config_from_dict({"type": "sim", "name": "ceiling", "world": scene.world.name})).connect()


def test_sim_cameras_are_discoverable(scene):
    from robopin.sim.camera import SimCamera

    serials = {d.serial for d in SimCamera.find_cameras()}
    assert {f"{scene.world.name}/static", f"{scene.world.name}/wrist"} <= serials


def test_sim_arm_executes_a_trajectory_to_its_goal(arm, scene):
    start = arm.joint_state().positions
    goal = start + np.array([0.25, 0.1, 0.0, -0.1, 0.0, 0.1, 0.2])
    result = arm.move_to_joints(goal)
    assert result.success, result
    np.testing.assert_allclose(arm.joint_state().positions, goal, atol=arm.config.goal_tolerance_rad)
    np.testing.assert_allclose(arm.ee_pose(), arm.true_ee_pose(), atol=1e-6)


def test_sim_arm_refuses_a_trajectory_outside_the_limits(arm):
    from robopin.robots.base import SafetyViolationError

    goal = arm.joint_state().positions.copy()
    goal[3] = 1.0  # panda_joint4 must stay below 0
    with pytest.raises(SafetyViolationError):
        arm.move_to_joints(goal)


def test_sim_arm_cancel_stops_the_motion(arm, scene):
    start = arm.joint_state().positions
    goal = start + np.array([1.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    outcome = {}

    def run():
        outcome["result"] = arm.move_to_joints(goal)

    scene.world.start(real_time_factor=1.0)
    try:
        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 30.0
        while not arm.is_moving and time.monotonic() < deadline:
            time.sleep(0.005)
        scene.world.advance(0.3, timeout_s=60)
        assert arm.cancel()
        worker.join(timeout=60)
    finally:
        scene.world.stop()
    result = outcome["result"]
    assert not result.success and result.reason == Reason.CANCELED
    assert abs(arm.joint_state().positions[0] - goal[0]) > 0.1


def _move_in_background(arm, first_joint_rad: float) -> tuple[np.ndarray, threading.Thread, list]:
    """Start a move of the first joint by ``first_joint_rad``; returns the goal, the thread and its result list."""
    goal = arm.joint_state().positions + np.array([first_joint_rad, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    seen: list = []
    worker = threading.Thread(target=lambda: seen.append(arm.move_to_joints(goal)))
    worker.start()
    return goal, worker, seen


def test_sim_arm_reports_zero_velocity_once_a_stopped_motion_paused_the_physics(arm, scene):
    # real_time_factor 0 (the shipped sim systems): only a running trajectory steps the physics.
    _goal, worker, seen = _move_in_background(arm, 1.0)
    deadline = time.monotonic() + 60.0
    moving = []
    while worker.is_alive() and time.monotonic() < deadline:
        velocities = arm.joint_state().velocities
        moving.append(float(np.max(np.abs(velocities))))
        if moving[-1] > 0.2:
            arm.stop()
            break
        time.sleep(0.002)
    worker.join(timeout=60)
    assert max(moving) > 0.2, "the arm never moved fast enough to test the stop"
    assert not seen[0].success
    state = arm.joint_state()
    assert np.max(np.abs(state.velocities)) == 0.0, state.velocities
    time.sleep(0.2)
    np.testing.assert_allclose(arm.joint_state().positions, state.positions, atol=1e-9)


def test_a_sim_arm_whose_physics_stalls_is_slow_not_stale_and_its_watchdog_runs_on_simulated_time(arm, scene):
    """Mid-trajectory the world is held for 1 s of wall time (4x the shipped 0.25 s state limit), as a starved
    process stalls the physics its arm steps in lockstep: no simulated time passes, so the watchdog (on the
    simulator's clock) does not trip and the motion ends at its goal. On the wall clock it tripped stale_state."""
    assert arm.config.safety.state_max_age_s == 0.25  # the shipped limit, unchanged
    goal, worker, seen = _move_in_background(arm, 0.6)
    deadline = time.monotonic() + 30.0
    while not arm.is_moving and time.monotonic() < deadline:
        time.sleep(0.002)
    assert arm.is_moving, "the motion never started"
    with scene.world.lock:
        held_at = scene.world.sim_time_s
        time.sleep(1.0)
        assert scene.world.sim_time_s == held_at
    worker.join(timeout=60)
    assert seen and seen[0].success, seen
    np.testing.assert_allclose(arm.joint_state().positions, goal, atol=arm.config.goal_tolerance_rad)


def test_sim_arm_fault_blocks_motion_until_recovered(arm):
    arm.inject_fault(ArmFault("collision", "simulated collision reflex", code=31))
    with pytest.raises(ArmFaultError):
        arm.move_to_joints(arm.joint_state().positions)
    arm.recover()
    assert arm.fault() is None
    assert arm.move_to_joints(arm.joint_state().positions).success


def _open_and_descend_onto_object_0(arm, world) -> None:
    """Open the gripper and bring it down around object_0 from 10 cm above (top-down, closing across it)."""
    from robopin.sim.scripted import closing_yaw

    center = world.object_center("object_0")
    T_grasp = grasp_pose(np.array([center[0], center[1], max(center[2], 0.018)]), closing_yaw(world, "object_0"))
    T_above = T_grasp.copy()
    T_above[2, 3] += 0.1
    assert arm.gripper_open().reached_goal
    move_to_pose(world, T_above, 1.5)
    move_linear(world, T_above, T_grasp, 1.0)


def test_sim_arm_gripper_grasps_an_object(arm, scene):
    world = scene.world
    _open_and_descend_onto_object_0(arm, world)
    result = arm.gripper_close(force_n=40.0)
    state = arm.gripper_state()
    assert result.reached_goal and state.is_grasped
    assert 0.02 < state.width_m < 0.06  # the 4.5 cm cube is between the fingers
    assert arm.gripper_open().reached_goal
    assert not arm.gripper_state().is_grasped


def test_sim_arm_gripper_opening_that_a_wall_stops_has_not_reached_its_goal():
    """An opening is reached at its width only, never because an object is still between the fingers (a grasp
    stopped by an object has reached its goal; a release stopped by something has not)."""
    own = build_scene("sanity_cube", 2, world_name=unique_world_name("blocked"))
    world = own.world
    arm = make_arm(make_arm_config("sim", {"world": world.name, "robot": "panda"}))
    arm.connect()
    arm.enable()
    try:
        _open_and_descend_onto_object_0(arm, world)
        assert arm.gripper_close(force_n=40.0).reached_goal
        p, client = world._p, world.client
        walls = []
        centre = world.object_center("object_0")[:2]
        for link in world.finger_link_indices:  # a fixed wall 1 mm beyond each finger's outer face
            finger = np.array(p.getLinkState(world.robot_id, link, physicsClientId=client)[4])
            outward = (finger[:2] - centre) / np.linalg.norm(finger[:2] - centre)
            low, high = (np.array(v) for v in p.getAABB(world.robot_id, link, physicsClientId=client))
            faces = []
            for height in np.linspace(low[2] + 0.002, high[2] - 0.002, 9):  # the outer face, bottom to top
                hit = p.rayTest([*(centre + outward * 0.1), height], [*centre, height], physicsClientId=client)[0]
                if (hit[0], hit[1]) == (world.robot_id, link):
                    faces.append(float((np.array(hit[3][:2]) - centre) @ outward))
            face = max(faces)
            position = [*(centre + outward * (face + 0.001 + 0.005)), (low[2] + high[2]) / 2]
            shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[0.005, 0.04, (high[2] - low[2]) / 2],
                                           physicsClientId=client)
            yaw = float(np.arctan2(outward[1], outward[0]))
            walls.append(p.createMultiBody(0.0, shape, basePosition=position,
                                           baseOrientation=p.getQuaternionFromEuler([0.0, 0.0, yaw]),
                                           physicsClientId=client))
        try:
            blocked = arm.gripper_move(world.model.max_width_m, 20.0)  # an opening asked with a grasp force
            assert world.grasped_object() == "object_0"  # both fingers still touch it
            assert not blocked.reached_goal and blocked.stalled, blocked
            assert blocked.width_m < world.model.max_width_m - 0.005, blocked
        finally:
            for wall in walls:
                p.removeBody(wall, physicsClientId=client)
        assert arm.gripper_open().reached_goal
    finally:
        arm.disconnect()
        own.close()


def test_sim_arm_needs_a_matching_world(scene):
    arm = make_arm(make_arm_config("sim", {"world": scene.world.name, "robot": "xarm6"}))
    with pytest.raises(ArmConnectionError, match="xarm6"):
        arm.connect()
    with pytest.raises(ArmConnectionError, match="nowhere"):
        make_arm(make_arm_config("sim", {"world": "nowhere"})).connect()


def _messages(scene, views=("static", "wrist")):
    images = [ViewImage(scene.world.render(name).color, name, k) for k, name in enumerate(views)]
    return [ChatMessage("user", (*images, scene.task.instruction))]


def test_oracle_backend_answers_and_verifies_from_ground_truth(scene):
    from robopin.pincot.parser import parse

    backend = make_backend({"type": "oracle", "world": scene.world.name, "errors": {"point_jitter_px": 2.0}})
    messages = _messages(scene)
    result = backend.generate(messages, SamplingParams(n=3, temperature=1.0))
    assert len(result.samples) == 3
    assert len({s.text for s in result.samples}) > 1  # independent error draws
    for sample in result.samples:
        assert not parse(sample.text, 2).errors
    good = backend.score_yes_no([*messages, ChatMessage("assistant", result.samples[0].text)])
    assert good.p_yes > 0.99
    wrong = make_backend({"type": "oracle", "world": scene.world.name, "errors": {"wrong_target_probability": 1.0}})
    bad_text = wrong.generate(messages).samples[0].text
    assert backend.score_yes_no([*messages, ChatMessage("assistant", bad_text)]).p_yes < 0.01
    unknown = backend.score_yes_no(messages)
    assert math.isclose(unknown.p_yes, 0.5) and not unknown.exact


def test_oracle_backend_configuration_is_validated(scene):
    with pytest.raises(VLMConfigError, match="teleport"):
        config_from_dict({"type": "oracle", "errors": {"teleport": 1.0}})
    with pytest.raises(VLMConfigError, match="pixels_resized"):
        config_from_dict({"type": "oracle", "point_convention": "pixels_resized"})
    backend = make_backend({"type": "oracle", "world": scene.world.name})
    with pytest.raises(VLMRequestError, match="1 image"):
        backend.generate(_messages(scene, views=("static",)))
    with pytest.raises(VLMRequestError, match="no scene registered"):
        make_backend({"type": "oracle", "world": "elsewhere"}).generate(_messages(scene))


def test_oracle_backend_takes_a_real_models_time_and_a_cancel_ends_the_wait(scene):
    from robopin.vlm.errors import VLMCanceledError

    backend = make_backend({"type": "oracle", "world": scene.world.name, "sample_latency_s": 0.3,
                            "verdict_latency_s": 0.2})
    messages = _messages(scene)
    start = time.perf_counter()
    result = backend.generate(messages, SamplingParams(n=2, temperature=1.0))
    assert time.perf_counter() - start >= 0.6 and result.latency_s >= 0.6  # 0.3 s per sample
    start = time.perf_counter()
    backend.score_yes_no([*messages, ChatMessage("assistant", result.samples[0].text)])
    assert time.perf_counter() - start >= 0.2

    slow = make_backend({"type": "oracle", "world": scene.world.name, "sample_latency_s": 30.0})
    threading.Timer(0.2, slow.cancel).start()
    start = time.perf_counter()
    with pytest.raises(VLMCanceledError, match="canceled"):
        slow.generate(messages)
    assert time.perf_counter() - start < 10.0  # not the 30 s of its latency
    with pytest.raises(VLMConfigError, match="sample_latency_s"):
        config_from_dict({"type": "oracle", "sample_latency_s": -1.0})


@pytest.mark.slow
def test_xarm6_sim_gripper_stalls_on_a_small_object_instead_of_closing_through_it():
    # Regression: the xArm linkage closed through the welded object and reported 0 mm, which the
    # motion planner reads as a missed grasp while the object was held.
    scene = build_scene("sanity_cube", 2, robot="xarm6", world_name=unique_world_name("xarm-grip"))
    try:
        world = scene.world
        arm = make_arm(make_arm_config("sim", {"world": world.name, "robot": "xarm6"}))
        arm.connect()
        arm.enable()
        _open_and_descend_onto_object_0(arm, world)
        arm.gripper_move(0.0, 20.0)
        world.advance(0.5)  # the fingers keep their command: they must stay on the object
        state = arm.gripper_state()
        assert state.is_grasped
        assert state.width_m > 0.02, f"gripper reports {state.width_m * 1e3:.1f} mm around a 4.5 cm cube"
        arm.disconnect()
    finally:
        scene.close()
