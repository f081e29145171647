"""A batch runs a sim system's trials on one stack, the cell reset between them, and each trial goes as it goes on a
stack brought up for it alone (``--fresh-stack``): the same verdict, the same simulated model errors drawn, the same
E-TTS decisions, its own bag.

The second trial is the one that shows it: before it, the stack ran another layout, so its model backend, E-TTS's
seed (the layout's), the frames the task node takes, the motion planner's cloud and the arm all carry over unless
the reset tells each node the boundary. Spatial layout 6 with the erring ``robopin`` preset and E-TTS draws model
errors (tests/integration/test_etts_through_the_nodes.py), so a backend or seed that carried over shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robopin.bags import TrialBag
from robopin.trials.log import read_trial
from robopin.trials.stack_trial import SEARCH_LOG
from tests.process_output import output_tail

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TRIALS = ("spatial@5", "spatial@6")
SETS = ("--set", "model:=robopin", "--set", "tts:=etts")


def _batch(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "robopin.cli", "trial", *TRIALS, "--system", "sim_xarm6", *SETS, "--out", str(out),
         *extra],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip


def _decisions(folder: Path) -> list:
    """Per step: each batch's traces (drawn errors, verifier score) and selection, and the chosen pick and place."""
    steps = [json.loads(line)["search"] for line in (folder / SEARCH_LOG).read_text().splitlines()]
    return [([[(t["drawn_errors"], t["reasoning_score"]) for t in b["traces"]] for b in s["batches"]],
             (s["chosen"] or {}).get("trace")) for s in steps]


def test_trials_on_one_reset_stack_go_as_on_a_fresh_stack_each(tmp_path):
    reused, fresh = tmp_path / "reused", tmp_path / "fresh"
    result = _batch(reused)
    log = output_tail(result.stdout, result.stderr, 6000)
    assert "scene reset: spatial seed 6" in result.stdout + result.stderr, log
    assert (result.stdout + result.stderr).count("started task_node") == 1, log  # brought up once
    again = _batch(fresh, "--fresh-stack")
    log_fresh = output_tail(again.stdout, again.stderr, 3000)
    assert (again.stdout + again.stderr).count("started task_node") == 2, log_fresh
    for trial in ("xarm6-spatial-seed005", "xarm6-spatial-seed006"):
        mine, _ = read_trial(reused / trial)
        theirs, _ = read_trial(fresh / trial)
        assert mine is not None and theirs is not None, (trial, log, log_fresh)
        assert (mine.success, mine.failure) == (theirs.success, theirs.failure), (trial, mine.extra, theirs.extra)
        assert mine.extra["seed"] == theirs.extra["seed"] == int(trial[-3:])
        assert mine.extra.get("model_errors") == theirs.extra.get("model_errors"), (trial, mine.extra, theirs.extra)
        assert mine.extra.get("model_samples") == theirs.extra.get("model_samples"), trial
        assert _decisions(reused / trial) == _decisions(fresh / trial), trial
        stack = json.loads((reused / trial / "stack.json").read_text())
        assert stack["world_detail"] == json.loads((fresh / trial / "stack.json").read_text())["world_detail"]
        with TrialBag(reused / trial / mine.bag) as bag:  # its own bag: this task's reasoning steps, no other's
            assert bag.topics["/robopin/reasoning"].count == mine.steps, (trial, mine.steps)
    assert read_trial(fresh / "xarm6-spatial-seed006")[0].extra.get("model_errors"), "layout 6 drew no model error"
