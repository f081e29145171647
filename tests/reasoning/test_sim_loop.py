"""The reasoning loop on the simulated workcell with the ground-truth oracle as the model: RoboPIN's
spatial task end to end, and an injected malformed trace stopping the task before any motion. (The
long-horizon scenario runs over DDS in tests/ros/test_task_node_long_horizon.py; history in the prompts
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
    from robopin.sim.tasks import build_scene

    scene = build_scene("spatial", 0, world_name="reasoning-spatial")
    yield scene
    scene.close()


def oracle(scene, **errors):
    from robopin.vlm import make_backend

    return make_backend({"type": "oracle", "world": scene.world.name, "views": ["static", "wrist"], "errors": errors})


def test_spatial_task_succeeds_with_the_oracle(spatial):
    from robopin.sim.tasks import check_success

    observer, projector = sim_stages(spatial)
    arm = SimScriptedPickPlace(spatial)
    loop = ReasoningLoop(ReasoningConfig(), oracle(spatial), observer, projector, arm)
    result = loop.run(TaskRequest(spatial.spec.instruction))
    assert result.success, result.message
    assert result.mode == "point" and result.steps_executed == 1
    assert [c[0] for c in arm.calls] == [spatial.task.goals[0].object]
    report = check_success(spatial)
    assert report.success, str(report)


def test_with_the_simulators_ground_truth_each_record_measures_pin_and_answer_accuracy(spatial):
    from robopin.reasoning.ground_truth import make_ground_truth

    observer, projector = sim_stages(spatial)
    truth = make_ground_truth({"type": "sim", "world": spatial.world.name})
    loop = ReasoningLoop(ReasoningConfig(), oracle(spatial), observer, projector, SimScriptedPickPlace(spatial),
                         ground_truth=truth)
    result = loop.run(TaskRequest(spatial.spec.instruction, dry_run=True))
    assert result.success, result.message
    record = result.reasoning[0]
    assert (record.metrics["pin_accuracy"], record.metrics["answer_accuracy"]) == (1.0, 1.0)
    plain = ReasoningLoop(ReasoningConfig(), oracle(spatial), observer, projector, SimScriptedPickPlace(spatial))
    measured = plain.run(TaskRequest(spatial.spec.instruction, dry_run=True)).reasoning[0].metrics
    assert "pin_accuracy" not in measured and "format" in measured  # no ground truth: not measured


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
    assert "does not show" in result.message
    # Two ducks: the refusal says the reference is ambiguous and names both, in words (no tag markup).
    result = loop.run(TaskRequest("put the duck on the red plate"))
    assert (result.success, result.reason) == (False, "model_declined")
    assert "'the duck' fits 2 objects (duck_0, duck_1): say which one" in result.message, result.message
    assert "does not show" not in result.message and "<obj" not in result.message and arm.calls == []
    # An operator's instruction may hold '<' or '>' (an arrow): the refusal quotes it without the tag markers
    # PinCoT's free text may not hold, instead of ending the task with an internal error.
    result = loop.run(TaskRequest("banana -> <red plate>"))
    assert (result.success, result.reason) == (False, "model_declined"), result.message
    assert arm.calls == []


def test_the_oracle_carries_out_the_instruction_it_is_given_not_the_scenarios(spatial):
    # RoboPIN's prompt form (the banana test above uses our templates): the oracle reads either.
    from robopin.sim.tasks import on_plate

    goal = spatial.task.goals[0]
    other = next(o for o in spatial.world.objects.values() if o.kind == "plate" and o.name != goal.target)
    observer, projector = sim_stages(spatial)
    arm = SimScriptedPickPlace(spatial)
    config = ReasoningConfig(prompt_template="pincot_suffix")
    loop = ReasoningLoop(config, oracle(spatial), observer, projector, arm)
    result = loop.run(TaskRequest(f"pick up the duck in front of two toys and place it on the {other.color} plate"))
    assert result.success, result.message
    assert on_plate(spatial.world, goal.object, other.name)[0]


class _EdgePinnedOracle:
    """The oracle, with its wrist pin of the pick object moved onto that object's depth edge in the
    wrist view (where a real model's pin lands often enough: on the outline). Everything else is the
    oracle's text as written, so the static view still pins the same object."""

    def __init__(self, scene, backend) -> None:
        self.scene, self.backend = scene, backend
        self.point_convention = backend.point_convention
        self.moved: tuple[str, str] | None = None

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate(self, messages, params=None):
        import dataclasses
        import re

        from robopin.geometry import RefusalReason, robust_depth
        from robopin.vlm.base import Sample
        from robopin.vlm.points import PointConvention

        result = self.backend.generate(messages, params)
        text = result.samples[0].text
        answer = re.search(r'"point_2d": \[(\d+), (\d+)\], "label": "[^"]*", "id": "(obj_\d+)", "img_idx": 1', text)
        assert answer is not None, "the oracle's pick is expected in the wrist view here"
        x, y, anchor_id = int(answer[1]), int(answer[2]), answer[3]
        assert f'id="{anchor_id}" img_idx="0"' in text, "the static view must pin the same object"
        view = self.scene.world.render("wrist")
        depth = view.depth_m.astype(np.float32)
        depth[depth <= 0] = np.nan
        height, width = depth.shape
        norm = PointConvention("norm1000")
        for step in range(1, 200):  # walk away from the pin until the point straddles the outline
            for dx, dy in ((step, 0), (-step, 0), (0, step), (0, -step)):
                u, v = norm.to_pixels([x + dx, y + dy], width, height)
                if not (0 <= u < width and 0 <= v < height):
                    continue
                if robust_depth(depth, float(u), float(v)).reason is RefusalReason.DEPTH_EDGE_AMBIGUOUS:
                    old, new = f"[{x}, {y}]", f"[{x + dx}, {y + dy}]"
                    assert text.count(old) == 2  # the wrist anchor and the answer point
                    self.moved = (old, new)
                    edited = text.replace(old, new)
                    return dataclasses.replace(result, samples=(Sample(edited),))
        raise AssertionError("no depth edge near the wrist pin")


@pytest.fixture
def multi_view_xarm6():
    from robopin.sim.tasks import build_scene

    scene = build_scene("multi_view", 0, world_name="reasoning-multi-view-xarm6", robot="xarm6")
    yield scene
    scene.close()


def test_a_wrist_pin_on_a_depth_edge_falls_back_to_the_static_pin_of_the_same_object(multi_view_xarm6):
    scene = multi_view_xarm6
    goal = scene.task.goals[0].object
    observer, projector = sim_stages(scene)
    model = _EdgePinnedOracle(scene, oracle(scene))
    # Without the other views' pins the projection has only the wrist pin, on the edge: the step ends.
    alone = ReasoningLoop(
        ReasoningConfig(cross_view_check=False), model, observer, projector, SimScriptedPickPlace(scene)
    )
    result = alone.run(TaskRequest(scene.spec.instruction, dry_run=True))
    assert (result.success, result.reason) == (False, "depth_edge_ambiguous")
    # Shipped default: the static view's pin of the same ID stands in, and the result says so.
    arm = SimScriptedPickPlace(scene)
    loop = ReasoningLoop(ReasoningConfig(), model, observer, projector, arm)
    result = loop.run(TaskRequest(scene.spec.instruction, dry_run=True))
    assert result.success, result.message
    (step,) = result.steps
    pick = step.targets[0]
    assert pick.source_view == "static" and pick.fallback_from == "wrist: depth_edge_ambiguous"
    assert any("wrist pin" in note and "depth_edge_ambiguous" in note for note in step.notes)
    assert "depth_edge_ambiguous" in result.message
    assert [name for name, _, _ in arm.calls] == [goal]  # the static pin is on the right duck
