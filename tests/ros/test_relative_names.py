"""Every name a robopin node creates is robopin.interfaces', relative, so it lands under the node's namespace.

Each node is created here and its endpoints read back from the graph: what it publishes, serves and offers as
an action is exactly the module's names for that node, and every topic, service and action it reads or calls is
a name of the module (robopin.interfaces holds each name once; tests/test_interfaces.py checks the module
itself). The nodes that need no device are also created in a namespace, every endpoint under it. The running
graph of two namespaced stacks is checked in ``tests/integration/test_two_robots_by_namespace.py``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from rclpy.parameter import Parameter

from robopin import interfaces as names
from robopin.system.names import GLOBAL_NAMES, absolute_name

ROOT = Path(__file__).resolve().parents[2]
# The first token of every name robopin's nodes publish, serve or read, and what tf and
# robot_state_publisher users expect to find relative (nav2_bringup remaps /tf and /tf_static to tf, tf_static).
_OWN_NAME = re.compile(rf"^/({names.ROBOPIN_ROOT}|{names.CAMERA_ROOT}|{names.JOINT_STATES}|{names.TF}|"
                       rf"{names.TF_STATIC}|{names.ROBOT_DESCRIPTION})(/|$)")
VIEWS = ("static", "wrist")
# What each node publishes, serves and offers as an action (robopin.interfaces), by the test's builder name.
PROVIDES: dict[str, dict[str, set[str]]] = {
    "arm_driver_node": {"pub": {names.JOINT_STATES, names.ARM.ee_pose, names.DIAGNOSTICS_TOPIC},
                        "srv": {names.ARM.enable, names.ARM.stop, names.ARM.recover},
                        "action": {names.ARM.execute_trajectory, names.ARM.follow_joint_trajectory,
                                   names.ARM.gripper_cmd}},
    "projection_node": {"pub": {names.TARGET_MARKERS, names.WORKSPACE_CLOUD}, "srv": {names.PROJECT_POINTS}},
    "motion_planner_node": {"action": {names.PICK_PLACE, names.MOVE_TO_POSE}},
    "task_node": {"pub": {names.REASONING, names.REASONING_MARKERS, names.REASONING_SEARCH, names.TARGETS,
                          names.reasoning_image("static"), names.TASK_SERVER_HEARTBEAT},
                  "srv": {names.INSTRUCT}, "action": {names.EXECUTE_TASK}},
    "state_publisher_node": {"pub": {names.ROBOT_DESCRIPTION, names.TF, names.TF_STATIC}},
    "recorder_node": {"srv": {names.RECORDER_START, names.RECORDER_STOP, names.READY}},
    "calibration_node": {"srv": {names.CALIBRATION_CAPTURE, names.CALIBRATION_CLEAR, names.CALIBRATION_RUN_GUIDED,
                                 names.CALIBRATION_SOLVE, names.CALIBRATION_VERIFY}},
    "task_client": {"pub": {names.TASK_CLIENT_HEARTBEAT}},
    "operator_console": {},
}
# rcl's own services of every node (rclpy/parameter_service.py, Jazzy's type description service).
_RCL_SERVICES = ("/describe_parameters", "/get_parameter_types", "/get_parameters", "/list_parameters",
                 "/set_parameters", "/set_parameters_atomically", "/get_type_description")


def _expand(name: str, node: str, namespace: str = "") -> str:
    """A module name as the graph has it for ``node``: private names under the node, the rest under namespace."""
    if name.startswith("~/"):
        return f"{absolute_name(node, namespace)}/{name[2:]}"
    return absolute_name(name, namespace)


def _known_names(namespace: str = "") -> set[str]:
    """Every name of the module a node may read or call, for the test's views, as the graph has them."""
    actions = (names.EXECUTE_TASK, names.PICK_PLACE, names.MOVE_TO_POSE, names.ARM.execute_trajectory,
               names.ARM.follow_joint_trajectory, names.ARM.gripper_cmd)
    known = {value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)}
    known |= set(names.ARM.all_names()) | set(actions)
    for view in VIEWS:
        known |= {names.reasoning_image(view), *names.view_topics(view).all_names()}
    return {absolute_name(name, namespace) for name in known if not name.startswith("~/")}


def _is_rcl_own(name: str) -> bool:
    return name in GLOBAL_NAMES[:2] or "/_action/" in name or name.endswith(_RCL_SERVICES) \
        or name.lstrip("/").startswith(names.PROCESS_PROBE_PREFIX + "/")


def _endpoints(node) -> dict[str, set[str]]:
    from rclpy.action.graph import get_action_client_names_and_types_by_node, get_action_server_names_and_types_by_node

    name, namespace = node.get_name(), node.get_namespace()
    queries = {"pub": node.get_publisher_names_and_types_by_node, "sub": node.get_subscriber_names_and_types_by_node,
               "srv": node.get_service_names_and_types_by_node, "cli": node.get_client_names_and_types_by_node,
               "action": lambda n, ns: get_action_server_names_and_types_by_node(node, n, ns),
               "action_client": lambda n, ns: get_action_client_names_and_types_by_node(node, n, ns)}
    return {kind: {topic for topic, _ in query(name, namespace) if not _is_rcl_own(topic)}
            for kind, query in queries.items()}


def _build_nodes(context, tmp_path: Path, cleanups: list) -> dict:
    from robopin_ros.operator_console import ConsoleRosLink
    from robopin_ros.runtime import serve_readiness
    from robopin_ros.task_client import TaskClient

    from tests.ros.test_parameter_descriptors import NODES

    nodes = {}
    for key in PROVIDES:
        if key in NODES:
            folder = tmp_path / key
            folder.mkdir()
            nodes[key] = NODES[key](context, folder, cleanups)
    serve_readiness(nodes["recorder_node"])  # what run_node gives every node started as a process of its own
    nodes["task_client"] = TaskClient(list(VIEWS), context=context)
    nodes["operator_console"] = ConsoleRosLink(list(VIEWS), context=context)
    return nodes


@pytest.mark.ros
def test_each_node_creates_the_interfaces_modules_names(ros_context, tmp_path):
    """Publishers, services and action servers: the module's names for the node; whatever it reads or calls:
    names of the module."""
    cleanups: list = []
    nodes = _build_nodes(ros_context, tmp_path, cleanups)
    known = _known_names()
    try:
        found = {}
        deadline = time.monotonic() + 10.0
        for key, node in nodes.items():
            expected = {kind: {_expand(n, node.get_name()) for n in values} for kind, values in PROVIDES[key].items()}
            while True:  # the graph cache learns of the node's own endpoints shortly after they are created
                found[key] = _endpoints(node)
                provided = {kind: found[key][kind] for kind in ("pub", "srv", "action") if found[key][kind]}
                if provided == expected or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert provided == expected, key
            used = found[key]["sub"] | found[key]["cli"] | found[key]["action_client"]
            assert sorted(name for name in used if name not in known) == [], key
        assert found["motion_planner_node"]["action_client"] == {
            absolute_name(names.ARM.follow_joint_trajectory), absolute_name(names.ARM.gripper_cmd)}
        assert absolute_name(names.ARM.stop) in found["operator_console"]["cli"]
    finally:
        for node in nodes.values():
            node.destroy_node()
        for cleanup in cleanups:
            cleanup()


def test_the_shipped_system_files_name_robopin_topics_relative():
    for path in sorted((ROOT / "config").glob("*.yaml")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            for value in re.findall(r"(?:^|[\s:\-\[,])(/[A-Za-z_][\w/*]*)", code):
                assert not _OWN_NAME.match(value), f"{path.name}:{number}: {value} is absolute"


@pytest.mark.ros
def test_nodes_created_in_a_namespace_create_every_name_under_it(ros_context, tmp_path):
    """The nodes that need no device, created as Bringup and launch create them: each endpoint under /unit."""
    from robopin_ros.operator_console import ConsoleRosLink
    from robopin_ros.recorder_node import RecorderNode
    from robopin_ros.state_publisher_node import StatePublisherNode
    from robopin_ros.task_client import TaskClient

    options = {"context": ros_context, "namespace": "/unit"}
    nodes = [StatePublisherNode(**options, parameter_overrides=[Parameter("views", value=[""])]),
             RecorderNode(**options, parameter_overrides=[Parameter("output_dir", value=str(tmp_path))]),
             TaskClient(["static", "wrist"], **options), ConsoleRosLink(["static", "wrist"], **options)]
    try:
        outside = {}
        for node in nodes:
            name = node.get_name()
            queries = (node.get_publisher_names_and_types_by_node, node.get_subscriber_names_and_types_by_node,
                       node.get_service_names_and_types_by_node, node.get_client_names_and_types_by_node)
            found = {topic for query in queries for topic, _ in query(name, "/unit")}
            assert found, name
            outside[name] = sorted(t for t in found if not t.startswith("/unit/") and t not in GLOBAL_NAMES)
        assert all(not names for names in outside.values()), outside
    finally:
        for node in nodes:
            node.destroy_node()
