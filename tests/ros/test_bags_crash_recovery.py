"""A stack killed mid-motion leaves a bag that ``robopin bag recover`` makes readable, or a closed one.

The real command line runs the demo (simulated Panda, every node, the recorder at its shipped
``flush_interval_s``) in its own process, and ``robopin up`` runs the recorder in a child process. A crash
(both SIGKILLed once the arm is executing) leaves the bag the recorder was writing unclosed: it is recovered
and the test measures how much of the run it lost. ``robopin up`` alone SIGKILLed: its recorder sees it go,
closes the bag as on SIGTERM and exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from robopin.bags import BagNotFoundError, TrialBag

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = ROOT / "config" / "sim_panda.yaml"


def _recorder_process(parent: int) -> int:
    """The pid of the recorder process robopin up ``parent`` started."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
        if ppid == parent and "robopin_ros.recorder_node" in cmdline:
            return int(entry.name)
    raise AssertionError(f"robopin up (pid {parent}) has no recorder child process")


def _demo_until_executing(tmp_path: Path):
    process = subprocess.Popen([sys.executable, "-m", "robopin.cli", "up", str(SYSTEM), "--demo", "--out",
                                str(tmp_path / "demo")], cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    executing = threading.Event()

    def read() -> None:
        for line in process.stdout:
            output.append(line)
            if "executing" in line:
                executing.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert executing.wait(240), "the arm never started executing:\n" + "".join(output)[-4000:]
    # The recorder, a process of its own, opens the task's bag when it takes the task's first feedback or status
    # from DDS; on a loaded machine that can come after the arm starts moving. A crash before it loses the task
    # whole, so the crash comes once the bag exists (the event, not a margin on the wall clock).
    executing_at = time.monotonic()
    bags = tmp_path / "trials" / "bags"
    while not any(bags.glob("task-*")):
        assert time.monotonic() < executing_at + 120, "the recorder never opened the task's bag:\n" + \
            "".join(output)[-4000:]
        time.sleep(0.02)
    print(f"the task's bag opened {time.monotonic() - executing_at:.2f} s after 'executing'")
    # Mid-motion: the flat-out simulated pick-and-place executes in about a second on an idle machine.
    time.sleep(0.3)
    ended = process.poll() is not None or any(": SUCCESS" in line or " done" in line for line in output)
    assert not ended, "the task ended before it could be killed:\n" + "".join(output)[-4000:]
    return process, reader, output


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_bag_of_a_killed_stack_is_recovered_losing_at_most_the_flush_interval(tmp_path, capsys):
    from robopin.cli import main

    flush_interval_s = yaml.safe_load(SYSTEM.read_text())["nodes"]["recorder_node"]["parameters"]["flush_interval_s"]
    process, reader, _output = _demo_until_executing(tmp_path)
    try:
        recorder = _recorder_process(process.pid)
        killed_ns = time.time_ns()
        os.kill(recorder, signal.SIGKILL)  # a crash takes every process at once
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        assert _gone(recorder, 10)
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(timeout=10)
    (bag,) = sorted((tmp_path / "trials" / "bags").glob("task-*"))
    assert not (bag / "metadata.yaml").exists()  # the recorder never closed it
    with pytest.raises(BagNotFoundError):
        TrialBag(bag)
    assert main(["bag", "recover", str(bag)]) == 0
    assert "recovered" in capsys.readouterr().out and bag.with_name(bag.name + ".damaged").is_dir()
    assert main(["bag", "info", str(bag)]) == 0
    info = capsys.readouterr().out
    assert "/tf_static" in info and "/robopin/reasoning" in info and "/joint_states" in info
    with TrialBag(bag) as recovered:
        for message in recovered.messages():
            recovered.decode(message)  # every recovered message decodes with rosbags
        last_ns = recovered.end_ns
        feedback = recovered.topics["/robopin/motion/pick_place/_action/feedback"].count
    lost_s = (killed_ns - last_ns) * 1e-9
    print(f"killed {lost_s:.3f} s after the last recovered message (flush interval {flush_interval_s} s)")
    assert feedback > 0, "nothing of the motion was recovered"
    # The recorder closes a chunk every flush_interval_s, on its writer thread, which waits for the CPU on a
    # loaded machine (2 cores running physics, renders and every node): it may close it up to that much later.
    assert lost_s <= flush_interval_s + 2.0


def test_a_killed_robopin_up_leaves_its_recorder_to_close_the_bag_and_exit(tmp_path):
    process, reader, _output = _demo_until_executing(tmp_path)
    try:
        recorder = _recorder_process(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        # runtime.stop_with_parent: the recorder hears its parent go and stops as on SIGTERM, within its own
        # exit watchdog (SHUTDOWN_EXIT_S, 10 s).
        assert _gone(recorder, 20), "the recorder outlived the robopin up that started it"
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(timeout=10)
    (bag,) = sorted((tmp_path / "trials" / "bags").glob("task-*"))
    assert (bag / "metadata.yaml").is_file(), "the recorder did not close the bag"
    with TrialBag(bag) as closed:
        assert closed.topics["/robopin/motion/pick_place/_action/feedback"].count > 0
        assert "/tf_static" in closed.topics and "/joint_states" in closed.topics
