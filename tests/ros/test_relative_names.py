"""Every name a robopin node creates is relative, so it lands under the node's namespace (robopin.system.names).

Read from the node modules' source: every string literal (docstrings aside) and the leading text of every
f-string. A name with a leading '/' is allowed only where it must be global: ``/diagnostics``
(diagnostic_updater's one topic per graph, :data:`robopin.system.names.DIAGNOSTICS_TOPIC`). rcl's own
``/rosout`` and ``/parameter_events`` never appear in our code. The running graph of two namespaced stacks is
checked in ``tests/integration/test_two_robots_by_namespace.py``; the nodes that need no device are created
here in a namespace and their endpoints read back from the graph.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from rclpy.parameter import Parameter

ROOT = Path(__file__).resolve().parents[2]
NODE_PACKAGE = ROOT / "ros2_ws" / "src" / "robopin_ros" / "robopin_ros"
# The first token of every name robopin's nodes publish, serve or read, and what tf and
# robot_state_publisher users expect to find relative (nav2_bringup remaps /tf and /tf_static to tf, tf_static).
_OWN_NAME = re.compile(r"^/(robopin|cameras|joint_states|tf|tf_static|robot_description)(/|$)")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _prefix_tests(tree: ast.AST) -> set[int]:
    """Literals a name is tested against (``root.startswith("/cameras/")`` on a bag-form name) create nothing."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith"):
            ids.update(id(arg) for arg in node.args)
    return ids


def absolute_names_in(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree) | _prefix_tests(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = str(node.values[0].value)
            skip.add(id(node.values[0]))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        else:
            continue
        if _OWN_NAME.match(text):
            found.append((node.lineno, text))
    return found


def test_no_node_module_names_a_topic_service_or_action_absolutely():
    modules = sorted(NODE_PACKAGE.rglob("*.py"))
    assert len(modules) > 15
    offenders = {str(m.relative_to(ROOT)): names for m in modules if (names := absolute_names_in(m))}
    assert offenders == {}


def test_the_scan_finds_an_absolute_name(tmp_path):
    sample = tmp_path / "sample_node.py"
    sample.write_text('"""/robopin/instruct in a docstring is prose."""\n'
                      'A = "/robopin/instruct"\nB = f"/cameras/{view}/color/image_raw"\nC = "robopin/instruct"\n'
                      'D = "/diagnostics"\nE = topic.startswith("/cameras/")\n')
    assert absolute_names_in(sample) == [(2, "/robopin/instruct"), (3, "/cameras/")]


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

    from robopin.system.names import GLOBAL_NAMES

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
