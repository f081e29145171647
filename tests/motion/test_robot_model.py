"""The pinocchio/coal planning model: kinematics, IK and collision against the world."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.motion.errors import UnknownRobotError
from robopin.motion.robot import PLANNING_LIMIT_MARGIN_RAD, robot_spec
from robopin.motion.world import CollisionWorld
from robopin.robots.description import load_description
from robopin.robots.safety import SafetyConfig

from .conftest import robot_model, top_down


def test_spec_comes_from_the_shared_description(robot_name):
    spec = robot_spec(robot_name)
    description = load_description(robot_name)
    assert spec.arm_joints == tuple(description.joint_names)
    np.testing.assert_allclose(spec.T_link_tcp, description.T_link_tcp)
    np.testing.assert_allclose(spec.home_q, description.home_rad)
    robot = robot_model(robot_name)
    assert robot.joint_names == spec.arm_joints
    # The planner keeps inside the arm safety layer's refused band next to each limit.
    np.testing.assert_allclose(robot.lower, np.asarray(description.lower_rad) + PLANNING_LIMIT_MARGIN_RAD)
    np.testing.assert_allclose(robot.upper, np.asarray(description.upper_rad) - PLANNING_LIMIT_MARGIN_RAD)
    assert SafetyConfig().position_margin_rad < PLANNING_LIMIT_MARGIN_RAD


def test_unknown_robot_is_named():
    with pytest.raises(UnknownRobotError, match="'ur5'"):
        robot_spec("ur5")


def test_ik_reaches_top_down_poses(robot_name):
    robot = robot_model(robot_name)
    robot.set_world(CollisionWorld(), padding_m=0.0)
    for xyz in [(0.4, 0.0, 0.2), (0.35, -0.25, 0.1), (0.5, 0.2, 0.3)]:
        target = top_down(*xyz, yaw=0.4)
        q = robot.inverse_kinematics(target, robot.home)
        assert q is not None, xyz
        reached = robot.forward_kinematics(q)
        assert np.linalg.norm(reached[:3, 3] - target[:3, 3]) < 2e-3
        assert np.allclose(reached[:3, :3], target[:3, :3], atol=2e-2)
        assert robot.within_limits(q)


def test_ik_reports_unreachable_pose(robot_name):
    robot = robot_model(robot_name)
    assert robot.inverse_kinematics(top_down(2.5, 0.0, 0.2), robot.home, restarts=3) is None


def test_box_at_the_tcp_collides_and_base_on_table_does_not(robot_name):
    robot = robot_model(robot_name)
    world = CollisionWorld()
    world.add_table(0.0)  # the base stands on it: that is the mount, not a collision
    robot.set_world(world, padding_m=0.0)
    assert not robot.in_collision(robot.home)
    # The TCP sits between the open fingers (free space); the hand is a few centimetres behind it.
    T = robot.forward_kinematics(robot.home)
    T[:3, 3] -= 0.08 * T[:3, 2]
    world.add_box("at_hand", (0.04, 0.04, 0.04), T)
    robot.set_world(world, padding_m=0.0)
    assert robot.in_collision(robot.home)
    assert any(b == "world/at_hand" for _, b in robot.colliding_pairs(robot.home))
    robot.set_world(CollisionWorld(), padding_m=0.0)


def test_padding_inflates_obstacles(robot_name):
    robot = robot_model(robot_name)
    T = robot.forward_kinematics(robot.home)
    T_box = np.eye(4)
    T_box[:3, 3] = T[:3, 3] + [0.0, 0.0, 0.0]
    T_box[0, 3] += 0.25  # a box 25 cm in front of the TCP along base x
    world = CollisionWorld()
    world.add_box("near", (0.04, 0.4, 0.4), T_box)
    robot.set_world(world, padding_m=0.0)
    clearance_free = not robot.in_collision(robot.home)
    assert clearance_free
    assert robot.in_collision(robot.home, margin_m=0.3)
    robot.set_world(CollisionWorld(), padding_m=0.0)


def test_point_cloud_obstacle_collides(robot_name):
    robot = robot_model(robot_name)
    tcp = robot.forward_kinematics(robot.home)[:3, 3]
    rng = np.random.default_rng(0)
    world = CollisionWorld()
    hand = tcp - 0.08 * robot.forward_kinematics(robot.home)[:3, 2]
    world.set_point_cloud(hand + rng.uniform(-0.03, 0.03, size=(200, 3)), voxel_size_m=0.01)
    robot.set_world(world, padding_m=0.0)
    assert robot.in_collision(robot.home)
    world.set_point_cloud(tcp + np.array([0.0, 0.4, 0.0]) + rng.uniform(-0.03, 0.03, size=(200, 3)))
    robot.set_world(world, padding_m=0.0)
    assert not robot.in_collision(robot.home)
    robot.set_world(CollisionWorld(), padding_m=0.0)


def test_a_cloud_contact_says_where_it_is(robot_name):
    # The octree contact has no position; the verifier's message names the cloud point it touched.
    from robopin.motion.verify import verify_path

    robot = robot_model(robot_name)
    tcp = robot.forward_kinematics(robot.home)
    T_ee_object = np.eye(4)
    T_ee_object[2, 3] = 0.03  # a 6 cm box held below the TCP
    obstacle = tcp[:3, 3] + 0.03 * tcp[:3, 2]  # inside it
    far = tcp[:3, 3] + np.array([0.0, 0.4, 0.0])
    world = CollisionWorld(voxel_size_m=0.01)
    world.set_point_cloud(np.array([far, obstacle]))
    world.attach("held", (0.05, 0.05, 0.06), T_ee_object)
    robot.set_world(world, padding_m=0.0)
    try:
        result = verify_path(robot, np.array([robot.home, robot.home]))
        assert not result.collision_free and ("attached/held", "world/point_cloud") in result.colliding_pairs
        assert result.cloud_contact == pytest.approx(tuple(obstacle), abs=1e-9)  # not the far point
        assert result.cloud_contact_distance_m == 0.0  # inside the held box
        x, y, z = obstacle
        assert f"nearest cloud point [{x:.3f}, {y:.3f}, {z:.3f}] m, 0 mm from its box" in result.describe()
    finally:
        robot.set_world(CollisionWorld(), padding_m=0.0)


def test_self_collision_is_detected(robot_name):
    """Folding the arm onto itself must collide; adjacent links overlapping at joints must not count."""
    robot = robot_model(robot_name)
    robot.set_world(CollisionWorld(), padding_m=0.0)
    assert not robot.in_collision(robot.home)
    robot.reseed(1)
    hits = sum(robot.in_collision(robot.random_configuration()) for _ in range(200))
    # Random configurations of a 6/7-DoF arm fold onto themselves a fair share of the time.
    assert 5 < hits < 195


def test_attached_object_collides_with_the_world(robot_name):
    robot = robot_model(robot_name)
    tcp = robot.forward_kinematics(robot.home)
    T_box = np.eye(4)
    T_box[:3, 3] = tcp[:3, 3] + [0.0, 0.0, -0.20]  # 20 cm below the TCP (TCP z points down)
    world = CollisionWorld()
    world.add_box("below", (0.3, 0.3, 0.02), T_box)
    robot.set_world(world, padding_m=0.0)
    assert not robot.in_collision(robot.home)
    T_ee_object = np.eye(4)
    T_ee_object[2, 3] = 0.12  # a 25 cm long object held along the approach axis
    world.attach("long", (0.04, 0.04, 0.25), T_ee_object)
    robot.set_world(world, padding_m=0.0)
    assert robot.in_collision(robot.home)
    robot.set_world(CollisionWorld(), padding_m=0.0)
