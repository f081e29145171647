"""parse(): structure, anchors, references, every error code, every answer form, tolerated variants."""

from __future__ import annotations

import pytest

from robopin.pincot import ERROR_CODES, WARNING_CODES, AnswerPoint, parse

DUCK = '<obj name="duck" id="obj_01" img_idx="0" point="[412, 530]">'
PLATE = '<space name="plate" id="space_01" img_idx="0" point="[700, 610]">'
DUCK_WRIST = '<obj name="duck" id="obj_01" img_idx="1" point="[250, 300]">'


def wrap(think: str, answer: str) -> str:
    return f"<think>{think}</think><answer>{answer}</answer>"


GOOD = wrap(
    f"The {DUCK} is yellow. The free {PLATE} is right of it. obj_01 must go onto space_01. "
    f"In the wrist view {DUCK_WRIST} is centred.",
    '[{"point_2d": [412, 530], "label": "pick", "id": "obj_01", "img_idx": 0}, '
    '{"point_2d": [700, 610], "label": "place", "id": "space_01", "img_idx": 0}]',
)


def test_a_well_formed_multi_view_trace_is_valid_with_anchors_in_order():
    trace = parse(GOOD, num_views=2)
    assert trace.valid, trace.errors
    assert trace.warnings == ()
    assert [(a.kind, a.name, a.id, a.img_idx, a.x, a.y) for a in trace.anchors] == [
        ("obj", "duck", "obj_01", 0, 412.0, 530.0),
        ("space", "plate", "space_01", 0, 700.0, 610.0),
        ("obj", "duck", "obj_01", 1, 250.0, 300.0),
    ]
    assert [a.offset for a in trace.anchors] == [GOOD.index(DUCK), GOOD.index(PLATE), GOOD.index(DUCK_WRIST)]
    assert [(r.id, r.in_answer) for r in trace.references] == [
        ("obj_01", False),
        ("space_01", False),
        ("obj_01", True),  # the answer's "id" values are mentions too
        ("space_01", True),
    ]
    assert trace.answer_points == (
        AnswerPoint(412.0, 530.0, 0, "pick", "obj_01"),
        AnswerPoint(700.0, 610.0, 0, "place", "space_01"),
    )
    assert trace.ids == ("obj_01", "space_01")
    assert trace.think.startswith("The <obj")
    assert trace.answer.startswith('[{"point_2d"')
    assert trace.metrics["format"] == 1.0
    assert trace.metrics["consistency"] == 1.0
    assert trace.metrics["cross_view_id_transfer"] == 0.5


@pytest.mark.parametrize(
    ("text", "num_views", "code"),
    [
        (f"{DUCK} then <answer>[1, 2]</answer>", 1, "missing_think"),
        (f"<think>{DUCK}</think>", 1, "missing_answer"),
        (f"<think>{DUCK}</think><answer>[412, 530]", 1, "missing_answer"),
        (wrap(DUCK, "   "), 1, "empty_answer"),
        (wrap(DUCK, "I would grab it gently"), 1, "unparsable_answer"),
        (wrap(DUCK, '[{"point_2d": "middle"}]'), 1, "bad_answer"),
        (wrap('<obj id="obj_01" img_idx="0" point="[1, 2]">', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" img_idx="0" point="[1, 2]">', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" id="obj_01" point="[1, 2]">', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" id="obj_01" img_idx="0">', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" id="obj_01" img_idx="first" point="[1, 2]">', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" id="obj_01" img_idx="0" point="[1, 2, 3]">', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" id="obj_01" img_idx="0" point="[1, 2]"', "[1, 2]"), 1, "bad_anchor"),
        (wrap('<obj name="duck" id="obj_01" img_idx="0" point="[1200, 2]">', "[1, 2]"), 1, "point_out_of_range"),
        (wrap('<obj name="duck" id="obj_01" img_idx="0" point="[-5, 2]">', "[1, 2]"), 1, "point_out_of_range"),
        (wrap(DUCK, "[412, 1001]"), 1, "point_out_of_range"),
        (wrap(DUCK_WRIST, "[250, 300]"), 1, "unknown_view"),
        (wrap('<obj name="duck" id="obj_01" img_idx="-1" point="[1, 2]">', "[1, 2]"), 1, "unknown_view"),
        (wrap(DUCK, '[{"point_2d": [412, 530], "img_idx": 3}]'), 2, "unknown_view"),
        (wrap(DUCK + ' <obj name="cup" id="obj_01" img_idx="1" point="[5, 5]">', "obj_01"), 2, "id_name_conflict"),
        (wrap(DUCK + ' <space name="duck" id="obj_01" img_idx="1" point="[5, 5]">', "obj_01"), 2, "id_kind_conflict"),
        (wrap(DUCK + ' <obj name="duck" id="obj_01" img_idx="0" point="[900, 50]">', "obj_01"), 1, "id_point_conflict"),
        (wrap(DUCK + " next to obj_02", "obj_01"), 1, "unknown_id"),
        (wrap(DUCK, "obj_07"), 1, "unknown_id"),
        (wrap(DUCK, '[{"point_2d": [412, 530], "id": "obj_09"}]'), 1, "unknown_id"),
        (wrap("First obj_01, then " + DUCK, "obj_01"), 1, "reference_before_introduction"),
    ],
)
def test_each_error_code_is_reported_and_invalidates_the_trace(text, num_views, code):
    trace = parse(text, num_views)
    assert code in trace.error_codes(), (code, trace.errors)
    assert not trace.valid
    assert all(e.code in ERROR_CODES for e in trace.errors)
    assert all(e.message for e in trace.errors)


def test_every_documented_error_code_is_exercised_by_the_table_above():
    exercised = {
        "missing_think", "missing_answer", "empty_answer", "unparsable_answer", "bad_answer", "bad_anchor",
        "point_out_of_range", "unknown_view", "id_name_conflict", "id_kind_conflict", "id_point_conflict",
        "unknown_id", "reference_before_introduction",
    }  # fmt: skip
    assert exercised == set(ERROR_CODES)


def test_error_messages_name_the_offending_value():
    trace = parse(wrap('<obj name="duck" id="obj_01" img_idx="4" point="[1200, 2]">', "[1, 2]"), 2)
    messages = " ".join(e.message for e in trace.errors)
    assert "img_idx=4" in messages
    assert "1200" in messages


def test_same_id_in_another_view_is_the_multi_view_mechanism_not_an_error():
    trace = parse(wrap(f"{DUCK} and {DUCK_WRIST}", "obj_01"), 2)
    assert trace.valid
    assert {a.img_idx for a in trace.anchors_for("obj_01")} == {0, 1}


def test_same_id_in_same_view_at_same_point_is_only_a_warning():
    trace = parse(wrap(f"{DUCK} is here, again {DUCK}", "obj_01"), 1)
    assert trace.valid
    assert "repeated_anchor" in trace.warning_codes()


def test_names_compare_case_and_whitespace_insensitively():
    other = '<obj name="Yellow  Duck" id="obj_01" img_idx="1" point="[3, 4]">'
    trace = parse(wrap(f'<obj name="yellow duck" id="obj_01" img_idx="0" point="[1, 2]"> {other}', "obj_01"), 2)
    assert "id_name_conflict" not in trace.error_codes()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('[{"point_2d": [412, 530], "label": "duck"}]', [(412, 530, "duck")]),
        ('{"point_2d": [412, 530], "label": "duck"}', [(412, 530, "duck")]),
        ('```json\n[{"point_2d": [412, 530], "label": "duck"}]\n```', [(412, 530, "duck")]),
        ("[412, 530]", [(412, 530, None)]),
        ("```json\n[412, 530]\n```", [(412, 530, None)]),
        ("[[412, 530], [700, 610]]", [(412, 530, None), (700, 610, None)]),
        ("<point>[[412, 530], [700, 610]]</point>", [(412, 530, None), (700, 610, None)]),
        ("```\n<point>[[412, 530]]</point>\n```", [(412, 530, None)]),
        ('{"points": [{"point_2d": [412, 530]}, {"point_2d": [700, 610]}]}', [(412, 530, None), (700, 610, None)]),
        (DUCK, [(412, 530, "duck")]),
        ("obj_01", [(412, 530, "duck")]),
        ("The target is obj_01.", [(412, 530, "duck")]),
        ('["obj_01", "space_01"]', [(412, 530, "duck"), (700, 610, "plate")]),
    ],
)
def test_every_answer_form_gives_the_same_points(answer, expected):
    trace = parse(wrap(f"{DUCK} goes to {PLATE}; obj_01 onto space_01.", answer), 1)
    assert trace.valid, trace.errors
    assert [(p.x, p.y, p.label) for p in trace.answer_points] == [(float(x), float(y), lab) for x, y, lab in expected]
    assert all(p.img_idx == 0 for p in trace.answer_points)


def test_answer_points_on_an_anchor_get_its_id_and_view():
    trace = parse(wrap(f"{DUCK_WRIST} seen from the wrist", "[250, 300]"), 2)
    (point,) = trace.answer_points
    assert (point.id, point.img_idx) == ("obj_01", 1)
    assert trace.metrics["anchor_coverage"] == 1.0


def test_answer_with_several_views_and_no_view_named_warns():
    trace = parse(wrap(f"{DUCK} and {DUCK_WRIST}", "[100, 100]"), 2)
    assert trace.answer_points[0].img_idx is None
    assert "answer_view_unspecified" in trace.warning_codes()


def test_bare_id_answer_in_two_views_gives_one_point_per_view():
    trace = parse(wrap(f"{DUCK} and {DUCK_WRIST}", "obj_01"), 2)
    assert [(p.img_idx, p.x, p.y) for p in trace.answer_points] == [(0, 412.0, 530.0), (1, 250.0, 300.0)]


@pytest.mark.parametrize(
    ("think", "answer", "warning"),
    [
        ("<obj name='duck' id='obj_01' img_idx='0' point='[412, 530]'>", "obj_01", "anchor_single_quotes"),
        ('<obj name="duck" id="obj_01" img_idx="0" point="[412, 530]"/>', "obj_01", "anchor_self_closing"),
        ('<obj name="duck" id="obj_01" img_idx="0" point="(412, 530)">', "obj_01", "anchor_point_form"),
        ('<obj name="duck" id="obj_01" img_idx=0 point=[412, 530]>', "obj_01", "anchor_unquoted"),
        ('< obj  name = "duck"  id="obj_01"\n img_idx="0"  point="[ 412 ,530 ]" >', "obj_01", None),
        ('<OBJ name="duck" id="obj_01" img_idx="0" point="[412, 530]">', "obj_01", "anchor_uppercase"),
        (DUCK + "duck</obj>", "obj_01", "anchor_closing_tag"),
        (
            '<obj name="duck" id="obj_01" img_idx="0" point="[412, 530]" color="yellow">',
            "obj_01",
            "anchor_extra_attribute",
        ),
        (DUCK, "[{'point_2d': [412, 530], 'label': 'duck'}]", "answer_json_repaired"),
        (DUCK, "[(412, 530)]", "answer_json_repaired"),
        (DUCK, '[{"point_2d": [412, 530],},]', "answer_json_repaired"),
        (DUCK, 'The point is [{"point_2d": [412, 530]}] as asked.', "answer_json_in_text"),
        (DUCK, "grasp at (412, 530) please", "answer_points_from_text"),
        (DUCK, "grasp at [412, 530], then place at [700, 610].", "answer_points_from_text"),
        (DUCK, '[{"bbox_2d": [400, 500, 424, 560]}]', "answer_box_centre"),
    ],
)
def test_harmless_variants_are_accepted_with_a_warning(think, answer, warning):
    trace = parse(wrap(think, answer), 1)
    assert trace.valid, trace.errors
    assert trace.anchors[0].id == "obj_01"
    assert (trace.anchors[0].x, trace.anchors[0].y) == (412.0, 530.0)
    assert (trace.answer_points[0].x, trace.answer_points[0].y) == (412.0, 530.0)
    if warning is not None:
        assert warning in trace.warning_codes()
    assert all(w.code in WARNING_CODES for w in trace.warnings)


def test_several_points_in_prose_are_all_read():
    trace = parse(wrap(DUCK, "grasp at [412, 530], then place at (700, 610)."), 1)
    assert [(p.x, p.y) for p in trace.answer_points] == [(412.0, 530.0), (700.0, 610.0)]


def test_think_opened_by_the_chat_template_is_accepted():
    trace = parse(f"{DUCK} is the target.</think>\n<answer>obj_01</answer>", 1)
    assert trace.valid
    assert "think_open_missing" in trace.warning_codes()
    assert trace.metrics["format"] == 1.0


def test_unclosed_think_ends_at_answer():
    trace = parse(f"<think>{DUCK} is it.<answer>obj_01</answer>", 1)
    assert trace.valid
    assert "think_unclosed" in trace.warning_codes()
    assert DUCK in trace.think


def test_text_around_the_blocks_is_reported_not_fatal():
    trace = parse("Sure! " + wrap(DUCK, "obj_01") + " Hope that helps.", 1)
    assert trace.valid
    assert {"leading_text", "trailing_text"} <= set(trace.warning_codes())


def test_ids_out_of_first_mention_order_warn():
    second = '<obj name="cup" id="obj_02" img_idx="0" point="[1, 2]">'
    first = '<obj name="duck" id="obj_01" img_idx="0" point="[400, 400]">'
    trace = parse(wrap(f"{second} {first}", "obj_01"), 1)
    assert trace.valid
    assert "id_order" in trace.warning_codes()


def test_one_entity_under_two_ids_warns():
    twin = '<obj name="duck" id="obj_02" img_idx="0" point="[414, 531]">'
    trace = parse(wrap(f"{DUCK} {twin}", "obj_01"), 1)
    assert "same_entity_two_ids" in trace.warning_codes()


def test_done_answer_of_a_long_horizon_step_is_not_an_error():
    trace = parse(wrap("Everything is stacked.", '[{"label": "done"}]'), 1)
    assert trace.valid
    assert trace.done
    assert trace.answer_points == ()


def test_non_pointing_answers_pass_when_points_are_not_expected():
    trace = parse(wrap(f"{DUCK} is left of the bowl.", "B"), 1, expect_points=False)
    assert trace.valid
    assert trace.answer == "B"


def test_pixel_answers_are_converted_to_normalized_with_the_model_image_size():
    trace = parse(wrap("The duck.", "<point>[[322, 238]]</point>"), 1, coordinates="pixels", view_sizes=[(644, 476)])
    assert trace.valid
    assert trace.answer_points[0].x == pytest.approx(500.0)
    assert trace.answer_points[0].y == pytest.approx(500.0)
    outside = parse(wrap("x", "<point>[[700, 10]]</point>"), 1, coordinates="pixels", view_sizes=[(644, 476)])
    assert "point_out_of_range" in outside.error_codes()


@pytest.mark.parametrize("num_views", [0, -1, 1.5, True, None])
def test_bad_num_views_is_a_caller_error(num_views):
    with pytest.raises(ValueError, match="num_views"):
        parse(GOOD, num_views)


def test_pixel_mode_needs_view_sizes():
    with pytest.raises(ValueError, match="view_sizes"):
        parse(GOOD, 2, coordinates="pixels")


@pytest.mark.parametrize(
    "text",
    ["", "<", "<obj", "<obj ", "<think>", "</answer><answer>", "<obj name=\"", "[[[[[[[[" * 2000,
     "<answer>" + "[" * 5000, "\x00\ufffd<think>\udcff</think>",
     "<think>" + "obj_01 " * 500 + "</think><answer>{}</answer>"],
)  # fmt: skip
def test_pathological_text_never_raises(text):
    trace = parse(text, 2)
    assert not trace.valid
    assert 0.0 <= trace.metrics["format"] <= 1.0
