"""VLM backend for an OpenAI-compatible chat-completions server (vLLM, or any compatible one).

One request carries every view as a base64 image part and asks for ``n`` samples at once, so the
server's prefix cache encodes the images once. Token log-probabilities, vLLM's exact
``logprob_token_ids`` for yes/no verifiers and structured outputs are passed through. Connections are
pooled. ``timeout_s`` bounds a whole call, retries included; only a request that never reached the
server (connection refused or not established in time) is retried, never one the server may be
working on (a read timeout, an HTTP error) and never after :meth:`OpenAIBackend.cancel`, which
abandons the request in flight at once. Failures become :mod:`robopin.vlm.errors` exceptions that
say what to check.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx

from robopin.settings import check_ranges, setting
from robopin.vlm.base import (
    ChatMessage,
    GenerationResult,
    Sample,
    SamplingParams,
    StructuredOutput,
    TokenLogprob,
    VLMBackend,
    VLMConfig,
    YesNoScore,
    validate_messages,
)
from robopin.vlm.errors import (
    VLMCanceledError,
    VLMConfigError,
    VLMConnectionError,
    VLMError,
    VLMModelNotFoundError,
    VLMRequestError,
    VLMResponseError,
    VLMServerError,
    VLMTimeoutError,
)
from robopin.vlm.images import check_image_format, image_data_url

logger = logging.getLogger(__name__)

TOKEN_ID_PREFIX = "token_id:"
# The empty thinking block Qwen3 chat templates write for enable_thinking=False: prefilled as the
# assistant's turn, the next token is the answer even for a model trained to open with <think>.
EMPTY_THINKING = "<think>\n\n</think>\n\n"
# How often a waiting call looks at its cancel flag (cancel() also wakes it at once).
_POLL_S = 0.05


@dataclass(kw_only=True)
class OpenAIBackendConfig(VLMConfig):
    """Settings of the OpenAI-compatible HTTP backend (vLLM, SGLang, a hosted API).

    ``timeout_s`` bounds one whole call (generate, score_yes_no, list_models): every attempt, retry and back-off
    together; a call past it raises VLMTimeoutError. Only requests that never reached the server are retried
    (connection refused or not made within ``connect_timeout_s``): after a read timeout or an HTTP error the
    server may still be generating. ``yes_token_ids`` / ``no_token_ids`` turn on vLLM's exact
    ``logprob_token_ids`` scoring in :meth:`OpenAIBackend.score_yes_no`; without them the top-20 alternatives
    are searched by text. ``yes_no_answer_prefix`` is prefilled as the assistant's turn of a yes/no question
    (vLLM ``continue_final_message``) so that a thinking model (RoboPIN-4B opens with ``<think>``) answers at
    once; empty for a model that answers directly.
    """

    type: ClassVar[str] = "openai"

    base_url: str = setting("http://127.0.0.1:8000/v1", "the server's API root, http:// or https://")
    api_key: str = setting("", "API key, never logged (empty: read from the variable api_key_env names)")
    api_key_env: str = setting("ROBOPIN_VLM_API_KEY", "environment variable holding the key when api_key is empty")
    timeout_s: float = setting(60.0, "bound on one whole call, retries and back-off included, seconds (> 0)")
    connect_timeout_s: float = setting(5.0, "seconds to connect before a request counts as never made (> 0)")
    max_retries: int = setting(2, "retries of a request that never reached the server", min=0, max=10)
    retry_backoff_s: float = setting(0.5, "first wait before a retry, doubled each time, seconds", min=0.0)
    max_connections: int = setting(8, "HTTP connections kept open to the server", min=1)
    image_format: str = setting("jpeg", "how images travel: jpeg or png")
    jpeg_quality: int = setting(90, "JPEG quality of the images sent, 1..100")
    jpeg_chroma_subsampling: str = setting("4:2:0", "JPEG chroma subsampling: 4:4:4, 4:2:2 or 4:2:0")
    structured_output: dict[str, Any] | None = None
    yes_token_ids: tuple[int, ...] = ()
    no_token_ids: tuple[int, ...] = ()
    yes_no_top_logprobs: int = setting(20, "alternatives asked for per token of a yes/no answer", min=1, max=20)
    yes_no_answer_prefix: str = setting(EMPTY_THINKING, "prefilled as the assistant's turn of a yes/no question")
    chat_template_kwargs: dict[str, Any] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.base_url.startswith(("http://", "https://")):
            raise VLMConfigError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        for name in ("timeout_s", "connect_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
                raise VLMConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        check_ranges(self, VLMConfigError)
        try:
            check_image_format(self.image_format, self.jpeg_quality, self.jpeg_chroma_subsampling)
        except ValueError as error:
            raise VLMConfigError(str(error)) from error
        if self.structured_output is not None:
            try:
                self.structured()
            except VLMRequestError as error:
                raise VLMConfigError(f"structured_output: {error}") from error
        self.yes_token_ids = tuple(self.yes_token_ids)
        self.no_token_ids = tuple(self.no_token_ids)
        if bool(self.yes_token_ids) != bool(self.no_token_ids):
            raise VLMConfigError(
                "yes_token_ids and no_token_ids must be given together, got "
                f"yes={self.yes_token_ids!r}, no={self.no_token_ids!r}"
            )
        if set(self.yes_token_ids) & set(self.no_token_ids):
            raise VLMConfigError(f"a token id cannot mean both yes and no: {self.yes_token_ids!r}")
        needed = 1 + len(self.yes_token_ids) + len(self.no_token_ids)
        if self.yes_token_ids and self.yes_no_top_logprobs < needed:
            # vLLM builds the answer's top_logprobs list (sampled token first) cut at top_logprobs, also
            # with logprob_token_ids (chat_completion/serving.py num_output_top_logprobs=request.top_logprobs).
            raise VLMConfigError(
                f"yes_no_top_logprobs={self.yes_no_top_logprobs} is too small for {needed - 1} token ids: "
                f"vLLM cuts the list at top_logprobs, which must be >= 1 + the number of ids ({needed})"
            )

    def structured(self) -> StructuredOutput | None:
        """The configured default output constraint, e.g. ``{"kind": "regex", "value": "…"}``."""
        if self.structured_output is None:
            return None
        return StructuredOutput(**self.structured_output)

    def resolved_api_key(self) -> str:
        return self.api_key or os.environ.get(self.api_key_env, "")


# vLLM's _SAMPLING_EPS (sampling_params.py): below it a request is greedy.
GREEDY_TEMPERATURE = 1e-5


def check_vllm_sampling(n: int, temperature: float) -> None:
    """Refuse before sending what vLLM's ``SamplingParams`` refuses with HTTP 400 (sampling_params.py)."""
    if temperature > 2.0:
        # _verify_args: "temperature must be in [0, 2]".
        raise VLMRequestError(f"temperature must be in [0, 2] for vLLM, got {temperature!r}")
    if n > 1 and temperature < GREEDY_TEMPERATURE:
        # _verify_greedy_sampling: "n must be 1 when using greedy sampling"; n greedy samples are one.
        raise VLMRequestError(
            f"n={n} samples at temperature {temperature} (greedy) would all be the same and vLLM refuses "
            "them (n must be 1 when using greedy sampling); use n=1 or a temperature > 0"
        )


def message_to_openai(
    message: ChatMessage, image_format: str, jpeg_quality: int, chroma_subsampling: str = "4:2:0"
) -> dict[str, Any]:
    """Convert one message to the chat-completions form; images become base64 data-URL parts."""
    if not message.images:
        return {"role": message.role, "content": message.text}
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, str):
            content.append({"type": "text", "text": part})
        else:
            url = image_data_url(part.rgb, image_format, jpeg_quality, chroma_subsampling)  # type: ignore[arg-type]
            content.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": message.role, "content": content}


def structured_to_vllm(structured: StructuredOutput) -> dict[str, Any]:
    """vLLM's ``structured_outputs`` field for a constraint (``choice`` | ``json`` | ``regex``)."""
    value = list(structured.value) if structured.kind == "choice" else structured.value
    return {structured.kind: value}


def _logsumexp(values: Sequence[float]) -> float:
    if not values:
        return -math.inf
    high = max(values)
    if high == -math.inf:
        return high
    return high + math.log(math.fsum(math.exp(v - high) for v in values))


def _normalise_answer_token(token: str) -> str:
    # Byte-level BPE marks a leading space as "Ġ", SentencePiece as "▁".
    return token.replace("Ġ", " ").replace("▁", " ").strip().lower()


class OpenAIBackend(VLMBackend):
    """Talks to one OpenAI-compatible server through a pooled :class:`httpx.Client`."""

    config_class = OpenAIBackendConfig
    config: OpenAIBackendConfig

    def __init__(self, config: OpenAIBackendConfig, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(config)
        headers = {"Content-Type": "application/json"}
        api_key = config.resolved_api_key()
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._transport = transport
        self._client = self._new_client()
        self._closed = False
        # cancel() marks every call in flight; a call started afterwards gets a fresh flag.
        self._lock = threading.Lock()
        self._in_flight: set[threading.Event] = set()

    def _new_client(self) -> httpx.Client:
        config = self.config
        return httpx.Client(
            base_url=config.base_url.rstrip("/") + "/",
            headers=self._headers,
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(
                max_connections=config.max_connections, max_keepalive_connections=config.max_connections
            ),
            transport=self._transport,
        )

    def cancel(self) -> None:
        """Abandon every call in flight now (thread-safe): its socket is closed, so the server sees the
        client go away (vLLM aborts the generation), and the call raises VLMCanceledError."""
        with self._lock:
            flags = list(self._in_flight)
            for flag in flags:
                flag.set()
            if flags and not self._closed:
                # Closing the pool is what interrupts a blocked read; later calls use a fresh pool.
                old, self._client = self._client, self._new_client()
            else:
                old = None
        if old is not None:
            threading.Thread(target=old.close, name="vlm-cancel-close", daemon=True).start()

    # ---------------------------------------------------------------------------------------------
    # Public API
    # ---------------------------------------------------------------------------------------------

    def build_request(self, messages: Sequence[ChatMessage], params: SamplingParams | None = None) -> dict[str, Any]:
        """Return the JSON body of a chat-completions request (exposed for logging and benchmarks)."""
        messages = validate_messages(messages)
        params = SamplingParams() if params is None else params
        check_vllm_sampling(params.n, params.temperature)
        config = self.config
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [
                message_to_openai(m, config.image_format, config.jpeg_quality, config.jpeg_chroma_subsampling)
                for m in messages
            ],
            "n": params.n,
            "temperature": params.temperature,
            # vLLM's ChatCompletionRequest: max_tokens is deprecated in favour of max_completion_tokens.
            "max_completion_tokens": params.max_tokens,
        }
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = params.top_logprobs
        structured = params.structured or config.structured()
        if structured is not None:
            body["structured_outputs"] = structured_to_vllm(structured)
        if config.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(config.chat_template_kwargs)
        body.update(config.extra_body)
        return body

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` completions in one request."""
        body = self.build_request(messages, params)
        started = time.perf_counter()
        payload = self._post("chat/completions", body)
        return self.parse_response(
            payload, n=params.n, logprobs=params.logprobs, latency_s=time.perf_counter() - started
        )

    def score_yes_no(self, messages: Sequence[ChatMessage], *, yes: str = "yes", no: str = "no") -> YesNoScore:
        """Score the first answer token as yes against no.

        With configured token ids, vLLM returns their exact log-probabilities; otherwise every
        spelling of ``yes``/``no`` among the top alternatives is summed, and a word that is missing
        gets the lowest listed log-probability as an upper bound (``exact=False``).
        """
        config = self.config
        first_token = SamplingParams(max_tokens=1, logprobs=True, top_logprobs=config.yes_no_top_logprobs)
        body = self.build_request(messages, first_token)
        body.pop("structured_outputs", None)
        if config.yes_no_answer_prefix:
            body["messages"].append({"role": "assistant", "content": config.yes_no_answer_prefix})
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        exact_ids = bool(config.yes_token_ids)
        if exact_ids:
            body["logprob_token_ids"] = [*config.yes_token_ids, *config.no_token_ids]
            body["return_tokens_as_token_ids"] = True
        payload = self._post("chat/completions", body)
        result = self.parse_response(payload, n=1, logprobs=True, latency_s=0.0)
        steps = result.samples[0].logprobs
        if not steps:
            raise VLMResponseError("the server returned no token log-probabilities for the yes/no question")
        alternatives = dict(steps[0].top)
        alternatives.setdefault(steps[0].token, steps[0].logprob)
        if exact_ids:
            return self._score_by_ids(alternatives)
        return self._score_by_text(alternatives, yes, no)

    def list_models(self) -> list[str]:
        """The model names the server serves (GET /models)."""
        payload = self._request("GET", "models", None)
        try:
            return [entry["id"] for entry in payload["data"]]
        except (KeyError, TypeError) as error:
            raise VLMResponseError(f"unexpected /models answer: {str(payload)[:200]}") from error

    def close(self) -> None:
        if not self._closed:
            self._client.close()
            self._closed = True

    # ---------------------------------------------------------------------------------------------
    # Response parsing
    # ---------------------------------------------------------------------------------------------

    def parse_response(
        self, payload: Mapping[str, Any], *, n: int, logprobs: bool, latency_s: float
    ) -> GenerationResult:
        """Turn a chat-completions answer into a :class:`GenerationResult`, checking its shape."""
        choices = payload.get("choices")
        if not isinstance(choices, list) or len(choices) != n:
            count = len(choices) if isinstance(choices, list) else choices
            raise VLMResponseError(f"asked for n={n} samples, the server returned {count!r} choices")
        samples = []
        for position, choice in enumerate(sorted(choices, key=lambda c: c.get("index", 0))):
            message = choice.get("message") or {}
            text = message.get("content")
            if not isinstance(text, str):
                raise VLMResponseError(f"choice {position} has no text content: {str(choice)[:200]}")
            token_logprobs = self._parse_logprobs(choice, position) if logprobs else None
            samples.append(Sample(text, choice.get("finish_reason") or "stop", token_logprobs))
        usage = payload.get("usage") or {}
        return GenerationResult(
            samples=tuple(samples),
            model=str(payload.get("model", self.config.model)),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_s=latency_s,
        )

    @staticmethod
    def _parse_logprobs(choice: Mapping[str, Any], position: int) -> tuple[TokenLogprob, ...]:
        content = (choice.get("logprobs") or {}).get("content")
        if not isinstance(content, list):
            raise VLMResponseError(
                f"log-probabilities were requested but choice {position} has none "
                "(is the server started with --max-logprobs high enough?)"
            )
        try:
            return tuple(
                TokenLogprob(
                    str(step["token"]),
                    float(step["logprob"]),
                    tuple((str(alt["token"]), float(alt["logprob"])) for alt in step.get("top_logprobs") or ()),
                )
                for step in content
            )
        except (KeyError, TypeError, ValueError) as error:
            raise VLMResponseError(f"malformed logprobs in choice {position}: {error!r}") from error

    def _score_by_ids(self, alternatives: Mapping[str, float]) -> YesNoScore:
        by_id: dict[int, float] = {}
        for token, logprob in alternatives.items():
            if token.startswith(TOKEN_ID_PREFIX):
                by_id[int(token[len(TOKEN_ID_PREFIX) :])] = logprob
        missing = [i for i in (*self.config.yes_token_ids, *self.config.no_token_ids) if i not in by_id]
        if missing:
            raise VLMResponseError(
                f"the server did not return log-probabilities for token ids {missing}; "
                "does it support vLLM's logprob_token_ids?"
            )
        return YesNoScore(
            _logsumexp([by_id[i] for i in self.config.yes_token_ids]),
            _logsumexp([by_id[i] for i in self.config.no_token_ids]),
        )

    @staticmethod
    def _score_by_text(alternatives: Mapping[str, float], yes: str, no: str) -> YesNoScore:
        yes_key, no_key = yes.strip().lower(), no.strip().lower()
        yes_values = [lp for tok, lp in alternatives.items() if _normalise_answer_token(tok) == yes_key]
        no_values = [lp for tok, lp in alternatives.items() if _normalise_answer_token(tok) == no_key]
        if not yes_values and not no_values:
            raise VLMResponseError(
                f"neither {yes!r} nor {no!r} is among the top answer tokens {sorted(alternatives)[:10]}; "
                "the prompt must ask for a one-word yes/no answer"
            )
        floor = min(alternatives.values())
        return YesNoScore(
            _logsumexp(yes_values) if yes_values else floor,
            _logsumexp(no_values) if no_values else floor,
            exact=bool(yes_values and no_values),
        )

    # ---------------------------------------------------------------------------------------------
    # Transport with bounded retries
    # ---------------------------------------------------------------------------------------------

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None) -> dict[str, Any]:
        if self._closed:
            raise VLMConnectionError(f"{self!r} is closed")
        config = self.config
        url = f"{config.base_url.rstrip('/')}/{path}"
        deadline = time.monotonic() + config.timeout_s
        canceled = threading.Event()
        with self._lock:
            self._in_flight.add(canceled)
        try:
            last_error: VLMError | None = None
            for attempt in range(config.max_retries + 1):
                if attempt:
                    delay = min(config.retry_backoff_s * 2 ** (attempt - 1), max(0.0, deadline - time.monotonic()))
                    logger.warning(
                        "VLM request to %s failed (%s); retry %d/%d in %.2f s",
                        url,
                        last_error,
                        attempt,
                        config.max_retries,
                        delay,
                    )
                    if canceled.wait(delay):
                        raise self._canceled(method, url)
                if time.monotonic() >= deadline:
                    break
                outcome = self._attempt(method, path, body, url, deadline, canceled, attempt)
                if isinstance(outcome, dict):
                    return outcome
                last_error = outcome
            if last_error is None or time.monotonic() >= deadline:
                raise VLMTimeoutError(
                    f"{method} {url} got no answer within timeout_s={config.timeout_s} (the bound of the whole "
                    f"call, retries included){f'; last error: {last_error}' if last_error else ''}"
                )
            raise last_error
        finally:
            with self._lock:
                self._in_flight.discard(canceled)

    def _canceled(self, method: str, url: str) -> VLMCanceledError:
        return VLMCanceledError(f"{method} {url} was canceled; the request was abandoned and not retried")

    def _attempt(  # noqa: PLR0917 - one private call site
        self, method, path, body, url, deadline, canceled, attempt
    ) -> dict[str, Any] | VLMError:
        """One HTTP exchange in a worker thread, waited for until done, canceled or past the deadline.

        Returns the JSON answer, or the error to retry with (only one that never reached the server);
        raises everything else.
        """
        config = self.config
        client = self._client
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                remaining = max(0.001, deadline - time.monotonic())
                timeout = httpx.Timeout(remaining, connect=min(config.connect_timeout_s, remaining))
                box["response"] = client.request(method, path, json=body, timeout=timeout)
            except BaseException as error:  # handed to the waiting thread
                box["error"] = error
            finally:
                done.set()

        if canceled.is_set():
            raise self._canceled(method, url)
        threading.Thread(target=run, name="vlm-request", daemon=True).start()
        while not done.wait(_POLL_S):
            if canceled.is_set():
                raise self._canceled(method, url)
            if time.monotonic() >= deadline + _POLL_S:
                # httpx's read timeout is per read, not per request: abandon it like a cancel.
                self._abandon(client)
                raise VLMTimeoutError(
                    f"{method} {url} got no answer within timeout_s={config.timeout_s} (the bound of the whole "
                    "call); not retried, the server may still be working on it"
                )
        if canceled.is_set():
            raise self._canceled(method, url)
        error = box.get("error")
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
            return VLMConnectionError(
                f"cannot reach the VLM server at {url} ({type(error).__name__}: {error}) after "
                f"{attempt + 1} attempt(s); is it running and is base_url right?"
            )
        if isinstance(error, httpx.TimeoutException):
            raise VLMTimeoutError(
                f"{method} {url} timed out ({type(error).__name__}; timeout_s={config.timeout_s} for the whole "
                "call); not retried, the server may still be working on it"
            ) from error
        if isinstance(error, httpx.TransportError):
            raise VLMConnectionError(
                f"the connection to the VLM server at {url} failed mid-request ({type(error).__name__}: {error}); "
                "not retried, the server may have received it"
            ) from error
        if error is not None:
            raise error
        response = box["response"]
        if response.status_code == 200:
            try:
                return response.json()
            except ValueError as exc:
                raise VLMResponseError(f"{url} answered 200 with non-JSON: {response.text[:200]!r}") from exc
        raise self._status_error(response, url)

    def _abandon(self, client: httpx.Client) -> None:
        with self._lock:
            if self._client is client and not self._closed:
                self._client = self._new_client()
        threading.Thread(target=client.close, name="vlm-abandon-close", daemon=True).start()

    def _status_error(self, response: httpx.Response, url: str) -> VLMServerError:
        status = response.status_code
        try:
            detail = response.json()
            detail = detail.get("error", detail) if isinstance(detail, dict) else detail
            message = detail.get("message", detail) if isinstance(detail, dict) else detail
        except ValueError:
            message = response.text
        message = str(message)[:500]
        if status == 404 and "model" in message.lower():
            served = ""
            try:
                served = f"; the server serves {self._served_models_quietly()}"
            except Exception:  # listing is a courtesy; the 404 is the error to report
                served = ""
            return VLMModelNotFoundError(
                f"the server at {self.config.base_url} does not serve model {self.config.model!r}{served} "
                f"(HTTP 404: {message})",
                status,
            )
        return VLMServerError(f"{url} answered HTTP {status}: {message}", status)

    def _served_models_quietly(self) -> list[str]:
        response = self._client.get("models")
        response.raise_for_status()
        return [entry["id"] for entry in response.json()["data"]]
