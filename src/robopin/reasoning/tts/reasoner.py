"""The E-TTS reason stage: joint reasoning × action sampling, two verifiers, ε-greedy selection with a
threshold, feedback-guided resampling, a history of the last K steps, and a per-step budget.

:class:`ETTSReasoner` answers the loop's :class:`~robopin.reasoning.reasoner.ReasoningQuery` like any
reasoner and returns one trace and one action: the chosen trace's text, and its validated decision
with the pick/place points replaced by the chosen action. Per step (Algorithm 1 of the paper):

1. sample a batch of traces (one request, ``n`` = ``traces_per_batch``), validate each;
2. score the valid traces with the reasoning verifier (concurrently), derive N actions per trace
   and score them with the action verifier, normalise the action scores per trace;
3. S = Sc × Ŝa; ε-greedy: explore a random eligible pair whose reasoning the verifier did not reject
   (``selection.min_reasoning_score``), else take the best if S > η;
4. a rejected batch triggers feedback: the verifier critiques the best rejected pair, the critique
   is appended to the instruction prompt (the retry template) and the next batch is sampled;
5. after ``max_batches`` (or when the time/call budget is spent) the best pair seen whose reasoning the
   verifier did not reject is run; the step is refused (``tts_rejected``) when there is none, or when so
   configured.

Everything is logged in ``Reasoning.extra["tts"]``: candidates, scores, selections, feedback text,
time per stage.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robopin.pincot.prompts import HistoryEntry, PromptTemplates, feedback_prompt, retry_prompt
from robopin.pincot.trace import Trace
from robopin.reasoning.errors import TaskCanceled, TaskRefusal
from robopin.reasoning.protocols import TargetProjector
from robopin.reasoning.reasoner import REASONERS, Reasoning, ReasoningQuery, refusal_from_vlm_error
from robopin.reasoning.tts.candidates import ActionCandidate, SegmentCache, action_candidates
from robopin.reasoning.tts.config import TTSConfig
from robopin.reasoning.tts.selection import Selection, joint_scores, normalize, select
from robopin.reasoning.tts.verifiers import (
    ActionContext,
    ActionScore,
    ActionVerifier,
    ReasoningVerifier,
    drawn_views,
    make_action_verifier,
)
from robopin.vlm.base import ChatMessage, SamplingParams, VLMBackend
from robopin.vlm.errors import VLMError

logger = logging.getLogger(__name__)

# What a seeded draw is for: each purpose has a stream of its own per (step, query, batch).
_SAMPLING, _ACTIONS, _SELECTION = 0, 1, 2

TTS_REFUSALS = {
    "tts_rejected": "E-TTS rejected every batch (no pair scored above the threshold) and is set to refuse, or the "
    "verifier rejected the reasoning of every trace",
}
"""Reasons an E-TTS step can end without an action, beyond the loop's own."""


@dataclass
class PairRecord:
    """One scored ⟨reasoning, action⟩ pair."""

    batch: int
    trace: int
    candidate: ActionCandidate | None
    reasoning_score: float
    action_score: ActionScore
    normalized_action_score: float
    joint: float
    eligible: bool

    def as_dict(self) -> dict[str, Any]:
        candidate = self.candidate
        return {
            "batch": self.batch,
            "trace": self.trace,
            "source": candidate.source if candidate else "",
            "pick": _point(candidate.pick) if candidate else None,
            "place": _point(candidate.place) if candidate else None,
            "reasoning_score": round(self.reasoning_score, 4),
            "action_score": round(self.action_score.value, 4),
            "action_features": {k: round(v, 4) for k, v in self.action_score.features.items()},
            "action_refusal": self.action_score.refusal,
            "normalized_action_score": round(self.normalized_action_score, 4),
            "joint": round(self.joint, 4),
            "eligible": self.eligible,
        }


def _point(request) -> dict[str, Any] | None:
    if request is None:
        return None
    return {"id": request.id, "img_idx": request.img_idx, "u": round(request.u, 1), "v": round(request.v, 1)}


@dataclass
class StepLog:
    """What one E-TTS step did (``Reasoning.extra["tts"]``)."""

    batches: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = ""
    calls: dict[str, int] = field(default_factory=lambda: {"generate": 0, "verify": 0, "feedback": 0})
    samples: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)
    chosen: dict[str, Any] | None = None
    fallbacks: list[dict[str, Any]] = field(default_factory=list)  # next-best pairs the step plans if need be
    refusal: str = ""  # "<reason>: <message>" when the step ends refused (tts_rejected)

    def add_time(self, stage: str, seconds: float) -> None:
        self.timings_s[stage] = self.timings_s.get(stage, 0.0) + seconds

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "stop_reason": self.stop_reason,
            "calls": dict(self.calls),
            "samples": self.samples,
            "timings_s": {k: round(v, 4) for k, v in self.timings_s.items()},
            "chosen": self.chosen,
            **({"fallbacks": self.fallbacks} if self.fallbacks else {}),
            **({"refusal": self.refusal} if self.refusal else {}),
        }


def step_log_lines(log: Mapping[str, Any], step: int) -> list[str]:
    """``log`` (a :class:`StepLog` as a dict) as lines an operator reads: per batch every trace with its
    verifier verdict and drawn errors, every pair with its scores, the selection; then the chosen pair."""

    def where(point: Mapping[str, Any] | None) -> str:
        return "-" if not point else f"{point['id']}@{point['img_idx']}({point['u']:.0f},{point['v']:.0f})"

    lines = []
    for batch in log.get("batches", ()):
        head = f"step {step} batch {batch.get('batch', 0)}"
        if "error" in batch:
            lines.append(f"{head}: {batch['error']}")
            continue
        for trace in batch.get("traces", ()):
            drawn = trace.get("drawn_errors")
            lines.append(f"{head} trace {trace['trace']}: Sc={trace['reasoning_score']:.2f}"
                         f"{'' if trace['valid'] else ' invalid (' + trace['refusal'] + ')'}"
                         f"{'' if drawn is None else '; drawn: ' + (', '.join(drawn) or 'none')}")
        for pair in batch.get("pairs", ()):
            refusal = f" refused ({pair['action_refusal']})" if pair.get("action_refusal") else ""
            lines.append(f"{head} pair t{pair['trace']} {pair['source'] or '-'}: pick {where(pair['pick'])} "
                         f"place {where(pair['place'])} Sa={pair['action_score']:.2f} "
                         f"S={pair['joint']:.3f}{'' if pair['eligible'] else ' ineligible'}{refusal}")
        chosen = batch.get("selection") or {}
        if chosen:
            lines.append(f"{head} selection: {chosen['mode']} index {chosen['index']} "
                         f"(best {chosen['best_score']:.3f} at {chosen['best_index']}, u={chosen['u']:.3f})")
    chosen = log.get("chosen")
    lines.append(f"step {step}: {log.get('stop_reason', '')} after {len(log.get('batches', ()))} batch(es), "
                 f"{log.get('samples', 0)} sample(s); chosen "
                 + ("none" if not chosen else f"trace {chosen['trace']} pick {where(chosen['pick'])} "
                    f"place {where(chosen['place'])} S={chosen['joint']:.3f}")
                 + "".join(f"; next-best t{p['trace']} pick {where(p['pick'])} place {where(p['place'])} "
                           f"S={p['joint']:.3f}" for p in log.get("fallbacks", ()))
                 + (f"; refused {log['refusal']}" if log.get("refusal") else ""))
    return lines


def messages_with_feedback(
    messages: Sequence[ChatMessage],
    prompt: str,
    previous_reasoning: str,
    feedback: str,
    *,
    templates: PromptTemplates | None = None,
) -> list[ChatMessage]:
    """The query's messages with the "Previous Attempt" block (reasoning + critique) after its prompt.

    The prompt text part is replaced by the retry prompt, which starts with the prompt itself, so
    the images and the prompt stay a shared prefix. Only the latest critique is carried (the
    paper concatenates every one; a long tail of stale critiques crowds the prompt).
    """
    text = retry_prompt(prompt, previous_reasoning, feedback, templates=templates)
    result = list(messages)
    for index in range(len(result) - 1, -1, -1):
        message = result[index]
        if message.role != "user":
            continue
        parts = list(message.parts)
        for position in range(len(parts) - 1, -1, -1):
            if isinstance(parts[position], str) and parts[position] == prompt:
                parts[position] = text
                break
        else:
            parts.append(text[len(prompt) :].lstrip("\n") if text.startswith(prompt) else text)
        result[index] = ChatMessage("user", tuple(parts))
        return result
    raise ValueError("the query has no user message to append feedback to")


def _reasoning_text(text: str, trace: Trace | None, limit: int = 2000) -> str:
    """The reasoning to show a verifier or the retry prompt: think + answer of a trace, else the text."""
    if trace is not None and (trace.think or trace.answer):
        shown = f"{trace.think.strip()}\nAnswer: {trace.answer.strip()}"
    else:
        shown = text.strip()
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


class ETTSReasoner:
    """Embodied test-time scaling as a reason stage (see the module docstring).

    ``backend`` samples the traces; ``verifier_backend`` (default: the same) answers the yes/no
    and feedback questions. ``bind_stages`` gives the action verifier the loop's projector (agreement across
    views); without it the verifier scores from the images' depth only. Whether the chosen pair plans is the step's
    own planning: the decision carries up to ``plan_check_top_k - 1`` next-best pairs (``alternatives``), which the
    loop plans in turn while the ones before find no plan for their targets.
    """

    def __init__(
        self,
        backend: VLMBackend,
        config: TTSConfig | None = None,
        *,
        verifier_backend: VLMBackend | None = None,
        action_verifier: ActionVerifier | None = None,
        projector: TargetProjector | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.backend = backend
        self.config = config or TTSConfig()
        self.verifier_backend = verifier_backend or backend
        self.templates = PromptTemplates(self.config.prompt_dir) if self.config.prompt_dir else None
        self.reasoning_verifier = ReasoningVerifier(
            self.verifier_backend, self.config.reasoning_verifier, templates=self.templates
        )
        self.action_verifier = action_verifier or make_action_verifier(self.config.action_verifier)
        self.projector = projector
        self.clock = clock
        self.rng = np.random.default_rng(self.config.seed)
        self._seed = self.config.seed
        self._asked: dict[int, int] = {}  # step -> queries answered for it in this task
        self.history: deque[HistoryEntry] = deque(maxlen=max(self.config.reasoning_verifier.history, 1))
        self.last_log: StepLog | None = None
        self._segments: SegmentCache | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._action_pool: ThreadPoolExecutor | None = None

    def bind_stages(self, *, projector: TargetProjector | None = None) -> None:
        """Give the action verifier the loop's projection stage."""
        self.projector = projector

    def _executor(self) -> ThreadPoolExecutor | None:
        """The pool that issues verifier calls concurrently (created once: thread start-up is not free)."""
        concurrency = self.config.reasoning_verifier.concurrency
        if concurrency > 1 and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="etts-verifier")
        return self._pool

    def _actions_pool(self) -> ThreadPoolExecutor:
        """The thread the action verifier runs on beside the reasoning verifier (one batch at a time)."""
        if self._action_pool is None:
            self._action_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="etts-actions")
        return self._action_pool

    def close(self) -> None:
        """Stop the verifier threads (a later step starts new ones)."""
        for pool in (self._pool, self._action_pool):
            if pool is not None:
                pool.shutdown(wait=True)
        self._pool = self._action_pool = None

    def reset(self, seed: int | None = None) -> None:
        """Forget the history buffer (a new task); with ``seed``, restart the random draws from it."""
        self.history.clear()
        self._asked.clear()
        if seed is not None:
            self.rng = np.random.default_rng(seed)
            self._seed = seed

    def _draws(self, key: tuple[int, ...], purpose: int) -> np.random.Generator:
        """The random draws for ``purpose`` at ``key`` (step, query of the step, batch[, trace]).

        Seeded, each draw is a function of the seed and of where it is made, never of how many draws
        came before: how many action candidates a trace yields depends on the depth under its pins, so
        one shared stream let a pixel of difference between two runs of a layout (through the nodes, in
        process) change every later request's sampling seed, hence the model's answers. Unseeded, the
        one stream from the OS serves every purpose.
        """
        if self._seed is None:
            return self.rng
        return np.random.default_rng([int(self._seed) % 2**63, *key, purpose])

    # ------------------------------------------------------------------ the stage
    def reason(self, query: ReasoningQuery) -> Reasoning:
        """Sample, verify and select one ⟨trace, action⟩ for ``query`` (see the module docstring)."""
        if query.step == 0 and not query.history:
            self.reset()  # the first query of a task: the buffer holds another task's steps
        config = self.config
        # A step may ask more than once (a subtask, then its pointing): the draws tell them apart.
        asked = self._asked.get(query.step, 0)
        self._asked[query.step] = asked + 1
        step_key = (max(int(query.step), 0), asked)
        log = StepLog()
        start = self.clock()
        model_time = 0.0
        history = tuple(self.history) if config.reasoning_verifier.history else ()
        messages = list(query.messages)
        if self._segments is None or self._segments.observation is not query.observation:
            # Queries on one observation (subtask then pointing) share the depth segments.
            self._segments = SegmentCache(query.observation, config.actions)
        segments = self._segments
        pairs: list[PairRecord] = []
        texts: list[str] = []
        interpretations: list[Any] = []
        model = ""
        chosen: PairRecord | None = None
        executor = self._executor()
        for batch in range(config.max_batches):
            if batch and query.should_stop():
                # A batch is a model call plus its verifier calls: cancel is honoured between batches.
                raise TaskCanceled(f"canceled during E-TTS after {batch} batch(es) of step {query.step}")
            reason = self._budget_spent(log, start) if batch else ""
            if reason:
                log.stop_reason = reason
                break
            batch_log: dict[str, Any] = {"batch": batch}
            t0 = self.clock()
            try:
                sampling = SamplingParams(
                    n=config.traces_per_batch,
                    temperature=config.temperature,
                    max_tokens=config.max_tokens,
                    # A fixed config seed gives each request its own reproducible sampling seed.
                    seed=None if self._seed is None
                    else int(self._draws((*step_key, batch), _SAMPLING).integers(2**31 - 1)),
                )
                drawn_before = len(getattr(self.backend, "injected", ()))
                result = self.backend.generate(messages, sampling)
            except VLMError as error:
                if not texts:
                    raise refusal_from_vlm_error(error) from error
                log.stop_reason = "vlm_error"
                batch_log["error"] = f"{type(error).__name__}: {error}"
                log.batches.append(batch_log)
                break
            elapsed = self.clock() - t0
            log.add_time("generate", elapsed)
            model_time += elapsed
            log.calls["generate"] += 1
            model = result.model
            first = len(texts)
            batch_texts = [sample.text for sample in result.samples]
            if not batch_texts:
                raise TaskRefusal("vlm_error", f"model {result.model!r} returned no sample")
            log.samples += len(batch_texts)
            t0 = self.clock()
            batch_interpretations = [query.interpret(text) for text in batch_texts]
            log.add_time("validate", self.clock() - t0)
            texts += batch_texts
            interpretations += batch_interpretations

            # The two verifiers read the same traces and nothing of each other's: the action verifier's
            # depth segments and projections run while the reasoning verifier's model call is out, so the step
            # waits for the longer of the two, not their sum. The scores are those of running them in turn.
            scoring = self._actions_pool().submit(
                self._score_actions, query, batch_interpretations, first=first, segments=segments, log=log,
                key=(*step_key, batch),
            )
            t0 = self.clock()
            try:
                reasoning_scores = self._verify_reasoning(
                    query, batch_texts, batch_interpretations, history=history, executor=executor, log=log
                )
            except BaseException:
                wait([scoring])  # no projection of this step is left running behind a refusal
                raise
            elapsed = self.clock() - t0
            log.add_time("verify_reasoning", elapsed)
            model_time += elapsed
            batch_pairs = self._pairs(scoring.result(), batch_interpretations, reasoning_scores, first=first,
                                      batch=batch)
            pairs += batch_pairs
            selection = select(
                [p.joint for p in batch_pairs],
                [p.eligible for p in batch_pairs],
                epsilon=config.selection.epsilon,
                threshold=config.selection.threshold,
                rng=self._draws((*step_key, batch), _SELECTION),
                explorable=[p.reasoning_score >= config.selection.min_reasoning_score for p in batch_pairs],
            )
            # A simulated model (robopin.sim's oracle backend) names the errors it drew for each sample, in
            # order; a real model draws none to name.
            drawn = list(getattr(self.backend, "injected", ()))[drawn_before:]
            batch_log["traces"] = [
                {
                    "trace": first + k,
                    "valid": bool(getattr(i, "valid", False)),
                    "refusal": getattr(getattr(i, "refusal", None), "reason", "") or "",
                    "reasoning_score": round(s, 4),
                    **({"drawn_errors": list(drawn[k])} if len(drawn) == len(batch_texts) else {}),
                }
                for k, (i, s) in enumerate(zip(batch_interpretations, reasoning_scores, strict=True))
            ]
            batch_log["pairs"] = [p.as_dict() for p in batch_pairs]
            batch_log["selection"] = _selection_dict(selection)
            log.batches.append(batch_log)
            if selection.accepted:
                assert selection.index is not None
                chosen = batch_pairs[selection.index]
                log.stop_reason = "accepted" if selection.mode == "greedy" else "explored"
                break
            if (
                batch + 1 < config.max_batches
                and config.feedback.enabled
                and not self._budget_spent(log, start)
                and not query.should_stop()
            ):
                t0 = self.clock()
                best = batch_pairs[selection.best_index] if selection.best_index is not None else None
                critique, previous = self._feedback(query, texts, interpretations, first=first, best=best, log=log)
                elapsed = self.clock() - t0
                log.add_time("feedback", elapsed)
                model_time += elapsed
                batch_log["feedback"] = critique
                if critique:
                    messages = messages_with_feedback(
                        query.messages, query.prompt, previous, critique, templates=self.templates
                    )
        else:
            log.stop_reason = "max_batches"

        refusal: TaskRefusal | None = None
        if chosen is None:
            chosen, refusal = self._exhausted(pairs, log)
        if chosen is None:
            # No pair was eligible (every trace failed validation): hand the loop the first trace so
            # it refuses with the validation's own reason.
            chosen_text, chosen_interpretation = texts[0], interpretations[0]
        else:
            chosen_text, chosen_interpretation = texts[chosen.trace], interpretations[chosen.trace]
        if refusal is not None:
            # E-TTS refuses the step: the decision carries the refusal, as a trace that fails validation does,
            # so the loop records the step (the best trace seen, and the whole search that rejected it) before
            # it ends the task; a refusal raised here would take with it the search that says why.
            chosen_interpretation = dataclasses.replace(chosen_interpretation, refusal=refusal)
            log.refusal = str(refusal)
            chosen = None
        return self._result(
            query,
            chosen_text,
            chosen_interpretation,
            chosen=chosen,
            alternatives=self._alternatives(chosen, pairs, interpretations, log),
            model=model,
            model_time=model_time,
            texts=texts,
            pairs=pairs,
            log=log,
            start=start,
        )

    # ------------------------------------------------------------------ pieces
    def _alternatives(self, chosen: PairRecord | None, pairs: Sequence[PairRecord], interpretations: Sequence[Any],
                      log: StepLog) -> tuple[Any, ...]:
        """The next-best pairs after ``chosen`` (best joint score first, each pick and place once), as decisions the
        loop plans in turn while the ones before find no plan: at most ``plan_check_top_k - 1``, only eligible pairs
        whose reasoning the verifier did not reject."""
        verifier, selection = self.config.action_verifier, self.config.selection
        wanted = verifier.plan_check_top_k - 1 if verifier.plan > 0 else 0
        if chosen is None or chosen.candidate is None or chosen.candidate.pick is None or wanted <= 0:
            return ()

        def where(pair: PairRecord) -> tuple:
            candidate = pair.candidate
            return tuple((r.img_idx, r.u, r.v) for r in (candidate.pick, candidate.place))

        seen, found = {where(chosen)}, []
        ranked = sorted((p for p in pairs if p is not chosen and p.eligible and p.candidate is not None
                         and p.candidate.pick is not None and p.candidate.place is not None
                         and p.reasoning_score >= selection.min_reasoning_score), key=lambda p: -p.joint)
        for pair in ranked:
            if where(pair) in seen:
                continue
            seen.add(where(pair))
            candidate = pair.candidate
            found.append(dataclasses.replace(interpretations[pair.trace], pick=candidate.pick, place=candidate.place,
                                             support=candidate.support, alternatives=()))
            log.fallbacks.append(pair.as_dict())
            if len(found) == wanted:
                break
        return tuple(found)

    def _budget_spent(self, log: StepLog, start: float) -> str:
        budget = self.config.budget
        if budget.max_time_s and self.clock() - start >= budget.max_time_s:
            return "budget_time"
        if budget.max_calls and log.total_calls >= budget.max_calls:
            return "budget_calls"
        return ""

    def _verify_reasoning(
        self,
        query: ReasoningQuery,
        texts: Sequence[str],
        interpretations: Sequence[Any],
        *,
        history: Sequence[HistoryEntry],
        executor: ThreadPoolExecutor | None,
        log: StepLog,
    ) -> list[float]:
        """Sc per trace: 0 for a trace that failed validation (no call), 1 with the verifier off."""
        scores = [0.0] * len(texts)
        valid = [k for k, i in enumerate(interpretations) if getattr(i, "valid", False)]
        if not self.config.reasoning_verifier.enabled:
            for k in valid:
                scores[k] = 1.0
            return scores
        traces = [getattr(interpretations[k], "trace", None) for k in valid]
        # The verifier reads the trace as the model wrote it (tags included): the pins it sees drawn
        # carry the same IDs as the text.
        items = [(texts[k].strip()[:6000], trace) for k, trace in zip(valid, traces, strict=True)]
        try:
            values = self.reasoning_verifier.score_many(query.instruction, query.observation, items, history, executor)
        except VLMError as error:
            raise refusal_from_vlm_error(error) from error
        log.calls["verify"] += len(items)
        for k, value in zip(valid, values, strict=True):
            scores[k] = value
        return scores

    def _score_actions(
        self,
        query: ReasoningQuery,
        interpretations: Sequence[Any],
        *,
        first: int,
        segments: SegmentCache,
        log: StepLog,
        key: tuple[int, ...],
    ) -> list[tuple[ActionCandidate, ActionScore]]:
        """N action candidates per valid trace, each with the action verifier's score."""
        config = self.config
        t0 = self.clock()
        candidates: list[ActionCandidate] = []
        for k, interpretation in enumerate(interpretations):
            if getattr(interpretation, "valid", False):
                candidates += action_candidates(
                    first + k,
                    interpretation,
                    query.observation,
                    count=config.actions_per_trace,
                    config=config.actions,
                    segments=segments,
                    rng=self._draws((*key, first + k), _ACTIONS),
                )
        log.add_time("sample_actions", self.clock() - t0)
        t0 = self.clock()
        context = ActionContext(
            query.instruction,
            query.observation,
            [getattr(i, "trace", None) for i in interpretations],
            segments=segments,
            projector=self.projector,
            history=tuple(self.history),
        )
        scores = self.action_verifier.score(candidates, context) if candidates else []
        log.add_time("verify_actions", self.clock() - t0)
        for part, seconds in context.timings_s.items():  # inside verify_actions
            log.add_time(part, seconds)
        return list(zip(candidates, scores, strict=True))

    def _pairs(
        self,
        scored: Sequence[tuple[ActionCandidate, ActionScore]],
        interpretations: Sequence[Any],
        reasoning_scores: Sequence[float],
        *,
        first: int,
        batch: int,
    ) -> list[PairRecord]:
        """The batch's ⟨reasoning, action⟩ pairs: Sc × the action score normalised within its trace."""
        config = self.config
        pairs: list[PairRecord] = []
        for k in range(len(interpretations)):
            trace_index = first + k
            own = [(c, s) for c, s in scored if c.trace_index == trace_index]
            if not own:
                # An invalid trace: one ineligible pair, so logs and the exhausted fallback see it.
                pairs.append(
                    PairRecord(
                        batch, trace_index, None, reasoning_scores[k], ActionScore(0.0), 0.0, 0.0, eligible=False
                    )
                )
                continue
            normalized = normalize([s.value for _, s in own], config.action_verifier.normalization)
            joint = joint_scores([reasoning_scores[k]] * len(own), normalized)
            for (candidate, score), n, j in zip(own, normalized, joint, strict=True):
                pairs.append(
                    PairRecord(
                        batch, trace_index, candidate, reasoning_scores[k], score, n, j, eligible=not score.refusal
                    )
                )
        return pairs

    def _feedback(
        self,
        query: ReasoningQuery,
        texts: Sequence[str],
        interpretations: Sequence[Any],
        *,
        first: int,
        best: PairRecord | None,
        log: StepLog,
    ) -> tuple[str, str]:
        """(critique, the reasoning it is about) for a rejected batch.

        When no trace of the batch validated, the critique is the validation's own message (exact,
        and it costs no model call); otherwise the verifier critiques the best rejected pair.
        """
        if best is None:
            interpretation = interpretations[first]
            refusal = getattr(interpretation, "refusal", None)
            message = refusal.message if refusal is not None else "it could not be used"
            critique = (
                f"The previous answer could not be executed: {message}. Follow the required format exactly "
                "and give a pick point and a place point."
            )
            return critique, _reasoning_text(texts[first], getattr(interpretation, "trace", None))
        trace = getattr(interpretations[best.trace], "trace", None)
        reasoning = _reasoning_text(texts[best.trace], trace)
        reward = best.action_score.value if self.config.feedback.include_reward and best.candidate else None
        prompt = feedback_prompt(query.instruction, reasoning, best.joint, reward=reward, templates=self.templates)
        images = drawn_views(query.observation, trace)
        try:
            feedback = self.config.feedback
            result = self.verifier_backend.generate(
                [ChatMessage("user", (*images, prompt))],
                SamplingParams(temperature=feedback.temperature, max_tokens=feedback.max_tokens),
            )
        except VLMError as error:
            logger.warning("E-TTS feedback request failed (%s); resampling without a critique", error)
            return "", reasoning
        log.calls["feedback"] += 1
        critique = result.samples[0].text.strip() if result.samples else ""
        return critique, reasoning

    def _exhausted(self, pairs: Sequence[PairRecord], log: StepLog) -> tuple[PairRecord | None, TaskRefusal | None]:
        """The pair to run once the batches are spent, or the best pair with the refusal that keeps it from running."""
        eligible = [p for p in pairs if p.eligible]
        if not eligible:
            return None, None
        best = max(eligible, key=lambda p: p.joint)  # max keeps the earliest of equal scores
        selection = self.config.selection
        if selection.on_exhausted == "refuse":
            return best, TaskRefusal(
                "tts_rejected",
                f"no pair scored above the threshold {selection.threshold} in {len(log.batches)} "
                f"batch(es) ({log.stop_reason}); best joint score {best.joint:.3f}",
            )
        verified = [p for p in eligible if p.reasoning_score >= selection.min_reasoning_score]
        if not verified:
            # Every trace's reasoning was judged wrong: running the best of them runs a known-wrong answer.
            return best, TaskRefusal(
                "tts_rejected",
                f"the verifier rejected the reasoning of every trace in {len(log.batches)} batch(es) "
                f"({log.stop_reason}; best reasoning score {max(p.reasoning_score for p in eligible):.3f}, "
                f"below min_reasoning_score {selection.min_reasoning_score})",
            )
        return max(verified, key=lambda p: p.joint), None

    def _result(
        self,
        query: ReasoningQuery,
        text: str,
        interpretation: Any,
        *,
        chosen: PairRecord | None,
        alternatives: tuple[Any, ...] = (),
        model: str,
        model_time: float,
        texts: Sequence[str],
        pairs: Sequence[PairRecord],
        log: StepLog,
        start: float,
    ) -> Reasoning:
        if chosen is not None and chosen.candidate is not None and chosen.candidate.pick is not None:
            candidate = chosen.candidate
            interpretation = dataclasses.replace(
                interpretation, pick=candidate.pick, place=candidate.place, support=candidate.support,
                alternatives=alternatives,
            )
        if chosen is not None:
            log.chosen = chosen.as_dict()
            trace = getattr(interpretation, "trace", None)
            self.history.append(
                HistoryEntry(
                    f"step {query.step} ({', '.join(query.observation.view_names)})",
                    _reasoning_text(text, trace, limit=600),
                )
            )
        log.add_time("total", self.clock() - start)
        per_trace = [0.0] * len(texts)
        for pair in pairs:
            per_trace[pair.trace] = max(per_trace[pair.trace], pair.joint)
        self.last_log = log
        logger.info(
            "E-TTS step %d: %s after %d batch(es), %d sample(s), calls %s; chosen %s; %.2f s",
            query.step,
            log.stop_reason,
            len(log.batches),
            log.samples,
            log.calls,
            chosen.candidate.describe() if chosen is not None and chosen.candidate else "none",
            log.timings_s.get("total", 0.0),
        )
        return Reasoning(
            text,
            interpretation,
            model,
            model_time,
            candidates=tuple(texts),
            scores=tuple(per_trace),
            extra={"tts": log.as_dict()},
        )

    def __repr__(self) -> str:
        c = self.config
        return (
            f"ETTSReasoner({self.backend!r}, M={c.reasoning_budget} ({c.traces_per_batch}x{c.max_batches} batches), "
            f"N={c.actions_per_trace}, eps={c.selection.epsilon}, eta={c.selection.threshold})"
        )


def _selection_dict(selection: Selection) -> dict[str, Any]:
    return {
        "mode": selection.mode,
        "index": selection.index,
        "best_index": selection.best_index,
        "best_score": round(selection.best_score, 4),
        "u": round(selection.u, 4),
    }


@REASONERS.register("etts")
def make_reasoner(settings: Mapping[str, Any], backend: VLMBackend) -> ETTSReasoner:
    """The ``etts`` reasoner factory (``reasoner: {type: etts, ...}`` in the reasoning config)."""
    config = TTSConfig.from_dict(settings)
    verifier_backend = None
    if config.reasoning_verifier.vlm is not None:
        from robopin.vlm import make_backend

        verifier_backend = make_backend(dict(config.reasoning_verifier.vlm))
    return ETTSReasoner(backend, config, verifier_backend=verifier_backend)
