"""The robopin CLI stays importable without rclpy and offers the main-job commands."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


def test_up_instruct_and_trial_register_without_importing_rclpy():
    code = ("import sys; from robopin.cli import build_parser; text = build_parser().format_help(); "
            "assert all(c in text for c in ('up', 'instruct', 'trial')), text; "
            "assert 'rclpy' not in sys.modules, 'rclpy imported'; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_up_refuses_an_unknown_argument_naming_the_declared_ones():
    result = subprocess.run([sys.executable, "-m", "robopin.cli", "up", "sim_panda", "robot_ip:=1.2.3.4"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    expected = ("robopin up: system 'sim_panda' has no argument(s) ['robot_ip']; "
                "arguments: ['camera_fps', 'dry_run', 'mode', 'model', 'model_latency_s', 'tts', 'verdict_latency_s', "
                "'verifier_error']")
    assert expected in result.stderr


def _robopin(*args: str) -> subprocess.CompletedProcess:
    # The test run's ROS domain and loopback discovery come through os.environ (tests/conftest.py).
    return subprocess.run([sys.executable, "-m", "robopin.cli", *args], capture_output=True, text=True, timeout=180)


@pytest.mark.ros
@pytest.mark.skipif(importlib.util.find_spec("curobo") is not None, reason="cuRobo is installed: the planner starts")
def test_up_names_the_node_that_did_not_start_and_the_arguments_that_set_it():
    # real_xarm6 plans with cuRobo; without it the motion planner (created first) cannot start, before
    # any arm or camera is touched.
    result = _robopin("up", "real_xarm6")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "robopin up: node 'motion_planner_node' (motion_planner_node) did not start: the 'curobo' planner " \
           "cannot run here" in result.stderr
    assert "arguments of system 'real_xarm6' that set node 'motion_planner_node':" in result.stderr
    assert "planner:=curobo  motion planner backend" in result.stderr


@pytest.mark.ros
@pytest.mark.slow
def test_trial_stops_at_a_node_that_cannot_start(tmp_path):
    result = _robopin("trial", "spatial@0", "--system", "sim_panda", "--set", "camera_fps:=0", "--out", str(tmp_path))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert ("robopin trial (panda-spatial-seed000): node 'camera_static' (camera_node) did not start: parameter "
            "fps must be >= 1, got 0") in result.stderr
    assert "camera_fps:=0" in result.stderr
    assert "prints the traceback" not in result.stderr, "a configuration refusal is not a bug"


@pytest.mark.ros
def test_up_stops_when_its_recorder_process_cannot_start(tmp_path):
    # robopin up runs recorder_node as a child process (robopin_ros.bringup.OWN_PROCESS): a recorder that
    # refuses its parameters ends that process, and bring-up says which node and stops, without waiting out
    # its ready timeout.
    import yaml

    from robopin.env import REPO_ROOT

    system = yaml.safe_load((REPO_ROOT / "config" / "sim_panda.yaml").read_text())
    system["nodes"]["recorder_node"]["parameters"]["queue_size"] = -1
    path = tmp_path / "sim_panda_bad_recorder.yaml"
    path.write_text(yaml.safe_dump(system))
    result = _robopin("up", str(path), "--ready-timeout", "150")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "RecorderNode did not start: ParameterRangeError: parameter queue_size must be >= 0" in result.stderr, \
        result.stderr[-3000:]
    assert "node 'recorder_node' (process " in result.stderr and "exited with code 1" in result.stderr, \
        result.stderr[-3000:]
