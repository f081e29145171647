"""The contract every VLM backend meets: chat messages with images in, sampled texts out.

A backend (vLLM over HTTP, local transformers, the simulator's oracle) takes a list of
:class:`ChatMessage` whose parts are text and :class:`ViewImage` (an RGB camera view with its
``img_idx``), and returns a :class:`GenerationResult` with ``n`` samples, token log-probabilities when
asked, and :meth:`VLMBackend.score_yes_no` for verifiers (E-TTS). Each backend declares the point
convention of its model (:class:`~robopin.vlm.points.PointConvention`) so callers can map the points
in its text back to pixels of the original image.

Backends are built from a config dataclass by :func:`make_backend`, keyed by the config's ``type``
through :data:`VLM_BACKENDS` and imported lazily, so ``httpx`` or ``torch`` is needed only when that
backend is configured.

Writing a backend (the simulator's oracle is one: ``robopin.sim.oracle_backend``): in the module
declared for its type (:func:`register_backend`), define ``<Name>Config(VLMConfig)`` as a
``@dataclass(kw_only=True)`` with ``type: ClassVar[str] = "<type>"`` and validation in
``__post_init__`` (call super's first), and ``<Name>(VLMBackend)`` with ``config_class = <Name>Config``
whose ``__init__(self, config)`` calls ``super().__init__(config)`` and which implements
:meth:`VLMBackend._generate` (it gets messages and :class:`SamplingParams` already checked by
:meth:`VLMBackend.generate`) and :meth:`VLMBackend.score_yes_no`. Text it returns
carries points in the convention its config declares. ``robopin.vlm.contract.check_backend_contract``
checks the result shapes in the backend's own tests.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from robopin.registry import RegisteredBackend, RegisteredConfig, Registry
from robopin.settings import setting
from robopin.vlm.errors import (
    BackendUnavailableError,
    UnknownBackendError,
    VLMConfigError,
    VLMRequestError,
)
from robopin.vlm.points import (
    POINT_CONVENTIONS,
    QWEN25_MAX_PIXELS,
    QWEN25_MIN_PIXELS,
    QWEN25_RESIZE_FACTOR,
    PointConvention,
)

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")


# --------------------------------------------------------------------------------------------------
# Messages and images
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ViewImage:
    """One camera view as the model sees it: an RGB uint8 image (H, W, 3) and its place in the prompt.

    ``img_idx`` is the index the model uses in ``img_idx="…"`` anchors: the order of the images in
    the request (static camera 0, wrist camera 1, … fixed by configuration).
    """

    rgb: np.ndarray
    name: str = ""
    img_idx: int = 0

    def __post_init__(self) -> None:
        rgb = self.rgb
        if not isinstance(rgb, np.ndarray):
            raise VLMRequestError(f"ViewImage.rgb must be a numpy array, got {type(rgb).__name__}")
        if rgb.ndim != 3 or rgb.shape[2] != 3:
            raise VLMRequestError(f"ViewImage.rgb must have shape (H, W, 3), got {rgb.shape}")
        if rgb.dtype != np.uint8:
            raise VLMRequestError(f"ViewImage.rgb must be uint8 RGB, got dtype {rgb.dtype}")
        if rgb.shape[0] == 0 or rgb.shape[1] == 0:
            raise VLMRequestError(f"ViewImage.rgb is empty: shape {rgb.shape}")
        if self.img_idx < 0:
            raise VLMRequestError(f"ViewImage.img_idx must be >= 0, got {self.img_idx}")

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])

    def __repr__(self) -> str:
        return f"ViewImage(name={self.name!r}, img_idx={self.img_idx}, size={self.width}x{self.height})"


MessagePart = str | ViewImage


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn: a role and an ordered sequence of text and image parts."""

    role: Role
    parts: tuple[MessagePart, ...]

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise VLMRequestError(f"message role must be one of {ROLES}, got {self.role!r}")
        if isinstance(self.parts, str | ViewImage):
            object.__setattr__(self, "parts", (self.parts,))
        else:
            object.__setattr__(self, "parts", tuple(self.parts))
        if not self.parts:
            raise VLMRequestError(f"a {self.role} message needs at least one part")
        for part in self.parts:
            if not isinstance(part, str | ViewImage):
                raise VLMRequestError(f"message parts must be str or ViewImage, got {type(part).__name__}")
        if self.role != "user" and any(isinstance(p, ViewImage) for p in self.parts):
            raise VLMRequestError(f"images are only allowed in user messages, not in a {self.role} message")

    @property
    def text(self) -> str:
        """The text parts joined, images left out."""
        return "".join(p for p in self.parts if isinstance(p, str))

    @property
    def images(self) -> tuple[ViewImage, ...]:
        return tuple(p for p in self.parts if isinstance(p, ViewImage))


def images_in(messages: Sequence[ChatMessage]) -> list[ViewImage]:
    """Return every image of the conversation in prompt order (the order the model numbers them)."""
    return [image for message in messages for image in message.images]


def validate_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Check a conversation before it is sent: non-empty, ChatMessage items, images numbered 0..N-1.

    The model can only refer to an image by its position, so each image's ``img_idx`` must equal its
    position among all images of the request.
    """
    messages = list(messages)
    if not messages:
        raise VLMRequestError("messages must not be empty")
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            raise VLMRequestError(f"messages[{index}] must be a ChatMessage, got {type(message).__name__}")
    for position, image in enumerate(images_in(messages)):
        if image.img_idx != position:
            raise VLMRequestError(
                f"image {image.name!r} has img_idx={image.img_idx} but is image number {position} "
                f"of the request; images must appear in img_idx order 0, 1, …"
            )
    return messages


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability, and the most likely alternatives at that step."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Sample:
    """One sampled completion."""

    text: str
    finish_reason: str = "stop"
    logprobs: tuple[TokenLogprob, ...] | None = None

    @property
    def total_logprob(self) -> float | None:
        """Sum of the token log-probabilities (None when they were not requested)."""
        if self.logprobs is None:
            return None
        return math.fsum(t.logprob for t in self.logprobs)


@dataclass(frozen=True)
class GenerationResult:
    """What :meth:`VLMBackend.generate` returns: ``n`` samples plus accounting."""

    samples: tuple[Sample, ...]
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.samples]


@dataclass(frozen=True)
class YesNoScore:
    """A verifier's answer: log-probabilities of the yes and no tokens and P(yes | yes or no)."""

    logprob_yes: float
    logprob_no: float
    exact: bool = True
    """False when a token's log-probability is only an upper bound (it fell outside the top-k list)."""

    @property
    def p_yes(self) -> float:
        # Renormalise over the two answers only: the verifier's question admits nothing else.
        high = max(self.logprob_yes, self.logprob_no)
        if high == -math.inf:
            return 0.5
        yes = math.exp(self.logprob_yes - high)
        no = math.exp(self.logprob_no - high)
        return yes / (yes + no)


@dataclass(frozen=True)
class StructuredOutput:
    """A constraint on the output's shape, for servers that support guided decoding.

    ``kind`` is ``choice`` (value: list of strings), ``json`` (value: JSON schema dict) or ``regex``
    (value: pattern string).
    """

    kind: Literal["choice", "json", "regex"]
    value: Any

    def __post_init__(self) -> None:
        if self.kind == "choice":
            choices = self.value
            is_strings = isinstance(choices, list | tuple) and all(isinstance(v, str) for v in choices)
            if not (is_strings and choices):
                raise VLMRequestError(f"a choice constraint needs non-empty list of strings, got {choices!r}")
        elif self.kind == "json":
            if not isinstance(self.value, Mapping):
                raise VLMRequestError(f"a json constraint needs a JSON schema dict, got {self.value!r}")
        elif self.kind == "regex":
            if not isinstance(self.value, str) or not self.value:
                raise VLMRequestError(f"a regex constraint needs a non-empty pattern, got {self.value!r}")
        else:
            raise VLMRequestError(f"structured output kind must be choice, json or regex, got {self.kind!r}")


# The OpenAI chat-completions API takes top_logprobs in 0..20 (and only together with logprobs=true).
MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one :meth:`VLMBackend.generate` call, validated once when it is built.

    The fields mean what the OpenAI chat-completions API and vLLM's ``SamplingParams`` mean by them:
    ``n`` completions of at most ``max_tokens`` tokens each, at ``temperature`` (0: greedy) with
    nucleus ``top_p`` (None: the backend's default, no cut) and ``seed`` (None: unseeded); generation
    ends at any ``stop`` string; ``logprobs`` asks for each token's log-probability and
    ``top_logprobs`` for that many alternatives per step; ``structured`` constrains the output's
    shape on servers with guided decoding. A backend may refuse a combination its runtime cannot do
    (vLLM: ``n > 1`` greedy samples; transformers: ``structured``), naming it.
    """

    n: int = 1
    temperature: float = 0.0
    max_tokens: int = 1024
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0
    structured: StructuredOutput | None = None

    def __post_init__(self) -> None:
        for name in ("n", "max_tokens"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise VLMRequestError(f"{name} must be an integer >= 1, got {value!r}")
        temperature = self.temperature
        if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature >= 0.0:
            raise VLMRequestError(f"temperature must be a number >= 0, got {temperature!r}")
        if not math.isfinite(temperature):
            raise VLMRequestError(f"temperature must be finite, got {temperature!r}")
        object.__setattr__(self, "temperature", float(temperature))
        top_p = self.top_p
        if top_p is not None:
            # vLLM sampling_params.py _verify_args: "top_p must be in (0, 1]".
            if isinstance(top_p, bool) or not isinstance(top_p, int | float) or not 0.0 < top_p <= 1.0:
                raise VLMRequestError(f"top_p must be in (0, 1] or None, got {top_p!r}")
            object.__setattr__(self, "top_p", float(top_p))
        if self.seed is not None and not _is_int(self.seed):
            raise VLMRequestError(f"seed must be an integer or None, got {self.seed!r}")
        stop = self.stop
        stop = () if stop is None else (stop,) if isinstance(stop, str) else stop
        if not isinstance(stop, Sequence) or not all(isinstance(s, str) and s for s in stop):
            # vLLM refuses an empty stop string ("stop cannot contain an empty string").
            raise VLMRequestError(f"stop must be a list of non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", tuple(stop))
        if not isinstance(self.logprobs, bool):
            raise VLMRequestError(f"logprobs must be True or False, got {self.logprobs!r}")
        top_logprobs = self.top_logprobs
        if not _is_int(top_logprobs) or not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
            raise VLMRequestError(f"top_logprobs must be an integer in 0..{MAX_TOP_LOGPROBS}, got {top_logprobs!r}")
        if top_logprobs and not self.logprobs:
            raise VLMRequestError(f"top_logprobs={top_logprobs} needs logprobs=True (alternatives of what?)")
        if self.structured is not None and not isinstance(self.structured, StructuredOutput):
            raise VLMRequestError(f"structured must be a StructuredOutput or None, got {self.structured!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


# Type name -> config and backend class; a backend module (and httpx, torch, …) is imported only when used.
VLM_BACKENDS: Registry[VLMConfig, VLMBackend] = Registry(
    "VLM backend", unknown_error=UnknownBackendError, config_error=VLMConfigError,
    unavailable_error=BackendUnavailableError,
)
VLM_BACKENDS.declare("openai", "robopin.vlm.openai_backend", requires=("httpx", "pillow"))
VLM_BACKENDS.declare("transformers", "robopin.vlm.transformers_backend", requires=("torch", "transformers", "pillow"))
# Implemented by the simulator: answers from ground truth.
VLM_BACKENDS.declare("oracle", "robopin.sim.oracle_backend")
# The oracle with named model errors at set rates.
VLM_BACKENDS.declare("imperfect", "robopin.sim.imperfect")


@dataclass(kw_only=True)
class VLMConfig(RegisteredConfig, registry=VLM_BACKENDS):
    """Fields every backend shares. Subclasses set ``type`` (their registry key) and add their own fields.

    ``point_convention`` is how the model writes points; for ``pixels_resized`` the resize fields
    must match the processor the model is served with.
    """

    type: ClassVar[str] = ""

    model: str = setting("vlm", "model name (the served name for a server: vLLM's --served-model-name)")
    point_convention: str = setting("norm1000", f"how the model writes points: {', '.join(POINT_CONVENTIONS)}")
    resize_factor: int = setting(QWEN25_RESIZE_FACTOR, "pixels_resized: the processor's resize factor (patch size)")
    min_pixels: int = setting(QWEN25_MIN_PIXELS, "pixels_resized: the processor's min_pixels")
    max_pixels: int = setting(QWEN25_MAX_PIXELS, "pixels_resized: the processor's max_pixels")

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise VLMConfigError(f"model must be a non-empty string, got {self.model!r}")
        if self.point_convention not in POINT_CONVENTIONS:
            raise VLMConfigError(f"point_convention must be one of {POINT_CONVENTIONS}, got {self.point_convention!r}")
        # Builds and validates the convention once, so a bad resize field fails at load time.
        self.convention()

    def convention(self) -> PointConvention:
        """The model's point convention as an object that converts points."""
        return PointConvention(
            self.point_convention,  # type: ignore[arg-type]
            resize_factor=self.resize_factor,
            min_pixels=self.min_pixels,
            max_pixels=self.max_pixels,
        )


# --------------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------------


class VLMBackend(abc.ABC, RegisteredBackend, registry=VLM_BACKENDS):
    """A vision-language model that answers chat messages with images.

    Backends are context managers; :meth:`close` releases connections or model memory. A backend
    names its config dataclass in ``config_class``, which registers it under that config's ``type``.
    """

    config_class: ClassVar[type[VLMConfig]] = VLMConfig

    def __init__(self, config: VLMConfig) -> None:
        self.config = config

    @property
    def point_convention(self) -> PointConvention:
        """How this backend's model writes image points."""
        return self.config.convention()

    def generate(self, messages: Sequence[ChatMessage], params: SamplingParams | None = None) -> GenerationResult:
        """Sample ``params.n`` completions of the conversation (default: one greedy sample).

        The messages and parameters are checked here, once, before the backend's :meth:`_generate`.
        """
        if params is None:
            params = SamplingParams()
        elif not isinstance(params, SamplingParams):
            raise VLMRequestError(f"generate takes its sampling as a SamplingParams, got {type(params).__name__}")
        return self._generate(validate_messages(messages), params)

    @abc.abstractmethod
    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` completions of checked messages (token log-probabilities when ``params.logprobs``)."""

    @abc.abstractmethod
    def score_yes_no(
        self,
        messages: Sequence[ChatMessage],
        *,
        yes: str = "yes",
        no: str = "no",
    ) -> YesNoScore:
        """Score the first answer token of the conversation as ``yes`` against ``no`` (a verifier)."""

    def cancel(self) -> None:  # optional hook: a backend that can abandon a call overrides it
        """Abandon the generate()/score_yes_no() call in flight now, from any thread.

        A backend that supports it makes that call raise :class:`~robopin.vlm.errors.VLMCanceledError`
        within about a second and sends no further request for it; a call started after ``cancel()``
        returns runs normally. This default does nothing (the call in flight finishes), so it is always
        safe to call.
        """

    def close(self) -> None:  # optional hook: most backends hold something to release
        """Release connections or memory; the backend must not be used afterwards."""

    def __enter__(self) -> VLMBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.config.model!r}, points={self.config.point_convention})"


# --------------------------------------------------------------------------------------------------
# Registry and factory
# --------------------------------------------------------------------------------------------------


def register_backend(type_name: str, module: str, *, requires: Sequence[str] = ()) -> None:
    """Declare a backend type whose ``module`` defines its config and backend (a deployment's own server)."""
    VLM_BACKENDS.declare(type_name, module, requires=tuple(requires))


def backend_types() -> tuple[str, ...]:
    """The registered backend type names."""
    return VLM_BACKENDS.types()


def config_from_dict(values: Mapping[str, Any]) -> VLMConfig:
    """Build a backend config from a mapping with a ``type`` key (one YAML block of a deployment)."""
    return VLM_BACKENDS.config_from_dict(values)


def make_backend(config: VLMConfig | Mapping[str, Any]) -> VLMBackend:
    """Build the backend a config names (a config object, or a mapping with a ``type`` key)."""
    if isinstance(config, Mapping):
        config = config_from_dict(config)
    if not isinstance(config, VLMConfig):
        raise VLMConfigError(f"expected a VLMConfig or a mapping, got {type(config).__name__}")
    return VLM_BACKENDS.build(config)
