"""E-TTS's reasoning verifier over HTTP against a stub that answers as a thinking model does
(RoboPIN-4B opens every turn with ``<think>``): the real OpenAI backend, a real local server."""

from __future__ import annotations

import math

import pytest

from robopin.reasoning.tts.verifiers import ReasoningVerifier
from robopin.vlm.errors import VLMResponseError
from robopin.vlm.openai_backend import OpenAIBackend, OpenAIBackendConfig
from tests.reasoning.tts.helpers import tabletop, trace
from tests.vlm.conftest import StubOpenAIServer

pytest.importorskip("httpx")


@pytest.fixture
def thinking_server():
    server = StubOpenAIServer().start()
    server.behaviour.thinking = True
    server.behaviour.answer_logprobs = {"yes": -0.2, "no": -1.8}
    yield server
    server.stop()


def _score(server, **overrides) -> float:
    observation = tabletop()
    text = trace((100.0, 80.0), (200.0, 120.0))
    with OpenAIBackend(OpenAIBackendConfig(base_url=server.base_url, max_retries=0, **overrides)) as backend:
        return ReasoningVerifier(backend).score("put the cup on the free spot", observation, text, None)


def test_the_verifier_scores_a_thinking_model_after_its_closed_thinking_block(thinking_server):
    p_yes = _score(thinking_server)
    assert p_yes == pytest.approx(math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8)))
    request = thinking_server.chat_requests()[-1].body
    assert request["messages"][-1]["role"] == "assistant" and request["continue_final_message"] is True
    assert request["max_completion_tokens"] == 1


def test_without_the_prefill_a_thinking_model_gives_no_yes_no_to_score(thinking_server):
    with pytest.raises(VLMResponseError, match="neither 'yes' nor 'no'"):
        _score(thinking_server, yes_no_answer_prefix="")
