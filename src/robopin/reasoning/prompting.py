"""The pointing request a model gets, worded the way its registry entry says.

One function builds it for the reasoning loop and for ``robopin models show`` (which prints exactly
what will be sent), so the two cannot drift apart:

- ``pincot_suffix`` (RoboPIN-4B): the task text followed by RoboPIN's answer-format suffix,
  :func:`robopin.vlm.prompts.build_pincot_messages`: RoboPIN's released inference form (the question,
  then the JSON ``<think>``/``<answer>`` sentence; the paper's Appendix E "prompting formats" is an
  image whose text our copy of the paper lacks). No view roles, no anchor rules, no history: a
  fine-tune answers best to the form it was trained and evaluated with, and the next step of a
  long task is read from the current images.
- ``reasoning`` (generic Qwen3-VL, any OpenAI-compatible model): our templates
  (:func:`robopin.pincot.prompts.pointing_prompt` / :func:`~robopin.pincot.prompts.step_prompt`) with
  the sentence for the model's point convention (:func:`~robopin.pincot.prompts.point_rule`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from robopin.pincot.prompts import PromptTemplates, StepRecord, View, point_rule, pointing_prompt, step_prompt
from robopin.reasoning.config import ReasoningConfig
from robopin.vlm.base import ChatMessage, ViewImage
from robopin.vlm.prompts import PINCOT_ANSWER_SUFFIX, build_messages, build_pincot_messages


@dataclass(frozen=True)
class PointingRequest:
    """The text of a pointing query and the chat messages that carry it with the images."""

    text: str
    messages: tuple[ChatMessage, ...]
    template: str


def pointing_request(
    config: ReasoningConfig,
    convention: str,
    instruction: str,
    views: Sequence[View],
    images: Sequence[ViewImage],
    *,
    kind: Literal["pointing", "step"] = "pointing",
    history: Sequence[StepRecord] = (),
    templates: PromptTemplates | None = None,
) -> PointingRequest:
    """Build one pointing (``kind="pointing"``) or long-horizon step (``"step"``) query.

    ``convention`` is the backend's point convention name; ``views`` the prompt's view names and
    roles, ``images`` the camera images in ``img_idx`` order.
    """
    if config.prompt_template == "pincot_suffix":
        messages = build_pincot_messages(
            instruction, images, system_prompt=config.system_prompt, label_views=config.label_views
        )
        return PointingRequest(f"{instruction.strip()} {PINCOT_ANSWER_SUFFIX}", tuple(messages), "pincot_suffix")
    points = point_rule(convention, [(image.width, image.height) for image in sorted(images, key=_index)])
    if kind == "step":
        text = step_prompt(instruction, views, history, templates=templates, points=points)
    else:
        text = pointing_prompt(instruction, views, templates=templates, points=points)
    messages = build_messages(text, images, system_prompt=config.system_prompt, label_views=config.label_views)
    return PointingRequest(text, tuple(messages), "reasoning")


def _index(image: ViewImage) -> int:
    return image.img_idx
