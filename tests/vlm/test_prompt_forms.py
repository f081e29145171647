"""Each model's registry entry decides how its pointing request is worded, end to end over HTTP.

The reasoning loop runs against the repo's OpenAI-compatible stub server (it answers like vLLM);
the request the server received is read back. RoboPIN-4B must get RoboPIN's released form (the task
text + its answer-format suffix, images first, nothing else); a generic Qwen3-VL gets our templates.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from robopin.cli import main
from robopin.models import load_registry
from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
from robopin.reasoning.errors import ReasoningConfigError
from robopin.vlm import PINCOT_ANSWER_SUFFIX, make_backend
from robopin.vlm.points import PointConvention
from tests.reasoning.stages import RecordingArm, scripted, tabletop_stages

REGISTRY = Path(__file__).resolve().parents[2] / "models" / "registry.yaml"
INSTRUCTION = "Pick up the duck in front of two toys and place it to the middle plate among plates."


def _run(stub_server, model: str) -> dict:
    spec = load_registry(REGISTRY)[model]
    backend = make_backend(spec.vlm_config(stub_server.base_url))
    _, observer, projector = tabletop_stages()
    loop = ReasoningLoop(
        ReasoningConfig.from_dict(spec.reasoning_config()), backend, observer, projector, RecordingArm()
    )
    result = loop.run(TaskRequest(INSTRUCTION, mode="point"))
    # The stub answers with a report of what it decoded, not PinCoT: the task refuses, nothing moves.
    assert not result.success and result.reason == "invalid_reasoning"
    (request,) = stub_server.chat_requests()
    return request.body


def test_robopin_4b_request_carries_robopins_prompt_form(stub_server):
    body = _run(stub_server, "robopin-4b")
    (message,) = body["messages"]  # no system prompt: RoboPIN was trained without one
    assert message["role"] == "user"
    kinds = [part["type"] for part in message["content"]]
    assert kinds == ["image_url", "text"]  # the one view first, then the text (Qwen-VL order)
    assert message["content"][-1]["text"] == f"{INSTRUCTION} {PINCOT_ANSWER_SUFFIX}"


def test_a_generic_qwen3_vl_gets_the_reasoning_template(stub_server):
    body = _run(stub_server, "qwen3-vl-4b-instruct")
    text = body["messages"][-1]["content"][-1]["text"]
    assert f"Task: {INSTRUCTION}" in text and "Pinned Chain-of-Thought" in text
    assert "Points are normalized to 0-1000" in text and text.endswith(PINCOT_ANSWER_SUFFIX)


def test_models_show_prints_the_request_the_loop_builds():
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["models", "--registry", str(REGISTRY), "show", "robopin-4b"]) == 0
    text = out.getvalue()
    assert "request (pincot_suffix template, 2 view(s) at 640x480):" in text
    assert f"user: [image 0: static 640x480] [image 1: wrist 640x480] {INSTRUCTION} {PINCOT_ANSWER_SUFFIX}" in text


def test_pixels_of_the_original_image_are_a_point_convention():
    convention = PointConvention("pixels")
    assert convention.to_pixels([320.0, 100.5], 640, 480).tolist() == [320.0, 100.5]
    assert convention.from_pixels([641.0, 10.0], 640, 480).tolist() == [640.0, 10.0]  # clamped to the image


def test_pixel_answers_reach_the_arm_at_those_pixels():
    _, observer, projector = tabletop_stages()
    text = (
        '<think>I see the <obj name="duck" id="obj_01" img_idx="0" point="[200, 240]"> and the '
        '<space name="red plate" id="space_01" img_idx="0" point="[450, 300]">.</think>'
        '<answer>[{"point_2d": [200, 240], "label": "pick", "id": "obj_01", "img_idx": 0}, '
        '{"point_2d": [450, 300], "label": "place", "id": "space_01", "img_idx": 0}]</answer>'
    )
    backend = scripted(text, convention="pixels")
    arm = RecordingArm()
    result = ReasoningLoop(ReasoningConfig(), backend, observer, projector, arm).run(TaskRequest("put the duck"))
    assert result.success, result.message
    (call,) = arm.calls
    assert (call.pick.u, call.pick.v) == pytest.approx((200.0, 240.0), abs=1.0)
    assert (call.place.u, call.place.v) == pytest.approx((450.0, 300.0), abs=1.0)
    assert "image 0 is 640x480" in backend.prompt(0)  # the prompt names the pixel frame


def test_a_prompt_form_the_loop_cannot_write_is_refused_at_start():
    with pytest.raises(ReasoningConfigError, match="prompt_template"):
        ReasoningConfig.from_dict({"prompt_template": "embodied_r1"})
    with pytest.raises(ReasoningConfigError, match="answer_format must be 'pincot'"):
        ReasoningConfig.from_dict({"prompt_template": "pincot_suffix", "answer_format": "qwen_json"})
