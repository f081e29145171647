"""The reasoning loop with a scripted model (standing in for the GPU model), a synthetic tabletop with
real projection, and a recording arm: every mode, every named refusal, dry run and cancel."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from robopin.geometry import WorkspaceBox
from robopin.reasoning import (
    MotionOutcome,
    Reasoning,
    ReasoningConfig,
    ReasoningConfigError,
    ReasoningLoop,
    TaskRequest,
    register_reasoner,
)
from robopin.vlm.base import SamplingParams
from robopin.vlm.errors import VLMConnectionError, VLMTimeoutError
from tests.reasoning.stages import (
    DONE_TEXT,
    RecordingArm,
    Tabletop,
    distance,
    pincot_text,
    scripted,
    table_point,
    tabletop_stages,
)

PICK_PX, PLACE_PX = (200.0, 240.0), (450.0, 300.0)


def make_loop(backend, arm=None, tabletop=None, **config):
    tabletop, observer, projector = tabletop_stages(tabletop)
    arm = arm or RecordingArm()
    loop = ReasoningLoop(ReasoningConfig(**config), backend, observer, projector, arm)
    return loop, arm, tabletop


def run(loop, instruction="put the duck on the red plate", **request):
    stages: list[tuple[str, int]] = []
    result = loop.run(TaskRequest(instruction, **request), on_stage=lambda s, k, _d: stages.append((s, k)))
    return result, stages


def test_point_mode_projects_both_points_and_picks_and_places_once():
    loop, arm, _ = make_loop(scripted(pincot_text(PICK_PX, PLACE_PX)))
    result, stages = run(loop, mode="point")
    assert result.success, result.message
    assert result.mode == "point" and result.steps_executed == 1 and len(arm.calls) == 1
    call = arm.calls[0]
    # The model wrote 0-1000 points, rounded: within a pixel (2 mm at 1 m) of the true table points.
    assert distance(call.pick.point, table_point(*PICK_PX)) < 0.003
    assert distance(call.place.point, table_point(*PLACE_PX)) < 0.003
    assert (call.pick.id, call.pick.name, call.place.id) == ("obj_01", "duck", "space_01")
    assert not call.dry_run
    assert [s for s, _ in stages] == [
        "observing", "reasoning", "validating", "projecting", "planning", "planning", "executing", "done",
    ]  # fmt: skip
    record = result.reasoning[0]
    assert record.valid and record.kind == "pointing" and record.trace is not None
    assert record.view_names == ("static",) and record.image_sizes == ((640, 480),)
    assert {"observe", "model", "reason_overhead", "project", "motion"} <= set(result.steps[0].timings_s)


def test_pointing_prompt_carries_the_instruction_and_the_view():
    backend = scripted(pincot_text())
    loop, _, _ = make_loop(backend, view_roles={"static": "camera above the table"})
    run(loop, "put the duck on the red plate", mode="point")
    prompt = backend.prompt(0)
    assert "put the duck on the red plate" in prompt and "camera above the table" in prompt
    assert len(backend.requests[0][-1].images) == 1


def test_dry_run_plans_but_never_moves():
    loop, arm, _ = make_loop(scripted(pincot_text()))
    result, stages = run(loop, mode="point", dry_run=True)
    assert result.success and result.dry_run
    assert [c.dry_run for c in arm.calls] == [True]
    assert "executing" not in [s for s, _ in stages]


@pytest.mark.parametrize(
    ("text", "reason", "code"),
    [
        ("I would pick the duck.", "invalid_reasoning", "missing_think"),
        (
            '<think><obj name="duck" id="obj_01" img_idx="0" point="[300, 500]"> and '
            '<obj name="cup" id="obj_01" img_idx="0" point="[310, 505]"></think>'
            '<answer>[{"point_2d": [300, 500], "label": "pick"}, {"point_2d": [700, 600], "label": "place"}]</answer>',
            "id_conflict",
            "id_name_conflict",
        ),
        (
            '<think><obj name="duck" id="obj_01" img_idx="0" point="[300, 500]"> goes to obj_07.</think>'
            '<answer>[{"point_2d": [300, 500]}, {"point_2d": [700, 600]}]</answer>',
            "invalid_reasoning",
            "unknown_id",
        ),
    ],
)
def test_invalid_reasoning_ends_the_task_with_its_named_reason_and_no_motion(text, reason, code):
    loop, arm, _ = make_loop(scripted(text))
    result, stages = run(loop, mode="point")
    assert not result.success and result.reason == reason
    assert code in result.details
    assert arm.calls == [] and "projecting" not in [s for s, _ in stages]
    assert not result.reasoning[0].valid and code in [e.code for e in result.reasoning[0].errors]


def test_answer_without_a_place_point_is_refused():
    text = (
        '<think><obj name="duck" id="obj_01" img_idx="0" point="[300, 500]"></think>'
        '<answer>[{"point_2d": [300, 500], "label": "pick", "id": "obj_01"}]</answer>'
    )
    loop, arm, _ = make_loop(scripted(text))
    result, _ = run(loop, mode="point")
    assert (result.success, result.reason, arm.calls) == (False, "invalid_answer", [])


def test_a_point_on_a_depth_hole_is_refused_as_no_depth_before_any_motion():
    tabletop = Tabletop(holes=[(PICK_PX[0], PICK_PX[1], 25.0)])
    loop, arm, _ = make_loop(scripted(pincot_text(PICK_PX, PLACE_PX)), tabletop=tabletop)
    result, _ = run(loop, mode="point")
    assert (result.success, result.reason) == (False, "no_depth")
    assert "pick target obj_01" in result.message
    assert arm.calls == []


def test_a_target_outside_the_workspace_is_refused_before_any_motion():
    place = table_point(*PLACE_PX)
    # The box ends 5 cm short of the place point (along base y), so only the place target is outside.
    workspace = WorkspaceBox((0.2, float(place[1]) + 0.05, -0.05), (0.8, 0.5, 0.5))
    loop, arm, _ = make_loop(scripted(pincot_text(PICK_PX, PLACE_PX)), workspace=workspace)
    assert workspace.contains(table_point(*PICK_PX))
    result, _ = run(loop, mode="point")
    assert (result.success, result.reason) == (False, "outside_workspace")
    assert result.message.startswith("place target space_01")
    assert arm.calls == []


@pytest.mark.parametrize(
    ("error", "reason"),
    [(VLMTimeoutError("no answer within 30 s"), "vlm_timeout"), (VLMConnectionError("refused"), "vlm_unavailable")],
)
def test_model_failures_are_named(error, reason):
    loop, arm, _ = make_loop(scripted(error))
    result, _ = run(loop, mode="point")
    assert (result.success, result.reason, arm.calls) == (False, reason, [])
    assert str(error) in result.message


@pytest.mark.parametrize("instruction", ["   ", "x" * 5000])
def test_bad_instructions_are_refused_without_asking_the_model(instruction):
    backend = scripted(pincot_text())
    loop, _, tabletop = make_loop(backend)
    result, _ = run(loop, instruction)
    assert (result.success, result.reason) == (False, "invalid_instruction")
    assert backend.requests == [] and tabletop.observations == 0


def test_unknown_mode_is_refused():
    loop, _, _ = make_loop(scripted(pincot_text()))
    result, _ = run(loop, mode="dance")
    assert (result.success, result.reason) == (False, "invalid_mode")
    assert "'dance'" in result.message


def test_motion_status_is_passed_through():
    arm = RecordingArm([MotionOutcome(False, "ik_fail", "no IK solution for the grasp")])
    loop, _, _ = make_loop(scripted(pincot_text()), arm=arm)
    result, _ = run(loop, mode="point")
    assert (result.success, result.reason, result.message) == (False, "ik_fail", "no IK solution for the grasp")


def test_cancel_during_motion_stops_the_arm_and_ends_as_canceled():
    arm = RecordingArm(duration_s=5.0)
    loop, _, _ = make_loop(scripted(pincot_text()), arm=arm)
    stop = threading.Event()

    def on_stage(stage, _step, _detail):
        if stage == "executing":
            threading.Timer(0.05, stop.set).start()

    result = loop.run(TaskRequest("put the duck on the red plate", "point"), should_stop=stop.is_set, on_stage=on_stage)
    assert (result.success, result.reason) == (False, "canceled")
    assert arm.stopped


def test_cancel_before_reasoning_never_asks_the_model():
    backend = scripted(pincot_text())
    loop, arm, _ = make_loop(backend)
    result = loop.run(TaskRequest("put the duck on the red plate"), should_stop=lambda: True)
    assert (result.reason, backend.requests, arm.calls) == ("canceled", [], [])


def test_long_horizon_point_loop_carries_history_until_done():
    texts = [pincot_text((150.0, 200.0), PLACE_PX), pincot_text((300.0, 100.0), PLACE_PX, pick_name="cube"), DONE_TEXT]
    backend = scripted(*texts)
    loop, arm, tabletop = make_loop(backend)
    result, _ = run(loop, "put all the yellow objects on the red plate")
    assert result.success and result.mode == "point", result.message
    assert result.steps_executed == 2 and len(arm.calls) == 2 and tabletop.observations == 3
    # Step 3's prompt lists both earlier steps, in order.
    third = backend.prompt(2)
    assert "1. pick obj_01 duck and place it at space_01 red plate -> done" in third
    assert "2. pick obj_01 cube" in third
    assert "(none yet)" in backend.prompt(0)
    assert [r.kind for r in result.reasoning] == ["step", "step", "step"]


def test_long_horizon_loop_stops_at_max_steps():
    loop, arm, _ = make_loop(scripted(pincot_text()))
    result, _ = run(loop, "put all the yellow objects on the red plate", max_steps=2)
    assert (result.success, result.reason, len(arm.calls)) == (False, "max_steps_reached", 2)


def test_long_horizon_dry_run_plans_one_step_only():
    loop, arm, _ = make_loop(scripted(pincot_text()))
    result, _ = run(loop, "put all the yellow objects on the red plate", dry_run=True)
    assert result.success and len(arm.calls) == 1 and arm.calls[0].dry_run


def test_subtask_mode_grounds_each_instruction_and_shows_the_previous_response():
    first = "The duck is not on the plate yet.\nInstruction: pick up the duck and place it on the red plate"
    texts = [first, pincot_text(), "The duck now sits on the plate.\nInstruction: done"]
    backend = scripted(*texts)
    loop, arm, _ = make_loop(backend)
    result, _ = run(loop, "tidy the duck away", mode="subtask")
    assert result.success, result.message
    assert len(arm.calls) == 1
    assert [r.kind for r in result.reasoning] == ["subtask", "pointing", "subtask"]
    assert result.reasoning[0].answer == "pick up the duck and place it on the red plate"
    # The grounding query asks where to act for the subtask instruction, not the whole goal.
    assert "Task: pick up the duck and place it on the red plate" in backend.prompt(1)
    # R^3: the next step sees the previous response and is told to judge success from the images.
    third = backend.prompt(2)
    assert first in third and "must be judged from the current images" in third
    assert "(none: this is the first step)" in backend.prompt(0)


def test_subtask_outside_the_skill_library_is_refused():
    loop, arm, _ = make_loop(scripted("Reasoning.\nInstruction: juggle the duck"))
    result, _ = run(loop, "tidy the duck away", mode="subtask")
    assert (result.success, result.reason, arm.calls) == (False, "invalid_subtask", [])
    assert "instruction_not_in_grammar" in result.details


ACTIONS = {1: "pick up the duck and place it on the red plate", 2: "pick up the cube and place it on the red plate"}


def plan_text(*ids: int) -> str:
    return json.dumps(
        {
            "visual_state_description": "a duck and a cube beside a red plate",
            "reasoning_and_reflection": "both must go onto the plate",
            "language_plan": "move the duck, then the cube",
            "executable_plan": [{"action_id": i, "action_name": ACTIONS[i]} for i in ids],
        }
    )


def test_plan_mode_executes_each_action_with_reobservation():
    backend = scripted(plan_text(1, 2), pincot_text(), pincot_text((300.0, 100.0), PLACE_PX, pick_name="cube"))
    loop, arm, tabletop = make_loop(backend, actions=ACTIONS)
    result, _ = run(loop, "put the duck and the cube on the red plate", mode="plan")
    assert result.success, result.message
    assert len(arm.calls) == 2 and tabletop.observations == 2
    assert [r.kind for r in result.reasoning] == ["plan", "pointing", "pointing"]
    assert "Task: pick up the cube and place it on the red plate" in backend.prompt(2)
    assert "1: pick up the duck and place it on the red plate" in backend.prompt(0)


def test_plan_with_an_unknown_action_is_refused_before_motion():
    bad = json.loads(plan_text(1))
    bad["executable_plan"].append({"action_id": 9, "action_name": "fly"})
    loop, arm, _ = make_loop(scripted(json.dumps(bad)), actions=ACTIONS)
    result, _ = run(loop, "put the duck on the red plate", mode="plan")
    assert (result.success, result.reason, arm.calls) == (False, "invalid_plan", [])
    assert "unknown_action" in result.details


def test_plan_mode_without_an_action_dictionary_is_an_invalid_mode():
    loop, _, _ = make_loop(scripted(plan_text(1)))
    result, _ = run(loop, mode="plan")
    assert (result.success, result.reason) == (False, "invalid_mode")


def test_auto_mode_uses_configured_long_horizon_mode():
    first = "Reasoning.\nInstruction: pick up the duck and place it on the red plate"
    backend = scripted(first, pincot_text(), "Instruction: done")
    loop, _, _ = make_loop(backend, long_horizon_mode="subtask")
    result, _ = run(loop, "put all the toys on the red plate")
    assert result.success and result.mode == "subtask"
    single, _, _ = make_loop(scripted(pincot_text()), long_horizon_mode="subtask")
    assert run(single, "put the duck on the red plate")[0].mode == "point"


def test_a_registered_reasoner_replaces_the_reason_stage_by_configuration():
    """How E-TTS plugs in: sample several answers, keep the first valid one."""

    class FirstValid:
        def __init__(self, settings, backend):
            self.backend, self.n = backend, int(settings["n"])

        def reason(self, query):
            result = self.backend.generate(list(query.messages), SamplingParams(n=self.n))
            texts = [s.text for s in result.samples]
            decisions = [query.interpret(t) for t in texts]
            best = next((i for i, d in enumerate(decisions) if d.valid), 0)
            return Reasoning(texts[best], decisions[best], result.model, 0.0, candidates=tuple(texts))

    register_reasoner("first_valid_test", FirstValid)
    backend = scripted(("not pincot", pincot_text()))
    loop, arm, _ = make_loop(backend, reasoner={"type": "first_valid_test", "n": 2})
    assert isinstance(loop.reasoner, FirstValid)
    result, _ = run(loop, mode="point")
    assert result.success and len(arm.calls) == 1
    assert result.reasoning[0].candidates == 2 and result.reasoning[0].valid


def test_unknown_reasoner_type_fails_at_construction_naming_it():
    with pytest.raises(ReasoningConfigError, match="'nope'"):
        make_loop(scripted(pincot_text()), reasoner={"type": "nope"})


def test_multi_view_answer_sends_other_view_anchors_for_the_agreement_check():
    from robopin.reasoning import Observation, interpret_pointing
    from robopin.vlm.base import ViewImage

    image = np.zeros((480, 640, 3), dtype=np.uint8)
    observation = Observation((ViewImage(image, "static", 0), ViewImage(image, "wrist", 1)), 0.0)
    text = (
        '<think><obj name="duck" id="obj_01" img_idx="0" point="[500, 500]"> is also '
        '<obj name="duck" id="obj_01" img_idx="1" point="[250, 750]">; plate '
        '<space name="plate" id="space_01" img_idx="0" point="[800, 200]">.</think>'
        '<answer>[{"point_2d": [250, 750], "label": "pick", "id": "obj_01", "img_idx": 1}, '
        '{"point_2d": [800, 200], "label": "place", "id": "space_01", "img_idx": 0}]</answer>'
    )
    decision = interpret_pointing(text, observation)
    assert decision.valid
    assert (decision.pick.img_idx, decision.pick.u, decision.pick.v) == (1, 160.0, 360.0)
    assert [(s.id, s.img_idx, s.u, s.v) for s in decision.support] == [("obj_01", 0, 320.0, 240.0)]


def test_pixels_resized_models_are_converted_to_original_pixels():
    """Embodied-R1 / Qwen2.5-VL answer in pixels of the smart-resized image; the loop works in original pixels."""
    from robopin.reasoning import Observation, interpret_pointing
    from robopin.vlm.base import ViewImage
    from robopin.vlm.points import PointConvention

    convention = PointConvention("pixels_resized")
    frame_w, frame_h = convention.model_frame_size(640, 480)
    observation = Observation((ViewImage(np.zeros((480, 640, 3), dtype=np.uint8), "static", 0),), 0.0)
    pick = (frame_w * 0.25, frame_h * 0.5)
    place = (frame_w * 0.75, frame_h * 0.25)
    text = (
        "<think>the cube goes to the plate</think>"
        f'<answer>[{{"point_2d": [{pick[0]:.1f}, {pick[1]:.1f}], "label": "pick"}}, '
        f'{{"point_2d": [{place[0]:.1f}, {place[1]:.1f}], "label": "place"}}]</answer>'
    )
    decision = interpret_pointing(text, observation, convention)
    assert decision.valid, decision.refusal
    assert (decision.pick.u, decision.pick.v) == pytest.approx((160.0, 240.0), abs=0.5)
    assert (decision.place.u, decision.place.v) == pytest.approx((480.0, 120.0), abs=0.5)
