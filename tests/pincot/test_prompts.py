"""Prompt builders: required content for each mode, and editable templates."""

from __future__ import annotations

import pytest

from robopin.pincot import (
    HistoryEntry,
    PromptTemplates,
    StepRecord,
    VerifierExample,
    View,
    feedback_prompt,
    plan_prompt,
    pointing_prompt,
    retry_prompt,
    step_prompt,
    subtask_prompt,
    verifier_prompt,
)
from robopin.pincot.prompts import TEMPLATE_NAMES, PromptError

VIEWS = [View("static", "static camera above the table"), View("wrist", "camera on the gripper")]
ROBOPIN_SENTENCE = (
    "The answer should be presented in JSON format. Provide your thinking process between the <think> and "
    "</think> tags, and then give your final answer between the <answer> and </answer> tags."
)


def test_pointing_prompt_introduces_each_view_with_index_and_role():
    text = pointing_prompt("put the duck on the plate", VIEWS)
    assert "put the duck on the plate" in text
    assert 'Image 0 (img_idx="0", static): static camera above the table' in text
    assert 'Image 1 (img_idx="1", wrist): camera on the gripper' in text
    assert '<obj name="red cup" id="obj_01" img_idx="0" point="[x, y]">' in text
    assert text.endswith(ROBOPIN_SENTENCE)
    assert "$" not in text


def test_step_prompt_carries_the_history_in_order():
    history = [StepRecord("pick the red block, place it on the blue block", "succeeded"), "pick the green block"]
    text = step_prompt("stack all blocks", ["static"], history)
    first = text.index("1. pick the red block, place it on the blue block -> succeeded")
    assert first < text.index("2. pick the green block")
    assert "step 3 is next" in text
    assert "Trust what the images show now" in text
    assert "(none yet)" in step_prompt("stack", ["static"], [])


def test_subtask_prompt_lists_formats_and_prefers_the_current_view():
    text = subtask_prompt(
        "pack the groceries", VIEWS, ["pick {object} and place it in {container}"], "I moved the milk"
    )
    assert "Goal: pack the groceries" in text
    assert "- pick {object} and place it in {container}" in text
    assert "I moved the milk" in text
    assert "Trust the current images over your previous response" in text
    assert "Instruction: <instruction>" in text
    assert "first step" in subtask_prompt("g", VIEWS, ["push {x}"])


def test_plan_prompt_lists_the_task_action_dictionary():
    text = plan_prompt("heat the apple", VIEWS, {12: "find a microwave", 3: "pick up the apple"})
    assert text.index("3: pick up the apple") < text.index("12: find a microwave")
    for field in ("visual_state_description", "reasoning_and_reflection", "language_plan", "executable_plan"):
        assert field in text
    with pytest.raises(PromptError, match="int ID"):
        plan_prompt("x", VIEWS, {"3": "pick"})


def test_verifier_prompt_asks_yes_or_no_with_optional_examples_and_history():
    bare = verifier_prompt("put the duck on the plate", "obj_01 is the duck")
    assert 'Answer with only the single word "yes" or "no".' in bare
    assert "Example" not in bare and "Recent History" not in bare
    full = verifier_prompt(
        "put the duck on the plate",
        "obj_01 is the duck",
        examples=[VerifierExample("pick the cup", "cup ringed", True), VerifierExample("pick", "wall ringed", False)],
        history=[HistoryEntry("step 1 image", "obj_01 grasped")],
    )
    assert "Example 1: Instruction: pick the cup Observation: cup ringed Answer: yes" in full
    assert "Example 2: Instruction: pick Observation: wall ringed Answer: no" in full
    assert "Reasoning Trace: obj_01 grasped" in full


def test_feedback_and_retry_prompts():
    text = feedback_prompt("put the duck on the plate", "obj_01 is the duck", 0.123)
    assert "Evaluation Score: 0.12" in text
    assert "reward" not in text.lower().split("evaluation score")[0]
    assert "4. How can the action quality (reward) be improved?" in feedback_prompt("g", "r", 0.5, reward=0.25)
    retry = retry_prompt("BASE PROMPT", "I chose the wrong cup", "pick the cup left of the towel")
    assert retry.startswith("BASE PROMPT")
    assert "Supervisor Feedback: pick the cup left of the towel" in retry


def test_templates_can_be_overridden_from_a_folder(tmp_path):
    (tmp_path / "pointing.txt").write_text("Views:\n$views\nDo: $instruction ($num_views)\n")
    templates = PromptTemplates(tmp_path)
    assert (
        pointing_prompt("wave", ["static"], templates=templates)
        == 'Views:\n- Image 0 (img_idx="0", static)\nDo: wave (1)'
    )
    assert "Overall Objective" in verifier_prompt("g", "r", templates=templates)  # falls back to the packaged one


def test_template_errors_name_the_problem(tmp_path):
    (tmp_path / "pointing.txt").write_text("$instruction $colour\n")
    with pytest.raises(PromptError, match=r"\$colour"):
        pointing_prompt("wave", ["static"], templates=PromptTemplates(tmp_path))
    with pytest.raises(PromptError, match="does not exist"):
        PromptTemplates(tmp_path / "missing")
    with pytest.raises(PromptError, match="instruction"):
        pointing_prompt("  ", ["static"])
    with pytest.raises(PromptError, match="view"):
        pointing_prompt("wave", [])


def test_every_packaged_template_exists():
    templates = PromptTemplates()
    assert all(templates.path(name).is_file() for name in TEMPLATE_NAMES)
