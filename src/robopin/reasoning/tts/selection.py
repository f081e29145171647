"""E-TTS scoring and selection, as pure functions: per-trace normalisation of action scores, the joint
score S = Sc × Ŝa, and ε-greedy selection with the acceptance threshold η (eq. 5–6 of the paper).

Nothing here calls a model; every random draw comes from the generator passed in, so tests fix it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from robopin.reasoning.tts.config import NORMALIZATIONS, TTSConfigError


def normalize(scores: Sequence[float], method: str = "max") -> list[float]:
    """Normalise one trace's action scores (all conditioned on the same reasoning).

    - ``max``: divide by the best, so the best feasible action scores 1 and a hard 0 stays 0;
    - ``minmax``: map the batch's range onto [0, 1] (all equal and positive: all 1);
    - ``sum``: divide by the total (a distribution over the trace's actions, the paper's
      derivation with a per-reasoning constant C_c);
    - ``none``: keep the verifier's own scale.

    All zeros stay all zeros: a trace whose every action is infeasible cannot win by normalisation.
    """
    if method not in NORMALIZATIONS:
        raise TTSConfigError(f"normalization must be one of {NORMALIZATIONS}, got {method!r}")
    values = np.asarray(list(scores), dtype=np.float64)
    if values.size == 0:
        return []
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"action scores must be finite and >= 0, got {values.tolist()}")
    if method == "none":
        return values.tolist()
    high = float(values.max())
    if high <= 0.0:
        return np.zeros_like(values).tolist()
    if method == "max":
        return (values / high).tolist()
    if method == "sum":
        return (values / float(values.sum())).tolist()
    low = float(values.min())
    if high - low <= 1e-12:
        return np.ones_like(values).tolist()
    return ((values - low) / (high - low)).tolist()


def joint_scores(reasoning_scores: Sequence[float], normalized_action_scores: Sequence[float]) -> list[float]:
    """S = Sc × Ŝa for each pair (same order, same length)."""
    if len(reasoning_scores) != len(normalized_action_scores):
        raise ValueError(f"{len(reasoning_scores)} reasoning scores for {len(normalized_action_scores)} action scores")
    return [float(c) * float(a) for c, a in zip(reasoning_scores, normalized_action_scores, strict=True)]


SelectionMode = Literal["greedy", "explore", "rejected", "no_candidate"]


@dataclass(frozen=True)
class Selection:
    """The outcome for one batch.

    ``index`` is the chosen pair (None when the batch is rejected or has no eligible pair);
    ``best_index`` / ``best_score`` the highest joint score among eligible pairs; ``u`` the
    exploration draw.
    """

    mode: SelectionMode
    index: int | None
    best_index: int | None
    best_score: float
    u: float

    @property
    def accepted(self) -> bool:
        return self.index is not None


def select(
    joint: Sequence[float],
    eligible: Sequence[bool],
    *,
    epsilon: float,
    threshold: float,
    rng: np.random.Generator,
    explorable: Sequence[bool] | None = None,
) -> Selection:
    """ε-greedy selection over one batch (eq. 6).

    With probability ε a random eligible pair is taken (exploration); otherwise the best eligible
    pair is taken when its joint score exceeds η (η = 0 accepts any best pair, which is best-of-N),
    and the batch is rejected when it does not. Ties go to the earlier pair, so the action as the
    model wrote it wins a tie against its variants. Ineligible pairs (invalid reasoning, a hard
    infeasibility) are never chosen, not even to explore: the arm only moves on validated reasoning.
    ``explorable`` (default: every eligible pair) narrows the pairs exploration may take (E-TTS: those whose
    reasoning the verifier did not reject); with none, an exploration draw falls through to the greedy rule.
    """
    if len(joint) != len(eligible):
        raise ValueError(f"{len(joint)} joint scores for {len(eligible)} eligibility flags")
    if explorable is not None and len(explorable) != len(eligible):
        raise ValueError(f"{len(explorable)} explorable flags for {len(eligible)} eligibility flags")
    u = float(rng.random())
    indices = [i for i, ok in enumerate(eligible) if ok]
    if not indices:
        return Selection("no_candidate", None, None, 0.0, u)
    best = max(indices, key=lambda i: (joint[i], -i))
    best_score = float(joint[best])
    candidates = indices if explorable is None else [i for i in indices if explorable[i]]
    if u < epsilon and candidates:
        choice = candidates[int(rng.integers(len(candidates)))]
        return Selection("explore", choice, best, best_score, u)
    if best_score > threshold or threshold == 0.0:
        return Selection("greedy", best, best, best_score, u)
    return Selection("rejected", None, best, best_score, u)
