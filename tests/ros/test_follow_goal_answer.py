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


def _canceled_goals_server(context, namespace: str, canceled: threading.Event):
    """A guarded FollowJointTrajectory server (as the arm driver serves trajectories) whose goals run until
    canceled, each setting ``canceled``; a client of it. Context manager yielding (guard, client, spinner)."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import CancelResponse

    from .rostest_utils import guarded_action

    def execute(goal_handle):
        deadline = time.monotonic() + 30.0
        while not goal_handle.is_cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        canceled.set()
        goal_handle.canceled()
        return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL)

    return guarded_action(context, namespace, FollowJointTrajectory, "follow_joint_trajectory",
                          execute=execute, busy_result=lambda message: FollowJointTrajectory.Result(
                              error_code=FollowJointTrajectory.Result.INVALID_GOAL, error_string=message),
                          cancel_callback=lambda _handle: CancelResponse.ACCEPT)


@pytest.fixture
def parked_server(ros_context):
    """A guarded FollowJointTrajectory server whose goals run until canceled, its executor parked before any goal
    reaches it; a client on an executor of its own. Yields (client, spinner, canceled)."""
    canceled = threading.Event()
    with _canceled_goals_server(ros_context, "/answertest", canceled) as (_guard, client, spinner):
        time.sleep(0.5)  # the server's side of the discovery is served too before it is parked
        spinner.park.set()
        assert spinner.parked.wait(5.0)
        yield client, spinner, canceled


def test_a_late_answer_within_the_goals_deadline_is_followed(parked_server):
    """Answered 2 s after it was sent, the goal is followed (then stopped by its caller, which cancels it)."""
    from control_msgs.action import FollowJointTrajectory
    from robopin_ros.actions import follow_goal

    client, spinner, canceled = parked_server
    threading.Timer(2.0, spinner.resume).start()
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
    threading.Timer(1.5, spinner.resume).start()  # answered 1 s after the stop, within cancel_wait_s
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


def test_a_goal_whose_response_never_arrives_is_followed_from_the_servers_status(ros_context):
    """rmw_fastrtps drops a reply its server cannot deliver at once (rmw_response.cpp): the goal runs on the server,
    its response never reaches the client. Here the client's take discards its goal responses (what the client sees
    of a dropped reply); the server is robopin's guarded ActionServer over Fast DDS. The goal is taken as accepted
    from the server's status, followed, and canceled by its caller's stop; the response, handed in late, is passed
    over."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from robopin_ros.actions import ASK_AGAIN_S, ActionClient, follow_goal

    class ResponseNeverArrives(ActionClient):
        """Discards the first goal response it takes; hands it in with a later take once told to."""

        def __init__(self, *args, **kwargs):
            self.withheld, self.handed_in = None, False
            self.hand_in = threading.Event()
            super().__init__(*args, **kwargs)

        def take_data(self):
            data = super().take_data()
            if "goal" in data and self.withheld is None and not self.handed_in:
                self.withheld = data.pop("goal")
            elif "goal" not in data and self.hand_in.is_set() and self.withheld is not None:
                data["goal"], self.withheld, self.handed_in = self.withheld, None, True
            return data

    canceled = threading.Event()
    with _canceled_goals_server(ros_context, "/droptest", canceled):
        node = Node("dropping_client", context=ros_context, namespace="/droptest")
        executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
        executor.add_node(node)
        threading.Thread(target=executor.spin, daemon=True).start()
        try:
            client = ResponseNeverArrives(node, FollowJointTrajectory, "follow_joint_trajectory")
            assert client.wait_for_server(timeout_sec=10.0)
            answered = []
            stop = threading.Event()
            started = time.monotonic()
            threading.Timer(4.0, stop.set).start()
            outcome = follow_goal(client, FollowJointTrajectory.Goal(), answer_timeout_s=60.0, timeout_s=60.0,
                                  should_stop=stop.is_set, cancel_wait_s=5.0,
                                  on_answer=lambda handle: answered.append((time.monotonic() - started, handle)))
            assert client.withheld is not None, "the server's goal response never reached the client's take"
            assert answered and answered[0][1].accepted, outcome
            assert answered[0][0] >= ASK_AGAIN_S, f"followed {answered[0][0]:.2f} s after it was sent"
            assert outcome.ending == "stopped", outcome
            assert canceled.wait(5.0), "the goal whose response was dropped was left running"
            sequence = client.withheld[0]
            assert sequence in client._accepted_by_status
            canceled.clear()
            client.hand_in.set()  # the late response comes with the next take of another kind (a status)
            stop.clear()
            threading.Timer(1.0, stop.set).start()
            second = follow_goal(client, FollowJointTrajectory.Goal(), answer_timeout_s=10.0, timeout_s=10.0,
                                 should_stop=stop.is_set, cancel_wait_s=5.0)
            assert second.ending == "stopped" and canceled.wait(5.0), second  # its response came: not withheld
            assert client.handed_in and sequence not in client._accepted_by_status, \
                "the late response was not passed over"
        finally:
            executor.shutdown(timeout_sec=2.0)
            node.destroy_node()
