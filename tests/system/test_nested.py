"""Nested settings as dotted ROS parameters: what a system file's mapping becomes and how a node reads it back."""

from __future__ import annotations

import pytest

from robopin.system import load_system
from robopin.system.nested import flatten_setting, nest_setting


def test_a_mapping_round_trips_through_dotted_parameters():
    setting = {"type": "openai", "timeout_s": 60.0, "views": ["static", "wrist"], "roles": {"static": "facing"},
               "matrix": [[1.0, 0.0], [0.0, 1.0]], "verifiers": [{"type": "geometric"}], "mixed": [1, 2.5],
               "none": None, "empty": {}, "no_items": []}
    flat = flatten_setting("vlm", setting)
    assert flat["vlm.type"] == "openai" and flat["vlm.roles.static"] == "facing"
    assert flat["vlm.views"] == ["static", "wrist"] and flat["vlm.mixed"] == [1.0, 2.5]
    # ROS cannot type these leaves: they travel as YAML text and read back as what they were.
    assert isinstance(flat["vlm.matrix"], str) and isinstance(flat["vlm.verifiers"], str)
    back = nest_setting("vlm", {**flat, "other.key": 1})
    assert back == {**setting, "mixed": [1.0, 2.5]}


def test_a_key_that_is_both_a_value_and_a_mapping_is_refused_by_name():
    with pytest.raises(ValueError, match=r"vlm\.roles\.static"):
        nest_setting("vlm", {"vlm.roles": "x", "vlm.roles.static": "y"})


def test_the_planners_settings_of_a_shipped_system_are_dotted():
    params = load_system("real_xarm6").with_arguments({"vlm_url": "http://gpu:8000/v1"}, {}).ros_parameters_file()
    planner = params["task_node"]["ros__parameters"]
    assert planner["vlm.base_url"] == "http://gpu:8000/v1"  # the launch argument reached the dotted key
    assert planner["reasoning.view_roles.static"].startswith("static camera")
    assert planner["workspace.max_xyz"] == [0.9, 0.5, 0.6]
    assert not {"vlm", "reasoning", "workspace"} & set(planner)
    assert params["arm_driver"]["ros__parameters"]["options.reduced_mode"] is True
    motion = params["motion_planner_node"]["ros__parameters"]
    assert motion["planner.type"] == "curobo" and "planner" not in motion
    assert motion["workspace.min_xyz"] == [0.1, -0.5, -0.02]
