"""The operator console in a real headless Chromium, driving a judged batch of the real ``robopin trial``.

``robopin trial spatial --seeds 2 --judge operator`` runs in its own process on the simulated workcell
with every node (the oracle stands in for the VLM: no GPU here). The test is the operator: it opens
the console the batch serves, watches the camera views update, is refused from a second page, says
"scene ready", judges the first trial (after a refused judgement), and stops the second trial's moving
arm with the page's Stop button, checking over /joint_states that the arm then stands still.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from robopin.trials.judging import read_judgement, read_stack_verdict
from robopin.trials.log import read_trial
from tests.devtools_pipe import CHROMIUM, Chromium

pytestmark = [pytest.mark.ros, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")]

ROOT = Path(__file__).resolve().parents[2]


def _visible(selector: str) -> str:
    return f"(() => {{ const e = document.querySelector('{selector}'); return !!e && !e.hidden; }})()"


def _system_with_running_physics(tmp_path: Path) -> Path:
    # sim_panda steps physics only while the arm executes a trajectory (real_time_factor 0), so a stopped
    # arm there is frozen by construction. A real arm's physics never pauses: run the world in real
    # time so "the arm stands still after Stop" is something the test can see fail.
    data = yaml.safe_load((ROOT / "config" / "sim_panda.yaml").read_text())
    data["sim"]["real_time_factor"] = 1.0
    path = tmp_path / "sim_panda_running.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class _JointWatch:
    """Every /joint_states message the arm driver publishes, as (receive time, positions, velocities)."""

    def __init__(self, context) -> None:
        from sensor_msgs.msg import JointState

        from tests.ros.rostest_utils import SpunNode

        self.samples: list[tuple[float, np.ndarray, np.ndarray]] = []
        self._lock = threading.Lock()
        self.spun = SpunNode("test_joint_watch", context)
        self.spun.node.create_subscription(JointState, "/joint_states", self._on_state, 50)

    def _on_state(self, msg) -> None:
        with self._lock:
            self.samples.append((time.monotonic(), np.array(msg.position), np.array(msg.velocity)))

    def since(self, t0: float) -> list[tuple[float, np.ndarray, np.ndarray]]:
        with self._lock:
            return [s for s in self.samples if s[0] >= t0]

    def moving(self) -> bool:
        recent = self.since(time.monotonic() - 0.5)
        return bool(recent) and float(np.max(np.abs(recent[-1][2]))) > 0.05


def test_console_drives_a_judged_batch_and_stops_a_moving_arm(tmp_path, ros_context):
    out = tmp_path / "batch"
    process = subprocess.Popen(
        [sys.executable, "-m", "robopin.cli", "trial", "spatial", "--seeds", "2", "--system",
         str(_system_with_running_physics(tmp_path)), "--judge", "operator", "--console-port", "0", "--no-browser",
         "--out", str(out)],
        cwd=ROOT, env=dict(os.environ), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    watch = _JointWatch(ros_context)
    browser = None

    def log() -> str:
        return "".join(lines[-60:])

    try:
        deadline = time.monotonic() + 300
        while not any("operator console at" in line for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "no console URL:\n" + log()
            time.sleep(0.2)
        url = re.search(r"http://127\.0\.0\.1:\d+/", "".join(lines)).group(0)
        browser = Chromium(tmp_path / "profile")
        page = browser.open(url)

        # Trial 1: the scene to set up, in words and as a picture, while the views update.
        page.wait_for(_visible("#scene") + " && document.getElementById('scene-trial').textContent"
                      ".startsWith('panda-spatial-seed000')", 300, "the first scene request\n" + log())
        assert page.evaluate("document.querySelectorAll('#scene-setup li').length") >= 5  # toys, ducks, plates
        assert "duck" in page.text("#scene-setup")
        page.wait_for("document.getElementById('scene-reference').naturalWidth > 0", 30, "the reference picture")
        first = int(page.wait_for("Number((document.getElementById('view-camera-static') || {dataset: {}})"
                                  ".dataset.seq || 0)", 60, "a static camera image"))
        page.wait_for(f"Number(document.getElementById('view-camera-static').dataset.seq) > {first}", 60,
                      "the static view to update")

        # A second page may watch, not act; the trial keeps waiting.
        second = browser.open(url)
        second.wait_for("document.getElementById('message').textContent.includes('another operator page')", 20,
                        "the second page to be told")
        second.wait_for(_visible("#scene"), 20, "the second page to show the scene request")
        second.click("#scene-ready")
        second.wait_for("document.getElementById('message').textContent.includes('does not hold the operator')",
                        20, "the second page's scene-ready refused")
        second.close()
        assert page.evaluate(_visible("#scene"))

        page.click("#scene-ready")
        page.wait_for(_visible("#judge") + " && document.getElementById('judge-trial').textContent"
                      ".startsWith('panda-spatial-seed000')", 900, "the first judgement request\n" + log())
        assert page.evaluate("!!document.getElementById('view-reasoning-static')"), "no annotated view appeared"
        assert page.text("#judge-stack") == "success"
        # A failure without a reason, and 'other' without a note, are refused, and nothing is judged.
        page.click("#failure")
        page.wait_for("document.getElementById('message').textContent.includes('a failure needs a reason')", 20,
                      "the refusal of a failure without a reason")
        page.evaluate("document.getElementById('reason').value = 'other'")
        page.click("#failure")
        page.wait_for("document.getElementById('message').textContent.includes('needs a note')", 20,
                      "the refusal of 'other' without a note")
        assert page.evaluate(_visible("#judge")) and read_judgement(out / "panda-spatial-seed000") is None
        page.click("#success")
        page.wait_for("!!document.getElementById('row-panda-spatial-seed000')", 60, "the batch table row")

        # Trial 2: stop the arm while it moves.
        page.wait_for(_visible("#scene") + " && document.getElementById('scene-trial').textContent"
                      ".startsWith('panda-spatial-seed001')", 300, "the second scene request\n" + log())
        page.click("#scene-ready")
        page.wait_for("document.getElementById('stage').textContent.startsWith('executing')", 900,
                      "the second trial to execute\n" + log())
        deadline = time.monotonic() + 120
        while not watch.moving():
            assert time.monotonic() < deadline, "the arm never moved\n" + log()
            time.sleep(0.02)
        page.click("#stop")
        page.wait_for("document.getElementById('message').textContent.startsWith('STOP: arm stopped')", 30,
                      "the stop answer")
        assert "canceling task(s)" in page.text("#message"), page.text("#message")
        time.sleep(1.0)  # let the arm come to rest under its hold
        still_from = time.monotonic()
        time.sleep(2.0)
        held = watch.since(still_from)
        assert len(held) > 10, "no joint states while holding"
        drift = max(float(np.max(np.abs(q - held[0][1]))) for _, q, _ in held)
        speed = max(float(np.max(np.abs(v))) for _, _, v in held)
        assert drift < 1e-3, f"the arm moved {drift:.4f} rad after Stop"
        assert speed < 1e-3, f"the arm reports {speed:.4f} rad/s after Stop"

        page.wait_for(_visible("#judge") + " && document.getElementById('judge-trial').textContent"
                      ".startsWith('panda-spatial-seed001')", 300, "the second judgement request\n" + log())
        page.evaluate("document.getElementById('reason').value = 'safety_stop'")
        page.type_into("#note", "stopped from the console")
        page.click("#failure")
        assert process.wait(timeout=300) == 0, log()
    finally:
        if browser is not None:
            browser.close()
        watch.spun.close()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    summary, _ = read_trial(out / "panda-spatial-seed000")
    assert summary.success and summary.extra["judgement"]["source"] == "console"
    summary, _ = read_trial(out / "panda-spatial-seed001")
    assert summary.failure == "safety_stop" and summary.extra["judgement"]["note"] == "stopped from the console"
    stack, _ = read_stack_verdict(out / "panda-spatial-seed001")
    assert not stack.success and stack.failure == "canceled", stack
    assert (out / "panda-spatial-seed001" / "views" / "initial_static.png").is_file()
    results = (out / "results.md").read_text()
    assert "| Spatial | 1/2 |" in results and "`safety_stop`" in results
