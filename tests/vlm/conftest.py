"""Fixtures for the VLM tests: a local OpenAI-compatible stub server and synthetic camera views."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from robopin.vlm.base import ViewImage


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any] | None
    client_port: int


@dataclass
class StubBehaviour:
    """What the stub does; tests change it between requests."""

    served_model: str = "vlm"
    delay_s: float = 0.0
    fail_statuses: list[int] = field(default_factory=list)
    # Distribution of the first answer token for one-token (verifier) requests, as token -> logprob.
    answer_logprobs: dict[str, float] = field(default_factory=lambda: {"Yes": -0.3, "No": -1.5})
    # Log-probabilities the server reports for vLLM's logprob_token_ids, by token id.
    token_id_logprobs: dict[int, float] = field(default_factory=dict)
    # A thinking model (RoboPIN-4B, Qwen3-VL thinking): its first token is "<think>" unless the
    # assistant's turn is prefilled with a closed thinking block and continued.
    thinking: bool = False


class StubOpenAIServer:
    """A chat-completions server on 127.0.0.1 that answers like vLLM, with knobs for failures.

    Each sample's text reports what the server decoded (``sample i of n; images WxH,WxH; model m``)
    so tests can check that images really travelled, in order and intact.
    """

    def __init__(self) -> None:
        self.behaviour = StubBehaviour()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        # A short poll interval keeps shutdown (and so each test's teardown) fast.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> StubOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- request handling ----------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall between headers and body

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                stub._record(self, None)
                if self.path.rstrip("/") == "/v1/models":
                    self._reply(200, {"object": "list", "data": [{"id": stub.behaviour.served_model}]})
                else:
                    self._reply(404, {"error": {"message": f"no route {self.path}", "code": 404}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                stub._record(self, body)
                status, payload = stub._answer(self.path, body)
                self._reply(status, payload)

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to tell it

        return Handler

    def _record(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(handler.command, handler.path, body, handler.client_address[1]))

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        behaviour = self.behaviour
        if behaviour.delay_s:
            time.sleep(behaviour.delay_s)
        with self._lock:
            fail = behaviour.fail_statuses.pop(0) if behaviour.fail_statuses else None
        if fail is not None:
            return fail, {"error": {"message": f"injected failure {fail}", "type": "InternalServerError"}}
        if path.rstrip("/") != "/v1/chat/completions":
            return 404, {"error": {"message": f"no route {path}", "code": 404}}
        if body.get("model") != behaviour.served_model:
            return 404, {
                "error": {
                    "message": f"The model `{body.get('model')}` does not exist.",
                    "type": "NotFoundError",
                    "param": "model",
                    "code": 404,
                }
            }
        n = int(body.get("n", 1))
        temperature = float(body.get("temperature", 1.0))
        if n > 1 and temperature < 1e-5:
            # vLLM sampling_params.py _verify_greedy_sampling, answered as HTTP 400.
            message = f"n must be 1 when using greedy sampling, got {n}."
            return 400, {"error": {"message": message, "type": "BadRequestError", "code": 400}}
        sizes = [f"{w}x{h}" for w, h in _image_sizes(body["messages"])]
        choices = []
        for index in range(n):
            # vLLM: max_completion_tokens, else the deprecated max_tokens.
            if (body.get("max_completion_tokens") or body.get("max_tokens")) == 1 and body.get("logprobs"):
                text, logprobs = self._verifier_answer(body)
            else:
                text = f"sample {index} of {n}; images {','.join(sizes) or 'none'}; model {body['model']}"
                logprobs = _fake_logprobs(text, index, body.get("top_logprobs", 0))
            choice: dict[str, Any] = {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
            if body.get("logprobs"):
                choice["logprobs"] = {"content": logprobs}
            choices.append(choice)
        return 200, {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": body["model"],
            "choices": choices,
            "usage": {"prompt_tokens": 10 + 100 * len(sizes), "completion_tokens": 7 * n},
        }

    def _first_token_logprobs(self, body: dict[str, Any]) -> dict[str, float]:
        behaviour = self.behaviour
        answers = dict(behaviour.answer_logprobs)
        if not behaviour.thinking:
            return answers
        last = body["messages"][-1]
        prefilled = (
            last["role"] == "assistant"
            and body.get("continue_final_message")
            and str(last["content"]).rstrip().endswith("</think>")
        )
        if prefilled:
            return answers
        # Thinking first: yes/no are far down the list, past any top-20.
        table = {"<think>": -0.001, **{f"tok{k}": -8.0 - 0.1 * k for k in range(25)}}
        table.update({token: logprob - 12.0 for token, logprob in answers.items()})
        return table

    def _verifier_answer(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        ranked = sorted(self._first_token_logprobs(body).items(), key=lambda kv: -kv[1])
        token, logprob = ranked[0]
        top_k = int(body.get("top_logprobs", 0))
        ids = body.get("logprob_token_ids")
        if ids:
            # vLLM: the sampled token first, then the requested ids, and the list cut at top_logprobs
            # (chat_completion/serving.py passes num_output_top_logprobs=request.top_logprobs).
            table = self.behaviour.token_id_logprobs
            sampled = {"token": token, "logprob": logprob}
            top = [sampled] + [{"token": f"token_id:{i}", "logprob": table.get(i, -30.0)} for i in ids]
            return token, [{"token": token, "logprob": logprob, "top_logprobs": top[:top_k]}]
        top = [{"token": t, "logprob": lp} for t, lp in ranked[:top_k]]
        return token, [{"token": token, "logprob": logprob, "top_logprobs": top}]


def _image_sizes(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    from robopin.vlm.images import decode_data_url

    sizes = []
    for message in messages:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part["type"] == "image_url":
                    image = decode_data_url(part["image_url"]["url"])
                    sizes.append((image.shape[1], image.shape[0]))
    return sizes


def _fake_logprobs(text: str, sample_index: int, top_k: int) -> list[dict[str, Any]]:
    """Word-level tokens; the chosen token has probability 0.9/(index+1), alternatives share the rest."""
    chosen = math.log(0.9 / (sample_index + 1))
    steps = []
    for word in text.split(" "):
        alternatives = [{"token": word, "logprob": chosen}]
        alternatives += [{"token": f"alt{k}", "logprob": chosen - 2.0 - k} for k in range(max(0, top_k - 1))]
        steps.append({"token": word, "logprob": chosen, "bytes": list(word.encode()), "top_logprobs": alternatives})
    return steps


@pytest.fixture
def stub_server() -> Iterator[StubOpenAIServer]:
    server = StubOpenAIServer().start()
    yield server
    server.stop()


def synthetic_view(width: int, height: int, name: str, img_idx: int, seed: int = 0) -> ViewImage:
    """A smooth colour gradient with a bright square: compresses like a real frame, easy to check."""
    rng = np.random.default_rng(seed)
    u = np.linspace(0, 255, width, dtype=np.float64)
    v = np.linspace(0, 255, height, dtype=np.float64)
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    rgb[..., 0] = u[None, :].astype(np.uint8)
    rgb[..., 1] = v[:, None].astype(np.uint8)
    rgb[..., 2] = rng.integers(0, 256)
    top, left = height // 3, width // 3
    rgb[top : top + height // 6, left : left + width // 6] = 255
    return ViewImage(rgb, name=name, img_idx=img_idx)


@pytest.fixture
def two_views() -> list[ViewImage]:
    return [synthetic_view(640, 480, "static", 0, seed=1), synthetic_view(320, 240, "wrist", 1, seed=2)]


@pytest.fixture
def make_view():
    """The :func:`synthetic_view` factory, for tests that need views of their own size."""
    return synthetic_view
