"""Stage timing from task feedback, and the batch results (RoboPIN's table, failures by reason)."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.system.timing import ROBOPIN_MODEL_TIME_S, FeedbackEvent, step_timings, summarize_timings
from robopin.trials.log import TrialLog, TrialSummary
from robopin.trials.results import failure_table, load_summaries, results_markdown, success_table, timing_summary


def events(*items):
    return [FeedbackEvent(t, stage, step) for t, stage, step in items]


def test_a_stage_lasts_until_the_next_feedback_and_repeats_extend_it():
    timeline = events((10.0, "observing", 0), (10.5, "reasoning", 0), (12.5, "validating", 0),
                      (12.6, "projecting", 0), (13.0, "planning", 0), (14.0, "planning", 0), (15.0, "executing", 0),
                      (16.0, "executing", 0), (20.0, "observing", 1), (20.2, "reasoning", 1), (21.0, "validating", 1),
                      (21.1, "done", 2))
    steps = step_timings(list(reversed(timeline)), start_s=9.0, end_s=22.0, model_times_s={0: 1.5, 1: 0.7})
    assert [s.step for s in steps] == [0, 1]
    first, second = steps
    assert first.durations_s == pytest.approx({"observe": 0.5, "reason": 2.0, "validate": 0.1, "project": 0.4,
                                               "plan": 2.0, "execute": 5.0})
    assert first.starts_s["plan"] == pytest.approx(4.0) and first.starts_s["observe"] == pytest.approx(1.0)
    assert first.reason_overhead_s == pytest.approx(0.5)
    assert first.overhead_s == pytest.approx(0.5 + 0.5 + 0.1 + 0.4)
    # "done" closes the last stage; the model-reported-done step has no projection or motion
    assert second.durations_s == pytest.approx({"observe": 0.2, "reason": 0.8, "validate": 0.1})


def test_model_time_longer_than_the_observed_stage_gives_no_negative_overhead():
    (step,) = step_timings(events((0.0, "reasoning", 0), (1.0, "validating", 0)), 0.0, 1.0, {0: 1.2})
    assert step.reason_overhead_s == 0.0


def test_summary_means_medians_and_ratio_to_robopin():
    timeline = events((0.0, "observing", 0), (0.1, "reasoning", 0), (1.1, "validating", 0), (1.2, "projecting", 0),
                      (1.5, "planning", 0), (2.5, "executing", 0))
    steps = step_timings(timeline, 0.0, 4.0, {0: 0.9}) * 3
    summary = summarize_timings(steps)
    assert summary.steps == 3
    assert summary.mean_s["model"] == pytest.approx(0.9) and summary.median_s["execute"] == pytest.approx(1.5)
    overhead = 0.1 + 0.1 + 0.1 + 0.3
    assert summary.overhead_mean_s == pytest.approx(overhead)
    assert summary.overhead_ratio == pytest.approx(overhead / ROBOPIN_MODEL_TIME_S)
    assert summary.overhead_with_planning_mean_s == pytest.approx(overhead + 1.0)
    text = summary.table()
    assert "x RoboPIN's 0.281 s" in text and "execute" in text and "p95 s" in text


def test_p95_interpolates_as_numpy_does():
    plans = [0.1, 0.2, 0.3, 0.4, 2.0]
    steps = [step_timings(events((0.0, "planning", 0), (t, "executing", 0)), 0.0, t + 1.0)[0] for t in plans]
    summary = summarize_timings(steps)
    assert summary.p95_s["plan"] == pytest.approx(float(np.percentile(plans, 95)))
    assert summary.median_s["plan"] == pytest.approx(0.3)


def _summary(trial_id, task, method, success, failure="", *, seed=0, timings=()):
    return TrialSummary(trial_id, task, method, success, failure, 1, 1.0, "do it",
                        extra={"seed": seed, "detail": f"why {trial_id}", "timings": list(timings)})


def test_success_table_has_robopins_rows_and_columns():
    summaries = [_summary("a", "long_horizon", "oracle / panda", True),
                 _summary("b", "spatial", "oracle / panda", True),
                 _summary("c", "spatial", "oracle / panda", False, "grasp_missed"),
                 _summary("d", "spatial", "oracle / xarm6", True), _summary("e", "custom", "oracle / xarm6", True)]
    table = success_table(summaries).splitlines()
    assert table[0] == "| Task | oracle / panda | oracle / xarm6 |"
    assert table[2:] == ["| Spatial | 1/2 | 1/1 |", "| Long-horizon | 1/1 | – |", "| custom | – | 1/1 |"]


def test_every_failure_is_listed_with_its_reason():
    summaries = [_summary("s1", "spatial", "m", False, "grasp_missed", seed=4),
                 _summary("s2", "spatial", "m", False, "grasp_missed", seed=5),
                 _summary("s3", "multi_view", "m", False, "stale_frame"), _summary("s4", "spatial", "m", True)]
    text = failure_table(summaries)
    assert "| s1 | spatial | m | 4 | `grasp_missed` | why s1 |" in text
    assert "Failures by reason: `grasp_missed` 2, `stale_frame` 1" in text
    assert "s4" not in text
    assert failure_table(summaries[3:]) == "No failures."


def test_results_are_read_back_from_trial_folders(tmp_path):
    timing = {"step": 0, "durations_s": {"observe": 0.2, "reason": 1.0, "project": 0.3}, "model_s": 0.8}
    for index, (success, failure) in enumerate([(True, ""), (False, "no_path")]):
        log = TrialLog(tmp_path / "panda", f"t{index}")
        log.finish(_summary(f"t{index}", "spatial", "oracle / panda", success, failure, timings=[timing]))
    summaries = load_summaries(tmp_path)
    assert [s.trial_id for s in summaries] == ["t0", "t1"]
    assert timing_summary(summaries).overhead_mean_s == pytest.approx(0.2 + 0.2 + 0.3)
    text = results_markdown(summaries, command="robopin trial spatial --seeds 2")
    assert "| Spatial | 1/2 |" in text and "`no_path`" in text and "robopin trial spatial --seeds 2" in text
