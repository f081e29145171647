"""Parse and validate one PinCoT output: ``<think>…</think><answer>…</answer>`` with anchor tags.

:func:`parse` never raises on any string. It returns a :class:`~robopin.pincot.trace.Trace` whose
``errors`` name everything that must stop the arm (see :data:`ERROR_CODES`) and whose ``warnings``
name the harmless variants it tolerated (see :data:`WARNING_CODES`).

Rules (RoboPIN §3.1 and the released generation prompt): every entity is introduced by a full tag
``<obj|space name="…" id="…" img_idx="…" point="[x, y]">`` with the point normalized 0–1000; later
steps mention it by its bare ID; the same ID is tagged again, with another ``img_idx`` and point, when
the entity is seen in another view. The same ID under another name or kind, a bare ID that was never
introduced, and a bare ID before its introduction are errors.

Bare-ID references are recognised for IDs containing an underscore (``obj_01``, ``space_02``,
``cup_1``): a token of that shape that matches an introduced ID is a reference; one that looks like
the canonical ``obj_NN``/``space_NN`` but was never introduced is ``unknown_id``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Literal

from robopin.pincot import metrics as _metrics
from robopin.pincot.answer import read_answer
from robopin.pincot.trace import (
    NORMALIZED_MAX,
    SAME_POINT_TOLERANCE,
    Anchor,
    AnswerPoint,
    Issue,
    Reference,
    Trace,
)

ERROR_CODES: dict[str, str] = {
    "missing_think": "no <think>…</think> block",
    "missing_answer": "no <answer>…</answer> block (or it was never closed)",
    "empty_answer": "the answer block holds nothing",
    "unparsable_answer": "the answer holds no point in any accepted form",
    "bad_answer": "an answer element is malformed (point not [x, y], view not an integer, …)",
    "bad_anchor": "a tag lacks name, id, img_idx or point, or one of them cannot be read",
    "point_out_of_range": "a point lies outside 0–1000 (or outside the image in pixel mode)",
    "unknown_view": "img_idx is not one of the views given to the model",
    "id_name_conflict": "one ID is bound to two different names",
    "id_kind_conflict": "one ID is tagged both as obj and as space",
    "id_point_conflict": "one ID is pinned at two far-apart points in the same view",
    "unknown_id": "a bare ID or answer names an ID never introduced by a tag",
    "reference_before_introduction": "a bare ID is used before its introducing tag",
}
"""Every error code :func:`parse` emits, with what it means."""

WARNING_CODES: dict[str, str] = {
    "think_open_missing": "</think> without <think> (chat templates that open the block in the prompt)",
    "think_unclosed": "<think> never closed; the block is taken to end at <answer>",
    "leading_text": "text before <think>",
    "trailing_text": "text after </answer>",
    "anchor_single_quotes": "attribute values in single quotes",
    "anchor_unquoted": "attribute values without quotes",
    "anchor_self_closing": "anchor tag written as self-closing />",
    "anchor_closing_tag": "a </obj> or </space> closing tag (anchors have none)",
    "anchor_uppercase": "tag or attribute names not in lower case",
    "anchor_point_form": "point written as (x, y) or without brackets",
    "anchor_extra_attribute": "an attribute other than name, id, img_idx, point",
    "anchor_duplicate_attribute": "an attribute given twice; the first is used",
    "repeated_anchor": "one ID tagged twice in the same view at (nearly) the same point",
    "id_kind_prefix": "an obj_… ID on a space tag or the reverse",
    "id_order": "canonical IDs not introduced in increasing order",
    "same_entity_two_ids": "two IDs with one name pinned at nearly the same point of one view",
    "answer_json_repaired": "answer JSON needed repair (quotes, tuples, trailing commas)",
    "answer_json_in_text": "answer JSON surrounded by prose",
    "answer_points_from_text": "answer points read from prose",
    "answer_box_centre": "answer gave a box; its centre is used",
    "answer_view_unspecified": "several views but an answer point names none",
}
"""Every warning code :func:`parse` emits, with what it means."""

ID_POINT_TOLERANCE = 50.0
"""Two tags of one ID in one view further apart than this (0–1000 units) are ``id_point_conflict``."""

Coordinates = Literal["norm1000", "pixels"]

_THINK_OPEN = re.compile(r"<\s*think\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
_TAG_START = re.compile(r"<\s*(?P<kind>obj|space)(?=[\s/>])", re.IGNORECASE)
# A tag runs to the first '>' outside a quoted value; names may hold '>' only inside quotes.
_TAG_BODY = re.compile(r"""(?:"[^"]*"|'[^']*'|[^"'<>])*?(?P<self_closing>/?)\s*>""")
_CLOSING_TAG = re.compile(r"<\s*/\s*(?:obj|space)\s*>", re.IGNORECASE)
# An attribute's value is exactly one of the named forms; ``match.lastgroup`` says which one was written.
_ATTRIBUTE = re.compile(
    r"""(?P<name>[A-Za-z_][\w-]*)\s*=\s*"""
    r"""(?:"(?P<double_quoted>[^"]*)"|'(?P<single_quoted>[^']*)'|(?P<bracketed>\[[^\]]*\])"""
    r"""|(?P<parenthesised>\([^)]*\))|(?P<bare>[^\s"'>/]+))"""
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_ID_HEAD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_WORD_TAIL = re.compile(r"\w+")
_CANONICAL_ID = re.compile(r"(?P<family>obj|space)_(?P<number>\d+)", re.IGNORECASE)
_REQUIRED = ("name", "id", "img_idx", "point")
# The exact form RoboPIN writes; matched first so well-formed tags skip the general attribute reader.
_CANONICAL_TAG = re.compile(
    r'<(?P<kind>obj|space) name="(?P<name>[^"<>]+)" id="(?P<id>[^"<>\s]+)" img_idx="(?P<img_idx>\d+)" '
    r'point="\[(?P<x>-?\d+(?:\.\d+)?), ?(?P<y>-?\d+(?:\.\d+)?)\]">'
)


class _Collector:
    """Accumulates issues, deduplicating warnings by code so a sloppy model does not flood the log."""

    def __init__(self) -> None:
        self.errors: list[Issue] = []
        self.warnings: list[Issue] = []
        self._warned: set[str] = set()

    def error(self, code: str, message: str, offset: int = -1) -> None:
        self.errors.append(Issue(code, message, offset))

    def warn(self, code: str, message: str, offset: int = -1) -> None:
        if code not in self._warned:
            self._warned.add(code)
            self.warnings.append(Issue(code, message, offset))


Span = tuple[int, int]


def _find_blocks(text: str, issues: _Collector) -> tuple[Span | None, Span | None, bool]:
    """Locate the think and answer contents; return their spans and whether </answer> was found."""
    think_open = _THINK_OPEN.search(text)
    think_close = _THINK_CLOSE.search(text, think_open.end() if think_open else 0)
    answer_search_from = 0
    think_span: tuple[int, int] | None = None
    if think_open and think_close:
        think_span = (think_open.end(), think_close.start())
        answer_search_from = think_close.end()
        lead_end = think_open.start()
    elif think_close:
        think_span = (0, think_close.start())
        answer_search_from = think_close.end()
        lead_end = 0
        issues.warn("think_open_missing", "found </think> without <think>; reasoning taken from the start")
    elif think_open:
        answer_open = _ANSWER_OPEN.search(text, think_open.end())
        if answer_open:
            think_span = (think_open.end(), answer_open.start())
            answer_search_from = answer_open.start()
            issues.warn("think_unclosed", "<think> is never closed; it is taken to end at <answer>")
        lead_end = think_open.start()
    else:
        lead_end = 0
    if lead_end and text[:lead_end].strip():
        issues.warn("leading_text", f"text before <think>: {text[:lead_end].strip()[:40]!r}", 0)

    answer_open = _ANSWER_OPEN.search(text, answer_search_from)
    if answer_open is None and think_span is not None:
        # an <answer> inside the think block still counts (models sometimes close blocks out of order)
        answer_open = _ANSWER_OPEN.search(text)
    answer_span: tuple[int, int] | None = None
    closed = False
    if answer_open:
        answer_close = _ANSWER_CLOSE.search(text, answer_open.end())
        if answer_close:
            closed = True
            answer_span = (answer_open.end(), answer_close.start())
            rest = text[answer_close.end() :]
            if rest.strip():
                issues.warn("trailing_text", f"text after </answer>: {rest.strip()[:40]!r}", answer_close.end())
        else:
            answer_span = (answer_open.end(), len(text))
    if think_span is None:
        issues.error("missing_think", "the output has no <think>…</think> block", 0)
    if answer_open is None:
        issues.error("missing_answer", "the output has no <answer>…</answer> block", len(text))
    elif not closed:
        issues.error(
            "missing_answer",
            "<answer> is never closed by </answer> (output cut off by the token limit?)",
            answer_open.start(),
        )
    return think_span, answer_span, closed


def _read_point(raw: str, value_form: str, tag_text: str, offset: int, issues: _Collector):
    """Two numbers from a point attribute, or None (with a bad_anchor error)."""
    numbers = _NUMBER.findall(raw)
    if len(numbers) != 2:
        issues.error("bad_anchor", f"point {raw!r} is not two numbers [x, y] in {tag_text!r}", offset)
        return None
    stripped = raw.strip().strip("\"'").strip()
    if value_form == "bracketed" or not (stripped.startswith("[") and stripped.endswith("]")):
        issues.warn("anchor_point_form", f'point written as {raw!r}; expected "[x, y]"', offset)
    return float(numbers[0]), float(numbers[1])


def _read_tag(
    text: str, start: int, kind: str, *, body_start: int, in_answer: bool, issues: _Collector
) -> tuple[Anchor | None, int]:
    """Read one tag starting at ``start``; return the anchor (None when malformed) and where it ends."""
    body = _TAG_BODY.match(text, body_start)
    if body is None:
        snippet = text[start : start + 60]
        issues.error("bad_anchor", f"anchor tag {snippet!r} is never closed by '>'", start)
        return None, body_start
    end = body.end()
    tag_text = text[start:end]
    if body["self_closing"]:
        issues.warn("anchor_self_closing", f"anchor {tag_text!r} is self-closing; anchors take no '/'", start)
    if kind != kind.lower():
        issues.warn("anchor_uppercase", f"tag name {kind!r} should be lower case", start)
    kind = kind.lower()
    attributes: dict[str, str] = {}
    value_forms: dict[str, str] = {}
    attribute_text = text[body_start : body.start("self_closing")]
    for match in _ATTRIBUTE.finditer(attribute_text):
        name = match["name"]
        if name != name.lower():
            issues.warn("anchor_uppercase", f"attribute {name!r} should be lower case", start)
            name = name.lower()
        form = match.lastgroup
        if form == "single_quoted":
            issues.warn("anchor_single_quotes", f"attribute {name} uses single quotes in {tag_text!r}", start)
        elif form in ("bracketed", "bare"):
            issues.warn("anchor_unquoted", f"attribute {name} is not quoted in {tag_text!r}", start)
        if name in attributes:
            issues.warn("anchor_duplicate_attribute", f"attribute {name} given twice in {tag_text!r}", start)
            continue
        attributes[name] = match[form]
        value_forms[name] = form
    missing = [key for key in _REQUIRED if not (attributes.get(key) or "").strip()]
    if missing:
        issues.error("bad_anchor", f"anchor {tag_text!r} lacks {', '.join(missing)}", start)
        return None, end
    extra = sorted(set(attributes) - set(_REQUIRED))
    if extra:
        issues.warn("anchor_extra_attribute", f"anchor {tag_text!r} has extra attribute(s) {extra}", start)
    img_text = attributes["img_idx"].strip()
    try:
        img_idx = int(img_text)
    except ValueError:
        issues.error("bad_anchor", f"img_idx {img_text!r} is not an integer in {tag_text!r}", start)
        return None, end
    point = _read_point(attributes["point"], value_forms["point"], tag_text, start, issues)
    if point is None:
        return None, end
    anchor = Anchor(
        kind=kind,  # type: ignore[arg-type]
        name=" ".join(attributes["name"].split()),
        id=attributes["id"].strip(),
        img_idx=img_idx,
        x=point[0],
        y=point[1],
        offset=start,
        in_answer=in_answer,
    )
    return anchor, end


def _in_range(x: float, y: float, width: float = NORMALIZED_MAX, height: float = NORMALIZED_MAX) -> bool:
    return math.isfinite(x) and math.isfinite(y) and 0.0 <= x <= width and 0.0 <= y <= height


@functools.lru_cache(maxsize=4096)
def _normal_name(name: str) -> str:
    return " ".join(name.lower().split())


def _check_anchors(anchors: list[Anchor], num_views: int, issues: _Collector) -> None:
    """Per-tag range/view checks and cross-tag identity checks."""
    first: dict[str, Anchor] = {}
    per_view: dict[tuple[str, int], Anchor] = {}
    last_number: dict[str, int] = {}
    by_name_view: dict[tuple[str, int], list[Anchor]] = {}  # first tags by (name, view): duplicate entities
    for anchor in anchors:
        if not _in_range(anchor.x, anchor.y):
            issues.error(
                "point_out_of_range",
                f"{anchor.id} point [{anchor.x:g}, {anchor.y:g}] is outside 0–1000",
                anchor.offset,
            )
        if not 0 <= anchor.img_idx < num_views:
            issues.error(
                "unknown_view",
                f"{anchor.id} has img_idx={anchor.img_idx} but only views 0..{num_views - 1} exist",
                anchor.offset,
            )
        prefix = anchor.id.split("_", 1)[0].lower()
        if prefix in ("obj", "space") and prefix != anchor.kind:
            issues.warn("id_kind_prefix", f"ID {anchor.id!r} is on a <{anchor.kind}> tag", anchor.offset)
        earlier = first.get(anchor.id)
        if earlier is None:
            first[anchor.id] = anchor
            canonical = _CANONICAL_ID.fullmatch(anchor.id)
            if canonical:
                family, number = canonical["family"].lower(), int(canonical["number"])
                if number < last_number.get(family, 0):
                    issues.warn(
                        "id_order",
                        f"{anchor.id} introduced after {family}_{last_number[family]:02d}; "
                        "IDs should follow first-mention order",
                        anchor.offset,
                    )
                last_number[family] = max(number, last_number.get(family, 0))
            same_name = by_name_view.setdefault((_normal_name(anchor.name), anchor.img_idx), [])
            for other in same_name:
                if math.dist((other.x, other.y), (anchor.x, anchor.y)) <= SAME_POINT_TOLERANCE:
                    issues.warn(
                        "same_entity_two_ids",
                        f"{other.id} and {anchor.id} are both {anchor.name!r} at the same point of view "
                        f"{anchor.img_idx}",
                        anchor.offset,
                    )
            same_name.append(anchor)
        else:
            if _normal_name(earlier.name) != _normal_name(anchor.name):
                issues.error(
                    "id_name_conflict",
                    f"{anchor.id} was introduced as {earlier.name!r} but is tagged {anchor.name!r} here",
                    anchor.offset,
                )
            if earlier.kind != anchor.kind:
                issues.error(
                    "id_kind_conflict",
                    f"{anchor.id} was introduced as <{earlier.kind}> but is tagged <{anchor.kind}> here",
                    anchor.offset,
                )
        same_view = per_view.get((anchor.id, anchor.img_idx))
        if same_view is None:
            per_view[(anchor.id, anchor.img_idx)] = anchor
        else:
            distance = math.dist((same_view.x, same_view.y), (anchor.x, anchor.y))
            if distance > ID_POINT_TOLERANCE:
                issues.error(
                    "id_point_conflict",
                    f"{anchor.id} is pinned in view {anchor.img_idx} at [{same_view.x:g}, {same_view.y:g}] "
                    f"and at [{anchor.x:g}, {anchor.y:g}] ({distance:.0f} apart, more than "
                    f"{ID_POINT_TOLERANCE:g})",
                    anchor.offset,
                )
            elif not anchor.in_answer:  # re-tagging an entity in the answer is an accepted answer form
                issues.warn(
                    "repeated_anchor",
                    f"{anchor.id} is tagged twice in view {anchor.img_idx}; later steps should use the bare ID",
                    anchor.offset,
                )


def _scan(
    text: str, answer_span: tuple[int, int] | None, issues: _Collector
) -> tuple[list[Anchor], list[tuple[int, int]]]:
    """Read every anchor tag; return anchors and the [start, end) spans of all tags (good or bad)."""
    anchors: list[Anchor] = []
    spans: list[tuple[int, int]] = []
    position = 0
    while True:
        match = _TAG_START.search(text, position)
        if match is None:
            break
        start = match.start()
        in_answer = answer_span is not None and answer_span[0] <= start < answer_span[1]
        canonical = _CANONICAL_TAG.match(text, start)
        if canonical is not None:
            anchors.append(Anchor(
                canonical["kind"], " ".join(canonical["name"].split()), canonical["id"],  # type: ignore[arg-type]
                int(canonical["img_idx"]), float(canonical["x"]), float(canonical["y"]), start, in_answer,
            ))
            spans.append(canonical.span())
            position = canonical.end()
            continue
        anchor, end = _read_tag(text, start, match["kind"], body_start=match.end(), in_answer=in_answer, issues=issues)
        spans.append((start, max(end, match.end())))
        if anchor is not None:
            anchors.append(anchor)
        position = max(end, match.end())
    for match in _CLOSING_TAG.finditer(text):
        issues.warn("anchor_closing_tag", f"closing tag {match.group(0)!r}: anchors are not closed", match.start())
        spans.append(match.span())
    spans.sort()
    return anchors, spans


def _id_tokens(text: str, spans: list[Span]) -> list[tuple[int, str]]:
    """(offset, token) for each word shaped like ``[A-Za-z][A-Za-z0-9]*_\\w+`` outside the tag spans.

    The word must not be glued to a preceding word character or '-'. Scanning outwards from each
    underscore between tags is several times faster than a regex tried at every character, and
    parse() runs on every model output.
    """
    gaps = []
    cursor = 0
    for span_start, span_end in spans:
        if span_start > cursor:
            gaps.append((cursor, span_start))
        cursor = max(cursor, span_end)
    gaps.append((cursor, len(text)))
    tokens = []
    for gap_start, gap_end in gaps:
        position = text.find("_", gap_start, gap_end)
        while position >= 0:
            start = position
            while start > gap_start and text[start - 1] in _ID_HEAD_CHARS:
                start -= 1
            tail = _WORD_TAIL.match(text, position + 1, gap_end)
            end = tail.end() if tail else position + 1
            first = text[start]
            before = text[start - 1] if start > 0 else " "
            if tail and first.isascii() and first.isalpha() and not (before.isalnum() or before in "_-"):
                tokens.append((start, text[start:end]))
            position = text.find("_", end, gap_end)
    return tokens


def _find_references(
    text: str,
    spans: list[tuple[int, int]],
    anchors: list[Anchor],
    answer_span: tuple[int, int] | None,
    issues: _Collector,
) -> list[Reference]:
    """Bare-ID mentions outside tags; flags unknown IDs and uses before introduction."""
    introduced: dict[str, int] = {}
    for anchor in anchors:
        introduced.setdefault(anchor.id, anchor.offset)
    references: list[Reference] = []
    reported_unknown: set[str] = set()
    for offset, token in _id_tokens(text, spans):
        in_answer = answer_span is not None and answer_span[0] <= offset < answer_span[1]
        if token in introduced:
            references.append(Reference(token, offset, in_answer))
            if offset < introduced[token]:
                issues.error(
                    "reference_before_introduction",
                    f"{token} is mentioned at character {offset} before its tag at character {introduced[token]}",
                    offset,
                )
        elif _CANONICAL_ID.fullmatch(token):
            references.append(Reference(token, offset, in_answer))
            if token not in reported_unknown:
                reported_unknown.add(token)
                issues.error("unknown_id", f"{token} is mentioned but never introduced by a tag", offset)
    return references


def _resolve_answer(
    answer: str,
    *,
    answer_offset: int,
    anchors: list[Anchor],
    references: list[Reference],
    num_views: int,
    coordinates: Coordinates,
    view_sizes: Sequence[tuple[float, float]] | None,
    expect_points: bool,
    issues: _Collector,
) -> tuple[list[AnswerPoint], bool]:
    """Turn the answer block into answer points, resolving IDs and tags against the anchors.

    Returns the points and whether the answer declared a long-horizon task done.
    """
    if not answer.strip():
        issues.error("empty_answer", "the <answer> block is empty", answer_offset)
        return [], False
    reading = read_answer(answer)
    for warning in reading.warnings:
        issues.warn(warning.code, warning.message, answer_offset)
    for error in reading.errors:
        issues.error(error.code, error.message, answer_offset)
    by_id: dict[str, list[Anchor]] = {}
    for anchor in anchors:
        by_id.setdefault(anchor.id, []).append(anchor)

    points: list[AnswerPoint] = []
    if reading.form == "anchors":
        points = [AnswerPoint(a.x, a.y, a.img_idx, a.name, a.id) for a in anchors if a.in_answer]
    else:
        for read in reading.points:
            point = read
            if coordinates == "pixels":
                point = _pixels_to_normalized(point, num_views, view_sizes, issues, answer_offset)
            if point.id is None and point.label is not None and point.label.strip() in by_id:
                point = AnswerPoint(point.x, point.y, point.img_idx, point.label, point.label.strip())
            if point.id is not None and point.id not in by_id:
                issues.error("unknown_id", f"the answer names {point.id} but no tag introduced it", answer_offset)
            points.append(point)
        answer_ids = [s for s in reading.strings if s in by_id]
        for string in reading.strings:
            if string not in by_id and _CANONICAL_ID.fullmatch(string):
                issues.error("unknown_id", f"the answer names {string} but no tag introduced it", answer_offset)
        if not points:
            answer_ids += [r.id for r in references if r.in_answer and r.id in by_id]
        for answer_id in dict.fromkeys(answer_ids):
            points.extend(AnswerPoint(a.x, a.y, a.img_idx, a.name, a.id) for a in by_id[answer_id])
    if not points:
        if (
            expect_points
            and not reading.done
            and not any(e.code in ("bad_answer", "unknown_id") for e in issues.errors)
        ):
            issues.error(
                "unparsable_answer",
                f"no point found in the answer {answer.strip()[:60]!r} (expected JSON points, "
                "<point>[[x, y]]</point>, anchor tags or bare IDs)",
                answer_offset,
            )
        return [], reading.done
    resolved = []
    for given in points:
        point = _fill_view(given, anchors, by_id=by_id, num_views=num_views, issues=issues, offset=answer_offset)
        if not _in_range(point.x, point.y):
            issues.error(
                "point_out_of_range",
                f"answer point [{point.x:g}, {point.y:g}] is outside 0–1000",
                answer_offset,
            )
        if point.img_idx is not None and not 0 <= point.img_idx < num_views:
            issues.error(
                "unknown_view",
                f"answer point has img_idx={point.img_idx} but only views 0..{num_views - 1} exist",
                answer_offset,
            )
        resolved.append(point)
    return resolved, reading.done


def _pixels_to_normalized(
    point: AnswerPoint,
    num_views: int,
    view_sizes: Sequence[tuple[float, float]] | None,
    issues: _Collector,
    offset: int,
) -> AnswerPoint:
    """Pixel answers (Embodied-R1, Qwen2.5-VL) → 0–1000 using the size of the image the model saw."""
    view = point.img_idx if point.img_idx is not None else 0
    if view_sizes is None or not 0 <= view < len(view_sizes):
        return point  # the view check reports the bad index; the range check reports the point
    width, height = view_sizes[view]
    if not _in_range(point.x, point.y, width, height):
        issues.error(
            "point_out_of_range",
            f"answer point [{point.x:g}, {point.y:g}] px lies outside the {width:g}x{height:g} image",
            offset,
        )
    x = point.x * NORMALIZED_MAX / width
    y = point.y * NORMALIZED_MAX / height
    return AnswerPoint(x, y, point.img_idx, point.label, point.id)


def _fill_view(
    point: AnswerPoint,
    anchors: list[Anchor],
    *,
    by_id: dict[str, list[Anchor]],
    num_views: int,
    issues: _Collector,
    offset: int,
) -> AnswerPoint:
    """Complete an answer point's view and ID when unambiguous.

    The ID comes from the one reasoning anchor the point sits on; the view from there, from its ID's
    anchors when they all lie in one view, or from a single-view setup.
    """
    if point.id is None:
        on_anchor = {
            a.id
            for a in anchors
            if not a.in_answer
            and (point.img_idx is None or a.img_idx == point.img_idx)
            and math.dist((a.x, a.y), (point.x, point.y)) <= SAME_POINT_TOLERANCE
        }
        if len(on_anchor) == 1:
            point = AnswerPoint(point.x, point.y, point.img_idx, point.label, on_anchor.pop())
    if point.img_idx is not None:
        return point
    if num_views == 1:
        return AnswerPoint(point.x, point.y, 0, point.label, point.id)
    candidates = by_id.get(point.id or "", [])
    matching = [a for a in candidates if math.dist((a.x, a.y), (point.x, point.y)) <= SAME_POINT_TOLERANCE]
    views = {a.img_idx for a in matching} or {a.img_idx for a in candidates}
    if len(views) == 1:
        return AnswerPoint(point.x, point.y, views.pop(), point.label, point.id)
    issues.warn(
        "answer_view_unspecified",
        f"answer point [{point.x:g}, {point.y:g}] names no view among {num_views}",
        offset,
    )
    return point


def parse(
    text: str,
    num_views: int,
    *,
    expect_points: bool = True,
    coordinates: Coordinates = "norm1000",
    view_sizes: Sequence[tuple[float, float]] | None = None,
) -> Trace:
    """Parse and validate one model output; never raises on any ``text``.

    Args:
        text: the complete model output.
        num_views: how many images the model was given (valid ``img_idx`` are 0..num_views-1).
        expect_points: the answer must hold points (pointing / pick-and-place); set False for
            multiple-choice or free-text answers, which are then only kept as ``answer``.
        coordinates: ``"norm1000"`` (Qwen3-VL, RoboPIN) or ``"pixels"`` for answers in pixels of the
            image as fed to the model (Embodied-R1, Qwen2.5-VL); pixel answers are converted to
            0–1000 with ``view_sizes`` (width, height per view, of the resized image).

    Raises:
        ValueError: only for a bad ``num_views``/``coordinates``/``view_sizes`` (caller bugs).
    """
    if isinstance(num_views, bool) or not isinstance(num_views, int) or num_views < 1:
        raise ValueError(f"num_views must be a positive int, got {num_views!r}")
    if coordinates not in ("norm1000", "pixels"):
        raise ValueError(f"coordinates must be 'norm1000' or 'pixels', got {coordinates!r}")
    if coordinates == "pixels" and (view_sizes is None or len(view_sizes) != num_views):
        raise ValueError(f"coordinates='pixels' needs view_sizes for {num_views} view(s), got {view_sizes!r}")
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    issues = _Collector()
    think_span, answer_span, _closed = _find_blocks(text, issues)
    anchors, spans = _scan(text, answer_span, issues)
    _check_anchors(anchors, num_views, issues)
    references = _find_references(text, spans, anchors, answer_span, issues)
    think = text[think_span[0] : think_span[1]] if think_span else ""
    answer = text[answer_span[0] : answer_span[1]] if answer_span else ""
    answer_points: list[AnswerPoint] = []
    done = False  # the model declared a long-horizon task finished
    if answer_span is not None:
        answer_points, done = _resolve_answer(
            answer,
            answer_offset=answer_span[0],
            anchors=anchors,
            references=references,
            num_views=num_views,
            coordinates=coordinates,
            view_sizes=view_sizes,
            expect_points=expect_points,
            issues=issues,
        )
    trace = Trace(
        text=text,
        num_views=num_views,
        think=think,
        answer=answer,
        anchors=tuple(anchors),
        references=tuple(references),
        answer_points=tuple(answer_points),
        errors=tuple(issues.errors),
        warnings=tuple(issues.warnings),
        has_think=think_span is not None,
        has_answer=answer_span is not None and _closed,
        think_span=think_span or (0, 0),
        answer_span=answer_span or (0, 0),
        done=done and not answer_points,
    )
    return _metrics.with_metrics(trace)
