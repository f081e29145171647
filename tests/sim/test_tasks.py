"""Scenario files, seeded layouts and the success check on the final world state."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from robopin.sim.tasks import (
    LAYOUTS,
    WORKSPACE_MAX_RADIUS_M,
    LayoutError,
    ScenarioError,
    build_scene,
    check_success,
    get_scene,
    layout_reach_m,
    list_scenarios,
    load_scenario,
    on_plate,
    scenario_from_dict,
)

ROBOPIN_TASKS = {
    "spatial": "Pick up the duck in front of two toys and place it to the middle plate among plates.",
    "multi_view": "Pick up the duck behind two toys and place it to the plate in front of the two toys.",
    "long_horizon": "Pick up yellow objects located outside the plates and place into the yellow plate.",
}


def test_packaged_scenarios_include_robopins_three_tasks():
    names = list_scenarios()
    assert {"spatial", "multi_view", "long_horizon"} <= set(names)
    assert any(n.startswith("sanity") for n in names)
    for name, instruction in ROBOPIN_TASKS.items():
        spec = load_scenario(name)
        assert spec.instruction == instruction
        assert spec.task_type == name


def test_every_packaged_scenario_loads():
    for name in list_scenarios():
        spec = load_scenario(name)
        assert spec.name == name


def test_scenario_errors_name_the_bad_value(tmp_path):
    good = yaml.safe_load(load_scenario.__globals__["SCENARIO_DIR"].joinpath("spatial.yaml").read_text())
    with pytest.raises(ScenarioError, match="'flying'"):
        scenario_from_dict({**good, "task_type": "flying"})
    with pytest.raises(ScenarioError, match="'maze'"):
        scenario_from_dict({**good, "layout": "maze"})
    with pytest.raises(ScenarioError, match="colour_of_sky"):
        scenario_from_dict({**good, "colour_of_sky": "blue"})
    bad = dict(good)
    del bad["instruction"]
    with pytest.raises(ScenarioError, match="instruction"):
        scenario_from_dict(bad)
    with pytest.raises(ScenarioError, match="no scenario named 'nope'"):
        load_scenario("nope")
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump({**good, "name": "custom", "max_steps": 0}))
    with pytest.raises(ScenarioError, match="max_steps"):
        load_scenario(path)


@pytest.mark.parametrize("scenario", ["spatial", "multi_view", "long_horizon", "sanity_cube", "sanity_tray"])
@pytest.mark.parametrize("seed", [0, 7])
def test_layouts_start_unsolved_without_overlaps(scenario, seed):
    with build_scene(scenario, seed, register=False) as scene:
        world = scene.world
        assert scene.task.goals
        assert not check_success(scene).success
        for goal in scene.task.goals:
            assert not on_plate(world, goal.object, goal.target)[0]
        # Graspable objects do not start on top of each other (only on plates, where intended).
        movers = [o for o in world.objects.values() if o.graspable]
        for i, a in enumerate(movers):
            for b in movers[i + 1 :]:
                gap = np.linalg.norm(world.object_center(a.name)[:2] - world.object_center(b.name)[:2])
                assert gap > 0.04, (a.name, b.name)
        # Everything the task names is within the arm's reach.
        for goal in scene.task.goals:
            assert math.hypot(*world.object_center(goal.object)[:2]) < 0.75


def test_spatial_layout_relations_hold(spatial_scene):
    world, roles = spatial_scene.world, spatial_scene.task.roles
    toys = [world.object_center(roles["toy_a"]), world.object_center(roles["toy_b"])]
    target = world.object_center(roles["target"])
    other = world.object_center(roles["other_duck"])
    # "in front of" = nearer the static camera at +x, and between the toys sideways.
    assert target[0] > max(t[0] for t in toys) + 0.08
    assert min(t[1] for t in toys) - 0.03 < target[1] < max(t[1] for t in toys) + 0.03
    assert not (other[0] > max(t[0] for t in toys) + 0.08 and abs(other[1] - target[1]) < 0.1)
    plates = [world.object_center(roles[k]) for k in ("plate_first", "place", "plate_last")]
    assert plates[0][0] < plates[1][0] < plates[2][0]


@pytest.mark.parametrize("task", ["spatial", "multi_view", "long_horizon"])
def test_ducks_rest_on_their_base(task):
    # pybullet_data's duck.obj is modelled y-up; the catalogue turns it so the mesh's y axis ends vertical.
    for seed in range(4):
        with build_scene(task, seed, robot="panda", register=False) as scene:
            ducks = [name for name, obj in scene.world.objects.items() if obj.kind == "duck"]
            for name in ducks:
                assert scene.world.object_pose(name)[2, 1] > 0.95, (task, seed, name)
                low, high = scene.world.object_aabb(name)
                # 5.0 cm tall standing (4.3 cm lying) plus pybullet's collision margin on both sides of the box.
                assert 0.054 < high[2] - low[2] < 0.062, (task, seed, name, high[2] - low[2])


@pytest.mark.parametrize(("robot", "seed"), [("panda", s) for s in range(5)] + [("xarm6", s) for s in range(3)])
def test_multi_view_target_is_hidden_from_the_static_camera(robot, seed):
    # Moved within the xArm 6's shorter reach, the layout must still hide the duck from the static view.
    with build_scene("multi_view", seed, robot=robot, register=False) as scene:
        body = scene.world.object(scene.task.roles["target"]).body_id
        static = int(np.sum(scene.world.render("static").segmentation == body))
        wrist = int(np.sum(scene.world.render("wrist").segmentation == body))
        other = scene.world.object(scene.task.roles["other_duck"]).body_id
        assert wrist > 1000
        assert static < 0.2 * wrist, (static, wrist)
        assert int(np.sum(scene.world.render("static").segmentation == other)) > 500


def test_success_check_accepts_the_goal_state_and_flags_violations(multi_view_scene):
    import pybullet as p

    scene = multi_view_scene
    world = scene.world
    goal = scene.task.goals[0]
    obj = world.object(goal.object)
    saved = p.getBasePositionAndOrientation(obj.body_id, physicsClientId=world.client)
    plate = world.object_center(goal.target)
    try:
        p.resetBasePositionAndOrientation(
            obj.body_id, [plate[0], plate[1], 0.06], saved[1], physicsClientId=world.client
        )
        world.settle()
        report = check_success(scene)
        assert report.success, str(report)
        # Moving the duck that must stay breaks success even with the goal met.
        other = world.object(scene.task.must_stay[0])
        other_saved = p.getBasePositionAndOrientation(other.body_id, physicsClientId=world.client)
        p.resetBasePositionAndOrientation(
            other.body_id, [0.35, -0.3, 0.05], other_saved[1], physicsClientId=world.client
        )
        world.settle()
        report = check_success(scene)
        assert not report.success
        assert other.name in str(report)
        p.resetBasePositionAndOrientation(other.body_id, *other_saved, physicsClientId=world.client)
    finally:
        p.resetBasePositionAndOrientation(obj.body_id, *saved, physicsClientId=world.client)
        world.settle()
    assert not check_success(scene).success


def test_registered_scenes_are_found_by_world_name(multi_view_scene):
    assert get_scene(multi_view_scene.world.name) is multi_view_scene
    with pytest.raises(ScenarioError, match="no scene registered"):
        get_scene("no-such-world")


def test_layout_error_when_nothing_fits():
    spec = load_scenario("long_horizon")
    crowded = scenario_from_dict(
        {
            "name": "crowded",
            "task_type": "long_horizon",
            "instruction": spec.instruction,
            "layout": "long_horizon",
            "layout_params": {**spec.layout_params, "yellow_outside": [40, 40]},
        }
    )
    with pytest.raises(LayoutError, match="crowded"):
        build_scene(crowded, 0, register=False, max_layout_attempts=2)


@pytest.mark.parametrize("robot", ["panda", "xarm6"])
@pytest.mark.parametrize("scenario", ["spatial", "multi_view", "long_horizon"])
def test_every_generated_layout_keeps_what_the_task_names_inside_the_robots_reach(scenario, robot):
    # Regression: the multi-view plate lay at x = 0.72 m, beyond the xArm 6's top-down reach (ik_fail).
    spec = load_scenario(scenario)
    reach = layout_reach_m(robot)
    for seed in range(25):
        try:
            layout = LAYOUTS[spec.layout](np.random.default_rng([seed, 0]), spec.layout_params, reach)
        except LayoutError:
            continue  # build_scene redraws; what it keeps is checked below for the ones that fit
        centres = {p.name: p.xy for p in layout.placements}
        named = {name for goal in layout.goals for name in (goal.object, goal.target)}
        for name in named:
            assert math.hypot(*centres[name]) <= reach + 1e-9, (seed, name, centres[name], reach)


def test_layout_reach_is_the_shorter_of_framing_and_robot_reach():
    assert layout_reach_m("xarm6") < layout_reach_m("panda") <= WORKSPACE_MAX_RADIUS_M


@pytest.mark.slow
@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_sim_robot_reach_is_reachable_top_down_by_the_planner(robot):
    # The reach the layouts use must hold for the planner's own IK at every height a pick or a place
    # passes through (grasp, lift, pre-place), a little off the straight-ahead direction too.
    from robopin.motion.grasps import top_down_rotation
    from robopin.motion.robot import RobotModel, robot_spec

    model = RobotModel(robot_spec(robot))
    reach = layout_reach_m(robot) + 0.02  # place points may lie off the plate centre by this much
    for angle in (-0.2, 0.0, 0.2):
        for z in (0.02, 0.08, 0.16):
            T = np.eye(4)
            T[:3, :3] = top_down_rotation(angle)
            T[:3, 3] = [reach * math.cos(angle), reach * math.sin(angle), z]
            model.reseed(0)
            assert model.inverse_kinematics(T, model.home, restarts=20) is not None, (robot, angle, z)
