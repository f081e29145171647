"""The registry of supported vision-language models: what each one is, how it writes points, and how to serve it.

One YAML file (``models/registry.yaml`` in a checkout, or the file named by ``ROBOPIN_MODEL_REGISTRY``)
lists every model robopin knows: its hub id and revision, the point convention and answer format its
text uses, the prompt template it was trained for, the vLLM arguments it is served with and the GPU
memory it needs. Everything that serves a model (``robopin models serve``, docker/compose.yaml) or
talks to one (the planner's ``vlm`` parameter, from :meth:`ModelSpec.vlm_config`) reads it from here,
so the server's image resizing and the client's point conversion cannot drift apart.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from robopin.models.errors import ModelRegistryError, ModelServeError, UnknownModelError
from robopin.vlm.points import POINT_CONVENTIONS, QWEN25_MAX_PIXELS, QWEN25_MIN_PIXELS
from robopin.vlm.prompts import ANSWER_FORMATS, PROMPT_TEMPLATES

REGISTRY_ENV = "ROBOPIN_MODEL_REGISTRY"
MODELS_DIR_ENV = "ROBOPIN_MODELS_DIR"
_REPO_ROOT = Path(__file__).resolve().parents[3]
CHECKOUT_REGISTRY = _REPO_ROOT / "models" / "registry.yaml"

SCHEMA_VERSION = 1
KINDS = ("hub", "endpoint")
BYTES_PER_PARAMETER = {"bfloat16": 2.0, "float16": 2.0, "float32": 4.0}

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_SERVE_KEYS = {
    "served_model_name": str,
    "max_model_len": int,
    "limit_mm_per_prompt": dict,
    "max_num_seqs": int,
    "max_logprobs": int,
    "dtype": str,
    "tensor_parallel_size": int,
    "gpu_memory_utilization": float,
    "mm_processor_kwargs": dict,
    "extra_args": list,
}
_ENTRY_KEYS = {
    "description", "kind", "hub_id", "revision", "architecture", "parameters_b", "point_convention",
    "answer_format", "prompt_template", "min_pixels", "max_pixels", "serve", "memory", "base_url",
    "api_key_env", "notes",
}  # fmt: skip


@dataclass(frozen=True)
class ServeSpec:
    """vLLM server arguments of one model (``vllm serve`` flags, without the leading dashes)."""

    served_model_name: str = "vlm"
    max_model_len: int = 32768
    limit_mm_per_prompt: Mapping[str, int] = field(default_factory=lambda: {"image": 4, "video": 0})
    max_num_seqs: int = 16
    max_logprobs: int = 20
    dtype: str = "bfloat16"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.served_model_name.strip():
            raise ModelRegistryError("serve.served_model_name must be a non-empty string")
        for name in ("max_model_len", "max_num_seqs", "tensor_parallel_size"):
            if getattr(self, name) < 1:
                raise ModelRegistryError(f"serve.{name} must be >= 1, got {getattr(self, name)!r}")
        if not 0 <= self.max_logprobs <= 20:
            # The OpenAI backend asks for at most 20 alternatives (top_logprobs <= 20).
            raise ModelRegistryError(f"serve.max_logprobs must be in 0..20, got {self.max_logprobs!r}")
        if not 0.05 <= self.gpu_memory_utilization <= 1.0:
            raise ModelRegistryError(
                f"serve.gpu_memory_utilization must be in 0.05..1.0, got {self.gpu_memory_utilization!r}"
            )
        if self.dtype not in BYTES_PER_PARAMETER:
            raise ModelRegistryError(f"serve.dtype must be one of {tuple(BYTES_PER_PARAMETER)}, got {self.dtype!r}")
        for key, value in self.limit_mm_per_prompt.items():
            if key not in ("image", "video") or not isinstance(value, int) or value < 0:
                raise ModelRegistryError(
                    f"serve.limit_mm_per_prompt must map image/video to counts >= 0, got {key!r}: {value!r}"
                )
        if self.limit_mm_per_prompt.get("image", 0) < 1:
            raise ModelRegistryError("serve.limit_mm_per_prompt.image must be >= 1: every query carries camera views")
        if not all(isinstance(arg, str) for arg in self.extra_args):
            raise ModelRegistryError(f"serve.extra_args must be a list of strings, got {list(self.extra_args)!r}")


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry. ``kind`` is ``hub`` (weights on a model hub, served by vLLM) or ``endpoint``
    (any OpenAI-compatible server that someone else runs; nothing to fetch or serve)."""

    name: str
    kind: str
    description: str
    point_convention: str
    answer_format: str
    prompt_template: str
    hub_id: str = ""
    revision: str = "main"
    architecture: str = ""
    parameters_b: float = 0.0
    min_pixels: int = QWEN25_MIN_PIXELS
    max_pixels: int = QWEN25_MAX_PIXELS
    serve: ServeSpec = field(default_factory=ServeSpec)
    min_gpu_gb: float = 0.0
    base_url: str = ""
    api_key_env: str = "ROBOPIN_VLM_API_KEY"
    notes: str = ""

    def __post_init__(self) -> None:
        where = f"model {self.name!r}"
        if not _NAME.match(self.name):
            raise ModelRegistryError(
                f"model name must match {_NAME.pattern} (lower case, no spaces), got {self.name!r}"
            )
        if self.kind not in KINDS:
            raise ModelRegistryError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.description.strip():
            raise ModelRegistryError(f"{where}: description must not be empty")
        if self.point_convention not in POINT_CONVENTIONS:
            raise ModelRegistryError(
                f"{where}: point_convention must be one of {POINT_CONVENTIONS}, got {self.point_convention!r}"
            )
        if self.answer_format not in ANSWER_FORMATS:
            raise ModelRegistryError(
                f"{where}: answer_format must be one of {ANSWER_FORMATS}, got {self.answer_format!r}"
            )
        if self.prompt_template not in PROMPT_TEMPLATES:
            raise ModelRegistryError(
                f"{where}: prompt_template must be one of {PROMPT_TEMPLATES}, got {self.prompt_template!r}"
            )
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ModelRegistryError(
                f"{where}: need 0 < min_pixels <= max_pixels, got {self.min_pixels} and {self.max_pixels}"
            )
        if self.kind == "hub":
            if not _HUB_ID.match(self.hub_id):
                raise ModelRegistryError(f"{where}: hub_id must look like 'owner/name', got {self.hub_id!r}")
            if not self.revision.strip():
                raise ModelRegistryError(f"{where}: revision must not be empty (a branch, tag or commit)")
            if not self.parameters_b > 0:
                raise ModelRegistryError(f"{where}: parameters_b must be > 0 (billions), got {self.parameters_b!r}")
            if self.min_gpu_gb < self.weights_gb:
                raise ModelRegistryError(
                    f"{where}: memory.min_gpu_gb {self.min_gpu_gb} is less than its {self.serve.dtype} weights "
                    f"alone ({self.weights_gb:.1f} GB); expected at least that plus room for the KV cache"
                )
        elif not self.base_url.startswith(("http://", "https://")):
            raise ModelRegistryError(
                f"{where}: an endpoint needs base_url starting with http:// or https://, got {self.base_url!r}"
            )

    @property
    def weights_gb(self) -> float:
        """GPU memory of the weights alone (parameters × bytes per parameter of the served dtype), in GB."""
        return self.parameters_b * BYTES_PER_PARAMETER[self.serve.dtype]

    def vlm_config(self, base_url: str | None = None) -> dict[str, Any]:
        """The planner's ``vlm`` parameter for this model behind an OpenAI-compatible server.

        ``base_url`` is where the server listens (default: the entry's own for an endpoint, else a
        vLLM server on this machine). For ``pixels_resized`` models the resize limits are the ones the
        server is started with (:func:`vllm_arguments`), so points map back to the right pixels.
        """
        url = base_url or self.base_url or "http://127.0.0.1:8000/v1"
        config: dict[str, Any] = {
            "type": "openai",
            "base_url": url,
            "model": self.serve.served_model_name,
            "point_convention": self.point_convention,
        }
        if self.kind == "endpoint":
            config["api_key_env"] = self.api_key_env
        if self.point_convention == "pixels_resized":
            config["min_pixels"] = self.min_pixels
            config["max_pixels"] = self.max_pixels
        return config


    def reasoning_config(self) -> dict[str, str]:
        """The planner's ``reasoning`` settings this model needs: how its requests are worded
        (``prompt_template``) and what its answers look like (``answer_format``)."""
        return {"prompt_template": self.prompt_template, "answer_format": self.answer_format}


def vllm_arguments(
    spec: ModelSpec,
    model_path: str | os.PathLike[str] | None = None,
    *,
    host: str = "0.0.0.0",
    port: int = 8000,
    tensor_parallel_size: int | None = None,
    gpu_memory_utilization: float | None = None,
) -> list[str]:
    """Arguments after ``vllm serve`` for ``spec``: the model (a local folder, else the hub id), then flags.

    The flags are the project's agreed set (served name ``vlm``, 32k context, 4 images and no video
    per prompt, 16 sequences, 20 logprobs), overridable per entry in the registry.
    """
    if spec.kind != "hub":
        raise ModelServeError(
            f"model {spec.name!r} is an OpenAI-compatible endpoint at {spec.base_url}; it is served elsewhere, "
            "not by robopin"
        )
    if not 0 < port < 65536:
        raise ModelServeError(f"port must be in 1..65535, got {port!r}")
    serve = spec.serve
    tensor_parallel = serve.tensor_parallel_size if tensor_parallel_size is None else tensor_parallel_size
    memory_fraction = serve.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    if tensor_parallel < 1:
        raise ModelServeError(f"tensor_parallel_size must be >= 1, got {tensor_parallel!r}")
    if not 0.05 <= memory_fraction <= 1.0:
        raise ModelServeError(f"gpu_memory_utilization must be in 0.05..1.0, got {memory_fraction!r}")
    args = [
        str(model_path) if model_path is not None else spec.hub_id,
        "--served-model-name", serve.served_model_name,
        "--host", host,
        "--port", str(port),
        "--dtype", serve.dtype,
        "--max-model-len", str(serve.max_model_len),
        "--limit-mm-per-prompt", json.dumps(dict(serve.limit_mm_per_prompt), separators=(",", ":")),
        "--max-num-seqs", str(serve.max_num_seqs),
        "--max-logprobs", str(serve.max_logprobs),
        "--gpu-memory-utilization", f"{memory_fraction:g}",
    ]  # fmt: skip
    if model_path is None and spec.revision != "main":
        args += ["--revision", spec.revision]
    if tensor_parallel > 1:
        args += ["--tensor-parallel-size", str(tensor_parallel)]
    processor_kwargs = dict(serve.mm_processor_kwargs)
    if spec.point_convention == "pixels_resized":
        # The client converts resized-pixel answers with these limits: the server must resize the same way.
        processor_kwargs.setdefault("min_pixels", spec.min_pixels)
        processor_kwargs.setdefault("max_pixels", spec.max_pixels)
    if processor_kwargs:
        args += ["--mm-processor-kwargs", json.dumps(processor_kwargs, separators=(",", ":"), sort_keys=True)]
    return args + list(serve.extra_args)


@dataclass(frozen=True)
class ModelRegistry:
    """The loaded registry: model specs by name, in file order."""

    models: Mapping[str, ModelSpec]
    source: Path | None = None

    def __getitem__(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise UnknownModelError(
                f"unknown model {name!r}; the registry {self.source or ''} lists {', '.join(self.models)}"
            ) from None

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self.models.values())

    def __len__(self) -> int:
        return len(self.models)

    def names(self) -> list[str]:
        return list(self.models)


def default_registry_path() -> Path:
    """``$ROBOPIN_MODEL_REGISTRY`` if set, else ``models/registry.yaml`` of the checkout robopin runs from."""
    configured = os.environ.get(REGISTRY_ENV)
    return Path(configured) if configured else CHECKOUT_REGISTRY


def default_models_dir() -> Path:
    """Where fetched weights go: ``$ROBOPIN_MODELS_DIR``, else ``models/weights`` of a checkout, else
    ``~/.cache/robopin/models``."""
    configured = os.environ.get(MODELS_DIR_ENV)
    if configured:
        return Path(configured)
    if CHECKOUT_REGISTRY.is_file():
        return CHECKOUT_REGISTRY.parent / "weights"
    return Path.home() / ".cache" / "robopin" / "models"


def _typed(where: str, key: str, value: Any, expected: type) -> Any:
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ModelRegistryError(f"{where}: {key} must be {expected.__name__}, got {value!r}")
    return value


def _serve_spec(where: str, defaults: Mapping[str, Any], overrides: Any) -> ServeSpec:
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, Mapping):
        raise ModelRegistryError(f"{where}: serve must be a mapping, got {overrides!r}")
    merged = {**defaults, **overrides}
    unknown = sorted(set(merged) - set(_SERVE_KEYS))
    if unknown:
        raise ModelRegistryError(f"{where}: unknown serve keys {unknown}; expected some of {sorted(_SERVE_KEYS)}")
    values = {key: _typed(where, f"serve.{key}", value, _SERVE_KEYS[key]) for key, value in merged.items()}
    if "extra_args" in values:
        values["extra_args"] = tuple(values["extra_args"])
    return ServeSpec(**values)


def model_spec_from_dict(
    name: str, entry: Mapping[str, Any], serve_defaults: Mapping[str, Any] | None = None
) -> ModelSpec:
    """Build and validate one :class:`ModelSpec` from its registry mapping."""
    where = f"model {name!r}"
    if not isinstance(entry, Mapping):
        raise ModelRegistryError(f"{where}: entry must be a mapping, got {entry!r}")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ModelRegistryError(f"{where}: unknown keys {unknown}; expected some of {sorted(_ENTRY_KEYS)}")
    for required in ("kind", "description", "point_convention", "answer_format", "prompt_template"):
        if required not in entry:
            raise ModelRegistryError(f"{where}: missing required key {required!r}")
    memory = entry.get("memory") or {}
    if not isinstance(memory, Mapping) or set(memory) - {"min_gpu_gb"}:
        raise ModelRegistryError(f"{where}: memory must be a mapping with min_gpu_gb only, got {memory!r}")
    kwargs: dict[str, Any] = {
        key: entry[key]
        for key in ("kind", "description", "point_convention", "answer_format", "prompt_template", "hub_id",
                    "architecture", "base_url", "api_key_env", "notes")
        if key in entry
    }  # fmt: skip
    for key, value in kwargs.items():
        _typed(where, key, value, str)
    if "revision" in entry:
        # YAML reads an all-digit commit prefix as a number; a revision is always text.
        kwargs["revision"] = str(entry["revision"])
    if "parameters_b" in entry:
        kwargs["parameters_b"] = _typed(where, "parameters_b", entry["parameters_b"], float)
    for key in ("min_pixels", "max_pixels"):
        if key in entry:
            kwargs[key] = _typed(where, key, entry[key], int)
    if "min_gpu_gb" in memory:
        kwargs["min_gpu_gb"] = _typed(where, "memory.min_gpu_gb", memory["min_gpu_gb"], float)
    try:
        kwargs["serve"] = _serve_spec(where, serve_defaults or {}, entry.get("serve"))
    except ModelRegistryError as error:
        message = str(error)
        raise ModelRegistryError(message if message.startswith(where) else f"{where}: {message}") from None
    return ModelSpec(name=name, **kwargs)


def registry_from_dict(data: Any, source: Path | None = None) -> ModelRegistry:
    """Validate a parsed registry document (``schema``, ``defaults.serve``, ``models``)."""
    where = f"model registry {str(source) if source else ''}".rstrip()
    if not isinstance(data, Mapping):
        raise ModelRegistryError(f"{where}: the document must be a mapping, got {type(data).__name__}")
    if data.get("schema") != SCHEMA_VERSION:
        raise ModelRegistryError(f"{where}: schema must be {SCHEMA_VERSION}, got {data.get('schema')!r}")
    unknown = sorted(set(data) - {"schema", "defaults", "models"})
    if unknown:
        raise ModelRegistryError(f"{where}: unknown top-level keys {unknown}; expected schema, defaults, models")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, Mapping) or set(defaults) - {"serve"}:
        raise ModelRegistryError(f"{where}: defaults must be a mapping with a serve key only, got {defaults!r}")
    serve_defaults = defaults.get("serve") or {}
    models = data.get("models")
    if not isinstance(models, Mapping) or not models:
        raise ModelRegistryError(f"{where}: models must be a non-empty mapping of name -> entry")
    specs = {str(name): model_spec_from_dict(str(name), entry, serve_defaults) for name, entry in models.items()}
    return ModelRegistry(models=specs, source=source)


def load_registry(path: str | os.PathLike[str] | None = None) -> ModelRegistry:
    """Load and validate the registry file (default: :func:`default_registry_path`)."""
    registry_path = Path(path) if path is not None else default_registry_path()
    try:
        text = registry_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelRegistryError(
            f"model registry {str(registry_path)!r} does not exist; set {REGISTRY_ENV} or pass --registry"
        ) from None
    except OSError as error:
        raise ModelRegistryError(f"cannot read model registry {str(registry_path)!r}: {error}") from error
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ModelRegistryError(f"model registry {str(registry_path)!r} is not valid YAML: {error}") from error
    return registry_from_dict(data, registry_path)


def shell_join(args: Sequence[str]) -> str:
    """One shell-safe command line (for printing a command a person can paste)."""
    import shlex

    return shlex.join(list(args))
