"""arm_driver_node over real DDS with the Franka backend: real franky (libfranka) in the node process,
franky-sim's MuJoCo robot server (the real libfranka protocol) in a third process.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from robopin.robots.description import load_description
from robopin.robots.trajectory import JointTrajectory
from tests.ros.rostest_utils import stop_process, wait_for, wait_future
from tests.ros.test_arm_xarm_node import ArmClient, plan, start_arm_driver

pytest.importorskip("franky_sim", reason="franky-sim is in requirements/robots.txt")

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(600)]

FR3 = load_description("fr3")


@pytest.fixture(scope="module")
def franka_driver(tmp_path_factory):
    from tests.doubles.franka_sim_process import FrankaSimProcess

    with FrankaSimProcess() as sim:
        options = {"ip": sim.hostname}  # the shipped defaults (relative_dynamics_factor 0.2)
        process = start_arm_driver(tmp_path_factory.mktemp("arm_franka"), "franka", options)
        yield process
        code, output = stop_process(process, timeout_s=20.0)
        assert code == 0, f"arm_driver_node did not stop cleanly (exit {code}):\n{output}"


@pytest.fixture
def client(ros_context, franka_driver):
    arm_client = ArmClient(ros_context, "arm_franka_test_client")
    arm_client.wait_ready(120.0)
    yield arm_client
    arm_client.close()


def test_joint_and_waypoint_motions(client):
    start = client.positions()
    goal = start + np.array([0.3, 0.1, 0.0, 0.2, 0.0, 0.1, 0.2])
    feedback = []
    result = client.run(plan(FR3, start, goal), feedback)
    assert result.success, result
    assert result.final_error_rad < 0.02
    assert feedback and feedback[-1].feedback.progress == pytest.approx(1.0, abs=0.05)
    # A three-waypoint trajectory without velocities, back through a via point.
    via = goal + np.array([-0.15, 0.0, 0.0, -0.1, 0.0, 0.0, 0.0])
    path = JointTrajectory(FR3.joint_names, [0.0, 1.5, 3.0], [goal, via, start])
    result = client.run(path)
    assert result.success, result
    wait_for(lambda: np.max(np.abs(client.positions() - start)) < 0.02, 30.0, "the arm back at the start")


def test_cancel_stops_the_arm(client):
    start = client.positions()
    handle = client.send(plan(FR3, start, start + np.array([1.2, 0, 0, 0, 0, 0, 0]), slow=0.3))
    wait_for(lambda: abs(client.positions()[0] - start[0]) > 0.05, 60.0, "the arm moving")
    wait_future(handle.cancel_goal_async(), 30.0, "cancel response")
    result = client.result(handle)
    assert result.reason == "canceled" and not result.success
    # At rest: judged from positions (franky-sim reports velocity chatter on the wrist joint).
    before = client.positions()
    time.sleep(0.3)
    after = client.positions()
    assert np.max(np.abs(after - before)) < 0.01
    assert abs(after[0] - (start[0] + 1.2)) > 0.3
    back = client.run(plan(FR3, client.positions(), start))
    assert back.success, back


def test_gripper_through_the_node(client):
    moved = client.grip(0.04)
    assert moved.reached_goal and moved.position == pytest.approx(0.04, abs=0.003)
    closed = client.grip(0.0, 20.0)
    assert closed.position < 0.005 and not closed.stalled
    assert client.grip(0.08).position > 0.07
