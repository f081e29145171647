"""``robopin trial --judge operator --judge-file``: the operator's judgement counts, not the simulator's.

The real command line in its own process on the simulated Panda workcell with every node (the oracle
stands in for the VLM), the scripted operator answering from a YAML file as a person would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robopin.trials.judging import read_stack_verdict
from robopin.trials.log import read_trial
from tests.process_output import output_tail

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _robopin(*args: str, timeout_s: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robopin.cli", *args], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)


def test_operator_judgements_make_the_table_even_where_the_simulator_saw_success(tmp_path):
    judge = tmp_path / "judge.yaml"
    judge.write_text("[success, failure: grasp_failed]\n")
    out = tmp_path / "batch"
    result = _robopin("trial", "spatial", "--seeds", "2", "--system", "sim_panda", "--judge", "operator",
                      "--judge-file", str(judge), "--out", str(out))
    log = output_tail(result.stdout, result.stderr, 5000)
    assert result.returncode == 0, log
    first, _ = read_trial(out / "panda-spatial-seed000")
    second, _ = read_trial(out / "panda-spatial-seed001")
    assert first.success and not second.success and second.failure == "grasp_failed", log
    for folder in ("panda-spatial-seed000", "panda-spatial-seed001"):
        stack, _ = read_stack_verdict(out / folder)
        # The stack and the simulator's world check both said success; the operator's word counts.
        assert stack.success and stack.world_success, (folder, stack)
        judgement = json.loads((out / folder / "judgement.json").read_text())
        assert judgement["judge"] == "operator" and judgement["source"].startswith("judge file judge.yaml")
        assert (out / folder / "views" / "initial_static.png").is_file()
    results = (out / "results.md").read_text()
    assert "| Spatial | 1/2 |" in results and "`grasp_failed` 1" in results, results
    assert "| Spatial | oracle / panda | 2 | 1/2 | 0 | 1 |" in results, results  # operator vs stack
    assert "grasp_failed" in (out / "report.html").read_text()


def test_a_refused_judgement_keeps_the_trial_and_resume_asks_again_without_rerunning(tmp_path):
    out = tmp_path / "batch"
    bad = tmp_path / "bad.yaml"
    bad.write_text("- refused\n")  # the stack did not refuse this trial: not a judgement to take
    result = _robopin("trial", "spatial@0", "--judge", "operator", "--judge-file", str(bad), "--out", str(out))
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "the stack reported success" in result.stderr and "--resume" in result.stderr
    folder = out / "panda-spatial-seed000"
    summary, steps = read_trial(folder)
    stack, _ = read_stack_verdict(folder)
    assert summary is None and steps and stack.success  # the run is kept, waiting for its judgement
    good = tmp_path / "good.yaml"
    good.write_text("- {failure: wrong_place, note: on the left plate}\n")
    again = _robopin("trial", "spatial@0", "--judge", "operator", "--judge-file", str(good), "--out", str(out),
                     "--resume", timeout_s=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "asking again" in again.stdout and "started task_node" not in again.stdout + again.stderr
    summary, _ = read_trial(folder)
    assert summary.failure == "wrong_place" and summary.extra["task_id"] == stack.task_id
    assert read_stack_verdict(folder)[0] == stack


def test_bad_judging_options_are_refused_before_anything_runs(tmp_path):
    judge = tmp_path / "judge.yaml"
    judge.write_text("- {failure: butterfingers}\n")
    result = _robopin("trial", "spatial@0", "--judge-file", str(judge), "--out", str(tmp_path / "a"))
    assert result.returncode == 2 and "unknown failure reason 'butterfingers'" in result.stderr, result.stderr
    judge.write_text("- success\n")
    result = _robopin("trial", "spatial", "--seeds", "2", "--judge-file", str(judge), "--out", str(tmp_path / "b"))
    assert result.returncode == 2 and "1 judgement(s) for 2 trial(s)" in result.stderr, result.stderr
    result = _robopin("trial", "spatial@0", "--judge", "sim", "--judge-file", str(judge), "--out", str(tmp_path / "c"))
    assert result.returncode == 2 and "needs --judge operator" in result.stderr, result.stderr
    result = _robopin("trial", "spatial@0", "--system", "real_xarm6", "--judge", "sim", "--out", str(tmp_path / "d"))
    assert result.returncode == 2 and "only an operator can judge it" in result.stderr, result.stderr
    assert not [path for name in "abcd" for path in (tmp_path / name).glob("*/summary.json")]


def test_the_terminal_flow_judges_a_trial_headless(tmp_path):
    out = tmp_path / "batch"
    process = subprocess.Popen([sys.executable, "-m", "robopin.cli", "trial", "spatial@0", "--judge", "operator",
                                "--no-console", "--out", str(out)], cwd=ROOT, env=dict(os.environ),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []

    def until(text: str) -> None:
        for line in process.stdout:
            seen.append(line)
            if text in line:
                return
        raise AssertionError(f"never saw {text!r}:\n" + "".join(seen[-40:]))

    try:
        until("press Enter when the scene is ready")
        assert any("duck" in line for line in seen), "the scene was not described"
        process.stdin.write("\n")
        process.stdin.flush()
        until("type 'success' or a failure reason")
        process.stdin.write("wobbly\n")
        process.stdin.flush()
        until("not taken: ")
        process.stdin.write("dropped slipped on the way\n")
        process.stdin.flush()
        rest, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, "".join(seen[-40:]) + (rest or "")
    summary, _ = read_trial(out / "panda-spatial-seed000")
    judgement = summary.extra["judgement"]
    assert summary.failure == "dropped" and judgement["note"] == "slipped on the way"
    assert judgement["source"] == "terminal"
