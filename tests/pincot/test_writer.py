"""TraceWriter and the formatting helpers: IDs in first-mention order, re-introduction per view, refusals."""

from __future__ import annotations

import pytest

from robopin.pincot import Anchor, TraceWriteError, TraceWriter, format_anchor, parse


def test_ids_follow_first_mention_order_and_are_reused_across_views():
    writer = TraceWriter(num_views=2)
    duck = writer.pin("obj", "duck", 0, 412, 530)
    plate = writer.pin("space", "plate", 0, 700, 610)
    cup = writer.pin("obj", "cup", 0, 100.5, 200.25)
    again = writer.pin("obj", "Duck", 1, 250, 300)
    assert (duck, plate, cup, again) == ("obj_01", "space_01", "obj_02", "obj_01")
    writer.say(" so ")
    writer.refer(duck)
    writer.answer_anchor(duck, img_idx=1, label="pick")
    trace = parse(writer.text(fence=True), 2)
    assert trace.valid, trace.errors
    assert [(a.id, a.img_idx) for a in trace.anchors] == [("obj_01", 0), ("space_01", 0), ("obj_02", 0), ("obj_01", 1)]
    assert (trace.anchors[2].x, trace.anchors[2].y) == (100.5, 200.25)
    assert [(p.id, p.img_idx, p.label) for p in trace.answer_points] == [("obj_01", 1, "pick")]


def test_forced_ids_tell_apart_entities_with_one_name():
    writer = TraceWriter()
    left = writer.pin("obj", "cup", 0, 100, 100, entity_id="obj_01")
    right = writer.pin("obj", "cup", 0, 900, 100, entity_id="obj_02")
    writer.answer_anchor(right)
    assert left != right
    assert parse(writer.text(), 1).valid


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda w: w.pin("thing", "duck", 0, 1, 1), "kind"),
        (lambda w: w.pin("obj", "duck", 2, 1, 1), "img_idx"),
        (lambda w: w.pin("obj", "duck", 0, 1001, 1), "0–1000"),
        (lambda w: w.pin("obj", 'say "hi"', 0, 1, 1), "name"),
        (lambda w: w.say("<obj>"), "must not contain"),
        (lambda w: w.refer("obj_09"), "not been introduced"),
        (lambda w: w.answer_anchor("obj_09"), "no anchor"),
    ],
)
def test_writer_refuses_what_would_not_parse_back(call, match):
    with pytest.raises(TraceWriteError, match=match):
        call(TraceWriter(num_views=2))


def test_format_anchor_is_the_canonical_tag():
    tag = format_anchor(Anchor("space", "bowl centre", "space_01", 1, 655.0, 402.5))
    assert tag == '<space name="bowl centre" id="space_01" img_idx="1" point="[655, 402.5]">'
