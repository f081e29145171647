"""RoboPIN's quality measures on hand-built traces with known answers."""

from __future__ import annotations

import pytest

from robopin.pincot import (
    AnswerPoint,
    Box,
    anchor_coverage,
    answer_accuracy,
    cross_step_id_coverage,
    cross_view_id_transfer,
    format_score,
    identity_consistency,
    parse,
    pin_accuracy,
)

DUCK = '<obj name="duck" id="obj_01" img_idx="0" point="[412, 530]">'
CUP = '<obj name="cup" id="obj_02" img_idx="0" point="[100, 100]">'
PLATE = '<space name="plate" id="space_01" img_idx="0" point="[700, 610]">'


def wrap(think: str, answer: str) -> str:
    return f"<think>{think}</think><answer>{answer}</answer>"


@pytest.mark.parametrize(
    ("text", "score"),
    [
        (wrap(f"{DUCK} is it", "obj_01"), 1.0),
        (wrap("it is the duck", "[412, 530]"), 0.5),  # outer format only: no anchor
        (wrap(f'{DUCK} and <obj name="cup" img_idx="0" point="[1, 2]">', "obj_01"), 0.5),  # a malformed tag
        (f"{DUCK} <answer>obj_01</answer>", 0.0),
        (f"<think>{DUCK}</think>", 0.0),
        ("", 0.0),
    ],
)
def test_format_score_is_one_half_or_zero(text, score):
    trace = parse(text, 1)
    assert format_score(trace) == score
    assert trace.metrics["format"] == score


def test_consistency_counts_valid_mentions_over_all_mentions():
    # Mentions in think: DUCK tag (valid), obj_01 (valid), obj_02 before CUP (invalid), CUP tag (valid),
    # a conflicting re-tag of obj_01 as "goose" (invalid), obj_09 (unknown, invalid), a malformed tag (invalid).
    goose = '<obj name="goose" id="obj_01" img_idx="1" point="[5, 5]">'
    think = f'{DUCK} then obj_01, obj_02 before {CUP}, {goose}, obj_09, <obj name="x">'
    trace = parse(wrap(think, "obj_01"), 2)
    assert identity_consistency(trace) == pytest.approx(3 / 7)
    assert trace.metrics["consistency"] == pytest.approx(3 / 7)


def test_consistency_is_zero_without_mentions_and_one_for_a_clean_trace():
    assert identity_consistency(parse(wrap("nothing pinned", "[1, 2]"), 1)) == 0.0
    assert identity_consistency(parse(wrap(f"{DUCK} so obj_01 and obj_01", "obj_01"), 1)) == 1.0


def test_out_of_range_or_unknown_view_tags_are_invalid_mentions():
    far = '<obj name="duck" id="obj_01" img_idx="3" point="[1, 1]">'
    trace = parse(wrap(f"{DUCK} {far} obj_01", "obj_01"), 2)
    assert identity_consistency(trace) == pytest.approx(2 / 3)


def test_answer_mentions_do_not_count_towards_consistency():
    trace = parse(wrap(DUCK, "obj_05"), 1)
    assert identity_consistency(trace) == 1.0
    assert "unknown_id" in trace.error_codes()


def test_cross_step_id_coverage_is_the_share_of_ids_reused_by_bare_id():
    trace = parse(wrap(f"{DUCK} {CUP} {PLATE} then obj_01 onto space_01", "obj_01"), 1)
    assert cross_step_id_coverage(trace) == pytest.approx(2 / 3)


def test_cross_view_id_transfer_is_the_share_of_ids_tagged_in_two_views():
    duck_wrist = '<obj name="duck" id="obj_01" img_idx="1" point="[5, 5]">'
    trace = parse(wrap(f"{DUCK} {CUP} {duck_wrist}", "obj_01"), 2)
    assert cross_view_id_transfer(trace) == pytest.approx(1 / 2)
    assert "cross_view_id_transfer" not in parse(wrap(DUCK, "obj_01"), 1).metrics


def test_anchor_coverage_ties_answer_points_by_id_or_position():
    trace = parse(wrap(f"{DUCK} {PLATE}", "[[412, 530], [705, 612], [50, 950]]"), 1)
    assert anchor_coverage(trace) == pytest.approx(2 / 3)
    assert anchor_coverage(parse(wrap(DUCK, "B"), 1, expect_points=False)) == 0.0


def test_pin_accuracy_follows_the_paper_formula_with_unpaired_points_as_misses():
    trace = parse(wrap(f"{DUCK} {CUP} {PLATE}", "obj_01"), 1)
    boxes = {
        "obj_01": Box(400, 500, 450, 560),  # hit
        "obj_02": [Box(0, 0, 50, 50), Box(90, 90, 110, 110)],  # second box hits
        # space_01 has no box: a miss
    }
    assert pin_accuracy(trace, boxes) == pytest.approx(2 / 3)
    by_name = {"Duck": Box(0, 0, 10, 10), "plate": Box(690, 600, 710, 620)}
    assert pin_accuracy(trace, by_name, key="name") == pytest.approx(1 / 3)
    assert pin_accuracy(trace, {"obj_01": Box(400, 500, 450, 560, img_idx=1)}) == 0.0


def test_answer_accuracy_counts_points_inside_any_target_box():
    points = [AnswerPoint(10, 10, 0), AnswerPoint(500, 500, 0), AnswerPoint(505, 505, 1)]
    boxes = [Box(0, 0, 20, 20), Box(490, 490, 510, 510, img_idx=0)]
    assert answer_accuracy(points, boxes) == pytest.approx(2 / 3)
    assert answer_accuracy([], boxes) == 0.0
    trace = parse(wrap(DUCK, "obj_01"), 1)
    assert answer_accuracy(trace, [Box(400, 500, 450, 560)]) == 1.0


@pytest.mark.parametrize("corners", [(10, 0, 5, 20), (0, 10, 20, 5), (0, 0, float("nan"), 1)])
def test_bad_boxes_are_rejected_with_their_corners(corners):
    with pytest.raises(ValueError, match="box"):
        Box(*corners)
