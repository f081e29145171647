"""Plan (RoboGPT-R1) and subtask (R^3) modes on the simulated long-horizon layouts whose goals hold look-alikes.

The shipped action dictionary names kinds ("the yellow cube outside the plates"); on the simulated xArm 6's
layout 8 two yellow cubes lie outside the plates (a yellow lego between them in the task's order), on its
layout 3 a ball then two yellow cubes. The loop runs with the oracle as the model, the simulator's ground truth
and a scripted pick-and-place: the plan repeats the cube's action, R^3 names a cube twice, and every yellow
object ends on the yellow plate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
from tests.reasoning.sim_stages import SimScriptedPickPlace, sim_stages
from tests.sim.helpers import unique_world_name

pytest.importorskip("pybullet")
pytestmark = pytest.mark.slow

SIM_SYSTEM = Path(__file__).resolve().parents[2] / "config" / "sim_xarm6.yaml"


def shipped_reasoning() -> ReasoningConfig:
    system = yaml.safe_load(SIM_SYSTEM.read_text())
    return ReasoningConfig.from_dict(dict(system["nodes"]["task_node"]["parameters"]["reasoning"]))


def _run(seed: int, mode: str):
    from robopin.reasoning.ground_truth import make_ground_truth
    from robopin.sim.tasks import build_scene, check_success
    from robopin.vlm import make_backend

    scene = build_scene("long_horizon", seed, robot="xarm6", world_name=unique_world_name("lh-lookalike"))
    try:
        observer, projector = sim_stages(scene)
        arm = SimScriptedPickPlace(scene)
        model = make_backend({"type": "oracle", "world": scene.world.name, "views": ["static", "wrist"]})
        truth = make_ground_truth({"type": "sim", "world": scene.world.name})
        loop = ReasoningLoop(shipped_reasoning(), model, observer, projector, arm, ground_truth=truth)
        result = loop.run(TaskRequest(scene.task.instruction, mode=mode))
        return scene.task, result, [name for name, _, _ in arm.calls], check_success(scene)
    finally:
        scene.close()


def test_plan_mode_repeats_the_cube_action_for_two_yellow_cubes():
    config = shipped_reasoning()
    task, result, picked, report = _run(8, "plan")
    assert [g.object for g in task.goals] == ["yellow_cube_0", "yellow_lego_1", "yellow_cube_2"]
    assert result.success, result.message
    assert result.mode == "plan" and result.steps_executed == 3
    plan = result.reasoning[0]
    assert plan.kind == "plan" and not plan.errors
    assert plan.metrics["plan_accuracy"] == 1.0  # against the reference plan, which repeats the action too
    assert result.message.endswith(str([config.actions[k] for k in (2, 3, 2)]))
    assert picked == ["yellow_cube_0", "yellow_lego_1", "yellow_cube_2"]
    assert report.success, str(report)


def test_subtask_mode_names_a_yellow_cube_twice():
    task, result, picked, report = _run(3, "subtask")
    assert [g.object for g in task.goals] == ["yellow_ball_0", "yellow_cube_1", "yellow_cube_2"]
    assert result.success, result.message
    assert result.mode == "subtask" and result.steps_executed == 3
    steps = [r.answer for r in result.reasoning if r.kind == "subtask"]
    assert len(steps) == 4 and steps[-1] == "done"
    assert steps[1] == steps[2] and "yellow cube" in steps[1]
    assert picked == ["yellow_ball_0", "yellow_cube_1", "yellow_cube_2"]
    assert report.success, str(report)
