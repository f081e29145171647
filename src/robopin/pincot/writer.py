"""Writing PinCoT text: anchor tags, answers, and a builder for whole traces.

The sim oracle and tests write traces with :class:`TraceWriter`, which assigns IDs in first-mention
order (``obj_01``, ``obj_02``, ``space_01``) and re-introduces an ID when the same entity is pinned
in another view, exactly as RoboPIN's model is trained to. What it writes parses back with
:func:`robopin.pincot.parse` to the same anchors and answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from robopin.pincot.trace import ANCHOR_KINDS, NORMALIZED_MAX, Anchor, AnchorKind, AnswerPoint


class TraceWriteError(ValueError):
    """A trace cannot be written as asked (unknown entity, bad kind, point out of range, …)."""


def format_number(value: float) -> str:
    """``412`` for integral values, else the shortest repr that reads back to the same float."""
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(float(value))


def format_point(x: float, y: float) -> str:
    """``[x, y]`` as written in anchors and JSON answers."""
    return f"[{format_number(x)}, {format_number(y)}]"


def _check_attribute(label: str, value: str) -> None:
    if not value.strip() or any(c in value for c in '"<>'):
        raise TraceWriteError(f"{label} {value!r} must be non-empty and hold no '\"', '<' or '>'")


def format_anchor(anchor: Anchor) -> str:
    """The canonical tag ``<obj name="duck" id="obj_01" img_idx="0" point="[412, 530]">``."""
    if anchor.kind not in ANCHOR_KINDS:
        raise TraceWriteError(f"anchor kind {anchor.kind!r} must be one of {ANCHOR_KINDS}")
    _check_attribute("anchor name", anchor.name)
    _check_attribute("anchor id", anchor.id)
    return (
        f'<{anchor.kind} name="{anchor.name}" id="{anchor.id}" img_idx="{anchor.img_idx}" '
        f'point="{format_point(anchor.x, anchor.y)}">'
    )


def format_answer_json(points: Iterable[AnswerPoint], *, fence: bool = False) -> str:
    """Qwen3-VL style answer JSON: ``[{"point_2d": [x, y], "label": …, "id": …, "img_idx": …}]``."""
    items = []
    for point in points:
        item: dict[str, object] = {"point_2d": [_json_number(point.x), _json_number(point.y)]}
        if point.label is not None:
            item["label"] = point.label
        if point.id is not None:
            item["id"] = point.id
        if point.img_idx is not None:
            item["img_idx"] = point.img_idx
        items.append(item)
    text = json.dumps(items, ensure_ascii=False)
    return f"```json\n{text}\n```" if fence else text


def _json_number(value: float) -> float | int:
    return int(value) if math.isfinite(value) and value == int(value) else float(value)


def format_trace(think: str, answer: str) -> str:
    """Wrap the two blocks: ``<think>…</think><answer>…</answer>``."""
    return f"<think>{think}</think><answer>{answer}</answer>"


@dataclass
class TraceWriter:
    """Builds one PinCoT output step by step.

    >>> w = TraceWriter(num_views=2)
    >>> duck = w.pin("obj", "duck", 0, 412, 530)
    >>> w.say(f" is left of the bowl; ")
    >>> w.refer(duck)
    >>> w.answer_anchor(duck)
    >>> w.text()  # doctest: +ELLIPSIS
    '<think><obj name="duck" id="obj_01" img_idx="0" point="[412, 530]"> is left ...'
    """

    num_views: int = 1
    parts: list[str] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)
    answer_points: list[AnswerPoint] = field(default_factory=list)
    _ids: dict[tuple[AnchorKind, str], str] = field(default_factory=dict)
    _counters: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.num_views < 1:
            raise TraceWriteError(f"num_views must be >= 1, got {self.num_views}")

    def _new_id(self, kind: AnchorKind) -> str:
        number = self._counters.get(kind, 0) + 1
        self._counters[kind] = number
        return f"{kind}_{number:02d}"

    def pin(
        self, kind: AnchorKind, name: str, img_idx: int, x: float, y: float, *, entity_id: str | None = None
    ) -> str:
        """Write a full tag for an entity in one view and return its ID.

        The first pin of a (kind, name) gets the next ID; pinning it again (in another view) reuses
        that ID. ``entity_id`` forces an ID (to tell apart two entities with one name).
        """
        if kind not in ANCHOR_KINDS:
            raise TraceWriteError(f"kind {kind!r} must be one of {ANCHOR_KINDS}")
        if not 0 <= img_idx < self.num_views:
            raise TraceWriteError(f"img_idx {img_idx} outside the {self.num_views} view(s)")
        if not (0.0 <= x <= NORMALIZED_MAX and 0.0 <= y <= NORMALIZED_MAX):
            raise TraceWriteError(f"point [{x}, {y}] outside 0–1000")
        key = (kind, entity_id or " ".join(name.lower().split()))
        anchor_id = entity_id or self._ids.get(key) or self._new_id(kind)
        self._ids[key] = anchor_id
        anchor = Anchor(kind, name, anchor_id, img_idx, float(x), float(y))
        self.parts.append(format_anchor(anchor))
        self.anchors.append(anchor)
        return anchor_id

    def say(self, text: str) -> None:
        """Append free reasoning text (must not contain tags)."""
        if "<" in text or ">" in text:
            raise TraceWriteError(f"free text {text[:40]!r} must not contain '<' or '>'")
        self.parts.append(text)

    def refer(self, anchor_id: str) -> None:
        """Mention an already-introduced entity by its bare ID."""
        if anchor_id not in {a.id for a in self.anchors}:
            raise TraceWriteError(f"{anchor_id!r} has not been introduced; pin() it first")
        self.parts.append(anchor_id)

    def answer_anchor(self, anchor_id: str, img_idx: int | None = None, label: str | None = None) -> None:
        """Answer with the point of an introduced anchor (in ``img_idx``, default its first view)."""
        for anchor in self.anchors:
            if anchor.id == anchor_id and (img_idx is None or anchor.img_idx == img_idx):
                self.answer_points.append(
                    AnswerPoint(anchor.x, anchor.y, anchor.img_idx, label or anchor.name, anchor.id)
                )
                return
        raise TraceWriteError(f"no anchor {anchor_id!r} in view {img_idx} to answer with")

    def answer_point(self, point: AnswerPoint) -> None:
        """Answer with a free point."""
        self.answer_points.append(point)

    def think_text(self) -> str:
        """The think block written so far."""
        return "".join(self.parts)

    def text(self, *, fence: bool = False) -> str:
        """The complete output with a JSON answer."""
        return format_trace(self.think_text(), format_answer_json(self.answer_points, fence=fence))


def points_to_answer(points: Sequence[tuple[float, float]]) -> str:
    """A bare ``[[x, y], …]`` answer (one point: ``[x, y]``)."""
    if len(points) == 1:
        return format_point(*points[0])
    return "[" + ", ".join(format_point(x, y) for x, y in points) + "]"
