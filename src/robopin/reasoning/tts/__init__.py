"""Embodied test-time scaling (E-TTS) as a drop-in reason stage of the reasoning loop.

Selected by configuration — ``reasoner: {type: etts, traces_per_batch: 1, actions_per_trace: 4,
max_batches: 4, selection: {epsilon: 0.1, threshold: 0.4}, ...}`` in the reasoning config — the
loop's registry imports this package, whose :func:`make_reasoner` registers itself. The reasoner
samples PinCoT traces × pick/place actions, scores each pair with a VLM reasoning verifier and a
feasibility action verifier (S = Sc × Ŝa), selects ε-greedily above a threshold, and resamples with
the verifier's critique when a batch is rejected. Every module is switchable (:class:`TTSConfig`).

    from robopin.reasoning.tts import ETTSReasoner, TTSConfig
    reasoner = ETTSReasoner(backend, TTSConfig(actions_per_trace=4, max_batches=4))
    reasoner.bind_stages(projector=projector)   # optional: 3D agreement across views
    loop = ReasoningLoop(config, backend, observer, projector, actor, reasoner=reasoner)
"""

from robopin.reasoning.tts.candidates import ActionCandidate, DepthSegment, action_candidates, depth_segment
from robopin.reasoning.tts.config import (
    ActionSamplingConfig,
    ActionVerifierConfig,
    BudgetConfig,
    FeedbackConfig,
    ReasoningVerifierConfig,
    SelectionConfig,
    TTSConfig,
    TTSConfigError,
    reads_depth,
)
from robopin.reasoning.tts.reasoner import (
    TTS_REFUSALS,
    ETTSReasoner,
    StepLog,
    make_reasoner,
    messages_with_feedback,
    step_log_lines,
)
from robopin.reasoning.tts.selection import Selection, joint_scores, normalize, select
from robopin.reasoning.tts.verifiers import (
    ActionContext,
    ActionScore,
    ActionVerifier,
    FeasibilityVerifier,
    NoActionVerifier,
    ReasoningVerifier,
    make_action_verifier,
    register_action_verifier,
)

__all__ = [
    "TTS_REFUSALS",
    "ActionCandidate",
    "ActionContext",
    "ActionSamplingConfig",
    "ActionScore",
    "ActionVerifier",
    "ActionVerifierConfig",
    "BudgetConfig",
    "DepthSegment",
    "ETTSReasoner",
    "FeasibilityVerifier",
    "FeedbackConfig",
    "NoActionVerifier",
    "ReasoningVerifier",
    "ReasoningVerifierConfig",
    "Selection",
    "SelectionConfig",
    "StepLog",
    "TTSConfig",
    "TTSConfigError",
    "action_candidates",
    "depth_segment",
    "joint_scores",
    "make_action_verifier",
    "make_reasoner",
    "messages_with_feedback",
    "normalize",
    "reads_depth",
    "register_action_verifier",
    "select",
    "step_log_lines",
]
