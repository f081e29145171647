"""R^3 subtask parsing against a skill grammar; RoboGPT-R1 plan parsing, format score and plan accuracy."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.pincot import SkillGrammar, parse_plan, parse_subtask, plan_accuracy
from robopin.pincot.plan import lcs_length
from robopin.pincot.r3 import GrammarError, SkillFormat

GRAMMAR = SkillGrammar.from_formats(
    ["push the {block} to the {location}", "move the {block} next to the {target}"],
    {"block": ["red star", "blue cube", "green moon"]},
)


@pytest.mark.parametrize(
    ("text", "instruction", "slots"),
    [
        ("The star is far left.\nInstruction: push the red star to the top left corner.",
         "push the red star to the top left corner", {"block": "red star", "location": "top left corner"}),
        ("reasoning\n**Instruction:** \"move the Blue Cube next to the red star\"",
         "move the Blue Cube next to the red star", {"block": "Blue Cube", "target": "red star"}),
        ("reasoning\nInstruction:\npush the green moon to the centre",
         "push the green moon to the centre", {"block": "green moon", "location": "centre"}),
        ("<think>the cube is free</think><answer>push the blue cube to the bottom</answer>",
         "push the blue cube to the bottom", {"block": "blue cube", "location": "bottom"}),
    ],
)  # fmt: skip
def test_instructions_in_the_grammar_are_accepted_with_their_slots(text, instruction, slots):
    response = parse_subtask(text, GRAMMAR)
    assert response.valid, response.errors
    assert response.instruction == instruction
    assert dict(response.slots) == slots
    assert response.reasoning and "Instruction" not in response.reasoning


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Only thinking, no instruction at all", "missing_instruction"),
        ("reasoning\nInstruction:", "missing_instruction"),
        ("reasoning\nInstruction: wave at the camera", "instruction_not_in_grammar"),
        ("reasoning\nInstruction: push the purple whale to the left", "unknown_slot_value"),
    ],
)
def test_instructions_outside_the_grammar_are_errors(text, code):
    response = parse_subtask(text, GRAMMAR)
    assert not response.valid
    assert code in [e.code for e in response.errors]


def test_done_is_accepted_only_where_allowed():
    assert parse_subtask("all packed\nInstruction: done", GRAMMAR).done
    strict = SkillGrammar.from_formats(["push the {block} to the {location}"], allow_done=False)
    assert not parse_subtask("all packed\nInstruction: done", strict).valid


def test_unlabelled_last_line_and_trailing_text_warn():
    response = parse_subtask("The moon is free.\npush the green moon to the left", GRAMMAR)
    assert response.valid and "instruction_unlabelled" in [w.code for w in response.warnings]
    response = parse_subtask("r\nInstruction: push the red star to the left\nThanks!", GRAMMAR)
    assert response.valid and "text_after_instruction" in [w.code for w in response.warnings]


def test_grammar_errors_are_named():
    with pytest.raises(GrammarError, match="twice"):
        SkillFormat("put {x} on {x}")
    with pytest.raises(GrammarError, match="colour"):
        SkillGrammar.from_formats(["push {block}"], {"colour": ["red"]})
    with pytest.raises(GrammarError, match="at least one"):
        SkillGrammar.from_formats([])


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_subtask_parser_never_raises(text):
    parse_subtask(text, GRAMMAR)


ACTIONS = {3: "find a apple", 7: "pick up the apple", 9: "put down the object in hand", 12: "find a fridge"}


def plan_json(steps, **overrides):
    value = {
        "visual_state_description": "an apple on the table",
        "reasoning_and_reflection": "find it first",
        "language_plan": "find the apple, pick it up, put it in the fridge",
        "executable_plan": [{"action_id": i, "action_name": n} for i, n in steps],
    }
    value.update(overrides)
    return json.dumps(value)


def test_a_correct_plan_scores_full_format_and_is_valid():
    text = (
        f"<think>ok</think><answer>```json\n{plan_json([(3, ' Find a Apple'), (7, 'pick up the apple')])}\n```</answer>"
    )
    plan = parse_plan(text, ACTIONS)
    assert plan.valid, plan.errors
    assert (plan.section_score, plan.type_score, plan.validity_score) == (1.0, 1.0, 1.0)
    assert plan.format_score == pytest.approx(1.0)
    assert plan.action_ids == (3, 7)
    assert plan.action_names == ("find a apple", "pick up the apple")


def test_format_score_weights_sections_types_and_validity():
    # 3 of 4 sections typed right; steps: good, wrong name, unknown id, string id -> type 3/4; validity 1/2.
    steps = [(3, "find a apple"), (7, "pick up the pear"), (99, "fly"), ("9", "put down the object in hand")]
    plan = parse_plan(plan_json(steps, language_plan=["not", "a", "string"]), ACTIONS)
    assert plan.section_score == pytest.approx(3 / 4)
    assert plan.type_score == pytest.approx(3 / 4)
    assert plan.validity_score == pytest.approx(1 / 2)
    assert plan.format_score == pytest.approx(0.3 * 0.75 + 0.3 * 0.75 + 0.4 * 0.5)
    codes = {e.code for e in plan.errors}
    assert codes == {"bad_section", "action_name_mismatch", "unknown_action", "bad_step"}


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2]", '<answer>{"a": </answer>'])
def test_text_without_a_plan_object_scores_zero(text):
    plan = parse_plan(text, ACTIONS)
    assert not plan.valid
    assert plan.format_score == 0.0
    assert "missing_plan" in [e.code for e in plan.errors]


def test_plan_accuracy_is_lcs_over_reference_length():
    reference = ["find a apple", "pick up the apple", "find a fridge", "put down the object in hand"]
    assert plan_accuracy(["Find a apple", "find a fridge", "put down the object in hand"], reference) == 0.75
    assert plan_accuracy(["find a fridge", "find a apple"], reference) == 0.25
    plan = parse_plan(plan_json([(3, "find a apple"), (7, "pick up the apple")]), ACTIONS)
    assert plan_accuracy(plan, reference) == 0.5
    assert plan_accuracy([], []) == 0.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from("abcd"), max_size=8), st.lists(st.sampled_from("abcd"), max_size=8))
def test_lcs_is_symmetric_and_bounded(a, b):
    k = lcs_length(a, b)
    assert k == lcs_length(b, a)
    assert 0 <= k <= min(len(a), len(b))
    assert lcs_length(a, a) == len(a)
