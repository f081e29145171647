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
