"""A behavioural check any :class:`~robopin.vlm.base.VLMBackend` must pass, for backend authors' tests.

The simulator's oracle, a deployment's own server backend, or a new local runtime can call
:func:`check_backend_contract` with a real request and get a :class:`ContractViolationError` naming the
first broken promise, instead of finding it later inside the reasoning loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from robopin.vlm.base import ChatMessage, GenerationResult, Sample, SamplingParams, VLMBackend, YesNoScore
from robopin.vlm.errors import VLMError
from robopin.vlm.points import PointConvention


class ContractViolationError(VLMError):
    """A backend broke a promise of the VLMBackend contract."""


def check_backend_contract(
    backend: VLMBackend,
    messages: Sequence[ChatMessage],
    *,
    n: int = 2,
    check_logprobs: bool = True,
    verifier_messages: Sequence[ChatMessage] | None = None,
) -> GenerationResult:
    """Run ``generate`` and ``score_yes_no`` once and check the shapes of what comes back.

    Returns the generation result so a test can go on to check its content.
    """
    if not isinstance(backend.point_convention, PointConvention):
        raise ContractViolationError(f"{backend!r}.point_convention is not a PointConvention")
    sampling = SamplingParams(n=n, temperature=1.0, max_tokens=16, seed=0, logprobs=check_logprobs)
    result = backend.generate(messages, sampling)
    if not isinstance(result, GenerationResult):
        raise ContractViolationError(f"generate returned {type(result).__name__}, not GenerationResult")
    if len(result.samples) != n:
        raise ContractViolationError(f"generate(n={n}) returned {len(result.samples)} samples")
    for index, sample in enumerate(result.samples):
        if not isinstance(sample, Sample) or not isinstance(sample.text, str):
            raise ContractViolationError(f"sample {index} is not a Sample with text: {sample!r}")
        if check_logprobs:
            if sample.logprobs is None:
                raise ContractViolationError(f"sample {index} has no logprobs although logprobs=True was asked")
            if any(not step.logprob <= 0.0 for step in sample.logprobs):
                raise ContractViolationError(f"sample {index} has a log-probability above 0")
    score = backend.score_yes_no(verifier_messages or messages)
    if not isinstance(score, YesNoScore):
        raise ContractViolationError(f"score_yes_no returned {type(score).__name__}, not YesNoScore")
    if not (score.logprob_yes <= 0.0 and score.logprob_no <= 0.0):
        raise ContractViolationError(f"yes/no log-probabilities must be <= 0, got {score!r}")
    if not (0.0 <= score.p_yes <= 1.0 and math.isfinite(score.p_yes)):
        raise ContractViolationError(f"p_yes must be a probability, got {score.p_yes!r}")
    return result
