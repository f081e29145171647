"""Prompts for RoboPIN-style Pinned Chain-of-Thought: the instruction, the fixed answer-format
suffix, and every camera view as an image in ``img_idx`` order, as chat messages for any backend.

RoboPIN's only published inference prompt is the task text followed by :data:`PINCOT_ANSWER_SUFFIX`,
so that is the default; labelling views or adding a system prompt moves away from what it was
trained on and is opt-in.
"""

from __future__ import annotations

from collections.abc import Sequence

from robopin.vlm.base import ChatMessage, MessagePart, ViewImage
from robopin.vlm.errors import VLMRequestError

PINCOT_ANSWER_SUFFIX = (
    "The answer should be presented in JSON format. Provide your thinking process between the "
    "<think> and </think> tags, and then give your final answer between the <answer> and </answer> tags."
)

ANSWER_FORMATS = ("pincot", "qwen_json", "embodied_r1_points")
"""``pincot``: ``<think>`` with anchor tags + JSON ``<answer>`` (RoboPIN); ``qwen_json``: Qwen3-VL
``[{"point_2d": [x, y], …}]``; ``embodied_r1_points``: ``<answer><point>[[x, y], …]</point>``."""
PROMPT_TEMPLATES = ("pincot_suffix", "reasoning", "embodied_r1")
"""How a model's pointing request is worded (a model registry entry's ``prompt_template``):
``pincot_suffix``: the task text + :data:`PINCOT_ANSWER_SUFFIX`, RoboPIN's published inference form
(:func:`build_pincot_messages`); ``reasoning``: the reasoning loop's templates
(:mod:`robopin.pincot.prompts`, view roles, anchor rules, history); ``embodied_r1``: Embodied-R1's
pointing prompts (listed for the registry; the reasoning loop does not write them yet)."""

MAX_INSTRUCTION_CHARS = 4000
"""Longer instructions are refused: they are almost certainly a paste error, not a task."""


def order_views(views: Sequence[ViewImage]) -> list[ViewImage]:
    """Return the views sorted by ``img_idx``, checking the indices are exactly 0..N-1 and names unique."""
    ordered = sorted(views, key=lambda view: view.img_idx)
    indices = [view.img_idx for view in ordered]
    if indices != list(range(len(ordered))):
        raise VLMRequestError(f"view img_idx values must be 0..{len(ordered) - 1} once each, got {indices}")
    names = [view.name for view in ordered if view.name]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise VLMRequestError(f"view names must be unique, got duplicates {duplicates}")
    return ordered


def check_instruction(instruction: object) -> str:
    """Return the stripped instruction, or raise naming why it cannot be sent to a model."""
    if not isinstance(instruction, str):
        raise VLMRequestError(f"instruction must be text, got {type(instruction).__name__}")
    text = instruction.strip()
    if not text:
        raise VLMRequestError("instruction is empty")
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise VLMRequestError(f"instruction has {len(text)} characters; at most {MAX_INSTRUCTION_CHARS} are allowed")
    return text


def build_messages(
    text: str,
    views: Sequence[ViewImage],
    *,
    system_prompt: str | None = None,
    label_views: bool = False,
    history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """Build the chat messages of one query: the views as images in ``img_idx`` order, then ``text``.

    ``text`` is the whole prompt text (e.g. :func:`robopin.pincot.prompts.pointing_prompt`). Images
    come first, as Qwen-VL expects vision before the question. With ``label_views`` each image is
    preceded by ``Image i (name):`` so a model not trained on a fixed view order can tell the views
    apart. ``history`` (earlier turns, text only) goes between the system prompt and this query.
    """
    if not isinstance(text, str) or not text.strip():
        raise VLMRequestError(f"the prompt text must be non-empty text, got {text!r}")
    if not views:
        raise VLMRequestError("a query needs at least one view")
    messages: list[ChatMessage] = []
    if system_prompt:
        messages.append(ChatMessage("system", (system_prompt,)))
    for turn in history:
        if turn.images:
            raise VLMRequestError("history turns must be text only: images belong to the current query")
        messages.append(turn)
    parts: list[MessagePart] = []
    for view in order_views(views):
        if label_views:
            label = f" ({view.name})" if view.name else ""
            parts.append(f"Image {view.img_idx}{label}:")
        parts.append(view)
    parts.append(text)
    messages.append(ChatMessage("user", tuple(parts)))
    return messages


def build_pincot_messages(
    instruction: str,
    views: Sequence[ViewImage],
    *,
    suffix: str = PINCOT_ANSWER_SUFFIX,
    system_prompt: str | None = None,
    label_views: bool = False,
    history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """Build RoboPIN's raw inference query: the views, then the instruction followed by ``suffix``.

    This is the form of RoboPIN's only published inference prompt; the reasoning loop's richer
    prompts (view roles, history, modes) come from :mod:`robopin.pincot.prompts` via
    :func:`build_messages`.
    """
    text = check_instruction(instruction)
    return build_messages(
        f"{text} {suffix}" if suffix else text,
        views,
        system_prompt=system_prompt,
        label_views=label_views,
        history=history,
    )
