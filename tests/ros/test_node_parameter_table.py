"""The core's table of declared parameters (robopin.system.node_parameters) against the live nodes (issue 33).

Every node of both simulated systems is started for real through robopin_ros.bringup.Bringup (the recorder in
its own process, as robopin up runs it) and each node's declared top-level parameters must be the table's:
a parameter added to a node without the table would be refused in system files, one dropped would pass unseen.
A node given a parameter it does not declare (a system object built past the file check, or ``ros2 run`` with
``-p``) is refused at start, naming the parameter and the nearest declared one.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
from rcl_interfaces.srv import ListParameters

from robopin.env import REPO_ROOT
from robopin.settings import described
from robopin.system import load_system
from robopin.system.node_parameters import NESTED_SETTINGS, NODE_PARAMETERS, ROS_OWN_PARAMETERS, VIEW_TOPIC_PREFIX
from tests.ros.rostest_utils import SpunNode, call_service, wait_for

pytestmark = pytest.mark.ros

def _top_level(executable: str, names: list[str]) -> set[str]:
    """``names`` without rclpy's own, the dotted keys of nested settings and the per-view camera topic settings."""
    nested = NESTED_SETTINGS[executable]
    top = set()
    for name in names:
        head, dot, _ = name.partition(".")
        if dot:
            assert head in nested or head == VIEW_TOPIC_PREFIX, f"{executable}: dotted {name!r} is no nested setting"
            continue
        top.add(name)
    return top - ROS_OWN_PARAMETERS


def _remote_parameter_names(name: str, timeout_s: float = 60.0) -> list[str]:
    probe = SpunNode("parameter_table_probe", context=None)  # rclpy's default context, which the stack's uses
    try:
        client = probe.node.create_client(ListParameters, f"{name}/list_parameters")
        response = call_service(client, ListParameters.Request(), timeout_s, f"{name}/list_parameters")
        return list(response.result.names)
    finally:
        probe.close()


def _configs() -> dict[str, tuple[type, ...]]:
    from robopin.cameras.base import CameraConfig
    from robopin.geometry.crossview import CrossViewConfig
    from robopin.geometry.depth import DepthConfig
    from robopin.geometry.projection import ProjectionConfig
    from robopin.system.node_settings import NODE_SETTINGS, node_settings

    return {"projection_node": (DepthConfig, CrossViewConfig, ProjectionConfig), "camera_node": (CameraConfig,),
            **{executable: node_settings(executable) for executable in NODE_SETTINGS}}


_SETTINGS = _configs()


def _node_default(executable: str, config: type):
    """The node's default of a config: the core's, but for the projection node's stale-frame check (1 s)."""
    from robopin_ros.projection_node import NODE_PROJECTION_DEFAULTS

    if executable == "projection_node" and config is type(NODE_PROJECTION_DEFAULTS):
        return NODE_PROJECTION_DEFAULTS
    return config()


@pytest.mark.slow
@pytest.mark.parametrize("system_name", ["sim_panda", "sim_xarm6"])
def test_every_live_node_declares_exactly_the_tables_parameters(system_name):
    from robopin_ros.bringup import Bringup

    system = load_system(REPO_ROOT / "config" / f"{system_name}.yaml", {})
    seen = set()
    with Bringup(system, client=False, check_model=False) as bringup:
        for name, node in bringup.nodes.items():
            executable = system.node(name).executable
            live = _top_level(executable, list(node._parameters))
            table = set(NODE_PARAMETERS[executable])
            assert live == table, (f"{name} ({executable}): declared but not in the table {sorted(live - table)}, "
                                   f"in the table but not declared {sorted(table - live)}")
            for config in _SETTINGS.get(executable, ()):
                for field, about in described(config).items():
                    parameter = node._parameters[about.parameter or field]
                    descriptor = node.describe_parameter(about.parameter or field)
                    default = getattr(_node_default(executable, config), field)
                    if isinstance(default, dict):  # a nested setting: name.key parameters beside the YAML form
                        assert descriptor.description.startswith(f"{about.text}, as one YAML mapping"), field
                        continue
                    assert descriptor.description == about.text, (executable, field)
                    assert parameter.value == default or \
                        f"{about.parameter or field}" in system.node(name).parameters, (executable, field)
            seen.add(name)
        for name, process in bringup.processes.items():
            wait_for(lambda p=process: p.exit_code() is not None or not p.not_ready(), 120.0, f"{name} ready")
            assert process.exit_code() is None, f"{name} exited"
            live = _top_level(process.executable, _remote_parameter_names(name))
            assert live == set(NODE_PARAMETERS[process.executable]), name
            seen.add(name)
    assert seen == {n.name for n in system.nodes}


def test_bringup_refuses_a_parameter_the_node_does_not_declare():
    from robopin_ros.bringup import Bringup
    from robopin_ros.parameters import UndeclaredParameterError

    system = load_system(REPO_ROOT / "config" / "real_xarm6.yaml", {})
    # Past the system file's own check (which refuses it at load): the node itself refuses at start.
    only = dataclasses.replace(system, nodes=(system.node("state_publisher_node"),))
    only = only.with_parameters("state_publisher_node", calibration_dirr="calibration")
    bringup = Bringup(only, client=False)
    with pytest.raises(UndeclaredParameterError) as caught:
        bringup.start()
    assert "node '/state_publisher_node': 1 parameter(s) given that it does not declare" in str(caught.value)
    assert "parameter 'calibration_dirr' is not declared by StatePublisherNode; did you mean 'calibration_dir'?" \
           in str(caught.value)
    assert bringup.nodes == {}  # destroyed, nothing left spinning


def test_a_node_process_refuses_a_parameter_it_does_not_declare():
    result = subprocess.run(
        [sys.executable, "-m", "robopin_ros.state_publisher_node", "--ros-args", "-p", "robott:=panda"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "did not start: UndeclaredParameterError: node '/state_publisher' " in result.stderr or \
           "did not start: UndeclaredParameterError: node '/state_publisher_node'" in result.stderr, result.stderr
    assert "parameter 'robott' is not declared by StatePublisherNode; did you mean 'robot'?" in result.stderr


def _declared(ros_context, settings, **given):
    """A plain rclpy node given ``given`` (dotted names as keyword arguments with '__' for '.') declaring every
    parameter of ``settings`` the way its node does (robopin_ros.parameters.declare_settings)."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from robopin_ros.parameters import declare_settings

    overrides = [Parameter(name.replace("__", "."), value=value) for name, value in given.items()]
    node = Node("nested_probe", context=ros_context, parameter_overrides=overrides)
    try:
        return node, declare_settings(node, settings)
    except Exception:
        node.destroy_node()
        raise


def test_a_nested_settings_keys_carry_their_configs_descriptions_and_ranges(ros_context):
    """vlm.* of the task node are the chosen backend's config fields (openai here, as the real systems give it),
    options.* of the camera node its backend's; board.* and detection.* of the calibration node the board's and
    detection's: each dotted parameter's
    description and range are that field's, and a value outside the range stops the node, named."""
    from rcl_interfaces.msg import ParameterType
    from robopin_ros.parameters import ParameterRangeError

    from robopin.calibration.board import BoardConfig, DetectionConfig
    from robopin.cameras.realsense import RealSenseCameraConfig
    from robopin.system.node_settings import CalibrationNodeSettings, CameraNodeSettings, TaskNodeSettings
    from robopin.vlm.openai_backend import OpenAIBackendConfig

    openai, board, detection = described(OpenAIBackendConfig), described(BoardConfig), described(DetectionConfig)
    realsense = described(RealSenseCameraConfig)
    node, values = _declared(ros_context, TaskNodeSettings(), vlm__type="openai", vlm__base_url="http://127.0.0.1:9/v1",
                             vlm__max_retries=3, vlm__timeout_s=30.0, vlm__model="robopin-4b")
    try:
        assert values["vlm"] == {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "max_retries": 3,
                                 "timeout_s": 30.0, "model": "robopin-4b"}
        for key in ("base_url", "max_retries", "timeout_s", "model"):
            assert node.describe_parameter(f"vlm.{key}").description == openai[key].text, key
        retries = node.describe_parameter("vlm.max_retries").integer_range[0]
        assert (retries.from_value, retries.to_value) == (0, 10)
        assert node.describe_parameter("vlm.type").description.startswith("VLM backend config")  # not a field
        assert node.describe_parameter("vlm.base_url").type == ParameterType.PARAMETER_STRING
    finally:
        node.destroy_node()

    node, values = _declared(ros_context, CalibrationNodeSettings(), board__squares_x=9, board__type="charuco",
                             detection__min_corner_fraction=0.5)
    try:
        assert BoardConfig.from_dict(values["board"]).squares_x == 9
        assert DetectionConfig(**values["detection"]).min_corner_fraction == 0.5
        assert node.describe_parameter("board.squares_x").description == board["squares_x"].text
        fraction = node.describe_parameter("detection.min_corner_fraction").floating_point_range[0]
        assert (fraction.from_value, fraction.to_value) == (0.0, 1.0)
        assert node.describe_parameter("detection.min_corner_fraction").description == \
            detection["min_corner_fraction"].text
    finally:
        node.destroy_node()

    # The camera node's options: the backend parameter picks the config (realsense-ros's reconnect_timeout: 6 s).
    node, values = _declared(ros_context, CameraNodeSettings(), backend="realsense", options__reconnect_timeout_s=6.0,
                             options__hole_filling_mode=2)
    try:
        assert values["options"] == {"reconnect_timeout_s": 6.0, "hole_filling_mode": 2}
        assert node.describe_parameter("options.reconnect_timeout_s").description == \
            realsense["reconnect_timeout_s"].text
        mode = node.describe_parameter("options.hole_filling_mode").integer_range[0]
        assert (mode.from_value, mode.to_value) == (0, 2)
    finally:
        node.destroy_node()

    with pytest.raises(ParameterRangeError, match=r"parameter vlm.max_retries must be in \[0, 10\], got 11"):
        _declared(ros_context, TaskNodeSettings(), vlm__type="openai", vlm__max_retries=11)
    with pytest.raises(ParameterRangeError, match=r"parameter board\.squares_x must be >= 2, got 1"):
        _declared(ros_context, CalibrationNodeSettings(), board__squares_x=1)


def test_the_calibration_nodes_pose_generator_parameters_are_the_generators_config(ros_context):
    """pose_count, min_distance_m, ... are declared from robopin.calibration.poses.PoseGeneratorConfig itself, so
    the generator's defaults and ranges are the node's (they were copied into the node's settings before)."""
    from robopin_ros.parameters import ParameterRangeError

    from robopin.calibration.poses import PoseGeneratorConfig
    from robopin.system.node_settings import settings_from

    node, values = _declared(ros_context, PoseGeneratorConfig(), pose_count=6, max_roll_deg=45.0)
    try:
        config = settings_from(PoseGeneratorConfig, values)
        assert (config.count, config.max_roll_deg) == (6, 45.0)
        assert config.min_distance_m == PoseGeneratorConfig().min_distance_m
        assert node.describe_parameter("pose_count").description == described(PoseGeneratorConfig)["count"].text
    finally:
        node.destroy_node()
    with pytest.raises(ParameterRangeError, match=r"parameter max_tilt_deg must be in \[0.0, 80.0\], got 85.0"):
        _declared(ros_context, PoseGeneratorConfig(), max_tilt_deg=85.0)
    with pytest.raises(ValueError, match="max_roll_deg must be in"):
        PoseGeneratorConfig(max_roll_deg=200.0)  # the same range where the core builds it (a test, a script)
