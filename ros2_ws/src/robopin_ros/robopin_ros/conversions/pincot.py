"""Pinned reasoning ⇄ robopin_interfaces/PinnedReasoning, Anchor, AnswerPoint and ReasoningIssue.

The message carries what consumers need (anchors with pixels, answer points, issues, three metrics); what
it lacks (issue offsets, reference offsets, the other metrics) is re-derived from raw_text by msg_to_trace.
Reasoning records of the planner (PinCoT traces, R^3 subtask and RoboGPT-R1 plan responses) and the
ProjectPoints requests (robopin.geometry.PointRequest ⇄ Anchor) go through here too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from robopin_interfaces.msg import Anchor, AnswerPoint, PinnedReasoning, ReasoningIssue
from std_msgs.msg import Header

from robopin import pincot
from robopin.geometry import PointRequest
from robopin.pincot.coords import normalized_to_pixels
from robopin_ros.conversions.common import seconds_to_stamp


def _view_pixels(
    x: float, y: float, img_idx: int | None, image_sizes: Sequence[tuple[int, int]] | None
) -> tuple[float, float]:
    """0–1000 point → pixels of view img_idx's original image, NaN when the view or its size is unknown."""
    if image_sizes is None or img_idx is None or not 0 <= img_idx < len(image_sizes):
        return math.nan, math.nan
    return normalized_to_pixels(x, y, image_sizes[img_idx])


def anchor_to_msg(anchor: pincot.Anchor, image_sizes: Sequence[tuple[int, int]] | None = None) -> Anchor:
    """Return a core Anchor as robopin_interfaces/Anchor (u, v NaN without the view's image size)."""
    u, v = _view_pixels(anchor.x, anchor.y, anchor.img_idx, image_sizes)
    return Anchor(
        kind=anchor.kind,
        name=anchor.name,
        id=anchor.id,
        img_idx=anchor.img_idx,
        x=float(anchor.x),
        y=float(anchor.y),
        u=float(u),
        v=float(v),
        char_offset=anchor.offset,
    )


def answer_point_to_msg(
    point: pincot.AnswerPoint, image_sizes: Sequence[tuple[int, int]] | None = None
) -> AnswerPoint:
    """Return a core AnswerPoint as robopin_interfaces/AnswerPoint (img_idx -1 and NaN pixels when no view)."""
    u, v = _view_pixels(point.x, point.y, point.img_idx, image_sizes)
    return AnswerPoint(
        img_idx=-1 if point.img_idx is None else point.img_idx,
        x=float(point.x),
        y=float(point.y),
        u=float(u),
        v=float(v),
        label=point.label or "",
        id=point.id or "",
    )


def issue_to_msg(issue: pincot.Issue, *, is_error: bool) -> ReasoningIssue:
    """Return a core Issue as robopin_interfaces/ReasoningIssue."""
    return ReasoningIssue(code=issue.code, message=issue.message, is_error=is_error)


def trace_to_msg(
    trace: pincot.Trace,
    *,
    image_sizes: Sequence[tuple[int, int]] | None = None,
    view_names: Sequence[str] = (),
    header: Header | None = None,
    task_id: str = "",
    step: int = 0,
    instruction: str = "",
    model: str = "",
    generation_time_s: float = 0.0,
) -> PinnedReasoning:
    """Return a parsed Trace as robopin_interfaces/PinnedReasoning.

    ``image_sizes`` are the (width, height) of each view's original image, used for the pixel fields.
    """
    if view_names and len(view_names) != trace.num_views:
        raise ValueError(f"{len(view_names)} view names given for a trace over {trace.num_views} view(s)")
    return PinnedReasoning(
        header=header if header is not None else Header(),
        task_id=task_id,
        step=step,
        instruction=instruction,
        model=model,
        raw_text=trace.text,
        think=trace.think,
        answer=trace.answer,
        anchors=[anchor_to_msg(a, image_sizes) for a in trace.anchors],
        references=[r.id for r in trace.references],
        answer_points=[answer_point_to_msg(p, image_sizes) for p in trace.answer_points],
        view_names=list(view_names),
        valid=trace.valid,
        errors=[issue_to_msg(e, is_error=True) for e in trace.errors],
        warnings=[issue_to_msg(w, is_error=False) for w in trace.warnings],
        format_score=float(trace.metrics.get("format", 0.0)),
        identity_consistency=float(trace.metrics.get("consistency", 0.0)),
        anchor_coverage=float(trace.metrics.get("anchor_coverage", 0.0)),
        generation_time_s=float(generation_time_s),
        **_measures(trace.metrics),
    )


_MEASURE_FIELDS = ("cross_step_id_coverage", "pin_accuracy", "answer_accuracy", "instruction_validity", "plan_accuracy")
"""PinnedReasoning's measure fields named as the core's metrics are: NaN where a measure does not apply
or needs ground truth the system has none of."""


def _measures(metrics) -> dict[str, float]:
    return {name: float(metrics.get(name, math.nan)) for name in _MEASURE_FIELDS}


def msg_to_trace(msg: PinnedReasoning, num_views: int | None = None) -> pincot.Trace:
    """Return robopin_interfaces/PinnedReasoning as a core Trace.

    The message's anchors, answer points, issues, validity and three metrics are taken as published.
    Block spans, reference offsets, issue offsets and the remaining metrics are re-derived by parsing
    raw_text over ``num_views`` views (default: the number of view names, else the highest img_idx + 1).
    """
    if num_views is None:
        indices = [a.img_idx for a in msg.anchors] + [p.img_idx for p in msg.answer_points]
        num_views = len(msg.view_names) or max([1, *(i + 1 for i in indices)])
    reread = pincot.parse(msg.raw_text, num_views, expect_points=bool(msg.answer_points))
    answer_start, answer_end = reread.answer_span
    anchors = tuple(
        pincot.Anchor(
            kind=a.kind,
            name=a.name,
            id=a.id,
            img_idx=a.img_idx,
            x=a.x,
            y=a.y,
            offset=a.char_offset,
            in_answer=reread.has_answer and answer_start <= a.char_offset < answer_end,
        )
        for a in msg.anchors
    )
    answer_points = tuple(
        pincot.AnswerPoint(
            x=p.x, y=p.y, img_idx=None if p.img_idx < 0 else p.img_idx, label=p.label or None, id=p.id or None
        )
        for p in msg.answer_points
    )
    offsets = {(i.code, i.message): i.offset for i in (*reread.errors, *reread.warnings)}
    errors = tuple(pincot.Issue(e.code, e.message, offsets.get((e.code, e.message), -1)) for e in msg.errors)
    warnings = tuple(pincot.Issue(w.code, w.message, offsets.get((w.code, w.message), -1)) for w in msg.warnings)
    if not msg.valid and not errors:
        # Never let a message marked invalid turn into a valid trace because it named no error.
        errors = (pincot.Issue("invalid_message", "the message is marked invalid but names no error"),)
    if [r.id for r in reread.references] == list(msg.references):
        references = reread.references
    else:
        references = tuple(pincot.Reference(ref, -1) for ref in msg.references)
    metrics = dict(reread.metrics)
    metrics.update(format=msg.format_score, consistency=msg.identity_consistency, anchor_coverage=msg.anchor_coverage)
    measured = {n: float(getattr(msg, n)) for n in ("pin_accuracy", "answer_accuracy")}
    metrics.update({n: v for n, v in measured.items() if math.isfinite(v)})
    return dataclasses.replace(
        reread,
        think=msg.think,
        answer=msg.answer,
        anchors=anchors,
        references=references,
        answer_points=answer_points,
        errors=errors,
        warnings=warnings,
        metrics=metrics,
    )


def reasoning_record_to_msg(record, header: Header | None = None) -> PinnedReasoning:
    """Return a robopin.reasoning.ReasoningRecord as robopin_interfaces/PinnedReasoning."""
    header = header if header is not None else Header(stamp=seconds_to_stamp(max(record.stamp_s, 0.0)))
    if record.trace is not None:
        msg = trace_to_msg(record.trace, image_sizes=record.image_sizes, view_names=record.view_names,
                           header=header, task_id=record.task_id, step=record.step, instruction=record.instruction,
                           model=record.model, generation_time_s=record.generation_time_s)
        # The loop may refuse a well-formed trace (e.g. no place point): the message must say so too.
        known = {(e.code, e.message) for e in record.trace.errors}
        msg.errors.extend(issue_to_msg(e, is_error=True) for e in record.errors if (e.code, e.message) not in known)
        msg.valid = bool(record.valid)
        for name, value in _measures({**record.trace.metrics, **record.metrics}).items():  # + ground truth's
            setattr(msg, name, value)
        return msg
    return PinnedReasoning(
        header=header, task_id=record.task_id, step=record.step, instruction=record.instruction, model=record.model,
        raw_text=record.text, think=record.think, answer=record.answer, view_names=list(record.view_names),
        valid=bool(record.valid), errors=[issue_to_msg(e, is_error=True) for e in record.errors],
        warnings=[issue_to_msg(w, is_error=False) for w in record.warnings],
        # R^3 and RoboGPT-R1 responses carry no anchors: PinCoT's identity and coverage measures are NaN
        # (not measured), and format_score is the response's own (RoboGPT-R1's, or R^3's instruction validity).
        format_score=float(record.metrics.get("format", record.metrics.get("instruction_validity", math.nan))),
        identity_consistency=math.nan, anchor_coverage=math.nan,
        generation_time_s=float(record.generation_time_s), **_measures(record.metrics),
    )


def point_request_to_anchor_msg(request, image_size: tuple[int, int], kind: str = "obj") -> Anchor:
    """Return a robopin.geometry.PointRequest (pixels) as robopin_interfaces/Anchor with its 0–1000 point."""
    x, y = pincot.pixels_to_normalized(request.u, request.v, image_size)
    return Anchor(kind=kind, name=request.name, id=request.id, img_idx=int(request.img_idx),
                      x=float(x), y=float(y), u=float(request.u), v=float(request.v), char_offset=-1)


def anchor_msg_to_point_request(anchor, image_size: tuple[int, int] | None = None):
    """Return a robopin.geometry.PointRequest of a robopin_interfaces/Anchor.

    The anchor's pixels (u, v) are used; when they are NaN and the view's (width, height) is known, they
    are computed from the model's 0–1000 point (x, y).
    """
    u, v = float(anchor.u), float(anchor.v)
    if not (math.isfinite(u) and math.isfinite(v)) and image_size is not None:
        u, v = normalized_to_pixels(float(anchor.x), float(anchor.y), image_size)
    return PointRequest(u=u, v=v, img_idx=int(anchor.img_idx), id=anchor.id, name=anchor.name)
