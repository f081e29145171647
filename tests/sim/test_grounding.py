"""The oracle reads the instruction it is sent: it grounds what it names in the scene, or refuses by name."""

from __future__ import annotations

import pytest

from robopin.pincot import parse
from robopin.sim.grounding import GroundingError, ground_instruction
from robopin.sim.oracle import GroundTruthOracle
from robopin.sim.tasks import build_scene


@pytest.fixture(scope="module")
def cube_scene():
    scene = build_scene("sanity_cube", 0, register=False)
    yield scene
    scene.close()


@pytest.fixture(scope="module")
def long_scene():
    scene = build_scene("long_horizon", 4, register=False)
    yield scene
    scene.close()


def _plate_of(scene, color: str) -> str:
    return next(n for n, o in scene.world.objects.items() if o.kind == "plate" and o.color == color)


def test_the_scenarios_own_instruction_grounds_to_its_goals(spatial_scene):
    grounding = ground_instruction(
        spatial_scene, "  pick up the duck in front of two toys AND place it to the middle plate among plates "
    )
    assert grounding.own
    assert grounding.goals == tuple((g.object, g.target) for g in spatial_scene.task.goals)


def test_another_instruction_grounds_to_what_it_names(spatial_scene):
    plates = [o for o in spatial_scene.world.objects.values() if o.kind == "plate"]
    goal = spatial_scene.task.goals[0]
    other = next(p for p in plates if p.name != goal.target)
    # The scenario's own phrase for the duck, with another plate named by its colour.
    grounding = ground_instruction(
        spatial_scene, f"pick up the duck in front of two toys and place it on the {other.color} plate"
    )
    assert grounding.goals == ((goal.object, other.name),) and not grounding.own
    oracle = GroundTruthOracle(
        spatial_scene, instruction=f"put the duck in front of two toys on the {other.color} plate"
    )
    trace = oracle.write()
    assert (trace.pick_object, trace.place_target) == (goal.object, other.name)
    assert not parse(trace.text, 2).errors


def test_an_instruction_naming_nothing_in_the_scene_is_refused_by_name(spatial_scene):
    with pytest.raises(GroundingError, match=r"'the banana'.*no object in the scene is that"):
        ground_instruction(spatial_scene, "put the banana on the red plate")
    oracle = GroundTruthOracle(spatial_scene, instruction="put the banana on the red plate")
    trace = oracle.write()
    assert trace.pick_object is None and "banana" in trace.text
    assert trace.text.endswith("<answer>[]</answer>")


def test_an_ambiguous_instruction_is_refused_naming_the_candidates(spatial_scene):
    # Two ducks, and "the duck" does not say which (the scenario's relation would).
    with pytest.raises(GroundingError, match=r"^'the duck' fits 2 objects \(duck_\d, duck_\d\): say which one$"):
        ground_instruction(spatial_scene, "put the duck on the middle plate among plates")
    # Places too, with how each looks where that tells them apart.
    with pytest.raises(GroundingError, match=r"^'the plate' fits 3 places \(plate_0: \w+ plate, .*\): say which one$"):
        ground_instruction(spatial_scene, "put the duck in front of two toys on the plate")


def test_colour_and_kind_words_pick_the_one_object(cube_scene):
    goal = cube_scene.task.goals[0]
    plate = cube_scene.world.object(goal.target)
    grounding = ground_instruction(cube_scene, f"Move the red block onto the {plate.color} plate.")
    assert grounding.goals == ((goal.object, goal.target),)
    with pytest.raises(GroundingError, match="the places are"):
        ground_instruction(cube_scene, "put the red cube in the bowl")


def test_a_plural_names_every_object_that_fits(long_scene):
    yellow = _plate_of(long_scene, "yellow")
    outside = {g.object for g in long_scene.task.goals}
    grounding = ground_instruction(long_scene, "put all the yellow objects outside the plates into the yellow plate")
    assert {o for o, _ in grounding.goals} == outside and {t for _, t in grounding.goals} == {yellow}
