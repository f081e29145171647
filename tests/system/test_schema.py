"""System-file schema: loading, validation messages, parameters as ROS takes them, launch arguments."""

from __future__ import annotations

import copy

import pytest
import yaml

from robopin.system import NodeSpec, SystemFileError, load_system, parse_argument_overrides, system_from_dict

SIM = {
    "name": "tiny_sim",
    "robot": "panda",
    "views": ["static", "wrist"],
    "sim": {"scenario": "spatial", "seed": 3, "world": "cell"},
    "arguments": {
        "dry_run": {"default": False, "sets": ["arm.options.dry_run"]},
        # A key the sim arm takes: a target its node does not take is refused at load (system.node_parameters).
        "arm_name": {"default": "arm1", "env": "TEST_ARM_NAME", "sets": ["arm.options.name"]},
    },
    "nodes": {
        "camera_static": {"executable": "camera_node",
                          "parameters": {"name": "static", "backend": "sim", "options": {"world": "cell"}}},
        "camera_wrist": {"executable": "camera_node",
                         "parameters": {"name": "wrist", "backend": "sim", "options": "{world: cell}"}},
        "arm": {"executable": "arm_driver_node",
                "parameters": {"backend": "sim", "options": {"robot": "panda", "world": "cell"}}},
        "projection_node": {"executable": "projection_node",
                            "parameters": {"views": ["static", "wrist"], "ee_pose_topic": "/robopin/arm/ee_pose",
                                           "workspace": {"min_xyz": [0.1, -0.5, 0], "max_xyz": [0.9, 0.5, 0.6]}}},
        "motion_planner_node": {"executable": "motion_planner_node", "parameters": {"robot": "panda"}},
        "task_node": {"executable": "task_node",
                         "parameters": {"views": ["static", "wrist"],
                                        "vlm": {"type": "oracle", "world": "cell", "views": ["static", "wrist"]}}},
    },
}


def build(**changes):
    data = copy.deepcopy(SIM)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = data
        for key in parents:
            target = target[key]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return system_from_dict(data, source="test.yaml")


def test_a_valid_system_loads_with_its_parts():
    system = build()
    assert system.is_sim and system.sim.seed == 3 and system.views == ("static", "wrist")
    assert [n.name for n in system.nodes_running("camera_node")] == ["camera_static", "camera_wrist"]
    assert system.node("arm").executable == "arm_driver_node"
    with pytest.raises(SystemFileError, match=r"no node 'nope'.*camera_static"):
        system.node("nope")


@pytest.mark.parametrize(("changes", "message"), [
    ({"colour": "red"}, r"unknown key\(s\) \['colour'\]"),
    ({"robot": None}, "missing required key 'robot'"),
    ({"views": ["static", "static"]}, "views must be distinct"),
    ({"nodes__arm__executable": "arm_node"}, "executable 'arm_node' is not a robopin_ros node"),
    ({"nodes__arm__colour": 1}, r"node 'arm' has unknown key\(s\) \['colour'\]"),
    ({"nodes__task_node__parameters__views": ["wrist", "static"]},
     r"task_node' has views \['wrist', 'static'\].*img_idx order"),
    ({"nodes__camera_wrist__parameters__name": "hand"}, r"no camera_node publishes view\(s\) \['wrist'\]"),
    ({"nodes__camera_wrist__parameters__name": "static"}, "both publish view 'static'"),
    ({"nodes__motion_planner_node__parameters__robot": "xarm6"}, "plans for robot 'xarm6'.*robot is 'panda'"),
    ({"nodes__arm__parameters__options": {"robot": "fr3", "world": "cell"}}, "drives robot 'fr3'"),
    ({"nodes__projection_node__parameters__ee_pose_topic": "/arm/ee_pose"},
     r"arm pose on '/arm/ee_pose'.*\['/robopin/arm/ee_pose'\]"),
    ({"nodes__camera_static__parameters__options": {"world": "other"}}, "simulated world 'other'.*sim.world is 'cell'"),
    ({"sim": None}, "uses a simulated backend but the system has no 'sim' section"),
    ({"nodes__task_node__parameters__vlm": {"model": "x"}}, "vlm needs a 'type'"),
    ({"sim__seed": -1}, "sim.seed must be an integer >= 0, got -1"),
    ({"sim__real_time_factor": -2}, "real_time_factor must be >= 0"),
    ({"task": {"mode": "dance"}}, "task.mode must be auto, point, subtask or plan, got 'dance'"),
    ({"arguments__dry_run__sets": []}, "'sets' must name at least one node.parameter"),
])
def test_mistakes_are_refused_naming_the_bad_value(changes, message):
    with pytest.raises(SystemFileError, match=message):
        build(**changes)


def test_ros_parameters_turn_mappings_into_yaml_strings_the_nodes_parse():
    parameters = build().node("projection_node").ros_parameters()
    # projection_node declares workspace dotted (robopin.system.nested): one parameter per key.
    assert parameters["workspace.min_xyz"] == [0.1, -0.5, 0.0] and parameters["workspace.max_xyz"] == [0.9, 0.5, 0.6]
    assert parameters["views"] == ["static", "wrist"]
    exported = build().with_arguments({}).ros_parameters_file()
    assert set(exported) == {"camera_static", "camera_wrist", "arm", "projection_node", "motion_planner_node",
                             "task_node"}
    # Settings their node declares dotted (robopin.system.nested) arrive as one parameter per key.
    assert exported["arm"]["ros__parameters"]["options.world"] == "cell"
    assert exported["camera_wrist"]["ros__parameters"]["options.world"] == "cell"  # written as YAML text


def test_ros_parameter_lists_are_typed_the_way_ros_needs():
    # Made-up parameter names: a system file naming them is refused (system.node_parameters), so the node alone.
    node = NodeSpec("motion_planner_node", "motion_planner_node",
                    {"robot": "panda", "mixed": [1, 2.5], "empty": [], "nested": [{"a": 1}]})
    parameters = node.ros_parameters()
    assert parameters["mixed"] == [1.0, 2.5] and all(isinstance(v, float) for v in parameters["mixed"])
    assert parameters["empty"] == [""]  # ROS cannot type an empty list; the nodes drop '' entries
    assert yaml.safe_load(parameters["nested"]) == [{"a": 1}]
    bad = NodeSpec("motion_planner_node", "motion_planner_node", {"robot": "panda", "odd": [1, "two"]})
    with pytest.raises(SystemFileError, match=r"motion_planner_node\.odd: a list must hold one type"):
        bad.ros_parameters()


def test_exporting_before_applying_arguments_is_refused():
    with pytest.raises(SystemFileError, match="apply its arguments"):
        build().ros_parameters_file()


def test_arguments_command_line_beats_environment_beats_default():
    system = build()
    default = system.with_arguments({}, environ={})
    assert default.node("arm").parameters["options"]["name"] == "arm1"
    assert default.node("arm").parameters["options"]["dry_run"] is False
    from_env = system.with_arguments({}, environ={"TEST_ARM_NAME": "arm7"})
    assert from_env.node("arm").parameters["options"]["name"] == "arm7"
    given = system.with_arguments({"arm_name": "arm9", "dry_run": "true"}, environ={"TEST_ARM_NAME": "x"})
    assert given.node("arm").parameters["options"] == {"robot": "panda", "world": "cell", "name": "arm9",
                                                       "dry_run": True}
    assert system.node("arm").parameters["options"].get("name") is None  # the original is untouched


def test_the_arguments_that_set_a_node_are_found_by_node_name():
    assert [a.name for a in build().arguments_setting("arm")] == ["dry_run", "arm_name"]
    system = build(arguments={"world": {"sets": ["camera_wrist.options.world", "arm.options.world"]}})
    assert [a.name for a in system.arguments_setting("arm")] == ["world"]
    assert [a.name for a in system.arguments_setting("camera_wrist")] == ["world"]
    assert system.arguments_setting("camera") == []  # a prefix of a node's name is not that node
    assert system.with_arguments({}, environ={}).arguments_setting("arm") == []  # applied: none left


def test_arguments_edit_parameters_written_as_yaml_strings():
    system = build(arguments={"world": {"sets": ["camera_wrist.options.world"]}})
    applied = system.with_arguments({"world": "cell"}, environ={})
    assert applied.node("camera_wrist").parameters["options"] == {"world": "cell"}


def test_unknown_arguments_and_targets_are_named():
    with pytest.raises(SystemFileError, match=r"no argument\(s\) \['arm_nme'\]; arguments: \['arm_name', 'dry_run'\]"):
        build().with_arguments({"arm_nme": "1"}, environ={})
    broken = build(arguments={"x": {"sets": ["ghost.param"]}})
    with pytest.raises(SystemFileError, match=r"sets 'ghost\.param', but there is no node 'ghost'"):
        broken.with_arguments({}, environ={})


def test_argument_syntax_is_the_ros2_launch_one():
    assert parse_argument_overrides(["robot_ip:=10.0.0.2", "vlm_url:=http://h:8000/v1"]) == {
        "robot_ip": "10.0.0.2", "vlm_url": "http://h:8000/v1"}
    with pytest.raises(SystemFileError, match="'robot_ip=1' must look like name:=value"):
        parse_argument_overrides(["robot_ip=1"])


def test_sim_overrides_and_scenario_paths(tmp_path):
    system = build()
    assert system.with_sim(seed=7, scenario="long_horizon").sim.seed == 7
    assert system.scenario_path() == "spatial"
    data = copy.deepcopy(SIM)
    data["sim"]["scenario"] = "scenarios/mine.yaml"
    (tmp_path / "sys.yaml").write_text(yaml.safe_dump(data))
    loaded = load_system(tmp_path / "sys.yaml")
    assert loaded.scenario_path() == str(tmp_path / "scenarios" / "mine.yaml")
    with pytest.raises(SystemFileError, match=r"'real_xarm6' is not simulated"):
        load_system("real_xarm6").with_sim(seed=1)


def test_missing_and_malformed_files_are_named(tmp_path):
    with pytest.raises(SystemFileError, match=r"'nowhere/sys\.yaml' does not exist"):
        load_system("nowhere/sys.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(SystemFileError, match="not valid YAML"):
        load_system(bad)


def test_an_unseeded_etts_reasoner_of_a_sim_system_gets_the_layout_seed():
    # Issue #38: unseeded, the node path drew the simulated model's errors from other seeds than the
    # in-process trials (and its exploration from the OS), so a layout erred differently on the two paths.
    system = load_system("sim_xarm6", {"tts": "etts"}).with_sim(seed=6).with_layout_seeded_reasoner()
    assert system.node("task_node").parameters["reasoning"]["reasoner"] == {"type": "etts", "seed": 6}
    single = load_system("sim_xarm6").with_sim(seed=6).with_layout_seeded_reasoner()
    assert single.node("task_node").parameters["reasoning"]["reasoner"] == {"type": "single"}
    etts = load_system("sim_xarm6", {"tts": "etts"})
    own = etts.with_parameters("task_node", reasoning={"reasoner": {"type": "etts", "seed": 11}})
    assert own.with_layout_seeded_reasoner().node("task_node").parameters["reasoning"]["reasoner"]["seed"] == 11
    text = etts.with_parameters("task_node", reasoning="reasoner: {type: etts}").with_sim(seed=2)
    assert text.with_layout_seeded_reasoner().node("task_node").parameters["reasoning"]["reasoner"]["seed"] == 2
    real = load_system("real_xarm6")
    assert real.with_layout_seeded_reasoner() is real
