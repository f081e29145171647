"""Trace ⇄ robopin_interfaces/PinnedReasoning: round trips through serialization and over real DDS."""

from __future__ import annotations

import math
import threading

import pytest
from rclpy.serialization import deserialize_message, serialize_message
from robopin_interfaces.msg import PinnedReasoning
from robopin_ros.conversions import msg_to_trace, trace_to_msg

from robopin.pincot import parse
from tests.ros.rostest_utils import SpunNode, wait_for

pytestmark = pytest.mark.ros

VALID = (
    '<think>The <obj name="yellow duck" id="obj_01" img_idx="0" point="[412, 530]"> goes into '
    '<space name="bowl centre" id="space_01" img_idx="0" point="[655, 402]">. From the wrist '
    '<obj name="yellow duck" id="obj_01" img_idx="1" point="[498, 611]">; obj_01 then space_01.</think>'
    '<answer>[{"point_2d": [412, 530], "label": "pick", "id": "obj_01", "img_idx": 0},'
    ' {"point_2d": [655, 402], "label": "place", "id": "space_01", "img_idx": 0}, {"point_2d": [5, 5]}]</answer>'
)
INVALID = (
    '<obj name="duck" id="obj_01" img_idx="3" point="[1200, 5]"> obj_02 <think>x</think>'
    "<answer>grasp at (10, 20)</answer> trailing"
)
SIZES = [(640, 480), (848, 480)]


def assert_same_trace(back, trace):
    assert back.anchors == trace.anchors
    assert back.answer_points == trace.answer_points
    assert back.references == trace.references
    assert back.errors == trace.errors
    assert back.warnings == trace.warnings
    assert back.valid == trace.valid
    assert (back.text, back.think, back.answer) == (trace.text, trace.think, trace.answer)
    assert back.metrics == pytest.approx(trace.metrics)


@pytest.mark.parametrize("text", [VALID, INVALID])
def test_trace_survives_message_serialization(text):
    trace = parse(text, 2)
    msg = trace_to_msg(trace, image_sizes=SIZES, view_names=["static", "wrist"], task_id="t1", step=2)
    wire = deserialize_message(serialize_message(msg), PinnedReasoning)
    back = msg_to_trace(wire)
    assert_same_trace(back, trace)
    again = trace_to_msg(back, image_sizes=SIZES, view_names=["static", "wrist"], task_id="t1", step=2)
    assert fields(again) == fields(wire)


def fields(msg):
    """A message as nested tuples with NaN spelled out: NaN pixels compare unequal as fields, and serialized bytes
    cannot stand in because Fast CDR leaves alignment padding uninitialised (two equal messages differ in bytes)."""
    if hasattr(msg, "get_fields_and_field_types"):
        return tuple((name, fields(getattr(msg, name))) for name in msg.get_fields_and_field_types())
    if isinstance(msg, (list, tuple)) or type(msg).__name__ in ("array", "ndarray"):
        return tuple(fields(item) for item in msg)
    if isinstance(msg, float) and math.isnan(msg):
        return "nan"
    return msg


def test_message_fields_carry_pixels_issues_and_metrics():
    trace = parse(VALID, 2)
    msg = trace_to_msg(trace, image_sizes=SIZES, view_names=["static", "wrist"], generation_time_s=0.28)
    wrist = msg.anchors[2]
    assert (wrist.img_idx, wrist.u, wrist.v) == (1, pytest.approx(498 * 848 / 1000), pytest.approx(611 * 480 / 1000))
    assert msg.anchors[0].char_offset == VALID.index("<obj")
    free = msg.answer_points[2]  # names no view, and two views were given
    assert free.img_idx == -1 and math.isnan(free.u) and math.isnan(free.v)
    assert (msg.answer_points[0].u, msg.answer_points[0].label, msg.answer_points[0].id) == (
        pytest.approx(412 * 640 / 1000),
        "pick",
        "obj_01",
    )
    assert msg.valid and msg.format_score == 1.0 and msg.identity_consistency == 1.0
    assert msg.anchor_coverage == pytest.approx(2 / 3)
    invalid = trace_to_msg(parse(INVALID, 2))
    assert not invalid.valid
    assert {e.code for e in invalid.errors} >= {"unknown_view", "point_out_of_range", "unknown_id"}
    assert all(e.is_error for e in invalid.errors) and not any(w.is_error for w in invalid.warnings)
    assert all(math.isnan(a.u) for a in invalid.anchors)  # no image sizes given


def test_a_message_marked_invalid_never_becomes_a_valid_trace():
    msg = trace_to_msg(parse(VALID, 2))
    msg.valid = False
    assert not msg_to_trace(msg).valid


def test_view_names_must_match_the_trace():
    with pytest.raises(ValueError, match="view names"):
        trace_to_msg(parse(VALID, 2), view_names=["static"])


def test_pinned_reasoning_round_trips_over_dds(ros_context):
    trace = parse(VALID, 2)
    received: list[PinnedReasoning] = []
    got = threading.Event()
    spun = SpunNode("pincot_conversion_test", ros_context)
    try:
        spun.node.create_subscription(
            PinnedReasoning, "/robopin/test_reasoning", lambda m: (received.append(m), got.set()), 10
        )
        publisher = spun.node.create_publisher(PinnedReasoning, "/robopin/test_reasoning", 10)
        msg = trace_to_msg(trace, image_sizes=SIZES, view_names=["static", "wrist"])

        def delivered() -> bool:
            publisher.publish(msg)
            return got.wait(0.2)

        wait_for(delivered, 20, "PinnedReasoning delivered over DDS")
    finally:
        spun.close()
    assert_same_trace(msg_to_trace(received[0]), trace)
