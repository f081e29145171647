"""The operator protocol: one request at a time, answers validated, the terminal and a judge file as operators."""

from __future__ import annotations

import io
import os
import threading
import time

import pytest

from robopin.trials.judging import JudgementError, StackVerdict
from robopin.trials.operator import (
    JudgementRequest,
    OperatorClosedError,
    OperatorError,
    OperatorProtocol,
    SceneRequest,
    ScriptedOperator,
    TerminalOperator,
    terminal_answer,
)

STACK = StackVerdict(success=True, task_id="abcd1234")


def _ask_in_thread(call, *args):
    box: dict = {}

    def target():
        try:
            box["value"] = call(*args)
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def _wait_for_request(protocol, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while protocol.request is None:
        assert time.monotonic() < deadline, "the request never appeared"
        time.sleep(0.01)


def test_answers_for_a_trial_that_is_not_waiting_change_nothing():
    protocol = OperatorProtocol()
    with pytest.raises(OperatorError) as caught:
        protocol.judge("t1", "success")
    assert caught.value.code == "not_waiting"
    thread, box = _ask_in_thread(protocol.ask_scene, SceneRequest("t1", "spatial", "pick the duck"))
    _wait_for_request(protocol)
    with pytest.raises(OperatorError) as caught:
        protocol.judge("t1", "success")  # t1 waits for its scene, not for a judgement
    assert caught.value.code == "not_waiting"
    with pytest.raises(OperatorError) as caught:
        protocol.scene_ready("t2")
    assert caught.value.code == "wrong_trial"
    protocol.scene_ready("t1", "console")
    thread.join(5)
    assert box["value"] == "console"
    thread, box = _ask_in_thread(protocol.ask_judgement, JudgementRequest("t1", "spatial", "pick", STACK))
    _wait_for_request(protocol)
    with pytest.raises(JudgementError) as caught:
        protocol.judge("t1", {"failure": "butterfingers"})
    assert caught.value.code == "unknown_reason" and protocol.request is not None  # still waiting
    judgement = protocol.judge("t1", {"failure": "grasp_failed", "note": "slipped"}, "console")
    thread.join(5)
    assert box["value"] == judgement and judgement.failure == "grasp_failed"
    with pytest.raises(OperatorError):
        protocol.judge("t1", "success")  # a second answer for a judged trial


def test_closing_wakes_a_waiting_runner():
    protocol = OperatorProtocol()
    thread, box = _ask_in_thread(protocol.ask_scene, SceneRequest("t1", "spatial", "pick"))
    _wait_for_request(protocol)
    protocol.close()
    thread.join(5)
    assert isinstance(box["error"], OperatorClosedError)


def test_scripted_operator_answers_in_batch_order_and_refuses_a_short_file():
    protocol = OperatorProtocol()
    scripted = ScriptedOperator(protocol, [{"success": True}, {"success": False, "reason": "grasp_failed"}],
                                source="judge file j.yaml")
    with pytest.raises(JudgementError, match="2 judgement\\(s\\) for 3 trial"):
        scripted.assign(["a", "b", "c"])
    scripted.assign(["a", "b"])
    assert protocol.ask_scene(SceneRequest("b", "spatial", "pick")) == "judge file j.yaml"
    assert protocol.ask_judgement(JudgementRequest("b", "spatial", "pick", STACK)).failure == "grasp_failed"
    assert protocol.ask_judgement(JudgementRequest("a", "spatial", "pick", STACK)).success


def test_terminal_operator_reads_typed_answers():
    assert terminal_answer("dropped subgoals=1 slipped off") == {"success": False, "reason": "dropped",
                                                                   "note": "slipped off", "subgoals": 1}
    assert terminal_answer("s")["success"] is True
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    protocol = OperatorProtocol()
    with os.fdopen(read_fd) as stream, os.fdopen(write_fd, "w") as typing:
        TerminalOperator(protocol, stream=stream, out=out)
        thread, box = _ask_in_thread(protocol.ask_scene, SceneRequest("t1", "spatial", "pick", (("duck", "front"),)))
        _wait_for_request(protocol)
        typing.write("\n")
        typing.flush()
        thread.join(5)
        thread, box = _ask_in_thread(protocol.ask_judgement, JudgementRequest("t1", "spatial", "pick", STACK))
        _wait_for_request(protocol)
        typing.write("wobbly\nfailure wrong_place went to the red plate\n")
        typing.flush()
        thread.join(5)
    assert box["value"].failure == "wrong_place" and box["value"].note == "went to the red plate"
    text = out.getvalue()
    assert "duck: front" in text and "not taken: " in text and "unknown failure reason 'wobbly'" in text
