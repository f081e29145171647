"""The launch path's readiness gate: under ``ros2 launch`` every node runs in a process of its own and nothing
supervises the start, so the planner holds tasks until each node named in ``ready_nodes`` answers its
``~/ready`` (std_srvs/Trigger, ``runtime.serve_readiness``) with success.

The real task_node and the real TaskClient over DDS; the peer is a plain node serving ``~/ready`` whose
answer the test sets (it stands for a camera node before its first frame).
"""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.ros


def test_tasks_wait_for_every_named_node_and_run_once_all_are_ready(ros_context):
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from robopin_ros.task_client import TaskClient
    from robopin_ros.task_node import TaskNode
    from std_srvs.srv import Trigger

    from robopin.interfaces import READY

    ready = threading.Event()

    def answer(_request, response):
        response.success = ready.is_set()
        response.message = "ready" if response.success else "no camera frame yet (starting)"
        return response

    planner = TaskNode(context=ros_context, parameter_overrides=[
        Parameter("ready_nodes", value=["camera_static"]), Parameter("ready_wait_s", value=2.0)])
    peer = Node("camera_static", context=ros_context)
    peer.create_service(Trigger, READY, answer)
    client = TaskClient((), context=ros_context)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    for node in (planner, peer, client):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        events = []
        run = client.run_task("put the duck on the red plate", on_event=events.append, timeout_s=30.0)
        print(f"\nbefore the peer is ready: {run.message}")
        assert not run.accepted and run.result is not None and run.result.reason == "not_ready", run.message
        assert "camera_static: no camera frame yet (starting)" in run.message, run.message
        assert events and events[0].stage == "waiting", events

        ready.set()
        events = []
        run = client.run_task("put the duck on the red plate", on_event=events.append, timeout_s=30.0)
        print(f"once it is: {run.message}; {run.result.reason}: {run.result.message}")
        # No camera publishes here: the task now runs and ends on its first observation, not on the gate.
        assert run.accepted and run.result.reason == "stale_frame", (run.message, run.result.reason)
        assert "observing" in [event.stage for event in events], events  # past the gate (polled every 0.5 s)
    finally:
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5.0)
        for node in (client, peer, planner):
            node.destroy_node()
