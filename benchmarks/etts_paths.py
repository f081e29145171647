"""E-TTS's decisions on both paths: through every node (``robopin trial``) and in process, trial by trial.

For each ``task@seed`` the trial runs through every node (one bring-up, the task node's E-TTS; its search
log is the trial folder's ``search.jsonl``, the messages of ``robopin/reasoning/search``) and in process
(``robopin.trials.inprocess``), both with the simulated model and E-TTS. Printed per trial and path: every
batch's traces with their verifier verdict (Sc) and the model errors drawn for them, every ⟨trace, action⟩ pair
with its scores, each selection, the chosen pair, and the verdict; then whether the two paths decided alike
(per batch: drawn errors, verdicts, selection; the chosen trace and the IDs it picks and places).
Nothing passes or fails.

Run: .venv/bin/python benchmarks/etts_paths.py spatial@6 long_horizon@1 [--system sim_xarm6]
     [--set model:=robopin] [--set verifier_error:=0.2] [--out DIR]
     .venv/bin/python benchmarks/etts_paths.py all --batch DIR --set model:=robopin --quiet   (a finished batch)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from robopin.env import REPO_ROOT
from robopin.reasoning.tts import step_log_lines
from robopin.system import load_system
from robopin.trials.inprocess import run_inprocess_trial
from robopin.trials.log import read_trial
from robopin.trials.stack_trial import SEARCH_LOG


def decisions(search: dict) -> list:
    """Per batch each trace's drawn errors and verdict and the selection's mode; the chosen trace and the IDs its
    pick and place name. Not the chosen point: the action verifier scores points on one object from depth,
    which the camera node sends in millimetres, so near ties may fall to another point of the same object."""
    chosen = search.get("chosen") or {}
    return [[[(t.get("drawn_errors"), t["reasoning_score"]) for t in b.get("traces", ())],
             (b.get("selection") or {}).get("mode")] for b in search.get("batches", ())] + [
        (chosen.get("trace"), (chosen.get("pick") or {}).get("id"), (chosen.get("place") or {}).get("id"))]


def show(title: str, entries: list[dict], verdict: str, *, quiet: bool) -> None:
    print(f"  {title}: {verdict}")
    for entry in [] if quiet else entries:
        for line in step_log_lines(entry["search"], entry["step"]):
            print(f"    {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trials", nargs="+", help="task@seed, e.g. spatial@6")
    parser.add_argument("--system", default="sim_xarm6")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:=VALUE",
                        help="system arguments (default model:=robopin; tts:=etts always)")
    parser.add_argument("--out", type=Path, help="where the node path's trial folders go (default: a temp dir)")
    parser.add_argument("--batch", type=Path, help="a finished node-path batch folder (robopin trial --out) to "
                        "compare instead of running the trials through the nodes again; with 'all', every trial")
    parser.add_argument("--quiet", action="store_true", help="only each trial's verdicts and agreement")
    args = parser.parse_args()
    arguments = {"model": "robopin"}
    arguments.update(dict(item.split(":=", 1) for item in args.set))
    arguments["tts"] = "etts"
    if args.batch is not None:
        out = args.batch
        if args.trials == ["all"]:
            args.trials = [f"{f.name.split('-', 1)[1].rsplit('-seed', 1)[0]}@{int(f.name.rsplit('seed', 1)[1])}"
                           for f in sorted(out.iterdir()) if f.is_dir() and "-seed" in f.name]
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="etts-paths-"))
        sets = [a for k, v in arguments.items() for a in ("--set", f"{k}:={v}")]
        command = [sys.executable, "-m", "robopin.cli", "trial", *args.trials, "--system", args.system, *sets,
                   "--no-console", "--no-browser", "--out", str(out)]
        print("node path:", " ".join(command[2:]), flush=True)
        subprocess.run(command, cwd=REPO_ROOT, check=False, capture_output=True)
    system = load_system(args.system)
    alike_steps = total_steps = 0
    for item in args.trials:
        task, seed = item.split("@")
        folder = next(out.glob(f"*-{task}-seed{int(seed):03d}"), None)
        print(f"\n{task}@{seed} ({system.name}):")
        node: list[dict] = []
        if folder is not None:
            summary, _ = read_trial(folder)
            log = folder / SEARCH_LOG
            node = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
            show("through the nodes", node, "no summary" if summary is None else
                 f"{'success' if summary.success else summary.failure}; errors {summary.extra.get('model_errors')}",
                 quiet=args.quiet)
        else:
            print("  through the nodes: no trial folder")
        trial = run_inprocess_trial(system, task, int(seed), {**arguments, "mode": "point"})
        show("in process", trial.search, f"{'success' if trial.success else trial.failure}; errors "
             f"{trial.model_errors}", quiet=args.quiet)
        same = [decisions(a["search"]) == decisions(b["search"]) for a, b in zip(node, trial.search, strict=False)]
        steps = max(len(node), len(trial.search))
        alike_steps, total_steps = alike_steps + sum(same), total_steps + steps
        print(f"  decided alike in {sum(same)} of {steps} step(s)"
              + ("" if all(same) and len(node) == len(trial.search) else
                 f"; first differing step {same.index(False) if False in same else min(len(node), len(trial.search))}"))
    print(f"\nall: decided alike in {alike_steps} of {total_steps} step(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
