"""The oracle writes R^3 subtask steps and RoboGPT-R1 plans too, read back by the loop's own parsers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from robopin.pincot.plan import parse_plan
from robopin.pincot.prompts import plan_prompt, subtask_prompt
from robopin.pincot.r3 import parse_subtask
from robopin.reasoning import ReasoningConfig
from robopin.sim.grounding import ground_instruction
from robopin.sim.tasks import build_scene
from robopin.vlm import build_messages, make_backend
from robopin.vlm.base import ViewImage

from .helpers import unique_world_name

SIM_SYSTEM = Path(__file__).resolve().parents[2] / "config" / "sim_xarm6.yaml"


def shipped_reasoning() -> ReasoningConfig:
    system = yaml.safe_load(SIM_SYSTEM.read_text())
    values = dict(system["nodes"]["task_node"]["parameters"]["reasoning"])
    return ReasoningConfig.from_dict(values)


@pytest.fixture(scope="module")
def long_scene():
    # Seed 1: three yellow objects of different kinds outside the plates, a yellow lego on another plate.
    scene = build_scene("long_horizon", 1, world_name=unique_world_name("lh-modes"))
    yield scene
    scene.close()


def _ask(scene, text: str) -> str:
    backend = make_backend({"type": "oracle", "world": scene.world.name, "views": ["static", "wrist"]})
    images = [ViewImage(np.zeros((480, 640, 3), np.uint8), name, k) for k, name in enumerate(("static", "wrist"))]
    return backend.generate(build_messages(text, images)).samples[0].text


def test_subtask_step_names_the_next_goal_in_an_allowed_format(long_scene):
    config = shipped_reasoning()
    prompt = subtask_prompt(long_scene.task.instruction, ["static", "wrist"], config.grammar.format_strings())
    response = parse_subtask(_ask(long_scene, prompt), config.grammar)
    assert response.valid and not response.done, response.errors
    goal = long_scene.task.goals[0]
    assert ground_instruction(long_scene, response.instruction).goals == ((goal.object, goal.target),)


def test_plan_uses_the_shipped_action_dictionary_for_every_remaining_goal(long_scene):
    config = shipped_reasoning()
    prompt = plan_prompt(long_scene.task.instruction, ["static", "wrist"], config.actions)
    plan = parse_plan(_ask(long_scene, prompt), config.actions)
    assert not plan.errors, plan.errors
    assert plan.format_score == pytest.approx(1.0)
    grounded = [ground_instruction(long_scene, config.actions[s.action_id]).goals[0] for s in plan.steps]
    assert grounded == [(g.object, g.target) for g in long_scene.task.goals]


def test_a_goal_the_action_dictionary_cannot_name_empties_the_plan_by_name(long_scene):
    actions = {1: "pick up the yellow duck outside the plates and place it in the yellow plate"}
    prompt = plan_prompt(long_scene.task.instruction, ["static", "wrist"], actions)
    text = _ask(long_scene, prompt)
    plan = parse_plan(text, actions)
    assert plan.steps == () and "no action moves the yellow" in text


# Layouts of the simulated arms with look-alikes among the goals (the shipped dictionary's IDs: 1 duck, 2 cube,
# 3 lego, 4 ball): each look-alike is carried out by its kind's action once, in the task's order.
LOOKALIKE_PLANS = [("xarm6", 3, [4, 2, 2]), ("xarm6", 8, [2, 3, 2]), ("xarm6", 1003, [2, 2, 2]),
                   ("panda", 1003, [3, 3, 1])]


@pytest.mark.parametrize(("robot", "seed", "expected"), LOOKALIKE_PLANS)
def test_plan_repeats_an_action_for_look_alikes_and_the_reference_plan_agrees(robot, seed, expected):
    from robopin.reasoning.ground_truth import make_ground_truth, plan_measures

    config = shipped_reasoning()
    scene = build_scene("long_horizon", seed, robot=robot, world_name=unique_world_name("lh-alike"))
    try:
        prompt = plan_prompt(scene.task.instruction, ["static", "wrist"], config.actions)
        plan = parse_plan(_ask(scene, prompt), config.actions)
        assert not plan.errors, plan.errors
        assert list(plan.action_ids) == expected
        reference = make_ground_truth({"type": "sim", "world": scene.world.name}).reference_plan(
            scene.task.instruction, config.actions)
        assert reference == tuple(config.actions[k] for k in expected)
        assert plan_measures(plan.action_names, reference) == {"plan_accuracy": 1.0}
        # Each action grounds, when it runs, to the goal it was planned for: the first look-alike still waiting.
        assert ground_instruction(scene, config.actions[expected[0]]).goals == (
            (scene.task.goals[0].object, scene.task.goals[0].target),)
    finally:
        scene.close()


def test_subtask_step_names_a_look_alike_with_the_words_that_name_both():
    config = shipped_reasoning()
    scene = build_scene("long_horizon", 8, robot="xarm6", world_name=unique_world_name("lh-alike"))
    try:
        prompt = subtask_prompt(scene.task.instruction, ["static", "wrist"], config.grammar.format_strings())
        response = parse_subtask(_ask(scene, prompt), config.grammar)
        assert response.valid and not response.done, response.errors
        grounding = ground_instruction(scene, response.instruction)
        assert grounding.goals == (("yellow_cube_0", "plate_yellow"),)
        assert grounding.alike == ("yellow_cube_0", "yellow_cube_2")
    finally:
        scene.close()
