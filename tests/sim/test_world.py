"""The workcell world: deterministic scene building, object placement, registry and physics stepping."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.robots.description import load_description
from robopin.sim.assets import UnknownAssetError
from robopin.sim.robot_models import UnknownRobotError
from robopin.sim.tasks import build_scene
from robopin.sim.world import SimWorld, SimWorldError, UnknownNameError, get_world, registered_worlds

from .helpers import unique_world_name


def _state(scene):
    return {name: scene.world.object_pose(name) for name in scene.world.objects}


@pytest.mark.parametrize("scenario", ["spatial", "multi_view", "long_horizon"])
def test_same_seed_builds_the_same_scene(scenario):
    with build_scene(scenario, 11, register=False) as first, build_scene(scenario, 11, register=False) as second:
        a, b = _state(first), _state(second)
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_allclose(a[name], b[name], atol=1e-9, err_msg=name)
        assert first.task == second.task
        np.testing.assert_allclose(first.observe_q, second.observe_q)


def test_different_seeds_build_different_scenes():
    with build_scene("spatial", 1, register=False) as first, build_scene("spatial", 2, register=False) as second:
        a = {n: first.world.object_center(n) for n in first.world.objects}
        b = {n: second.world.object_center(n) for n in second.world.objects}
        shared = a.keys() & b.keys()
        assert any(np.linalg.norm(a[n][:2] - b[n][:2]) > 0.01 for n in shared)


def test_objects_rest_on_the_table_where_placed():
    with SimWorld(unique_world_name("place"), register=False) as world:
        world.add_object("cube", "cube", [0.5, 0.1], 0.4, color="red")
        world.add_object("plate", "plate", [0.5, -0.15], color="blue", radius_m=0.07)
        world.add_object("teddy", "teddy", [0.6, 0.2])
        world.settle()
        low, _ = world.object_aabb("cube")
        assert low[2] == pytest.approx(0.0, abs=0.004)
        np.testing.assert_allclose(world.object_center("cube")[:2], [0.5, 0.1], atol=0.005)
        # The teddy mesh is far from its link origin; its bounding box must still be centred on xy.
        np.testing.assert_allclose(world.object_center("teddy")[:2], [0.6, 0.2], atol=0.005)
        assert world.object("plate").radius_m == pytest.approx(0.07)


def test_bad_names_are_refused_with_the_value():
    with SimWorld(unique_world_name("bad"), register=False) as world:
        with pytest.raises(UnknownAssetError, match="spaceship"):
            world.add_object("spaceship", "s", [0.5, 0.0])
        with pytest.raises(UnknownAssetError, match="mauve"):
            world.add_object("cube", "c", [0.5, 0.0], color="mauve")
        world.add_object("cube", "c", [0.5, 0.0])
        with pytest.raises(SimWorldError, match="'c' already exists"):
            world.add_object("cube", "c", [0.4, 0.0])
        with pytest.raises(UnknownNameError, match="nothing"):
            world.object("nothing")
    with pytest.raises(UnknownRobotError, match="ur5"):
        SimWorld(unique_world_name("bad"), robot="ur5", register=False)


def test_worlds_register_by_name_and_unregister_on_close():
    name = unique_world_name("reg")
    world = SimWorld(name)
    try:
        assert get_world(name) is world
        assert name in registered_worlds()
        with pytest.raises(SimWorldError, match="already registered"):
            SimWorld(name)
    finally:
        world.close()
    assert name not in registered_worlds()
    with pytest.raises(UnknownNameError):
        get_world(name)


def test_physics_thread_advances_simulated_time_and_stops():
    with SimWorld(unique_world_name("thread"), register=False) as world:
        world.add_object("cube", "cube", [0.5, 0.0], z_m=0.2)
        world.start(real_time_factor=0.0)
        assert world.running
        world.advance(0.5, timeout_s=60.0)
        assert world.sim_time_s >= 0.5
        world.stop()
        assert not world.running
        stopped_at = world.sim_time_s
        # The cube fell onto the table while the thread stepped.
        assert world.object_aabb("cube")[0][2] < 0.01
        world.advance(0.1)  # without the thread, advance steps in the caller
        assert world.sim_time_s == pytest.approx(stopped_at + 0.1, abs=world.time_step_s)


def test_real_time_factor_is_validated():
    with SimWorld(unique_world_name("rtf"), register=False) as world, pytest.raises(ValueError, match="-1"):
        world.start(real_time_factor=-1.0)


def test_inverse_kinematics_reaches_a_pose():
    with SimWorld(unique_world_name("ik"), register=False) as world:
        target = world.forward_kinematics(np.array([0.2, -0.3, 0.1, -2.0, 0.1, 1.8, 0.5]))
        q = world.inverse_kinematics(target)
        np.testing.assert_allclose(world.forward_kinematics(q)[:3, 3], target[:3, 3], atol=2e-3)


@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_simulated_arm_starts_at_the_description_home_and_agrees_with_its_kinematics(robot):
    description = load_description(robot)
    with SimWorld(unique_world_name("home"), robot=robot, register=False) as world:
        np.testing.assert_allclose(world.joint_positions(), description.home_rad, atol=1e-6)
        rng = np.random.default_rng(3)
        for q in [description.home_rad, *rng.uniform(world.arm_lower, world.arm_upper, size=(3, description.dof))]:
            # pybullet's link state against pinocchio's forward kinematics of the shared description.
            np.testing.assert_allclose(world.forward_kinematics(q), description.forward_kinematics(q), atol=1e-6)


@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_gripper_opens_and_closes(robot):
    with SimWorld(unique_world_name("grip"), robot=robot, register=False) as world:
        world.set_gripper(0.0)
        world.advance(1.0)
        opened = world.gripper_width()
        world.set_gripper(1.0)
        world.advance(1.0)
        closed = world.gripper_width()
        assert opened > world.model.max_width_m * 0.9
        assert closed < world.model.max_width_m * 0.1
        with pytest.raises(ValueError, match=r"1\.5"):
            world.set_gripper(1.5)

