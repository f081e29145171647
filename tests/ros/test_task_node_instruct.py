"""task_node's front door over real DDS, no simulator: Instruct validation, parameter checks, a task
with no camera frames ending with its named reason, and the reasoning conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter as NodeParameter
from robopin_interfaces.action import ExecuteTask
from robopin_interfaces.srv import Instruct
from robopin_ros import conversions
from robopin_ros.actions import ActionClient, GoalResult
from robopin_ros.task_node import TaskNode

from robopin.geometry import PointRequest, RefusalReason, Target
from robopin.pincot import Issue, parse
from robopin.reasoning import ReasoningRecord
from tests.reasoning.stages import pincot_text
from tests.ros.rostest_utils import SpunNode, wait_future

pytestmark = pytest.mark.ros


@pytest.fixture
def planner(ros_context):
    """task_node in this process (its own executor) with a scripted model and no cameras."""
    from robopin.vlm import register_backend

    register_backend("scripted", "tests.reasoning.stages")
    overrides = [
        NodeParameter("vlm", value="{type: scripted, texts: ['<think>x</think><answer>[]</answer>']}"),
        NodeParameter("views", value=["static"]),
        NodeParameter("max_frame_age_s", value=0.2),
    ]
    node = TaskNode(context=ros_context, parameter_overrides=overrides)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(node)
    import threading

    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    client = SpunNode("planner_instruct_client", ros_context)
    yield node, client.node
    client.close()
    executor.shutdown()
    thread.join(timeout=5)
    node.destroy_node()


def _instruct(client_node, **fields) -> Instruct.Response:
    service = client_node.create_client(Instruct, "/robopin/instruct")
    assert service.wait_for_service(timeout_sec=20)
    return wait_future(service.call_async(Instruct.Request(**fields)), 10, "Instruct")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"instruction": "   "}, "instruction is empty"),
        ({"instruction": "x" * 5000}, "5000 characters"),
        ({"instruction": "put the duck on the plate", "mode": "dance"}, "'dance'"),
        ({"instruction": "put the duck on the plate", "max_steps": -1}, "max_steps"),
    ],
)
def test_instruct_rejects_bad_requests_at_once_naming_why(planner, fields, expected):
    _, client = planner
    reply = _instruct(client, **fields)
    assert not reply.accepted and reply.task_id == ""
    assert expected in reply.message


def _set(client_node, name: str, value: str):
    service = client_node.create_client(SetParameters, "/task_node/set_parameters")
    assert service.wait_for_service(timeout_sec=20)
    value_msg = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
    request = SetParameters.Request(parameters=[Parameter(name=name, value=value_msg)])
    return wait_future(service.call_async(request), 10, "set_parameters").results[0]


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("vlm", "{type: nope}", "'nope'"),
        ("vlm", "just text", "YAML mapping"),
        ("reasoning", "{max_steps: 0}", "max_steps"),
        ("reasoning", "{reasoner: {type: best_guess}}", "'best_guess'"),
        ("workspace", "{min_xyz: [1, 0, 0], max_xyz: [0, 1, 1]}", "min_xyz"),
    ],
)
def test_bad_parameter_changes_are_refused_naming_the_value(planner, name, value, expected):
    _, client = planner
    result = _set(client, name, value)
    assert not result.successful and expected in result.reason


def test_instruct_starts_a_task_that_ends_with_a_named_reason_without_camera_frames(planner):
    _, client = planner
    action = ActionClient(client, ExecuteTask, "/robopin/execute_task")
    assert action.wait_for_server(timeout_sec=20)
    reply = _instruct(client, instruction="put the duck on the plate", dry_run=True)
    assert reply.accepted and len(reply.task_id) == 8 and "(dry run)" in reply.message
    second = _instruct(client, instruction="another task")
    # The first task may already have ended (no frames): then the second is accepted, else refused as busy.
    assert second.accepted or reply.task_id in second.message
    # A goal of our own sees the same refusal: no frames from the configured view.
    handle = wait_future(action.send_goal_async(ExecuteTask.Goal(instruction="put the duck on the plate")), 10, "goal")
    # Ended at once (busy or no frames): its answer may come before the server matched this new client's
    # reader, and Fast DDS drops it; GoalResult asks again once the status says the goal ended.
    answer = GoalResult(handle).answer(20.0)
    assert answer is not None, "no result within 20 s"
    result = answer.result
    if result.reason != "busy":
        assert (result.success, result.reason) == (False, "stale_frame"), result.message
        assert result.steps_executed == 0 and "static" in result.message


def test_target3d_round_trip_keeps_the_refusal_reason():
    target = Target(
        "obj_01", "duck", "static", 0, 100.5, 200.5, point=np.array([0.4, 0.1, 0.02]), normal=np.array([0, 0, 1.0]),
        depth_m=0.8, depth_spread_m=0.002, depth_valid_fraction=0.9, stamp_s=12.5, valid=False,
        reason=RefusalReason.NO_DEPTH,
    )  # fmt: skip
    back = conversions.target3d_msg_to_target(conversions.target_to_msg(target))
    assert (back.id, back.name, back.source_view, back.img_idx, back.valid) == ("obj_01", "duck", "static", 0, False)
    assert back.reason == RefusalReason.NO_DEPTH and str(back.reason) == "no_depth"
    assert np.allclose(back.point, target.point) and np.allclose(back.normal, [0, 0, 1])
    assert math.isclose(back.stamp_s, 12.5) and math.isclose(back.depth_m, 0.8)


def test_point_request_becomes_an_anchor_with_its_normalized_point():
    anchor = conversions.point_request_to_anchor_msg(PointRequest(320.0, 120.0, 1, "obj_02", "cube"), (640, 480), "obj")
    assert (anchor.id, anchor.name, anchor.img_idx, anchor.kind) == ("obj_02", "cube", 1, "obj")
    assert (anchor.x, anchor.y, anchor.u, anchor.v) == (500.0, 250.0, 320.0, 120.0)


def _record(**fields) -> ReasoningRecord:
    base = dict(task_id="t1", step=2, kind="step", instruction="tidy up", text="", model="m", generation_time_s=0.3,
                stamp_s=5.0, view_names=("static",), image_sizes=((640, 480),), valid=True)  # fmt: skip
    return ReasoningRecord(**(base | fields))


def test_pincot_record_to_message_carries_pixels_and_a_loop_refusal():
    text = pincot_text()
    trace = parse(text, 1)
    refusal = Issue("invalid_answer", "the place point names no view")
    msg = conversions.reasoning_record_to_msg(
        _record(text=text, trace=trace, valid=False, errors=(refusal,), think=trace.think, answer=trace.answer)
    )
    assert (msg.task_id, msg.step, msg.instruction, msg.raw_text) == ("t1", 2, "tidy up", text)
    assert not msg.valid and [e.code for e in msg.errors] == ["invalid_answer"]
    assert [a.id for a in msg.anchors] == ["obj_01", "space_01"]
    assert math.isclose(msg.anchors[0].u, 200.0, abs_tol=0.5) and math.isclose(msg.anchors[0].v, 240.0, abs_tol=0.5)
    assert msg.header.stamp.sec == 5 and math.isclose(msg.generation_time_s, 0.3)


def test_subtask_record_to_message_keeps_reasoning_and_instruction():
    msg = conversions.reasoning_record_to_msg(
        _record(
            kind="subtask",
            text="r\nInstruction: put the duck on the plate",
            think="r",
            answer="put the duck on the plate",
        )
    )
    assert (msg.think, msg.answer, msg.valid, list(msg.anchors)) == ("r", "put the duck on the plate", True, [])


def test_subtask_and_plan_records_publish_their_own_measures_not_placeholders():
    subtask = conversions.reasoning_record_to_msg(
        _record(kind="subtask", text="r\nInstruction: fly", valid=False, metrics={"instruction_validity": 0.0})
    )
    assert subtask.format_score == 0.0
    assert math.isnan(subtask.identity_consistency) and math.isnan(subtask.anchor_coverage)  # no anchors to measure
    plan = conversions.reasoning_record_to_msg(_record(kind="plan", text="{}", metrics={"format": 0.7}))
    assert math.isclose(plan.format_score, 0.7) and math.isnan(plan.anchor_coverage)


def test_trial_results_aggregate_the_published_measures_per_method():
    from robopin.trials.log import TrialSummary
    from robopin.trials.results import reasoning_measures, reasoning_quality

    text = pincot_text()
    trace = parse(text, 1)
    record = _record(text=text, trace=trace, think=trace.think, answer=trace.answer)
    pointing = conversions.reasoning_record_to_msg(record)
    plan = conversions.reasoning_record_to_msg(_record(kind="plan", text="{}", metrics={"format": 0.5}))
    steps = [reasoning_measures(pointing), reasoning_measures(plan)]
    assert steps[1]["consistency"] is None  # a plan has no anchors: not measured, not a placeholder
    summary = TrialSummary("t", "long_horizon", "oracle / xarm6", True, extra={"reasoning": steps})
    row = reasoning_quality([summary]).splitlines()[-1]
    coverage = trace.metrics["cross_step_id_coverage"]
    # No ground truth (pin, answer accuracy), no R^3 step (instruction validity), no reference plan: "–".
    assert row == (f"| oracle / xarm6 | 2/2 | {(trace.metrics['format'] + 0.5) / 2:.3f} | 1.000 | 1.000 | "
                   f"{coverage:.3f} | – | – | – | – |")


def test_ground_truth_measures_of_a_record_are_published_and_nan_without_ground_truth():
    text = pincot_text()
    trace = parse(text, 1)
    measured = _record(text=text, trace=trace, think=trace.think, answer=trace.answer,
                       metrics={**trace.metrics, "pin_accuracy": 0.5, "answer_accuracy": 1.0})
    msg = conversions.reasoning_record_to_msg(measured)
    assert (msg.pin_accuracy, msg.answer_accuracy) == (0.5, 1.0)
    assert math.isclose(msg.cross_step_id_coverage, trace.metrics["cross_step_id_coverage"])
    assert math.isnan(msg.plan_accuracy) and math.isnan(msg.instruction_validity)
    assert conversions.msg_to_trace(msg).metrics["pin_accuracy"] == 0.5
    bare = conversions.reasoning_record_to_msg(_record(text=text, trace=trace, think=trace.think, answer=trace.answer))
    assert math.isnan(bare.pin_accuracy) and math.isnan(bare.answer_accuracy)
    plan = conversions.reasoning_record_to_msg(_record(kind="plan", text="{}", metrics={"format": 1.0,
                                                                                         "plan_accuracy": 0.75}))
    assert plan.plan_accuracy == 0.75
