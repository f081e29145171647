"""The transformers backend end to end on a tiny random-weight Qwen-VL checkpoint built offline.

The model's text is garbage by construction; what is checked is the real code path: image token
accounting against the processor, sampling, seeds, log-probabilities, yes/no scoring, stop strings.
Runs on CPU (the GPU path is the same code with another device).
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from robopin.vlm.base import ChatMessage, SamplingParams, StructuredOutput, ViewImage, make_backend
from robopin.vlm.errors import VLMConfigError, VLMRequestError
from robopin.vlm.points import PointConvention
from robopin.vlm.prompts import build_pincot_messages
from robopin.vlm.transformers_backend import TransformersBackend, TransformersBackendConfig
from tests.doubles.tiny_model import build_tiny_qwen_vl

MAX_PIXELS = 640 * 480
MIN_PIXELS = 32 * 32


@pytest.fixture(scope="module")
def qwen3_backend(tmp_path_factory):
    path = build_tiny_qwen_vl(tmp_path_factory.mktemp("tiny") / "qwen3", "qwen3_vl", seed=0)
    config = TransformersBackendConfig(
        model_path=str(path),
        device="cpu",
        point_convention="norm1000",
        resize_factor=32,
        min_pixels=MIN_PIXELS,
        max_pixels=MAX_PIXELS,
        num_threads=1,
    )
    with TransformersBackend(config) as backend:
        yield backend


@pytest.fixture(scope="module")
def qwen25_path(tmp_path_factory):
    return build_tiny_qwen_vl(tmp_path_factory.mktemp("tiny") / "qwen25", "qwen2_5_vl", seed=0)


@pytest.fixture
def small_views(make_view):
    return [make_view(160, 120, "static", 0, seed=1), make_view(96, 64, "wrist", 1, seed=2)]


def test_image_tokens_match_smart_resize_for_each_view(qwen3_backend, small_views):
    messages = build_pincot_messages("put the cup on the plate", small_views)
    inputs = qwen3_backend.build_inputs(messages)
    grids = inputs["image_grid_thw"].tolist()
    for (t, h, w), view in zip(grids, small_views, strict=True):
        convention = PointConvention("pixels_resized", 32, MIN_PIXELS, MAX_PIXELS)
        resized_w, resized_h = convention.model_frame_size(view.width, view.height)
        assert (t, h * 16, w * 16) == (1, resized_h, resized_w)
    image_tokens = int((inputs["mm_token_type_ids"] == 1).sum())
    assert image_tokens == sum(h * w // 4 for _, h, w in grids)
    assert image_tokens == int((inputs["input_ids"] == qwen3_backend.image_token_id).sum())


def test_generate_samples_n_texts_with_logprobs(qwen3_backend, small_views):
    messages = build_pincot_messages("put the cup on the plate", small_views)
    sampling = SamplingParams(n=3, temperature=1.0, max_tokens=8, seed=3, logprobs=True, top_logprobs=2)
    result = qwen3_backend.generate(messages, sampling)
    assert len(result.samples) == 3
    assert result.prompt_tokens == qwen3_backend.build_inputs(messages)["input_ids"].shape[1]
    for sample in result.samples:
        assert sample.finish_reason in ("length", "stop")
        assert 0 < len(sample.logprobs) <= 8
        assert all(step.logprob <= 0.0 and len(step.top) == 2 for step in sample.logprobs)
        assert all(step.top[0][1] >= step.top[1][1] for step in sample.logprobs)
    assert result.completion_tokens == sum(len(s.logprobs) for s in result.samples)


def test_same_seed_same_samples_and_greedy_is_deterministic(qwen3_backend, small_views):
    messages = build_pincot_messages("point at the cup", small_views[:1])
    first = qwen3_backend.generate(messages, SamplingParams(n=2, temperature=1.0, max_tokens=6, seed=11))
    again = qwen3_backend.generate(messages, SamplingParams(n=2, temperature=1.0, max_tokens=6, seed=11))
    assert first.texts == again.texts
    greedy = qwen3_backend.generate(messages, SamplingParams(n=2, max_tokens=6, logprobs=True, top_logprobs=1))
    assert greedy.texts[0] == greedy.texts[1]
    # Greedy picks the argmax, so each chosen token is the top alternative.
    for step in greedy.samples[0].logprobs:
        assert step.logprob == pytest.approx(step.top[0][1], abs=1e-5)


def test_score_yes_no_agrees_with_the_first_step_of_generate(qwen3_backend, small_views):
    messages = build_pincot_messages("is the cup on the plate?", small_views, suffix="Answer yes or no.")
    first_step = qwen3_backend.generate(messages, SamplingParams(max_tokens=1, logprobs=True, top_logprobs=20))
    top = first_step.samples[0].logprobs[0].top
    # Words with one spelling only, so the verifier's sum over spellings is that one token.
    singles = [
        (text, logprob)
        for text, logprob in top
        if text.strip() and len(qwen3_backend._answer_token_ids(text)) == 1 and text == text.strip()
    ]
    assert len(singles) >= 2, f"no two single-spelling words among {top}"
    (yes_word, yes_logprob), (no_word, no_logprob) = singles[:2]
    score = qwen3_backend.score_yes_no(messages, yes=yes_word, no=no_word)
    assert score.exact
    assert score.logprob_yes == pytest.approx(yes_logprob, abs=1e-4)
    assert score.logprob_no == pytest.approx(no_logprob, abs=1e-4)
    assert 0.0 < score.p_yes < 1.0


def test_score_yes_no_reads_the_images(qwen3_backend, make_view):
    question = "is the cup on the plate?"
    first = qwen3_backend.score_yes_no(build_pincot_messages(question, [make_view(96, 64, "s", 0, seed=1)]))
    second = qwen3_backend.score_yes_no(build_pincot_messages(question, [make_view(96, 64, "s", 0, seed=9)]))
    assert not math.isclose(first.logprob_yes, second.logprob_yes, abs_tol=1e-7)


def test_stop_strings_cut_the_text(qwen3_backend, small_views):
    messages = build_pincot_messages("put the cup on the plate", small_views)
    full = qwen3_backend.generate(messages, SamplingParams(max_tokens=12)).texts[0]
    stop = next((full[i : i + 2] for i in range(2, len(full) - 1) if full[i : i + 2].isprintable()), None)
    if stop is None:
        pytest.skip(f"greedy text {full!r} has no printable two-character stop candidate")
    cut = qwen3_backend.generate(messages, SamplingParams(max_tokens=12, stop=[stop]))
    assert cut.texts[0] == full[: full.find(stop)]
    assert cut.samples[0].finish_reason == "stop"


def test_structured_output_and_bad_image_order_are_refused(qwen3_backend, small_views):
    messages = build_pincot_messages("x", small_views)
    with pytest.raises(VLMRequestError, match="guided decoding"):
        qwen3_backend.generate(messages, SamplingParams(structured=StructuredOutput("choice", ["yes", "no"])))
    swapped = ChatMessage("user", (small_views[1], small_views[0], "x"))
    with pytest.raises(VLMRequestError, match="img_idx=1 but is image number 0"):
        qwen3_backend.generate([swapped])


def test_qwen25_pixels_resized_through_the_factory(qwen25_path, make_view):
    backend = make_backend(
        {
            "type": "transformers",
            "model_path": str(qwen25_path),
            "device": "cpu",
            "point_convention": "pixels_resized",
            "resize_factor": 28,
            "min_pixels": MIN_PIXELS,
            # Below the checkpoint's own limit and below 130x90: the config must win, or points drift.
            "max_pixels": 28 * 28 * 8,
        }
    )
    with backend:
        view = make_view(130, 90, "static", 0)
        inputs = backend.build_inputs(build_pincot_messages("x", [view]))
        _, h, w = inputs["image_grid_thw"][0].tolist()
        resized_w, resized_h = backend.point_convention.model_frame_size(130, 90)
        assert (resized_h, resized_w) == (56, 84)
        assert (h * 14, w * 14) == (resized_h, resized_w)
        # A point the model writes at the centre of its resized frame is the centre of the image.
        assert backend.point_convention.to_pixels([resized_w / 2, resized_h / 2], 130, 90).tolist() == [65, 45]
        assert len(backend.generate(build_pincot_messages("x", [view]), SamplingParams(max_tokens=3)).texts) == 1


def test_resize_factor_must_match_the_checkpoint(qwen25_path):
    config = TransformersBackendConfig(
        model_path=str(qwen25_path), device="cpu", point_convention="pixels_resized", resize_factor=32
    )
    with pytest.raises(VLMConfigError, match="multiples of 28"):
        TransformersBackend(config)


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({"model_path": ""}, "model_path"),
        ({"model_path": "x", "device": "tpu"}, "tpu"),
        ({"model_path": "x", "dtype": "float8"}, "float8"),
    ],
)
def test_bad_config_values_are_named(values, fragment):
    with pytest.raises(VLMConfigError, match=fragment):
        TransformersBackendConfig(**values)


def test_a_directory_without_a_checkpoint_is_refused(tmp_path):
    with pytest.raises(VLMConfigError, match=r"no config\.json"):
        TransformersBackend(TransformersBackendConfig(model_path=str(tmp_path)))


def test_view_image_rejects_non_rgb_arrays():
    import numpy as np

    with pytest.raises(VLMRequestError, match="uint8"):
        ViewImage(np.zeros((4, 4, 3), dtype=np.float32))


def test_a_chat_template_kept_beside_the_processor_is_used(tmp_path):
    import json
    import shutil

    path = build_tiny_qwen_vl(tmp_path / "moved", "qwen3_vl", seed=1)
    template = (path / "chat_template.jinja").read_text()
    config = json.loads((path / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    (path / "chat_template.jinja").unlink()
    (path / "chat_template.json").write_text(json.dumps({"chat_template": template}))
    backend = TransformersBackend(TransformersBackendConfig(model_path=str(path), device="cpu"))
    assert backend.tokenizer.chat_template == template
    (path / "chat_template.json").unlink()
    with pytest.raises(VLMConfigError, match="no chat template"):
        TransformersBackend(TransformersBackendConfig(model_path=str(path), device="cpu"))
    shutil.rmtree(path)
