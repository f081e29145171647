"""Pick-and-place planning problems from the sim tasks, posed the way ``motion_planner_node`` poses them.

Each case is one task seed's first pick-and-place: the arm at its observation pose, the collision world
the node would build (table plus the voxelled depth cloud of both views, robot masked out, by
:class:`~robopin.motion.scene.SceneKeeper` with the ``sim_*`` system's workspace), the oracle's pick
and place points deprojected from the rendered depth, and the node's object size and object points.
Shared by ``bench_e2e.py`` and ``profile_pick_place.py``; a benchmark helper, not a test fixture.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from robopin.geometry import WorkspaceBox
from robopin.geometry.pointcloud import depth_to_point_cloud, voxel_downsample
from robopin.motion import PickPlaceConfig
from robopin.motion.robot import RobotModel
from robopin.motion.scene import SceneConfig, SceneKeeper
from robopin.motion.world import CollisionWorld
from robopin.sim.oracle import GroundTruthOracle
from robopin.sim.scenarios import build_scene

TASKS = ("spatial", "multi_view", "long_horizon")
# config/sim_panda.yaml, motion_planner_node: workspace and table; projection_node: cloud_voxel_m 0.01.
WORKSPACE = WorkspaceBox((0.1, -0.6, -0.05), (0.95, 0.6, 0.8))
VOXEL_M = 0.01
_names = itertools.count()


@dataclass
class PickPlaceCase:
    """One planning problem: what ``motion_planner_node._plan_pick_place`` hands ``plan_pick_place``."""

    name: str
    world: CollisionWorld
    q_start: NDArray[np.float64]
    pick: NDArray[np.float64]
    place: NDArray[np.float64]
    config: PickPlaceConfig
    object_points: NDArray[np.float64] | None


def _oracle_points(scene) -> tuple[NDArray[np.float64], NDArray[np.float64], list]:
    """The oracle's pick and place answers as base-frame points on the rendered depth, and the views."""
    oracle = GroundTruthOracle(scene)
    rendered = oracle.render()
    text = oracle.write(rendered).text
    answer = json.loads(text.split("<answer>", 1)[1].split("</answer>", 1)[0])
    points = []
    for item in answer[:2]:
        view = rendered[item["img_idx"]]
        height, width = view.depth_m.shape
        u, v = item["point_2d"][0] / 1000 * width, item["point_2d"][1] / 1000 * height
        p_cam = view.model.deproject(u, v, view.depth_m[int(v), int(u)])
        points.append((view.T_base_cam @ np.append(p_cam, 1.0))[:3])
    return points[0], points[1], rendered


def sim_cases(robot: RobotModel, robot_name: str, seeds: Sequence[int], tasks: Sequence[str] = TASKS
              ) -> Iterator[PickPlaceCase]:
    """The first pick-and-place of each task and seed on ``robot_name`` (scenes built and closed here)."""
    keeper = SceneKeeper(robot, SceneConfig(workspace=WORKSPACE, table_height_m=0.0, voxel_size_m=VOXEL_M))
    for task in tasks:
        for seed in seeds:
            scene = build_scene(task, seed, robot=robot_name, world_name=f"ppcase-{robot_name}-{next(_names)}")
            try:
                pick, place, rendered = _oracle_points(scene)
                q = np.asarray(scene.world.joint_positions(), dtype=np.float64)
                clouds = [depth_to_point_cloud(v.depth_m, v.model, v.T_base_cam, voxel_size_m=VOXEL_M).points
                          for v in rendered]
                points, _ = voxel_downsample(np.concatenate(clouds), VOXEL_M)
                keeper.update_cloud(points, q, 0.0)
                world = keeper.world(0.0)
            finally:
                scene.close()
            config = PickPlaceConfig(object_size_m=(0.05, 0.05, max(float(pick[2]), 0.01)))
            object_points = None
            if world.points is not None and len(world.points):
                near = np.linalg.norm(world.points[:, :2] - pick[:2], axis=1) <= config.target_clearance_radius_m
                object_points = world.points[near] if near.sum() >= 3 else None
            yield PickPlaceCase(f"{task}/{seed}", world, q, pick, place, config, object_points)
