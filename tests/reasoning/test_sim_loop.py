"""The reasoning loop on the simulated workcell with the ground-truth oracle as the model: RoboPIN's
spatial task end to end, and an injected malformed trace stopping the task before any motion. (The
long-horizon scenario runs over DDS in tests/ros/test_planner_long_horizon.py; history in the prompts
is checked with a scripted model in test_loop.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
from tests.reasoning.sim_stages import SimScriptedPickPlace, sim_stages

pytest.importorskip("pybullet")
pytestmark = pytest.mark.slow


@pytest.fixture
def spatial():
    from robopin.sim.scenarios import build_scene

    scene = build_scene("spatial", 0, world_name="reasoning-spatial")
    yield scene
    scene.close()


def oracle(scene, **errors):
    from robopin.vlm import make_backend

    return make_backend({"type": "oracle", "world": scene.world.name, "views": ["static", "wrist"], "errors": errors})


def test_spatial_task_succeeds_with_the_oracle(spatial):
    from robopin.sim.scenarios import check_success

    observer, projector = sim_stages(spatial)
    arm = SimScriptedPickPlace(spatial)
    loop = ReasoningLoop(ReasoningConfig(), oracle(spatial), observer, projector, arm)
    result = loop.run(TaskRequest(spatial.spec.instruction))
    assert result.success, result.message
    assert result.mode == "point" and result.steps_executed == 1
    assert [c[0] for c in arm.calls] == [spatial.task.goals[0].object]
    report = check_success(spatial)
    assert report.success, str(report)


def test_malformed_trace_stops_before_projection_and_motion(spatial):
    observer, projector = sim_stages(spatial)
    arm = SimScriptedPickPlace(spatial)
    q_before = spatial.world.joint_positions()
    loop = ReasoningLoop(ReasoningConfig(), oracle(spatial, malformed_tag_probability=1.0), observer, projector, arm)
    result = loop.run(TaskRequest(spatial.spec.instruction))
    assert (result.success, result.reason) == (False, "invalid_reasoning")
    assert "bad_anchor" in result.details
    assert arm.calls == []
    assert np.allclose(spatial.world.joint_positions(), q_before, atol=1e-6)


def test_an_instruction_the_scene_cannot_ground_is_refused_by_name_and_nothing_moves(spatial):
    observer, projector = sim_stages(spatial)
    arm = SimScriptedPickPlace(spatial)
    loop = ReasoningLoop(ReasoningConfig(), oracle(spatial), observer, projector, arm)
    result = loop.run(TaskRequest("put the banana on the red plate"))
    assert (result.success, result.reason) == (False, "model_declined")
    assert "'the banana'" in result.message and arm.calls == []


def test_the_oracle_carries_out_the_instruction_it_is_given_not_the_scenarios(spatial):
    # RoboPIN's prompt form (the banana test above uses our templates): the oracle reads either.
    from robopin.sim.scenarios import on_plate

    goal = spatial.task.goals[0]
    other = next(o for o in spatial.world.objects.values() if o.kind == "plate" and o.name != goal.target)
    observer, projector = sim_stages(spatial)
    arm = SimScriptedPickPlace(spatial)
    config = ReasoningConfig(prompt_template="pincot_suffix")
    loop = ReasoningLoop(config, oracle(spatial), observer, projector, arm)
    result = loop.run(TaskRequest(f"pick up the duck in front of two toys and place it on the {other.color} plate"))
    assert result.success, result.message
    assert on_plate(spatial.world, goal.object, other.name)[0]
