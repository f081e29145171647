"""Pick-and-place planned by robopin.motion and executed by the sim arm driver, in-process, per robot.

The multi-view layout puts the two toys between the duck and its plate. These tests plan the way
the motion planner node does (table plus the depth cloud of both views, robot masked out, the
oracle's pick and place points deprojected from the rendered depth) and run every phase on the
simulated arm: the regression for the Panda ending 0.8 rad from its goal while placing (the plan
had no cloud and carried the duck through a toy) and for the xArm 6 placing out of reach.
"""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from robopin.geometry import WorkspaceBox
from robopin.geometry.pointcloud import depth_to_point_cloud
from robopin.motion import PickPlaceConfig, plan_pick_place
from robopin.motion.planner import RoboplanPlannerConfig, make_planner
from robopin.motion.scene import SceneConfig, SceneKeeper
from robopin.robots.base import make_arm, make_arm_config
from robopin.sim.oracle import GroundTruthOracle
from robopin.sim.scenarios import build_scene, check_success

pytestmark = pytest.mark.slow

_names = itertools.count()
WORKSPACE = WorkspaceBox((0.1, -0.6, -0.05), (0.95, 0.6, 0.8))


def _oracle_targets(scene) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's pick and place answers as base-frame points on the rendered depth."""
    oracle = GroundTruthOracle(scene)
    rendered = oracle.render()
    trace = oracle.write(rendered)
    answer = json.loads(re.search(r"<answer>(?P<answer>.*)</answer>", trace.text, re.S)["answer"])
    points = []
    for item in answer:
        view = rendered[item["img_idx"]]
        height, width = view.depth_m.shape
        u, v = item["point_2d"][0] / 1000 * width, item["point_2d"][1] / 1000 * height
        p_cam = view.model.deproject(u, v, view.depth_m[int(v), int(u)])
        points.append((view.T_base_cam @ np.append(p_cam, 1.0))[:3])
    return points[0], points[1]


@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_multi_view_pick_and_place_runs_every_phase_within_tolerance(robot):
    scene = build_scene("multi_view", 0, robot=robot, world_name=f"pp-{robot}-{next(_names)}")
    try:
        world = scene.world
        planner = make_planner(RoboplanPlannerConfig(robot=robot, timeout_s=3.0))
        keeper = SceneKeeper(planner.robot, SceneConfig(workspace=WORKSPACE, table_height_m=0.0))
        clouds = []
        for name in ("static", "wrist"):
            view = world.render(name)
            clouds.append(depth_to_point_cloud(view.depth_m, view.model, view.T_base_cam, voxel_size_m=0.01).points)
        keeper.update_cloud(np.vstack(clouds), world.joint_positions(), 0.0)
        collision_world = keeper.world(0.0)
        assert collision_world.points is not None and len(collision_world.points) > 500, "the toys must be seen"

        pick, place = _oracle_targets(scene)
        near = np.linalg.norm(collision_world.points[:, :2] - pick[:2], axis=1) <= 0.06
        planner.update_world(collision_world)
        arm = make_arm(make_arm_config("sim", {"world": world.name, "robot": robot}))
        arm.connect()
        arm.enable()
        plan = plan_pick_place(
            planner,
            arm.joint_state().positions,
            pick,
            place,
            PickPlaceConfig(object_size_m=(0.05, 0.05, max(pick[2], 0.01))),
            object_points=collision_world.points[near],
        )
        assert plan.success, plan.message
        for phase in plan.phases:
            result = arm.execute(phase.result.trajectory)
            assert result.success, f"{phase.stage}: {result.reason.value}: {result.message}"
            if phase.gripper_after_m is not None:
                arm.gripper_move(phase.gripper_after_m, 20.0)
        arm.disconnect()
        report = check_success(scene)
        assert report.success, str(report)
    finally:
        scene.close()
