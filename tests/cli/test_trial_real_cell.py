"""``robopin trial`` on a system without a simulator section: the real-cell branch of the runner.

No real arm or camera is here, so the simulated workcell stands in for the cell, built by this test
the way a person sets a table: the runner sees only a system file without ``sim`` (as
``real_xarm6``), brings one stack up for the whole batch, shows the operator a simulator scenario's
layout in words and rendered, keeps the initial views, and has no world check to consult — the
stack's own verdict and the (scripted) operator's judgement are all there is.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

import pytest

from robopin.trials.judging import read_stack_verdict
from robopin.trials.log import read_trial

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_a_cell_without_a_simulator_is_judged_by_the_operator_through_one_stack(tmp_path, caplog):
    from robopin_ros.bringup import sim_calibrations
    from robopin_ros.trial_batch import PlannedTrial, TrialBatch

    from robopin.sim.tasks import build_scene
    from robopin.system import load_system

    caplog.set_level(logging.INFO, logger="robopin_ros.bringup")
    simulated = load_system("sim_panda", {})
    # The stand-in cell: the workcell the sim camera, arm and oracle backends attach to, laid out by the test.
    scene = build_scene("spatial", 0, world_name=simulated.sim.world, robot="panda")
    try:
        system = dataclasses.replace(simulated, sim=None, name="cell_panda")
        system = system.with_parameters("projection_node", calibrations=sim_calibrations(scene, system.views))
        assert not system.is_sim
        judge = tmp_path / "judge.yaml"
        judge.write_text("- {failure: wrong_place, note: the duck went to the red plate}\n- success\n"
                         "- {failure: dropped, subgoals: 1}\n")
        args = argparse.Namespace(resume=False, judge_file=str(judge), no_console=True, console_port=0,
                                  no_browser=True, verbose=0)
        plan = [PlannedTrial(system, "spatial", seed, f"panda-spatial-seed{seed:03d}", "operator") for seed in (0, 1)]
        # A real-cell scenario file (objects and places in words, three sub-goals to count).
        cell_file = str(ROOT / "config" / "real_scenarios" / "long_horizon.yaml")
        plan.append(PlannedTrial(system, cell_file, 0, "panda-long_horizon-seed000", "operator"))
        from robopin.trials.judging import load_judge_file

        batch = TrialBatch(args, tmp_path / "cell", plan, answers=load_judge_file(judge), command="robopin trial test",
                       overrides={})
        try:
            assert batch.run() == 0
            assert batch.real_bringup is not None and batch.real_bringup.running  # one stack for the batch
        finally:
            batch.close()
    finally:
        scene.close()
    assert [r.getMessage() for r in caplog.records].count("started task_node (task_node)") == 1
    out = tmp_path / "cell"
    first, _ = read_trial(out / "panda-spatial-seed000")
    second, _ = read_trial(out / "panda-spatial-seed001")
    assert first.failure == "wrong_place" and second.success
    assert first.task == "spatial" and first.extra["system"] == "cell_panda"
    stack, _ = read_stack_verdict(out / "panda-spatial-seed000")
    assert stack.world_success is None and stack.task_id  # no simulator to ask: only the stack's word
    assert first.instruction == scene.spec.instruction
    for seed in (0, 1):
        assert (out / f"reference-spatial-seed{seed:03d}.png").is_file()  # the layout to set up, rendered
        assert (out / f"panda-spatial-seed{seed:03d}" / "views" / "initial_static.png").is_file()
    long_horizon, _ = read_trial(out / "panda-long_horizon-seed000")
    judgement = long_horizon.extra["judgement"]
    assert long_horizon.task == "long_horizon" and long_horizon.failure == "dropped"
    assert (judgement["subgoals_reached"], judgement["subgoals_total"]) == (1, 3)
    assert read_stack_verdict(out / "panda-long_horizon-seed000")[1]["subgoals_total"] == 3
    results = (out / "results.md").read_text()
    assert "Sub-goals reached overall: 1/3." in results
    assert "| Spatial | 1/2 |" in results and "| Long-horizon | 0/1 |" in results
    assert "`wrong_place`" in results and "the duck went to the red plate" in results
