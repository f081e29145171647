"""Plan (RoboGPT-R1) and subtask (R^3) modes carry out long-horizon layouts with look-alike objects through every
node, judged by the simulator as ``robopin trial`` judges.

xArm 6 layout 8 holds two yellow cubes outside the plates: the oracle's plan repeats the cube's action, and each
run of it grounds to the first cube not on the plate yet. Panda layout 1003 (held out) holds two yellow lego bricks
and a duck: R^3 names a lego brick twice.
"""

from __future__ import annotations

import pytest

from .one_trial import run_trial

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.mark.parametrize(("system", "seed", "mode"), [("sim_xarm6", 8, "plan"), ("sim_panda", 1003, "subtask")])
def test_the_oracle_carries_out_a_long_horizon_layout_with_look_alikes(tmp_path, system, seed, mode):
    run = run_trial(tmp_path / "trials", "long_horizon", seed, system, "model:=oracle", f"mode:={mode}")
    summary, judgement, log = run.summary, run.judgement, run.log
    assert run.returncode == 0 and summary.success and judgement["success"], (summary.extra, judgement, log)
    assert judgement["subgoals_reached"] == judgement["subgoals_total"] == 3, judgement
    measures = summary.extra["reasoning"]
    assert measures and all(m["valid"] for m in measures), measures

    def applying(key: str) -> list:  # a measure that does not apply to a step (no anchors in a plan) is None
        return [m[key] for m in measures if m[key] is not None]

    assert applying("pin_accuracy") and set(applying("pin_accuracy")) == {1.0}, measures
    if mode == "plan":
        assert applying("plan_accuracy") == [1.0], measures
    else:
        assert applying("instruction_validity") and set(applying("instruction_validity")) == {1.0}, measures




def test_panda_long_horizon_layout_1_in_plan_mode_leaves_the_duck_on_the_plate(tmp_path):
    """Panda long-horizon layout 1, plan mode: the duck is released between fingers it nearly fills. A release
    asked with the grasp force leaves the fingers pressed into it and the retreat carries it off; the task releases
    with a plain move checked to reach its width, and the judge and the stack both see the duck on the plate."""
    run = run_trial(tmp_path / "trials", "long_horizon", 1, "sim_panda", "model:=oracle", "mode:=plan")
    summary, judgement, log = run.summary, run.judgement, run.log
    assert summary.success and judgement["success"] and judgement["subgoals_reached"] == 3, (judgement, log)
