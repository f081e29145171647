"""Soak: many consecutive tasks on one running stack, as an operator drives it; memory, descriptors, bags.

``robopin up <system>`` runs in a process of its own (every node in it, the recorder in a child process, as
a user runs it), in a scratch folder (its bags land in ``trials/bags`` there), on a ROS domain of its own.
Then ``--tasks`` times, one ``robopin instruct`` process per task (the scenario's instruction; with the
oracle the duck is picked and placed again where it now lies), and after each task the resident memory
(``VmRSS``) and the open file descriptors of the stack process and the recorder process are read from
/proc. Printed: each process's memory and descriptors at task ``--baseline`` and at the last task and
their ratio (the growth; the baseline is this run's own), every task's outcome by exit code and reason,
and how many of the bags the recorder closed open and read to the end with robopin.bags.TrialBag.
Nothing passes or fails.

``--trials``: the same over a trial batch instead (``robopin trial spatial multi_view long_horizon`` on one stack,
the simulated cell reset to the next layout between trials, every trial judged by the simulator): the batch
process (every node in it) and its children (the recorder, the render worker) are read after each trial ends;
printed as above, plus how many trials were judged and how many of their bags read to the end.

Run: .venv/bin/python benchmarks/bench_soak.py [--tasks 100] [--baseline 10] [--system sim_panda] [--trials]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from robopin.env import REPO_ROOT

ROBOPIN = [sys.executable, "-m", "robopin.cli"]


def _process_figures(pid: int) -> tuple[float, int]:
    """Resident memory (MiB) and open file descriptors of ``pid`` (from /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kib = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)[1])
    return rss_kib / 1024.0, len(os.listdir(f"/proc/{pid}/fd"))


def _children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        found.extend(int(child) for child in children)
    return found


def _scenario_instruction(system: Path) -> str:
    """The instruction of the system file's task: its own, else its scenario's (what ``robopin up --demo`` sends)."""
    from robopin.sim.tasks.spec import load_scenario
    from robopin.system import load_system

    loaded = load_system(system, {})
    return loaded.task.instruction or load_scenario(loaded.sim.scenario).instruction


def _readable(bag: Path) -> bool:
    from robopin.bags.reader import TrialBag

    try:
        with TrialBag(bag) as opened:
            for _message in opened.messages():
                pass
        return True
    except Exception:  # a bag that cannot be read to its end is what this counts
        return False


def _label(pid: int) -> str:
    """A child process named by what it runs (the recorder, the render worker), as its command line says."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"child {pid}"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    for marker, name in (("recorder", "recorder"), ("render", "render worker"), ("multiprocessing", "worker")):
        if marker in text:
            return f"{name} {pid}"
    return f"child {pid} ({text[:60]})"


def _stop(process: subprocess.Popen, log, timeout_s: float) -> None:
    """Ctrl-C to the stack or batch, as an operator stops it; killed if it does not end in ``timeout_s``."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


def _print_growth(samples: dict[str, list[tuple[float, int]]], base: int, unit: str) -> None:
    """Each process's memory and descriptors at reading ``base`` and at the last, and their ratio (the growth)."""
    for name, series in samples.items():
        if len(series) <= base:
            print(f"{name}: {len(series)} reading(s) only (a process that did not live through the run)")
            continue
        (rss0, fd0), (rss1, fd1) = series[base], series[-1]
        print(f"{name}: resident {rss0:.0f} MiB at {unit} {base + 1} -> {rss1:.0f} MiB at {unit} {len(series)} "
              f"(x{rss1 / rss0:.3f}); descriptors {fd0} -> {fd1} (x{fd1 / fd0:.3f}); "
              f"max {max(s[0] for s in series):.0f} MiB")


def _trial_soak(args, env: dict[str, str], scratch: Path) -> int:
    """``--tasks`` trials of one batch on one stack; figures read as each trial's judgement is written."""
    from robopin.stats import summarize

    seeds = -(-args.tasks // 3)  # three tasks per seed
    out = scratch / "trials"
    command = [*ROBOPIN, "trial", "spatial", "multi_view", "long_horizon", "--seeds", str(seeds), "--system",
               args.system, "--no-console", "--out", str(out)]
    log = (scratch / "trial.log").open("w")
    started = time.monotonic()
    batch = subprocess.Popen(command, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT)
    samples: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    judged_at: list[float] = []
    try:
        while batch.poll() is None and len(judged_at) < args.tasks:
            judged = len(list(out.glob("*/judgement.json"))) if out.is_dir() else 0
            if judged > len(judged_at):
                judged_at += [time.monotonic()] * (judged - len(judged_at))
                processes = {"batch": batch.pid}
                processes.update({_label(pid): pid for pid in _children(batch.pid)})
                for name, pid in processes.items():
                    with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a child that just ended
                        samples[name].append(_process_figures(pid))
                if judged % 10 == 0 or judged == 1:
                    figures = ", ".join(f"{n} {s[-1][0]:.0f} MiB {s[-1][1]} fds" for n, s in samples.items() if s)
                    print(f"trial {judged}: {time.monotonic() - started:.0f} s; {figures}", flush=True)
            time.sleep(0.2)
    finally:
        _stop(batch, log, 120)
    from robopin.trials.log import read_trial

    folders = sorted(p.parent for p in out.glob("*/summary.json"))
    judged = sum((f / "judgement.json").is_file() for f in folders)
    successes = sum(bool(read_trial(f)[0].success) for f in folders)
    bags = [f / read_trial(f)[0].bag for f in folders if read_trial(f)[0].bag]
    readable = sum(_readable(bag) for bag in bags)
    gaps = summarize([b - a for a, b in itertools.pairwise(judged_at)]) if len(judged_at) > 1 else None
    print(f"\n{len(folders)} trials on one stack in {time.monotonic() - started:.0f} s; judged {judged}, "
          f"succeeded {successes}" + (f"; trial time median {gaps.median:.2f} s, p95 {gaps.p95:.2f} s" if gaps else ""))
    base = min(args.baseline, len(judged_at)) - 1
    _print_growth(samples, base, "trial")
    print(f"bags: {readable}/{len(bags)} read to their end; batch exit {batch.returncode}; log {scratch / 'trial.log'}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--baseline", type=int, default=10, help="the task whose figures growth is measured from")
    parser.add_argument("--system", default="sim_panda")
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0")) or 152)
    parser.add_argument("--trials", action="store_true", help="soak a trial batch on one stack (robopin trial)")
    args = parser.parse_args()
    system = REPO_ROOT / "config" / f"{args.system}.yaml"
    env = {**os.environ, "ROS_DOMAIN_ID": str(args.domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "PYTHONUNBUFFERED": "1"}
    scratch = Path(tempfile.mkdtemp(prefix="robopin-soak-"))
    if args.trials:
        return _trial_soak(args, env, scratch)
    started = time.monotonic()
    log = (scratch / "up.log").open("w")
    up = subprocess.Popen([*ROBOPIN, "up", str(system), "--ready-timeout", "300"], cwd=scratch, env=env,
                          stdout=subprocess.PIPE, stderr=log, text=True)
    for line in up.stdout:
        if line.strip() == "ready":
            break
    else:
        print(f"the stack exited before it was ready; see {scratch / 'up.log'}")
        return 1
    print(f"stack ready in {time.monotonic() - started:.1f} s (pid {up.pid}); scratch folder {scratch}")
    recorder = next(iter(_children(up.pid)), None)
    processes = {"stack": up.pid, **({"recorder": recorder} if recorder else {})}
    samples: dict[str, list[tuple[float, int]]] = {name: [] for name in processes}
    outcomes: collections.Counter[str] = collections.Counter()
    task_s = []
    instruction = _scenario_instruction(system)
    try:
        for index in range(1, args.tasks + 1):
            task_started = time.monotonic()
            command = [*ROBOPIN, "instruct", instruction, "--timeout", "600"]
            done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=900)
            task_s.append(time.monotonic() - task_started)
            reason = re.search(r"reason[:=]\s*([a-z_]+)", done.stdout + done.stderr)
            outcomes[f"exit {done.returncode}" + (f" ({reason[1]})" if done.returncode and reason else "")] += 1
            for name, pid in processes.items():
                samples[name].append(_process_figures(pid))
            if index % 10 == 0 or index == 1:
                figures = ", ".join(f"{name} {s[-1][0]:.0f} MiB {s[-1][1]} fds" for name, s in samples.items())
                print(f"task {index}/{args.tasks}: exit {done.returncode} in {task_s[-1]:.1f} s; {figures}",
                      flush=True)
    finally:
        _stop(up, log, 60)
    from robopin.stats import summarize

    base = min(args.baseline, len(task_s)) - 1
    times = summarize(task_s)
    print(f"\n{len(task_s)} tasks on one stack; task time median {times.median:.2f} s, p95 {times.p95:.2f} s, "
          f"max {times.max:.2f} s")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    _print_growth(samples, base, "task")
    bags = sorted(p for p in (scratch / "trials" / "bags").glob("*") if p.is_dir())
    readable = sum(_readable(bag) for bag in bags)
    print(f"bags: {readable}/{len(bags)} read to their end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
