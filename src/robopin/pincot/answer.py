"""Reading the point answers VLMs write inside ``<answer>``: JSON, bare lists and ``<point>`` blocks.

Accepted forms (each with or without a Markdown ```json fence):

- Qwen3-VL style objects: ``[{"point_2d": [x, y], "label": "cup"}, …]`` or a single object; optional
  ``"id"`` and ``"img_idx"`` keys; a ``"bbox_2d"`` instead of a point is read as its centre (warning).
- Bare lists: ``[x, y]`` or ``[[x, y], …]``.
- Embodied-R1: ``<point>[[x, y], …]</point>``.
- Anchor tags or bare IDs inside the answer (resolved by the trace parser, not here).

Harmless variants real models emit (single quotes, ``(x, y)`` tuples, trailing commas, Python
``None``, JSON embedded in prose, loose ``[x, y]`` pairs in prose) are repaired and reported as
warnings. Nothing here raises on any input.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from robopin.pincot.trace import AnswerPoint, Issue

_BAD = object()  # a key whose value does not convert (an issue is recorded)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|python)?[ \t]*\n?(?P<body>.*?)(?:```|$)", re.DOTALL)
_POINT_BLOCK = re.compile(r"<\s*point\s*>(?P<body>.*?)<\s*/\s*point\s*>", re.DOTALL | re.IGNORECASE)
_TUPLE = re.compile(r"\(\s*(?P<x>-?\d+(?:\.\d+)?)\s*,\s*(?P<y>-?\d+(?:\.\d+)?)\s*\)")
_TRAILING_COMMA = re.compile(r",\s*(?P<close>[\]}])")
_LOOSE_PAIR = re.compile(r"[\[(]\s*(?P<x>-?\d+(?:\.\d+)?)\s*,\s*(?P<y>-?\d+(?:\.\d+)?)\s*[\])]")
_PY_LITERALS = re.compile(r"\b(?P<literal>None|True|False)\b")
_PY_TO_JSON = {"None": "null", "True": "true", "False": "false"}

POINT_KEYS = ("point_2d", "point", "position", "coordinates", "coord")
VIEW_KEYS = ("img_idx", "image_idx", "view_idx", "view")
BOX_KEYS = ("bbox_2d", "bbox", "box_2d")
LIST_KEYS = ("points", "answer", "result", "targets")
DONE_WORDS = frozenset({"done", "finished", "complete", "task complete"})
"""An answer (or answer label) of one of these words means a long-horizon task is finished."""

_JSON_DECODER = json.JSONDecoder()
_MAX_EMBEDDED_STARTS = 8


@dataclass
class AnswerReading:
    """What was read from an answer block: points, bare strings (possible IDs), and issues."""

    points: list[AnswerPoint] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    errors: list[Issue] = field(default_factory=list)
    form: str = "none"
    done: bool = False


def strip_fence(text: str) -> tuple[str, bool]:
    """The first Markdown code fence's contents (else ``text``), and whether a fence was found."""
    if "```" not in text:
        return text, False
    match = _FENCE.search(text)
    if match is None:
        return text, False
    return match["body"], True


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _pair(value: Any) -> tuple[float, float] | None:
    """``[x, y]`` (two numbers, or two numeric strings) → floats; anything else → None."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        x, y = _number(value[0]), _number(value[1])
        if x is not None and y is not None:
            return x, y
    return None


def _int_or_none(value: Any) -> int | None:
    number = _number(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


class _Reader:
    """Walks a decoded JSON value and collects points; one instance per answer."""

    def __init__(self, reading: AnswerReading) -> None:
        self.reading = reading

    def value(self, value: Any, depth: int = 0) -> None:
        if depth > 4:  # deeper nesting is never a point answer; stop rather than recurse on junk
            return
        pair = _pair(value)
        if pair is not None:
            self.reading.points.append(AnswerPoint(x=pair[0], y=pair[1]))
        elif isinstance(value, dict):
            self.mapping(value, depth)
        elif isinstance(value, (list, tuple)):
            for item in value:
                self.value(item, depth + 1)
        elif isinstance(value, str) and value.strip():
            if value.strip().lower() in DONE_WORDS:
                self.reading.done = True
            else:
                self.reading.strings.append(value.strip())

    def _first(self, keys: dict[str, Any], names: Sequence[str], convert: Callable[[Any], Any], complaint: str) -> Any:
        """The first of ``names`` in ``keys``, converted (None when none is there); ``_BAD``, with ``complaint`` (its
        ``{key}`` and ``{value}`` filled in) recorded as an issue, when its value does not convert."""
        for key in names:
            if key in keys:
                converted = convert(keys[key])
                if converted is None:
                    self.reading.errors.append(Issue("bad_answer", complaint.format(key=key, value=keys[key])))
                    return _BAD
                return converted
        return None

    def mapping(self, value: dict[str, Any], depth: int) -> None:
        keys = {str(k).lower(): v for k, v in value.items()}
        label = keys.get("label")
        label = str(label) if label is not None else None
        ident = keys.get("id")
        ident = str(ident).strip() if ident is not None else None
        img_idx = self._first(keys, VIEW_KEYS, _int_or_none, "answer view {key}={value!r} is not an integer view index")
        if img_idx is _BAD:
            return
        pair = self._first(keys, POINT_KEYS, _pair, "answer {key}={value!r} is not a [x, y] pair of numbers")
        if pair is _BAD:
            return
        if pair is not None:
            self.reading.points.append(AnswerPoint(pair[0], pair[1], img_idx, label, ident))
            return
        for key in BOX_KEYS:
            if key in keys:
                box = keys[key]
                numbers = [_number(v) for v in box] if isinstance(box, (list, tuple)) else []
                if len(numbers) != 4 or any(n is None for n in numbers):
                    self.reading.errors.append(Issue("bad_answer", f"answer {key}={box!r} is not [x1, y1, x2, y2]"))
                    return
                x1, y1, x2, y2 = numbers  # type: ignore[misc]
                self.reading.warnings.append(
                    Issue("answer_box_centre", f"answer gave {key} {box!r}; using its centre as the point")
                )
                self.reading.points.append(AnswerPoint((x1 + x2) / 2.0, (y1 + y2) / 2.0, img_idx, label, ident))
                return
        for key in LIST_KEYS:
            if key in keys:
                self.value(keys[key], depth + 1)
                return
        if ident:
            # {"id": "obj_01"} without a point: the trace parser resolves the ID to its anchor.
            self.reading.strings.append(ident)
        elif label is not None and label.strip().lower() in DONE_WORDS:
            self.reading.done = True


def decode_json(text: str, warnings: list[Issue]) -> tuple[bool, Any]:
    """Decode ``text`` as JSON, repairing single quotes, tuples, trailing commas and Python literals.

    Returns (decoded?, value); each repair appends a warning to ``warnings``. Never raises.
    """
    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        return True, json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    repaired = stripped
    repairs = []
    if "'" in repaired and '"' not in repaired:
        repaired = repaired.replace("'", '"')
        repairs.append("single quotes")
    if "(" in repaired:
        new = _TUPLE.sub(r"[\g<x>, \g<y>]", repaired)
        if new != repaired:
            repairs.append("(x, y) tuples")
            repaired = new
    new = _TRAILING_COMMA.sub(r"\g<close>", repaired)
    if new != repaired:
        repairs.append("trailing commas")
        repaired = new
    new = _PY_LITERALS.sub(lambda m: _PY_TO_JSON[m["literal"]], repaired)
    if new != repaired:
        repairs.append("Python literals")
        repaired = new
    if repairs:
        try:
            value = json.loads(repaired)
        except (ValueError, RecursionError):
            pass
        else:
            warnings.append(Issue("answer_json_repaired", f"answer JSON needed repair ({', '.join(repairs)})"))
            return True, value
    # JSON embedded in prose: decode from the first bracket that yields a complete value. Only a few
    # starts are tried so a long run of brackets cannot make this quadratic.
    starts = [i for i, char in enumerate(repaired) if char in "[{"][:_MAX_EMBEDDED_STARTS]
    for start in starts:
        try:
            value, _end = _JSON_DECODER.raw_decode(repaired, start)
        except (ValueError, RecursionError):
            continue
        warnings.append(Issue("answer_json_in_text", "answer JSON was surrounded by other text; the text was ignored"))
        return True, value
    return False, None


def read_answer(answer: str) -> AnswerReading:
    """Read the point forms of one answer block; never raises.

    Anchor tags and bare IDs are not resolved here (the trace parser knows the anchors); strings that
    JSON decoding produced are returned in ``strings`` for it to match against IDs.
    """
    reading = AnswerReading()
    body, fenced = strip_fence(answer)
    block = _POINT_BLOCK.search(body)
    if block is not None:
        reading.form = "point_block"
        ok, value = decode_json(block["body"], reading.warnings)
        if ok:
            _Reader(reading).value(value)
        if not reading.points:
            reading.errors.append(
                Issue("bad_answer", f"<point> block {block['body'].strip()[:60]!r} holds no [x, y] points")
            )
        return reading
    if re.search(r"<\s*(?:obj|space)\b", body, re.IGNORECASE):
        reading.form = "anchors"
        return reading
    decode_warnings: list[Issue] = []
    ok, value = decode_json(body, decode_warnings)
    in_prose = any(w.code == "answer_json_in_text" for w in decode_warnings)
    loose = [(pair["x"], pair["y"]) for pair in _LOOSE_PAIR.finditer(body)]
    # In prose, a lone embedded list is only the first of possibly several "[x, y]" pairs: read them all.
    if ok and not (in_prose and not isinstance(value, dict) and _pair(value) is not None and loose):
        reading.warnings.extend(decode_warnings)
        reading.form = "json_fenced" if fenced else "json"
        _Reader(reading).value(value)
        return reading
    if loose:
        reading.form = "text_pairs"
        reading.points.extend(AnswerPoint(float(x), float(y)) for x, y in loose)
        reading.warnings.append(
            Issue("answer_points_from_text", f"read {len(loose)} point(s) from prose, not from JSON")
        )
        return reading
    reading.form = "text"
    reading.done = body.strip().strip(".").lower() in DONE_WORDS
    return reading
