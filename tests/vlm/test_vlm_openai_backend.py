"""The OpenAI-compatible HTTP backend against a real local stub server speaking the chat API."""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest

from robopin.vlm.base import ChatMessage, SamplingParams, StructuredOutput, make_backend
from robopin.vlm.errors import (
    VLMCanceledError,
    VLMConfigError,
    VLMConnectionError,
    VLMModelNotFoundError,
    VLMRequestError,
    VLMResponseError,
    VLMServerError,
    VLMTimeoutError,
)
from robopin.vlm.openai_backend import OpenAIBackend, OpenAIBackendConfig
from robopin.vlm.prompts import build_pincot_messages


def _backend(server, **overrides) -> OpenAIBackend:
    values = {"base_url": server.base_url, "model": "vlm", "retry_backoff_s": 0.01, "timeout_s": 5.0}
    values.update(overrides)
    return OpenAIBackend(OpenAIBackendConfig(**values))


def test_n_samples_come_back_from_one_request_with_every_image_in_order(stub_server, two_views):
    messages = build_pincot_messages("put the cup on the plate", two_views)
    with _backend(stub_server) as backend:
        result = backend.generate(messages, SamplingParams(n=3, temperature=0.7, max_tokens=64, seed=5))
    assert len(stub_server.chat_requests()) == 1
    body = stub_server.chat_requests()[0].body
    assert body["n"] == 3 and body["temperature"] == 0.7 and body["seed"] == 5
    assert result.texts == [f"sample {i} of 3; images 640x480,320x240; model vlm" for i in range(3)]
    parts = body["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]
    assert parts[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert parts[2]["text"].startswith("put the cup on the plate The answer should be presented in JSON")
    assert result.prompt_tokens == 210 and result.completion_tokens == 21
    assert all(sample.logprobs is None for sample in result.samples)


def test_logprobs_and_top_logprobs_are_parsed_per_sample(stub_server, two_views):
    messages = build_pincot_messages("point at the cup", two_views[:1])
    with _backend(stub_server) as backend:
        result = backend.generate(messages, SamplingParams(n=2, temperature=0.7, logprobs=True, top_logprobs=3))
    body = stub_server.chat_requests()[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    for index, sample in enumerate(result.samples):
        words = sample.text.split(" ")
        assert [step.token for step in sample.logprobs] == words
        assert all(len(step.top) == 3 for step in sample.logprobs)
        expected = len(words) * math.log(0.9 / (index + 1))
        assert sample.total_logprob == pytest.approx(expected)


def test_png_images_survive_the_round_trip_bit_exact(stub_server, two_views):
    from robopin.vlm.images import decode_data_url

    messages = build_pincot_messages("x", two_views)
    with _backend(stub_server, image_format="png") as backend:
        backend.generate(messages)
    parts = stub_server.chat_requests()[0].body["messages"][-1]["content"]
    for part, view in zip(parts[:2], two_views, strict=True):
        assert (decode_data_url(part["image_url"]["url"]) == view.rgb).all()


def test_structured_output_from_config_or_call_reaches_the_server(stub_server):
    messages = [ChatMessage("user", ("is the cup on the plate?",))]
    config = {"structured_output": {"kind": "choice", "value": ["yes", "no"]}}
    with _backend(stub_server, **config) as backend:
        backend.generate(messages)
        backend.generate(messages, SamplingParams(structured=StructuredOutput("regex", r"\[\d+, \d+\]")))
    first, second = (r.body for r in stub_server.chat_requests())
    assert first["structured_outputs"] == {"choice": ["yes", "no"]}
    assert second["structured_outputs"] == {"regex": r"\[\d+, \d+\]"}
    assert first["messages"] == [{"role": "user", "content": "is the cup on the plate?"}]


def test_score_yes_no_sums_every_spelling_among_top_logprobs(stub_server):
    stub_server.behaviour.answer_logprobs = {"Yes": -0.4, " yes": -2.0, "No": -1.3, "Maybe": -3.0}
    with _backend(stub_server) as backend:
        score = backend.score_yes_no([ChatMessage("user", ("Answer yes or no.",))])
    body = stub_server.chat_requests()[0].body
    assert body["max_completion_tokens"] == 1 and body["top_logprobs"] == 20
    p_yes = math.exp(-0.4) + math.exp(-2.0)
    assert score.p_yes == pytest.approx(p_yes / (p_yes + math.exp(-1.3)))
    assert score.exact


def test_score_yes_no_bounds_a_missing_answer_by_the_lowest_listed(stub_server):
    stub_server.behaviour.answer_logprobs = {"Yes": -0.1, "Sure": -2.5}
    with _backend(stub_server) as backend:
        score = backend.score_yes_no([ChatMessage("user", ("Answer yes or no.",))])
    assert not score.exact
    assert score.logprob_no == -2.5 and score.logprob_yes == -0.1


def test_score_yes_no_uses_vllm_logprob_token_ids_when_configured(stub_server):
    stub_server.behaviour.token_id_logprobs = {9454: -0.2, 9693: -3.1, 2753: -1.9}
    with _backend(stub_server, yes_token_ids=(9454, 9693), no_token_ids=(2753,)) as backend:
        score = backend.score_yes_no([ChatMessage("user", ("Answer yes or no.",))])
    body = stub_server.chat_requests()[0].body
    assert body["logprob_token_ids"] == [9454, 9693, 2753] and body["return_tokens_as_token_ids"]
    p_yes = math.exp(-0.2) + math.exp(-3.1)
    assert score.exact and score.p_yes == pytest.approx(p_yes / (p_yes + math.exp(-1.9)))


def test_neither_yes_nor_no_among_the_answers_is_an_error(stub_server):
    stub_server.behaviour.answer_logprobs = {"Perhaps": -0.1, "Sure": -2.5}
    with _backend(stub_server) as backend, pytest.raises(VLMResponseError, match="neither 'yes' nor 'no'"):
        backend.score_yes_no([ChatMessage("user", ("Answer yes or no.",))])


def test_a_500_is_not_retried_the_server_may_have_started_on_it(stub_server):
    stub_server.behaviour.fail_statuses = [500] * 10
    with _backend(stub_server, max_retries=2) as backend, pytest.raises(VLMServerError) as caught:
        backend.generate([ChatMessage("user", ("hi",))])
    assert caught.value.status_code == 500 and "injected failure 500" in str(caught.value)
    assert len(stub_server.chat_requests()) == 1


def test_a_400_is_not_retried(stub_server):
    stub_server.behaviour.fail_statuses = [400]
    with _backend(stub_server, max_retries=3) as backend, pytest.raises(VLMServerError, match="HTTP 400"):
        backend.generate([ChatMessage("user", ("hi",))])
    assert len(stub_server.chat_requests()) == 1


def test_timeout_s_bounds_the_whole_call_and_a_read_timeout_is_not_retried(stub_server):
    stub_server.behaviour.delay_s = 3.0
    with (
        _backend(stub_server, timeout_s=0.3, max_retries=3) as backend,
        pytest.raises(VLMTimeoutError) as caught,
    ):
        backend.generate([ChatMessage("user", ("hi",))])
    assert "timeout_s=0.3" in str(caught.value) and "not retried" in str(caught.value)
    time.sleep(0.3)
    assert len(stub_server.chat_requests()) == 1  # the server got it once: no second sample job


def _generate_in_thread(backend, params=None):
    outcome: dict = {}

    def run():
        try:
            outcome["result"] = backend.generate([ChatMessage("user", ("hi",))], params)
        except Exception as error:  # handed to the test
            outcome["error"] = error
        outcome["ended"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _wait_for_requests(server, count, limit_s=10.0):
    end = time.monotonic() + limit_s
    while len(server.chat_requests()) < count:
        assert time.monotonic() < end, "the stub never received the request"
        time.sleep(0.01)


def test_cancel_abandons_the_request_in_flight_and_sends_no_other(stub_server):
    stub_server.behaviour.delay_s = 30.0  # a VLM still generating
    with _backend(stub_server, timeout_s=60.0, max_retries=3) as backend:
        thread, outcome = _generate_in_thread(backend, SamplingParams(n=4, temperature=0.7))
        _wait_for_requests(stub_server, 1)
        canceled_at = time.monotonic()
        backend.cancel()
        thread.join(5.0)
        assert isinstance(outcome.get("error"), VLMCanceledError), outcome
        assert "canceled" in str(outcome["error"])
        assert outcome["ended"] - canceled_at < 1.0  # the bound task_node promises for a cancel
        time.sleep(0.5)
        assert len(stub_server.chat_requests()) == 1  # no retry after a cancel
        # A call started after cancel() returned runs normally.
        stub_server.behaviour.delay_s = 0.0
        assert backend.generate([ChatMessage("user", ("again",))]).texts[0].startswith("sample 0 of 1")
    assert len(stub_server.chat_requests()) == 2


def test_cancel_with_nothing_in_flight_changes_nothing(stub_server):
    with _backend(stub_server) as backend:
        backend.cancel()
        assert backend.generate([ChatMessage("user", ("hi",))]).texts[0].startswith("sample 0")


def test_a_wrong_model_name_says_which_models_are_served(stub_server):
    with _backend(stub_server, model="robopin-4b") as backend, pytest.raises(VLMModelNotFoundError) as caught:
        backend.generate([ChatMessage("user", ("hi",))])
    message = str(caught.value)
    assert "'robopin-4b'" in message and "['vlm']" in message
    assert len(stub_server.chat_requests()) == 1  # a 404 is not retried


def test_server_down_raises_connection_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = OpenAIBackendConfig(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, retry_backoff_s=0.01)
    with OpenAIBackend(config) as backend, pytest.raises(VLMConnectionError, match="is it running") as caught:
        backend.generate([ChatMessage("user", ("hi",))])
    assert "after 2 attempt(s)" in str(caught.value)  # a refused connection never reached a server: retried


def test_requests_reuse_one_pooled_connection(stub_server):
    with _backend(stub_server) as backend:
        for _ in range(3):
            backend.generate([ChatMessage("user", ("hi",))])
        assert backend.list_models() == ["vlm"]
    ports = {request.client_port for request in stub_server.requests}
    assert len(ports) == 1


def test_wrong_number_of_choices_is_a_response_error(stub_server):
    with _backend(stub_server, extra_body={"n": 1}) as backend, pytest.raises(VLMResponseError, match="n=2"):
        backend.generate([ChatMessage("user", ("hi",))], SamplingParams(n=2, temperature=0.7))


def test_api_key_is_sent_as_bearer_from_the_environment(stub_server, monkeypatch):
    monkeypatch.setenv("ROBOPIN_TEST_KEY", "secret-123")
    captured = {}

    class Capture:
        def __init__(self, inner):
            self.inner = inner

        def handle_request(self, request):
            captured["auth"] = request.headers.get("authorization")
            return self.inner.handle_request(request)

        def close(self):
            self.inner.close()

    import httpx

    config = OpenAIBackendConfig(base_url=stub_server.base_url, api_key_env="ROBOPIN_TEST_KEY")
    with OpenAIBackend(config, transport=Capture(httpx.HTTPTransport())) as backend:
        backend.generate([ChatMessage("user", ("hi",))])
    assert captured["auth"] == "Bearer secret-123"
    assert "secret-123" not in repr(config.model) and "secret" not in repr(backend)


def test_factory_builds_the_backend_from_a_yaml_style_mapping(stub_server):
    backend = make_backend({"type": "openai", "base_url": stub_server.base_url, "point_convention": "norm1000"})
    with backend:
        assert isinstance(backend, OpenAIBackend)
        assert backend.point_convention.name == "norm1000"
        assert backend.generate([ChatMessage("user", ("hi",))]).texts[0].startswith("sample 0")


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("base_url", "127.0.0.1:8000", "base_url"),
        ("timeout_s", 0, "timeout_s"),
        ("max_retries", -1, "max_retries"),
        ("image_format", "webp", "webp"),
        ("jpeg_quality", 0, "jpeg_quality"),
        ("jpeg_chroma_subsampling", "4:1:1", "4:1:1"),
        ("point_convention", "pixel", "point_convention"),
        ("structured_output", {"kind": "grammar", "value": "x"}, "grammar"),
        ("yes_token_ids", (1,), "together"),
    ],
)
def test_bad_config_values_are_named(field, value, fragment):
    with pytest.raises(VLMConfigError, match=fragment):
        OpenAIBackendConfig(**{field: value})


def test_top_logprobs_too_small_for_the_token_ids_is_refused():
    # vLLM cuts the list (sampled token first) at top_logprobs, so 3 ids need at least 4.
    with pytest.raises(VLMConfigError, match=r"yes_no_top_logprobs=3.*>= 1 \+ the number of ids \(4\)"):
        OpenAIBackendConfig(yes_token_ids=(1, 2), no_token_ids=(3,), yes_no_top_logprobs=3)
    OpenAIBackendConfig(yes_token_ids=(1, 2), no_token_ids=(3,), yes_no_top_logprobs=4)


def test_greedy_n_samples_are_refused_as_vllm_refuses_them(stub_server):
    with _backend(stub_server) as backend, pytest.raises(VLMRequestError, match="n must be 1 when using greedy"):
        backend.generate([ChatMessage("user", ("hi",))], SamplingParams(n=4, temperature=0.0))
    assert stub_server.chat_requests() == []
    # The same request sent anyway: the stub answers as vLLM does.
    body = {"model": "vlm", "messages": [{"role": "user", "content": "hi"}], "n": 4, "temperature": 0.0}
    import httpx

    answer = httpx.post(f"{stub_server.base_url}/chat/completions", json=body)
    assert answer.status_code == 400 and "greedy" in answer.text


def test_max_completion_tokens_is_sent_not_the_deprecated_max_tokens(stub_server):
    with _backend(stub_server) as backend:
        backend.generate([ChatMessage("user", ("hi",))], SamplingParams(max_tokens=77))
    body = stub_server.chat_requests()[0].body
    assert body["max_completion_tokens"] == 77 and "max_tokens" not in body


def test_a_thinking_model_is_scored_after_its_closed_thinking_block(stub_server):
    stub_server.behaviour.thinking = True
    messages = [ChatMessage("user", ("Is the reasoning sound? Answer yes or no.",))]
    with _backend(stub_server) as backend:
        score = backend.score_yes_no(messages)
    body = stub_server.chat_requests()[-1].body
    assert body["messages"][-1] == {"role": "assistant", "content": "<think>\n\n</think>\n\n"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert score.p_yes == pytest.approx(math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.5)))
    # Without the prefill the thinking model opens with <think>: yes/no are not among its top tokens.
    with _backend(stub_server, yes_no_answer_prefix="") as backend, pytest.raises(VLMResponseError, match="neither"):
        backend.score_yes_no(messages)


def test_bad_sampling_arguments_are_refused_before_any_request(stub_server):
    with _backend(stub_server) as backend:
        with pytest.raises(VLMRequestError, match="n must be"):
            backend.generate([ChatMessage("user", ("hi",))], SamplingParams(n=0))
        with pytest.raises(VLMRequestError, match="top_logprobs"):
            backend.generate([ChatMessage("user", ("hi",))], SamplingParams(logprobs=True, top_logprobs=50))
    assert stub_server.chat_requests() == []
