"""The xArm backend with the real xarm-python-sdk against the loopback controller emulator.

Only the controller is emulated (there is no xArm here); every SDK call, socket and thread is real.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time

import numpy as np
import pytest

from robopin.robots.base import make_arm
from robopin.robots.errors import (
    ArmBusyError,
    ArmConfigError,
    ArmConnectionError,
    ArmFaultError,
    ArmNotEnabledError,
    Reason,
    SafetyViolationError,
)
from robopin.robots.safety import SafetyConfig
from robopin.robots.trajectory import JointTrajectory
from robopin.robots.xarm_arm import GripperFaultError, XArmConfig, controller_fault
from tests.doubles.xarm_emulator import REG_MOVE_SERVOJ

pytestmark = pytest.mark.timeout(120)


def run_in_thread(function, *args, **kwargs):
    """Start ``function`` on a thread; return (thread, box) where box["result"/"error"] holds the outcome."""
    box: dict = {}

    def target():
        try:
            box["result"] = function(*args, **kwargs)
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def wait_until(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


def test_connect_reads_state_and_gives_back_the_socket_default_timeout(xarm, xarm_emulator):
    assert socket.getdefaulttimeout() is None
    state = xarm.joint_state()
    np.testing.assert_allclose(state.positions, xarm_emulator.joints[:6], atol=1e-6)
    assert xarm_emulator.enabled and xarm_emulator.mode == 1


def test_controller_safety_and_tool_mirror_our_settings(xarm_emulator):
    safety = SafetyConfig(workspace_min_m=(0.1, -0.4, 0.05), workspace_max_m=(0.7, 0.4, 0.8), collision_sensitivity=4)
    arm = make_arm(XArmConfig(ip=xarm_emulator.settings.host, safety=safety))
    arm.connect()
    try:
        e = xarm_emulator
        assert e.collision_sensitivity == 4
        np.testing.assert_array_equal(e.reduced_boundary_mm, [700, 100, 400, -400, 800, 50])  # mm
        assert e.reduced_mode and e.fence_mode
        assert e.reduced_tcp_speed_mm_s == pytest.approx(1000.0 * safety.max_tcp_speed_m_s)
        assert e.reduced_joint_speed_rad_s == pytest.approx(float(np.max(arm.safety.max_velocity_rad_s)), rel=1e-6)
        # The controller's TCP is robopin's: the description's 172 mm flange-to-TCP offset.
        np.testing.assert_allclose(e.tcp_offset, [0.0, 0.0, 1000.0 * arm.description.T_link_tcp[2, 3], 0, 0, 0])
        arm.enable()
        np.testing.assert_allclose(e.tcp_load, [0.75, 0.0, 0.0, 64.0], atol=1e-6)  # kg, mm: the xArm Gripper
        assert e.gripper_speed_rpm == 2000  # r/min, xarm_ros2's default
        assert e.mode == 1 and e.state == 2
    finally:
        arm.disconnect()


def test_connect_with_a_standing_error_names_it_and_recover_clears_it(xarm_emulator):
    """A controller holding C31 before connect: connect succeeds, fault() names it, recover() clears it, it moves."""
    xarm_emulator.inject_error(31)
    arm = make_arm(XArmConfig(ip=xarm_emulator.settings.host))
    arm.connect()
    try:
        fault = arm.fault()
        assert fault is not None and fault.name == "collision" and fault.code == 31
        assert "C31" in fault.message and "Collision" in fault.message  # the SDK's own title
        with pytest.raises(ArmFaultError):
            arm.enable()
        assert xarm_emulator.tcp_offset[2] == pytest.approx(172.0)  # settings applied despite the error
        arm.recover()
        assert arm.fault() is None and xarm_emulator.error_code == 0
        arm.enable()
        goal = arm.joint_state().positions + np.array([0.2, -0.1, 0.1, 0.0, 0.1, 0.2])
        result = arm.move_to_joints(goal)
        assert result.success, result
        np.testing.assert_allclose(xarm_emulator.joints[:6], goal, atol=2e-3)
    finally:
        arm.disconnect()


def test_a_gripper_fault_is_named_refused_and_recovered(xarm, xarm_emulator):
    xarm_emulator.inject_gripper_error(9)
    with pytest.raises(GripperFaultError) as raised:
        xarm.gripper_state()  # the SDK answers with a bare code, not (code, position)
    assert raised.value.code == 9 and "G9" in str(raised.value)
    fault = xarm.fault()
    assert fault is not None and fault.name == "gripper_fault" and fault.code == 9
    with pytest.raises(ArmFaultError):
        xarm.gripper_move(0.04)
    xarm.recover()
    assert xarm.fault() is None and xarm_emulator.gripper_error == 0
    assert xarm.gripper_move(0.04).reached_goal


def test_trajectory_is_streamed_with_servo_j_to_the_goal(xarm, xarm_emulator):
    start = xarm.joint_state().positions
    goal = start + np.array([0.3, -0.1, 0.2, 0.0, 0.1, -0.2])
    since = time.monotonic()
    progress = []
    result = xarm.move_to_joints(goal, on_progress=progress.append)
    assert result.success, result
    assert result.final_error_rad < 0.02
    np.testing.assert_allclose(xarm_emulator.joints[:6], goal, atol=1e-4)
    servo = [c for c in xarm_emulator.motion_commands(since) if c.register == REG_MOVE_SERVOJ]
    # One command per stream period over the trajectory, radians on the wire.
    expected = int(np.ceil(progress[-1].duration_s * xarm.config.stream_rate_hz)) + 1
    assert len(servo) == expected
    last_target = np.array(struct.unpack("<7f", servo[-1].payload[:28]))[:6]
    np.testing.assert_allclose(last_target, goal, atol=1e-5)
    assert progress[-1].progress == pytest.approx(1.0)
    # Executed commands leave the controller's queue (the SDK blocks new commands at 1024 queued); the last
    # one may still wait for the controller's next tick when the move reports its end on a loaded machine.
    deadline = time.monotonic() + 5.0
    while xarm_emulator.cmdnum and time.monotonic() < deadline:
        time.sleep(0.01)
    assert xarm_emulator.cmdnum == 0
    assert all(b.time_from_start_s >= a.time_from_start_s for a, b in itertools.pairwise(progress))


def test_gripper_opens_closes_and_detects_a_grasp(make_xarm_emulator):
    emulator = make_xarm_emulator(gripper_object_width_pulses=300.0)
    arm = make_arm(XArmConfig(ip=emulator.settings.host))
    arm.connect()
    arm.enable()
    try:
        opened = arm.gripper_open()
        assert opened.reached_goal and opened.width_m == pytest.approx(0.085, abs=0.001)
        closed = arm.gripper_close(force_n=10.0)
        assert closed.stalled and not closed.reached_goal
        assert closed.width_m == pytest.approx(0.030, abs=0.001)
        moved = arm.gripper_move(0.05)
        assert moved.reached_goal and arm.gripper_state().width_m == pytest.approx(0.05, abs=0.001)
    finally:
        arm.disconnect()


def test_injected_controller_error_is_named_refused_and_recovered(xarm, xarm_emulator):
    start = xarm.joint_state().positions
    goal = start + np.array([0.8, 0.0, 0.0, 0.0, 0.0, 0.0])
    thread, box = run_in_thread(xarm.move_to_joints, goal)
    wait_until(lambda: abs(xarm_emulator.joints[0] - start[0]) > 0.1 or not thread.is_alive())
    assert thread.is_alive(), f"the motion ended before the error was injected: {box}"
    xarm_emulator.inject_error(22)
    thread.join(30)
    result = box["result"]
    assert not result.success and result.reason is Reason.FAULT
    assert result.fault.name == "self_collision" and result.fault.code == 22
    assert xarm.fault().name == "self_collision"
    since = time.monotonic()
    with pytest.raises(ArmFaultError) as refused:
        xarm.move_to_joints(start)
    assert refused.value.fault.name == "self_collision"
    assert xarm_emulator.motion_commands(since) == []
    xarm.recover()
    assert xarm.fault() is None
    assert xarm.move_to_joints(start).success


def test_fault_names_follow_the_sdk_error_table():
    from xarm.core.config.x_code import ControllerErrorCodeMap

    assert controller_fault(31).name == "collision"
    assert controller_fault(2).name == "emergency_stop" and not controller_fault(2).recoverable
    assert controller_fault(40).name == "trajectory_solution_failed"  # not "no IK"
    streaming = {
        24: "speed_limit",
        23: "joint_limit",
        35: "safety_boundary",
        10: "servo_error",
        30: "feedback_speed_limit",
        38: "abnormal_joint_angle",
        60: "servo_linear_speed_limit",
    }
    for code, name in streaming.items():
        fault = controller_fault(code)
        assert fault.name == name and fault.code == code
        assert fault.message.endswith(ControllerErrorCodeMap[code]["en"]["title"])
    assert controller_fault(77).name == "controller_error_77"


@pytest.mark.parametrize(
    "settings",
    [{"gripper_speed_rpm": 0}, {"gripper_speed_rpm": 70000}, {"tcp_load_kg": 0.5}, {"tcp_load_kg": -1.0}],
)
def test_bad_gripper_speed_or_load_is_refused_by_name(settings):
    with pytest.raises(ArmConfigError, match=r"gripper_speed_rpm|tcp_load"):
        XArmConfig(ip="127.0.0.2", **settings)


def test_unreachable_controller_is_reported_at_once():
    arm = make_arm(XArmConfig(ip="127.0.0.3", connect_timeout_s=1.0))  # nothing listens there
    start = time.monotonic()
    with pytest.raises(ArmConnectionError, match="unreachable"):
        arm.connect()
    # Bounded by our probe, not the SDK's own retries (which take seconds to minutes).
    assert time.monotonic() - start < 5.0
    assert not arm.is_connected


def test_hung_controller_is_reported_within_the_handshake_timeout(make_xarm_emulator):
    emulator = make_xarm_emulator(silent=True)  # accepts TCP, never answers
    arm = make_arm(XArmConfig(ip=emulator.settings.host, handshake_timeout_s=1.0))
    start = time.monotonic()
    with pytest.raises(ArmConnectionError, match="handshake"):
        arm.connect()
    assert time.monotonic() - start < 5.0  # without the worker thread the SDK blocks for minutes
    assert socket.getdefaulttimeout() is None


def _refused(arm, emulator, trajectory) -> Reason:
    since = time.monotonic()
    with pytest.raises(SafetyViolationError) as caught:
        arm.execute(trajectory)
    assert emulator.motion_commands(since) == [], "a refused trajectory must send nothing"
    return caught.value.reason


def test_safety_refusals_send_nothing_to_the_controller(xarm, xarm_emulator):
    names = xarm.joint_names
    here = xarm.joint_state().positions
    limit = here.copy()
    limit[2] = xarm.description.upper_rad[2] + 0.2
    assert _refused(xarm, xarm_emulator, JointTrajectory(names, [0.0, 3.0], [here, limit])) is Reason.JOINT_LIMIT
    jump = here + np.array([0.9, 0, 0, 0, 0, 0])
    assert _refused(xarm, xarm_emulator, JointTrajectory(names, [0.0, 5.0], [here, jump])) is Reason.JUMP
    fast = here + np.array([0.3, 0, 0, 0, 0, 0])
    assert _refused(xarm, xarm_emulator, JointTrajectory(names, [0.0, 0.05], [here, fast])) is Reason.VELOCITY_LIMIT
    # Lowering the shoulder drives the TCP through the floor of the box (z < 0).
    down = xarm.plan_move(here + np.array([0.0, 1.2, 0.0, 0.0, 0.0, 0.0]))
    assert _refused(xarm, xarm_emulator, down) is Reason.WORKSPACE
    elsewhere = JointTrajectory(names, [0.0, 1.0], [here + 0.2, here + 0.25])
    assert _refused(xarm, xarm_emulator, elsewhere) is Reason.START_MISMATCH


def test_stale_state_is_refused_before_moving(xarm, xarm_emulator):
    trajectory = xarm.plan_move(xarm.joint_state().positions + 0.1)
    xarm_emulator.reports_paused = True
    time.sleep(xarm.config.safety.state_max_age_s + 0.1)
    assert _refused(xarm, xarm_emulator, trajectory) is Reason.STALE_STATE


def test_state_going_stale_mid_motion_stops_the_arm(xarm, xarm_emulator):
    start = xarm.joint_state().positions
    thread, box = run_in_thread(xarm.move_to_joints, start + np.array([1.0, 0, 0, 0, 0, 0]))
    wait_until(lambda: abs(xarm_emulator.joints[0] - start[0]) > 0.05)
    paused_at = time.monotonic()
    xarm_emulator.reports_paused = True
    thread.join(30)
    result = box["result"]
    assert result.reason is Reason.STALE_STATE and not result.success
    assert 4 in xarm_emulator.state_requests(paused_at)  # the controller was told to stop
    xarm_emulator.reports_paused = False
    trip_time = max(c.time_s for c in xarm_emulator.commands if c.register == 12 and c.payload[:1] == b"\x04")
    assert len(xarm_emulator.servo_times(trip_time + 0.05)) == 0


def test_cancel_mid_motion_stops_the_arm(xarm, xarm_emulator):
    start = xarm.joint_state().positions
    thread, box = run_in_thread(xarm.move_to_joints, start + np.array([1.0, 0, 0, 0, 0, 0]))
    wait_until(lambda: abs(xarm_emulator.joints[0] - start[0]) > 0.1)
    canceled_at = time.monotonic()
    assert xarm.cancel()
    thread.join(30)
    result = box["result"]
    assert result.reason is Reason.CANCELED and not result.success
    assert 4 in xarm_emulator.state_requests(canceled_at)
    settled = xarm_emulator.joints.copy()
    time.sleep(0.2)
    np.testing.assert_allclose(xarm_emulator.joints, settled, atol=1e-6)
    assert abs(settled[0] - start[0]) < 0.95  # stopped well before the goal
    # The next motion re-arms the controller and runs.
    assert xarm.move_to_joints(start).success


def test_second_motion_while_one_runs_is_refused(xarm, xarm_emulator):
    start = xarm.joint_state().positions
    thread, box = run_in_thread(xarm.move_to_joints, start + np.array([0.6, 0, 0, 0, 0, 0]))
    wait_until(lambda: xarm.is_moving)
    with pytest.raises(ArmBusyError):
        xarm.move_to_joints(start)
    thread.join(30)
    assert box["result"].success


def test_disabled_arm_and_dry_run_send_no_motion(xarm, xarm_emulator):
    goal = xarm.joint_state().positions + 0.1
    since = time.monotonic()
    result = xarm.move_to_joints(goal, dry_run=True)
    assert result.success and result.reason is Reason.DRY_RUN
    xarm.disable()
    with pytest.raises(ArmNotEnabledError):
        xarm.move_to_joints(goal)
    assert xarm_emulator.motion_commands(since) == []


def test_a_lost_controller_connection_is_a_named_fault(xarm, xarm_emulator):
    xarm_emulator.stop()  # the controller goes away (power, cable)
    wait_until(lambda: xarm.fault() is not None, timeout_s=30.0)
    assert xarm.fault().name == "connection_lost"
    with pytest.raises(ArmFaultError):
        xarm.move_to_joints(xarm.joint_state().positions + 0.05)
