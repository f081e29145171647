"""The data model of one parsed PinCoT output: anchors, ID references, answer points and issues.

Everything here is a plain frozen dataclass so traces can be compared, logged and converted to ROS
messages without surprises (anchors, references, answer points and issues are also hashable).
Points are kept exactly as the model wrote them, in the 0–1000 normalized convention;
:mod:`robopin.pincot.coords` turns them into pixels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

AnchorKind = Literal["obj", "space"]
ANCHOR_KINDS: tuple[AnchorKind, ...] = ("obj", "space")

NORMALIZED_MAX = 1000.0
"""Upper end of the normalized coordinate range the model writes points in (both axes)."""

SAME_POINT_TOLERANCE = 15.0
"""Points closer than this (0–1000 units) are taken as the same place: an answer point this close to an
anchor is tied to it, and two IDs of one name this close in one view are flagged as one entity."""


@dataclass(frozen=True)
class Anchor:
    """One reasoning anchor ``<obj|space name=… id=… img_idx=… point="[x, y]">`` as written.

    ``offset`` is the character offset of the tag's ``<`` in the raw text; ``in_answer`` is true for
    tags written inside ``<answer>``.
    """

    kind: AnchorKind
    name: str
    id: str
    img_idx: int
    x: float
    y: float
    offset: int = -1
    in_answer: bool = False


@dataclass(frozen=True)
class Reference:
    """A bare-ID mention (``obj_01``) outside any tag, at character ``offset`` of the raw text."""

    id: str
    offset: int
    in_answer: bool = False


@dataclass(frozen=True)
class AnswerPoint:
    """One point of the final answer, normalized 0–1000; ``img_idx``/``label``/``id`` when stated."""

    x: float
    y: float
    img_idx: int | None = None
    label: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class Issue:
    """A named problem in a trace: ``code`` is stable and machine-readable, ``message`` is for people."""

    code: str
    message: str
    offset: int = -1

    def __str__(self) -> str:
        where = f" (at character {self.offset})" if self.offset >= 0 else ""
        return f"{self.code}: {self.message}{where}"


@dataclass(frozen=True)
class Trace:
    """A parsed and validated PinCoT output.

    ``think``/``answer`` are the raw block contents (empty strings when missing); ``anchors`` are the
    well-formed tags in order of appearance (in both blocks); ``references`` are bare-ID mentions;
    ``errors`` forbid execution, ``warnings`` are tolerated variants worth logging. ``metrics`` holds
    the per-trace quality measures of :mod:`robopin.pincot.metrics` (at least ``format`` and
    ``consistency``). ``think_span``/``answer_span`` are the [start, end) character ranges of the block
    contents in ``text`` ((0, 0) when the block is missing). ``done`` is true when the answer declares a
    long-horizon task finished (``done``, ``[{"label": "done"}]``) instead of giving points.
    """

    text: str
    num_views: int
    think: str
    answer: str
    anchors: tuple[Anchor, ...] = ()
    references: tuple[Reference, ...] = ()
    answer_points: tuple[AnswerPoint, ...] = ()
    errors: tuple[Issue, ...] = ()
    warnings: tuple[Issue, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)
    has_think: bool = False
    has_answer: bool = False
    think_span: tuple[int, int] = (0, 0)
    answer_span: tuple[int, int] = (0, 0)
    done: bool = False

    @property
    def valid(self) -> bool:
        """True when no error was found: only a valid trace may drive the arm."""
        return not self.errors

    @property
    def ids(self) -> tuple[str, ...]:
        """Anchor IDs in first-mention order."""
        return tuple(dict.fromkeys(a.id for a in self.anchors))

    def anchors_for(self, anchor_id: str) -> tuple[Anchor, ...]:
        """Every tag of one ID (one per view it was pinned in, normally)."""
        return tuple(a for a in self.anchors if a.id == anchor_id)

    def anchor(self, anchor_id: str, img_idx: int | None = None) -> Anchor | None:
        """The first tag of ``anchor_id`` (in view ``img_idx`` when given), or None."""
        for a in self.anchors:
            if a.id == anchor_id and (img_idx is None or a.img_idx == img_idx):
                return a
        return None

    def names(self) -> dict[str, str]:
        """ID → the name it was first introduced with."""
        out: dict[str, str] = {}
        for a in self.anchors:
            out.setdefault(a.id, a.name)
        return out

    def error_codes(self) -> tuple[str, ...]:
        """The codes of all errors, in the order found."""
        return tuple(e.code for e in self.errors)

    def warning_codes(self) -> tuple[str, ...]:
        """The codes of all warnings, in the order found."""
        return tuple(w.code for w in self.warnings)
