"""The console's HTTP API over a real socket: the seat, every refusal by name, a page closed mid-trial.

The robot side is a stand-in link (the ROS link is exercised end to end in
tests/integration/test_operator_console.py); the operator protocol behind the API is the real one.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from robopin.trials.console import ConsoleError, ConsoleServer, OperatorSeat
from robopin.trials.judging import StackVerdict
from robopin.trials.operator import JudgementRequest, OperatorProtocol, SceneRequest


class StandInLink:
    """Records what the console asked of the robot side; no ROS."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def views(self):
        return [{"name": "static", "kind": "camera", "seq": 3}]

    def png(self, kind, view):
        return b"\x89PNG\r\n\x1a\n" if (kind, view) == ("camera", "static") else None

    def task(self):
        return {"stage": "executing", "step": 0, "task_id": "abcd1234", "status": "executing"}

    def instruct(self, instruction, dry_run):
        self.calls.append(("instruct", instruction, dry_run))
        return {"accepted": True, "task_id": "beef0001", "message": "started"}

    def stop(self):
        self.calls.append(("stop",))
        return {"ok": True, "message": "STOP: arm stopped; no task was running"}


def _call(server, path, body=None, token="", origin=None):
    headers = {"Content-Type": "application/json", "X-Operator-Token": token}
    if origin:
        headers["Origin"] = origin
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url.rstrip("/") + path, data=data, headers=headers,
                                     method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read()
            return answer.status, (json.loads(raw) if answer.headers["Content-Type"] == "application/json" else raw)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def console():
    link, protocol = StandInLink(), OperatorProtocol()
    with ConsoleServer(link, protocol, port=0) as server:
        yield server, link, protocol
    protocol.close()


def _ask(protocol, request):
    box = {}
    ask = protocol.ask_scene if isinstance(request, SceneRequest) else protocol.ask_judgement
    thread = threading.Thread(target=lambda: box.setdefault("answer", ask(request)), daemon=True)
    thread.start()
    while protocol.request is None:
        time.sleep(0.01)
    return thread, box


def test_only_loopback_is_served():
    with pytest.raises(ConsoleError, match="loopback only"):
        ConsoleServer(StandInLink(), host="0.0.0.0", port=0)


def test_second_page_watches_and_may_stop_but_not_act(console):
    server, link, protocol = console
    status, first = _call(server, "/api/claim", {})
    assert status == 200
    status, refusal = _call(server, "/api/claim", {})
    assert status == 409 and refusal["error"] == "second_page"
    thread, box = _ask(protocol, SceneRequest("t1", "spatial", "pick"))
    status, refusal = _call(server, "/api/scene_ready", {"trial_id": "t1"}, token="someone-else")
    assert status == 403 and refusal["error"] == "not_operator" and protocol.request is not None
    status, _ = _call(server, "/api/stop", {}, token="someone-else")  # Stop works from any page
    assert status == 200 and link.calls == [("stop",)]
    status, state = _call(server, "/api/state", token=first["token"])
    assert state["operator"] and state["batch"]["pending"]["kind"] == "scene" and state["views"][0]["seq"] == 3
    assert _call(server, "/api/scene_ready", {"trial_id": "t1"}, token=first["token"])[0] == 200
    thread.join(5)
    assert box["answer"] == "console"


def test_judgements_are_validated_and_a_closed_page_loses_nothing(console):
    server, _, protocol = console
    token = _call(server, "/api/claim", {})[1]["token"]
    status, refusal = _call(server, "/api/judge", {"trial_id": "t1", "success": True}, token=token)
    assert status == 409 and refusal["error"] == "not_waiting"
    thread, box = _ask(protocol, JudgementRequest("t1", "spatial", "pick", StackVerdict(success=True)))
    for body, code in (({"trial_id": "t1", "success": False, "reason": "butterfingers"}, "unknown_reason"),
                       ({"trial_id": "t1", "success": False, "reason": "other"}, "note_required"),
                       ({"trial_id": "t2", "success": True}, "wrong_trial"),
                       ({"success": True}, "bad_request")):
        status, refusal = _call(server, "/api/judge", body, token=token)
        assert status in (400, 409) and refusal["error"] == code, (body, refusal)
    # The page closes mid-trial: its seat is freed, the question stays, a new page answers it.
    assert _call(server, "/api/release", {"token": token})[1] == {"released": True}
    assert protocol.request is not None and thread.is_alive()
    new = _call(server, "/api/claim", {})[1]["token"]
    assert _call(server, "/api/state", token=new)[1]["batch"]["pending"]["trial_id"] == "t1"
    status, answer = _call(server, "/api/judge", {"trial_id": "t1", "success": False, "reason": "dropped"}, token=new)
    assert status == 200 and answer["judgement"]["reason"] == "dropped"
    thread.join(5)
    assert box["answer"].failure == "dropped"


def test_instructions_and_requests_from_elsewhere_are_checked(console):
    server, link, protocol = console
    token = _call(server, "/api/claim", {})[1]["token"]
    assert _call(server, "/api/instruct", {"instruction": "  "}, token=token)[1]["error"] == "empty_instruction"
    # One limit for the CLI, the planner's service and the console: the core's (vlm.prompts.check_instruction).
    from robopin.vlm.prompts import MAX_INSTRUCTION_CHARS

    assert _call(server, "/api/state", token=token)[1]["limits"] == {"instruction_chars": MAX_INSTRUCTION_CHARS}
    refusal = _call(server, "/api/instruct", {"instruction": "x" * (MAX_INSTRUCTION_CHARS + 1)}, token=token)[1]
    assert refusal["error"] == "instruction_too_long" and str(MAX_INSTRUCTION_CHARS) in refusal["message"]
    longest = "x" * MAX_INSTRUCTION_CHARS
    assert _call(server, "/api/instruct", {"instruction": f"  {longest}  "}, token=token)[1]["accepted"]
    assert link.calls.pop() == ("instruct", longest, False)
    status, refusal = _call(server, "/api/stop", {}, origin="http://evil.example")
    assert status == 403 and refusal["error"] == "foreign_origin" and link.calls == []
    protocol.trial_running("t1")
    assert _call(server, "/api/instruct", {"instruction": "pick"}, token=token)[1]["error"] == "trial_running"
    protocol.trial_done({"trial_id": "t1", "task": "spatial", "success": True, "judgement": "success", "stack": "-"})
    assert _call(server, "/api/instruct", {"instruction": "pick the duck"}, token=token)[1]["accepted"]
    assert link.calls == [("instruct", "pick the duck", False)]
    assert _call(server, "/api/view/camera/static.png")[1].startswith(b"\x89PNG")
    assert _call(server, "/api/view/camera/nowhere.png")[1]["error"] == "no_view"


def test_an_idle_page_loses_the_seat():
    seat = OperatorSeat(timeout_s=0.05)
    token = seat.claim("")
    time.sleep(0.1)
    assert not seat.held and seat.claim("") != token
