"""Fixtures for the arm backends: a loopback xArm controller emulator (the real SDK talks to it)."""

from __future__ import annotations

import pytest

from robopin.robots.xarm_emulator import EmulatorSettings, XArmControllerEmulator


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
