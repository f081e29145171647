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
- Coordinates (:mod:`robopin.pincot.coords`): 0–1000 ↔ pixels, Qwen2.5-VL smart resize.
- Prompts (:mod:`robopin.pincot.prompts`), R^3 subtasks (:mod:`robopin.pincot.r3`), RoboGPT-R1 plans
  (:mod:`robopin.pincot.plan`), drawing (:mod:`robopin.pincot.draw`).
"""

from robopin.pincot.answer import read_answer
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
    "Issue",
    "Reference",
    "Trace",
    "TraceWriteError",
    "TraceWriter",
    "anchor_coverage",
    "answer_accuracy",
    "compute_metrics",
    "cross_step_id_coverage",
    "cross_view_id_transfer",
    "format_anchor",
    "format_answer_json",
    "format_point",
    "format_score",
    "format_trace",
    "identity_consistency",
    "parse",
    "pin_accuracy",
    "read_answer",
]
