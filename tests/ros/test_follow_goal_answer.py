"""A goal's answer may come late from a starved server; a stop while it is unanswered still owns the goal.

The server here is robopin's own guarded ActionServer (``SingleGoalGuard.serve``, as the arm driver serves its
trajectories) whose executor is parked before the goal request reaches it, the way a driver process starved of CPU
answers late. Whether the answer comes is decided by the test (resume), so the order is the same on every run.
"""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros


class _ParkedSpinner:
    """Spins an executor one callback at a time, only while ``running`` is set."""

    def __init__(self, executor) -> None:
        self._executor = executor
        self.running, self._closed = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            if self.running.wait(0.01):
                self._executor.spin_once(timeout_sec=0.02)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5.0)


@pytest.fixture
def parked_server(ros_context):
    """A guarded FollowJointTrajectory server whose goals run until canceled, its executor parked until the test
    resumes it; a client on an executor of its own. Yields (client, spinner, canceled)."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import CancelResponse
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from robopin_ros.actions import ActionClient, SingleGoalGuard

    server_node = Node("answer_server", context=ros_context, namespace="/answertest")
    client_node = Node("answer_client", context=ros_context, namespace="/answertest")
    guard, canceled = SingleGoalGuard(), threading.Event()

    def execute(goal_handle):
        deadline = time.monotonic() + 30.0
        while not goal_handle.is_cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        canceled.set()
        goal_handle.canceled()
        return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL)

    guard.serve(server_node, FollowJointTrajectory, "follow_joint_trajectory", execute,
                lambda message: FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.INVALID_GOAL,
                                                             error_string=message),
                accepting=lambda: True, cancel_callback=lambda _handle: CancelResponse.ACCEPT)
    server_executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    server_executor.add_node(server_node)
    spinner = _ParkedSpinner(server_executor)
    client_executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    client_executor.add_node(client_node)
    threading.Thread(target=client_executor.spin, daemon=True).start()
    client = ActionClient(client_node, FollowJointTrajectory, "follow_joint_trajectory")
    spinner.running.set()
    assert client.wait_for_server(timeout_sec=10.0)
    time.sleep(0.5)  # the server's side of the discovery is served too before it is parked
    spinner.running.clear()
    time.sleep(0.1)
    try:
        yield client, spinner, canceled
    finally:
        spinner.running.set()
        spinner.close()
        client_executor.shutdown(timeout_sec=2.0)
        server_executor.shutdown(timeout_sec=2.0)
        client_node.destroy_node()
        server_node.destroy_node()


def test_a_late_answer_within_the_goals_deadline_is_followed(parked_server):
    """Answered 2 s after it was sent, the goal is followed (then stopped by its caller, which cancels it)."""
    from control_msgs.action import FollowJointTrajectory
    from robopin_ros.actions import follow_goal

    client, spinner, canceled = parked_server
    threading.Timer(2.0, spinner.running.set).start()
    stop = threading.Event()
    threading.Timer(3.0, stop.set).start()
    outcome = follow_goal(client, FollowJointTrajectory.Goal(), answer_timeout_s=20.0, timeout_s=20.0,
                          should_stop=stop.is_set, cancel_wait_s=5.0)
    assert outcome.handle is not None and outcome.handle.accepted
    assert outcome.ending == "stopped", outcome
    assert canceled.is_set()


def test_a_stop_while_the_goal_is_unanswered_cancels_the_goal_when_its_answer_comes(parked_server):
    from control_msgs.action import FollowJointTrajectory
    from robopin_ros.actions import follow_goal

    client, spinner, canceled = parked_server
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    threading.Timer(1.5, spinner.running.set).start()  # answered 1 s after the stop, within cancel_wait_s
    started = time.monotonic()
    outcome = follow_goal(client, FollowJointTrajectory.Goal(), answer_timeout_s=60.0, timeout_s=60.0,
                          should_stop=stop.is_set, cancel_wait_s=5.0)
    assert outcome.ending == "stopped", outcome
    assert canceled.wait(5.0), "the goal accepted after the stop was left running"
    assert time.monotonic() - started < 30.0


def test_a_stop_while_the_server_never_answers_ends_after_the_cancel_wait_not_the_answer_deadline(parked_server):
    from control_msgs.action import FollowJointTrajectory
    from robopin_ros.actions import follow_goal

    client, _spinner, _canceled = parked_server
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    outcome = follow_goal(client, FollowJointTrajectory.Goal(), answer_timeout_s=120.0, timeout_s=120.0,
                          should_stop=stop.is_set, cancel_wait_s=1.0)
    assert outcome.ending == "unanswered", outcome
    assert time.monotonic() - started < 60.0, "the stop waited for the answer deadline"
