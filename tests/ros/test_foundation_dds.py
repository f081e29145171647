"""Our interfaces over real DDS between processes: a custom message, the Instruct service, the ExecuteTask action.

The server is tests/ros/task_server_fixture.py (the single-goal policy of robopin_ros.actions, feedback,
cancel) in a process of its own; the last tests drive it with the real TaskClient's verbs
(run_task, cancel_task, result) of robopin_ros.task_client.
"""

from __future__ import annotations

import threading

import pytest
from action_msgs.msg import GoalStatus
from rclpy.executors import MultiThreadedExecutor
from robopin_interfaces.action import ExecuteTask
from robopin_interfaces.msg import PinnedReasoning
from robopin_interfaces.srv import Instruct
from robopin_ros.actions import ActionClient

from tests.ros.rostest_utils import TESTS_ROS, SpunNode, start_process, stop_process, wait_for, wait_future, wait_result

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def task_server():
    process = start_process([str(TESTS_ROS / "task_server_fixture.py"), "--step-period", "0.2", "--steps", "5"])
    yield process
    code, output = stop_process(process)
    assert code == 0, f"task server did not shut down cleanly on SIGTERM (exit {code}):\n{output}"


@pytest.fixture
def client(ros_context, task_server):
    spun = SpunNode("foundation_test_client", ros_context)
    yield spun
    spun.close()


def _action_client(client: SpunNode) -> ActionClient:
    action = ActionClient(client.node, ExecuteTask, "/robopin/execute_task")
    assert action.wait_for_server(timeout_sec=20), "ExecuteTask server not discovered"
    return action


def _send(action: ActionClient, instruction: str, feedback: list | None = None):
    callback = (lambda fb: feedback.append(fb.feedback)) if feedback is not None else None
    future = action.send_goal_async(ExecuteTask.Goal(instruction=instruction), callback)
    handle = wait_future(future, 10, "goal response")
    assert handle.accepted
    return handle


def test_instruct_service_answers_from_another_process(client):
    service = client.node.create_client(Instruct, "/robopin/instruct")
    assert service.wait_for_service(timeout_sec=20)
    reply = wait_future(service.call_async(Instruct.Request(instruction="put the duck on the plate")), 10, "Instruct")
    assert reply.accepted and len(reply.task_id) == 8
    assert "put the duck on the plate" in reply.message
    empty = wait_future(service.call_async(Instruct.Request(instruction="  ")), 10, "Instruct")
    assert not empty.accepted and empty.message == "empty instruction"


def test_pinned_reasoning_message_crosses_processes(client):
    received: list[PinnedReasoning] = []
    got = threading.Event()

    def on_msg(msg: PinnedReasoning) -> None:
        received.append(msg)
        got.set()

    client.node.create_subscription(PinnedReasoning, "/robopin/reasoning", on_msg, 10)
    action = _action_client(client)
    handle = _send(action, "pick the duck")
    wait_for(got.is_set, 10, "a PinnedReasoning message")
    wait_result(handle, 10, "task result")
    first = received[0]
    assert first.instruction == "pick the duck" and first.valid
    assert [(a.kind, a.id, a.img_idx, a.x, a.y) for a in first.anchors] == [("obj", "obj_01", 0, 412.0, 530.0)]


def test_execute_task_feedback_and_result(client):
    action = _action_client(client)
    feedback: list = []
    handle = _send(action, "stack the cubes", feedback)
    result = wait_result(handle, 15, "task result").result
    assert result.success and result.steps_executed == 5
    assert [f.step for f in feedback] == [0, 1, 2, 3, 4]
    assert len(result.reasoning_steps) == 5


def test_second_goal_is_rejected_with_reason_while_one_runs(client):
    action = _action_client(client)
    first = _send(action, "long task")
    second = _send(action, "interleaved task")
    second_result = wait_result(second, 10, "second result").result
    assert not second_result.success
    assert second_result.reason == "busy"
    assert "another goal is running" in second_result.message
    # The Instruct service refuses too while the first goal holds the server.
    service = client.node.create_client(Instruct, "/robopin/instruct")
    assert service.wait_for_service(timeout_sec=10)
    reply = wait_future(service.call_async(Instruct.Request(instruction="third")), 10, "Instruct")
    assert not reply.accepted and "another goal is running" in reply.message
    assert wait_result(first, 15, "first result").result.success


def test_cancel_stops_a_running_task(client):
    action = _action_client(client)
    feedback: list = []
    handle = _send(action, "cancel me", feedback)
    wait_for(lambda: len(feedback) >= 1, 10, "first feedback")
    wait_future(handle.cancel_goal_async(), 10, "cancel response")
    wrapped = wait_result(handle, 10, "canceled result")
    assert wrapped.result.reason == "canceled"
    assert not wrapped.result.success
    assert len(feedback) < 5


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
    assert clients[1].cancel_task(running, wait_s=10.0) == {running: GoalStatus.STATUS_CANCELED}  # another's goal
    assert first_done.wait(10.0)
    assert runs[0].goal_id == running and runs[0].result.reason == "canceled" and not runs[0].success
    assert not clients[1].running_tasks(discover_s=1.0)


def test_cancel_task_without_an_id_cancels_every_running_goal(clients):
    assert clients[0].cancel_task(None, wait_s=5.0) == {}  # nothing runs: nothing canceled
    runs = []
    threading.Thread(target=lambda: runs.append(clients[0].run_task("cancel me", timeout_s=30.0)), daemon=True).start()
    wait_for(lambda: clients[1].running_tasks(discover_s=2.0), 10, "the task in the server's status")
    [(goal, status)] = clients[1].cancel_task(None, wait_s=10.0).items()
    assert status == GoalStatus.STATUS_CANCELED
    wait_for(lambda: runs, 10, "the canceled run's end")
    assert runs[0].goal_id == goal and runs[0].result.reason == "canceled"


@pytest.mark.parametrize("by_id", [True, False], ids=["by_id", "every_goal"])
def test_a_cancel_whose_answer_never_arrives_still_names_the_task_it_canceled(clients, by_id):
    """rmw_fastrtps drops a reply its server cannot deliver at once (rmw_response.cpp): the server cancels the task
    and the canceling client never hears so. Here the canceling client's take discards cancel answers (what it sees
    of a dropped reply); the server is the task server process over Fast DDS. The task is still named canceled,
    from the server's status, where before the client answered that no task ran."""
    canceler = clients[1]
    take = canceler.action.take_data
    discarded = []

    def take_without_cancel_answers():
        data = take()
        if "cancel" in data:
            discarded.append(data.pop("cancel"))
        return data

    canceler.action.take_data = take_without_cancel_answers
    runs = []
    threading.Thread(target=lambda: runs.append(clients[0].run_task("cancel me", timeout_s=30.0)), daemon=True).start()
    wait_for(lambda: canceler.running_tasks(discover_s=2.0), 10, "the task in the server's status")
    [running] = canceler.running_tasks()
    assert canceler.cancel_task(running if by_id else None, wait_s=10.0) == {running: GoalStatus.STATUS_CANCELED}
    assert discarded, "the server's cancel answer never reached the client's take"
    wait_for(lambda: runs, 10, "the canceled run's end")
    assert runs[0].goal_id == running and runs[0].result.reason == "canceled"
