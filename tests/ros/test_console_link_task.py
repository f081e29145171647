"""The console link's Task: the newest goal's status and, once it ended, its result (how and why), over real ROS."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros


def test_the_link_reports_a_failed_task_with_its_reason(ros_context):
    from rclpy.action import ActionServer
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.operator_console import open_console_link

    from robopin.interfaces import EXECUTE_TASK, action_feedback

    server_node = Node("test_fake_planner", context=ros_context, namespace="/linktest")
    stage_shown = threading.Event()

    def execute(goal_handle):
        # Action feedback is volatile: a message sent before the link's reader has matched the server's writer is
        # lost, and on a busy machine that matching can lag the graph (which the test waits on below) by seconds.
        # The stage is published again until the link has shown it, as the task node publishes its stages
        # throughout a task.
        deadline = time.monotonic() + 30
        while not stage_shown.is_set() and time.monotonic() < deadline:
            goal_handle.publish_feedback(ExecuteTask.Feedback(stage="validating", step=0, detail=""))
            stage_shown.wait(0.1)
        goal_handle.abort()
        return ExecuteTask.Result(success=False, task_id="x", reason="model_declined",
                                  message="the model gave no target: say which one")

    ActionServer(server_node, ExecuteTask, EXECUTE_TASK, execute)
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(server_node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    link = open_console_link(["static"], namespace="/linktest", initialize_logging=False)
    try:
        from robopin_ros.actions import ActionClient

        client = ActionClient(server_node, ExecuteTask, EXECUTE_TASK)
        assert client.wait_for_server(timeout_sec=20)
        # The feedback is published once, at once: sent before the link's subscription matched, it is lost
        # (volatile, as ROS action feedback is), and discovery on a busy machine can take seconds.
        feedback_topic = action_feedback(f"/linktest/{EXECUTE_TASK}")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (link.link.result_client.service_is_ready()
                                                   and server_node.count_subscribers(feedback_topic) > 0):
            time.sleep(0.1)
        client.send_goal_async(ExecuteTask.Goal(instruction="put the duck on the red plate"))
        deadline = time.monotonic() + 30
        task = {}
        while time.monotonic() < deadline:
            task = link.link.task()
            if task.get("stage") == "validating":
                stage_shown.set()
            if task.get("result"):
                break
            time.sleep(0.1)
        assert task.get("status") == "aborted", task
        assert task["result"] == {"success": False, "reason": "model_declined",
                                  "message": "the model gave no target: say which one"}, task
        assert task.get("stage") == "validating"
    finally:
        link.close()
        executor.shutdown()
        server_node.destroy_node()
