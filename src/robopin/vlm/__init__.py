"""Vision-language model backends: one contract (``base``) for vLLM over HTTP, local transformers
and the simulator's oracle, plus the prompt, image and point-convention helpers at that boundary.

Importing this package needs only numpy; a backend's own dependencies load when it is built.
"""

from robopin.vlm.base import (
    VLM_BACKENDS,
    ChatMessage,
    GenerationResult,
    Sample,
    SamplingParams,
    StructuredOutput,
    TokenLogprob,
    ViewImage,
    VLMBackend,
    VLMConfig,
    YesNoScore,
    backend_types,
    config_from_dict,
    make_backend,
    register_backend,
)
from robopin.vlm.errors import (
    BackendUnavailableError,
    UnknownBackendError,
    VLMConfigError,
    VLMConnectionError,
    VLMError,
    VLMModelNotFoundError,
    VLMRequestError,
    VLMResponseError,
    VLMServerError,
    VLMTimeoutError,
)
from robopin.vlm.points import PointConvention
from robopin.vlm.prompts import PINCOT_ANSWER_SUFFIX, build_messages, build_pincot_messages

__all__ = [
    "PINCOT_ANSWER_SUFFIX",
    "VLM_BACKENDS",
    "BackendUnavailableError",
    "ChatMessage",
    "GenerationResult",
    "PointConvention",
    "Sample",
    "SamplingParams",
    "StructuredOutput",
    "TokenLogprob",
    "UnknownBackendError",
    "VLMBackend",
    "VLMConfig",
    "VLMConfigError",
    "VLMConnectionError",
    "VLMError",
    "VLMModelNotFoundError",
    "VLMRequestError",
    "VLMResponseError",
    "VLMServerError",
    "VLMTimeoutError",
    "ViewImage",
    "YesNoScore",
    "backend_types",
    "build_messages",
    "build_pincot_messages",
    "config_from_dict",
    "make_backend",
    "register_backend",
]
