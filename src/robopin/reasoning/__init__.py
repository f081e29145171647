"""The reasoning loop: a language instruction → pinned reasoning → 3D targets → pick-and-place steps.

RoboPIN pointing (``point``), R^3 closed-loop subtask steering with interaction history
(``subtask``), RoboGPT-R1 executable plans (``plan``) or ``auto``; long-horizon tasks loop until the
model reports done or ``max_steps``. The loop depends only on four small stages, injected:

    from robopin.reasoning import ReasoningConfig, ReasoningLoop, TaskRequest
    loop = ReasoningLoop(ReasoningConfig(), backend, observer, projector, actor)
    result = loop.run(TaskRequest("put the duck on the middle plate"), on_stage=print)
    result.success, result.reason, result.message, result.steps, result.reasoning

- observe (:class:`Observer`) — a synchronised multi-view observation;
- reason (:class:`Reasoner`, built from ``config.reasoner``; E-TTS plugs in here by configuration);
- project (:class:`TargetProjector`) — pixels to 3D targets with named refusals;
- act (:class:`Actor`) — one planned (and unless dry run, executed) pick-and-place.

Every way a task ends without success has a named reason (:data:`REFUSAL_REASONS`, plus projection
and motion statuses passed through). In-process stages: :mod:`robopin.reasoning.snapshot_stages`; the ROS
versions live in ``robopin_ros.task_node``.
"""

from robopin.reasoning.config import MODES, ReasoningConfig, SkillSpec
from robopin.reasoning.errors import REFUSAL_REASONS, ReasoningConfigError, TaskCanceled, TaskRefusal
from robopin.reasoning.interpret import (
    PlanDecision,
    PointingDecision,
    SubtaskDecision,
    interpret_plan,
    interpret_pointing,
    interpret_subtask,
)
from robopin.reasoning.loop import ReasoningLoop, ReasoningRecord, StepReport, TaskRequest, TaskResult
from robopin.reasoning.protocols import (
    Actor,
    MotionOutcome,
    Observation,
    Observer,
    Stages,
    TargetProjector,
)
from robopin.reasoning.reasoner import (
    Reasoner,
    Reasoning,
    ReasoningQuery,
    SingleSampleReasoner,
    make_reasoner,
    reasoner_types,
    register_reasoner,
)

__all__ = [
    "MODES",
    "REFUSAL_REASONS",
    "Actor",
    "MotionOutcome",
    "Observation",
    "Observer",
    "PlanDecision",
    "PointingDecision",
    "Reasoner",
    "Reasoning",
    "ReasoningConfig",
    "ReasoningConfigError",
    "ReasoningLoop",
    "ReasoningQuery",
    "ReasoningRecord",
    "SingleSampleReasoner",
    "SkillSpec",
    "Stages",
    "StepReport",
    "SubtaskDecision",
    "TargetProjector",
    "TaskCanceled",
    "TaskRefusal",
    "TaskRequest",
    "TaskResult",
    "interpret_plan",
    "interpret_pointing",
    "interpret_subtask",
    "make_reasoner",
    "reasoner_types",
    "register_reasoner",
]
