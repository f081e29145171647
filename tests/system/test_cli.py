"""The robopin CLI stays importable without rclpy and offers the main-job commands."""

from __future__ import annotations

import subprocess
import sys


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
    expected = "robopin up: system 'sim_panda' has no argument(s) ['robot_ip']; arguments: ['camera_fps', 'dry_run']"
    assert expected in result.stderr
