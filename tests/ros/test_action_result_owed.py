"""A goal's end is not its result's arrival: a server stays busy until the result it owes is sent, and a client
whose server went quiet after ending the goal still takes the result it is sent.

rclpy (jazzy) sends a result from a done-callback of the goal's result future, and that callback runs as a new
executor task (``Future._schedule_or_invoke_done_callbacks``): between the goal's end and the send the executor
must spin again. On a busy machine `robopin up` stopped on SIGTERM once stopped its executor in that gap, and
`robopin instruct` reported a lost stack (exit 3) for a task that had ended with reason ``shutdown``. Here the
server's executor is held in that gap on purpose (a spinner that parks once the goal returns), so the order is
the same on every run.
"""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture
def parked_after_goal(ros_context):
    """A guarded ExecuteTask server whose executor parks the moment its goal returns (result owed, not sent), and a
    client on an executor of its own. Yields (guard, client, spinner)."""
    from robopin_interfaces.action import ExecuteTask

    from .rostest_utils import guarded_action

    served = []

    def execute(goal_handle):
        guard, _client, spinner = served[0]
        # Wait until the client's result request is registered, so the result is owed when the goal ends.
        deadline = time.monotonic() + 10.0
        while not any(server.owed() for server in guard._servers) and time.monotonic() < deadline:
            time.sleep(0.01)
        goal_handle.abort()
        spinner.park.set()
        spinner.parked.wait(5.0)  # the send task is created only after this returns: it waits for resume()
        return ExecuteTask.Result(success=False, reason="shutdown", message="the planner is shutting down")

    with guarded_action(ros_context, "/owedtest", ExecuteTask, "task", execute=execute,
                        busy_result=lambda message: ExecuteTask.Result(success=False, reason="busy",
                                                                       message=message)) as pair:
        served.append(pair)
        yield pair


def test_a_server_is_busy_until_the_result_of_an_ended_goal_is_sent(parked_after_goal):
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import future_result

    guard, client, spinner = parked_after_goal
    handle = future_result(client.send_goal_async(ExecuteTask.Goal(instruction="pick the cup")), 10.0)
    assert handle is not None and handle.accepted
    result = handle.get_result_async()
    assert spinner.parked.wait(10.0), "the goal never ended"
    time.sleep(0.3)
    assert guard.active is None, "the goal still holds the slot"
    owed = guard.busy()
    assert owed and "result (not yet sent)" in owed[0], owed
    assert guard.followed() == bytes(handle.goal_id.uuid).hex()
    assert not result.done(), "the result arrived while the server's executor was parked"
    spinner.resume()
    answer = future_result(result, 10.0)
    assert answer is not None and answer.result.reason == "shutdown"
    deadline = time.monotonic() + 5.0
    while guard.busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert guard.busy() == [] and guard.followed() is None


def test_a_client_that_hears_its_goal_end_waits_for_the_result_instead_of_calling_the_server_lost(parked_after_goal):
    from action_msgs.msg import GoalStatus
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import follow_goal

    _guard, client, spinner = parked_after_goal
    handles = []

    def server_lost() -> str:
        # The server's heartbeat is taken as stopped the moment its status says the goal ended; the result comes
        # 1 s later, past follow_goal's wait after a lost server (0.5 s).
        if handles and handles[0].status in (GoalStatus.STATUS_ABORTED,):
            threading.Timer(1.0, spinner.resume).start()
            return "no heartbeat from the server"
        return ""

    outcome = follow_goal(client, ExecuteTask.Goal(instruction="pick the cup"), answer_timeout_s=10.0, timeout_s=30.0,
                          cancel_wait_s=5.0, on_answer=handles.append, server_lost=server_lost)
    assert outcome.ending == "finished", outcome
    assert outcome.status == GoalStatus.STATUS_ABORTED and outcome.result.reason == "shutdown"
