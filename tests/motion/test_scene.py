"""The scene keeper: workspace crop, robot masking, table removal and cloud freshness."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from robopin.geometry.workspace import WorkspaceBox
from robopin.motion.curobo.spheres import RobotSpheres, load_robot_config
from robopin.motion.errors import MotionConfigError
from robopin.motion.scene import SceneConfig, SceneKeeper, StaleWorldError

from .conftest import robot_model


def _keeper(**overrides) -> SceneKeeper:
    robot = robot_model("xarm6")
    spheres = RobotSpheres.from_curobo_spheres(
        robot, load_robot_config("xarm6")["robot_cfg"]["kinematics"]["collision_spheres"]
    )
    config = SceneConfig(workspace=WorkspaceBox((0.1, -0.6, -0.05), (0.9, 0.6, 0.8)), **overrides)
    return SceneKeeper(robot, config, spheres)


def test_cloud_is_cropped_masked_and_table_free():
    keeper = _keeper()
    robot = keeper.robot
    tcp = robot.forward_kinematics(robot.home)[:3, 3]
    rng = np.random.default_rng(0)
    obstacle = rng.uniform([0.5, 0.2, 0.05], [0.6, 0.3, 0.15], size=(300, 3))
    on_hand = tcp - 0.08 * robot.forward_kinematics(robot.home)[:3, 2] + rng.uniform(-0.01, 0.01, size=(50, 3))
    table = np.column_stack([rng.uniform(0.2, 0.8, 200), rng.uniform(-0.5, 0.5, 200), np.zeros(200)])
    far = rng.uniform([2.0, 2.0, 0.1], [3.0, 3.0, 0.5], size=(40, 3))
    kept = keeper.update_cloud(np.vstack([obstacle, on_hand, table, far]), robot.home, stamp_s=10.0)
    assert kept == 300 and keeper.masked_points == 50
    world = keeper.world(now_s=10.5)
    assert len(world.points) == 300 and "table" in world.boxes


def test_stale_cloud_is_dropped_or_refused():
    keeper = _keeper(max_cloud_age_s=1.0)
    keeper.update_cloud(np.array([[0.5, 0.0, 0.2]]), None, stamp_s=5.0)
    assert keeper.world(now_s=5.5).points is not None
    assert keeper.world(now_s=7.0).points is None  # too old: not planned against
    strict = _keeper(max_cloud_age_s=1.0, require_cloud=True, cloud_wait_s=0.0)
    with pytest.raises(StaleWorldError, match="no cloud yet"):
        strict.world(now_s=1.0)
    strict.update_cloud(np.array([[0.5, 0.0, 0.2]]), None, stamp_s=5.0)
    with pytest.raises(StaleWorldError, match="old"):
        strict.world(now_s=7.0)


def test_workspace_check_and_config_validation():
    keeper = _keeper()
    assert keeper.inside_workspace([0.5, 0.0, 0.2])
    assert not keeper.inside_workspace([1.5, 0.0, 0.2])
    with pytest.raises(MotionConfigError, match="max_cloud_age_s"):
        SceneConfig(max_cloud_age_s=0.0)


def test_a_required_cloud_is_waited_for_a_bounded_time():
    # Regression: the first cloud arrives seconds after start-up; a plan requested before it was
    # refused at once (stale_world: no cloud yet) instead of waiting for it.
    keeper = _keeper(max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=5.0)
    now = time.time()
    delivery = threading.Timer(0.3, keeper.update_cloud, args=(np.array([[0.5, 0.0, 0.2]]), None, now + 0.3))
    delivery.start()
    try:
        world = keeper.world(now_s=now)
    finally:
        delivery.join()
    assert world.points is not None and len(world.points) == 1
    impatient = _keeper(max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=0.2)
    started = time.monotonic()
    with pytest.raises(StaleWorldError, match="no cloud yet"):
        impatient.world(now_s=now)
    assert time.monotonic() - started < 5.0  # bounded: refused once the wait is over
    with pytest.raises(MotionConfigError, match="cloud_wait_s"):
        SceneConfig(cloud_wait_s=-1.0)
