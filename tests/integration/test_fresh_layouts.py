"""Layouts outside the shipped 0–19 whose failures were traced to a cause (issue "fresh layouts"), each carried out
through every node by ``robopin trial`` with the shipped system at its defaults and judged by the simulator.

xArm 6 spatial layout 11: the upright duck is grasped 7 mm off the fingers' centre line. The xArm gripper is an
open chain in pybullet that holds by a weld; the duck must leave the opened hand onto the plate, and the stack and
the judge must both say so.
"""

from __future__ import annotations

import pytest

from .one_trial import run_trial

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_xarm6_spatial_layout_11_leaves_the_released_duck_on_the_plate(tmp_path):
    run = run_trial(tmp_path / "trials", "spatial", 11, "sim_xarm6")
    assert run.summary.success and run.judgement["success"], (run.judgement, run.log)
    assert run.summary.extra["stack"]["success"], run.summary.extra["stack"]
