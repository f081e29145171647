"""Judged results: Table 6 from the judgements, failures by reason, agreement, sub-goals (results.md and the page)."""

from __future__ import annotations

from robopin.trials.judging import StackVerdict, finish_judged_trial, judgement_from_answer, write_stack_verdict
from robopin.trials.log import TrialLog, TrialStep
from robopin.trials.report import build_report
from robopin.trials.results import judged_results_markdown, load_summaries


def _trial(root, trial_id, task, stack, answer, *, subgoals=None):
    log = TrialLog(root, trial_id)
    log.add_step(TrialStep(step=0, instruction="pick", durations_s={"observe": 0.1, "reason": 0.4, "project": 0.05,
                                                                      "plan": 1.0, "execute": 4.0}))
    timings = [{"step": 0, "durations_s": {"observe": 0.1, "reason": 0.4, "project": 0.05, "plan": 1.0,
                                           "execute": 4.0}, "model_s": 0.3}]
    write_stack_verdict(log.folder, stack, summary={"trial_id": trial_id, "task": task, "method": "robopin-4b / xarm6",
                                                    "steps": 1, "duration_s": 6.0, "instruction": "pick", "bag": "",
                                                    "extra": {"seed": 0, "timings": timings}})
    finish_judged_trial(log.folder, judgement_from_answer(answer, stack, subgoals_total=subgoals, source="test"))


def test_a_judged_batch_reads_as_robopins_table(tmp_path):
    ok = StackVerdict(success=True, task_id="a", steps_executed=1)
    _trial(tmp_path, "t1", "spatial", ok, "success")
    _trial(tmp_path, "t2", "spatial", ok, {"failure": "wrong_place", "note": "on the left plate"})
    _trial(tmp_path, "t3", "multi_view", StackVerdict(success=False, failure="depth_hole"), "refused")
    _trial(tmp_path, "t4", "long_horizon", StackVerdict(success=True, steps_executed=3), {"failure": "dropped",
                                                                                          "subgoals": 2}, subgoals=3)
    _trial(tmp_path, "t5", "long_horizon", StackVerdict(success=False, failure="grasp_missed", steps_executed=3),
           "success", subgoals=3)
    text = judged_results_markdown(load_summaries(tmp_path))
    for line in ("| Spatial | 1/2 |", "| Multi-view | 0/1 |", "| Long-horizon | 1/2 |",
                 "judged 5 by the operator",
                 "`refused` (`depth_hole`)", "on the left plate",
                 "| Spatial | robopin-4b / xarm6 | 2 | 1/2 | 0 | 1 |",
                 "| Long-horizon | robopin-4b / xarm6 | 2 | 0/2 | 1 | 1 |",
                 "Agreement overall: 2/5 (40 %).",
                 "| t4 | robopin-4b / xarm6 | 2/3 | 3 | dropped |", "Sub-goals reached overall: 5/6.",
                 "non-model overhead before planning"):
        assert line in text, (line, text)
    page, facts = build_report(tmp_path)
    assert facts["table"]["spatial"]["robopin-4b / xarm6"] == {"successes": 1, "trials": 2}
    for part in ("id='failures'", "<code>wrong_place</code>", "id='agreement'", "Agreement overall: 2/5",
                 "id='subgoals'", "2/3", "judged by the operator (test): on the left plate",
                 "the stack said failure: depth_hole"):
        assert part in page, part


def test_the_simulated_models_drawn_errors_are_counted_per_method():
    from robopin.trials.log import TrialSummary
    from robopin.trials.results import model_errors

    erring = [TrialSummary(f"t{k}", "spatial", "robopin / xarm6", k == 0, "" if k == 0 else "goal_not_met",
                           extra={"model_errors": {"anchor_error": k + 1, "answer_error": k}, "model_samples": 2})
              for k in range(2)]
    oracle = TrialSummary("o", "spatial", "oracle / xarm6", True)
    table = model_errors([*erring, oracle])
    assert "| method | samples | anchor_error | answer_error |" in table
    assert "| robopin / xarm6 | 4 | 3 | 1 |" in table and "| oracle / xarm6 | 0 | 0 | 0 |" in table
    assert model_errors([oracle]).startswith("No simulated model errors")
