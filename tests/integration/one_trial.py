"""One ``robopin trial`` of a pinned layout through every node, as a user runs it, read back from its folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robopin.trials.log import TrialSummary, read_trial
from tests.process_output import output_tail

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TrialRun:
    returncode: int
    summary: TrialSummary
    judgement: dict[str, Any]
    log: str  # the command's output's tail, for assertion messages


def run_trial(out: Path, scenario: str, seed: int, system: str, *settings: str) -> TrialRun:
    """``robopin trial scenario@seed --system system --set …`` into ``out``; its summary and the judge's verdict."""
    sets = [word for setting in settings for word in ("--set", setting)]
    result = subprocess.run(
        [sys.executable, "-m", "robopin.cli", "trial", f"{scenario}@{seed}", "--system", system, *sets,
         "--out", str(out)],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = output_tail(result.stdout, result.stderr, 5000)
    folder = out / f"{system.removeprefix('sim_')}-{scenario}-seed{seed:03d}"
    summary, _ = read_trial(folder)
    assert summary is not None, f"no summary\n{log}"
    return TrialRun(result.returncode, summary, json.loads((folder / "judgement.json").read_text()), log)
