"""The README's table of simulated models and modes, measured through every node with ``robopin trial``.

Each row is one ``robopin trial`` batch in ``<out>/<row>`` (the deployed path: camera, projection, motion planner,
arm driver and task nodes over DDS, the recorder, the safety layer; one stack per worker, the cell reset between
trials; ``--workers N`` Ray workers), judged by the simulator. Rows, the most telling first:

- ``point``: point mode, one sample: ``<model>_single`` for each ``--models``, 3 tasks × ``--seeds``;
- ``tts``: point mode with E-TTS: ``<model>_etts``, and ``<model>_etts_v02`` with the simulated verifier wrong one
  time in five (``verifier_error:=0.2``) for the erring presets;
- ``modes``: the long-horizon task in plan (RoboGPT-R1) and subtask (R^3) modes: ``lh_<mode>_<model>``, and
  ``panda_lh_<mode>`` (the oracle on the Panda) and ``heldout_<mode>`` (layout 1003, both arms).

``--resume`` (passed to every batch) continues rows already started; ``--results-only`` writes ``results.md`` from
the row folders. ``results.md`` holds, per row: success per task, executed but wrong (every step the stack decided
ran and the world check failed: ``goal_not_met``), other failures by name, the simulated model's samples and
errors drawn, the run-time reasoning measures, and the reason stage's median with the model's share of it. Nothing
passes or fails.

Run: .venv/bin/python benchmarks/batch_models.py --out DIR [--seeds 10] [--workers 2] [--rows point tts modes]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

from robopin.env import REPO_ROOT
from robopin.trials.log import TrialSummary
from robopin.trials.results import TASK_TITLES, load_summaries, model_errors, reasoning_quality, timing_summary

TASKS = ("spatial", "multi_view", "long_horizon")
ERRING = ("robopin", "without_rft")


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    scenarios: tuple[str, ...]
    systems: tuple[str, ...]
    sets: tuple[tuple[str, str], ...]
    seeds: int | None  # None: the scenarios name their seeds (task@seed)

    def command(self, out: Path, workers: int) -> list[str]:
        seeds = [] if self.seeds is None else ["--seeds", str(self.seeds)]
        systems = [a for s in self.systems for a in ("--system", s)]
        sets = [a for k, v in self.sets for a in ("--set", f"{k}:={v}")]
        return ["robopin", "trial", *self.scenarios, *seeds, *systems, *sets, "--workers", str(workers),
                "--no-console", "--out", str(out / self.name)]


def plan(rows: list[str], models: list[str], seeds: int) -> list[Row]:
    plan_ = []
    if "point" in rows:
        plan_ += [Row(f"{m}_single", TASKS, ("sim_xarm6",), (("model", m), ("tts", "single")), seeds) for m in models]
    if "tts" in rows:
        plan_ += [Row(f"{m}_etts", TASKS, ("sim_xarm6",), (("model", m), ("tts", "etts")), seeds) for m in models]
        plan_ += [Row(f"{m}_etts_v02", TASKS, ("sim_xarm6",),
                      (("model", m), ("tts", "etts"), ("verifier_error", "0.2")), seeds) for m in models if m in ERRING]
    if "modes" in rows:
        for mode in ("plan", "subtask"):
            plan_ += [Row(f"lh_{mode}_{m}", ("long_horizon",), ("sim_xarm6",), (("model", m), ("mode", mode)), seeds)
                      for m in models]
            plan_.append(Row(f"panda_lh_{mode}", ("long_horizon",), ("sim_panda",),
                             (("model", "oracle"), ("mode", mode)), seeds))
            plan_.append(Row(f"heldout_{mode}", ("long_horizon@1003",), ("sim_panda", "sim_xarm6"),
                             (("model", "oracle"), ("mode", mode)), None))
    return plan_


def _row_cells(summaries: list[TrialSummary]) -> dict[str, str]:
    cells: dict[str, str] = {}
    for task in TASKS:
        mine = [s for s in summaries if s.task == task]
        cells[task] = f"{sum(s.success for s in mine)}/{len(mine)}" if mine else "–"
    failed = [s for s in summaries if not s.success]
    cells["wrong"] = str(sum(s.failure == "goal_not_met" for s in failed))
    others = collections.Counter(s.failure for s in failed if s.failure != "goal_not_met")
    cells["others"] = ", ".join(f"`{r}` {n}" for r, n in others.most_common()) or "0"
    cells["samples"] = str(sum(int(s.extra.get("model_samples") or 0) for s in summaries))
    timing = timing_summary(summaries)
    reason, model = timing.median_s.get("reason"), timing.median_s.get("model")
    cells["reason"] = "–" if reason is None else f"{reason:.3f} s (model {model:.3f} s)"
    return cells


def results_markdown(out: Path, rows: list[Row], command: str) -> str:
    found = {row.name: load_summaries(out / row.name) for row in rows if (out / row.name).is_dir()}
    text = ["# Simulated models and modes through every node", "", f"Command: `{command}`", "",
            "Each row is one `robopin trial` batch (its folder holds its own results.md, report and bags).", "",
            "| row | system | arguments | " + " | ".join(TASK_TITLES[t] for t in TASKS)
            + " | executed but wrong | other failures, by name | model samples | reason stage median |",
            "|---" * 10 + "|"]
    for row in rows:
        summaries = found.get(row.name)
        if not summaries:
            continue
        cells = _row_cells(summaries)
        arguments = " ".join(f"{k}:={v}" for k, v in row.sets)
        text.append(f"| {row.name} | {' '.join(row.systems)} | `{arguments}` | "
                    + " | ".join(cells[t] for t in TASKS)
                    + f" | {cells['wrong']} | {cells['others']} | {cells['samples']} | {cells['reason']} |")
    # The per-row tables of results.py, with each trial's method named by its row.
    relabelled = [dataclasses.replace(s, method=name) for name, summaries in found.items() for s in summaries]
    text += ["", "## Reasoning quality at run time (every model call)", "", reasoning_quality(relabelled), "",
             "## Simulated model errors drawn", "", model_errors(relabelled), ""]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["oracle", *ERRING])
    parser.add_argument("--seeds", type=int, default=10, help="layouts 0..N-1 per task and row")
    parser.add_argument("--rows", nargs="+", choices=["point", "tts", "modes"], default=["point", "tts", "modes"])
    parser.add_argument("--workers", type=int, default=2, help="Ray workers per batch (robopin trial --workers)")
    parser.add_argument("--results-only", action="store_true", help="write results.md from the row folders")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = plan(args.rows, args.models, args.seeds)
    command = "python benchmarks/batch_models.py " + " ".join(sys.argv[1:])
    robopin = Path(sys.executable).with_name("robopin")
    if not args.results_only:
        for index, row in enumerate(rows, start=1):
            argv = row.command(out, args.workers)
            argv[0] = str(robopin)
            if (out / row.name).is_dir():
                argv.append("--resume")
            print(f"[row {index}/{len(rows)}] {row.name}: {' '.join(argv[1:])}", flush=True)
            started = time.monotonic()
            # A row whose trials fail exits 1; the table says which and why, so the batch goes on.
            code = subprocess.call(argv, cwd=REPO_ROOT)
            print(f"[row {index}/{len(rows)}] {row.name}: exit {code} after {time.monotonic() - started:.0f} s",
                  flush=True)
            (out / "results.md").write_text(results_markdown(out, rows, command), encoding="utf-8")
    (out / "results.md").write_text(results_markdown(out, rows, command), encoding="utf-8")
    print(f"results: {out / 'results.md'}")


if __name__ == "__main__":
    main()
