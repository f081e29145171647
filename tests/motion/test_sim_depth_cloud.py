"""Planning around a depth point cloud rendered in the pybullet workcell, judged against ground truth.

The simulator renders two RGB-D views of a wall on the table; the cloud (robot masked out with the
sphere model) is the only obstacle the planner sees. The result is then checked densely against the
true wall box, which the planner never saw.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from robopin.geometry.pointcloud import depth_to_point_cloud
from robopin.motion.curobo.spheres import RobotSpheres
from robopin.motion.verify import sampled_check
from robopin.motion.world import CollisionWorld
from robopin.sim.render import SimCameraSpec
from robopin.sim.world import SimWorld, look_at

from .conftest import ROBOTS, planner, top_down

_names = itertools.count()
WALL_CENTER = (0.42, 0.0, 0.16)
WALL_SIZE = (0.30, 0.04, 0.32)


def _wall_world(robot: str) -> SimWorld:
    world = SimWorld(f"motion-depth-{next(_names)}", robot=robot, register=False)
    p = world._p  # a static wall has no catalogue entry; build it with pybullet directly
    half = [s / 2 for s in WALL_SIZE]
    with world.lock:
        shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=world.client)
        visual = p.createVisualShape(p.GEOM_BOX, halfExtents=half, physicsClientId=world.client)
        p.createMultiBody(0.0, shape, visual, WALL_CENTER, physicsClientId=world.client)
    for name, eye in (("left", (1.1, -0.7, 0.8)), ("right", (1.1, 0.7, 0.8))):
        world.add_camera(SimCameraSpec(name, look_at(eye, (0.4, 0.0, 0.1)), width=320, height=240))
    return world


@pytest.mark.slow
@pytest.mark.parametrize("robot", ROBOTS)
def test_plan_around_rendered_depth_cloud_is_collision_free_against_ground_truth(robot):
    plan = planner("roboplan", robot)
    sim = _wall_world(robot)
    try:
        q_sim = sim.joint_positions()
        clouds = []
        for camera in ("left", "right"):
            view = sim.render(camera)
            clouds.append(depth_to_point_cloud(view.depth_m, view.model, view.T_base_cam, voxel_size_m=0.01).points)
    finally:
        sim.close()
    points = np.vstack(clouds).astype(np.float64)
    points = points[points[:, 2] > 0.01]  # the table top is a primitive of its own
    spheres = RobotSpheres.fit(plan.robot)
    on_robot = spheres.mask_points(points, q_sim, padding_m=0.02)
    assert on_robot.any(), "the robot is in view, so some points must be masked as robot"
    cloud = points[~on_robot]
    low, high = np.array(WALL_CENTER) - np.array(WALL_SIZE) / 2, np.array(WALL_CENTER) + np.array(WALL_SIZE) / 2
    on_wall = np.all((cloud >= low - 0.01) & (cloud <= high + 0.01), axis=1)
    assert on_wall.sum() > 100, "the wall must be in the cloud"

    seen = CollisionWorld()
    seen.add_table(-0.002)
    seen.set_point_cloud(cloud, voxel_size_m=0.01)
    plan.update_world(seen)
    plan.robot.reseed(0)
    start = plan.robot.inverse_kinematics(top_down(0.42, -0.3, 0.12), plan.robot.home, restarts=50)
    assert start is not None
    result = plan.plan_to_pose(start, top_down(0.42, 0.3, 0.12))
    assert result.success, result.message

    truth = CollisionWorld()
    truth.add_table(-0.002)
    T_wall = np.eye(4)
    T_wall[:3, 3] = WALL_CENTER
    truth.add_box("true_wall", WALL_SIZE, T_wall)
    plan.update_world(truth)
    assert sampled_check(plan.robot, result.trajectory.positions)
