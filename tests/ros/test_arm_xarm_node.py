"""arm_driver_node over real DDS with the xArm backend: the real xarm-python-sdk in the node process talks
to the loopback controller emulator in the test process (only the controller is emulated).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import yaml
from control_msgs.action import GripperCommand
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from robopin_interfaces.action import ExecuteTrajectory
from robopin_ros import conversions
from robopin_ros.actions import ActionClient
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from robopin.robots.description import load_description
from robopin.robots.trajectory import JointTrajectory, min_jerk_move
from tests.doubles.xarm_emulator import XArmControllerEmulator
from tests.ros.rostest_utils import SpunNode, start_process, stop_process, wait_for, wait_future, wait_result

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]

PREFIX = "/robopin/arm"


def start_arm_driver(folder, backend: str, options: dict, **parameters):
    """Start arm_driver_node as its own process with a parameter file."""
    params = {"backend": backend, "options": yaml.safe_dump(options, default_flow_style=True), **parameters}
    path = folder / "arm_driver.yaml"
    path.write_text(yaml.safe_dump({"arm_driver": {"ros__parameters": params}}))
    return start_process(["-m", "robopin_ros.arm_driver_node", "--ros-args", "--params-file", str(path)])


class ArmClient:
    """The test side of the arm driver's ROS interface: actions, services and the state topics."""

    def __init__(self, context, name: str = "arm_test_client") -> None:
        self.spun = SpunNode(name, context)
        node = self.spun.node
        self.execute = ActionClient(node, ExecuteTrajectory, f"{PREFIX}/execute_trajectory")
        self.gripper = ActionClient(node, GripperCommand, f"{PREFIX}/gripper_cmd")
        self.enable = node.create_client(SetBool, f"{PREFIX}/enable")
        self.stop = node.create_client(Trigger, f"{PREFIX}/stop")
        self.recover = node.create_client(Trigger, f"{PREFIX}/recover")
        self.joint_states: list[JointState] = []
        self.poses: list[PoseStamped] = []
        self.diagnostics: list[DiagnosticArray] = []
        node.create_subscription(JointState, "/joint_states", self.joint_states.append, 50)
        node.create_subscription(PoseStamped, f"{PREFIX}/ee_pose", self.poses.append, 50)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        wait_for(lambda: self.execute.server_is_ready() and self.gripper.server_is_ready(), timeout_s, "arm actions")
        wait_for(lambda: len(self.joint_states) > 0, timeout_s, "/joint_states from a connected arm")
        wait_for(lambda: self.status_value("enabled") == "True", timeout_s, "the arm enabled (/diagnostics)")

    def positions(self) -> np.ndarray:
        return np.array(self.joint_states[-1].position)

    def send(self, trajectory: JointTrajectory, feedback: list | None = None):
        goal = ExecuteTrajectory.Goal(trajectory=conversions.arm_trajectory_to_msg(trajectory))
        callback = feedback.append if feedback is not None else None
        future = self.execute.send_goal_async(goal, feedback_callback=callback)
        handle = wait_future(future, 30.0, "goal acceptance")
        assert handle.accepted
        return handle

    def result(self, handle, timeout_s: float = 120.0):
        return wait_result(handle, timeout_s, "trajectory result").result

    def run(self, trajectory: JointTrajectory, feedback: list | None = None):
        return self.result(self.send(trajectory, feedback))

    def grip(self, width_m: float, effort_n: float = 0.0):
        goal = GripperCommand.Goal()
        goal.command.position, goal.command.max_effort = width_m, effort_n
        handle = wait_future(self.gripper.send_goal_async(goal), 30.0, "gripper goal")
        return wait_result(handle, 60.0, "gripper result").result

    def call(self, client, request, timeout_s: float = 30.0):
        wait_for(client.service_is_ready, timeout_s, f"service {client.srv_name}")
        return wait_future(client.call_async(request), timeout_s, f"service {client.srv_name}")

    def last_status(self):
        return self.diagnostics[-1].status[0] if self.diagnostics else None

    def status_value(self, key: str) -> str | None:
        status = self.last_status()
        return None if status is None else {kv.key: kv.value for kv in status.values}.get(key)

    def close(self) -> None:
        self.spun.close()


def plan(description, start: np.ndarray, goal: np.ndarray, slow: float = 1.0) -> JointTrajectory:
    trajectory = min_jerk_move(
        description.joint_names, start, goal, description.velocity_rad_s * 0.3, description.acceleration_rad_s2 * 0.3
    )
    return trajectory.scaled(slow) if slow < 1.0 else trajectory


@pytest.fixture(scope="module")
def emulator():
    with XArmControllerEmulator() as controller:
        yield controller


@pytest.fixture(scope="module")
def xarm_driver(emulator, tmp_path_factory):
    process = start_arm_driver(tmp_path_factory.mktemp("arm_xarm"), "xarm", {"ip": emulator.settings.host})
    yield process
    code, output = stop_process(process)
    assert code == 0, f"arm_driver_node did not stop cleanly (exit {code}):\n{output}"


@pytest.fixture
def client(ros_context, xarm_driver):
    arm_client = ArmClient(ros_context)
    arm_client.wait_ready()
    yield arm_client
    arm_client.close()


XARM6 = load_description("xarm6")


def test_state_topics_follow_the_arm(client, emulator):
    wait_for(lambda: len(client.poses) > 0, 30.0, "ee_pose")
    assert tuple(client.joint_states[-1].name) == XARM6.joint_names
    np.testing.assert_allclose(client.positions(), emulator.joints[:6], atol=1e-3)
    pose = client.poses[-1]
    assert pose.header.frame_id == "base"
    T = XARM6.forward_kinematics(client.positions())
    assert pose.pose.position.z == pytest.approx(T[2, 3], abs=1e-3)


def test_trajectory_executes_with_progress_and_tracking_error(client, emulator):
    start = client.positions()
    goal = start + np.array([0.3, -0.1, 0.1, 0.0, 0.1, 0.2])
    feedback = []
    result = client.run(plan(XARM6, start, goal), feedback)
    assert result.success and result.reason == "completed", result
    np.testing.assert_allclose(emulator.joints[:6], goal, atol=1e-3)
    assert feedback and feedback[-1].feedback.progress == pytest.approx(1.0)
    errors = [f.feedback.tracking_error_rad for f in feedback]
    assert all(math.isfinite(e) and e >= 0.0 for e in errors)


def test_refused_trajectory_names_its_reason_and_sends_nothing(client, emulator):
    start = client.positions()
    beyond = start.copy()
    beyond[2] = XARM6.upper_rad[2] + 0.3
    since = time.monotonic()
    result = client.run(JointTrajectory(XARM6.joint_names, [0.0, 4.0], [start, beyond]))
    assert not result.success and result.reason == "joint_limit", result
    assert emulator.motion_commands(since) == []


def test_cancel_stops_the_arm(client, emulator):
    start = client.positions()
    handle = client.send(plan(XARM6, start, start + np.array([1.0, 0, 0, 0, 0, 0]), slow=0.3))
    wait_for(lambda: abs(emulator.joints[0] - start[0]) > 0.05, 30.0, "the arm moving")
    canceled_at = time.monotonic()
    wait_future(handle.cancel_goal_async(), 30.0, "cancel response")
    result = client.result(handle)
    assert result.reason == "canceled" and not result.success
    assert 4 in emulator.state_requests(canceled_at)
    assert abs(emulator.joints[0] - start[0]) < 0.9


def test_second_goal_while_one_runs_is_refused_as_busy(client, emulator):
    start = client.positions()
    first = client.send(plan(XARM6, start, start + np.array([0.5, 0, 0, 0, 0, 0]), slow=0.5))
    wait_for(lambda: abs(emulator.joints[0] - start[0]) > 0.02, 30.0, "the first goal moving")
    second = client.run(plan(XARM6, start, start + np.array([-0.2, 0, 0, 0, 0, 0])))
    assert second.reason == "busy" and not second.success
    assert client.result(first).success


def test_gripper_command(client, emulator):
    result = client.grip(0.04)
    assert result.reached_goal and result.position == pytest.approx(0.04, abs=0.002)
    assert emulator.gripper_position == pytest.approx(400, abs=5)
    opened = client.grip(0.085)
    assert opened.reached_goal


def test_fault_is_reported_refused_and_recovered_through_services(client, emulator):
    emulator.inject_error(31)
    wait_for(
        lambda: client.last_status() is not None and "collision" in client.last_status().message,
        30.0,
        "the collision fault on /diagnostics",
    )
    start = client.positions()
    refused = client.run(plan(XARM6, start, start + 0.1))
    assert refused.reason == "fault" and "collision" in refused.message
    response = client.call(client.recover, Trigger.Request())
    assert response.success, response.message
    assert emulator.error_code == 0
    assert client.run(plan(XARM6, start, start + 0.1)).success


def test_disable_and_enable_services(client, emulator):
    assert client.call(client.enable, SetBool.Request(data=False)).success
    start = client.positions()
    refused = client.run(plan(XARM6, start, start + 0.05))
    assert refused.reason == "not_enabled"
    assert client.call(client.enable, SetBool.Request(data=True)).success
    assert client.run(plan(XARM6, start, start + 0.05)).success
    assert client.call(client.stop, Trigger.Request()).success
