"""In-process simulated trials: the shipped xArm 6 system's loop, projection, roboplan and sim arm, judged as
``robopin trial`` judges (the scenario's success check on the settled world), and the batch tables."""

from __future__ import annotations

import pytest

from robopin.system import load_system
from robopin.trials.inprocess import InProcessTrial, batch_markdown, run_inprocess_trial

pytest.importorskip("pybullet")


@pytest.mark.slow
def test_the_oracle_carries_out_the_spatial_task_and_the_world_agrees():
    trial = run_inprocess_trial(load_system("config/sim_xarm6.yaml"), "spatial", 0, {"model": "oracle"})
    assert trial.success, (trial.failure, trial.detail)
    assert trial.steps_executed == 1 and trial.goals_reached == trial.goals_total == 1
    assert trial.model_errors == {} and trial.samples == 0  # the oracle draws no error
    pointing = [m for m in trial.measures if m["kind"] == "pointing"]
    assert pointing and pointing[0]["pin_accuracy"] == 1.0 and pointing[0]["answer_accuracy"] == 1.0


@pytest.mark.slow
@pytest.mark.parametrize(("system", "seed", "mode"), [("config/sim_xarm6.yaml", 8, "plan"),
                                                      ("config/sim_panda.yaml", 1003, "subtask")])
def test_the_oracle_carries_out_a_long_horizon_layout_with_look_alikes(system, seed, mode):
    # xArm 6 layout 8: two yellow cubes outside the plates (the plan repeats the cube's action); Panda layout
    # 1003: two yellow lego bricks and a duck (R^3 names a lego brick twice).
    trial = run_inprocess_trial(load_system(system), "long_horizon", seed, {"model": "oracle", "mode": mode})
    assert trial.success, (trial.failure, trial.detail)
    assert trial.steps_executed == trial.goals_reached == trial.goals_total == 3
    if mode == "plan":
        assert [m["plan_accuracy"] for m in trial.measures if m["kind"] == "plan"] == [1.0]


def _trial(task, model, success, failure="", *, errors=None, measures=()):
    return InProcessTrial(task, 0, {"model": model, "mode": "point", "tts": "single"}, success, failure, "",
                          success or failure == "goal_not_met", 1, None, None, errors or {}, 1, list(measures), 1.0)


def test_the_batch_table_counts_success_wrong_executions_refusals_and_errors_per_row():
    trials = [
        _trial("spatial", "robopin", True, measures=[{"pin_accuracy": 1.0}]),
        _trial("spatial", "robopin", False, "goal_not_met", errors={"answer_error": 1},
               measures=[{"pin_accuracy": 0.5}]),
        _trial("multi_view", "robopin", False, "cross_view_mismatch", errors={"anchor_error": 2}),
        _trial("spatial", "oracle", True),
    ]
    text = batch_markdown(trials)
    success = text.split("\n\n")[0]
    robopin = next(line for line in success.splitlines() if line.startswith("| robopin"))
    assert robopin.startswith("| robopin | point | single | 1/2 | 0/1 | 1/3 | 1 | 1 |")
    assert "cross_view_mismatch 1" in robopin and "goal_not_met 1" in robopin
    assert "| oracle | point | single | 1/1 | – | 1/1 | 0 | 0 | – |" in text
    assert "| robopin | point | single | 3 | 2 | 1 |" in text  # samples, anchor_error, answer_error
    assert "| robopin | point | single | 0.750 |" in text  # mean pin accuracy over the calls that have it
