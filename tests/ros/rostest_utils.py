"""Helpers for tests that talk to real ROS processes: spawn a node process, spin a client node, wait on futures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from robopin_ros.runtime import destroy_when_stopped

TESTS_ROS = Path(__file__).resolve().parent


class SpunNode:
    """A node of the test process spinning on its own executor thread until closed."""

    def __init__(self, name: str, context) -> None:
        self.node = Node(name, context=context)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def close(self) -> None:
        destroy_when_stopped(self._executor, self._thread, [self.node])


class ParkingSpinner:
    """Spins an executor one callback at a time and parks while ``park`` is set, until resumed: a server process
    starved of CPU, held at a chosen moment so the order is the same on every run."""

    def __init__(self, executor) -> None:
        self._executor = executor
        self.park, self.parked, self._closed = threading.Event(), threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            if self.park.is_set():
                self.parked.set()
                time.sleep(0.01)
                continue
            self.parked.clear()
            self._executor.spin_once(timeout_sec=0.02)

    def resume(self) -> None:
        self.park.clear()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5.0)


@contextmanager
def guarded_action(context, namespace: str, action_type, name: str, *, execute: Callable, busy_result: Callable,
                   **serve: object) -> Iterator[tuple[object, object, ParkingSpinner]]:
    """robopin's guarded ActionServer (``SingleGoalGuard.serve``, as the nodes serve their actions) on a parking
    spinner, and a client of it on an executor of its own; yields (guard, client, spinner) once they matched."""
    from rclpy.executors import MultiThreadedExecutor
    from robopin_ros.actions import ActionClient, SingleGoalGuard

    server_node = Node(f"{name}_server", context=context, namespace=namespace)
    client_node = Node(f"{name}_client", context=context, namespace=namespace)
    guard = SingleGoalGuard()
    guard.serve(server_node, action_type, name, execute, busy_result, accepting=lambda: True, **serve)
    server_executor = MultiThreadedExecutor(num_threads=2, context=context)
    server_executor.add_node(server_node)
    spinner = ParkingSpinner(server_executor)
    client_executor = MultiThreadedExecutor(num_threads=2, context=context)
    client_executor.add_node(client_node)
    threading.Thread(target=client_executor.spin, daemon=True).start()
    client = ActionClient(client_node, action_type, name)
    assert client.wait_for_server(timeout_sec=10.0)
    try:
        yield guard, client, spinner
    finally:
        spinner.resume()
        spinner.close()
        client_executor.shutdown(timeout_sec=2.0)
        server_executor.shutdown(timeout_sec=2.0)
        client_node.destroy_node()
        server_node.destroy_node()


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll predicate until true; fail naming what was awaited."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def wait_future(future, timeout_s: float, what: str):
    """Wait for an rclpy future that another thread spins; return its result."""
    wait_for(future.done, timeout_s, what)
    return future.result()


def call_service(client, request, timeout_s: float, what: str):
    """Call a ROS service that another thread spins and return its response (the request sent again while no
    answer came: :func:`robopin_ros.actions.ask`; list, describe and get requests are idempotent)."""
    from robopin_ros.actions import ask

    assert client.wait_for_service(timeout_sec=timeout_s), f"{what}: service never appeared"
    answer = ask(client, request, timeout_s)
    if answer is None:
        raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
    return answer


def wait_result(goal_handle, timeout_s: float, what: str):
    """Wait for an accepted goal's GetResult answer (asked again if Fast DDS dropped it: see GoalResult)."""
    from robopin_ros.actions import GoalResult

    answer = GoalResult(goal_handle).answer(timeout_s)
    if answer is None:
        raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
    return answer


def start_process(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a Python helper process in this test run's ROS domain."""
    return subprocess.Popen(
        [sys.executable, *args],
        env=dict(os.environ if env is None else env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop_process(process: subprocess.Popen, timeout_s: float = 10.0) -> tuple[int, str]:
    """SIGTERM a helper process (as a launch system would) and return its exit code and output."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)  # robopin_ros.runtime dumps all thread stacks on SIGUSR1
        time.sleep(0.5)
        process.kill()
        output, _ = process.communicate()
        return -9, output
    return process.returncode, output
