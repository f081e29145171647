"""The ground-truth oracle as a VLM backend (type ``oracle``): answers from the simulator, not a model.

Configured like any VLM backend, it lets the planner, projection, motion and test-time scaling run
end to end in simulation with no GPU. :meth:`OracleBackend.generate` ignores the pixels it is sent
(it only checks that the number and size of images match its cameras) and writes the PinCoT trace
that :class:`~robopin.sim.oracle.GroundTruthOracle` derives from the scene registered on its world;
each of ``n`` samples draws the configured error injection independently. ``score_yes_no`` is a
ground-truth verifier: "yes" exactly when the last PinCoT answer in the conversation picks the
object the task needs next and places on the right target.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from robopin.pincot.coords import normalized_to_pixels
from robopin.pincot.parser import parse
from robopin.sim import model_errors
from robopin.sim.model_errors import ModelErrorRates
from robopin.vlm.base import (
    ChatMessage,
    GenerationResult,
    Sample,
    SamplingParams,
    VLMBackend,
    VLMConfig,
    YesNoScore,
    images_in,
    validate_messages,
)
from robopin.vlm.errors import VLMCanceledError, VLMConfigError, VLMRequestError
from robopin.vlm.prompts import PINCOT_ANSWER_SUFFIX

# A verifier answer the oracle is sure of: log P = 0 for the true token, this for the other.
_CERTAIN_NO_LOGPROB = -30.0


@dataclass(kw_only=True)
class OracleBackendConfig(VLMConfig):
    """Settings of the ground-truth oracle backend.

    ``world`` names the simulated world whose registered scene supplies the task; ``views`` are
    its cameras in ``img_idx`` order; ``errors`` holds :class:`~robopin.sim.oracle.OracleErrors`
    fields (empty: perfect traces); ``seed`` makes error draws reproducible.
    """

    type: ClassVar[str] = "oracle"

    model: str = "ground-truth-oracle"
    world: str = "workcell"
    views: tuple[str, ...] = ("static", "wrist")
    errors: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    min_visible_pixels: int = 40
    preset: str = "oracle"
    rates: Mapping[str, Any] = field(default_factory=dict)
    sample_latency_s: float = 0.0
    """Seconds each written sample takes at least, as a real model's generation does (RoboPIN's Qwen3-VL-4B:
    0.281 s per sample); 0 answers at the oracle's own speed. ``cancel()`` ends the wait."""
    verdict_latency_s: float = 0.0
    """Seconds each yes/no verdict (E-TTS's reasoning verifier) takes at least; 0 as fast as it is judged."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.point_convention != "norm1000":
            raise VLMConfigError(
                f"the oracle writes RoboPIN's norm1000 points, got point_convention={self.point_convention!r}"
            )
        self.views = tuple(self.views)
        if not self.views:
            raise VLMConfigError("views must name at least one camera of the simulated world")
        if not self.world:
            raise VLMConfigError(f"world must name a registered simulated world, got {self.world!r}")
        from robopin.sim.oracle import OracleErrors

        try:
            OracleErrors.from_mapping(dict(self.errors))
        except (TypeError, ValueError) as error:
            raise VLMConfigError(f"oracle errors {dict(self.errors)!r}: {error}") from None
        self.rates = dict(self.rates or {})
        self.error_rates()
        for name in ("sample_latency_s", "verdict_latency_s"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value >= 0.0):
                raise VLMConfigError(f"{name} must be a finite number >= 0, got {getattr(self, name)!r}")
            setattr(self, name, value)

    def error_rates(self):
        """The model errors this backend makes (:class:`robopin.sim.model_errors.ModelErrorRates`)."""
        return ModelErrorRates.of(self.preset, self.rates)


_INSTRUCTION_LINES = (
    re.compile(r'^Overall Objective: "(.+)"$', re.MULTILINE),  # pincot/templates/verifier.txt
    re.compile(r"^Overall task: (.+)$", re.MULTILINE),  # pincot/templates/step.txt
    re.compile(r"^Task: (.+)$", re.MULTILINE),  # pincot/templates/pointing.txt
    re.compile(r"^Goal: (.+)$", re.MULTILINE),  # pincot/templates/subtask.txt
    re.compile(r"^Instruction: (?!<)(.+)$", re.MULTILINE),  # pincot/templates/plan.txt
)


def request_instruction(messages: Sequence[ChatMessage]) -> str | None:
    """The instruction a request asks about, read as a model reads it: from the first user turn that
    carries images, in any of the loop's prompt forms (our templates, or RoboPIN's task + suffix).

    None when no form matches (a custom template folder): the oracle then works on the scenario's task.
    """
    turn = next((m for m in messages if m.role == "user" and m.images), None)
    if turn is None:
        return None
    text = turn.text.strip()
    for pattern in _INSTRUCTION_LINES:
        match = pattern.search(text)
        if match:
            return match.group(1).strip()
    if text.endswith(PINCOT_ANSWER_SUFFIX):
        return text[: -len(PINCOT_ANSWER_SUFFIX)].strip() or None
    return None


def _request_text(messages: Sequence[ChatMessage]) -> str:
    turn = next((m for m in messages if m.role == "user" and m.images), None)
    return turn.text if turn is not None else ""


def request_kind(messages: Sequence[ChatMessage]) -> str:
    """What a request asks for, as a model tells it from the prompt: E-TTS's critique of a rejected trace
    (``critique``), an R^3 step (``subtask``: a ``Goal:`` and an ``Instruction: <instruction>`` line to write), a
    RoboGPT-R1 plan (``plan``: an ``executable_plan`` to fill), else PinCoT pointing (``pointing``)."""
    text = _request_text(messages)
    if "Robot's Current Reasoning:" in text:  # E-TTS's feedback request (pincot/templates/feedback.txt)
        return "critique"
    if "executable_plan" in text:
        return "plan"
    if re.search(r"^Goal: ", text, re.MULTILINE) and "Instruction: <instruction>" in text:
        return "subtask"
    return "pointing"


def judged_reasoning(messages: Sequence[ChatMessage]) -> str | None:
    """The PinCoT trace a yes/no request asks about: the last one written in the conversation, alone.

    E-TTS's verifier prompt (pincot/templates/verifier.txt) holds more than the trace: the earlier steps'
    reasoning (history, with their own anchor tags, cut at 600 characters) before it and the question
    after it. Parsed together they made ID conflicts and unclosed tags that the trace does not have, so
    from a long-horizon task's second step the simulated verifier said "no" to right answers too.
    The trace runs from its ``<think>`` (else the start of its text part) to its ``</answer>`` (else the
    ``---`` that closes the template's reasoning block, else the end of the part).
    """
    for message in reversed(messages):
        for part in reversed(message.parts):
            if not isinstance(part, str) or "<answer>" not in part:
                continue
            answer = part.rfind("<answer>")
            start = max(part.rfind("<think>", 0, answer), 0)
            close = part.find("</answer>", answer)
            if close >= 0:
                end = close + len("</answer>")
            else:
                end = part.find("\n---", answer)
                end = len(part) if end < 0 else end
            return part[start:end]
    return None


class OracleBackend(VLMBackend):
    """Ground-truth perception behind the VLM backend contract (see the module docstring)."""

    config_class = OracleBackendConfig
    config: OracleBackendConfig

    def __init__(self, config: OracleBackendConfig) -> None:
        super().__init__(config)
        self._calls = 0
        # A preset other than the oracle makes the named model errors of robopin.sim.model_errors.
        self.rates = config.error_rates()
        self.erring = self.rates != type(self.rates)()
        self.injected: list[tuple[str, ...]] = []
        """The model errors of each sample written so far, by name (for trial reports and tests)."""
        self._canceled = threading.Event()  # replaced on each cancel: it ends the calls running then

    def cancel(self) -> None:
        """End the running calls' simulated latency now (their answers are dropped by the caller)."""
        canceled, self._canceled = self._canceled, threading.Event()
        canceled.set()

    def _take_at_least(self, seconds: float, start: float, canceled: threading.Event) -> None:
        """Wait until ``seconds`` have passed since ``start`` (a call as slow as the model it stands for)."""
        left = seconds - (time.perf_counter() - start)
        if left > 0.0 and canceled.wait(left):
            raise VLMCanceledError("oracle backend: the call was canceled")

    def _oracle(self, seed: int, instruction: str | None = None):
        from robopin.sim.oracle import GroundTruthOracle, OracleErrors
        from robopin.sim.tasks import ScenarioError, get_scene

        try:
            scene = get_scene(self.config.world)
        except ScenarioError as error:
            raise VLMRequestError(f"oracle backend: {error}") from None
        oracle = GroundTruthOracle(
            scene,
            self.config.views,
            min_visible_pixels=self.config.min_visible_pixels,
            errors=OracleErrors.from_mapping(dict(self.config.errors)),
            seed=seed,
            instruction=instruction,
        )
        if self.erring:
            model_errors.draw_errors(self, oracle, seed)
        return oracle

    def _check_images(self, messages: Sequence[ChatMessage]) -> None:
        images = images_in(messages)
        if len(images) != len(self.config.views):
            raise VLMRequestError(
                f"oracle backend is configured for views {self.config.views} but the request has {len(images)} image(s)"
            )

    def _generate(self, messages: list[ChatMessage], params: SamplingParams) -> GenerationResult:
        """Write ``n`` traces for the scene's current state (independent error draws per sample)."""
        self._check_images(messages)
        start, canceled = time.perf_counter(), self._canceled
        base_seed = self.config.seed if params.seed is None else params.seed
        instruction = request_instruction(messages)
        oracle = self._oracle(base_seed, instruction)
        kind = request_kind(messages)
        # R^3 steps and plans read the scene's state, not its pixels: no render (seconds on a busy CPU).
        rendered = oracle.render() if kind == "pointing" else []
        samples = []
        for k in range(params.n):
            sampler = oracle if k == 0 else self._oracle(base_seed + 7919 * (k + 1) + self._calls, instruction)
            samples.append(Sample(self._write(sampler, rendered, kind, messages), "stop", None))
        self._calls += 1
        self._take_at_least(self.config.sample_latency_s * params.n, start, canceled)
        return GenerationResult(tuple(samples), self.config.model, latency_s=time.perf_counter() - start)

    def _write(self, oracle, rendered, kind: str, messages: Sequence[ChatMessage]) -> str:
        """The oracle's text for one sample of a ``kind`` request (see :func:`request_kind`)."""
        from robopin.sim.oracle_text import plan_response, subtask_response

        if kind == "pointing":
            if self.erring:
                return model_errors.degraded_pointing(self, oracle, rendered)
            return oracle.write(rendered).text
        if kind == "critique":
            # A few sentences of advice, not a trace: no pins to get wrong, so no errors are drawn for it (a drawn
            # error belongs to a trace the search log shows).
            instruction = oracle.instruction or oracle.scene.spec.instruction
            return (f"Check that the answer's object is the one the instruction describes ({instruction}) and that "
                    "each ID is pinned on that same object in every view before answering again.")
        text = (subtask_response if kind == "subtask" else plan_response)(oracle, _request_text(messages))
        if self.erring:
            return model_errors.degraded_other(self, oracle, text)
        return text

    def score_yes_no(self, messages: Sequence[ChatMessage], *, yes: str = "yes", no: str = "no") -> YesNoScore:
        """Judge the last PinCoT answer in the conversation against ground truth."""
        start, canceled = time.perf_counter(), self._canceled
        score = self._verdict(messages, yes=yes, no=no)
        self._take_at_least(self.config.verdict_latency_s, start, canceled)
        return score

    def _verdict(self, messages: Sequence[ChatMessage], *, yes: str, no: str) -> YesNoScore:
        messages = validate_messages(messages)
        text = judged_reasoning(messages)
        if text is None:
            return YesNoScore(0.0, 0.0, exact=False)
        oracle = self._oracle(self.config.seed, request_instruction(messages))
        rendered = oracle.render()
        trace = parse(text, len(rendered))
        goal = oracle.next_goal()
        if goal is None:
            ok = trace.done
        else:
            ok = (
                not trace.errors
                and len(trace.answer_points) >= 2
                and all(
                    self._on(oracle, rendered, point, name)
                    for point, name in zip(trace.answer_points[:2], goal, strict=True)
                )
            )
        score = YesNoScore(0.0, _CERTAIN_NO_LOGPROB) if ok else YesNoScore(_CERTAIN_NO_LOGPROB, 0.0)
        if self.erring:
            return model_errors.degraded_verdict(self, score, text, int(getattr(oracle.scene, "seed", 0)))
        return score

    @staticmethod
    def _on(oracle, rendered, point, object_name: str) -> bool:
        view_index = point.img_idx if point.img_idx is not None else 0
        if not 0 <= view_index < len(rendered):
            return False
        view = rendered[view_index]
        height, width = view.segmentation.shape
        u, v = normalized_to_pixels(point.x, point.y, (width, height))
        col, row = min(max(math.floor(u), 0), width - 1), min(max(math.floor(v), 0), height - 1)
        body = oracle.scene.world.object(object_name).body_id
        # A point within 3 px of the object's mask counts: models write rounded 0-1000 coordinates.
        window = view.segmentation[max(row - 3, 0) : row + 4, max(col - 3, 0) : col + 4]
        return bool(np.any(window == body))
