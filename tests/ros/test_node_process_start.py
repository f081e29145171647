"""A node process that refuses its configuration exits 1 with one line naming the error (runtime.run_node)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ros]


@pytest.mark.skipif(importlib.util.find_spec("curobo") is not None, reason="cuRobo is installed: the planner starts")
def test_a_planner_backend_missing_here_ends_the_process_in_one_named_line():
    # The test run's ROS domain and loopback discovery come through os.environ (tests/conftest.py).
    result = subprocess.run(
        [sys.executable, "-m", "robopin_ros.motion_planner_node", "--ros-args", "-p", "robot:=xarm6",
         "-p", "planner:='{type: curobo}'"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert ("MotionPlannerNode did not start: BackendUnavailableError: the 'curobo' planner cannot run here"
            in result.stderr)
