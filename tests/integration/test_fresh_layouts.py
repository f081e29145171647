"""Layouts outside the shipped 0–19 whose failures were traced to a cause (issue "fresh layouts"), each carried out
through every node by ``robopin trial`` with the shipped system at its defaults and judged by the simulator.

xArm 6 spatial layout 11: the upright duck is grasped 7 mm off the fingers' centre line. The xArm gripper is an
open chain in pybullet that holds by a weld; while the fingers still collided with the welded duck they pushed into
each other as the arm accelerated (18 mm deep by the release), and the opened hand carried the duck off the plate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robopin.trials.log import read_trial

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_xarm6_spatial_layout_11_leaves_the_released_duck_on_the_plate(tmp_path):
    out = tmp_path / "trials"
    result = subprocess.run(
        [sys.executable, "-m", "robopin.cli", "trial", "spatial@11", "--system", "sim_xarm6", "--out", str(out)],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = result.stdout[-6000:] + result.stderr[-4000:]
    folder = out / "xarm6-spatial-seed011"
    summary, _ = read_trial(folder)
    assert summary is not None, f"no summary\n{log}"
    judgement = json.loads((folder / "judgement.json").read_text())
    assert summary.success and judgement["success"], (judgement, log)
    assert summary.extra["stack"]["success"], summary.extra["stack"]
