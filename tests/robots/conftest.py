"""Fixtures for the arm backends: a loopback xArm controller emulator (the real SDK talks to it)."""

from __future__ import annotations

import pytest

from tests.doubles.xarm_emulator import EmulatorSettings, XArmControllerEmulator


@pytest.fixture
def make_xarm_emulator():
    """Start an xArm controller emulator on 127.0.0.2 (ports 502/30003, so one at a time)."""
    started: list[XArmControllerEmulator] = []

    def start(**settings) -> XArmControllerEmulator:
        emulator = XArmControllerEmulator(EmulatorSettings(**settings)).start()
        started.append(emulator)
        return emulator

    yield start
    for emulator in started:
        emulator.stop()


@pytest.fixture
def xarm_emulator(make_xarm_emulator) -> XArmControllerEmulator:
    return make_xarm_emulator()


@pytest.fixture
def xarm(xarm_emulator):
    """A connected, enabled XArm (the real xarm-python-sdk) on the emulator."""
    from robopin.robots.base import make_arm
    from robopin.robots.xarm_arm import XArmConfig

    arm = make_arm(XArmConfig(ip=xarm_emulator.settings.host))
    arm.connect()
    arm.enable()
    yield arm
    arm.disconnect()


@pytest.fixture(scope="session")
def franka_sim():
    """One franky-sim server (MuJoCo, real libfranka protocol) for the whole session; startup ~5-15 s."""
    pytest.importorskip("franky_sim", reason="franky-sim is in requirements/robots.txt")
    from tests.doubles.franka_sim_process import FrankaSimProcess

    with FrankaSimProcess() as sim:
        yield sim


@pytest.fixture
def franka(franka_sim):
    """A connected, enabled FrankaArm on the simulator at the shipped defaults, back at its start afterwards."""
    from robopin.robots.base import make_arm
    from robopin.robots.franka_arm import FrankaArmConfig

    arm = make_arm(FrankaArmConfig(ip=franka_sim.hostname))
    arm.connect()
    arm.enable()
    start = arm.joint_state().positions
    yield arm
    try:
        if arm.fault() is not None:
            arm.recover()
        arm.move_to_joints(start)
    finally:
        arm.disconnect()


@pytest.fixture
def xarm_sdk(xarm_emulator):
    """The bare xarm-python-sdk ``XArmAPI`` on the emulator, enabled and streaming-ready (mode 1, state 0)."""
    from robopin.robots.xarm_arm import _import_sdk

    api = _import_sdk()(xarm_emulator.settings.host, is_radian=True, report_type="real", check_joint_limit=True)
    try:
        assert api.connected
        assert api.motion_enable(True) == 0 and api.set_mode(1) == 0 and api.set_state(0) == 0
        yield api
    finally:
        api.disconnect()
