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


# Look-alikes: the simulated xArm 6's long-horizon layout 8 has two yellow cubes outside the plates (goals
# yellow_cube_0 and yellow_cube_2, a yellow lego between them); layout 6 has a yellow lego outside the plates
# and another one on a white plate that must stay there.
CUBE = "pick up the yellow cube outside the plates and place it in the yellow plate"


@pytest.fixture
def twin_cubes():
    scene = build_scene("long_horizon", 8, robot="xarm6", register=False)
    assert [g.object for g in scene.task.goals] == ["yellow_cube_0", "yellow_lego_1", "yellow_cube_2"]
    yield scene
    scene.close()


def _rest_on(scene, name: str, target: str) -> None:
    """Put ``name`` on ``target`` (beside its centre) and let it settle."""
    import pybullet as p

    world = scene.world
    centre = world.object_center(target)
    body = world.object(name).body_id
    _, orientation = p.getBasePositionAndOrientation(body, physicsClientId=world.client)
    p.resetBasePositionAndOrientation(body, [centre[0] + 0.04, centre[1], centre[2] + 0.05], orientation,
                                      physicsClientId=world.client)
    world.settle()


def test_look_alikes_all_bound_for_the_named_place_ground_to_the_first_not_there_yet(twin_cubes):
    grounding = ground_instruction(twin_cubes, CUBE)
    assert grounding.goals == (("yellow_cube_0", "plate_yellow"),)
    assert grounding.alike == ("yellow_cube_0", "yellow_cube_2")
    # Without "outside the plates" too: both are bound for the yellow plate.
    plain = ground_instruction(twin_cubes, "put the yellow cube in the yellow plate")
    assert plain.goals == (("yellow_cube_0", "plate_yellow"),) and plain.alike == grounding.alike
    _rest_on(twin_cubes, "yellow_cube_0", "plate_yellow")
    # Said again, the same words move the other one (the first is no longer outside the plates).
    assert ground_instruction(twin_cubes, CUBE).goals == (("yellow_cube_2", "plate_yellow"),)
    after = ground_instruction(twin_cubes, "put the yellow cube in the yellow plate")
    assert after.goals == (("yellow_cube_2", "plate_yellow"),) and after.alike == ("yellow_cube_0", "yellow_cube_2")


def test_look_alikes_sent_elsewhere_than_the_task_sends_them_stay_ambiguous(twin_cubes):
    other = next(o for o in twin_cubes.world.objects.values() if o.kind == "plate" and o.color != "yellow")
    with pytest.raises(GroundingError, match=r"fits 2 objects \(yellow_cube_0, yellow_cube_2\)") as raised:
        ground_instruction(twin_cubes, f"put the yellow cube on the {other.color} plate")
    assert raised.value.kind == "ambiguous"
    # A place that names nothing: still the objects' ambiguity that is reported first.
    with pytest.raises(GroundingError, match="fits 2 objects"):
        ground_instruction(twin_cubes, "put the yellow cube in the bowl")


def test_look_alikes_the_task_does_not_all_send_to_the_place_stay_ambiguous():
    with build_scene("long_horizon", 6, robot="xarm6", register=False) as scene:
        assert scene.task.must_stay == ("yellow_lego_on_plate_0",)
        with pytest.raises(GroundingError, match=r"fits 2 objects") as raised:
            ground_instruction(scene, "pick up the yellow lego brick and place it in the yellow plate")
        assert set(raised.value.candidates) == {"yellow_lego_0", "yellow_lego_on_plate_0"}
        outside = ground_instruction(scene, "pick up the yellow lego brick outside the plates and place it in the "
                                            "yellow plate")
        assert outside.goals == (("yellow_lego_0", "plate_yellow"),) and outside.alike == ()
