"""A system's ``namespace``: validated, carried into the parameters file and the launch entries, and stripped
from bag topics in one place so a namespaced robot's bag reads as any other."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from robopin.bags import TrialBag
from robopin.bags.recorder import TrialRecorder
from robopin.system import SystemFileError, load_system
from robopin.system.launching import declared_arguments, launch_entries
from robopin.system.loading import in_namespace
from robopin.system.names import (
    GLOBAL_NAMES,
    NamespaceError,
    absolute_name,
    namespaced_label,
    normalize_namespace,
    strip_namespace,
)


@pytest.mark.parametrize(("given", "normal"), [("", ""), ("/", ""), ("left", "/left"), ("/left/", "/left"),
                                               ("lab/left_2", "/lab/left_2")])
def test_namespaces_are_normalized(given, normal):
    assert normalize_namespace(given) == normal


@pytest.mark.parametrize("bad", ["2left", "left robot", "lab//left", "left-arm", "ü"])
def test_a_namespace_ros_would_refuse_is_refused_by_name(bad):
    with pytest.raises(NamespaceError, match="not a ROS namespace"):
        normalize_namespace(bad)


def test_relative_names_resolve_under_the_namespace_and_strip_back():
    assert absolute_name("robopin/instruct") == "/robopin/instruct"
    assert absolute_name("robopin/instruct", "left") == "/left/robopin/instruct"
    assert absolute_name("cameras/*/color/image_raw", "/left") == "/left/cameras/*/color/image_raw"
    assert absolute_name("/xarm6_traj_controller/follow_joint_trajectory", "left").startswith("/xarm6")
    assert strip_namespace("/left/tf", "/left") == "/tf"
    assert strip_namespace("/right/tf", "/left") == "/right/tf"  # not ours: kept as it is
    assert strip_namespace("/leftover/tf", "/left") == "/leftover/tf"
    assert strip_namespace("/tf", "") == "/tf"
    assert namespaced_label("camera_node: static", "/left") == "left/camera_node: static"
    assert namespaced_label("camera_node: static", "/") == "camera_node: static"
    assert set(GLOBAL_NAMES) == {"/rosout", "/parameter_events", "/diagnostics"}


def test_the_default_system_is_in_the_root_namespace_and_keys_parameters_by_bare_name():
    system = load_system("sim_panda", {})
    assert system.namespace == ""
    assert "task_node" in system.ros_parameters_file()


def test_a_namespaced_system_keys_its_parameters_file_by_fully_qualified_name():
    system = in_namespace(load_system("sim_panda", {}), "left")
    assert system.namespace == "/left"
    params = system.ros_parameters_file()
    assert set(params) == {f"/left/{n.name}" for n in system.nodes}
    # The shipped files name every robopin topic relative, so they resolve under /left.
    text = yaml.safe_dump(params)
    assert "/robopin/" not in text and "/cameras/" not in text


def test_a_system_file_namespace_key_is_read_and_validated(tmp_path):
    source = (load_system("sim_panda").source).read_text()
    path = tmp_path / "left.yaml"
    path.write_text("namespace: left\n" + source)
    assert load_system(path).namespace == "/left"
    path.write_text("namespace: 9lives\n" + source)
    with pytest.raises(SystemFileError, match=r"left\.yaml.*not a ROS namespace"):
        load_system(path)
    with pytest.raises(SystemFileError, match="not a ROS namespace"):
        in_namespace(load_system("sim_panda"), "a b")


def test_a_namespaced_system_refuses_an_absolute_robopin_name(tmp_path):
    source = (load_system("sim_panda").source).read_text()
    path = tmp_path / "left.yaml"
    path.write_text("namespace: left\n" + source.replace("ee_pose_topic: robopin/arm/ee_pose",
                                                        "ee_pose_topic: /robopin/arm/ee_pose"))
    with pytest.raises(SystemFileError, match="'/robopin/arm/ee_pose', outside the system's namespace '/left'"):
        load_system(path)


def test_launch_declares_namespace_and_puts_every_node_of_a_real_system_in_it(tmp_path):
    declared = {a.name: a for a in declared_arguments(load_system("sim_panda").source.parent)}
    assert declared["namespace"].default == ""
    system, entries = launch_entries("real_xarm6", {"namespace": "right", "robot_ip": "10.1.2.3"}, tmp_path)
    assert system.namespace == "/right" and {e.namespace for e in entries} == {"/right"}
    params = yaml.safe_load(Path(entries[0].parameters_file).read_text())
    assert "/right/motion_planner_node" in params
    _, (entry,) = launch_entries("sim_panda", {"namespace": "left"}, tmp_path)
    assert entry.cmd[-2:] == ("--namespace", "/left")


def test_the_recorder_writes_a_namespaced_robots_topics_as_the_root_namespace_names_them(tmp_path):
    from rosbags.typesys.stores.ros2_jazzy import std_msgs__msg__String as String

    recorder = TrialRecorder(tmp_path, namespace="/left", preroll_s=0.0, state_preroll_s=0.0)
    typestore = recorder.typestore
    data = bytes(typestore.serialize_cdr(String(data="<robot/>"), "std_msgs/msg/String"))
    recorder.start("task-1")
    recorder.record("/left/robot_description", "std_msgs/msg/String", data, 10**9)
    recorder.record("/left/robopin/reasoning_note", "std_msgs/msg/String", data, 2 * 10**9)
    recorder.record("/right/robopin/reasoning_note", "std_msgs/msg/String", data, 3 * 10**9)
    stats = recorder.stop()
    with TrialBag(stats.path) as bag:
        assert set(bag.topics) == {"/robot_description", "/robopin/reasoning_note", "/right/robopin/reasoning_note"}
