"""VLM backend running a Qwen-VL checkpoint (Qwen3-VL / RoboPIN, Qwen2.5-VL) in-process with
transformers, on CPU or GPU, for machines without a vLLM server and for tests with a tiny model.

The processor is assembled from the checkpoint's tokenizer (chat template) and
``Qwen2VLImageProcessorPil`` rather than ``AutoProcessor``: transformers 5.x Qwen-VL processors insist
on a video processor, which needs torchvision, and the stack's CPU torch cannot take torchvision.
The assembly does what the Qwen processors do: one ``<|image_pad|>`` per merged patch, and
``mm_token_type_ids`` (1 on image tokens) for Qwen3-VL's multimodal RoPE.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from robopin.vlm.base import (
    ChatMessage,
    GenerationResult,
    Sample,
    SamplingParams,
    TokenLogprob,
    VLMBackend,
    VLMConfig,
    YesNoScore,
    validate_messages,
)
from robopin.vlm.errors import BackendUnavailableError, VLMConfigError, VLMRequestError
from robopin.vlm.images import to_pil

logger = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
IMAGE_PAD = "<|image_pad|>"
IMAGE_TOKEN_TYPE = 1  # what the Qwen processors put in mm_token_type_ids for image tokens


@dataclass(kw_only=True)
class TransformersBackendConfig(VLMConfig):
    """Settings of the in-process transformers backend.

    ``model_path`` is a local checkpoint directory (nothing is downloaded). ``device`` is ``auto``
    (CUDA when present), ``cpu``, ``cuda`` or ``cuda:N``; ``dtype`` is ``auto`` (bfloat16 on CUDA,
    float32 on CPU) or a torch dtype name. The image processor always uses this config's
    ``min_pixels``/``max_pixels``, so the ``pixels_resized`` conversion sees the same resize the
    model saw.
    """

    type: ClassVar[str] = "transformers"

    model_path: str = ""
    device: str = "auto"
    dtype: str = "auto"
    attn_implementation: str | None = None
    num_threads: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model_path:
            raise VLMConfigError("model_path must name a local checkpoint directory, got ''")
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise VLMConfigError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.dtype != "auto" and self.dtype not in DTYPES:
            raise VLMConfigError(f"dtype must be auto or one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.num_threads is not None and self.num_threads < 1:
            raise VLMConfigError(f"num_threads must be >= 1, got {self.num_threads!r}")


class TransformersBackend(VLMBackend):
    """Loads the checkpoint once; generation calls are serialised (one model, one forward at a time)."""

    config_class = TransformersBackendConfig
    config: TransformersBackendConfig

    def __init__(self, config: TransformersBackendConfig) -> None:
        super().__init__(config)
        try:
            from transformers import AutoModelForImageTextToText, AutoTokenizer, Qwen2VLImageProcessorPil
        except ImportError as error:
            raise BackendUnavailableError(f"the transformers backend needs transformers>=5: {error}") from error
        path = Path(config.model_path)
        if not (path / "config.json").is_file():
            raise VLMConfigError(f"model_path {str(path)!r} is not a checkpoint directory (no config.json)")
        if config.num_threads:
            torch.set_num_threads(config.num_threads)
        self.device = torch.device(
            ("cuda" if torch.cuda.is_available() else "cpu") if config.device == "auto" else config.device
        )
        if config.dtype == "auto":
            self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        else:
            self.dtype = DTYPES[config.dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        if not getattr(self.tokenizer, "chat_template", None):
            # Some Qwen-VL releases keep the template with the processor, not the tokenizer.
            self.tokenizer.chat_template = _processor_chat_template(path)
        self.image_processor = Qwen2VLImageProcessorPil.from_pretrained(
            path, min_pixels=config.min_pixels, max_pixels=config.max_pixels
        )
        factor = self.image_processor.patch_size * self.image_processor.merge_size
        if config.point_convention == "pixels_resized" and factor != config.resize_factor:
            raise VLMConfigError(
                f"resize_factor={config.resize_factor} but the checkpoint's processor resizes to multiples of "
                f"{factor} (patch {self.image_processor.patch_size} x merge {self.image_processor.merge_size})"
            )
        load_kwargs: dict[str, Any] = {"dtype": self.dtype}
        if config.attn_implementation:
            load_kwargs["attn_implementation"] = config.attn_implementation
        started = time.perf_counter()
        self.model = AutoModelForImageTextToText.from_pretrained(path, **load_kwargs).to(self.device).eval()
        self.image_token_id = self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        if self.image_token_id is None or self.image_token_id == self.tokenizer.unk_token_id:
            raise VLMConfigError(f"the tokenizer in {str(path)!r} has no {IMAGE_PAD} token")
        eos = self.model.generation_config.eos_token_id
        self.eos_token_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.eos_token_ids.add(self.tokenizer.eos_token_id)
        self._lock = threading.Lock()
        logger.info(
            "%s loaded %s on %s (%s) in %.1f s",
            type(self).__name__,
            path.name,
            self.device,
            self.dtype,
            time.perf_counter() - started,
        )

    # ---------------------------------------------------------------------------------------------
    # Inputs
    # ---------------------------------------------------------------------------------------------

    def build_inputs(self, messages: Sequence[ChatMessage]) -> dict[str, torch.Tensor]:
        """Tokenise the conversation with its images into model inputs (batch of one)."""
        messages = validate_messages(messages)
        chat = []
        for message in messages:
            if message.images:
                content = [
                    {"type": "text", "text": part} if isinstance(part, str) else {"type": "image"}
                    for part in message.parts
                ]
                chat.append({"role": message.role, "content": content})
            else:
                chat.append({"role": message.role, "content": message.text})
        prompt = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        images = [to_pil(image.rgb) for message in messages for image in message.images]
        inputs: dict[str, torch.Tensor] = {}
        if images:
            vision = self.image_processor(images=images, return_tensors="pt")
            grid = vision["image_grid_thw"]
            merge = self.image_processor.merge_size**2
            pieces = prompt.split(IMAGE_PAD)
            if len(pieces) - 1 != len(images):
                raise VLMRequestError(
                    f"the chat template placed {len(pieces) - 1} image slots for {len(images)} images"
                )
            counts = [int(thw.prod().item()) // merge for thw in grid]
            prompt = pieces[0] + "".join(
                IMAGE_PAD * count + rest for count, rest in zip(counts, pieces[1:], strict=True)
            )
            inputs["pixel_values"] = vision["pixel_values"].to(self.device, self.dtype)
            inputs["image_grid_thw"] = grid.to(self.device)
        encoded = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        input_ids = encoded["input_ids"].to(self.device)
        inputs["input_ids"] = input_ids
        inputs["attention_mask"] = encoded["attention_mask"].to(self.device)
        inputs["mm_token_type_ids"] = (input_ids == self.image_token_id).to(torch.int32) * IMAGE_TOKEN_TYPE
        return inputs

    # ---------------------------------------------------------------------------------------------
    # Generation
    # ---------------------------------------------------------------------------------------------

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        """Sample ``n`` completions (greedy when temperature is 0; then all ``n`` are identical)."""
        n, temperature, max_tokens, stop = params.n, params.temperature, params.max_tokens, params.stop
        if params.structured is not None:
            raise VLMRequestError(
                f"the transformers backend has no guided decoding; {params.structured.kind!r} structured output "
                "needs a vLLM server (openai backend)"
            )
        inputs = self.build_inputs(messages)
        prompt_length = inputs["input_ids"].shape[1]
        sampling = temperature > 0.0
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "do_sample": sampling,
            # Greedy decoding gives one answer; it is computed once and repeated n times below.
            "num_return_sequences": n if sampling else 1,
            "return_dict_in_generate": True,
            "output_logits": params.logprobs,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": sorted(self.eos_token_ids),
        }
        if sampling:
            kwargs["temperature"] = temperature
            kwargs["top_p"] = 1.0 if params.top_p is None else params.top_p
            kwargs["top_k"] = 0  # no hidden top-k: match the OpenAI/vLLM meaning of temperature/top_p
        if stop:
            kwargs["stop_strings"] = list(stop)
            kwargs["tokenizer"] = self.tokenizer
        started = time.perf_counter()
        with self._lock, torch.inference_mode():
            if params.seed is not None:
                torch.manual_seed(params.seed)
            output = self.model.generate(**inputs, **kwargs)
        latency = time.perf_counter() - started
        sequences = output.sequences[:, prompt_length:].cpu()
        step_logprobs = None
        if params.logprobs:
            # Raw (untempered) log-probabilities, as vLLM reports them by default.
            step_logprobs = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in output.logits], 1).cpu()
        samples = []
        completion_tokens = 0
        for row, tokens in enumerate(sequences.tolist()):
            length, finish = self._completion_length(tokens, max_tokens)
            completion_tokens += length
            text = self.tokenizer.decode(tokens[:length], skip_special_tokens=True)
            if stop:
                text, stopped = _cut_at_stop(text, stop)
                finish = "stop" if stopped else finish
            token_logprobs = None
            if step_logprobs is not None:
                token_logprobs = self._token_logprobs(tokens[:length], step_logprobs[row], params.top_logprobs)
            samples.append(Sample(text, finish, token_logprobs))
        if not sampling and n > 1:
            samples = samples * n
            completion_tokens *= n
        return GenerationResult(
            samples=tuple(samples),
            model=self.config.model,
            prompt_tokens=prompt_length,
            completion_tokens=completion_tokens,
            latency_s=latency,
        )

    def score_yes_no(self, messages: Sequence[ChatMessage], *, yes: str = "yes", no: str = "no") -> YesNoScore:
        """Exact log-probabilities of the first answer token, every single-token spelling summed."""
        yes_ids = self._answer_token_ids(yes)
        no_ids = self._answer_token_ids(no)
        if not yes_ids or not no_ids:
            raise VLMRequestError(
                f"{yes!r} or {no!r} is not a single token in any spelling for this tokenizer; "
                "a verifier needs one-token answers"
            )
        inputs = self.build_inputs(messages)
        with self._lock, torch.inference_mode():
            logits = self.model(**inputs).logits[0, -1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        return YesNoScore(
            float(torch.logsumexp(logprobs[sorted(yes_ids)], 0)),
            float(torch.logsumexp(logprobs[sorted(no_ids)], 0)),
        )

    def close(self) -> None:
        self.model = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # ---------------------------------------------------------------------------------------------
    # Helpers
    # ---------------------------------------------------------------------------------------------

    def _completion_length(self, tokens: list[int], max_tokens: int) -> tuple[int, str]:
        """Tokens before the first end (or padding) token, and the finish reason as OpenAI names it."""
        for index, token in enumerate(tokens):
            if token in self.eos_token_ids or token == self.tokenizer.pad_token_id:
                return index, "stop"
        return len(tokens), "length" if len(tokens) >= max_tokens else "stop"

    def _token_logprobs(self, tokens: list[int], logprobs: torch.Tensor, top_k: int) -> tuple[TokenLogprob, ...]:
        result = []
        for step, token in enumerate(tokens):
            row = logprobs[step]
            top: tuple[tuple[str, float], ...] = ()
            if top_k:
                values, indices = torch.topk(row, top_k)
                top = tuple((self.tokenizer.decode([int(i)]), float(v)) for v, i in zip(values, indices, strict=True))
            result.append(TokenLogprob(self.tokenizer.decode([token]), float(row[token]), top))
        return tuple(result)

    def _answer_token_ids(self, word: str) -> set[int]:
        ids = set()
        base = word.strip()
        for spelling in {base, base.lower(), base.capitalize(), base.upper()}:
            for variant in (spelling, " " + spelling):
                encoded = self.tokenizer.encode(variant, add_special_tokens=False)
                if len(encoded) == 1:
                    ids.add(encoded[0])
        return ids


def _cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` before the earliest stop string (OpenAI leaves the stop string out)."""
    positions = [text.find(s) for s in stop if s and s in text]
    if not positions:
        return text, False
    return text[: min(positions)], True


def _processor_chat_template(path: Path) -> str:
    """The chat template a checkpoint ships beside its processor (``chat_template.jinja`` or ``.json``)."""
    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    packed = path / "chat_template.json"
    if packed.is_file():
        template = json.loads(packed.read_text()).get("chat_template")
        if isinstance(template, str) and template:
            return template
    raise VLMConfigError(f"the checkpoint in {str(path)!r} has no chat template (tokenizer or processor)")
