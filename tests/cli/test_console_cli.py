"""``robopin console``: registered, and refusing to serve beyond loopback before anything listens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_console_serves_loopback_only():
    result = subprocess.run([sys.executable, "-m", "robopin.cli", "console", "--host", "0.0.0.0", "--port", "0"],
                            cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the console serves loopback only" in result.stderr and "SSH tunnel" in result.stderr


def test_console_and_trial_help_name_the_judging_options():
    result = subprocess.run([sys.executable, "-m", "robopin.cli", "trial", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "--judge-file" in result.stdout and "--judge {operator,sim}" in result.stdout
    result = subprocess.run([sys.executable, "-m", "robopin.cli", "console", "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Stop button" in result.stdout


def test_trial_with_the_console_port_taken_says_so_before_any_trial(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "robopin.cli", "trial", "spatial@0", "--judge", "operator",
                                 "--console-port", str(port), "--out", str(tmp_path)], cwd=ROOT, env=dict(os.environ),
                                capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"cannot serve the console on 127.0.0.1:{port}" in result.stderr
    assert not list(tmp_path.iterdir())  # no trial started
