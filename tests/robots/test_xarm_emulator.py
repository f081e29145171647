"""The xArm controller emulator's rules, driven by the real xarm-python-sdk (``XArmAPI``) as a user would.

Each test is one controller rule robopin relies on; the codes are the SDK's own (x_code.py,
ControllerErrorCodeMap), the status bits and return codes the SDK's (uxbus_cmd_tcp.py, code.py).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tests.doubles.xarm_emulator import (
    ERROR_JOINT_LIMIT,
    ERROR_SAFETY_BOUNDARY,
    ERROR_SERVO_LINEAR_SPEED,
    ERROR_SPEED_LIMIT,
    STATE_STOPPED,
)

pytestmark = pytest.mark.timeout(120)

SDK_HAS_ERROR = 1  # APIState.HAS_ERROR: the reply's error bit (0x40)


def controller_error(api) -> int:
    code, (error, _warning) = api.get_err_warn_code()
    assert code == 0
    return int(error)


def here(emulator) -> np.ndarray:
    return emulator.joints[: emulator.settings.dof].copy()


def stream(api, start: np.ndarray, goal: np.ndarray, step_rad: float) -> list[int]:
    """Servo targets from ``start`` to ``goal`` in steps of at most ``step_rad``; the SDK codes returned."""
    count = max(1, int(np.ceil(np.max(np.abs(goal - start)) / step_rad)))
    return [
        api.set_servo_angle_j(list(start + (goal - start) * k / count), is_radian=True) for k in range(1, count + 1)
    ]


def test_a_standing_error_refuses_motion_with_the_sdk_status_bits(xarm_sdk, xarm_emulator):
    xarm_emulator.inject_error(31)
    before = here(xarm_emulator)
    code = xarm_sdk.set_servo_angle_j(list(before + 0.01), is_radian=True)
    assert code == SDK_HAS_ERROR  # the 0x40 status bit, as the SDK reads it
    assert controller_error(xarm_sdk) == 31
    assert xarm_sdk.get_state() == (0, STATE_STOPPED)
    time.sleep(0.05)
    np.testing.assert_allclose(here(xarm_emulator), before, atol=1e-9)
    # clean_error alone is not enough: the controller waits in state 4 for set_state(0).
    xarm_sdk.clean_error()
    assert controller_error(xarm_sdk) == 0
    xarm_sdk.set_servo_angle_j(list(before + 0.01), is_radian=True)
    time.sleep(0.05)
    np.testing.assert_allclose(here(xarm_emulator), before, atol=1e-9)
    assert xarm_sdk.set_state(0) == 0
    assert xarm_sdk.set_servo_angle_j(list(before + 0.01), is_radian=True) == 0


def test_an_oversized_servo_step_faults_with_speed_limit(xarm_sdk, xarm_emulator):
    start = here(xarm_emulator)
    limit_step = xarm_emulator.settings.joint_speed_limit_rad_s * xarm_emulator.settings.servo_period_s
    assert all(code == 0 for code in stream(xarm_sdk, start, start + np.array([0.1, 0, 0, 0, 0, 0]), 0.5 * limit_step))
    jump = here(xarm_emulator) + np.array([0.2, 0, 0, 0, 0, 0])  # far more than one period allows
    xarm_sdk.set_servo_angle_j(list(jump), is_radian=True)
    assert controller_error(xarm_sdk) == ERROR_SPEED_LIMIT
    time.sleep(0.05)
    assert abs(here(xarm_emulator)[0] - jump[0]) > 0.15  # it faulted instead of clamping its way there


def test_a_target_outside_the_reduced_joint_range_faults_with_joint_limit(xarm_sdk, xarm_emulator):
    start = here(xarm_emulator)
    joint_range = []
    for j, q in enumerate(start):
        joint_range += [q - 0.1, q + 0.1] if j == 0 else [-6.28, 6.28]
    assert xarm_sdk.set_reduced_joint_range(joint_range, is_radian=True) == 0
    within = start + np.array([0.08, 0, 0, 0, 0, 0])
    assert all(code == 0 for code in stream(xarm_sdk, start, within, 0.01))
    beyond = start + np.array([0.14, 0, 0, 0, 0, 0])
    assert all(code == 0 for code in stream(xarm_sdk, within, beyond, 0.01))  # beyond: reduced mode still off
    assert all(code == 0 for code in stream(xarm_sdk, beyond, within, 0.01))
    assert controller_error(xarm_sdk) == 0
    assert xarm_sdk.set_reduced_mode(True) == 0
    stream(xarm_sdk, within, beyond, 0.01)
    assert controller_error(xarm_sdk) == ERROR_JOINT_LIMIT


def test_reduced_mode_speeds_take_effect_when_reduced_mode_is_set(xarm_sdk, xarm_emulator):
    start = here(xarm_emulator)
    # 0.02 rad per 10 ms period = 2 rad/s: inside the arm's 3.14 rad/s, outside a reduced 1 rad/s.
    assert xarm_sdk.set_reduced_max_joint_speed(1.0, is_radian=True) == 0
    step = 0.02
    assert all(code == 0 for code in stream(xarm_sdk, start, start + np.array([0, 0, 0, 0, 0, 0.1]), step))
    assert controller_error(xarm_sdk) == 0
    assert xarm_sdk.set_reduced_mode(True) == 0
    stream(xarm_sdk, start + np.array([0, 0, 0, 0, 0, 0.1]), start, step)
    assert controller_error(xarm_sdk) == ERROR_SPEED_LIMIT


def test_a_tcp_step_faster_than_the_reduced_tcp_speed_faults_with_linear_speed(xarm_sdk, xarm_emulator):
    start = here(xarm_emulator)
    period = xarm_emulator.settings.servo_period_s
    probe = start + np.array([0.005, 0, 0, 0, 0, 0])
    tcp_speed = np.linalg.norm(xarm_emulator.tcp_position_mm(probe) - xarm_emulator.tcp_position_mm(start)) / period
    assert xarm_sdk.set_reduced_max_tcp_speed(0.5 * tcp_speed) == 0
    assert xarm_sdk.set_reduced_mode(True) == 0
    assert xarm_sdk.set_servo_angle_j(list(start + np.array([0.001, 0, 0, 0, 0, 0])), is_radian=True) == 0
    assert controller_error(xarm_sdk) == 0
    xarm_sdk.set_servo_angle_j(list(probe), is_radian=True)
    assert controller_error(xarm_sdk) == ERROR_SERVO_LINEAR_SPEED


def test_the_reduced_boundary_applies_at_the_tcp_offset(xarm_sdk, xarm_emulator):
    start = here(xarm_emulator)
    flange_z = xarm_emulator.tcp_position_mm(start)[2]
    # A floor 86 mm under the flange: the flange is inside, a TCP 172 mm along the (downward) tool axis is not.
    floor = flange_z - 86.0
    assert xarm_sdk.set_reduced_tcp_boundary([900, -900, 900, -900, 1200, floor]) == 0
    assert xarm_sdk.set_fence_mode(True)[0] == 0
    assert xarm_sdk.set_reduced_mode(True) == 0
    nudge = start + np.array([0, 0, 0, 0, 0, 0.002])
    assert xarm_sdk.set_servo_angle_j(list(nudge), is_radian=True) == 0
    assert controller_error(xarm_sdk) == 0
    assert xarm_sdk.set_tcp_offset([0, 0, 172, 0, 0, 0], is_radian=True, wait=False) == 0
    assert xarm_emulator.tcp_position_mm(start)[2] < floor
    xarm_sdk.set_servo_angle_j(list(start), is_radian=True)
    assert controller_error(xarm_sdk) == ERROR_SAFETY_BOUNDARY


def test_a_mode_change_takes_effect_at_set_state_0(xarm_sdk, xarm_emulator):
    assert xarm_sdk.set_mode(0) == 0
    time.sleep(0.05)
    assert xarm_emulator.mode == 1 and xarm_sdk.mode == 1  # the report still says servo mode
    assert xarm_sdk.set_state(0) == 0
    deadline = time.monotonic() + 5.0
    while xarm_sdk.mode != 0:  # the SDK learns the mode from the report stream
        assert time.monotonic() < deadline, "the report never showed mode 0"
        time.sleep(0.01)
    before = here(xarm_emulator)
    xarm_sdk.set_servo_angle_j(list(before + 0.01), is_radian=True)  # servo-j outside servo mode: ignored
    time.sleep(0.05)
    np.testing.assert_allclose(here(xarm_emulator), before, atol=1e-9)


def test_the_gripper_moves_at_its_speed_register(xarm_sdk, xarm_emulator):
    seen: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen.append(xarm_emulator.gripper_velocity_pulses_s)
            time.sleep(0.002)

    assert xarm_sdk.set_gripper_mode(0) == 0 and xarm_sdk.set_gripper_enable(True) == 0
    for rpm, target in ((1000, 400), (3000, 850)):
        assert xarm_sdk.set_gripper_speed(rpm) == 0
        seen.clear()
        done.clear()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        assert xarm_sdk.set_gripper_position(target, wait=True, timeout=10) == 0
        done.set()
        sampler.join()
        assert xarm_emulator.gripper_speed_rpm == rpm
        assert max(seen) == pytest.approx(rpm * xarm_emulator.settings.gripper_pulses_s_per_rpm, rel=1e-6)
