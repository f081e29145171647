"""RoboPIN's reasoning-quality measures, computed on one parsed trace (RoboPIN §3.3, §4.5).

Notation of the paper: for a response y, M(y) is the set of entity mentions in the ``<think>`` block
(every anchor tag, well-formed or not, and every bare-ID mention), M_valid(y) ⊆ M(y) the mentions
whose first occurrence is introduced by a valid tag and whose later mentions keep that identity,
P_xml(y) the anchor points of the reasoning, b*_j the ground-truth region paired with point p_j.

Per-trace measures (:func:`compute_metrics`, stored in ``Trace.metrics``):

- ``format``: R_format ∈ {0, 0.5, 1}. 1 when the output is ``<think>…</think><answer>…</answer>`` and the
  think block holds at least one anchor and no malformed tag; 0.5 when only the outer format holds;
  0 otherwise. Tolerated variants (see ``WARNING_CODES``) count as correct.
- ``consistency``: R_consistency = |M_valid(y)| / max(|M(y)|, 1).
- ``anchor_coverage``: fraction of answer points tied to a pinned anchor (the point names an
  introduced ID, or lies within ``SAME_POINT_TOLERANCE`` of an anchor of its view); 0 without answer
  points. Averaged over a data set this is the paper's A-Cov (Table 3).
- ``cross_step_id_coverage``: fraction of introduced IDs that later steps mention by bare ID
  (CS-IDCov, Table 3): |{i ∈ IDs : i is referenced after its tag}| / max(|IDs|, 1).
- ``cross_view_id_transfer``: only when the model saw several views; fraction of introduced IDs tagged
  in two or more views (ID-Trans, Table 5): |{i : |views(i)| ≥ 2}| / max(|IDs|, 1).

Measures that need ground truth (call them yourself):

- :func:`pin_accuracy`: R_pin = |{p_j ∈ P_xml(y) : p_j ∈ b*_j}| / max(|P_xml(y)|, 1) (AC in Table 3).
- :func:`answer_accuracy`: the pointing R_accuracy, the fraction of answer points inside a target box.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from robopin.pincot.trace import NORMALIZED_MAX, SAME_POINT_TOLERANCE, Anchor, AnswerPoint, Trace


@dataclass(frozen=True)
class Box:
    """An axis-aligned ground-truth region in 0–1000 coordinates of view ``img_idx`` (None: any view)."""

    x_min: float
    y_min: float
    x_max: float
    y_max: float
    img_idx: int | None = None

    def __post_init__(self) -> None:
        values = (self.x_min, self.y_min, self.x_max, self.y_max)
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"box corners must be finite, got {values}")
        if self.x_min > self.x_max or self.y_min > self.y_max:
            raise ValueError(f"box needs x_min <= x_max and y_min <= y_max, got {values}")

    def contains(self, x: float, y: float, img_idx: int | None = None) -> bool:
        """True when (x, y) lies inside (borders included) and the views agree where both are known."""
        if self.img_idx is not None and img_idx is not None and self.img_idx != img_idx:
            return False
        return self.x_min <= x <= self.x_max and self.y_min <= y <= self.y_max


@functools.lru_cache(maxsize=4096)
def _normal_name(name: str) -> str:
    return " ".join(name.lower().split())


def _in_think(trace: Trace, offset: int) -> bool:
    start, end = trace.think_span
    return trace.has_think and start <= offset < end


def _first_tags(trace: Trace) -> dict[str, Anchor]:
    first: dict[str, Anchor] = {}
    for anchor in trace.anchors:
        first.setdefault(anchor.id, anchor)
    return first


def _tag_is_valid(anchor: Anchor, first: Anchor, num_views: int) -> bool:
    in_range = (
        math.isfinite(anchor.x)
        and math.isfinite(anchor.y)
        and 0.0 <= anchor.x <= NORMALIZED_MAX
        and 0.0 <= anchor.y <= NORMALIZED_MAX
    )
    same_identity = anchor.kind == first.kind and _normal_name(anchor.name) == _normal_name(first.name)
    return in_range and 0 <= anchor.img_idx < num_views and same_identity


def format_score(trace: Trace) -> float:
    """R_format: 1 (outer format and valid anchors), 0.5 (outer format only) or 0."""
    if not (trace.has_think and trace.has_answer):
        return 0.0
    has_anchor = any(not a.in_answer and _in_think(trace, a.offset) for a in trace.anchors)
    malformed = any(e.code == "bad_anchor" for e in trace.errors)
    return 1.0 if has_anchor and not malformed else 0.5


def identity_consistency(trace: Trace) -> float:
    """R_consistency = |M_valid(y)| / max(|M(y)|, 1) over the mentions of the think block.

    A tag mention is valid when it is well-formed, its point is in range, its view exists and it
    keeps the name and kind of the ID's first tag (whose own validity it inherits). A bare-ID mention
    is valid when its ID was introduced, by a valid first tag, before it. Malformed tags count as
    invalid mentions.
    """
    first = _first_tags(trace)
    first_valid = {i: _tag_is_valid(a, a, trace.num_views) for i, a in first.items()}
    total = 0
    valid = 0
    for anchor in trace.anchors:
        if not _in_think(trace, anchor.offset):
            continue
        total += 1
        head = first[anchor.id]
        if first_valid[anchor.id] and _tag_is_valid(anchor, head, trace.num_views):
            valid += 1
    for reference in trace.references:
        if not _in_think(trace, reference.offset):
            continue
        total += 1
        head = first.get(reference.id)
        if head is not None and head.offset < reference.offset and first_valid[reference.id]:
            valid += 1
    total += sum(1 for e in trace.errors if e.code == "bad_anchor" and _in_think(trace, e.offset))
    return valid / max(total, 1)


def _tied(point: AnswerPoint, trace: Trace, ids: set[str]) -> bool:
    if point.id is not None and point.id in ids:
        return True
    return any(
        (point.img_idx is None or a.img_idx == point.img_idx)
        and math.dist((a.x, a.y), (point.x, point.y)) <= SAME_POINT_TOLERANCE
        for a in trace.anchors
        if not a.in_answer
    )


def anchor_coverage(trace: Trace) -> float:
    """Fraction of answer points tied to a pinned anchor (by ID or by position); 0 without points."""
    if not trace.answer_points:
        return 0.0
    ids = {a.id for a in trace.anchors}
    return sum(1 for p in trace.answer_points if _tied(p, trace, ids)) / len(trace.answer_points)


def cross_step_id_coverage(trace: Trace) -> float:
    """|IDs referred to by bare ID after their introducing tag| / max(|IDs|, 1)."""
    first = _first_tags(trace)
    reused = {r.id for r in trace.references if r.id in first and r.offset > first[r.id].offset}
    return len(reused) / max(len(first), 1)


def cross_view_id_transfer(trace: Trace) -> float:
    """|IDs tagged in two or more views| / max(|IDs|, 1)."""
    views: dict[str, set[int]] = {}
    for anchor in trace.anchors:
        views.setdefault(anchor.id, set()).add(anchor.img_idx)
    return sum(1 for v in views.values() if len(v) >= 2) / max(len(views), 1)


def compute_metrics(trace: Trace) -> dict[str, float]:
    """All per-trace measures of this module, keyed as in ``Trace.metrics``."""
    metrics = {
        "format": format_score(trace),
        "consistency": identity_consistency(trace),
        "anchor_coverage": anchor_coverage(trace),
        "cross_step_id_coverage": cross_step_id_coverage(trace),
    }
    if trace.num_views > 1:
        metrics["cross_view_id_transfer"] = cross_view_id_transfer(trace)
    return metrics


def with_metrics(trace: Trace) -> Trace:
    """Return ``trace`` with ``metrics`` filled in."""
    return dataclasses.replace(trace, metrics=compute_metrics(trace))


BoxKey = Literal["id", "name"]


def pin_accuracy(
    trace: Trace,
    boxes: Mapping[str, Box | Sequence[Box]],
    *,
    key: BoxKey = "id",
    think_only: bool = True,
) -> float:
    """R_pin = |{p_j ∈ P_xml(y) : p_j ∈ b*_j}| / max(|P_xml(y)|, 1).

    ``boxes`` pairs each anchor with its ground-truth region(s), keyed by anchor ID or by name
    (lower-cased) per ``key``; an anchor without a box counts as a miss, as in the formula. A box with
    an ``img_idx`` only matches anchors of that view.
    """
    if key == "name":
        boxes = {" ".join(k.lower().split()): v for k, v in boxes.items()}
    anchors = [a for a in trace.anchors if not think_only or not a.in_answer]
    hits = 0
    for anchor in anchors:
        lookup = anchor.id if key == "id" else " ".join(anchor.name.lower().split())
        found = boxes.get(lookup)
        candidates: Iterable[Box] = (found,) if isinstance(found, Box) else (found or ())
        if any(b.contains(anchor.x, anchor.y, anchor.img_idx) for b in candidates):
            hits += 1
    return hits / max(len(anchors), 1)


def answer_accuracy(points: Trace | Sequence[AnswerPoint], boxes: Sequence[Box]) -> float:
    """Pointing R_accuracy: fraction of predicted answer points inside any target box (0 for none)."""
    answer_points = points.answer_points if isinstance(points, Trace) else tuple(points)
    if not answer_points:
        return 0.0
    hits = sum(1 for p in answer_points if any(b.contains(p.x, p.y, p.img_idx) for b in boxes))
    return hits / len(answer_points)
