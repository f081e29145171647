"""Run franky-sim's Franka simulator (MuJoCo, the real libfranka protocol) as a child process.

For tests and benchmarks (it ships in no package): the server binds the first free
127.x loopback address and prints it; :class:`FrankaSimProcess` waits for that line and hands the
address to ``FrankaArmConfig(ip=...)``. A separate process keeps the simulator's 1 kHz loop off the
caller's interpreter lock.

franky-sim simulates no safety reactions (its error recovery always succeeds and it never aborts a
motion). The child here adds the two a user meets, driven from :meth:`FrankaSimProcess.inject_reflex`
and :meth:`FrankaSimProcess.user_stop`, in the robot's own protocol terms (libfranka
``include/franka/robot_state.h``, ``src/robot_impl.cpp``; research_interface Move / AutomaticErrorRecovery
statuses as franky-sim declares them): a reflex aborts the running Move with ``kReflexAborted``, brakes
to a hold, reports ``robot_mode`` Reflex with the reflex in ``current_errors`` while braking and in
``last_motion_errors`` (reflex_reason) afterwards, and refuses motions until automatic error recovery;
a user stop aborts with ``kEmergencyAborted``, reports UserStopped and refuses motions and recovery
until it is released.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time

_ADDRESS_LINE = re.compile(r"using '(?P<address>[^']+)' as the robot IP")


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
            # By path: the child's __main__ imports only franky_sim, from wherever the parent was started.
            [sys.executable, "-u", __file__],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
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
                self.hostname = match["address"]
                found.set()

    def _send(self, line: str) -> None:
        process = self._process
        if process is None or process.stdin is None or process.poll() is not None:
            raise FrankaSimError("franky-sim is not running")
        process.stdin.write(line + "\n")
        process.stdin.flush()

    def inject_reflex(self) -> None:
        """Trigger a Cartesian reflex (as after a collision): the running motion aborts, the robot brakes."""
        self._send("reflex")

    def user_stop(self, pressed: bool = True) -> None:
        """Press (or release) the user stop (external activation device / e-stop)."""
        self._send("user_stop" if pressed else "release")

    def stop(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
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


# ----- the child process -------------------------------------------------------------------------------

_CARTESIAN_REFLEX = 7  # index of cartesian_reflex in libfranka's 41 error flags (include/franka/errors.h)
_BRAKE_S = 0.2  # the reflex stays in current_errors while the robot brakes, then only in reflex_reason


def _serve() -> None:  # pragma: no cover - runs in the child process
    import logging

    from franky_sim import SimulationServer
    from franky_sim.franka_robot_protocol import (
        AutomaticErrorRecoveryCommand,
        AutomaticErrorRecoveryStatus,
        BaseCommand,
        MoveCommand,
        MoveStatus,
        RobotCommand,
        RobotMode,
    )
    from franky_sim.franka_robot_server import FrankaRobotServer
    from franky_sim.mujoco_simulator import MujocoSimulator

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("numba").setLevel(logging.WARNING)

    class SafetyServer(FrankaRobotServer):
        """franky-sim's robot server plus the reflex and user-stop reactions of the real robot."""

        def __init__(self, robot, hostname_candidates) -> None:
            super().__init__(robot, hostname_candidates)
            self.reflex = False
            self.user_stopped = False
            self.reflex_since = 0.0
            self.pending: list[str] = []
            self._lock = threading.Lock()
            # franky-sim keeps its command table private; ours replaces the two handlers that must know
            # about safety reactions.
            table = self._FrankaServer__command_class_map  # type: ignore[attr-defined]
            table[RobotCommand.kMove] = GuardedMove
            table[RobotCommand.kAutomaticErrorRecovery] = GuardedRecovery

        def request(self, event: str) -> None:
            with self._lock:
                self.pending.append(event)

        def _abort(self, status) -> None:
            motion_id = self.current_motion_id
            self.stop_motion(send_preemption_signal=False)
            self._FrankaRobotServer__holding_q = tuple(self.robot.state.q)  # type: ignore[attr-defined]
            if motion_id:
                BaseCommand.send_response(self._tcp_socket, RobotCommand.kMove, motion_id, status)
                self.reset_current_motion_id()

        def _pre_process_commands(self) -> None:
            super()._pre_process_commands()
            with self._lock:
                events, self.pending = self.pending, []
            for event in events:
                if event == "reflex":
                    self.reflex, self.reflex_since = True, time.monotonic()
                    self._abort(MoveStatus.kReflexAborted)
                elif event == "user_stop":
                    self.user_stopped = True
                    self._abort(MoveStatus.kEmergencyAborted)
                elif event == "release":
                    self.user_stopped = False

        @property
        def robot_state(self):
            state = super().robot_state
            flags = tuple(i == _CARTESIAN_REFLEX for i in range(41))
            if self.user_stopped:
                return state.replace(robot_mode=RobotMode.kUserStopped)
            if self.reflex:
                braking = time.monotonic() - self.reflex_since < _BRAKE_S
                return state.replace(
                    robot_mode=RobotMode.kReflex, errors=flags if braking else (False,) * 41, reflex_reason=flags
                )
            return state

    class GuardedMove(MoveCommand):
        def handle(self, server) -> None:
            if server.user_stopped or server.reflex:
                self.reply(MoveStatus.kCommandNotPossibleRejected)  # "not possible in the current mode"
                return
            super().handle(server)

    class GuardedRecovery(AutomaticErrorRecoveryCommand):
        def handle(self, server) -> None:
            if server.user_stopped:
                self.reply(AutomaticErrorRecoveryStatus.kCommandNotPossibleRejected)
                return
            server.reflex = False
            self.reply(AutomaticErrorRecoveryStatus.kSuccess)

    class SafetySimulationServer(SimulationServer):
        def init(self) -> None:
            for robot in self.sim.robots:
                server = SafetyServer(robot, self._remaining_hostname_candidates)
                server.init()
                self.robot_servers.append(server)
            self.sim.start()

    with MujocoSimulator(enable_visualization=False) as sim:
        robot = sim.add_robot()
        with SafetySimulationServer(sim) as server:

            def read_commands() -> None:
                for line in sys.stdin:
                    for robot_server in server.robot_servers:
                        robot_server.request(line.strip())
                server.running = False  # the parent closed our stdin: shut down

            threading.Thread(target=read_commands, daemon=True, name="franka-sim-commands").start()
            print(f"Connect to the server using '{robot.hostname}' as the robot IP address", flush=True)
            server.run_forever()


if __name__ == "__main__":
    _serve()
