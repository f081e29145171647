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


def _keeper(clock=None, **overrides) -> SceneKeeper:
    robot = robot_model("xarm6")
    spheres = RobotSpheres.from_curobo_spheres(
        robot, load_robot_config("xarm6")["robot_cfg"]["kinematics"]["collision_spheres"]
    )
    config = SceneConfig(workspace=WorkspaceBox((0.1, -0.6, -0.05), (0.9, 0.6, 0.8)), **overrides)
    return SceneKeeper(robot, config, spheres) if clock is None else SceneKeeper(robot, config, spheres, clock)


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


def test_a_simulated_cells_cloud_ages_on_its_clock_even_while_waited_for():
    """A simulated system's nodes run on the simulator's clock, which stands still between motions: a cloud waited
    for on a loaded machine (wall seconds) arrives as young as the cell is still; after 11 s of simulated motion with no
    newer cloud it is stale (the shipped sim systems' max_cloud_age_s 10 s)."""
    now = [3.0]
    keeper = _keeper(clock=lambda: now[0], max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=5.0)
    delivery = threading.Timer(0.3, keeper.update_cloud, args=(np.array([[0.5, 0.0, 0.2]]), None, 3.0))
    delivery.start()
    try:
        assert keeper.world(now_s=3.0).points is not None
    finally:
        delivery.cancel()
    assert keeper.cloud_age_s(now[0]) == 0.0
    moved = _keeper(clock=lambda: now[0], max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=0.0)
    moved.update_cloud(np.array([[0.5, 0.0, 0.2]]), None, stamp_s=3.0)
    now[0] = 14.0
    with pytest.raises(StaleWorldError, match=r"cloud is 11\.00 s old"):
        moved.world(now_s=14.0)


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


def test_a_cloud_from_before_the_arm_last_moved_is_stale():
    # Regression (Panda long-horizon seed 12): a cloud captured while the arm carried a lego over the
    # duck kept the lego as "duck" points; the grasp centred 2 cm off and the fingers landed on the duck.
    keeper = _keeper(max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=0.0)
    q_rest = keeper.robot.home.copy()
    keeper.update_joint_state(1.0, q_rest)
    keeper.update_cloud(np.array([[0.5, 0.0, 0.2]]), q_rest, stamp_s=2.0)
    assert keeper.world(now_s=2.5).points is not None
    keeper.update_joint_state(2.6, q_rest + 0.001)  # encoder noise: still at rest
    assert keeper.arm_still_since_s == 1.0
    assert keeper.world(now_s=2.7).points is not None
    moved = q_rest.copy()
    moved[0] += 0.3
    keeper.update_joint_state(3.0, moved)  # the arm moves, then rests from t = 3 s
    keeper.update_joint_state(4.0, moved)
    assert keeper.arm_still_since_s == 3.0
    with pytest.raises(StaleWorldError, match="before the arm came to rest"):
        keeper.world(now_s=4.0)  # 2 s old only, but from before the move
    lenient = _keeper(max_cloud_age_s=10.0)
    lenient.update_joint_state(1.0, q_rest)
    lenient.update_cloud(np.array([[0.5, 0.0, 0.2]]), q_rest, stamp_s=2.0)
    lenient.update_joint_state(3.0, moved)
    assert lenient.world(now_s=4.0).points is None  # without require_cloud: not planned against either
    # A cloud captured after the arm came to rest is waited for and used.
    waiting = _keeper(max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=5.0)
    now = time.time()
    waiting.update_joint_state(now - 5.0, q_rest)
    waiting.update_cloud(np.array([[0.5, 0.0, 0.2]]), q_rest, stamp_s=now - 4.0)
    waiting.update_joint_state(now - 1.0, moved)
    delivery = threading.Timer(0.3, waiting.update_cloud, args=(np.array([[0.6, 0.0, 0.2]] * 2), moved, now + 0.3))
    delivery.start()
    try:
        world = waiting.world(now_s=now)
    finally:
        delivery.join()
    assert len(world.points) == 2


def test_a_restamped_cloud_is_the_last_one_captured_later():
    keeper = _keeper(max_cloud_age_s=1.0, require_cloud=True, cloud_wait_s=0.0)
    with pytest.raises(ValueError, match="before any update_cloud"):
        keeper.restamp_cloud(1.0)
    q_rest = keeper.robot.home.copy()
    keeper.update_joint_state(1.0, q_rest)
    keeper.update_cloud(np.array([[0.5, 0.0, 0.2], [0.6, 0.1, 0.2]]), q_rest, stamp_s=2.0)
    with pytest.raises(StaleWorldError, match="old"):
        keeper.world(now_s=5.0)
    keeper.restamp_cloud(4.5)  # the same points seen again at 4.5 s: fresh, the same points
    assert len(keeper.world(now_s=5.0).points) == 2
    keeper.restamp_cloud(3.0)  # an older capture never makes the cloud older
    assert keeper.cloud_age_s(5.0) == pytest.approx(0.5)


def test_a_cloud_from_before_the_scene_was_reset_is_stale_though_the_arm_never_moved():
    # Between the trials of a batch on one stack the cell is laid out anew while the arm waits at the same
    # observation pose: only the reset tells the keeper that the last cloud shows the previous layout.
    keeper = _keeper(max_cloud_age_s=10.0, require_cloud=True, cloud_wait_s=0.0)
    q_rest = keeper.robot.home.copy()
    keeper.update_joint_state(1.0, q_rest)
    keeper.update_cloud(np.array([[0.5, 0.0, 0.2]]), q_rest, stamp_s=2.0)
    assert keeper.world(now_s=2.5).points is not None
    keeper.forget_before(3.0)
    with pytest.raises(StaleWorldError, match=r"captured 1\.00 s before the scene was reset"):
        keeper.world(now_s=3.5)
    keeper.restamp_cloud(2.5)  # the old points seen again before the reset: still the old scene
    with pytest.raises(StaleWorldError, match="before the scene was reset"):
        keeper.world(now_s=3.5)
    keeper.update_cloud(np.array([[0.6, 0.1, 0.2], [0.6, 0.2, 0.2]]), q_rest, stamp_s=3.2)
    assert len(keeper.world(now_s=3.5).points) == 2
