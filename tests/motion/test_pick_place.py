"""Pick-and-place sequencing on both robots: every phase planned, verified and in order."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.motion.pick_place import STAGES, PickPlaceConfig, plan_pick_place, world_without_target
from robopin.motion.problems import box_surface_points
from robopin.motion.types import PlanStatus
from robopin.motion.verify import verify_trajectory
from robopin.motion.world import CollisionWorld

from .conftest import ROBOTS, planner


def _scene() -> CollisionWorld:
    world = CollisionWorld()
    world.add_table(-0.002)
    T = np.eye(4)
    T[:3, 3] = [0.45, 0.12, 0.025]
    world.add_box("cube", (0.05, 0.05, 0.05), T)
    T = np.eye(4)
    T[:3, 3] = [0.40, -0.05, 0.10]
    world.add_box("post", (0.04, 0.04, 0.20), T)
    return world


@pytest.mark.parametrize("robot", ROBOTS)
def test_pick_and_place_plans_every_phase(robot):
    p = planner("roboplan", robot)
    world = _scene()
    p.update_world(world)
    plan = plan_pick_place(p, p.robot.home, [0.45, 0.12, 0.05], [0.35, -0.22, 0.0])
    assert plan.success, plan.message
    assert p.world is world  # the caller's world is restored
    stages = [phase.stage for phase in plan.phases]
    assert stages == ["approaching", "grasping", "lifting", "placing", "placing", "retreating"]
    assert set(stages) <= set(STAGES)
    # Phases chain: each starts where the previous ended.
    for before, after in zip(plan.phases, plan.phases[1:], strict=False):
        np.testing.assert_allclose(before.result.trajectory.positions[-1], after.result.trajectory.positions[0])
    grasp_tcp = p.robot.forward_kinematics(plan.phases[1].result.trajectory.positions[-1])
    assert np.linalg.norm(grasp_tcp[:3, 3] - [0.45, 0.12, 0.05 - 0.02]) < 3e-3
    place_tcp = p.robot.forward_kinematics(plan.phases[4].result.trajectory.positions[-1])
    assert place_tcp[2, 3] == pytest.approx(0.0 + 0.05 + 0.01 - 0.02, abs=3e-3)
    assert [phase.gripper_after_m for phase in plan.phases] == [0.08, 0.0, None, None, 0.08, None]
    # The approach and the transport are collision-free against the full world (the cube is only
    # removed for the final descent onto it).
    p.update_world(world)
    assert verify_trajectory(p.robot, plan.phases[0].result.trajectory).collision_free
    assert plan.planning_time_s > 0.0


def test_unreachable_place_fails_in_the_placing_stage():
    p = planner("roboplan", "panda")
    p.update_world(_scene())
    plan = plan_pick_place(p, p.robot.home, [0.45, 0.12, 0.05], [1.8, 0.0, 0.0])
    assert not plan.success
    assert plan.failed_stage == "placing"
    assert plan.status in {PlanStatus.IK_FAIL, PlanStatus.GOAL_IN_COLLISION}
    assert [phase.stage for phase in plan.phases] == ["approaching", "grasping", "lifting"]


def test_world_without_target_keeps_the_table_under_the_object():
    world = CollisionWorld()
    rng = np.random.default_rng(0)
    object_points = box_surface_points([0.4, 0.0, 0.03], (0.05, 0.05, 0.06), 500, rng)
    table_points = np.column_stack([rng.uniform(0.3, 0.5, 500), rng.uniform(-0.1, 0.1, 500), np.zeros(500)])
    world.set_point_cloud(np.vstack([object_points, table_points]), voxel_size_m=0.01)
    stripped = world_without_target(world, np.array([0.4, 0.0, 0.06]), 0.06, 0.06)
    assert np.all(stripped.points[:, 2] < 0.01)  # only table points are left near the object
    assert len(stripped.points) >= 500  # every table point (and the object's bottom face, on the table) stays
    with pytest.raises(ValueError, match="object_size_m"):
        PickPlaceConfig(object_size_m=(0.05, 0.05, 0.0))
