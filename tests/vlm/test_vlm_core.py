"""Backend-independent parts of the VLM layer: point conventions, prompts, images, sampling, registry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.vlm.base import (
    ChatMessage,
    GenerationResult,
    Sample,
    SamplingParams,
    StructuredOutput,
    ViewImage,
    VLMBackend,
    VLMConfig,
    YesNoScore,
    backend_types,
    config_from_dict,
    make_backend,
    register_backend,
    validate_messages,
)
from robopin.vlm.contract import check_backend_contract
from robopin.vlm.errors import (
    BackendUnavailableError,
    UnknownBackendError,
    VLMConfigError,
    VLMRequestError,
)
from robopin.vlm.images import decode_data_url, encode_image, image_data_url
from robopin.vlm.points import PointConvention
from robopin.vlm.prompts import PINCOT_ANSWER_SUFFIX, build_messages, build_pincot_messages

# ---------------------------------------------------------------------------------------------
# Point conventions
# ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4000),
    st.integers(1, 4000),
    st.sampled_from([28, 32]),
)
def test_the_resized_frame_is_multiples_of_the_factor_within_the_pixel_budget(height, width, factor):
    min_pixels, max_pixels = factor * factor * 4, factor * factor * 1280
    convention = PointConvention("pixels_resized", factor, min_pixels, max_pixels)
    if max(height, width) / min(height, width) > 200:
        with pytest.raises(ValueError, match="aspect ratio"):
            convention.model_frame_size(width, height)
        return
    resized_w, resized_h = (int(side) for side in convention.model_frame_size(width, height))
    assert resized_h % factor == 0 and resized_w % factor == 0
    assert resized_h >= factor and resized_w >= factor
    assert resized_h * resized_w <= max_pixels or min(resized_h, resized_w) == factor
    assert resized_h * resized_w >= min_pixels
    # Both sides come from one common scale s, each off by less than one factor, unless a side was
    # raised to the one-factor floor: so |rw*h - rh*w| = |ew*h - eh*w| < factor*(h + w).
    if min(resized_h, resized_w) > factor:
        assert abs(resized_w * height - resized_h * width) <= factor * (height + width)


def test_the_resized_frame_of_a_640x480_camera_frame():
    assert PointConvention("pixels_resized", 28).model_frame_size(640, 480) == (644, 476)
    assert PointConvention("pixels_resized", 32).model_frame_size(640, 480) == (640, 480)
    assert PointConvention("norm1000").model_frame_size(640, 480) == (1000, 1000)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["norm1000", "pixels_resized"]),
    st.integers(32, 2000),
    st.integers(32, 2000),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_pixels_round_trip_through_every_convention(name, width, height, fx, fy):
    if max(width, height) / min(width, height) > 200:
        return
    convention = PointConvention(name)
    pixel = np.array([fx * width, fy * height])
    model_point = convention.from_pixels(pixel, width, height)
    assert convention.to_pixels(model_point, width, height) == pytest.approx(pixel, abs=1e-6)


def test_norm1000_follows_robopin_x_times_1000_over_w():
    convention = PointConvention("norm1000")
    assert convention.to_pixels([[500, 500], [0, 1000]], 640, 480).tolist() == [[320, 240], [0, 480]]
    assert convention.from_pixels([160, 120], 640, 480).tolist() == pytest.approx([250, 250])
    # The model's frame ends at 1000; a point past it is clamped onto the image border.
    assert convention.to_pixels([1200, -5], 640, 480).tolist() == [640, 0]


def test_pixels_resized_scales_by_the_smart_resized_frame():
    convention = PointConvention("pixels_resized", resize_factor=28)
    # 640x480 is fed to Qwen2.5-VL as 644x476.
    u, v = convention.to_pixels([644, 476], 640, 480)
    assert (u, v) == (640, 480)
    assert convention.to_pixels([322, 238], 640, 480).tolist() == pytest.approx([320, 240])


def test_embodied_r1_pixels_convert_back_to_original_pixels():
    # The model saw 644x476; its point (322, 238) is the image centre of the 640x480 original.
    resized = PointConvention("pixels_resized", resize_factor=28)
    assert resized.to_pixels([322, 238], 640, 480).tolist() == pytest.approx([320.0, 240.0])
    assert resized.from_pixels([320, 240], 640, 480).tolist() == pytest.approx([322.0, 238.0])
    assert PointConvention("norm1000").to_pixels([500, 500], 640, 480).tolist() == [320.0, 240.0]
    assert PointConvention("norm1000").from_pixels([320, 240], 640, 480).tolist() == pytest.approx([500.0, 500.0])
    assert PointConvention("pixels").to_pixels([320, 240], 640, 480).tolist() == [320.0, 240.0]
    assert PointConvention("pixels").from_pixels([320, 240], 640, 480).tolist() == [320.0, 240.0]


def test_bad_point_convention_values_are_named():
    with pytest.raises(VLMConfigError, match="'pixel'"):
        PointConvention("pixel")  # type: ignore[arg-type]
    with pytest.raises(VLMConfigError, match="min_pixels"):
        PointConvention("pixels_resized", min_pixels=10, max_pixels=5)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 2\)"):
        PointConvention().to_pixels([1, 2, 3], 10, 10)


# ---------------------------------------------------------------------------------------------
# Prompts and messages
# ---------------------------------------------------------------------------------------------


def test_pincot_prompt_puts_views_in_img_idx_order_then_instruction_and_suffix(make_view):
    wrist, static = make_view(64, 48, "wrist", 1), make_view(64, 48, "static", 0)
    messages = build_pincot_messages("  put the cup on the plate ", [wrist, static])
    assert len(messages) == 1
    parts = messages[0].parts
    assert parts[0] is static and parts[1] is wrist
    assert parts[2] == f"put the cup on the plate {PINCOT_ANSWER_SUFFIX}"


def test_pincot_prompt_options_label_views_and_keep_history(make_view):
    history = [ChatMessage("user", ("step 1",)), ChatMessage("assistant", ("<think>…</think>",))]
    messages = build_pincot_messages(
        "next step",
        [make_view(64, 48, "static", 0), make_view(64, 48, "wrist", 1)],
        system_prompt="You are a robot.",
        label_views=True,
        history=history,
    )
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    texts = [p for p in messages[-1].parts if isinstance(p, str)]
    assert texts[:2] == ["Image 0 (static):", "Image 1 (wrist):"]


@pytest.mark.parametrize(
    ("instruction", "indices", "fragment"),
    [
        ("", (0,), "empty"),
        ("x" * 5000, (0,), "5000 characters"),
        (42, (0,), "must be text"),
        ("go", (0, 2), r"0\.\.1 once each"),
        ("go", (0, 0), r"0\.\.1 once each"),
        ("go", (), "at least one view"),
    ],
)
def test_bad_pincot_queries_are_refused(make_view, instruction, indices, fragment):
    views = [make_view(16, 16, f"v{i}", index) for i, index in enumerate(indices)]
    with pytest.raises(VLMRequestError, match=fragment):
        build_pincot_messages(instruction, views)


def test_a_pincot_layer_prompt_goes_after_the_views_unchanged(make_view):
    from robopin.pincot.prompts import pointing_prompt

    views = [make_view(16, 16, "static", 0), make_view(16, 16, "wrist", 1)]
    text = pointing_prompt("put the cup on the plate", ["static", "wrist"])
    parts = build_messages(text, views)[0].parts
    assert parts == (views[0], views[1], text)
    with pytest.raises(VLMRequestError, match="non-empty text"):
        build_messages("  ", views)


def test_duplicate_view_names_and_images_outside_user_turns_are_refused(make_view):
    with pytest.raises(VLMRequestError, match="duplicates"):
        build_pincot_messages("go", [make_view(16, 16, "cam", 0), make_view(16, 16, "cam", 1)])
    with pytest.raises(VLMRequestError, match="only allowed in user messages"):
        ChatMessage("assistant", (make_view(16, 16, "cam", 0),))
    with pytest.raises(VLMRequestError, match="role"):
        ChatMessage("robot", ("hi",))  # type: ignore[arg-type]
    with pytest.raises(VLMRequestError, match="must not be empty"):
        validate_messages([])


def test_structured_output_is_validated():
    assert StructuredOutput("json", {"type": "object"}).kind == "json"
    with pytest.raises(VLMRequestError, match="non-empty list"):
        StructuredOutput("choice", [])
    with pytest.raises(VLMRequestError, match="'grammar'"):
        StructuredOutput("grammar", "x")  # type: ignore[arg-type]


def test_yes_no_score_renormalises_over_the_two_answers():
    assert YesNoScore(math.log(0.3), math.log(0.1)).p_yes == pytest.approx(0.75)
    assert YesNoScore(-math.inf, -math.inf).p_yes == 0.5
    assert YesNoScore(-1000.0, -1.0).p_yes == pytest.approx(0.0, abs=1e-300)


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------


def test_png_is_lossless_and_jpeg_is_close(make_view):
    rgb = make_view(64, 48, "v", 0).rgb
    assert (decode_data_url(image_data_url(rgb, "png")) == rgb).all()
    decoded = decode_data_url(image_data_url(rgb, "jpeg", 95))
    assert decoded.shape == rgb.shape
    assert np.abs(decoded.astype(int) - rgb.astype(int)).mean() < 3.0
    assert encode_image(rgb, "jpeg")[:2] == b"\xff\xd8" and encode_image(rgb, "png")[:4] == b"\x89PNG"
    # Full-resolution chroma keeps a saturated one-pixel-wide red line red; 4:2:0 smears it.
    line = np.full((32, 32, 3), 128, dtype=np.uint8)
    line[:, 15] = (255, 0, 0)
    errors = {}
    for subsampling in ("4:4:4", "4:2:0"):
        decoded = decode_data_url(image_data_url(line, "jpeg", 95, subsampling))
        errors[subsampling] = np.abs(decoded[:, 15].astype(int) - line[:, 15].astype(int)).mean()
    assert errors["4:4:4"] < errors["4:2:0"]


def test_bad_image_arguments_are_named(make_view):
    rgb = make_view(16, 16, "v", 0).rgb
    with pytest.raises(ValueError, match="'gif'"):
        encode_image(rgb, "gif")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="jpeg_quality"):
        encode_image(rgb, "jpeg", 0)
    with pytest.raises(VLMRequestError, match=r"\(H, W, 3\)"):
        ViewImage(np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="not a base64 image data URL"):
        decode_data_url("http://example/x.png")


# ---------------------------------------------------------------------------------------------
# Sampling parameters and the generate template
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"n": 0}, "n must be an integer >= 1, got 0"),
        ({"n": 2.0}, "n must be an integer"),
        ({"n": True}, "n must be an integer"),
        ({"temperature": -0.1}, "temperature must be a number >= 0"),
        ({"temperature": math.nan}, "temperature must be a number >= 0, got nan"),
        ({"temperature": math.inf}, "temperature must be finite"),
        ({"max_tokens": 0}, "max_tokens must be an integer >= 1"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"seed": 1.5}, "seed must be an integer or None"),
        ({"stop": [""]}, "stop must be a list of non-empty strings"),
        ({"stop": [3]}, "stop must be a list of non-empty strings"),
        ({"logprobs": 1}, "logprobs must be True or False"),
        ({"logprobs": True, "top_logprobs": 21}, r"top_logprobs must be an integer in 0\.\.20, got 21"),
        ({"top_logprobs": 2}, "top_logprobs=2 needs logprobs=True"),
        ({"structured": {"kind": "choice"}}, "structured must be a StructuredOutput"),
    ],
)
def test_sampling_params_refuse_bad_values_naming_them(values, fragment):
    with pytest.raises(VLMRequestError, match=fragment):
        SamplingParams(**values)


def test_sampling_params_normalise_what_yaml_and_callers_give():
    params = SamplingParams(n=2, temperature=1, top_p=1, stop="</answer>")
    assert params.temperature == 1.0 and isinstance(params.temperature, float) and params.top_p == 1.0
    assert params.stop == ("</answer>",)
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b") and SamplingParams(stop=None).stop == ()
    assert SamplingParams() == SamplingParams(n=1, temperature=0.0, max_tokens=1024)  # one greedy sample


class _Echo(VLMBackend):
    """A backend defined in this test: echoes the request, and records what reached its hook."""

    def __init__(self) -> None:
        super().__init__(VLMConfig(model="echo"))
        self.calls: list[tuple[list[ChatMessage], SamplingParams]] = []

    def _generate(self, messages, params):
        self.calls.append((messages, params))
        return GenerationResult(tuple(Sample(messages[-1].text) for _ in range(params.n)), self.config.model)

    def score_yes_no(self, messages, *, yes="yes", no="no"):
        return YesNoScore(0.0, 0.0)


def test_generate_checks_messages_and_params_once_then_calls_the_backend_hook(make_view):
    backend = _Echo()
    result = backend.generate((ChatMessage("user", "hello"),), SamplingParams(n=2, temperature=0.5))
    assert result.texts == ["hello", "hello"]
    messages, params = backend.calls[0]
    assert isinstance(messages, list) and params == SamplingParams(n=2, temperature=0.5)
    assert backend.generate([ChatMessage("user", "again")]).texts == ["again"]
    assert backend.calls[1][1] == SamplingParams()
    # Bad requests are refused before the hook runs: nothing reaches the model.
    with pytest.raises(VLMRequestError, match="takes its sampling as a SamplingParams, got dict"):
        backend.generate([ChatMessage("user", "x")], {"n": 2})
    with pytest.raises(VLMRequestError, match="must not be empty"):
        backend.generate([])
    with pytest.raises(VLMRequestError, match="img_idx=1 but is image number 0"):
        backend.generate([ChatMessage("user", (make_view(8, 8, "wrist", 1), "x"))])
    with pytest.raises(TypeError):
        backend.generate([ChatMessage("user", "x")], n=2)  # the keywords live in SamplingParams only
    assert len(backend.calls) == 2


# ---------------------------------------------------------------------------------------------
# Registry and factory
# ---------------------------------------------------------------------------------------------


def test_the_three_backend_types_are_registered_and_imported_lazily():
    import subprocess
    import sys

    assert {"openai", "transformers", "oracle"} <= set(backend_types())
    # A fresh interpreter: importing the package must not pull in any backend's dependencies.
    probe = "import sys, robopin.vlm; print(sorted(m for m in ('httpx', 'torch', 'PIL') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_unknown_type_and_unknown_fields_are_named():
    with pytest.raises(UnknownBackendError, match="'llama'"):
        make_backend({"type": "llama"})
    with pytest.raises(VLMConfigError, match="needs a 'type'"):
        config_from_dict({"model": "x"})
    with pytest.raises(VLMConfigError, match=r"unknown field\(s\) \['temprature'\]"):
        config_from_dict({"type": "openai", "temprature": 0.5})


def test_a_backend_whose_module_is_missing_says_what_it_needs(monkeypatch):
    from robopin.vlm import VLM_BACKENDS

    monkeypatch.setattr(VLM_BACKENDS, "_declared", dict(VLM_BACKENDS._declared))
    register_backend("ghost", "robopin.vlm.no_such_module", requires=("ghost-sdk",))
    with pytest.raises(BackendUnavailableError, match="needs ghost-sdk"):
        make_backend({"type": "ghost"})


def test_the_contract_check_passes_a_real_backend_and_names_a_broken_one(stub_server, make_view):
    from robopin.vlm.contract import ContractViolationError
    from robopin.vlm.openai_backend import OpenAIBackend, OpenAIBackendConfig

    messages = build_pincot_messages("go", [make_view(32, 32, "static", 0)])
    with OpenAIBackend(OpenAIBackendConfig(base_url=stub_server.base_url)) as backend:
        result = check_backend_contract(backend, messages, n=3)
        assert len(result.texts) == 3

        class Broken(OpenAIBackend):
            def _generate(self, messages, params):
                result = super()._generate(messages, params)
                return type(result)(result.samples[:1], result.model)

        broken = Broken(backend.config)
        with pytest.raises(ContractViolationError, match=r"n=3\) returned 1 samples"):
            check_backend_contract(broken, messages, n=3)
        broken.close()
