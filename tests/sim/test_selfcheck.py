"""The scripted ground-truth self-check solves every task: scenes are known solvable."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.sim.scripted import closing_yaw, pick_and_place
from robopin.sim.selfcheck import place_points, run_self_check
from robopin.sim.tasks import build_scene


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "seed"),
    [
        ("spatial", 0),
        ("spatial", 1),
        ("multi_view", 0),
        ("multi_view", 1),
        ("long_horizon", 0),
        ("sanity_cube", 0),
        ("sanity_tray", 0),
    ],
)
def test_self_check_solves_the_scene(scenario, seed):
    result = run_self_check(scenario, seed)
    assert result.success, f"{scenario} seed {seed}: {result.report}; {[o.message for o in result.outcomes]}"
    assert all(o.grasped for o in result.outcomes)


def test_success_needs_the_pick_and_place_to_happen():
    with build_scene("sanity_cube", 3, register=False) as scene:
        result_before = scene.world.object_center("object_0")
        outcome = pick_and_place(scene.world, "object_0", place_points(scene)["object_0"], home_q=scene.observe_q)
        assert outcome.grasped, outcome.message
        assert outcome.phases == ["approaching", "grasping", "lifting", "placing", "retreating"]
        moved = np.linalg.norm(scene.world.object_center("object_0")[:2] - result_before[:2])
        assert moved > 0.05


def test_place_points_spread_objects_sharing_a_plate():
    with build_scene("long_horizon", 0, register=False) as scene:
        points = place_points(scene)
        assert set(points) == {g.object for g in scene.task.goals}
        plate = scene.world.object("plate_yellow")
        center = scene.world.object_center("plate_yellow")
        values = list(points.values())
        for k, a in enumerate(values):
            assert np.linalg.norm(a[:2] - center[:2]) < plate.radius_m
            for b in values[k + 1 :]:
                assert np.linalg.norm(a[:2] - b[:2]) > 0.05


def test_grasp_closes_across_the_object_yaw():
    with build_scene("sanity_cube", 0, register=False) as scene:
        world = scene.world
        world.add_object("cube", "turned", [0.45, 0.25], yaw_rad=0.4, color="green")
        world.settle()
        # A cube's sides are equal, so the fingers close along its own x axis: its yaw.
        assert closing_yaw(world, "turned") == pytest.approx(0.4, abs=0.02)
