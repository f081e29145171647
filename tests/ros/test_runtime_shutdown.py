"""Stopping an executor waits for the callback it is running, so destroying the node after it is safe.

rclpy 7.1 (Jazzy) ``Executor.shutdown`` returns while a callback still runs; a timer that publishes
then fails on its destroyed publisher ("cannot use Destroyable because destruction was requested").
"""

from __future__ import annotations

import threading
import time

import pytest
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from robopin_ros.runtime import destroy_when_stopped, executor_threads_running, shutdown_executor
from std_msgs.msg import String

pytestmark = pytest.mark.ros


class _SlowPublisher(Node):
    """A timer callback that takes a while and then publishes, as projection_node's cloud timer does."""

    def __init__(self, context) -> None:
        super().__init__("slow_publisher", context=context)
        self.started, self.finished = threading.Event(), threading.Event()
        self.errors: list[BaseException] = []
        self.publisher = self.create_publisher(String, "slow_topic", 1)
        self.timer = self.create_timer(0.01, self._tick)

    def _tick(self) -> None:
        if self.started.is_set():
            return
        self.started.set()
        time.sleep(0.5)
        try:
            self.publisher.publish(String(data="late"))
        except BaseException as error:  # the failure the drained shutdown must prevent
            self.errors.append(error)
        self.finished.set()


def _spin(node: Node, context) -> tuple[MultiThreadedExecutor, threading.Thread]:
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    assert node.started.wait(10.0), "the timer callback never ran"
    return executor, spinner


def test_plain_executor_shutdown_returns_while_a_callback_runs(ros_context):
    node = _SlowPublisher(ros_context)
    executor, spinner = _spin(node, ros_context)
    executor.shutdown(timeout_sec=5.0)
    running_at_return = not node.finished.is_set()
    node.finished.wait(5.0)
    spinner.join(5.0)
    node.destroy_node()
    # The upstream fact the helper exists for; if rclpy fixes it, this test says so.
    assert running_at_return


def test_shutdown_executor_waits_for_the_running_callback_before_the_node_is_destroyed(ros_context):
    node = _SlowPublisher(ros_context)
    executor, spinner = _spin(node, ros_context)
    assert shutdown_executor(executor, spinner, timeout_s=10.0)
    assert node.finished.is_set()
    node.destroy_node()
    assert node.errors == []
    assert not spinner.is_alive()


class _BusyTimers(Node):
    """Timers firing every millisecond on a multi-threaded executor: handlers are always in flight."""

    def __init__(self, context, index: int) -> None:
        super().__init__(f"busy_timers_{index}", context=context)
        self.publisher = self.create_publisher(String, "busy_topic", 1)
        self.ticks = [self.create_timer(0.001, self._tick) for _ in range(4)]

    def _tick(self) -> None:
        self.publisher.publish(String(data="tick"))


def test_no_callback_handler_fails_on_a_destroyed_guard_condition_or_publisher(ros_context, monkeypatch):
    import rclpy.task

    failures: list[BaseException] = []
    original = rclpy.task.Future.set_exception

    def record(self, exception):
        failures.append(exception)
        return original(self, exception)

    monkeypatch.setattr(rclpy.task.Future, "set_exception", record)
    for index in range(10):
        node = _BusyTimers(ros_context, index)
        executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        time.sleep(0.1)
        assert shutdown_executor(executor, spinner, timeout_s=10.0)
        node.destroy_node()
    assert [repr(error) for error in failures] == []


def test_an_executor_whose_callback_outlives_the_stop_is_reported_running_and_its_node_is_not_destroyed(ros_context):
    """The stop's deadline passes with a callback still running (a starved machine): the node stays alive.

    rclpy's destroy_node while a thread still runs the node's callback can end the process with SIGSEGV
    (ros2/rclpy#663), so the helpers report it running and keep the node until the callback has ended.
    """
    node = _SlowPublisher(ros_context)
    executor, spinner = _spin(node, ros_context)  # its callback now sleeps 0.5 s, then publishes
    assert not destroy_when_stopped(executor, spinner, [node], timeout_s=0.05)
    assert not node.finished.is_set()
    assert node.handle is not None and node.publisher.handle is not None  # not destroyed
    assert executor_threads_running(executor, spinner, timeout_s=10.0) == []
    assert node.finished.is_set() and node.errors == []  # it published on a living publisher
    node.destroy_node()


def test_destroy_when_stopped_destroys_the_node_once_its_callback_ended(ros_context):
    node = _SlowPublisher(ros_context)
    executor, spinner = _spin(node, ros_context)
    assert destroy_when_stopped(executor, spinner, [node], timeout_s=10.0)
    assert node.finished.is_set() and node.errors == []
    assert executor_threads_running(executor, spinner) == []
    with pytest.raises(Exception, match=r"destruction was requested|InvalidHandle|destroyed"):
        node.publisher.publish(String(data="after"))
