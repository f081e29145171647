"""The Pinned Chain-of-Thought (PinCoT) format: parse, validate, score, write, prompt and draw.

RoboPIN's model answers ``<think>…</think><answer>…</answer>``; every entity in the reasoning is an
anchor tag ``<obj name="duck" id="obj_01" img_idx="0" point="[412, 530]">`` (or ``<space …>``), points
normalized 0–1000, IDs in first-mention order, later steps use the bare ID, and the same ID is
re-introduced with another ``img_idx`` when the entity is seen in another view. Nothing moves on a
robot unless :func:`parse` says the reasoning is well-formed and consistent (``trace.valid``).

Public API::

    from robopin.pincot import parse, Trace
    trace = parse(model_text, num_views=2)
    if not trace.valid:
        for issue in trace.errors: print(issue.code, issue.message)
    trace.anchors        # Anchor(kind, name, id, img_idx, x, y, offset, in_answer), in order
    trace.references     # Reference(id, offset, in_answer): bare-ID mentions
    trace.answer_points  # AnswerPoint(x, y, img_idx, label, id), 0–1000
    trace.metrics        # {"format", "consistency", "anchor_coverage", "cross_step_id_coverage",
                         #  "cross_view_id_transfer" (several views only)}

- Parsing and validation: :func:`parse`, :data:`ERROR_CODES`, :data:`WARNING_CODES`, :func:`read_answer`.
- Data model: :class:`Trace`, :class:`Anchor`, :class:`Reference`, :class:`AnswerPoint`, :class:`Issue`.
- Quality measures (RoboPIN §3.3): :func:`format_score`, :func:`identity_consistency`,
  :func:`anchor_coverage`, :func:`cross_step_id_coverage`, :func:`cross_view_id_transfer`,
  :func:`pin_accuracy`, :func:`answer_accuracy`, :class:`Box`.
- Writing traces: :class:`TraceWriter`, :func:`format_anchor`, :func:`format_answer_json`,
  :func:`format_trace`.
- Coordinates (:mod:`robopin.pincot.coords`): :func:`normalized_to_pixels`,
  :func:`pixels_to_normalized`, :func:`smart_resize` (Qwen2.5-VL / Embodied-R1 resized pixels); a
  model's own point convention is :class:`robopin.vlm.points.PointConvention`.
- Prompts (:mod:`robopin.pincot.prompts`, wording in ``templates/*.txt``): :func:`pointing_prompt`,
  :func:`step_prompt`, :func:`subtask_prompt` (R^3), :func:`plan_prompt` (RoboGPT-R1),
  :func:`verifier_prompt`, :func:`feedback_prompt`, :func:`retry_prompt` (E-TTS).
- Other output kinds: :func:`parse_subtask` + :class:`SkillGrammar` (R^3 instruction line),
  :func:`parse_plan` + :func:`plan_accuracy` (RoboGPT-R1 executable plan).
- Drawing (:mod:`robopin.pincot.draw`): :func:`draw_trace` (one colour per ID across views).
"""

from robopin.pincot.answer import read_answer
from robopin.pincot.coords import (
    ImageSize,
    normalized_to_pixels,
    pixels_to_normalized,
    smart_resize,
)
from robopin.pincot.draw import draw_trace, id_colors
from robopin.pincot.metrics import (
    Box,
    anchor_coverage,
    answer_accuracy,
    compute_metrics,
    cross_step_id_coverage,
    cross_view_id_transfer,
    format_score,
    identity_consistency,
    pin_accuracy,
)
from robopin.pincot.parser import ERROR_CODES, WARNING_CODES, parse
from robopin.pincot.plan import PlanResponse, PlanStep, parse_plan, plan_accuracy
from robopin.pincot.prompts import (
    HistoryEntry,
    PromptTemplates,
    StepRecord,
    VerifierExample,
    View,
    feedback_prompt,
    plan_prompt,
    pointing_prompt,
    retry_prompt,
    step_prompt,
    subtask_prompt,
    verifier_prompt,
)
from robopin.pincot.r3 import SkillFormat, SkillGrammar, SubtaskResponse, parse_subtask
from robopin.pincot.trace import Anchor, AnswerPoint, Issue, Reference, Trace
from robopin.pincot.writer import (
    TraceWriteError,
    TraceWriter,
    format_anchor,
    format_answer_json,
    format_point,
    format_trace,
)

__all__ = [
    "ERROR_CODES",
    "WARNING_CODES",
    "Anchor",
    "AnswerPoint",
    "Box",
    "HistoryEntry",
    "ImageSize",
    "Issue",
    "PlanResponse",
    "PlanStep",
    "PromptTemplates",
    "Reference",
    "SkillFormat",
    "SkillGrammar",
    "StepRecord",
    "SubtaskResponse",
    "Trace",
    "TraceWriteError",
    "TraceWriter",
    "VerifierExample",
    "View",
    "anchor_coverage",
    "answer_accuracy",
    "compute_metrics",
    "cross_step_id_coverage",
    "cross_view_id_transfer",
    "draw_trace",
    "feedback_prompt",
    "format_anchor",
    "format_answer_json",
    "format_point",
    "format_score",
    "format_trace",
    "id_colors",
    "identity_consistency",
    "normalized_to_pixels",
    "parse",
    "parse_plan",
    "parse_subtask",
    "pin_accuracy",
    "pixels_to_normalized",
    "plan_accuracy",
    "plan_prompt",
    "pointing_prompt",
    "read_answer",
    "retry_prompt",
    "smart_resize",
    "step_prompt",
    "subtask_prompt",
    "verifier_prompt",
]
