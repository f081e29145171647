"""``robopin trial … --workers N`` runs the batch on Ray actors, each with its own ROS domain, world and stack: the
same verdicts as the batch in one process, a local Ray listening on loopback only, a worker killed mid-trial has its
trial run again, and ``--ray-address`` runs the workers on a cluster started with ``ray start --head``.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from robopin.distributed import LOCAL_RAY_ENV
from robopin.trials.log import read_trial
from tests.process_output import output_tail

# Each worker brings up a whole stack: beside two CPU hogs a killed worker's replacement took 6 min to bring up and run
# its trial, and the batch 10 min. Each test bounds its own waits (600 s to see a motion, 900 s for the batch);
# the suite's 600 s per-test timeout (thread method) would end the whole run instead of failing one test.
pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")


def _trial(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "robopin.cli", "trial", *args], cwd=ROOT,
                            env=env or dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _verdicts(out: Path, trials: list[str]) -> dict[str, tuple]:
    found = {}
    for trial in trials:
        summary, _ = read_trial(out / trial)
        assert summary is not None, f"{trial} not judged under {out}"
        found[trial] = (summary.success, summary.failure, summary.extra.get("seed"))
    return found


def _listening(pid: int) -> set[str]:
    """The addresses the process tree of ``pid`` listens on (TCP)."""
    addresses = set()
    try:
        processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return addresses
    for process in processes:
        try:
            addresses |= {c.laddr.ip for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return addresses


def test_two_local_workers_judge_as_the_batch_in_one_process_and_listen_on_loopback_only(tmp_path):
    trials = [f"panda-spatial-seed{s:03d}" for s in range(3)]
    one = _trial("spatial", "--seeds", "3", "--system", "sim_panda", "--out", str(tmp_path / "one"))
    out_one, err_one = one.communicate(timeout=900)
    assert one.returncode == 0, out_one[-3000:] + err_one[-3000:]
    two = _trial("spatial", "--seeds", "3", "--system", "sim_panda", "--workers", "2", "--out", str(tmp_path / "two"))
    addresses: set[str] = set()
    deadline = time.monotonic() + 900
    while two.poll() is None and time.monotonic() < deadline:  # sample what Ray's processes listen on meanwhile
        addresses |= _listening(two.pid)
        time.sleep(0.5)
    out_two, err_two = two.communicate(timeout=60)
    log = out_two[-4000:] + err_two[-4000:]
    assert two.returncode == 0, log
    assert addresses and addresses <= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}, addresses  # found, on loopback
    assert _verdicts(tmp_path / "one", trials) == _verdicts(tmp_path / "two", trials)
    assert {"[worker 0]", "[worker 1]"} <= set(re.findall(r"\[worker \d\]", out_two)), log  # both took trials
    domains = {re.search(r"ROS_DOMAIN_ID=(\d+)", (tmp_path / "two" / "workers" / f"worker-{i}.log").read_text())[1]
               for i in (0, 1)}
    assert len(domains) == 2 and os.environ["ROS_DOMAIN_ID"] not in domains, domains  # a domain of its own each
    assert (tmp_path / "two" / "results.md").is_file()


def test_a_worker_killed_mid_trial_has_its_trial_run_again_on_a_new_worker(tmp_path):
    out = tmp_path / "batch"
    batch = _trial("spatial", "--seeds", "2", "--system", "sim_panda", "--workers", "2", "--out", str(out))
    log0 = out / "workers" / "worker-0.log"
    deadline, killed = time.monotonic() + 600, None
    while time.monotonic() < deadline and batch.poll() is None and killed is None:
        text = log0.read_text(errors="replace") if log0.is_file() else ""
        if "executing" in text:  # the task's motion has started: the worst moment
            killed = int(re.search(r"worker 0 \(pid (\d+)", text)[1])
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.2)
    stdout, stderr = batch.communicate(timeout=900)
    log = output_tail(stdout, stderr)
    assert killed is not None, log
    assert batch.returncode == 0, log
    assert re.search(r"worker 0 died running panda-spatial-seed00\d .*running it again on a new worker", stderr), log
    assert "[worker 2]" in stdout, log  # the replacement ran it
    for seed in (0, 1):
        summary, _ = read_trial(out / f"panda-spatial-seed{seed:03d}")
        assert summary is not None and summary.success, (seed, log)
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == psutil.STATUS_ZOMBIE


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_ray_address_runs_the_workers_on_a_cluster_started_with_ray_start(tmp_path):
    port = _free_port()
    # A cluster of its own token (Ray's token authentication, as `ray start` sets up), on loopback.
    env = {**os.environ, **LOCAL_RAY_ENV, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    head = subprocess.Popen([str(RAY), "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                             "--block"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        seen = []
        for line in head.stdout:  # up once it says so (then it blocks, printing nothing more)
            seen.append(line)
            if "Ray runtime started" in line:
                break
        assert head.poll() is None, "".join(seen)
        out = tmp_path / "batch"
        batch = _trial("spatial@0", "--system", "sim_panda", "--ray-address", f"127.0.0.1:{port}", "--out", str(out),
                       env=env)
        stdout, stderr = batch.communicate(timeout=900)
        log = output_tail(stdout, stderr)
        assert batch.returncode == 0, log
        assert f"cluster 127.0.0.1:{port}" in stdout, log
        summary, _ = read_trial(out / "panda-spatial-seed000")
        assert summary is not None and summary.success, log
        assert head.poll() is None, "the cluster went down with the batch"
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)


def test_ctrl_c_on_a_batch_piped_to_tee_stops_every_worker_and_resume_finishes_it(tmp_path):
    """Ctrl-C at the worst moment (a worker's arm moving) to ``robopin trial --workers 2 … 2>&1 | tee``: the whole
    foreground group gets SIGINT, tee ends with it, so the batch's stop message meets a closed pipe. The batch must
    still stop as Ctrl-C stops it (exit 130, no worker or Ray process left, nothing finished lost), and ``--resume``
    must finish it."""
    out, rc = tmp_path / "batch", tmp_path / "rc"
    command = (f"{sys.executable} -m robopin.cli trial spatial --seeds 2 --system sim_panda --workers 2 "
               f"--out {out} 2>&1 | tee {tmp_path / 'tee.log'}")
    # A trap with a command (not '') leaves the pipeline's SIGINT at its default; the shell outlives it to write
    # the batch's own exit status.
    script = f"trap 'true' INT; {command}; echo ${{PIPESTATUS[0]}} > {rc}"
    # A shell cannot undo a SIGINT ignored when it started (POSIX), as it is under a backgrounded test run: the
    # dispositions are reset before bash is executed (Python ignores SIGPIPE too), as a terminal's group has them.
    default_int = ("import os, signal, sys\n"
                   "for number in (signal.SIGINT, signal.SIGPIPE):\n"
                   "    signal.signal(number, signal.SIG_DFL)\n"
                   "os.execvp('bash', ['bash', *sys.argv[1:]])")
    shell = subprocess.Popen([sys.executable, "-c", default_int, "-c", script], cwd=ROOT, env=dict(os.environ),
                             start_new_session=True)
    logs = [out / "workers" / f"worker-{i}.log" for i in (0, 1)]
    deadline, tree = time.monotonic() + 600, []
    while time.monotonic() < deadline and shell.poll() is None:
        if any("executing" in log.read_text(errors="replace") for log in logs if log.is_file()):
            tree = psutil.Process(shell.pid).children(recursive=True)  # the batch, tee, Ray and its workers
            os.killpg(shell.pid, signal.SIGINT)
            break
        time.sleep(0.2)
    assert tree, "no worker started executing"
    shell.wait(timeout=300)
    tee_log = (tmp_path / "tee.log").read_text(errors="replace")
    assert rc.read_text().strip() == "130", tee_log[-3000:]
    time.sleep(2)  # Ray's last processes exit a moment after the driver
    left = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [(p.pid, p.name()) for p in left]
    again = _trial("spatial", "--seeds", "2", "--system", "sim_panda", "--workers", "2", "--out", str(out), "--resume")
    stdout, stderr = again.communicate(timeout=900)
    assert again.returncode == 0, output_tail(stdout, stderr, 3000)
    for seed in (0, 1):
        summary, _ = read_trial(out / f"panda-spatial-seed{seed:03d}")
        assert summary is not None and summary.success, (seed, stdout[-3000:])


def test_sigterm_to_a_batch_stops_it_as_ctrl_c_does(tmp_path):
    """SIGTERM to the batch process alone (a scheduler's stop, ``timeout``, ``kill``) while a worker's arm moves: the
    batch stops as Ctrl-C stops it (finished trials kept, the stop message, every worker and Ray process gone) and
    exits 128 + 15."""
    out = tmp_path / "batch"
    batch = subprocess.Popen([sys.executable, "-m", "robopin.cli", "trial", "spatial", "--seeds", "2", "--system",
                              "sim_panda", "--workers", "2", "--out", str(out)], cwd=ROOT, env=dict(os.environ),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    logs = [out / "workers" / f"worker-{i}.log" for i in (0, 1)]
    deadline, tree = time.monotonic() + 600, []
    while time.monotonic() < deadline and batch.poll() is None:
        if any("executing" in log.read_text(errors="replace") for log in logs if log.is_file()):
            tree = psutil.Process(batch.pid).children(recursive=True)  # Ray and its workers
            batch.send_signal(signal.SIGTERM)
            break
        time.sleep(0.2)
    assert tree, "no worker started executing"
    stdout, stderr = batch.communicate(timeout=300)
    assert batch.returncode == 128 + signal.SIGTERM, output_tail(stdout, stderr, 3000)
    assert "stopped; finished trials are kept" in stderr, stderr[-3000:]
    time.sleep(2)  # Ray's last processes exit a moment after the driver
    left = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [(p.pid, p.name()) for p in left]
