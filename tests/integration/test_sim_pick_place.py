"""The motion planner node's pick-and-place task (robopin.motion.PickPlaceTask) on the sim arm, per robot.

The multi-view layout puts the two toys between the duck and its plate. The task's scene holds the table
plus the depth cloud of both views (robot masked out), the oracle's pick and place points are deprojected
from the rendered depth, and every phase runs on the simulated arm, so a plan made without the cloud
(carrying the duck through a toy) or a place point outside the robot's reach fails here.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re

import numpy as np
import pytest

from robopin.geometry import WorkspaceBox
from robopin.geometry.pointcloud import depth_to_point_cloud
from robopin.motion.pick_place_task import DirectArm, PickPlaceRequest, PickPlaceSettings, PickPlaceTask
from robopin.motion.planner import RoboplanPlannerConfig, make_planner
from robopin.motion.scene import SceneConfig, SceneKeeper
from robopin.robots.base import make_arm, make_arm_config
from robopin.sim.oracle import GroundTruthOracle
from robopin.sim.tasks import build_scene, check_success

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


def _task(scene, robot: str) -> tuple[PickPlaceTask, object]:
    """The motion planner node's task at its defaults, its scene holding both views' depth cloud; the sim arm."""
    world = scene.world
    planner = make_planner(RoboplanPlannerConfig(robot=robot, timeout_s=3.0))
    keeper = SceneKeeper(planner.robot, SceneConfig(workspace=WORKSPACE, table_height_m=0.0))
    clouds = []
    for name in ("static", "wrist"):
        view = world.render(name)
        clouds.append(depth_to_point_cloud(view.depth_m, view.model, view.T_base_cam, voxel_size_m=0.01).points)
    keeper.update_cloud(np.vstack(clouds), world.joint_positions(), 0.0)
    assert keeper.world(0.0).points is not None and len(keeper.world(0.0).points) > 500, "the toys must be seen"
    arm = make_arm(make_arm_config("sim", {"world": world.name, "robot": robot}))
    arm.connect()
    arm.enable()
    return PickPlaceTask(planner, keeper, PickPlaceSettings(), clock=lambda: 0.0), arm


@contextlib.contextmanager
def _multi_view(robot: str, label: str):
    """Layout 0 of the multi-view task: (scene, task, sim arm, the oracle's pick and place points); closed after."""
    scene = build_scene("multi_view", 0, robot=robot, world_name=f"pp-{label}-{robot}-{next(_names)}")
    try:
        task, arm = _task(scene, robot)
        yield (scene, task, arm, *_oracle_targets(scene))
    finally:
        scene.close()


@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_multi_view_pick_and_place_runs_every_phase_within_tolerance(robot):
    with _multi_view(robot, "run") as (scene, task, arm, pick, place):
        stages = []
        outcome = task.pick_place(arm.joint_state().positions, PickPlaceRequest(pick, place),
                                  DirectArm(arm, stages.append))
        arm.disconnect()
        assert outcome.success and outcome.executed, (outcome.status, outcome.message)
        assert stages == ["approaching", "grasping", "lifting", "placing", "placing", "retreating"]
        assert set(outcome.stages_s) == {"world", "collision_model", "plan"}
        report = check_success(scene)
        assert report.success, str(report)


def test_fingers_closing_on_nothing_end_the_task_grasp_missed_before_it_lifts():
    """The pick point is bare table beside the objects: the sim gripper closes fully, so nothing is held."""
    with _multi_view("panda", "miss") as (_, task, arm, _pick, _place):
        cloud = task.scene.world(0.0).points
        bare = np.array([0.45, 0.0, 0.005])
        while np.min(np.linalg.norm(cloud[:, :2] - bare[:2], axis=1)) < 0.12:  # clear of every object seen
            bare[1] += 0.02
        stages = []
        outcome = task.pick_place(arm.joint_state().positions, PickPlaceRequest(bare, bare + np.array([0.0, 0.1, 0.0])),
                                  DirectArm(arm, stages.append))
        arm.disconnect()
        assert (outcome.success, outcome.status, outcome.executed) == (False, "grasp_missed", True), outcome.message
        assert stages == ["approaching", "grasping"]  # it never lifted


def test_a_target_outside_the_workspace_is_refused_before_planning_and_a_stop_before_moving_moves_nothing():
    with _multi_view("panda", "refuse") as (_, task, arm, pick, place):
        q = arm.joint_state().positions
        outside = task.pick_place(q, PickPlaceRequest(pick, np.array([1.5, 0.0, 0.0])), DirectArm(arm))
        assert (outside.status, outside.plan) == ("outside_workspace", None), outside.message
        assert "place point" in outside.message
        stages = []
        stopped = task.pick_place(q, PickPlaceRequest(pick, place), DirectArm(arm, stages.append),
                                  should_stop=lambda: True)
        assert (stopped.status, stopped.executed, stages) == ("canceled", False, [])
        assert np.allclose(arm.joint_state().positions, q)
        arm.disconnect()


def test_a_grasp_below_a_twisted_arm_is_approached_on_the_grasps_own_branch(monkeypatch):
    """Layout 33 of the Panda long-horizon task: after placing the first
    lego brick the arm rests twisted (joint 1 2.57 rad, joint 3 -2.23 rad, read from that trial's bag), and the
    pre-grasp IK seeded there lies on a branch whose straight descent to the second brick, 0.33 m in front of the
    base, breaks half way ("grasping: ik_fail straight line breaks at 5/11"). The grasp is reachable."""
    from robopin.motion import pick_place

    scene = build_scene("long_horizon", 33, robot="panda", world_name=f"pp-twisted-{next(_names)}")
    try:
        scene.world.reset_arm([2.57, -0.69, -2.23, -1.92, -0.71, 2.25, 0.01])
        task, arm = _task(scene, "panda")
        brick = scene.world.object_center("yellow_lego_1")
        pick, place = np.array([brick[0] + 0.021, brick[1], 0.022]), np.array([0.495, 0.152, 0.013])  # the trial's
        q = arm.joint_state().positions
        with monkeypatch.context() as patched:
            patched.setattr(pick_place, "_approach_on_the_grasps_branch", lambda *args, **kwargs: None)
            seeded_here = task.plan(q, PickPlaceRequest(pick, place))
        assert (seeded_here.status, seeded_here.plan.failed_stage) == ("ik_fail", "grasping"), seeded_here.message
        outcome = task.pick_place(q, PickPlaceRequest(pick, place), DirectArm(arm))
        arm.disconnect()
        assert outcome.success, (outcome.status, outcome.message)
        assert np.linalg.norm(scene.world.object_center("yellow_lego_1")[:2] - [0.547, 0.163]) < 0.099  # on the plate
    finally:
        scene.close()
