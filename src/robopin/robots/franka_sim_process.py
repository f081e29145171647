"""Run franky-sim's Franka simulator (MuJoCo, the real libfranka protocol) as a child process.

For tests, benchmarks and trying the Franka backend without a robot: the server binds the first free
127.x loopback address and prints it; :class:`FrankaSimProcess` waits for that line and hands the
address to ``FrankaArmConfig(ip=...)``. A separate process keeps the simulator's 1 kHz loop off the
caller's interpreter lock.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

_ADDRESS_LINE = re.compile(r"using '([^']+)' as the robot IP")


class FrankaSimError(RuntimeError):
    """The simulator could not be started (not installed, crashed, or never printed its address)."""


class FrankaSimProcess:
    """A franky-sim server process; ``hostname`` is the address to connect to."""

    def __init__(self, startup_timeout_s: float = 120.0) -> None:
        self.startup_timeout_s = startup_timeout_s
        self.hostname: str | None = None
        self._process: subprocess.Popen[str] | None = None
        self._output: list[str] = []

    def start(self) -> FrankaSimProcess:
        env = dict(os.environ)
        env.setdefault("PYTHONWARNINGS", "ignore::RuntimeWarning")
        self._process = subprocess.Popen(
            [sys.executable, "-u", "-m", "franky_sim.run_server", "-s", "mujoco"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        found = threading.Event()
        threading.Thread(target=self._read_output, args=(found,), daemon=True, name="franky-sim-output").start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not found.wait(0.1):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise FrankaSimError("franky-sim did not report its address; output:\n" + "".join(self._output[-20:]))
        return self

    def _read_output(self, found: threading.Event) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._output.append(line)
            match = _ADDRESS_LINE.search(line)
            if match and not found.is_set():
                self.hostname = match.group(1)
                found.set()

    def stop(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10.0)

    def __enter__(self) -> FrankaSimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
