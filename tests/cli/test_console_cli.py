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
