"""robopin_ros installed as colcon/ament installs it (setup.py data_files into <prefix>/share/robopin_ros): the
launch file and the system files are in the share, ament_index finds the package, and the launch file
loaded from there declares every system-file argument with its real default and description and starts
nodes that exist. ``launch`` and ``launch_ros`` are not on the package index: the launch file runs
against the minimal stand-in modules of tests/system/test_configs.py (LaunchDescription, the actions,
LaunchConfiguration, launch_ros Node), which only record what it builds."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from robopin.interfaces import ARM
from robopin.system import load_system
from robopin.system.launching import show_arguments
from tests.system.test_configs import SYSTEM_FILES, _stand_in_launch_modules, node_scripts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """robopin_ros installed (not editable) into a fresh prefix, built from a copy so the checkout stays clean."""
    work = tmp_path_factory.mktemp("robopin-ros-install")
    source = work / "repo" / "ros2_ws" / "src" / "robopin_ros"
    shutil.copytree(ROOT / "ros2_ws" / "src" / "robopin_ros", source,
                    ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    shutil.copytree(ROOT / "config", work / "repo" / "config")
    prefix = work / "prefix"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "--ignore-installed", "--prefix", str(prefix), str(source)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    # --ignore-installed: the venv's own (editable) robopin_ros must stay where it is.
    subprocess.run([sys.executable, "-c", "import robopin_ros"], check=True, timeout=60)
    return prefix


@pytest.fixture
def launch_file(prefix, monkeypatch):
    for path in SYSTEM_FILES:
        for argument in load_system(path).arguments:
            if argument.env:
                monkeypatch.delenv(argument.env, raising=False)  # the defaults, not this machine's settings
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    for name, module in _stand_in_launch_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    from ament_index_python.packages import get_package_share_directory

    share = Path(get_package_share_directory("robopin_ros"))
    assert share == prefix / "share" / "robopin_ros"
    spec = importlib.util.spec_from_file_location("installed_robopin_launch", share / "launch" / "robopin.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_share_holds_the_launch_file_the_system_files_and_the_package_marker(prefix):
    share = prefix / "share" / "robopin_ros"
    assert (share / "launch" / "robopin.launch.py").is_file() and (share / "package.xml").is_file()
    for path in SYSTEM_FILES:
        assert (share / "config" / path.name).read_text() == path.read_text()
    assert (share / "config" / "fastdds.xml").is_file()
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "robopin_ros").is_file()


def test_the_installed_package_holds_every_module_and_subpackage_of_the_checkout(prefix):
    source = ROOT / "ros2_ws" / "src" / "robopin_ros" / "robopin_ros"
    (installed,) = prefix.glob("lib/python*/site-packages/robopin_ros")
    modules = {path.relative_to(source) for path in source.rglob("*.py") if "__pycache__" not in path.parts}
    assert Path("conversions", "__init__.py") in modules
    assert modules <= {path.relative_to(installed) for path in installed.rglob("*.py")}


def test_every_system_argument_is_declared_with_its_real_default(launch_file):
    description = launch_file.generate_launch_description()
    declared = {a.args[0]: a.kwargs for a in description if type(a).__name__ == "DeclareLaunchArgument"}
    assert declared.pop("system")["default_value"] == "sim_panda"
    assert declared.pop("namespace")["default_value"] == ""  # the launch file's own (nav2's namespace:=)
    files = {path.stem: {a.name: a for a in load_system(path).arguments} for path in SYSTEM_FILES}
    assert set(declared) == {name for arguments in files.values() for name in arguments}
    for name, kwargs in declared.items():
        defaults = {system: arguments[name].default for system, arguments in files.items() if name in arguments}
        texts = {("true" if v else "false") if isinstance(v, bool) else str(v) for v in defaults.values()}
        assert all(a[name].description in kwargs["description"] for a in files.values() if name in a), name
        if len(texts) == 1:
            assert kwargs["default_value"] == texts.pop(), name
        else:  # robot_ip: one per arm; empty leaves each system its own, and the description names them
            assert kwargs["default_value"] == "" and all(str(v) in kwargs["description"] for v in defaults.values())
    assert declared["robot_ip"]["default_value"] == ""
    assert declared["vlm_url"]["default_value"] == "http://127.0.0.1:8000/v1"


def test_the_installed_launch_starts_existing_nodes_and_reaches_an_external_controller(launch_file):
    description = launch_file.generate_launch_description()
    declared = [a for a in description if type(a).__name__ == "DeclareLaunchArgument"]
    defaults = {a.args[0]: a.kwargs["default_value"] for a in declared}
    context = types.SimpleNamespace(launch_configurations={
        **defaults, "system": "real_xarm6", "trajectory_action": "/xarm6_traj_controller/follow_joint_trajectory"})
    (opaque,) = [a for a in description if type(a).__name__ == "OpaqueFunction"]
    nodes = [a for a in opaque.kwargs["function"](context) if type(a).__name__ == "Node"]
    assert [n.kwargs["name"] for n in nodes] == [n.name for n in load_system("real_xarm6").nodes]
    assert {n.kwargs["executable"] for n in nodes} <= node_scripts()
    params = yaml.safe_load(Path(nodes[0].kwargs["parameters"][0]).read_text())
    planner = params["motion_planner_node"]["ros__parameters"]
    assert planner["execute_action"] == "/xarm6_traj_controller/follow_joint_trajectory"
    assert planner["gripper_action"] == ARM.gripper_cmd  # relative: under namespace:=
    assert params["arm_driver"]["ros__parameters"]["options.ip"] == "192.168.1.200"
    # Nothing supervises the launch's processes: the task node waits for every other node's ~/ready.
    others = [n.name for n in load_system("real_xarm6").nodes if n.executable != "task_node"]
    assert params["task_node"]["ros__parameters"]["ready_nodes"] == others


def test_the_launch_refuses_a_second_stack_before_starting_a_node(launch_file, ros_context):
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import ActionClient
    from robopin_ros.bringup import StackConflictError

    from tests.ros.rostest_utils import TESTS_ROS, SpunNode, start_process, stop_process

    other = start_process([str(TESTS_ROS / "task_server_fixture.py")])  # serves /robopin/execute_task
    try:
        # The other stack is running before this one starts, as an operator meets it: on a busy machine the
        # fixture's process takes seconds to import rclpy and serve, longer than the launch's probe looks.
        watcher = SpunNode("launch_share_watcher", ros_context)
        try:
            assert ActionClient(watcher.node, ExecuteTask, "/robopin/execute_task").wait_for_server(timeout_sec=120), \
                "the other stack never served /robopin/execute_task"
        finally:
            watcher.close()
        description = launch_file.generate_launch_description()
        defaults = {a.args[0]: a.kwargs["default_value"] for a in description
                    if type(a).__name__ == "DeclareLaunchArgument"}
        context = types.SimpleNamespace(launch_configurations={**defaults, "system": "real_xarm6"})
        (opaque,) = [a for a in description if type(a).__name__ == "OpaqueFunction"]
        with pytest.raises(StackConflictError) as refused:
            opaque.kwargs["function"](context)
        print(f"\n{refused.value}")
        assert "another robopin stack already runs in namespace /" in str(refused.value)
        assert "/task_server_fixture" in str(refused.value) and "/robopin/execute_task" in str(refused.value)
    finally:
        stop_process(other)


def test_show_args_lists_the_real_defaults(prefix, monkeypatch):
    monkeypatch.delenv("ROBOPIN_VLM_BASE_URL", raising=False)
    text = show_arguments(prefix / "share" / "robopin_ros" / "config")
    print(text)
    assert text.startswith("Arguments (pass arguments as '<name>:=<value>'):")
    assert "    'vlm_url':\n" in text and "(default: 'http://127.0.0.1:8000/v1')" in text
    assert "'192.168.1.200'" in text and "'172.16.0.2'" in text  # robot_ip, per system
    assert "    'system':\n" in text and "(default: 'sim_panda')" in text
