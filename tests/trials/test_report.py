"""Trial log and report: JSON lines round trip, success table, an HTML page (images linked as files beside it)
opened in headless chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse

import numpy as np
import pytest

from robopin.trials import TrialLog, TrialLogError, TrialStep, TrialSummary, build_report, read_trial, write_report
from robopin.trials.log import encode_png, read_png, write_png

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_png_round_trip(tmp_path):
    image = np.random.default_rng(0).integers(0, 255, (7, 5, 3), dtype=np.uint8)
    np.testing.assert_array_equal(read_png(write_png(tmp_path / "a.png", image)), image)
    fast = tmp_path / "fast.png"
    fast.write_bytes(encode_png(image, level=1))
    np.testing.assert_array_equal(read_png(fast), image)
    with pytest.raises(TrialLogError, match="HxWx3 uint8"):
        encode_png(image.astype(np.float32))


def test_trial_log_round_trip_and_refusals(tmp_path):
    log = TrialLog(tmp_path, "t1")
    step = TrialStep(step=0, instruction="pick", raw_output="<think>x</think>", durations_s={"reason": 0.5},
                     errors=["depth_hole: no depth"])
    log.add_step(step)
    log.finish(TrialSummary("t1", "sanity", "oracle", success=False, failure="depth_hole", steps=1))
    summary, steps = read_trial(tmp_path / "t1")
    assert summary.failure == "depth_hole" and steps == [step]
    with pytest.raises(TrialLogError, match="already has its summary"):
        log.add_step(step)
    with pytest.raises(TrialLogError, match="without a named failure"):
        TrialSummary("t2", "sanity", "oracle", success=False)
    with pytest.raises(TrialLogError, match="unknown stage"):
        TrialStep(step=0, instruction="", durations_s={"dream": 1.0})


def _failed_trial(root, trial_id, method):
    log = TrialLog(root, trial_id)
    rgb = np.zeros((48, 64, 3), np.uint8)
    log.add_step(TrialStep(step=0, instruction="pick the cube", views={"static": log.save_view(0, "static", rgb)},
                           raw_output="no tags at all", errors=["missing_think: no <think> block"],
                           durations_s={"observe": 0.1, "reason": 1.0}))
    log.finish(TrialSummary(trial_id, "sanity_cube", method, success=False, failure="invalid_reasoning", steps=1))


def test_report_counts_successes_per_task_and_method(sim_trial, tmp_path):
    _, _, root, _ = sim_trial
    _failed_trial(root, "trial-001", "ground-truth-oracle")
    _failed_trial(root, "trial-002", "other-model")
    page, facts = build_report(root)
    table = facts["table"]["sanity_cube"]
    assert table["oracle"] == {"successes": 1, "trials": 1}
    assert table["ground-truth-oracle"] == {"successes": 0, "trials": 1}
    assert "failure: invalid_reasoning" in page and "data:image" not in page
    assert "<svg" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")  # needs no server
    links = re.findall(r"<img src='([^']+)'", page)
    assert links and all((root / urllib.parse.unquote(link)).is_file() for link in links)
    assert any("drawn_step000_static.png" in link for link in links)  # the anchors drawn, as a file


def test_a_report_rewritten_after_each_trial_draws_each_trials_views_once(sim_trial):
    _, _, root, _ = sim_trial
    _failed_trial(root, "trial-101", "ground-truth-oracle")
    write_report(root)
    drawn = sorted(root.rglob("drawn_step*.png"))
    stamps = {path: path.stat().st_mtime_ns for path in drawn}
    _failed_trial(root, "trial-102", "other-model")
    write_report(root)
    assert all(path.stat().st_mtime_ns == stamp for path, stamp in stamps.items())  # earlier trials: not redrawn
    assert len(list(root.rglob("drawn_step*.png"))) > len(drawn)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (apt-get install chromium)")
def test_report_opens_in_headless_chromium(sim_trial, tmp_path):
    _, _, root, _ = sim_trial
    html_path, json_path = write_report(root, tmp_path / "report.html")
    assert json.loads(json_path.read_text())["trials"]
    shot = tmp_path / "shot.png"
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1600", f"--screenshot={shot}",
         html_path.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), result.stderr[-2000:]
    with shot.open("rb") as stream:
        assert stream.read(8) == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page with images, not a blank canvas
