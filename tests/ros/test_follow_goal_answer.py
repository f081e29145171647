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


@pytest.fixture
def parked_server(ros_context):
    """A guarded FollowJointTrajectory server whose goals run until canceled, its executor parked before any goal
    reaches it; a client on an executor of its own. Yields (client, spinner, canceled)."""
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import CancelResponse

    from .rostest_utils import guarded_action

    canceled = threading.Event()

    def execute(goal_handle):
        deadline = time.monotonic() + 30.0
        while not goal_handle.is_cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        canceled.set()
        goal_handle.canceled()
        return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.SUCCESSFUL)

    with guarded_action(ros_context, "/answertest", FollowJointTrajectory, "follow_joint_trajectory",
                        execute=execute, busy_result=lambda message: FollowJointTrajectory.Result(
                            error_code=FollowJointTrajectory.Result.INVALID_GOAL, error_string=message),
                        cancel_callback=lambda _handle: CancelResponse.ACCEPT) as (_guard, client, spinner):
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
