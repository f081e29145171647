"""Stop means stop: every way a user stops a task, measured from the stop request to the arm at rest.

The real command line in processes of its own, as a user runs it in two shells: ``robopin up`` on the
simulated Panda stack (shipped ``config/sim_panda.yaml`` with physics paced to real time, as a real arm
moves, see ``_real_time_system``; nothing mocked; the oracle stands in for a VLM because no GPU is here)
and ``robopin instruct`` / ``robopin cancel`` against it. The arm is watched on
``/joint_states`` from this process: "at rest" means positions unchanged (1 mrad) and reported
velocities near zero (0.02 rad/s) from that moment on. Each test prints its figure; none asserts a time
tighter than the bound the code promises (``SHUTDOWN_EXIT_S``) plus slack for a loaded 2-core machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = ROOT / "config" / "sim_panda.yaml"
STILL_POSITION_RAD = 1e-3
STILL_VELOCITY_RAD_S = 0.02


# Every client a test starts, ended when the test ends however it ends (see _no_task_outlives_its_test).
_CLIENTS: list[_Process | _Pipeline] = []


class _Process:
    """A robopin command in its own process, its output collected line by line."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.popen = subprocess.Popen([sys.executable, "-m", "robopin.cli", *args], cwd=cwd, env=dict(os.environ),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if args[0] != "up":
            _CLIENTS.append(self)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_line(self, predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(predicate(line) for line in list(self.lines)):
            assert self.popen.poll() is None or any(predicate(line) for line in list(self.lines)), \
                f"exited ({self.popen.returncode}) before {what}:\n{self.output[-4000:]}"
            assert time.monotonic() < deadline, f"no {what} within {timeout_s} s:\n{self.output[-4000:]}"
            time.sleep(0.05)

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.popen.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
            self.popen.kill()
            self.popen.wait()
            self._reader.join(timeout=5)
            pytest.fail(f"still running after {timeout_s} s:\n{self.output[-6000:]}")
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    stop = kill


class _ArmWatcher:
    """Every /joint_states message with its arrival time (monotonic), from a node in this process."""

    def __init__(self, context) -> None:
        from action_msgs.msg import GoalStatusArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import qos_profile_action_status_default
        from sensor_msgs.msg import JointState

        self.samples: list[tuple[float, np.ndarray, np.ndarray]] = []
        self._lock = threading.Lock()
        self.goals: dict[bytes, list[tuple[float, int]]] = {}  # goal id -> (arrival, status) as reported
        self.node = Node("stop_test_arm_watcher", context=context)
        self.node.create_subscription(JointState, "/joint_states", self._on_state, 50)
        self.node.create_subscription(GoalStatusArray, "/robopin/execute_task/_action/status", self._on_status,
                                      qos_profile_action_status_default)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _on_state(self, msg) -> None:
        names = [n for n in msg.name if "finger" not in n]
        index = [list(msg.name).index(n) for n in names]
        q = np.array([msg.position[i] for i in index])
        v = np.array([msg.velocity[i] for i in index]) if len(msg.velocity) == len(msg.name) else np.zeros(len(q))
        with self._lock:
            self.samples.append((time.monotonic(), q, v))

    def _on_status(self, msg) -> None:
        now = time.monotonic()
        with self._lock:
            for status in msg.status_list:
                seen = self.goals.setdefault(bytes(status.goal_info.goal_id.uuid), [])
                if not seen or seen[-1][1] != status.status:
                    seen.append((now, status.status))

    def last_status(self, goal: bytes) -> int | None:
        """The goal's last reported status (None if never reported)."""
        with self._lock:
            seen = self.goals.get(goal)
        return seen[-1][1] if seen else None

    def running_goals(self) -> list[bytes]:
        """Goals whose last reported status is accepted, executing or canceling."""
        with self._lock:
            return [goal for goal, seen in self.goals.items() if seen[-1][1] in (1, 2, 3)]

    def goal_ended(self, after_s: float, timeout_s: float = 30.0) -> tuple[int, float]:
        """The final status (4 succeeded, 5 canceled, 6 aborted) of the task that started after ``after_s``, and
        when it was reported (monotonic)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                started = [seen for seen in self.goals.values() if seen[0][0] >= after_s]
            if len(started) == 1 and started[0][-1][1] in (4, 5, 6):
                return started[0][-1][1], started[0][-1][0]
            assert len(started) <= 1, f"more than one task started: {started}"
            assert time.monotonic() < deadline, f"no task ended within {timeout_s} s: {started}"
            time.sleep(0.02)

    def moving_at(self, t_s: float, window_s: float = 1.0) -> bool:
        """Whether the arm moved in the ``window_s`` before ``t_s``."""
        with self._lock:
            window = [(t, q, v) for t, q, v in self.samples if t_s - window_s <= t <= t_s]
        if len(window) < 2:
            return False
        spread = np.max(np.abs(window[-1][1] - window[0][1]))
        return bool(spread > 5 * STILL_POSITION_RAD or max(np.max(np.abs(v)) for _, _, v in window) > 0.05)

    def still_after(self, t0_s: float, observe_s: float = 2.0, min_rest_s: float = 0.5,
                    timeout_s: float = 30.0) -> float:
        """Seconds from ``t0_s`` to the moment from which the arm stayed at rest (for ``min_rest_s`` at least).

        Looks from ``observe_s`` after ``t0_s`` on, for up to ``timeout_s`` (a starved machine publishes late);
        ``observe_s`` 0: judge the samples there are now (a stack that exited publishes nothing more).
        """
        time.sleep(max(0.0, t0_s + observe_s - time.monotonic()))
        deadline = time.monotonic() + (timeout_s if observe_s > 0 else 0.0)
        while True:
            with self._lock:
                after = [(t, q, v) for t, q, v in self.samples if t >= t0_s]
            rest_from = None
            if after:
                final = after[-1][1]
                for t, q, v in reversed(after):
                    if np.max(np.abs(q - final)) > STILL_POSITION_RAD or np.max(np.abs(v)) > STILL_VELOCITY_RAD_S:
                        break
                    rest_from = t
            enough = len(after) > (10 if observe_s > 0 else 3)
            if enough and rest_from is not None and rest_from <= after[-1][0] - min_rest_s:
                return rest_from - t0_s
            assert time.monotonic() < deadline, (
                f"the arm is not at rest: {len(after)} joint states after the stop, at rest since "
                f"{'never' if rest_from is None else f'{rest_from - t0_s:.2f} s'}")
            time.sleep(0.1)

    def close(self) -> None:
        self._executor.shutdown()
        self._thread.join(timeout=5)
        self.node.destroy_node()


def _real_time_system(folder: Path) -> Path:
    """The shipped sim_panda system with its physics paced to real time (``sim.real_time_factor: 1``).

    A real arm moves in real time. Flat out (the shipped 0, the fastest a batch can run) an idle machine
    finishes a pick-and-place within the 2-3 s a second shell's ``robopin cancel`` takes to start, and
    there is nothing left to stop; the task's world then stays done for the tests after it.
    """
    text = SYSTEM.read_text(encoding="utf-8")
    paced = text.replace("real_time_factor: 0.0", "real_time_factor: 1.0", 1)
    assert paced != text, "config/sim_panda.yaml no longer sets sim.real_time_factor: 0.0"
    path = folder / "sim_panda_real_time.yaml"
    path.write_text(paced, encoding="utf-8")
    return path


def _start_stack(cwd: Path) -> _Process:
    up = _Process("up", str(_real_time_system(cwd)), "--ready-timeout", "600", cwd=cwd)
    up.wait_line(lambda line: line.strip() == "ready", 900, "'ready' from robopin up")
    return up


@pytest.fixture(scope="module")
def ros_watch() -> Iterator[_ArmWatcher]:
    import rclpy

    context = rclpy.Context()
    rclpy.init(context=context)
    watcher = _ArmWatcher(context)
    try:
        yield watcher
    finally:
        watcher.close()
        rclpy.shutdown(context=context)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, ros_watch) -> Iterator[_Process]:
    folder = tmp_path_factory.mktemp("stop-stack")
    up = _start_stack(folder)
    try:
        yield up
    finally:
        if up.popen.poll() is None:
            up.popen.send_signal(signal.SIGTERM)
        try:
            up.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()


@pytest.fixture(autouse=True)
def _no_task_outlives_its_test(stack, ros_watch) -> Iterator[None]:
    """A test that fails midway leaves its clients running, and their task holds the stack's one task slot: every
    test after it would be refused as busy. Its clients are killed (the deadman ends their task) and the stack is
    waited on until no task runs."""
    yield
    while _CLIENTS:
        _CLIENTS.pop().stop()
    if stack.popen.poll() is not None:
        return  # the test stopped the module's stack (a stack of its own followed)
    deadline = time.monotonic() + 60
    while (running := ros_watch.running_goals()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running, f"tasks {[g.hex()[:8] for g in running]} outlived their test:\n{stack.output[-4000:]}"


def _instruction() -> str:
    from robopin.sim.tasks import load_scenario

    return load_scenario("spatial").instruction


def _instruct_until_moving(cwd: Path, watcher: _ArmWatcher) -> _Process:
    task = _Process("instruct", _instruction(), "--wait", "120", cwd=cwd)
    task.wait_line(lambda line: " executing" in line, 600, "the executing stage")
    _wait_moving(watcher, lambda: task.output)
    return task


def _wait_moving(watcher: _ArmWatcher, output) -> None:
    deadline = time.monotonic() + 60
    while not watcher.moving_at(time.monotonic(), 0.5):
        assert time.monotonic() < deadline, "the arm never moved:\n" + output()[-3000:]
        time.sleep(0.05)


class _Pipeline:
    """``robopin instruct … | <reader>`` as a shell runs it: one process group, the reader's output in a file."""

    def __init__(self, reader: list[str], cwd: Path) -> None:
        self.log = cwd / "pipeline.log"
        self.instruct = subprocess.Popen([sys.executable, "-m", "robopin.cli", "instruct", _instruction(), "--wait",
                                          "120"], cwd=cwd, env=dict(os.environ), stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, process_group=0)
        with self.log.open("wb") as sink:
            self.reader = subprocess.Popen(reader, stdin=self.instruct.stdout, stdout=sink,
                                           process_group=self.instruct.pid)
        self.instruct.stdout.close()  # the reader holds the pipe's only read end, as in a shell
        _CLIENTS.append(self)

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def interrupt(self) -> None:
        """Ctrl-C in the terminal: SIGINT to every process of the foreground group."""
        os.killpg(self.instruct.pid, signal.SIGINT)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.instruct.pid, signal.SIGKILL)
        self.instruct.wait()
        self.reader.wait()

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.instruct.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.instruct.pid, signal.SIGKILL)
            pytest.fail(f"robopin instruct still running {timeout_s} s later:\n{self.output[-3000:]}")
        self.reader.wait(timeout=10)
        return code


def _idle(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robopin.cli", "cancel", "--wait", "5"], cwd=cwd,
                          env=dict(os.environ), capture_output=True, text=True, timeout=120)


def test_ctrl_c_on_instruct_cancels_the_task_and_stops_the_arm(stack, ros_watch, tmp_path):
    task = _instruct_until_moving(tmp_path, ros_watch)
    t0 = time.monotonic()
    task.popen.send_signal(signal.SIGINT)
    code = task.wait(60)
    exited_s = time.monotonic() - t0
    still_s = ros_watch.still_after(t0)
    print(f"\nCtrl-C on robopin instruct: arm at rest {still_s:.2f} s after the signal, client exited after "
          f"{exited_s:.2f} s")
    assert code == 130, task.output
    assert "FAILURE (canceled)" in task.output, task.output
    idle = _idle(tmp_path)
    assert idle.returncode == 1 and "no running task" in idle.stdout, idle.stdout + idle.stderr


def test_robopin_cancel_from_another_shell_stops_the_arm(stack, ros_watch, tmp_path):
    task = _instruct_until_moving(tmp_path, ros_watch)
    t0 = time.monotonic()
    cancel = subprocess.run([sys.executable, "-m", "robopin.cli", "cancel"], cwd=tmp_path, env=dict(os.environ),
                            capture_output=True, text=True, timeout=120)
    still_s = ros_watch.still_after(t0)
    code = task.wait(60)
    print(f"\nrobopin cancel: arm at rest {still_s:.2f} s after the command started")
    assert cancel.returncode == 0 and ": canceled" in cancel.stdout, cancel.stdout + cancel.stderr
    assert code == 1 and "FAILURE (canceled)" in task.output, task.output


def test_the_arm_stop_service_ends_the_task(stack, ros_watch, tmp_path):
    from std_srvs.srv import Trigger

    task = _instruct_until_moving(tmp_path, ros_watch)
    client = ros_watch.node.create_client(Trigger, "/robopin/arm/stop")
    assert client.wait_for_service(timeout_sec=30)
    t0 = time.monotonic()
    future = client.call_async(Trigger.Request())
    still_s = ros_watch.still_after(t0)
    code = task.wait(60)
    print(f"\n/robopin/arm/stop: arm at rest {still_s:.2f} s after the call")
    assert future.done() and future.result().success
    assert code == 1 and "FAILURE (canceled)" in task.output, task.output
    ros_watch.node.destroy_client(client)


def test_a_client_timeout_cancels_the_task_it_started(stack, ros_watch, tmp_path):
    refused = subprocess.run([sys.executable, "-m", "robopin.cli", "instruct", _instruction(), "--timeout", "0"],
                             cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--timeout: must be > 0 seconds" in refused.stderr, refused.stderr
    # A timeout that fires while the task reasons or plans: the goal is known from the Instruct answer.
    task = _Process("instruct", _instruction(), "--timeout", "0.5", "--wait", "120", cwd=tmp_path)
    t0 = time.monotonic()
    code = task.wait(120)
    assert code == 1 and "FAILURE (task_timeout)" in task.output, task.output
    assert "canceled" in task.output, task.output  # the task's own result: canceled by its client
    ros_watch.still_after(t0)
    assert not any(ros_watch.moving_at(t) for t in np.arange(t0 + 1.0, time.monotonic(), 0.5)), \
        "the arm moved after the client's timeout"
    idle = _idle(tmp_path)
    assert idle.returncode == 1 and "no running task" in idle.stdout, idle.stdout + idle.stderr


class _SlowModel:
    """The planner's real OpenAI backend, set at run time as a user would (``ros2 param set /task_node vlm ...``),
    in front of a stub OpenAI server on 127.0.0.1 that answers as vLLM does, ``delay_s`` late. Leaving it ends the
    test's task and puts the oracle back."""

    def __init__(self, stack: _Process, ros_watch: _ArmWatcher, delay_s: float) -> None:
        from action_msgs.srv import CancelGoal
        from rcl_interfaces.srv import GetParameters, SetParameters

        from tests.vlm.conftest import StubOpenAIServer

        self.stack, self.watch, self.node = stack, ros_watch, ros_watch.node
        self.task: _Process | None = None
        self.canceller = self.node.create_client(CancelGoal, "/robopin/execute_task/_action/cancel_goal")
        self._getter = self.node.create_client(GetParameters, "/task_node/get_parameters")
        self._setter = self.node.create_client(SetParameters, "/task_node/set_parameters")
        for client in (self.canceller, self._getter, self._setter):
            assert client.wait_for_service(timeout_sec=30), f"no {client.srv_name}" + self.seen()
        self._oracle = self.call(self._getter, GetParameters.Request(names=["vlm"])).values[0].string_value
        self.stub = StubOpenAIServer().start()
        self.stub.behaviour.delay_s = delay_s

    def seen(self) -> str:
        """What the client and the stack printed, for a failure's message."""
        return (f"\n--- robopin instruct:\n{self.task.output[-3000:] if self.task else ''}"
                f"\n--- robopin up:\n{self.stack.output[-6000:]}")

    def call(self, client, request):
        future = client.call_async(request)
        deadline = time.monotonic() + 30
        while not future.done():
            assert time.monotonic() < deadline, f"{client.srv_name} did not answer" + self.seen()
            time.sleep(0.02)
        return future.result()

    def set_vlm(self, text: str) -> str:
        """'' once the planner took the setting, else its reason for refusing it."""
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=text)
        answer = self.call(self._setter, SetParameters.Request(parameters=[Parameter(name="vlm", value=value)]))
        return "" if answer.results[0].successful else answer.results[0].reason

    def __enter__(self) -> _SlowModel:
        import yaml

        setting = yaml.safe_dump({"type": "openai", "base_url": self.stub.base_url, "model": "vlm", "timeout_s": 60.0})
        # The previous test's task frees the planner's task slot just after its final status went out.
        deadline = time.monotonic() + 10
        while (refused := self.set_vlm(setting)).startswith("a task is running") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not refused, refused + self.seen()
        return self

    def start_reasoning(self, cwd: Path) -> bytes:
        """``robopin instruct`` until its model request reached the stub; the id of its running goal."""
        self.task = _Process("instruct", _instruction(), "--wait", "120", cwd=cwd)
        self.task.wait_line(lambda line: " reasoning" in line, 300, "the reasoning stage")
        deadline = time.monotonic() + 60
        while not self.stub.chat_requests():
            assert time.monotonic() < deadline, "the model request never reached the stub" + self.seen()
            time.sleep(0.02)
        # The goal's status reaches this process on its own DDS topic, in no order against the stub's HTTP request:
        # on a loaded machine the request is in and the status not yet.
        deadline = time.monotonic() + 30
        while not (running := self.watch.running_goals()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(running) == 1, f"expected one running task, found {running}" + self.seen()
        return running[0]

    def final_status(self, goal: bytes, t0: float, timeout_s: float = 60.0) -> tuple[int, float]:
        """The goal's final status (4, 5 or 6) and the seconds from ``t0`` to it."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.watch.last_status(goal)
            if status in (4, 5, 6):
                return status, time.monotonic() - t0
            assert time.monotonic() < deadline, f"the task never reached a final status ({status})" + self.seen()
            time.sleep(0.01)

    def __exit__(self, *exc_info) -> None:
        try:
            if self.task is not None:
                self.task.kill()  # its task ends by the deadman, so the planner takes a setting again
            deadline = time.monotonic() + 60
            while (refused := self.set_vlm(self._oracle)) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert not refused, f"the oracle could not be put back: {refused}" + self.seen()
        finally:
            self.stub.stop()
            for client in (self._getter, self._setter, self.canceller):
                self.node.destroy_client(client)


def test_cancel_during_a_slow_model_call_abandons_it_at_once(stack, ros_watch, tmp_path):
    from action_msgs.srv import CancelGoal

    with _SlowModel(stack, ros_watch, delay_s=30.0) as model:
        goal = model.start_reasoning(tmp_path)
        # The action's own cancel (what `robopin cancel` and the console send), timed to the goal's final status.
        t0 = time.monotonic()
        answer = model.call(model.canceller, CancelGoal.Request())  # zero goal id and stamp: cancel every goal
        ended, canceled_s = model.final_status(goal, t0)
        code = model.task.wait(60)
        time.sleep(2.0)  # a retry would arrive within the backend's backoff
        requests = len(model.stub.chat_requests())
        print(f"\ncancel during a model call: the goal ended {canceled_s:.2f} s after the cancel request "
              f"(the model would have answered after 30 s); requests reaching the stub: {requests}")
        assert answer.goals_canceling, "the cancel was not accepted" + model.seen()
        assert ended == 5, f"the goal ended with status {ended}, not canceled" + model.seen()
        assert code == 1 and "FAILURE (canceled)" in model.task.output, model.seen()
        assert requests == 1, "the backend sent the request again after the cancel" + model.seen()
        assert canceled_s < 20.0, "the cancel waited for the model's answer" + model.seen()


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "suspended"])
def test_a_client_killed_during_a_slow_model_call_ends_its_task_at_once(stack, ros_watch, tmp_path, signum):
    # SIGKILL: no cancel is sent; the planner hears the client's heartbeat stop (the deadman) and must not wait
    # for the model's answer to end the task. SIGSTOP (Ctrl-Z): the process lives, but nobody follows the task.
    with _SlowModel(stack, ros_watch, delay_s=30.0) as model:
        goal = model.start_reasoning(tmp_path)
        named = stack.output.count("(the client is gone)")
        t0 = time.monotonic()
        model.task.popen.send_signal(signum)
        if signum == signal.SIGKILL:
            model.task.wait(30)
        ended, ended_s = model.final_status(goal, t0)
        time.sleep(2.0)
        requests = len(model.stub.chat_requests())
        print(f"\n{signal.Signals(signum).name} on robopin instruct during a model call: the goal ended "
              f"{ended_s:.2f} s after the signal (the model would have answered after 30 s); requests reaching the "
              f"stub: {requests}")
        assert ended == 6, f"the goal ended with status {ended}, not aborted (client_lost)" + model.seen()
        assert stack.output.count("(the client is gone)") > named, model.seen()  # the planner's warning
        assert requests == 1, "the backend sent the request again after its client was gone" + model.seen()
        assert ended_s < 20.0, "the task waited for the model's answer after its client was gone" + model.seen()


def test_a_client_silent_while_its_process_runs_keeps_its_task(stack, ros_watch, tmp_path):
    # What a starved client looks like to the planner: its heartbeats stop while its process runs (beside two CPU
    # hogs and a second stack, `robopin instruct` went 1.25 s unheard). This test's own process is that client:
    # robopin's heartbeat sender and action client on the test's node, the heartbeats stopped after the goal runs.
    import uuid

    from action_msgs.srv import CancelGoal
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import CLIENT_DEADMAN_S, ActionClient, HeartbeatSender
    from unique_identifier_msgs.msg import UUID

    from robopin.interfaces import TASK_CLIENT_HEARTBEAT

    with _SlowModel(stack, ros_watch, delay_s=30.0) as model:
        goal = uuid.uuid4().bytes
        following = [goal]
        beats = HeartbeatSender(model.node, TASK_CLIENT_HEARTBEAT, lambda: following[0] if following else None)
        client = ActionClient(model.node, ExecuteTask, "/robopin/execute_task")
        try:
            assert client.wait_for_server(timeout_sec=30), "no ExecuteTask server" + model.seen()
            beats.beat_now()
            client.send_goal_async(ExecuteTask.Goal(instruction=_instruction()), goal_uuid=UUID(uuid=list(goal)))
            deadline = time.monotonic() + 120
            while not model.stub.chat_requests():
                assert time.monotonic() < deadline, "the model request never reached the stub" + model.seen()
                time.sleep(0.02)
            starved = stack.output.count("process still runs on this host (starved)")
            following.clear()  # the heartbeats stop; this process runs on
            time.sleep(6 * CLIENT_DEADMAN_S)
            status = model.watch.last_status(goal)
            assert status == 2, f"the goal's status is {status}, not executing" + model.seen()
            assert stack.output.count("process still runs on this host (starved)") > starved, model.seen()
            t0 = time.monotonic()
            model.call(model.canceller, CancelGoal.Request())
            ended, _ = model.final_status(goal, t0)
            assert ended == 5, f"the goal ended with status {ended}, not canceled" + model.seen()
        finally:
            beats.close()
            client.destroy()


def test_ctrl_c_to_instruct_piped_to_tee_cancels_the_task(stack, ros_watch, tmp_path):
    # Ctrl-C ends tee too: every line instruct prints after it goes to a closed pipe.
    t_start = time.monotonic()
    pipeline = _Pipeline(["tee", str(tmp_path / "tee.log")], tmp_path)
    deadline = time.monotonic() + 600
    while " executing" not in pipeline.output:
        assert pipeline.instruct.poll() is None and time.monotonic() < deadline, pipeline.output[-3000:]
        time.sleep(0.05)
    _wait_moving(ros_watch, lambda: pipeline.output)
    t0 = time.monotonic()
    pipeline.interrupt()
    code = pipeline.wait(60)
    status, ended_at = ros_watch.goal_ended(t_start)
    still_s = ros_watch.still_after(t0)
    print(f"\nCtrl-C to `robopin instruct | tee`: arm at rest {still_s:.2f} s and the task canceled "
          f"{ended_at - t0:.2f} s after the signal; instruct exit code {code}")
    assert status == 5, f"the task ended with status {status}, not canceled:\n{pipeline.output[-3000:]}"
    assert code == 130, pipeline.output[-3000:]
    assert "Traceback" not in pipeline.output, pipeline.output[-3000:]
    assert not any(ros_watch.moving_at(t) for t in np.arange(t0 + still_s + 1.0, time.monotonic(), 0.5))


def test_instruct_piped_to_head_cancels_its_task_once_the_reader_is_gone(stack, ros_watch, tmp_path):
    # `| head -c1` reads one byte and exits: nobody sees the task any more, so it must not run on.
    t_start = time.monotonic()
    pipeline = _Pipeline(["head", "-c1"], tmp_path)
    status, ended_at = ros_watch.goal_ended(t_start, timeout_s=120)
    code = pipeline.wait(60)  # it ends by itself: its reader left, so its task was canceled and it has nothing to say
    print(f"\n`robopin instruct | head -c1`: the task ended {ended_at - t_start:.2f} s after the command started "
          f"(status {status}); exit code {code}")
    assert status == 5, f"the task ended with status {status}, not canceled"
    assert code == 141, f"exit code {code}: a closed output pipe is 128 + SIGPIPE"
    idle = _idle(tmp_path)
    assert idle.returncode == 1 and "no running task" in idle.stdout, idle.stdout + idle.stderr


def test_sigkill_on_instruct_mid_motion_cancels_its_task(stack, ros_watch, tmp_path):
    # Nothing of the client runs any more: the planner notices its heartbeat stopped (the deadman).
    t_start = time.monotonic()
    task = _instruct_until_moving(tmp_path, ros_watch)
    t0 = time.monotonic()
    task.popen.send_signal(signal.SIGKILL)
    task.wait(30)
    status, ended_at = ros_watch.goal_ended(t_start)
    still_s = ros_watch.still_after(t0)
    print(f"\nSIGKILL on robopin instruct mid-motion: task ended {ended_at - t0:.2f} s after the kill, arm at rest "
          f"{still_s:.2f} s after it")
    assert status == 6, f"the task ended with status {status}: expected aborted with reason client_lost"
    assert ended_at - t0 < 5.0, f"the task ran {ended_at - t0:.1f} s past its client's death"
    assert "(the client is gone)" in stack.output, stack.output[-3000:]  # the planner's warning, named
    idle = _idle(tmp_path)
    assert idle.returncode == 1 and "no running task" in idle.stdout, idle.stdout + idle.stderr


def test_a_second_stack_in_the_same_domain_and_namespace_is_refused(stack, ros_watch, tmp_path):
    second = _Process("up", str(_real_time_system(tmp_path)), "--ready-timeout", "600", cwd=tmp_path)
    code = second.wait(300)
    print(f"\nsecond robopin up in the same domain: exit code {code}: {second.output.strip()[-400:]}")
    assert code != 0, second.output
    assert "another robopin stack already runs" in second.output and "/task_node" in second.output, \
        second.output
    assert "ready" not in second.output.split(), second.output
    # The first stack still serves its namespace alone: a task still runs there.
    task = _Process("instruct", _instruction(), "--dry-run", "--wait", "120", cwd=tmp_path)
    assert task.wait(300) == 0, task.output


def test_a_stack_frozen_past_the_lost_time_is_not_called_lost_while_its_process_lives(stack, ros_watch, tmp_path):
    # SIGSTOP: the stack's process lives but nothing in it runs, as on a starved machine at its worst; its heartbeat
    # stops for longer than SERVER_LOST_S (2 s). A killed stack is named lost at once (the SIGKILL test below).
    task = _instruct_until_moving(tmp_path, ros_watch)
    stack.popen.send_signal(signal.SIGSTOP)
    try:
        time.sleep(3.0)
    finally:
        stack.popen.send_signal(signal.SIGCONT)
    code = task.wait(120)
    # The task ends with the stack's own verdict (the arm's watchdog may stop a motion that went unwatched).
    assert code in (0, 1) and "stopped answering" not in task.output, task.output


def _own_stack(stack: _Process, cwd: Path) -> _Process:
    """A stack of the test's own, the module's stopped first: one stack serves a namespace."""
    if stack.popen.poll() is None:
        stack.popen.send_signal(signal.SIGTERM)
        assert stack.wait(60) == 0, stack.output[-4000:]
    return _start_stack(cwd)


def test_sigterm_to_up_mid_motion_stops_the_arm_ends_the_goal_and_closes_the_bag(stack, ros_watch, tmp_path):
    from robopin.bags import TrialBag

    up = _own_stack(stack, tmp_path)  # this test ends it
    try:
        task = _instruct_until_moving(tmp_path, ros_watch)
        t0 = time.monotonic()
        up.popen.send_signal(signal.SIGTERM)
        code = up.wait(60)
        gone_s = time.monotonic() - t0
        still_s = ros_watch.still_after(t0, observe_s=0.0, min_rest_s=0.2)
        task_code = task.wait(60)
    finally:
        up.kill()
    print(f"\nSIGTERM to robopin up mid-motion: process gone after {gone_s:.2f} s, arm at rest {still_s:.2f} s "
          f"after the signal")
    assert code == 0, up.output[-4000:]
    assert gone_s < 30.0, f"robopin up took {gone_s:.1f} s to exit"
    assert task_code == 1 and "FAILURE (shutdown)" in task.output, task.output
    bags = sorted((tmp_path / "trials" / "bags").glob("task-*"))
    assert bags and (bags[-1] / "metadata.yaml").is_file(), f"no closed bag: {bags}"
    with TrialBag(bags[-1]) as bag:
        statuses = [status.status for _, msg in bag.decoded(["/robopin/execute_task/_action/status"])
                    for status in msg.status_list]
        states = [msg for _, msg in bag.decoded(["/joint_states"])]
    assert statuses and statuses[-1] == 6, f"the bag does not end with the aborted task: {statuses[-5:]}"
    assert states, "no joint states in the bag"
    last = states[-1]
    arm = [v for name, v in zip(last.name, last.velocity, strict=True) if "finger" not in name]
    assert max(abs(v) for v in arm) < STILL_VELOCITY_RAD_S, f"the bag ends with the arm moving: {last}"


def test_sigkill_on_up_mid_task_ends_instruct_with_a_named_error(stack, ros_watch, tmp_path):
    # Last in the module: a stack killed outright stays in the DDS graph until its participant lease ends.
    up = _own_stack(stack, tmp_path)
    try:
        task = _instruct_until_moving(tmp_path, ros_watch)
        t0 = time.monotonic()
        up.popen.send_signal(signal.SIGKILL)
        code = task.wait(60)
        gone_s = time.monotonic() - t0
    finally:
        up.kill()
    print(f"\nSIGKILL on robopin up mid-task: robopin instruct exited {gone_s:.2f} s later with code {code}")
    assert code == 3, task.output
    assert "the stack stopped answering" in task.output and "check the arm" in task.output, task.output
    assert gone_s < 5.0, f"robopin instruct took {gone_s:.1f} s to notice its stack was gone"
