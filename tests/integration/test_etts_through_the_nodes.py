"""E-TTS through every node on the layouts that once ran a wrong object (issue #38), against the in-process path.

Through the nodes, ``tts:=etts`` on the simulated model ``robopin`` (RoboPIN's measured error rates) picked and
placed the other duck on spatial layout 6 and picked a brick already on its plate on long-horizon layout 1,
while the in-process trials (benchmarks/batch_models.py) succeeded on both: unseeded, E-TTS on the node path
drew other model errors (and explored from the OS), the simulated verifier judged the history with the trace,
and a rejected batch could be explored or run. Each trial must not execute a wrong answer, and spatial
layout 6 must draw the same model errors as in process.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robopin.reasoning.tts import step_log_lines
from robopin.sim.model_errors import error_kind
from robopin.trials.log import read_trial
from robopin.trials.stack_trial import SEARCH_LOG

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARGUMENTS = {"model": "robopin", "tts": "etts"}
TRIALS = {"spatial": 6, "long_horizon": 1}


def test_etts_runs_no_wrong_object_through_the_nodes_and_draws_as_in_process(tmp_path):
    from robopin.system import load_system
    from robopin.trials.inprocess import run_inprocess_trial

    out = tmp_path / "trials"
    sets = [a for k, v in ARGUMENTS.items() for a in ("--set", f"{k}:={v}")]
    result = subprocess.run(
        [sys.executable, "-m", "robopin.cli", "trial", *(f"{t}@{s}" for t, s in TRIALS.items()),
         "--system", "sim_xarm6", *sets, "--out", str(out)],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    log = result.stdout[-6000:] + result.stderr[-4000:]
    summaries = {}
    for task, seed in TRIALS.items():
        summary, _ = read_trial(out / f"xarm6-{task}-seed{seed:03d}")
        assert summary is not None, f"{task}@{seed}: no summary\n{log}"
        assert summary.failure != "goal_not_met", f"{task}@{seed} executed a wrong answer: {summary.extra}\n{log}"
        assert "E-TTS" in summary.method, summary.method
        summaries[task] = summary
    inprocess = run_inprocess_trial(load_system("sim_xarm6"), "spatial", 6, {**ARGUMENTS, "mode": "point"})
    assert summaries["spatial"].extra["model_errors"] == inprocess.model_errors, (summaries["spatial"].extra, log)
    assert summaries["spatial"].success and inprocess.success, (summaries["spatial"].extra, inprocess)
    # Both paths log every candidate: the traces with their drawn errors and verdicts, the selection, the
    # choice. Where the model drew alike, E-TTS must have decided alike.
    for task, seed in TRIALS.items():
        assert (out / f"xarm6-{task}-seed{seed:03d}" / SEARCH_LOG).is_file(), task
    node = [json.loads(line) for line in (out / "xarm6-spatial-seed006" / SEARCH_LOG).read_text().splitlines()]
    assert [_decisions(e["search"]) for e in node] == [_decisions(e["search"]) for e in inprocess.search], (
        node, inprocess.search)
    drawn = [n for e in node for b in e["search"]["batches"] for t in b["traces"] for n in t["drawn_errors"]]
    assert collections.Counter(error_kind(n) for n in drawn) == inprocess.model_errors, drawn
    last = node[-1]["search"]
    assert step_log_lines(last, 0)[-1].startswith(f"step 0: {last['stop_reason']} after {len(last['batches'])} batch")


def _decisions(search: dict) -> list:
    """What E-TTS decided in a step: per batch each trace's drawn errors and verdict and the selection's mode; the
    chosen trace and the IDs its pick and place name (the point on the object is scored from depth, which reaches
    the nodes in millimetres: a near tie may pick another point of the same object)."""
    chosen = search["chosen"] or {}
    return [[[(t["drawn_errors"], t["reasoning_score"]) for t in b["traces"]], b["selection"]["mode"]]
            for b in search["batches"]] + [
        (chosen.get("trace"), (chosen.get("pick") or {}).get("id"), (chosen.get("place") or {}).get("id"))]


def test_etts_draws_as_in_process_when_the_verifier_errs(tmp_path):
    """Spatial layout 7 with the simulated verifier wrong one time in five draws the same samples, model errors and
    verdict through the nodes as in process: E-TTS's seeded draws depend on step, batch and trace only, so the
    depth under a pin (a candidate more or less, slightly different between the paths) cannot move a later
    request's seed."""
    from robopin.system import load_system
    from robopin.trials.inprocess import run_inprocess_trial

    arguments = {**ARGUMENTS, "verifier_error": "0.2"}
    out = tmp_path / "trials"
    sets = [a for k, v in arguments.items() for a in ("--set", f"{k}:={v}")]
    result = subprocess.run(
        [sys.executable, "-m", "robopin.cli", "trial", "spatial@7", "--system", "sim_xarm6", *sets, "--out", str(out)],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = result.stdout[-6000:] + result.stderr[-4000:]
    summary, _ = read_trial(out / "xarm6-spatial-seed007")
    assert summary is not None, f"no summary\n{log}"
    inprocess = run_inprocess_trial(load_system("sim_xarm6"), "spatial", 7, {**arguments, "mode": "point"})
    assert summary.extra["model_samples"] == inprocess.samples, (summary.extra, inprocess)
    assert summary.extra["model_errors"] == inprocess.model_errors, (summary.extra, inprocess)
    assert summary.success == inprocess.success, (summary.extra, inprocess)
