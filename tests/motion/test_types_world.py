"""Plain motion data: trajectories, boxes, attached objects and the versioned collision world."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.motion.errors import MotionConfigError, WorldError
from robopin.motion.types import Box, JointTrajectory, PlanResult, PlanStatus
from robopin.motion.world import CollisionWorld
from robopin.robots.errors import TrajectoryError
from robopin.robots.trajectory import JointTrajectory as ArmTrajectory


def _trajectory(times):
    n = len(times)
    return JointTrajectory(("a", "b"), times, np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((n, 2)))


def test_planners_and_arms_share_one_trajectory_type():
    assert JointTrajectory is ArmTrajectory


def test_trajectory_rejects_bad_times_and_shapes():
    with pytest.raises(TrajectoryError, match="strictly increase"):
        _trajectory([0.0, 0.5, 0.5])
    with pytest.raises(MotionConfigError, match="start at 0"):  # an arm goal may start later; a plan may not
        PlanResult(PlanStatus.SUCCESS, 0.1, _trajectory([0.1, 0.5]))
    with pytest.raises(TrajectoryError, match="positions has shape"):
        JointTrajectory(("a",), [0.0, 1.0], np.zeros((2, 2)), np.zeros((2, 1)), np.zeros((2, 1)))
    with pytest.raises(TrajectoryError, match="accelerations has shape"):
        JointTrajectory(("a",), [0.0, 1.0], np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((1, 1)))


def test_trajectory_sample_interpolates_and_clamps():
    traj = JointTrajectory(("a",), [0.0, 1.0, 3.0], [[0.0], [1.0], [-1.0]], np.zeros((3, 1)), np.zeros((3, 1)))
    assert traj.duration_s == 3.0
    assert traj.sample(0.5)[0] == pytest.approx(0.5)
    assert traj.sample(2.0)[0] == pytest.approx(0.0)
    assert traj.sample(-1.0)[0] == 0.0 and traj.sample(10.0)[0] == -1.0


def test_plan_result_success_needs_a_trajectory():
    assert not PlanResult(PlanStatus.SUCCESS, 0.1).success
    assert not PlanResult(PlanStatus.NO_PATH, 0.1, _trajectory([0.0, 1.0])).success
    assert PlanResult(PlanStatus.SUCCESS, 0.1, _trajectory([0.0, 1.0])).success


def test_box_validation_names_the_bad_value():
    with pytest.raises(MotionConfigError, match=r"'wall' size_m"):
        Box("wall", (0.1, -0.2, 0.3), np.eye(4))
    skewed = np.eye(4)
    skewed[0, 1] = 0.5
    with pytest.raises(MotionConfigError, match="not a rigid transform"):
        Box("wall", (0.1, 0.2, 0.3), skewed)


def test_world_version_counts_every_change():
    world = CollisionWorld()
    versions = [world.version]
    world.add_table(0.0)
    versions.append(world.version)
    world.add_box("b", (0.1, 0.1, 0.1), np.eye(4))
    versions.append(world.version)
    world.set_point_cloud(np.zeros((5, 3)))
    versions.append(world.version)
    world.attach("held", (0.05, 0.05, 0.05), np.eye(4))
    versions.append(world.version)
    world.detach()
    world.remove("b")
    versions.append(world.version)
    assert versions == sorted(set(versions))
    assert world.boxes["table"].T_base_box[2, 3] == pytest.approx(-0.025)


def test_world_rejects_bad_clouds_and_unknown_boxes():
    world = CollisionWorld()
    with pytest.raises(WorldError, match="N×3"):
        world.set_point_cloud(np.zeros((4, 2)))
    with pytest.raises(WorldError, match="no box named 'nope'"):
        world.remove("nope")
    world.set_point_cloud([[0.0, 0.0, 0.0], [np.nan, 0.0, 0.0]])
    assert len(world.points) == 1


def test_world_copy_is_independent():
    world = CollisionWorld()
    world.add_table(0.0)
    copy = world.copy()
    copy.add_box("extra", (0.1, 0.1, 0.1), np.eye(4))
    assert "extra" not in world.boxes
