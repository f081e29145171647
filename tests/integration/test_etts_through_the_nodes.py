"""E-TTS through every node with the erring simulated model ``robopin`` (RoboPIN's measured error rates).

Spatial layout 6 and long-horizon layout 1 draw answers on the wrong object: with a verifier that never errs no
trace whose answer is wrong may be chosen, and every error the trial counts is one its search log shows drawn for a
trace. With the verifier erring, a layout draws the same whatever ran on the stack before it.
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
from tests.process_output import output_tail

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARGUMENTS = {"model": "robopin", "tts": "etts"}
TRIALS = {"spatial": 6, "long_horizon": 1}


def _batch(out: Path, trials, arguments, *extra: str) -> subprocess.CompletedProcess:
    sets = [a for k, v in arguments.items() for a in ("--set", f"{k}:={v}")]
    return subprocess.run(
        [sys.executable, "-m", "robopin.cli", "trial", *trials, "--system", "sim_xarm6", *sets, "--out", str(out),
         *extra],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=1500,
    )  # fmt: skip


def _search(folder: Path) -> list[dict]:
    return [json.loads(line)["search"] for line in (folder / SEARCH_LOG).read_text().splitlines()]


def test_etts_runs_no_wrong_object_through_the_nodes(tmp_path):
    out = tmp_path / "trials"
    result = _batch(out, [f"{t}@{s}" for t, s in TRIALS.items()], ARGUMENTS)
    log = output_tail(result.stdout, result.stderr, 5000)
    for task, seed in TRIALS.items():
        folder = out / f"xarm6-{task}-seed{seed:03d}"
        summary, _ = read_trial(folder)
        assert summary is not None, f"{task}@{seed}: no summary\n{log}"
        assert summary.failure != "goal_not_met", f"{task}@{seed} executed a wrong answer: {summary.extra}\n{log}"
        assert "E-TTS" in summary.method, summary.method
        steps = _search(folder)
        assert steps, f"{task}@{seed}: empty search log"
        drawn = []
        for search in steps:
            traces = [t for b in search["batches"] for t in b.get("traces", ())]
            drawn += [n for t in traces for n in t["drawn_errors"] or ()]
            chosen = search["chosen"]
            if chosen is None:
                continue
            trace = next(t for t in traces if t["trace"] == chosen["trace"])
            # The verifier never errs here: the chosen trace is one it accepted, and none with a wrong answer is.
            assert trace["reasoning_score"] >= 0.5, (task, search)
            assert "answer_error" not in {error_kind(n) for n in trace["drawn_errors"] or ()}, (task, search)
        assert collections.Counter(error_kind(n) for n in drawn) == summary.extra["model_errors"], (task, drawn)
        assert step_log_lines(steps[-1], 0)[-1].startswith(f"step 0: {steps[-1]['stop_reason']} after")
    spatial, _ = read_trial(out / "xarm6-spatial-seed006")
    assert spatial.success and sum(spatial.extra["model_errors"].values()) > 0, spatial.extra  # it drew errors


def _decisions(steps: list[dict]) -> list:
    """What E-TTS decided in a step: per batch each trace's drawn errors and verdict and the selection's mode; the
    chosen trace and the IDs its pick and place name (the point on the object is scored from depth: a near tie may
    pick another point of the same object)."""
    decided = []
    for search in steps:
        chosen = search["chosen"] or {}
        decided.append([[[(t["drawn_errors"], t["reasoning_score"]) for t in b["traces"]], b["selection"]["mode"]]
                        for b in search["batches"]] + [
            (chosen.get("trace"), (chosen.get("pick") or {}).get("id"), (chosen.get("place") or {}).get("id"))])
    return decided


def test_etts_draws_the_same_whatever_ran_before_when_the_verifier_errs(tmp_path):
    """Spatial layout 7 with the simulated verifier wrong one time in five draws the same samples, model errors,
    decisions and verdict on a stack that has just run layout 6 as on a stack brought up for it: E-TTS's seeded
    draws depend on the layout, step, batch and trace only, so neither an earlier trial nor the depth under a pin
    (a candidate more or less) can move a later request's seed."""
    arguments = {**ARGUMENTS, "verifier_error": "0.2"}
    after, alone = tmp_path / "after", tmp_path / "alone"
    first = _batch(after, ["spatial@6", "spatial@7"], arguments)
    second = _batch(alone, ["spatial@7"], arguments)
    log = "".join(output_tail(r.stdout, r.stderr, 3000) for r in (first, second))
    runs = [read_trial(folder / "xarm6-spatial-seed007")[0] for folder in (after, alone)]
    assert None not in runs, log
    mine, theirs = runs
    for key in ("model_samples", "model_errors"):
        assert mine.extra.get(key) == theirs.extra.get(key), (key, mine.extra, theirs.extra)
    assert (mine.success, mine.failure) == (theirs.success, theirs.failure), (mine.extra, theirs.extra)
    assert _decisions(_search(after / "xarm6-spatial-seed007")) == _decisions(_search(alone / "xarm6-spatial-seed007"))
    assert theirs.extra["model_samples"] > 0, theirs.extra


def test_a_step_etts_refuses_keeps_its_search_and_its_step_in_the_trial_folder(tmp_path):
    """Spatial layout 4 with ``without_rft`` and the verifier wrong one time in five: the verifier says no to every
    trace of four batches and E-TTS refuses the step (``tts_rejected``). The refused step is recorded as any other:
    its search (every batch, the refusal) in ``search.jsonl`` and its best trace in ``steps.jsonl`` with the
    refusal as its error, so an operator reads why from the trial folder and the bag."""
    arguments = {"model": "without_rft", "tts": "etts", "verifier_error": "0.2"}
    out = tmp_path / "trials"
    result = _batch(out, ["spatial@4"], arguments)
    log = output_tail(result.stdout, result.stderr, 5000)
    folder = out / "xarm6-spatial-seed004"
    summary, _ = read_trial(folder)
    assert summary is not None, log
    assert summary.failure == "tts_rejected", (summary.extra, log)
    [search] = _search(folder)
    assert search["refusal"].startswith("tts_rejected: the verifier rejected the reasoning of every trace"), search
    assert search["chosen"] is None and search["batches"], search
    assert {b["selection"]["mode"] for b in search["batches"]} == {"rejected"}, search
    assert all(t["reasoning_score"] < 0.5 for b in search["batches"] for t in b["traces"]), search
    assert step_log_lines(search, 0)[-1].endswith(f"; refused {search['refusal']}")
    steps = [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == 1 and steps[0]["raw_output"], steps
    assert any("tts_rejected" in str(error) for error in steps[0]["errors"]), steps[0]["errors"]
