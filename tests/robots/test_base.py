"""The arm factory and config contract: lazy backends by type name, validated configs, named errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from robopin.robots.base import (
    ArmConfig,
    ArmConfigError,
    ArmNotConnectedError,
    UnknownArmTypeError,
    available_arm_types,
    make_arm,
    make_arm_config,
)
from robopin.robots.errors import Reason
from robopin.robots.safety import SafetyConfig
from robopin.robots.xarm_arm import XArm, XArmConfig


def test_factory_table_names_every_backend():
    assert {"sim", "xarm", "franka"} <= set(available_arm_types())


def test_unknown_type_names_the_choices():
    with pytest.raises(UnknownArmTypeError, match="xarm"):
        make_arm_config("ur5")


def test_config_from_plain_values_with_nested_safety():
    config = make_arm_config("xarm", {"ip": "10.0.0.2", "safety": {"speed_scale": 0.5}})
    assert isinstance(config, XArmConfig) and config.type == "xarm"
    assert isinstance(config.safety, SafetyConfig) and config.safety.speed_scale == 0.5
    with pytest.raises(ArmConfigError, match="stream_hz"):
        make_arm_config("xarm", {"ip": "10.0.0.2", "stream_hz": 100})


def test_config_values_are_validated_with_the_bad_value_named():
    with pytest.raises(ArmConfigError, match="ip"):
        XArmConfig()
    with pytest.raises(ArmConfigError, match="stream_rate_hz"):
        XArmConfig(ip="10.0.0.2", stream_rate_hz=1000.0)
    with pytest.raises(ArmConfigError, match="robot 'ur5'"):
        XArmConfig(ip="10.0.0.2", robot="ur5")
    with pytest.raises(ArmConfigError, match="gripper"):
        XArmConfig(ip="10.0.0.2", gripper="suction")


def test_backends_construct_without_connecting():
    arm = make_arm(XArmConfig(ip="10.0.0.2"))
    assert isinstance(arm, XArm) and not arm.is_connected
    with pytest.raises(ArmNotConnectedError) as caught:
        arm.joint_state()
    assert caught.value.reason is Reason.NOT_CONNECTED


def test_backend_sdks_are_imported_only_when_connecting():
    # A fresh interpreter: building both backends must not import either SDK.
    code = (
        "import sys\n"
        "from robopin.robots.base import make_arm, make_arm_config\n"
        "franka = make_arm(make_arm_config('franka', {'ip': '10.0.0.2'}))\n"
        "xarm = make_arm(make_arm_config('xarm', {'ip': '10.0.0.2'}))\n"
        "print(franka.description.name, 'franky' in sys.modules, 'xarm' in sys.modules)\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert output.stdout.split() == ["fr3", "False", "False"]


def test_make_arm_refuses_what_is_not_a_config():
    with pytest.raises(ArmConfigError, match="ArmConfig"):
        make_arm({"type": "xarm"})  # type: ignore[arg-type]
    assert issubclass(XArmConfig, ArmConfig)
