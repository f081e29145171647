"""``robopin trial --out``: one folder holds one batch, so results.md counts only that batch's trials.

Real commands in processes of their own on the simulated Panda workcell: ``make demo``'s ``robopin up --demo``
writes its trial under trials/demo, as a user's earlier runs would be; a batch asked into that folder is refused
(naming --resume) before any stack starts, and a batch in a folder of its own counts exactly its trials.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robopin.trials.results import load_summaries

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _robopin(*args: str, cwd: Path, timeout_s: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robopin.cli", *args], cwd=cwd, env=dict(os.environ),
                          capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)


def test_a_batch_into_a_folder_holding_other_trials_is_refused_and_counts_only_its_own(tmp_path):
    demo = tmp_path / "trials" / "demo"
    made = _robopin("up", str(ROOT / "config" / "sim_panda.yaml"), "--demo", "--out", str(demo), cwd=tmp_path)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    (earlier,) = load_summaries(demo)

    start = time.monotonic()
    refused = _robopin("trial", "spatial@0", "--system", "sim_panda", "--out", str(demo), cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    assert f"robopin trial: {demo} already holds 1 trial(s) (" in refused.stderr, refused.stderr
    assert "--resume" in refused.stderr and "another --out" in refused.stderr
    assert time.monotonic() - start < 120, "refused only after starting a stack"
    assert [s.trial_id for s in load_summaries(demo)] == [earlier.trial_id]  # nothing was run or written
    assert not (demo / "results.md").exists()

    batch = tmp_path / "trials" / "batch"
    ran = _robopin("trial", "spatial@0", "--system", "sim_panda", "--out", str(batch), cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    (summary,) = load_summaries(batch)
    assert summary.trial_id == "panda-spatial-seed000"
    results = (batch / "results.md").read_text()
    assert "| 1/1 |" in results, results
