"""The console page as an operator reads it, in a real headless Chromium (screenshots kept in tmp_path).

The robot side is a stand-in link whose answers the test sets (the ROS link runs end to end in
tests/integration/test_operator_console.py); the operator protocol and the HTTP server are the real ones.
What is checked is what the page shows: a STOP no stack confirmed in red, a canceled and a failed task
named as such, the instruction box shut during a trial, the core's instruction limit, "scene ready" above
a 900 px fold, the pinned views at their own 640x480 size, and "batch complete" with the table at the end.
"""

from __future__ import annotations

import base64
import threading
import time

import pytest

from robopin.trials.console import ConsoleServer
from robopin.trials.log import encode_png
from robopin.trials.operator import OperatorProtocol, SceneRequest
from robopin.vlm.prompts import MAX_INSTRUCTION_CHARS
from tests.devtools_pipe import CHROMIUM, Chromium

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")


class SetLink:
    """A stand-in robot side: answers what the test last set."""

    def __init__(self, reasoning_png: bytes) -> None:
        self.task_state: dict = {}
        self.stop_answer = {"ok": True, "message": "STOP: arm stopped; no task was running"}
        self.reasoning_png = reasoning_png
        self.calls: list[tuple] = []

    def views(self):
        return [{"name": "static", "kind": "reasoning", "seq": 1}]

    def png(self, kind, view):
        return self.reasoning_png if (kind, view) == ("reasoning", "static") else None

    def task(self):
        return dict(self.task_state)

    def instruct(self, instruction, dry_run):
        self.calls.append(("instruct", instruction, dry_run))
        return {"accepted": True, "task_id": "beef0001", "message": "task beef0001 started"}

    def stop(self):
        self.calls.append(("stop",))
        return dict(self.stop_answer)


@pytest.fixture(scope="module")
def default_scene_views():
    """The default scene's static view (640x480) and a 640x480 reference picture, as the stack draws them."""
    from robopin.pincot import draw_trace, parse
    from robopin.sim.oracle import GroundTruthOracle
    from robopin.sim.tasks import build_scene

    with build_scene("spatial", 0, robot="panda", register=False, world_name="console-page-scene") as scene:
        oracle = GroundTruthOracle(scene, ["static", "wrist"])
        rendered = oracle.render()
        drawn = draw_trace([view.color for view in rendered], parse(oracle.write(rendered).text, 2))
    return encode_png(drawn[0]), encode_png(rendered[0].color)


def _shot(page, path):
    data = page.browser.send("Page.captureScreenshot", {"format": "png"}, session=page.session)["data"]
    path.write_bytes(base64.b64decode(data))
    return path


def _text(page, selector):
    return page.text(selector)


def test_the_page_shows_each_state_as_an_operator_reads_it(tmp_path, default_scene_views):
    reasoning_png, reference_png = default_scene_views
    reference = tmp_path / "reference.png"
    reference.write_bytes(reference_png)
    link, protocol = SetLink(reasoning_png), OperatorProtocol()
    server = ConsoleServer(link, protocol, port=0, title="robopin trial — page test").start()
    browser = Chromium(tmp_path / "profile")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        page = browser.open(server.url)
        page.wait_for("document.getElementById('seat').textContent === 'you are the operator'", 20, "the seat")
        # The pinned view at its own size: 640 px wide on the page, not shrunk to half.
        page.wait_for("(document.getElementById('view-reasoning-static') || {}).naturalWidth === 640", 20,
                      "the pinned view")
        assert page.evaluate("document.getElementById('view-reasoning-static').getBoundingClientRect().width") == 640
        # One instruction limit: the core's, served by the console.
        page.wait_for(f"document.getElementById('instruction').maxLength === {MAX_INSTRUCTION_CHARS}", 10,
                      "the instruction limit")
        assert _text(page, "#instruction-count") == f"0 / {MAX_INSTRUCTION_CHARS}"

        # STOP with no stack answering: an error, in red, saying what failed.
        link.stop_answer = {"ok": False, "message": "STOP FAILED (the arm's stop was not confirmed): arm "
                            "robopin/arm/stop is not available; the task action's cancel service is not available"}
        page.click("#stop")
        page.wait_for("document.getElementById('message').textContent.startsWith('STOP FAILED')", 10, "stop failed")
        assert page.evaluate("document.getElementById('message').className") == "error"
        assert page.evaluate("getComputedStyle(document.getElementById('message')).color") == "rgb(180, 35, 24)"
        _shot(page, shots / "1_stop_failed.png")
        link.stop_answer = {"ok": True, "message": "STOP: arm stopped; canceling task(s) abcd1234"}
        page.click("#stop")
        page.wait_for("document.getElementById('message').className === 'ok'", 10, "stop that worked")

        # A running task, then canceled: the header says canceled, not "executing (step 0)".
        link.task_state = {"stage": "executing", "step": 0, "task_id": "abcd1234", "status": "executing"}
        page.wait_for("document.getElementById('stage').textContent === 'executing (step 0)'", 10, "executing")
        assert page.evaluate("document.getElementById('send').disabled")  # one task at a time
        link.task_state = {**link.task_state, "status": "canceled",
                           "result": {"success": False, "reason": "canceled", "message": "canceled while executing"}}
        page.wait_for("document.getElementById('stage').textContent.startsWith('canceled')", 10, "canceled")
        assert "canceled while executing" in _text(page, "#detail")
        _shot(page, shots / "2_canceled.png")
        # A failed task: failed, with its named reason and message.
        link.task_state = {"stage": "validating", "step": 0, "task_id": "abcd1235", "status": "aborted",
                           "result": {"success": False, "reason": "model_declined", "message":
                                      "the model gave no target: 'the duck' fits 2 objects (duck_0, duck_1): "
                                      "say which one"}}
        page.wait_for("document.getElementById('stage').textContent === 'failed: model_declined'", 10, "failed")
        assert page.evaluate("document.getElementById('stage').className") == "error"
        assert "say which one" in _text(page, "#detail")
        assert not page.evaluate("document.getElementById('send').disabled")
        _shot(page, shots / "3_failed.png")

        # A trial's scene request: "scene ready" above a 900 px fold, the instruction box shut.
        answered = {}
        setup = tuple((f"thing {k}", f"at place {k}") for k in range(8))
        request = SceneRequest("panda-spatial-seed000", "spatial", "Pick up the duck in front of two toys and place "
                               "it to the middle plate among plates.", setup, "Two toys side by side; three plates.",
                               reference, "the static camera's view of the scene to set up")
        thread = threading.Thread(target=lambda: answered.setdefault("by", protocol.ask_scene(request)), daemon=True)
        thread.start()
        page.wait_for("!document.getElementById('scene').hidden && "
                      "document.getElementById('scene-reference').naturalWidth > 0", 20, "the scene request")
        page.evaluate("window.scrollTo(0, 0)")
        bottom = page.evaluate("document.getElementById('scene-ready').getBoundingClientRect().bottom")
        assert bottom < 900, f"'scene ready' ends {bottom} px down the page"
        assert page.evaluate("document.getElementById('instruction').disabled")
        assert "trial" in _text(page, "#instruction-why")
        _shot(page, shots / "4_scene_request.png")
        page.click("#scene-ready")
        thread.join(10)
        assert answered["by"] == "console"
        assert page.evaluate("document.getElementById('instruction').disabled")  # the trial runs
        protocol.trial_done({"trial_id": "panda-spatial-seed000", "task": "spatial", "success": True,
                             "judgement": "success", "stack": "success"})
        page.wait_for("!document.getElementById('instruction').disabled", 10, "the box open again between trials")

        # The batch ends: its server closes; the page says so and keeps the table.
        protocol.close()
        closer = threading.Thread(target=server.close, daemon=True)
        closer.start()
        page.wait_for("document.getElementById('batch-end').textContent.startsWith('batch complete')", 10,
                      "batch complete")
        closer.join(10)
        time.sleep(1.5)  # several polling periods after the server has gone
        message = _text(page, "#message")
        assert "does not answer" not in message and "batch complete: 1 trial(s) judged" in message, message
        assert page.evaluate("!!document.getElementById('row-panda-spatial-seed000')")
        assert page.evaluate("document.getElementById('instruction').disabled")
        _shot(page, shots / "5_batch_complete.png")
    finally:
        browser.close()
        protocol.close()
        if server._thread is not None and server._thread.is_alive():
            server.close()
    assert sorted(p.name for p in shots.iterdir()) == ["1_stop_failed.png", "2_canceled.png", "3_failed.png",
                                                      "4_scene_request.png", "5_batch_complete.png"]
    assert all(p.stat().st_size > 10_000 for p in shots.iterdir())
