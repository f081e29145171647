"""Configuration of embodied test-time scaling (E-TTS): sampling, verifiers, selection, feedback, budget.

One :class:`TTSConfig` is the ``reasoner: {type: etts, ...}`` block of the reasoning config. Every
module of E-TTS is switchable here (reasoning verifier, action verifier, ε-greedy, threshold,
feedback, history), and the defaults are the paper's (ε = 0.1, η = 0.4, K = 3). Values are validated
when the config is built, with messages naming the bad value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robopin.pincot.prompts import VerifierExample
from robopin.reasoning.errors import ReasoningConfigError

NORMALIZATIONS = ("max", "minmax", "sum", "none")
"""How action scores are normalised within one trace's actions (:func:`robopin.reasoning.tts.selection.normalize`)."""

ON_EXHAUSTED = ("execute_best", "refuse")
"""When every batch was rejected: run the best pair seen (the paper's Algorithm 1) or refuse the step."""

ACTION_SOURCES = ("as_written", "other_view", "segment_centre", "segment_samples")
"""Ways to derive pick/place candidates from one trace (:mod:`robopin.reasoning.tts.candidates`)."""


class TTSConfigError(ReasoningConfigError):
    """An E-TTS setting is unusable (the message names the value and what was expected)."""


def _check_probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise TTSConfigError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _check_count(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TTSConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise TTSConfigError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def _from_mapping(cls: type, values: Mapping[str, Any] | Any, label: str) -> Any:
    if isinstance(values, cls):
        return values
    if not isinstance(values, Mapping):
        raise TTSConfigError(f"{label} must be a mapping, got {values!r}")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TTSConfigError(f"unknown {label} setting(s) {unknown}; expected some of {sorted(known)}")
    return cls(**dict(values))


@dataclass(kw_only=True)
class SelectionConfig:
    """Adaptive online selection: ε-greedy exploration and the acceptance threshold η on S = Sc × Ŝa.

    ``epsilon`` 0 disables exploration; ``threshold`` 0 accepts the first batch's best pair (best-of-N).
    ``on_exhausted``: after ``max_batches`` rejected batches, ``execute_best`` runs the best pair seen
    (Algorithm 1 of the paper) and ``refuse`` ends the step (reason ``tts_rejected``).
    ``min_reasoning_score``: a pair whose reasoning the verifier rejected (Sc below this; 0.5 is "no" more
    likely than "yes") is never explored and never run as the exhausted step's best pair, which refuses
    (``tts_rejected``) when no pair reaches it: the paper's ε-greedy and Algorithm 1 ran answers the
    verifier had judged wrong. 0 keeps the
    paper's selection. Greedy acceptance is left to ``threshold``.
    """

    epsilon: float = 0.1
    threshold: float = 0.4
    on_exhausted: str = "execute_best"
    min_reasoning_score: float = 0.5

    def __post_init__(self) -> None:
        self.epsilon = _check_probability("selection.epsilon", self.epsilon)
        self.threshold = _check_probability("selection.threshold", self.threshold)
        self.min_reasoning_score = _check_probability("selection.min_reasoning_score", self.min_reasoning_score)
        if self.on_exhausted not in ON_EXHAUSTED:
            raise TTSConfigError(f"selection.on_exhausted must be one of {ON_EXHAUSTED}, got {self.on_exhausted!r}")


@dataclass(kw_only=True)
class ReasoningVerifierConfig:
    """The VLM yes/no verifier of a trace: P(yes) normalised over yes/no (``score_yes_no``).

    ``draw`` puts the trace's anchors and answer points on the images (the visual prompt);
    ``history`` is K, the number of earlier (observation, reasoning) steps shown; ``examples`` are
    few-shot examples (``{instruction, observation, answer: yes|no}``); ``concurrency`` bounds the
    verifier calls in flight at once; ``vlm`` optionally names another backend for the verifier (a
    ``robopin.vlm.make_backend`` mapping; default: the policy's own backend).
    """

    enabled: bool = True
    draw: bool = True
    history: int = 3
    examples: tuple[VerifierExample, ...] = ()
    concurrency: int = 4
    vlm: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        self.history = _check_count("reasoning_verifier.history", self.history, minimum=0)
        self.concurrency = _check_count("reasoning_verifier.concurrency", self.concurrency)
        examples = []
        for item in self.examples:
            if isinstance(item, VerifierExample):
                examples.append(item)
                continue
            if not isinstance(item, Mapping) or not {"instruction", "observation", "answer"} <= set(item):
                raise TTSConfigError(
                    f"a verifier example needs instruction, observation and answer (yes/no), got {item!r}"
                )
            answer = item["answer"]
            if isinstance(answer, str):
                if answer.strip().lower() not in ("yes", "no"):
                    raise TTSConfigError(f"a verifier example's answer must be yes or no, got {answer!r}")
                answer = answer.strip().lower() == "yes"
            examples.append(VerifierExample(str(item["instruction"]), str(item["observation"]), bool(answer)))
        self.examples = tuple(examples)
        if self.vlm is not None and (not isinstance(self.vlm, Mapping) or "type" not in self.vlm):
            raise TTSConfigError(f"reasoning_verifier.vlm must be a backend mapping with a 'type', got {self.vlm!r}")


@dataclass(kw_only=True)
class ActionVerifierConfig:
    """The action verifier: ``type`` ``feasibility`` (what the stack knows), ``none`` (Ŝa = 1), or a
    registered learned verifier; ``normalization`` of its scores within one trace's actions.

    Feasibility features and their exponents (0 switches one off): ``depth`` (valid depth, low
    spread at the pick and place points), ``centrality`` (distance of the pick point to the centre of
    the pinned object's depth segment; a pick on no segment is refused), ``visibility`` (how much of
    the object this view sees compared with the other views that pinned it, when their segment
    centres meet within ``same_object_m`` in 3D; needs a bound projector), ``agreement`` (3D
    agreement of the anchor seen from two views, refused when the projection's cross-view rule puts
    them on two objects; needs a bound projector), ``answer_view`` (a pick in the view the answer
    chose scores 1, one moved to another view ``other_view_prior``). ``plan`` > 0 keeps the plan check: the
    step plans the chosen pair and, while a pair finds no plan for its targets (nothing moved), the next-best
    of up to ``plan_check_top_k`` pairs in all (the step's own planning: no dry run before it); 0 plans the chosen
    pair only.
    ``agreement_scale_m`` is the distance at which agreement falls to e^-1, ``agreement_floor`` the
    least it can fall to; ``spread_scale_m`` likewise for the depth spread.
    """

    type: str = "feasibility"
    normalization: str = "max"
    depth: float = 1.0
    centrality: float = 1.0
    visibility: float = 1.0
    agreement: float = 1.0
    answer_view: float = 1.0
    plan: float = 1.0
    plan_check_top_k: int = 2
    agreement_scale_m: float = 0.03
    agreement_floor: float = 0.2
    same_object_m: float = 0.06
    other_view_prior: float = 0.8
    spread_scale_m: float = 0.01
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise TTSConfigError(f"action_verifier.type must be a non-empty name, got {self.type!r}")
        if self.normalization not in NORMALIZATIONS:
            raise TTSConfigError(
                f"action_verifier.normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}"
            )
        for name in ("depth", "centrality", "visibility", "agreement", "answer_view", "plan"):
            setattr(self, name, _check_positive(f"action_verifier.{name}", getattr(self, name), allow_zero=True))
        self.plan_check_top_k = _check_count("action_verifier.plan_check_top_k", self.plan_check_top_k, minimum=0)
        self.agreement_scale_m = _check_positive("action_verifier.agreement_scale_m", self.agreement_scale_m)
        self.agreement_floor = _check_probability("action_verifier.agreement_floor", self.agreement_floor)
        self.same_object_m = _check_positive("action_verifier.same_object_m", self.same_object_m)
        self.other_view_prior = _check_probability("action_verifier.other_view_prior", self.other_view_prior)
        self.spread_scale_m = _check_positive("action_verifier.spread_scale_m", self.spread_scale_m)


@dataclass(kw_only=True)
class ActionSamplingConfig:
    """How N action candidates are derived from one trace (sources tried in the listed order).

    ``segment_radius_m`` bounds the depth segment searched around the pinned point;
    ``min_height_m`` is how far above the support plane a pixel must rise to belong to the object;
    ``sample_margin_px`` keeps sampled points this far inside the segment's border.
    """

    sources: tuple[str, ...] = ACTION_SOURCES
    segment_radius_m: float = 0.08
    min_height_m: float = 0.01
    sample_margin_px: int = 2

    def __post_init__(self) -> None:
        self.sources = tuple(self.sources)
        unknown = [s for s in self.sources if s not in ACTION_SOURCES]
        if unknown or not self.sources:
            raise TTSConfigError(
                f"actions.sources must be a non-empty subset of {ACTION_SOURCES}, got {self.sources!r}"
            )
        if self.sources[0] != "as_written" and "as_written" in self.sources:
            raise TTSConfigError(f"'as_written' must come first in actions.sources when listed, got {self.sources!r}")
        self.segment_radius_m = _check_positive("actions.segment_radius_m", self.segment_radius_m)
        self.min_height_m = _check_positive("actions.min_height_m", self.min_height_m)
        self.sample_margin_px = _check_count("actions.sample_margin_px", self.sample_margin_px, minimum=0)


@dataclass(kw_only=True)
class FeedbackConfig:
    """Feedback-guided resampling: critique the best rejected pair, append it to the next prompt."""

    enabled: bool = True
    max_tokens: int = 160
    temperature: float = 0.0
    include_reward: bool = True

    def __post_init__(self) -> None:
        self.max_tokens = _check_count("feedback.max_tokens", self.max_tokens)
        self.temperature = _check_positive("feedback.temperature", self.temperature, allow_zero=True)


@dataclass(kw_only=True)
class BudgetConfig:
    """Per-step budget: wall time and model calls (generation + verifier + feedback); 0 = unlimited."""

    max_time_s: float = 60.0
    max_calls: int = 0

    def __post_init__(self) -> None:
        self.max_time_s = _check_positive("budget.max_time_s", self.max_time_s, allow_zero=True)
        self.max_calls = _check_count("budget.max_calls", self.max_calls, minimum=0)


@dataclass(kw_only=True)
class TTSConfig:
    """E-TTS for one reason stage: up to ``max_batches`` batches of ``traces_per_batch`` traces
    (one request with ``n`` = traces_per_batch) × ``actions_per_trace`` actions each.

    The paper's batch is one trace with its N actions (``traces_per_batch`` 1); M, the reasoning
    budget, is ``traces_per_batch × max_batches``. ``seed`` fixes the ε-greedy draws and the
    segment samples (None: random). ``prompt_dir`` overrides the verifier/feedback/retry templates.
    """

    traces_per_batch: int = 1
    actions_per_trace: int = 4
    max_batches: int = 4
    temperature: float = 0.7
    max_tokens: int = 1024
    seed: int | None = None
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    reasoning_verifier: ReasoningVerifierConfig = field(default_factory=ReasoningVerifierConfig)
    action_verifier: ActionVerifierConfig = field(default_factory=ActionVerifierConfig)
    actions: ActionSamplingConfig = field(default_factory=ActionSamplingConfig)
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    prompt_dir: str | None = None

    def __post_init__(self) -> None:
        self.traces_per_batch = _check_count("traces_per_batch", self.traces_per_batch)
        self.actions_per_trace = _check_count("actions_per_trace", self.actions_per_trace)
        self.max_batches = _check_count("max_batches", self.max_batches)
        if not 0.0 <= float(self.temperature) <= 2.0 or isinstance(self.temperature, bool):
            raise TTSConfigError(f"temperature must be in [0, 2], got {self.temperature!r}")
        if self.traces_per_batch > 1 and float(self.temperature) < 1e-5:
            # vLLM refuses n > 1 greedy samples (sampling_params.py _verify_greedy_sampling, HTTP 400);
            # they would all be the same trace anyway.
            raise TTSConfigError(
                f"traces_per_batch={self.traces_per_batch} needs temperature > 0 (got {self.temperature}): "
                "greedy samples are all the same and vLLM refuses n > 1 at temperature 0"
            )
        self.max_tokens = _check_count("max_tokens", self.max_tokens)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise TTSConfigError(f"seed must be an integer or null, got {self.seed!r}")
        self.selection = _from_mapping(SelectionConfig, self.selection, "selection")
        self.reasoning_verifier = _from_mapping(ReasoningVerifierConfig, self.reasoning_verifier, "reasoning_verifier")
        self.action_verifier = _from_mapping(ActionVerifierConfig, self.action_verifier, "action_verifier")
        self.actions = _from_mapping(ActionSamplingConfig, self.actions, "actions")
        self.feedback = _from_mapping(FeedbackConfig, self.feedback, "feedback")
        self.budget = _from_mapping(BudgetConfig, self.budget, "budget")

    @property
    def reasoning_budget(self) -> int:
        """M: the most traces one step may sample."""
        return self.traces_per_batch * self.max_batches

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TTSConfig:
        """Build from the ``reasoner`` mapping (its ``type`` key is ignored), naming unknown keys."""
        values = {k: v for k, v in dict(values).items() if k != "type"}
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TTSConfigError(f"unknown E-TTS setting(s) {unknown}; expected some of {sorted(known)}")
        return cls(**values)

    @classmethod
    def best_of_n(cls, n: int, **overrides: Any) -> TTSConfig:
        """The paper's naive baseline: ``n`` traces in one request, the verifier's best one, no
        threshold, no exploration, no feedback, no action scaling."""
        values: dict[str, Any] = {
            "traces_per_batch": n,
            "actions_per_trace": 1,
            "max_batches": 1,
            "selection": {"epsilon": 0.0, "threshold": 0.0},
            "action_verifier": {"type": "none"},
            "actions": {"sources": ("as_written",)},
            "feedback": {"enabled": False},
        }
        values.update(overrides)
        return cls.from_dict(values)


def reads_depth(reasoner: Mapping[str, Any]) -> bool:
    """Whether a reasoner setting (``reasoning.reasoner``) samples actions from depth: E-TTS with a segment source
    (the pick's depth segment: its centre and points inside it). A node that observes for it must take depth."""
    if reasoner.get("type") != "etts":
        return False
    return any(source.startswith("segment") for source in TTSConfig.from_dict(reasoner).actions.sources)

