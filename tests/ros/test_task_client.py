"""The task client's verbs over real DDS: run_task, cancel_task, result against an ExecuteTask server process.

The server is tests/ros/task_server_fixture.py (the single-goal policy of robopin_ros.actions, feedback,
cancel) in a process of its own; the clients are the real TaskClient of robopin_ros.task_client.
"""

from __future__ import annotations

import threading

import pytest
from action_msgs.msg import GoalStatus
from rclpy.executors import MultiThreadedExecutor

from tests.ros.rostest_utils import TESTS_ROS, start_process, stop_process, wait_for

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def task_server():
    process = start_process([str(TESTS_ROS / "task_server_fixture.py"), "--step-period", "0.2", "--steps", "5"])
    yield process
    code, output = stop_process(process)
    assert code == 0, f"task server did not shut down cleanly on SIGTERM (exit {code}):\n{output}"


@pytest.fixture
def clients(ros_context, task_server):
    from robopin_ros.task_client import TaskClient

    made = [TaskClient((), context=ros_context, cli_args=["--ros-args", "-r", f"__node:=task_client_{k}"])
            for k in range(2)]
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    for client in made:
        executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield made
    executor.shutdown(timeout_sec=2.0)
    spinner.join(timeout=5.0)
    for client in made:
        client.destroy_node()


def test_run_task_follows_the_goal_it_sent_to_its_result(clients):
    events = []
    run = clients[0].run_task("stack the cubes", on_event=events.append, timeout_s=30.0)
    assert run.accepted and run.success and run.reason == "", run.message
    assert len(run.goal_id) == 16 and run.task_id == run.goal_id.hex()[:8] and run.result.task_id == run.task_id
    assert [e.step for e in run.events] == [0, 1, 2, 3, 4] and events == run.events
    status, result = clients[1].result(run.goal_id, wait_s=10.0)  # any client can read a goal's result
    assert status == GoalStatus.STATUS_SUCCEEDED and result.steps_executed == 5


def test_a_second_task_is_not_started_and_another_client_cancels_the_first(clients):
    first_done = threading.Event()
    runs = []

    def first() -> None:
        runs.append(clients[0].run_task("long task", timeout_s=30.0))
        first_done.set()

    threading.Thread(target=first, daemon=True).start()
    wait_for(lambda: clients[1].running_tasks(discover_s=2.0), 10, "the first task in the server's status")
    second = clients[1].run_task("interleaved task", timeout_s=30.0)
    assert not second.accepted and second.reason == "instruct_rejected" and "another goal is running" in second.message
    [running] = clients[1].running_tasks()
    assert clients[1].cancel_task(running, wait_s=10.0) == GoalStatus.STATUS_CANCELED  # a goal another client sent
    assert first_done.wait(10.0)
    assert runs[0].goal_id == running and runs[0].result.reason == "canceled" and not runs[0].success
    assert not clients[1].running_tasks(discover_s=1.0)
