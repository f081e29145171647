"""The shipped system files and the launch file: every node, executable, parameter and file they name exists.

``launch`` and ``launch_ros`` are not on the package index, so the launch file runs here against
small stand-in modules (the outermost edge only: our code in it runs for real) that record the actions.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

from robopin.system import NODE_EXECUTABLES, load_system
from robopin.system.launching import COMMON_LAUNCH_ARGUMENTS, launch_entries
from robopin.system.node_parameters import NODE_PARAMETERS

ROOT = Path(__file__).resolve().parents[2]
NODES = ROOT / "ros2_ws" / "src" / "robopin_ros" / "robopin_ros"
SYSTEM_FILES = sorted(p for p in (ROOT / "config").glob("*.yaml") if "nodes" in (yaml.safe_load(p.read_text()) or {}))
def node_scripts() -> set[str]:
    """Console scripts of robopin_ros: every *_node.py with a top-level main() (as setup.py does)."""
    scripts = set()
    for module in NODES.glob("*_node.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            scripts.add(module.stem)
    return scripts


def declared_parameters(executable: str) -> set[str]:
    """The top-level parameters the node declares: the core's table, which tests/ros/test_node_parameter_table.py
    holds equal to the live nodes' declared parameters."""
    return set(NODE_PARAMETERS[executable])


def test_the_four_deployments_ship():
    assert {p.stem for p in SYSTEM_FILES} >= {"sim_panda", "sim_xarm6", "real_xarm6", "real_franka"}


def test_node_executables_are_exactly_the_packages_console_scripts():
    assert set(NODE_EXECUTABLES) == node_scripts()


@pytest.mark.parametrize("path", SYSTEM_FILES, ids=[p.stem for p in SYSTEM_FILES])
def test_system_file_names_real_nodes_and_parameters_they_declare(path):
    system = load_system(path, {})
    assert system.name == path.stem
    for node in system.nodes:
        declared = declared_parameters(node.executable)
        unknown = sorted(set(node.parameters) - declared)
        assert not unknown, f"{path.name}: node {node.name!r} ({node.executable}) does not declare {unknown}"
        node.ros_parameters()  # every value converts


def test_the_declared_parameter_scan_finds_real_parameters():
    # Guards the scan itself: if it found nothing, the test above could not fail.
    assert {"views", "vlm", "reasoning", "workspace", "max_frame_age_s"} <= declared_parameters("task_node")
    assert {"backend", "options", "state_rate_hz"} <= declared_parameters("arm_driver_node")
    assert "calibrations" in declared_parameters("projection_node")


def test_sim_systems_name_packaged_scenarios_and_real_ones_no_simulator():
    from robopin.sim.tasks import list_scenarios

    for path in SYSTEM_FILES:
        system = load_system(path, {})
        text = yaml.safe_dump(system.ros_parameters_file())
        if system.is_sim:
            assert system.scenario_path() in list_scenarios()
        else:
            assert "backend: sim" not in text and "oracle" not in text, path.name


def test_real_systems_take_the_common_launch_arguments():
    for name in ("real_xarm6", "real_franka"):
        declared = {a.name for a in load_system(name).arguments}
        assert set(COMMON_LAUNCH_ARGUMENTS) <= declared, name


def test_launch_entries_write_one_parameters_file_for_a_real_system(tmp_path):
    system, entries = launch_entries("real_xarm6", {"robot_ip": "10.1.2.3", "system": "real_xarm6",
                                                    "wrist_serial": "", "unrelated": "x"}, tmp_path)
    assert [e.executable for e in entries] == [n.executable for n in system.nodes]
    params = yaml.safe_load(Path(entries[0].parameters_file).read_text())
    assert set(params) == {e.name for e in entries}
    assert params["arm_driver"]["ros__parameters"]["options.ip"] == "10.1.2.3"
    assert params["camera_wrist"]["ros__parameters"]["serial"] == ""  # empty = the file's value


def test_launch_entries_run_robopin_up_for_a_simulated_system(tmp_path):
    _, entries = launch_entries("sim_panda", {"dry_run": "true"}, tmp_path)
    assert len(entries) == 1 and not entries[0].is_node
    command = entries[0].cmd
    assert command[1] == "up" and Path(command[2]).is_file() and "dry_run:=true" in command


# --------------------------------------------------------------------------- the launch file itself


class _Action:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _stand_in_launch_modules() -> dict[str, types.ModuleType]:
    launch = types.ModuleType("launch")
    launch.LaunchDescription = list
    actions = types.ModuleType("launch.actions")
    for name in ("DeclareLaunchArgument", "ExecuteProcess", "LogInfo", "OpaqueFunction"):
        setattr(actions, name, type(name, (_Action,), {}))
    substitutions = types.ModuleType("launch.substitutions")

    class LaunchConfiguration(_Action):
        def perform(self, context):
            return context.launch_configurations[self.args[0]]

    substitutions.LaunchConfiguration = LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    launch_ros_actions = types.ModuleType("launch_ros.actions")
    launch_ros_actions.Node = type("Node", (_Action,), {})
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": substitutions,
            "launch_ros": launch_ros, "launch_ros.actions": launch_ros_actions}


@pytest.fixture
def launch_file(monkeypatch):
    for name, module in _stand_in_launch_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("robopin_launch_file",
                                                  ROOT / "ros2_ws/src/robopin_ros/launch/robopin.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(launch_file, **configurations):
    description = launch_file.generate_launch_description()
    declared = {a.args[0]: a.kwargs.get("default_value") for a in description if type(a).__name__ ==
                "DeclareLaunchArgument"}
    context = types.SimpleNamespace(launch_configurations={**declared, **configurations})
    opaque = [a for a in description if type(a).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1
    return declared, opaque[0].kwargs["function"](context)


def test_launch_file_starts_every_node_of_a_real_system_with_stand_in_launch(launch_file):
    declared, actions = _run(launch_file, system="real_franka", robot_ip="172.16.0.9")
    assert {"system", *COMMON_LAUNCH_ARGUMENTS} <= set(declared)
    nodes = [a for a in actions if type(a).__name__ == "Node"]
    system = load_system("real_franka")
    assert [n.kwargs["name"] for n in nodes] == [n.name for n in system.nodes]
    scripts = node_scripts()
    for node in nodes:
        assert node.kwargs["package"] == "robopin_ros" and node.kwargs["executable"] in scripts
        (params_file,) = node.kwargs["parameters"]
        assert node.kwargs["name"] in yaml.safe_load(Path(params_file).read_text())
    params = yaml.safe_load(Path(nodes[0].kwargs["parameters"][0]).read_text())
    assert params["arm_driver"]["ros__parameters"]["options.ip"] == "172.16.0.9"


def test_launch_file_runs_a_simulated_system_as_one_process(launch_file):
    _, actions = _run(launch_file, system=str(ROOT / "config" / "sim_xarm6.yaml"))
    processes = [a for a in actions if type(a).__name__ == "ExecuteProcess"]
    assert len(processes) == 1 and not [a for a in actions if type(a).__name__ == "Node"]
    assert processes[0].kwargs["cmd"][1:3] == ["up", str(ROOT / "config" / "sim_xarm6.yaml")]


@pytest.mark.parametrize("path", sorted((ROOT / "config" / "scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_scenario_variants_load_by_path_from_a_system_file(path):
    from robopin.sim.tasks import load_scenario

    spec = load_scenario(path)
    assert spec.name == path.stem
    system = load_system("sim_panda").with_sim(scenario=f"scenarios/{path.name}")
    assert Path(system.scenario_path()) == path
    assert path.name in (ROOT / "config" / "scenarios" / "README.md").read_text()
