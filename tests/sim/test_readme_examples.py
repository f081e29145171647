"""The README's instruction examples work as written on the default scene (config/sim_panda.yaml).

The instructions are read from README.md (tests/readme_examples.py); the scene is built as ``robopin up``
builds it (the system file's scenario, seed and robot). The stack itself runs the same text in
tests/integration/test_main_job.py (``robopin up`` + ``robopin instruct --dry-run``).
"""

from __future__ import annotations

import pytest

from robopin.pincot import parse
from robopin.sim.grounding import GroundingError, ground_instruction
from robopin.sim.oracle import GroundTruthOracle
from robopin.sim.tasks import build_scene
from robopin.system import load_system
from tests.readme_examples import instruct_examples, readme_instruction


@pytest.fixture(scope="module")
def default_scene():
    system = load_system("config/sim_panda.yaml")
    scene = build_scene(system.scenario_path(), system.sim.seed, robot=system.robot, register=False,
                        world_name="readme-default-scene")
    yield system, scene
    scene.close()


def test_the_readme_has_instruct_examples():
    examples = instruct_examples()
    assert len(examples) >= 2 and readme_instruction() in examples


@pytest.mark.parametrize("instruction", sorted(set(instruct_examples())))
def test_each_readme_instruction_grounds_unambiguously_on_the_default_scene(default_scene, instruction):
    system, scene = default_scene
    grounding = ground_instruction(scene, instruction)
    assert len(grounding.goals) == 1, grounding
    oracle = GroundTruthOracle(scene, list(system.views), instruction=instruction)
    trace = oracle.write()
    assert not oracle.grounding_error and trace.text.count("<obj") >= 2, trace.text
    assert (trace.pick_object, trace.place_target) == grounding.goals[0]
    parsed = parse(trace.text, len(system.views))
    assert not parsed.errors and len(parsed.answer_points) == 2, (parsed.errors, trace.text)


def test_the_old_readme_example_is_refused_as_ambiguous_not_as_absent(default_scene):
    # "the duck" on the default scene: two ducks fit. The refusal says so, names both and asks which one;
    # it must not say the scene does not show a duck.
    system, scene = default_scene
    ducks = sorted(n for n, o in scene.world.objects.items() if o.kind == "duck")
    with pytest.raises(GroundingError) as caught:
        ground_instruction(scene, "put the duck on the red plate")
    assert str(caught.value) == f"'the duck' fits 2 objects ({', '.join(ducks)}): say which one"
    assert caught.value.kind == "ambiguous" and caught.value.candidates == tuple(ducks)
    trace = GroundTruthOracle(scene, list(system.views), instruction="put the duck on the red plate").write()
    assert trace.text.endswith("<answer>[]</answer>") and trace.pick_object is None
    assert f"'the duck' fits 2 objects ({', '.join(ducks)}): say which one" in trace.text
    assert "does not show" not in trace.text and "will not guess which one" in trace.text
    # Both candidates are pinned, so the operator sees which two it means.
    assert parse(trace.text, len(system.views)).anchors


def test_an_instruction_naming_nothing_says_the_scene_does_not_show_it(default_scene):
    system, scene = default_scene
    trace = GroundTruthOracle(scene, list(system.views), instruction="put the banana on the red plate").write()
    assert "no object in the scene is that" in trace.text and "does not show" in trace.text
    assert "say which one" not in trace.text
