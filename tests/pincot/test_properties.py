"""Property tests: written traces parse back to the same anchors and answer; no text makes parse() raise."""

from __future__ import annotations

import re
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robopin.pincot import AnswerPoint, TraceWriter, parse
from robopin.pincot.parser import _id_tokens
from robopin.pincot.writer import format_answer_json, format_point, format_trace, points_to_answer

WORD = st.text(alphabet=string.ascii_letters, min_size=1, max_size=8)
NAME = st.lists(WORD, min_size=1, max_size=3).map(" ".join)
# Free reasoning text: no '<', '>' (tags) and no '_' (so it cannot spell an ID by accident).
PROSE = st.text(alphabet=string.ascii_letters + string.digits + " .,;:!?-()'\n", max_size=40)
COORD = st.one_of(st.integers(0, 1000).map(float), st.floats(0, 1000, allow_nan=False, allow_infinity=False))


@st.composite
def written_traces(draw):
    """A random valid PinCoT output and what it should parse to."""
    num_views = draw(st.integers(1, 4))
    names = draw(st.lists(NAME, min_size=1, max_size=5, unique_by=lambda n: n.lower()))
    writer = TraceWriter(num_views=num_views)
    expected = []
    introduced: list[str] = []
    for name in names:
        kind = draw(st.sampled_from(["obj", "space"]))
        views = draw(st.lists(st.integers(0, num_views - 1), min_size=1, max_size=num_views, unique=True))
        for view in views:
            writer.say(draw(PROSE))
            x, y = draw(COORD), draw(COORD)
            anchor_id = writer.pin(kind, name, view, x, y)
            expected.append((kind, name, anchor_id, view, x, y))
            if anchor_id not in introduced:
                introduced.append(anchor_id)
        for _ in range(draw(st.integers(0, 2))):
            writer.say(draw(PROSE) + " ")
            writer.refer(draw(st.sampled_from(introduced)))
            writer.say(" " + draw(PROSE))
    answer_ids = draw(st.lists(st.sampled_from(introduced), min_size=1, max_size=3))
    for answer_id in answer_ids:
        writer.answer_anchor(answer_id)
    form = draw(st.sampled_from(["json", "fenced", "list", "point_block"]))
    if form in ("json", "fenced"):
        answer = format_answer_json(writer.answer_points, fence=form == "fenced")
    else:
        pairs = points_to_answer([(p.x, p.y) for p in writer.answer_points])
        answer = f"<point>{pairs}</point>" if form == "point_block" else pairs
    text = format_trace(writer.think_text(), answer)
    return text, num_views, expected, list(writer.answer_points), form


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written_traces())
def test_written_traces_parse_back_to_the_same_anchors_and_answer(case):
    text, num_views, expected_anchors, expected_points, form = case
    trace = parse(text, num_views)
    assert trace.valid, (text, trace.errors)
    assert [(a.kind, a.name, a.id, a.img_idx, a.x, a.y) for a in trace.anchors] == expected_anchors
    if form in ("json", "fenced"):
        assert list(trace.answer_points) == expected_points
    else:
        assert [(p.x, p.y) for p in trace.answer_points] == [(p.x, p.y) for p in expected_points]
    assert trace.metrics["format"] == 1.0
    assert trace.metrics["consistency"] == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(COORD, COORD), min_size=1, max_size=5), st.integers(1, 3))
def test_answer_json_round_trips_free_points(pairs, num_views):
    points = [AnswerPoint(x, y, i % num_views, f"p{i}") for i, (x, y) in enumerate(pairs)]
    trace = parse(format_trace("no anchors here", format_answer_json(points)), num_views)
    assert list(trace.answer_points) == points
    assert all(format_point(p.x, p.y) for p in trace.answer_points)


FRAGMENTS = st.sampled_from([
    "<think>", "</think>", "<answer>", "</answer>", "<obj", "<space", " name=", ' id="obj_01"', " img_idx=",
    '"0"', ' point="[', "412, 530", "]", '">', ">", "/>", "'", '"', "obj_01", "space_02", "[[", "]]", "(", ")",
    "```json\n", "```", "<point>", "</point>", '{"point_2d": [', '"label": "a"}', ",", "-1", "1e309", "NaN",
    "\n", " ", "done",
])  # fmt: skip


@settings(max_examples=250, deadline=None)
@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=6)), max_size=40).map("".join), st.integers(1, 4))
def test_arbitrary_text_never_raises(text, num_views):
    trace = parse(text, num_views)
    assert isinstance(trace.valid, bool)
    assert all(0.0 <= value <= 1.0 for value in trace.metrics.values())
    assert trace.valid == (not trace.errors)
    for anchor in trace.anchors:
        assert text[anchor.offset] == "<"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(1, 3))
def test_any_unicode_text_never_raises(text, num_views):
    parse(text, num_views)


REFERENCE_ID_TOKEN = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*_\w+")
ID_TEXT = st.text(alphabet="ab01_- .é\n", max_size=40)


@settings(max_examples=300, deadline=None)
@given(ID_TEXT)
def test_fast_id_token_scan_matches_the_reference_regex(text):
    expected = [(m.start(), m.group(0)) for m in REFERENCE_ID_TOKEN.finditer(text)]
    assert _id_tokens(text, []) == expected
