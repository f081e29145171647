"""Build a tiny random-weight Qwen-VL checkpoint on disk, offline, for tests and benchmarks.

Nothing can be downloaded from a model hub here, yet the transformers backend must run end to end.
This writes a real checkpoint directory (config, safetensors weights, byte-level BPE tokenizer with
the Qwen special tokens and a Qwen-style chat template, image-processor config) of ~0.2 M parameters.
Its text is garbage; shapes, token accounting and code paths are those of the real model family.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

Family = Literal["qwen3_vl", "qwen2_5_vl"]

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Same shape as the real Qwen-VL templates: a string or a list of {"type": "image"|"text"} parts.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

_CORPUS = (
    '<think>The cup <obj name="cup" id="obj_01" img_idx="0" point="[312, 476]"> is left of the '
    'plate <space name="middle plate" id="space_01" img_idx="1" point="[545, 623]">.</think>'
    '<answer>[{"point_2d": [312, 476], "label": "cup"}]</answer>',
    "yes no Yes No YES NO yes. no. Answer yes or no.",
    "Pick up the red block and put it in the bowl. Put the cup on the plate. The answer should be "
    "presented in JSON format.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 [ ] { } , : \" ' < > / = _",
)


def _train_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS * 4, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _model_config(family: Family, tokenizer) -> object:
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIAL_TOKENS}
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]},
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "bos_token_id": None,
    }
    tokens = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }
    if family == "qwen3_vl":
        from transformers import Qwen3VLConfig

        text["head_dim"] = 16
        text["rope_parameters"]["mrope_interleaved"] = True
        vision = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 64,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        }
        return Qwen3VLConfig(text_config=text, vision_config=vision, **tokens)
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        vision = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 64,
            "window_size": 112,
            "fullatt_block_indexes": [1],
        }
        return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **tokens)
    raise ValueError(f"family must be 'qwen3_vl' or 'qwen2_5_vl', got {family!r}")


def build_tiny_qwen_vl(
    directory: str | Path,
    family: Family = "qwen3_vl",
    *,
    seed: int = 0,
    vocab_size: int = 400,
    min_pixels: int = 32 * 32,
    max_pixels: int = 640 * 480,
) -> Path:
    """Write a tiny random-weight ``family`` checkpoint into ``directory`` and return its path.

    ``max_pixels`` caps the image size the saved processor uses (the backend may override it).
    Deterministic for a given ``seed``.
    """
    import torch
    from transformers import AutoModelForImageTextToText, GenerationConfig, Qwen2VLImageProcessorPil

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size)
    config = _model_config(family, tokenizer)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config, dtype=torch.float32)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    patch = 16 if family == "qwen3_vl" else 14
    mean_std = [0.5, 0.5, 0.5] if family == "qwen3_vl" else [0.48145466, 0.4578275, 0.40821073]
    processor = Qwen2VLImageProcessorPil(
        patch_size=patch,
        merge_size=2,
        temporal_patch_size=2,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        image_mean=mean_std,
        image_std=mean_std,
    )
    processor.save_pretrained(directory)
    (directory / "robopin_tiny_model.json").write_text(json.dumps({"family": family, "seed": seed}))
    return directory
