"""Judgements: the fixed reasons, judge files, the simulator as judge, and a trial finished from its stack verdict."""

from __future__ import annotations

import json

import pytest

from robopin.trials.judging import (
    FAILURE_REASONS,
    JudgementError,
    StackVerdict,
    finish_judged_trial,
    judgement_from_answer,
    load_judge_file,
    parse_answer,
    read_judgement,
    read_stack_verdict,
    sim_judgement,
    write_stack_verdict,
)
from robopin.trials.log import read_trial

STACK_OK = StackVerdict(success=True, task_id="abcd1234", world_success=True, goals_reached=1, goals_total=1)
STACK_REFUSED = StackVerdict(success=False, failure="depth_hole", detail="no depth at the duck")


def test_the_failure_reasons_are_the_fixed_operator_list():
    assert list(FAILURE_REASONS) == ["wrong_object", "wrong_place", "grasp_failed", "dropped", "collision",
                                     "safety_stop", "refused", "timeout", "other"]


@pytest.mark.parametrize("entry, expected", [
    ("success", {"success": True, "reason": ""}),
    ("grasp_failed", {"success": False, "reason": "grasp_failed"}),
    ({"failure": "dropped"}, {"success": False, "reason": "dropped"}),
    ({"success": False, "reason": "collision", "note": "hit a toy"}, {"success": False, "reason": "collision"}),
])
def test_answers_in_every_written_form(entry, expected):
    parsed = parse_answer(entry)
    assert {k: parsed[k] for k in expected} == expected


@pytest.mark.parametrize("entry, code", [
    ("butterfingers", "unknown_reason"),
    ({"success": False}, "missing_reason"),
    ({"failure": "other"}, "note_required"),
    ({"failure": "dropped", "subgoals": -1}, "bad_subgoals"),
    ({"success": True, "reason": "dropped"}, "bad_judgement"),
    ({"sucess": True}, "bad_judgement"),
])
def test_bad_answers_are_refused_by_name(entry, code):
    with pytest.raises(JudgementError) as caught:
        parse_answer(entry)
    assert caught.value.code == code


def test_refused_takes_the_stacks_named_reason_and_needs_a_refusal():
    judgement = judgement_from_answer("refused", STACK_REFUSED)
    assert judgement.failure == "refused" and judgement.refusal == "depth_hole"
    with pytest.raises(JudgementError, match="stack reported success"):
        judgement_from_answer("refused", STACK_OK)


def test_long_horizon_sub_goals_are_checked():
    assert judgement_from_answer("success", STACK_OK, subgoals_total=3).subgoals_reached == 3
    partial = judgement_from_answer({"failure": "dropped", "subgoals": 2}, STACK_OK, subgoals_total=3)
    assert partial.subgoals_reached == 2
    for answer in ({"failure": "dropped"}, {"failure": "dropped", "subgoals": 4}, {"success": True, "subgoals": 2}):
        with pytest.raises(JudgementError):
            judgement_from_answer(answer, STACK_OK, subgoals_total=3)


def test_the_simulator_as_judge_keeps_the_stacks_named_failures():
    assert sim_judgement(STACK_OK).success
    disagree = StackVerdict(success=True, world_success=False, world_detail="duck_0->plate_1: off the plate")
    assert sim_judgement(disagree).failure == "goal_not_met"
    assert sim_judgement(STACK_REFUSED).failure == "depth_hole"


def test_judge_file_is_checked_whole_before_anything_runs(tmp_path):
    good = tmp_path / "judge.yaml"
    good.write_text("[success, failure: grasp_failed]\n")
    assert [a["reason"] for a in load_judge_file(good)] == ["", "grasp_failed"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("- success\n- {failure: wobbly}\n")
    with pytest.raises(JudgementError, match="entry 2: unknown failure reason 'wobbly'"):
        load_judge_file(bad)
    with pytest.raises(JudgementError, match="does not exist"):
        load_judge_file(tmp_path / "missing.yaml")


def test_a_trial_is_finished_from_its_stack_verdict(tmp_path):
    folder = tmp_path / "panda-spatial-seed000"
    folder.mkdir()
    summary = {"trial_id": folder.name, "task": "spatial", "method": "oracle / panda", "steps": 1, "duration_s": 3.0,
               "instruction": "pick the duck", "bag": "", "extra": {"seed": 0}}
    write_stack_verdict(folder, STACK_OK, summary=summary)
    stack, context = read_stack_verdict(folder)
    assert stack == STACK_OK and context["summary"]["task"] == "spatial"
    result = finish_judged_trial(folder, judgement_from_answer({"failure": "grasp_failed"}, stack, source="test"))
    read_back, _ = read_trial(folder)
    assert read_back == result and not result.success and result.failure == "grasp_failed"
    assert result.extra["stack"]["success"] is True and result.extra["judge"] == "operator"
    assert read_judgement(folder).source == "test"
    assert json.loads((folder / "summary.json").read_text())["extra"]["judgement"]["reason"] == "grasp_failed"
