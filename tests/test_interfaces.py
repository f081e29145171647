"""robopin.interfaces: every name relative (so a namespace applies), a ROS name, and no two the same.

The live side (each node's endpoints are the module's names) is tests/ros/test_relative_names.py.
"""

from __future__ import annotations

import re

from robopin import interfaces
from robopin.system.names import GLOBAL_NAMES

# rcl's rules for a topic or service name (rcl validate_topic_name): tokens of letters, digits and '_', not
# starting with a digit, separated by single '/'; '~/' only in front; '*' here for the recorder's globs.
_TOKEN = re.compile(r"^[A-Za-z_*][A-Za-z0-9_*]*$")


def module_names() -> dict[str, str]:
    """Every name the module holds: its string constants, the arm's names and the helpers' for one example."""
    names = {key: value for key, value in vars(interfaces).items()
             if key.isupper() and isinstance(value, str) and key not in ("ROBOPIN_ROOT", "CAMERA_ROOT")
             and not key.endswith("_SUFFIX") and not key.endswith("_PREFIX")}
    names.update({f"ARM.{field}": value for field, value in zip(
        ("ee_pose", "execute_trajectory", "follow_joint_trajectory", "gripper_cmd", "enable", "stop", "recover"),
        interfaces.ARM.all_names(), strict=True)})
    names["reasoning_image(static)"] = interfaces.reasoning_image("static")
    names["pinned_annotations(static)"] = interfaces.pinned_annotations("static")
    for helper in ("action_status", "action_feedback", "action_result", "action_get_result", "action_cancel_goal"):
        names[f"{helper}(EXECUTE_TASK)"] = getattr(interfaces, helper)(interfaces.EXECUTE_TASK)
    names.update({f"view_topics(static).{k}": v for k, v in interfaces.view_topics("static").names().items()})
    return names


def test_the_module_holds_every_kind_of_name():
    names = module_names()
    assert len(names) > 35
    assert {"INSTRUCT", "EXECUTE_TASK", "PICK_PLACE", "WORKSPACE_CLOUD", "JOINT_STATES", "TF", "READY"} <= set(names)


def test_every_name_is_relative_but_the_global_diagnostics():
    absolute = {key: value for key, value in module_names().items() if value.startswith("/")}
    assert absolute == {"DIAGNOSTICS_TOPIC": "/diagnostics"}
    assert interfaces.DIAGNOSTICS_TOPIC in GLOBAL_NAMES


def test_every_name_is_a_ros_name():
    for key, value in module_names().items():
        body = value.removeprefix("~/").removeprefix("/")
        assert all(_TOKEN.match(token) for token in body.split("/")), (key, value)
        assert "*" not in value or key == "REASONING_IMAGES", (key, value)


def test_no_two_names_are_the_same():
    names = module_names()
    by_value: dict[str, list[str]] = {}
    for key, value in names.items():
        by_value.setdefault(value, []).append(key)
    assert {value: keys for value, keys in by_value.items() if len(keys) > 1} == {}


def test_the_arm_names_follow_the_prefix():
    names = interfaces.arm_names("/left_arm/")
    assert names.prefix == "/left_arm"
    assert names.all_names() == tuple(f"/left_arm/{leaf}" for leaf in (
        "ee_pose", "execute_trajectory", "follow_joint_trajectory", "gripper_cmd", "enable", "stop", "recover"))
    assert interfaces.ARM.ee_pose == f"{interfaces.ARM_PREFIX}/ee_pose"


def test_the_derived_names_are_rcl_actions():
    action = interfaces.EXECUTE_TASK
    assert interfaces.action_status(action) == f"{action}/_action/status"
    assert interfaces.action_feedback(action) == f"{action}/_action/feedback"
    assert interfaces.action_get_result(action) == f"{action}/_action/get_result"
    assert interfaces.action_cancel_goal(action) == f"{action}/_action/cancel_goal"
    assert interfaces.ready_service("/unit/task_node") == "/unit/task_node/ready"


def test_the_names_are_the_ones_recorded_bags_hold():
    """Bags written before this module existed name these topics; a rename would orphan them."""
    assert (interfaces.EXECUTE_TASK, interfaces.INSTRUCT, interfaces.REASONING, interfaces.TARGETS,
            interfaces.ARM.ee_pose, interfaces.PLANNED_TRAJECTORY, interfaces.WORKSPACE_CLOUD) == (
        "robopin/execute_task", "robopin/instruct", "robopin/reasoning", "robopin/targets", "robopin/arm/ee_pose",
        "robopin/planned_trajectory", "robopin/workspace_cloud")
