"""recorder_node follows an ExecuteTask goal over real DDS: bag per goal, feedback, status and the fetched result."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("robopin_interfaces.action")

from rclpy.action import ActionServer
from rclpy.executors import MultiThreadedExecutor
from rclpy.serialization import deserialize_message
from robopin_ros.actions import ActionClient

from robopin.bags import TrialBag

from .rostest_utils import SpunNode, wait_for, wait_future, wait_result

ACTION = "/robopin/execute_task"


def test_recorder_node_records_one_bag_per_task_goal_with_its_result(ros_context, tmp_path):
    from rclpy.parameter import Parameter
    from robopin_interfaces.action import ExecuteTask
    from robopin_interfaces.msg import PinnedReasoning
    from robopin_ros.recorder_node import RecorderNode

    release = threading.Event()

    def execute(goal_handle):
        for step in range(3):
            feedback = ExecuteTask.Feedback(stage="reasoning", step=step, detail=goal_handle.request.instruction)
            goal_handle.publish_feedback(feedback)
            release.wait(0.05)
        goal_handle.succeed()
        return ExecuteTask.Result(success=True, task_id="t-1", message="done", steps_executed=1,
                                  reasoning_steps=[PinnedReasoning(task_id="t-1", raw_text="<think>ok</think>")])

    server = SpunNode("fake_planner", ros_context)
    ActionServer(server.node, ExecuteTask, ACTION, execute)
    recorder = RecorderNode(context=ros_context, parameter_overrides=[
        Parameter("output_dir", value=str(tmp_path)), Parameter("discovery_period_s", value=0.1)])
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(recorder)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    client_node = SpunNode("task_client", ros_context)
    try:
        status_topic = f"{ACTION}/_action/status"
        wait_for(lambda: status_topic in recorder._result_clients and f"{ACTION}/_action/feedback" in
                 recorder._subscribed, 10.0, "the recorder to follow the task action")
        client = ActionClient(client_node.node, ExecuteTask, ACTION)
        assert client.wait_for_server(timeout_sec=10.0)
        wait_for(recorder._result_clients[status_topic][0].service_is_ready, 10.0, "get_result service")
        handle = wait_future(client.send_goal_async(ExecuteTask.Goal(instruction="put the duck away")), 10.0, "goal")
        assert handle.accepted
        result = wait_result(handle, 20.0, "result").result
        assert result.success
        wait_for(lambda: recorder.recorder.finished, 10.0, "the task's bag to close")
    finally:
        client_node.close()
        executor.shutdown()
        spinner.join(timeout=5)
        recorder.destroy_node()
        server.close()
    (stats,) = recorder.recorder.finished
    goal_hex = bytes(handle.goal_id.uuid).hex()
    assert stats.path.name == f"task-{goal_hex[:12]}"
    with TrialBag(stats.path) as bag:
        feedback = [deserialize_message(m.data, ExecuteTask.Impl.FeedbackMessage)
                    for m in bag.messages([f"{ACTION}/_action/feedback"])]
        (stored,) = [deserialize_message(m.data, ExecuteTask.Impl.GetResultService.Response)
                     for m in bag.messages([f"{ACTION}/_action/result"])]
        decoded = next(bag.decoded([f"{ACTION}/_action/result"]))[1]  # rosbags reads it too
    assert [f.feedback.step for f in feedback] == [0, 1, 2]
    assert all(bytes(f.goal_id.uuid).hex() == goal_hex for f in feedback)
    assert stored.result == result and stored.status == 4  # SUCCEEDED
    assert decoded.result.reasoning_steps[0].raw_text == "<think>ok</think>"
