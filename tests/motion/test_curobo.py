"""cuRobo backend parts that need no GPU (config, conversions, the xArm 6 sphere model) and the
planner contract run through CPU backends and, where a CUDA device and cuRobo exist, cuRobo."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.geometry.transforms import matrix_to_quaternion, quaternion_to_matrix
from robopin.motion.curobo.config import CuroboPlannerConfig
from robopin.motion.curobo.conversions import (
    curobo_pose_to_matrix,
    matrix_to_curobo_pose,
    status_from_curobo,
    tcp_goal_to_link_goal,
    trajectory_from_curobo,
    world_to_curobo_dict,
)
from robopin.motion.curobo.planner import curobo_available
from robopin.motion.curobo.spheres import (
    RobotSpheres,
    curobo_robot_config,
    load_robot_config,
    surface_samples,
)
from robopin.motion.errors import BackendUnavailableError, MotionConfigError
from robopin.motion.planner import make_planner
from robopin.motion.problems import make_world
from robopin.motion.types import PlanStatus
from robopin.motion.verify import sampled_check
from robopin.robots.description import load_description, pybullet_data_path

from .conftest import planner, robot_model, top_down

CUROBO_OK, CUROBO_WHY = curobo_available()


@given(st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(lambda q: np.linalg.norm(q) > 0.1))
@settings(max_examples=100, deadline=None)
def test_pose_round_trip_and_scalar_first_order(q):
    q_xyzw = np.asarray(q) / np.linalg.norm(q)
    T = np.eye(4)
    T[:3, :3] = quaternion_to_matrix(q_xyzw)
    T[:3, 3] = [0.1, -0.2, 0.3]
    pose = matrix_to_curobo_pose(T)
    # cuRobo is [w, x, y, z]; robopin's geometry is [x, y, z, w]: same rotation up to sign.
    expected = matrix_to_quaternion(T[:3, :3])
    wxyz = np.array(pose[3:])
    assert np.allclose(wxyz, np.r_[expected[3], expected[:3]], atol=1e-9) or np.allclose(
        wxyz, -np.r_[expected[3], expected[:3]], atol=1e-9
    )
    np.testing.assert_allclose(curobo_pose_to_matrix(pose), T, atol=1e-9)


def test_tcp_goal_converts_to_the_flange():
    T_link_tcp = np.eye(4)
    T_link_tcp[2, 3] = 0.172
    goal = top_down(0.4, 0.1, 0.2)
    flange = tcp_goal_to_link_goal(goal, T_link_tcp)
    np.testing.assert_allclose(flange[:3, 3], [0.4, 0.1, 0.2 + 0.172])  # TCP z points down


def test_world_becomes_cuboids_and_capped_voxels():
    world = make_world("cloud_clutter")
    T = np.eye(4)
    T[:3, 3] = [0.5, 0.0, 0.2]
    world.add_box("wall", (0.1, 0.2, 0.3), T)
    mapping, dropped = world_to_curobo_dict(world, voxel_size_m=0.05, max_cuboids=40)
    cuboids = mapping["cuboid"]
    assert len(cuboids) == 40
    assert cuboids["wall"] == {"dims": [0.1, 0.2, 0.3], "pose": [0.5, 0.0, 0.2, 1.0, 0.0, 0.0, 0.0]}
    voxels = [v for name, v in cuboids.items() if name.startswith("voxel_")]
    assert len(voxels) == 38 and all(v["dims"] == [0.05] * 3 for v in voxels)
    uncapped, none_dropped = world_to_curobo_dict(world, voxel_size_m=0.05, max_cuboids=10_000)
    assert len(uncapped["cuboid"]) > 40 and none_dropped == 0
    assert dropped == len(uncapped["cuboid"]) - 40  # reported, not silent


def test_status_names_map_to_robopin_statuses():
    assert status_from_curobo("MotionGenStatus.IK_FAIL", False) is PlanStatus.IK_FAIL
    assert status_from_curobo("INVALID_START_STATE_WORLD_COLLISION", False) is PlanStatus.START_IN_COLLISION
    assert status_from_curobo("TRAJOPT_FAIL", False) is PlanStatus.NO_PATH
    assert status_from_curobo(None, True) is PlanStatus.SUCCESS
    assert status_from_curobo("SOMETHING_NEW", False) is PlanStatus.NO_PATH


def test_trajectory_columns_follow_robopin_joint_order():
    positions = np.array([[1.0, 2.0], [3.0, 4.0]])
    traj = trajectory_from_curobo(("a", "b"), ["b", "a"], positions, positions * 0, positions * 0, dt_s=0.025)
    np.testing.assert_allclose(traj.positions, [[2.0, 1.0], [4.0, 3.0]])
    np.testing.assert_allclose(traj.times_s, [0.0, 0.025])


def test_config_validation_names_the_value():
    with pytest.raises(MotionConfigError, match="'octomap'"):
        CuroboPlannerConfig(collision_checker="octomap")
    with pytest.raises(MotionConfigError, match="time_dilation_factor"):
        CuroboPlannerConfig(time_dilation_factor=0.0)
    with pytest.raises(MotionConfigError, match="ur5"):
        CuroboPlannerConfig(robot="ur5")
    defaults = CuroboPlannerConfig()
    # isaac_ros_cumotion's defaults.
    assert (defaults.time_dilation_factor, defaults.max_attempts, defaults.num_graph_seeds) == (0.5, 10, 6)
    assert defaults.interpolation_dt_s == 0.025


def test_xarm6_config_matches_the_urdf_and_description():
    config = load_robot_config("xarm6")["robot_cfg"]["kinematics"]
    description = load_description("xarm6")
    assert (pybullet_data_path() / config["urdf_path"]).is_file()
    assert config["cspace"]["joint_names"] == list(description.joint_names)
    np.testing.assert_allclose(config["cspace"]["retract_config"], description.home_rad)
    robot = robot_model("xarm6")
    links = {name.rsplit("_", 1)[0] for name in robot.link_vertices()}
    assert set(config["collision_spheres"]) == links
    assert set(config["collision_link_names"]) == links | {"attached_object"}
    assert set(config["lock_joints"]) == {"drive_joint"}  # its five mimic joints follow it in cuRobo
    for link, ignored in config["self_collision_ignore"].items():
        assert link in links and set(ignored) <= links | {"attached_object"}


def test_shipped_xarm6_spheres_are_what_the_generator_makes():
    robot = robot_model("xarm6")
    shipped = load_robot_config("xarm6")["robot_cfg"]["kinematics"]["collision_spheres"]
    generated = curobo_robot_config(robot, RobotSpheres.fit(robot))["robot_cfg"]["kinematics"]["collision_spheres"]
    assert shipped == generated, "regenerate robots/xarm6.yml with python -m robopin.motion.curobo.spheres"


def test_spheres_mask_the_robot_out_of_a_cloud():  # link-frame spheres placed by pinocchio
    robot = robot_model("xarm6")
    spheres = RobotSpheres.from_curobo_spheres(
        robot, load_robot_config("xarm6")["robot_cfg"]["kinematics"]["collision_spheres"]
    )
    q = robot.home
    on_robot = []
    for name, (vertices, triangles) in robot.link_meshes().items():
        T = robot.geometry_frames(q)[name]
        local = surface_samples(vertices, triangles, 100, seed=3)
        on_robot.append(local @ T[:3, :3].T + T[:3, 3])
    on_robot = np.vstack(on_robot)
    away = np.random.default_rng(0).uniform([0.3, 0.3, 0.0], [0.6, 0.6, 0.2], size=(500, 3))
    assert spheres.mask_points(on_robot, q, padding_m=0.01).all()
    assert not spheres.mask_points(away, q, padding_m=0.01).any()


@pytest.mark.skipif(CUROBO_OK, reason="cuRobo is available here; the refusal path is for machines without it")
def test_curobo_planner_refuses_cleanly_without_cuda():
    with pytest.raises(BackendUnavailableError, match="cannot run here"):
        make_planner(CuroboPlannerConfig(robot="panda"))


_curobo_planners: dict[str, object] = {}


def _contract_planner(backend: str, robot: str):
    if backend != "curobo":
        return planner(backend, robot)
    if robot not in _curobo_planners:
        _curobo_planners[robot] = make_planner(CuroboPlannerConfig(robot=robot))
    return _curobo_planners[robot]


@pytest.mark.parametrize(
    "backend",
    [
        "roboplan",
        "ompl",
        pytest.param("curobo", marks=pytest.mark.skipif(not CUROBO_OK, reason=f"GPU needed: {CUROBO_WHY}")),
    ],
)
@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_contract_same_scenarios_for_every_backend(backend, robot):
    """Every backend: plan over the wall (verified), report a pose inside a box as unreachable."""
    p = _contract_planner(backend, robot)
    world = make_world("box_wall")
    p.update_world(world)
    p.robot.reseed(0)
    start = p.robot.inverse_kinematics(top_down(0.35, -0.3, 0.12), p.robot.home, restarts=50)
    result = p.plan_to_pose(start, top_down(0.35, 0.3, 0.12))
    assert result.success, result.message
    assert result.planning_time_s > 0.0
    assert sampled_check(p.robot, result.trajectory.positions)
    blocked = p.plan_to_pose(start, top_down(0.45, 0.0, 0.15))  # inside the wall
    assert blocked.status in {PlanStatus.GOAL_IN_COLLISION, PlanStatus.IK_FAIL}


@pytest.mark.parametrize("name", ["panda", "fr3", "xarm6"])
def test_the_scene_masks_with_the_shipped_spheres_of_every_meshed_link(name):
    robot = robot_model(name)
    spheres = RobotSpheres.shipped_or_fit(robot)
    shipped = load_robot_config(name)["robot_cfg"]["kinematics"]["collision_spheres"]
    assert spheres.spheres == RobotSpheres.from_curobo_spheres(robot, shipped).spheres
    assert {mesh.rsplit("_", 1)[0] for mesh in robot.link_meshes()} <= set(spheres.spheres)
