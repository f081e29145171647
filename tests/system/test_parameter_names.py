"""Unknown parameters are refused (issue 33): a key a node does not declare stops the system file at load.

Each case edits a shipped system file's text (so line numbers are the file's own) and loads it the way
``robopin up`` and the launch file do; nothing here starts a node or imports rclpy.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from robopin.env import REPO_ROOT
from robopin.system import NODE_EXECUTABLES, SystemFileError, load_system
from robopin.system.launching import launch_entries
from robopin.system.nested import NESTED_PARAMETERS
from robopin.system.node_parameters import NESTED_SETTINGS, NODE_PARAMETERS, UnknownParameterError

SIM_SYSTEMS = ("sim_panda", "sim_xarm6")


def _text(system: str) -> str:
    return (REPO_ROOT / "config" / f"{system}.yaml").read_text(encoding="utf-8")


def _write(tmp_path: Path, text: str, name: str = "typo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _line_of(text: str, fragment: str) -> int:
    return text[:text.index(fragment)].count("\n") + 1


def _refusal(path: Path) -> UnknownParameterError:
    with pytest.raises(UnknownParameterError) as caught:
        load_system(path)
    assert isinstance(caught.value, SystemFileError)  # robopin up exits 2 on it, naming the file
    return caught.value


def _typo(name: str) -> str:
    """A transposition of the last two letters (state_rate_hz -> state_rate_zh), as fingers make them."""
    return name[:-2] + name[-1] + name[-2]


def test_the_table_covers_every_executable_and_its_nested_settings():
    assert set(NODE_PARAMETERS) == set(NODE_EXECUTABLES)
    for executable, settings in NESTED_SETTINGS.items():
        assert set(NESTED_PARAMETERS.get(executable, ())) <= set(settings) <= NODE_PARAMETERS[executable], executable
    assert "ready_wait_s" in NODE_PARAMETERS["task_node"]


def test_every_parameter_is_a_described_field_of_its_nodes_settings():
    # One definition per parameter: the table is the settings dataclasses' fields, each with a description, and
    # the nested settings are exactly the mapping-valued fields (declared as dotted parameters).
    import dataclasses

    from robopin.settings import described
    from robopin.system.node_settings import node_settings

    for executable in NODE_EXECUTABLES:
        classes = node_settings(executable)
        assert classes, f"{executable} has no settings dataclass"
        names = [about.parameter or name for config in classes for name, about in described(config).items()]
        assert len(names) == len(set(names)), f"{executable}: a parameter in two of its settings classes"
        assert set(names) == NODE_PARAMETERS[executable]
        assert all(about.text for config in classes for about in described(config).values()), executable
        nested = {f.name for config in classes for f in dataclasses.fields(config)
                  if "setting" in f.metadata and isinstance(getattr(config(), f.name), dict)}
        assert nested == set(NESTED_SETTINGS[executable]), executable


@pytest.mark.parametrize("system", [*SIM_SYSTEMS, "real_xarm6", "real_franka"])
def test_the_shipped_systems_name_only_declared_keys(system):
    load_system(REPO_ROOT / "config" / f"{system}.yaml")


def _node_cases() -> list[tuple[str, str, str]]:
    cases = []
    for system in SIM_SYSTEMS:
        data = yaml.safe_load(_text(system))
        for node, body in data["nodes"].items():
            key = next(iter(body["parameters"]))  # each node's first parameter, misspelled
            cases.append((system, node, key))
    return cases


@pytest.mark.parametrize(("system", "node", "key"), _node_cases())
def test_a_misspelled_parameter_of_every_sim_node_is_refused_with_the_nearest_name(tmp_path, system, node, key):
    data = yaml.safe_load(_text(system))
    parameters = data["nodes"][node]["parameters"]
    data["nodes"][node]["parameters"] = {(_typo(k) if k == key else k): v for k, v in parameters.items()}
    error = _refusal(_write(tmp_path, yaml.safe_dump(data, sort_keys=False)))
    executable = data["nodes"][node]["executable"]
    assert len(error.problems) == 1, str(error)
    assert (f"node {node!r} ({executable}): parameter {_typo(key)!r} is not declared by {executable}; "
            f"did you mean {key!r}?") in str(error)


_PANDA_MOTION_WORKSPACE = "      workspace: {min_xyz: [0.1, -0.6, -0.05], max_xyz: [0.95, 0.6, 0.8]}"
_PANDA_PROJECTION_WORKSPACE = ("      workspace: {min_xyz: [0.1, -0.6, -0.05], max_xyz: [0.95, 0.6, 0.6]}\n"
                               "      max_frame_age_s")
_XARM_STATE_PUBLISHER = "      robot: xarm6\n      views: [static, wrist]\n      sim_world"


@pytest.mark.parametrize(("system", "node", "edit", "meant"), [
    ("sim_panda", "motion_planner_node", (_PANDA_MOTION_WORKSPACE, "workspace:", "workspcae:"), "workspace"),
    ("sim_panda", "projection_node", (_PANDA_PROJECTION_WORKSPACE, "workspace:", "workspce:"), "workspace"),
    # The state publisher has no rate: nothing is close, so its parameters are listed.
    ("sim_xarm6", "state_publisher_node", (_XARM_STATE_PUBLISHER, "sim_world", "state_rate_hzz: 10.0\n      sim_world"),
     None),
    ("sim_panda", "arm_driver", ("      state_rate_hz: 30.0", "state_rate_hz:", "state_rate_hzz:"), "state_rate_hz"),
])
def test_the_issue_typos_are_refused_on_their_line(tmp_path, system, node, edit, meant):
    text = _text(system)
    block, old, new = edit
    assert text.count(block) == 1, block
    edited = text.replace(block, block.replace(old, new, 1))
    key = new.split(":")[0]
    error = _refusal(_write(tmp_path, edited))
    [problem] = error.problems
    assert (problem.node, problem.key, problem.suggestion) == (node, key, meant)
    assert problem.line == _line_of(edited, f"{key}:")
    hint = f"did you mean {meant!r}?" if meant else "expected one of ["
    assert re.search(rf"line {problem.line}: node '{node}' \(\w+\): parameter '{key}' is not declared by \w+; "
                     + re.escape(hint), str(error)), str(error)


def test_a_misspelled_backend_parameter_names_backedn_not_the_default_backends_fields(tmp_path):
    # Once dropped, the camera fell back to realsense and refused the sim options ("unknown field(s) ['world']").
    text = _text("sim_panda")
    old = "      name: wrist\n      backend: sim"
    edited = text.replace(old, "      name: wrist\n      backedn: sim")
    error = _refusal(_write(tmp_path, edited))
    [problem] = error.problems
    assert (problem.node, problem.path, problem.suggestion) == ("camera_wrist", ("backedn",), "backend")
    assert "world" not in str(error) and "realsense" not in str(error)
    assert f"line {_line_of(edited, 'backedn')}: node 'camera_wrist' (camera_node): parameter 'backedn' is not " \
           "declared by camera_node; did you mean 'backend'?" in str(error)


def test_backedn_inside_camera_options_is_refused_suggesting_the_backend_parameter(tmp_path):
    text = _text("sim_panda")
    old = "      name: static\n      backend: sim\n      fps: 1\n      options: {world: workcell}"
    assert old in text
    edited = text.replace(old, "      name: static\n      fps: 1\n      options: {world: workcell, backedn: sim}")
    error = _refusal(_write(tmp_path, edited))
    [problem] = error.problems
    assert problem.path == ("options", "backedn")
    assert "key 'backedn' of options is not a field of RealSenseCameraConfig (camera type 'realsense', assumed: none " \
           "given); did you mean the node parameter 'backend' (beside options, not in it)?" in str(error)
    assert "'world'" not in str(error)  # judged against the assumed realsense type, it is not the mistake


def test_a_misspelled_safety_setting_is_refused_by_name_not_as_a_type_error(tmp_path):
    text = _text("sim_panda")
    edited = text.replace("safety: {state_max_age_s: 10.0", "safety: {state_max_age: 10.0")
    error = _refusal(_write(tmp_path, edited))
    [problem] = error.problems
    assert problem.path == ("options", "safety", "state_max_age") and problem.line == _line_of(edited, "safety:")
    assert "node 'arm_driver' (arm_driver_node): key 'state_max_age' of options.safety is not a field of " \
           "SafetyConfig (options.safety); did you mean 'state_max_age_s'?" in str(error)
    # The arm's own config refuses it the same way when built from a mapping (a node started another way).
    from robopin.robots.base import make_arm_config
    from robopin.robots.errors import ArmConfigError

    with pytest.raises(ArmConfigError, match=r"unknown safety setting\(s\) \['state_max_age'\]; 'state_max_age': "
                                             r"did you mean 'state_max_age_s'\?"):
        make_arm_config("sim", {"safety": {"state_max_age": 10.0}})


_WRIST_CAMERA = ("  camera_wrist:\n    executable: camera_node\n    parameters:\n      name: wrist\n"
                 "      backend: sim\n      fps: 1\n      options: {world: workcell}")


@pytest.mark.parametrize(("edit", "path", "owner", "meant"), [
    (("vlm: {type: oracle,", "vlm: {type: oracle, wrld: workcell,"), ("vlm", "wrld"),
     "OracleBackendConfig (VLM backend type 'oracle')", "world"),
    (("        cross_view_check: true", "        cross_veiw_check: true"), ("reasoning", "cross_veiw_check"),
     "ReasoningConfig", "cross_view_check"),
    (("planner: {type: roboplan, timeout_s: 3.0}", "planner: {type: roboplan, timeout: 3.0}"), ("planner", "timeout"),
     "RoboplanPlannerConfig (planner type 'roboplan')", "timeout_s"),
    ((_PANDA_MOTION_WORKSPACE, _PANDA_MOTION_WORKSPACE.replace("max_xyz", "max_xzy")), ("workspace", "max_xzy"),
     "WorkspaceBox", "max_xyz"),
    ((_WRIST_CAMERA, _WRIST_CAMERA.replace("{world:", "{wold:")), ("options", "wold"),
     "SimCameraConfig (camera type 'sim')", "world"),
])
def test_keys_of_nested_settings_and_backend_options_are_checked_against_their_config(tmp_path, edit, path, owner,
                                                                                      meant):
    text = _text("sim_panda")
    old, new = edit
    assert text.count(old) == 1, old
    error = _refusal(_write(tmp_path, text.replace(old, new)))
    [problem] = error.problems
    assert problem.path == path and problem.suggestion == meant
    assert f"key {path[-1]!r} of {path[0]} is not a field of {owner}; did you mean {meant!r}?" in str(error)


def test_a_launch_argument_targeting_an_unknown_key_is_refused_naming_the_argument(tmp_path):
    text = _text("sim_panda")
    edited = text.replace("sets: [arm_driver.options.dry_run]", "sets: [arm_driver.options.dry_rn]")
    error = _refusal(_write(tmp_path, edited))
    [problem] = error.problems
    assert problem.argument == "dry_run" and problem.line == _line_of(edited, "sets: [arm_driver.options.dry_rn]")
    assert "(set by argument 'dry_run': arm_driver.options.dry_rn); did you mean 'dry_run'?" in str(error)


def test_every_bad_key_gets_its_own_line(tmp_path):
    text = _text("sim_xarm6")
    edited = (text.replace("      state_rate_hz:", "      state_rate_hzz:", 1)
              .replace("max_joint_state_age_s:", "max_joint_state_age:", 1))
    error = _refusal(_write(tmp_path, edited))
    assert [p.key for p in error.problems] == ["state_rate_hzz", "max_joint_state_age"]
    lines = str(error).splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"{tmp_path / 'typo.yaml'}: 2 unknown parameter key(s)")


def test_the_launch_file_path_refuses_before_writing_a_parameters_file(tmp_path):
    text = _text("real_xarm6").replace("      cloud_period_s: 0.5", "      cloud_period: 0.5")
    params = tmp_path / "params"
    with pytest.raises(UnknownParameterError, match=r"parameter 'cloud_period' is not declared by projection_node; "
                                                    r"did you mean 'cloud_period_s'\?"):
        launch_entries(_write(tmp_path, text), {}, params)
    assert not params.exists()


def test_robopin_up_exits_2_naming_the_key_and_starts_nothing(tmp_path):
    text = _text("sim_panda")
    path = _write(tmp_path, text.replace("      workspace: {min_xyz: [0.1, -0.6, -0.05], max_xyz: [0.95, 0.6, 0.8]}",
                                         "      workspcae: {min_xyz: [0.1, -0.6, -0.05], max_xyz: [0.95, 0.6, 0.8]}"))
    # Loading fails before robopin up imports rclpy or builds the simulated scene.
    result = subprocess.run([sys.executable, "-m", "robopin.cli", "up", str(path), "--demo"], capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"robopin up: {path}: 1 unknown parameter key(s)" in result.stderr
    assert "parameter 'workspcae' is not declared by motion_planner_node; did you mean 'workspace'?" in result.stderr
    assert "started" not in result.stderr.lower() and result.stdout == ""
