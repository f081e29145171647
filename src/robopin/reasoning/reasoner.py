"""The *reason* stage: a query (prompt, images, how to validate an answer) in, a chosen answer out.

:class:`SingleSampleReasoner` asks the backend for one sample and validates it. Other strategies
plug in by configuration through :func:`make_reasoner` (``reasoner: {type: ..., ...}`` in the
reasoning config) without touching the loop: E-TTS (``type: etts``, in ``robopin.reasoning.tts``)
samples M traces × N actions, scores them with the backend's verifier (``score_yes_no``) and picks
one. A reasoner type is a factory ``(settings, backend) -> Reasoner`` in :data:`REASONERS`,
registered with ``@REASONERS.register("<type>")`` in its module; :func:`register_reasoner` adds one
from outside (the factory itself, or the path of a module that registers it when imported).

Every query carries ``interpret``: the function that validates a sample in this mode (PinCoT,
R^3 subtask or RoboGPT-R1 plan), so a reasoner can rank and retry without knowing the mode.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from robopin.reasoning.errors import ReasoningConfigError, TaskCanceled, TaskRefusal, UnknownReasonerError
from robopin.reasoning.protocols import Observation
from robopin.registry import Registry
from robopin.vlm.base import ChatMessage, SamplingParams, VLMBackend
from robopin.vlm.errors import (
    BackendUnavailableError,
    VLMCanceledError,
    VLMConnectionError,
    VLMError,
    VLMModelNotFoundError,
    VLMRequestError,
    VLMTimeoutError,
)

QueryKind = Literal["pointing", "step", "subtask", "plan"]


class Interpretation(Protocol):
    """A validated model answer (see :mod:`robopin.reasoning.interpret`)."""

    @property
    def valid(self) -> bool: ...

    @property
    def refusal(self) -> TaskRefusal | None: ...


@dataclass(frozen=True)
class ReasoningQuery:
    """One question to the model.

    ``kind`` is the prompt kind; ``instruction`` the task (or the subtask being grounded);
    ``prompt`` the text part; ``messages`` the full request (images included); ``interpret``
    validates one sampled text; ``history`` the earlier steps' summaries (for verifiers);
    ``should_stop`` turns True once the task is canceled (a reasoner making several model calls
    checks it between them).
    """

    kind: QueryKind
    instruction: str
    prompt: str
    messages: tuple[ChatMessage, ...]
    observation: Observation
    interpret: Callable[[str], Interpretation]
    step: int = 0
    history: tuple[str, ...] = ()
    should_stop: Callable[[], bool] = field(default=lambda: False, compare=False, repr=False)


@dataclass(frozen=True)
class Reasoning:
    """The reason stage's answer: the chosen text and its interpretation, with accounting.

    ``candidates`` holds every sampled text (the chosen one included) for logs; ``scores`` any
    per-candidate scores a strategy computed (same order).
    """

    text: str
    interpretation: Any
    model: str
    generation_time_s: float
    candidates: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


class Reasoner(Protocol):
    """Answers a :class:`ReasoningQuery`; raises ``TaskRefusal`` (``vlm_timeout``, …) when the model fails."""

    def reason(self, query: ReasoningQuery) -> Reasoning: ...


def refusal_from_vlm_error(error: VLMError) -> TaskRefusal:
    """Name a backend failure: ``canceled``, ``vlm_timeout``, ``vlm_unavailable`` or ``vlm_error``."""
    if isinstance(error, VLMCanceledError):  # the task's cancel abandoned the request (VLMBackend.cancel)
        return TaskCanceled(f"canceled during the model call ({error})")
    if isinstance(error, VLMTimeoutError):
        return TaskRefusal("vlm_timeout", str(error))
    if isinstance(error, VLMConnectionError | VLMModelNotFoundError | BackendUnavailableError):
        return TaskRefusal("vlm_unavailable", str(error))
    return TaskRefusal("vlm_error", f"{type(error).__name__}: {error}")


class SingleSampleReasoner:
    """One sample per query at the configured temperature (RoboPIN's greedy deployment)."""

    def __init__(self, backend: VLMBackend, *, temperature: float = 0.0, max_tokens: int = 1024) -> None:
        self.backend = backend
        self.sampling = SamplingParams(n=1, temperature=temperature, max_tokens=max_tokens)

    def reason(self, query: ReasoningQuery) -> Reasoning:
        """Sample once and validate the sample."""
        start = time.perf_counter()
        try:
            result = self.backend.generate(list(query.messages), self.sampling)
        except VLMError as error:
            raise refusal_from_vlm_error(error) from error
        elapsed = time.perf_counter() - start
        if not result.samples:
            raise TaskRefusal("vlm_error", f"model {result.model!r} returned no sample")
        text = result.samples[0].text
        generation_time_s = result.latency_s if result.latency_s > 0 else elapsed
        return Reasoning(text, query.interpret(text), result.model, generation_time_s, candidates=(text,))

    def __repr__(self) -> str:
        return f"SingleSampleReasoner({self.backend!r}, temperature={self.sampling.temperature})"


ReasonerFactory = Callable[[Mapping[str, Any], VLMBackend], Reasoner]

# Type name -> reasoner factory; a declared module (test-time scaling pulls in the action verifiers)
# is imported only when its type is configured.
REASONERS: Registry[None, ReasonerFactory] = Registry(
    "reasoner", unknown_error=UnknownReasonerError, config_error=ReasoningConfigError,
    unavailable_error=ReasoningConfigError,
)
REASONERS.declare("etts", "robopin.reasoning.tts.reasoner")


@REASONERS.register("single")
def _make_single(settings: Mapping[str, Any], backend: VLMBackend) -> SingleSampleReasoner:
    unknown = sorted(set(settings) - {"type", "temperature", "max_tokens"})
    if unknown:
        raise ReasoningConfigError(
            f"unknown setting(s) {unknown} for reasoner 'single'; expected temperature, max_tokens"
        )
    try:
        return SingleSampleReasoner(
            backend, temperature=settings.get("temperature", 0.0), max_tokens=settings.get("max_tokens", 1024)
        )
    except VLMRequestError as error:
        raise ReasoningConfigError(f"reasoner 'single': {error}") from error


def register_reasoner(type_name: str, factory: str | ReasonerFactory) -> None:
    """Add a reasoner type: its factory, or the path of a module that registers it when first used."""
    if not type_name or not type_name.isidentifier():
        raise ReasoningConfigError(f"reasoner type name must be an identifier, got {type_name!r}")
    if isinstance(factory, str):
        REASONERS.declare(type_name, factory)
    else:
        REASONERS.add_backend(type_name, factory)


def reasoner_types() -> tuple[str, ...]:
    return REASONERS.types()


def make_reasoner(
    settings: Mapping[str, Any], backend: VLMBackend, *, defaults: Mapping[str, Any] | None = None
) -> Reasoner:
    """Build the reasoner ``settings["type"]`` names; ``defaults`` fill settings it does not give."""
    type_name = settings.get("type")
    factory = REASONERS.backend_class(type_name)
    merged = {**(defaults or {}), **settings} if type_name == "single" else dict(settings)
    return factory(merged, backend)
