"""Supported vision-language models: the registry (``models/registry.yaml``), fetching weights into a
local models folder, and the vLLM command that serves each one. ``robopin models …`` is its CLI.

Importing this package needs only pyyaml and numpy; fetching from a hub imports huggingface_hub then.
"""

from robopin.models.errors import (
    IncompleteModelError,
    ModelError,
    ModelFetchError,
    ModelRegistryError,
    ModelServeError,
    ModelSourceUnreachableError,
    UnknownModelError,
)
from robopin.models.fetch import ALLOW_PATTERNS, FetchResult, check_model_folder, fetch_model
from robopin.models.registry import (
    ModelRegistry,
    ModelSpec,
    ServeSpec,
    default_models_dir,
    default_registry_path,
    load_registry,
    model_spec_from_dict,
    registry_from_dict,
    vllm_arguments,
)

__all__ = [
    "ALLOW_PATTERNS",
    "FetchResult",
    "IncompleteModelError",
    "ModelError",
    "ModelFetchError",
    "ModelRegistry",
    "ModelRegistryError",
    "ModelServeError",
    "ModelSourceUnreachableError",
    "ModelSpec",
    "ServeSpec",
    "UnknownModelError",
    "check_model_folder",
    "default_models_dir",
    "default_registry_path",
    "fetch_model",
    "load_registry",
    "model_spec_from_dict",
    "registry_from_dict",
    "vllm_arguments",
]
