"""The planner contract on the CPU backends (roboplan, OMPL) for the Panda and the xArm 6.

Real libraries and real collision geometry throughout; the only stand-in is ``_StraightLineBackend``,
a deliberately wrong backend used to prove the pipeline's dense check catches a path through a wall.
"""

from __future__ import annotations

import numpy as np
import pytest

from robopin.motion.errors import MotionConfigError, UnknownPlannerError
from robopin.motion.planner import (
    MotionPlanner,
    RoboplanPlannerConfig,
    make_planner,
    planner_config_from_dict,
)
from robopin.motion.problems import make_world
from robopin.motion.types import PlanStatus
from robopin.motion.verify import sampled_check, verify_path
from robopin.motion.world import CollisionWorld

from .conftest import CPU_BACKENDS, ROBOTS, planner, robot_model, top_down

CASES = [(backend, robot) for backend in CPU_BACKENDS for robot in ROBOTS]


def _start(p, world, T):
    p.update_world(world)
    p.robot.reseed(0)
    q = p.robot.inverse_kinematics(T, p.robot.home, restarts=50)
    assert q is not None
    return q


def _check_trajectory(p, result, q_start):
    traj = result.trajectory
    assert traj.joint_names == p.joint_names
    np.testing.assert_allclose(traj.positions[0], q_start, atol=1e-9)
    # At rest at both ends and inside the velocity limits (with TOPP-RA's small tolerance).
    assert np.allclose(traj.velocities[[0, -1]], 0.0, atol=1e-6)
    assert np.all(np.abs(traj.velocities) <= p.robot.max_velocity * p.config.velocity_scale * 1.05 + 1e-6)
    assert np.all(np.diff(traj.times_s) > 0.0)


@pytest.mark.parametrize(("backend", "robot"), CASES)
def test_plans_around_a_box_wall_collision_free(backend, robot):
    p = planner(backend, robot)
    world = make_world("box_wall")
    q_start = _start(p, world, top_down(0.40, -0.35, 0.12, 0.3))
    goal = top_down(0.40, 0.35, 0.12, -0.3)
    result = p.plan_to_pose(q_start, goal)
    assert result.success, result.message
    _check_trajectory(p, result, q_start)
    reached = p.robot.forward_kinematics(result.trajectory.positions[-1])
    assert np.linalg.norm(reached[:3, 3] - goal[:3, 3]) < 2e-3
    # An independent, twice as dense check at zero margin.
    assert sampled_check(p.robot, result.trajectory.positions)
    # The straight joint-space line between the same endpoints does hit the wall: the plan went around.
    assert not verify_path(p.robot, np.stack([q_start, result.trajectory.positions[-1]])).collision_free
    assert result.planning_time_s > 0.0


@pytest.mark.parametrize(("backend", "robot"), CASES)
def test_plans_around_point_cloud_clutter(backend, robot):
    p = planner(backend, robot)
    world = make_world("cloud_clutter")
    q_start = _start(p, world, top_down(0.45, -0.35, 0.10))
    result = p.plan_to_pose(q_start, top_down(0.45, 0.35, 0.10))
    assert result.success, result.message
    assert sampled_check(p.robot, result.trajectory.positions)


def test_joint_goal_and_trivial_goal():
    p = planner("roboplan", "panda")
    p.update_world(make_world("free"))
    start = p.robot.home
    goal = start + np.array([0.5, 0.2, 0.0, 0.2, 0.0, -0.2, 0.3])
    result = p.plan_to_joints(start, goal)
    assert result.success, result.message
    np.testing.assert_allclose(result.trajectory.positions[-1], goal, atol=1e-9)
    same = p.plan_to_joints(start, start)
    assert same.success and len(same.trajectory.times_s) == 1


@pytest.mark.parametrize("robot", ROBOTS)
def test_named_statuses(robot):
    p = planner("roboplan", robot)
    world = make_world("free")
    p.update_world(world)
    home = p.robot.home
    # Unreachable pose.
    far = p.plan_to_pose(home, top_down(2.0, 0.0, 0.3))
    assert far.status is PlanStatus.IK_FAIL and not far.success
    # Joint goal outside the limits.
    outside = home.copy()
    outside[1] = p.robot.upper[1] + 0.5
    assert p.plan_to_joints(home, outside).status is PlanStatus.GOAL_OUTSIDE_LIMITS
    assert p.plan_to_joints(outside, home).status is PlanStatus.START_OUTSIDE_LIMITS
    # Goal pose inside a box: reachable, but only in collision.
    boxed = world.copy()
    T = top_down(0.45, 0.0, 0.15)
    boxed.add_box("block", (0.12, 0.12, 0.12), T)
    p.update_world(boxed)
    blocked = p.plan_to_pose(home, T)
    assert blocked.status is PlanStatus.GOAL_IN_COLLISION, blocked.message
    # Start inside an obstacle.
    tcp = p.robot.forward_kinematics(home)
    T_hand = tcp.copy()
    T_hand[:3, 3] -= 0.08 * tcp[:3, 2]
    boxed.add_box("on_hand", (0.05, 0.05, 0.05), T_hand)
    p.update_world(boxed)
    assert p.plan_to_joints(home, home + 0.1).status is PlanStatus.START_IN_COLLISION
    with pytest.raises(MotionConfigError, match="finite joint positions"):
        p.plan_to_joints(home[:3], home)


class _StraightLineBackend(MotionPlanner):
    """A broken planner that ignores obstacles: its straight line must never leave the pipeline."""

    def _solve_path(self, start, goal, timeout_s):
        return np.stack([start, goal]), PlanStatus.SUCCESS, ""


@pytest.mark.parametrize("robot", ROBOTS)
def test_a_path_through_an_obstacle_is_caught(robot):
    model = robot_model(robot)
    broken = _StraightLineBackend(RoboplanPlannerConfig(robot=robot), model)
    world = make_world("box_wall")
    broken.update_world(world)
    model.reseed(0)
    start = model.inverse_kinematics(top_down(0.40, -0.35, 0.12), model.home, restarts=50)
    goal = model.inverse_kinematics(top_down(0.40, 0.35, 0.12), start, restarts=50)
    result = broken.plan_to_joints(start, goal)
    assert result.status is PlanStatus.COLLISION_IN_RESULT
    assert "world/wall" in result.message and result.trajectory is None
    # With the wall gone the same straight line is accepted.
    broken.update_world(make_world("free"))
    assert broken.plan_to_joints(start, goal).success
    model.set_world(CollisionWorld(), padding_m=0.0)


def test_factory_and_config_validation():
    config = planner_config_from_dict({"type": "ompl", "robot": "xarm6", "timeout_s": 1.5})
    assert config.type == "ompl" and config.timeout_s == 1.5
    with pytest.raises(UnknownPlannerError, match="'rrt'"):
        planner_config_from_dict({"type": "rrt"})
    with pytest.raises(MotionConfigError, match="no field"):
        planner_config_from_dict({"type": "roboplan", "speed": 3})
    with pytest.raises(MotionConfigError, match="velocity_scale"):
        RoboplanPlannerConfig(velocity_scale=1.5)
    with pytest.raises(MotionConfigError, match="verify_margin_m"):
        RoboplanPlannerConfig(padding_m=0.0, verify_margin_m=0.01)
    assert type(make_planner(RoboplanPlannerConfig(robot="panda"), robot_model("panda"))).__name__ == "RoboplanPlanner"


@pytest.mark.parametrize("robot", ROBOTS)
def test_continuous_check_catches_a_thin_plate_between_samples(robot):
    """A 4 mm plate crossed by one long segment: both ends are clear, the segment is not."""
    model = robot_model(robot)
    model.reseed(3)
    start = model.inverse_kinematics(top_down(0.40, -0.25, 0.15), model.home, restarts=50)
    goal = model.inverse_kinematics(top_down(0.40, 0.25, 0.15), start, restarts=50)
    plate = CollisionWorld()
    T = np.eye(4)
    T[:3, 3] = [0.40, 0.0, 0.15]
    plate.add_box("plate", (0.3, 0.004, 0.3), T)
    model.set_world(plate, padding_m=0.0)
    try:
        assert not model.in_collision(start) and not model.in_collision(goal)
        coarse = np.stack([start, goal])
        assert sampled_check(model, coarse, max_step_rad=10.0)  # the two ends only: the plate is missed
        result = verify_path(model, coarse)
        assert not result.collision_free and any("plate" in b for _, b in result.colliding_pairs)
    finally:
        model.set_world(CollisionWorld(), padding_m=0.0)


@pytest.mark.parametrize("robot", ROBOTS)
def test_displacement_bound_holds_for_every_vertex(robot):
    model = robot_model(robot)
    model.set_world(CollisionWorld(), padding_m=0.0)
    rng = np.random.default_rng(5)
    meshes = model.link_vertices()
    for _ in range(20):
        q_a, q_b = model.random_configuration(), model.random_configuration()
        q_b = q_a + 0.3 * (q_b - q_a)
        bound = model.displacement_bound(q_a, q_b)
        frames_a = model.geometry_frames(q_a)
        moved = 0.0
        for alpha in np.linspace(0.0, 1.0, 9)[1:]:
            frames = model.geometry_frames(q_a + alpha * (q_b - q_a))
            for name, vertices in meshes.items():
                pts = vertices[rng.choice(len(vertices), size=min(40, len(vertices)), replace=False)]
                Ta, Tt = frames_a[name], frames[name]
                delta = (pts @ Tt[:3, :3].T + Tt[:3, 3]) - (pts @ Ta[:3, :3].T + Ta[:3, 3])
                moved = max(moved, float(np.max(np.linalg.norm(delta, axis=1))))
        assert moved <= bound + 1e-9
        assert bound < 10.0 * moved + 0.05  # and not absurdly loose (it sums over joints, so it is loose)


@pytest.mark.parametrize("robot", ROBOTS)
def test_a_fast_long_transport_keeps_the_tcp_under_the_arm_speed_limit(robot):
    # Regression: a transport timed in joint space alone swung the Panda's TCP at 1.17 m/s and the
    # arm's safety layer refused it (tcp_speed, limit 1.0 m/s).
    plan = planner("roboplan", robot)
    plan.update_world(CollisionWorld())
    plan.robot.reseed(0)
    start = plan.robot.inverse_kinematics(top_down(0.45, -0.35, 0.15), plan.robot.home, restarts=50)
    assert start is not None
    result = plan.plan_to_pose(start, top_down(0.45, 0.35, 0.15, yaw=1.2), velocity_scale=1.0)
    assert result.success, result.message
    trajectory = result.trajectory
    times = np.arange(0.0, trajectory.times_s[-1], 0.004)
    q, _ = trajectory.sample(times)  # as the arm samples it (Hermite through the planned velocities)
    tcp = np.array([plan.robot.forward_kinematics(row)[:3, 3] for row in q])
    speed = np.linalg.norm(np.diff(tcp, axis=0), axis=1) / np.diff(times)
    assert speed.max() <= plan.config.max_tcp_speed_m_s * 1.1, speed.max()


@pytest.mark.parametrize("robot", ROBOTS)
def test_continuous_check_rejects_every_path_a_dense_sampler_finds_in_contact(robot):
    """Short paths through cloud clutter, each judged by both: no path the sampler sees collide passes."""
    model = robot_model(robot)
    model.set_world(make_world("cloud_clutter", seed=4), padding_m=0.0)
    rng = np.random.default_rng(11)
    model.reseed(11)
    try:
        verdicts = []
        while len(verdicts) < 24:
            T = top_down(rng.uniform(0.3, 0.6), rng.uniform(-0.15, 0.15), rng.uniform(0.05, 0.3))
            start = model.inverse_kinematics(T, model.home, restarts=5)
            if start is None:
                continue
            path = np.stack([start + k * rng.normal(0.0, 0.06, model.dof) for k in range(4)])
            path = np.clip(path, model.lower, model.upper)
            sampled = sampled_check(model, path, max_step_rad=0.002)
            continuous = verify_path(model, path, tolerance_m=1e-4)
            verdicts.append((sampled, continuous.collision_free))
            if not sampled:
                assert not continuous.collision_free, path
            if not continuous.collision_free:  # the contact it reports is a real one
                assert model.in_collision(continuous.first_collision_q, margin_m=0.0)
        assert any(s for s, _ in verdicts) and not all(s for s, _ in verdicts), "both kinds of path are tried"
    finally:
        model.set_world(CollisionWorld(), padding_m=0.0)


@pytest.mark.parametrize("robot", ROBOTS)
def test_continuous_check_rejects_every_path_a_dense_sampler_finds_in_self_contact(robot):
    """Links against each other are cleared at half the segment's travel, as links against the world are:
    short paths that fold the arm onto itself, each judged by both, and no self-contact the sampler sees
    passes."""
    model = robot_model(robot)
    model.set_world(CollisionWorld(), padding_m=0.0)
    rng = np.random.default_rng(7)
    verdicts = []
    while len(verdicts) < 40:
        folded = model.random_configuration()  # a configuration in self-contact, then a path across it
        if not model.in_collision(folded, margin_m=0.0):
            continue
        step = rng.normal(0.0, 0.12, model.dof)
        path = np.clip(np.stack([folded + step, folded + rng.normal(0.0, 0.04, model.dof), folded - step]),
                       model.lower, model.upper)
        if model.in_collision(path[0], margin_m=0.0) or model.in_collision(path[-1], margin_m=0.0):
            continue  # a path from or into contact says nothing about what lies between
        sampled = sampled_check(model, path, max_step_rad=0.002)
        continuous = verify_path(model, path, tolerance_m=1e-4)
        verdicts.append(sampled)
        if not sampled:
            assert not continuous.collision_free, path
            assert any(not b.startswith("world/") for _, b in continuous.colliding_pairs)
    assert any(verdicts) and not all(verdicts), "both kinds of path are tried"


def test_a_straight_line_holding_a_joint_at_its_limit_is_not_rejected_by_its_own_timing(caplog):
    # From the multi_view layout 19 (Panda): the grasp descent's IK holds joint 7 at its planning limit
    # for its last centimetres, TOPP-RA's spline through that corner overshot the limit by 0.6 mrad, and
    # the planner rejected its own result ("leaves the joint limits"), then searched the next grasp anew.
    import logging

    from robopin.motion.timing import time_parameterize
    from robopin.motion.verify import verify_trajectory

    plan = planner("roboplan", "panda")
    plan.update_world(CollisionWorld())
    start = [-0.7346, 0.1137, 0.854, -2.6337, -0.206, 2.7007, 2.6391]
    T = np.array([[0.0203, -0.9998, 0.0, 0.4237], [-0.9998, -0.0203, 0.0, 0.0664],
                  [0.0, 0.0, -1.0, 0.016], [0.0, 0.0, 0.0, 1.0]])
    with caplog.at_level(logging.WARNING, logger="robopin.motion.planner"):
        result = plan.plan_linear(start, T)
    assert result.success, result.message
    assert not [r for r in caplog.records if "rejected its own result" in r.getMessage()]
    path, trajectory, robot = result.path, result.trajectory, plan.robot
    assert np.isclose(path[-1, 6], robot.upper[6])  # the path does run into the limit
    assert np.all(trajectory.positions <= robot.upper) and np.all(trajectory.positions >= robot.lower)
    assert verify_trajectory(robot, trajectory).collision_free
    # The cause: the same path timed without the limits leaves them.
    unheld = time_parameterize(path, plan.joint_names, robot.max_velocity, robot.max_acceleration,
                               velocity_scale=plan.config.velocity_scale,
                               acceleration_scale=plan.config.acceleration_scale)
    assert unheld.positions[:, 6].max() > robot.upper[6]
    # Held samples are at rest; the rest of the trajectory is the spline's own.
    held = np.isclose(trajectory.positions[:, 6], robot.upper[6]) & (unheld.positions[:, 6] > robot.upper[6])
    assert held.any() and np.all(trajectory.velocities[held, 6] == 0.0)
    np.testing.assert_allclose(trajectory.positions[~held], unheld.positions[~held])


def test_reseed_makes_a_used_roboplan_planner_plan_as_a_new_one():
    # A batch on one stack tells the planner the trial boundary: from then on it must draw IK restarts and RRT
    # samples as the planner a fresh bring-up makes, or the same layout plans differently after other layouts.
    world = make_world("box_wall")
    T_goal = top_down(0.45, -0.2, 0.15, yaw=0.7)
    used = make_planner(RoboplanPlannerConfig(robot="panda", timeout_s=3.0))
    used.update_world(world)
    for x in (0.35, 0.5, 0.6):
        used.plan_to_pose(used.robot.home, top_down(x, 0.25, 0.2))
    used.reseed()
    fresh = make_planner(RoboplanPlannerConfig(robot="panda", timeout_s=3.0))
    fresh.update_world(world)
    plans = [p.plan_to_pose(p.robot.home, T_goal) for p in (used, fresh)]
    assert all(plan.success for plan in plans), [plan.message for plan in plans]
    np.testing.assert_array_equal(plans[0].trajectory.positions, plans[1].trajectory.positions)
