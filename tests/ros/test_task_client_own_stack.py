"""``robopin up``'s own task client never names its stack lost; ``robopin instruct``'s does, after STARVED_S.

``robopin up``'s client (trials, ``--demo``) runs in the stack's interpreter and sends no heartbeat: when the
planner's heartbeat goes unheard there, it is the interpreter both share that is starved, and naming the stack
``stack_lost`` "(its process still runs: hung or starved)" would end a task that is running. The server here is
tests/ros/task_server_fixture.py, which sends no heartbeat at all (a server whose heartbeats go unheard, as a
starved one's do), in the client's process as ``robopin up``'s, or in a process of its own as a stack is to
``robopin instruct``. Its task outlasts STARVED_S (the shipped 15 s).
"""

from __future__ import annotations

import threading

import pytest
from rclpy.executors import MultiThreadedExecutor

from tests.ros.rostest_utils import TESTS_ROS, start_process, stop_process, wait_for

pytestmark = pytest.mark.ros


def _steps() -> int:
    from robopin_ros.actions import STARVED_S

    return int(STARVED_S) + 4  # one-second steps: the task runs past the time a silent server is given


def _run(ros_context, serve, *, deadman: bool) -> tuple:
    """The task as a client with or without a ``deadman`` heartbeat runs it, against the server ``serve()`` starts
    once the client spins (a server started after its client has discovered it when it first answers: rmw_fastrtps
    drops an answer to a client whose reply reader the server has not matched yet). Returns the run and the
    server's own closing output."""
    from robopin_ros.task_client import TaskClient

    client = TaskClient((), deadman=deadman, context=ros_context)
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    server = None
    try:
        server, stop = serve(executor, client)
        run = client.run_task("stack the cubes", timeout_s=120.0, wait_s=30.0)
    finally:
        closing = stop(server) if server is not None else ""
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5.0)
        client.destroy_node()
    return run, closing


def test_instructs_client_calls_a_silent_stack_of_this_host_lost_after_the_starved_time(ros_context):
    from robopin_ros.actions import STARVED_S

    def serve(_executor, client):
        process = start_process([str(TESTS_ROS / "task_server_fixture.py"), "--step-period", "1.0", "--steps",
                                 str(_steps()), "--ros-args", "-r", "__node:=stack_of_its_own"])
        # Sent to once the graph shows it (wait_for_server alone also takes a server whose process is starting).
        wait_for(lambda: any(info.node_name == "stack_of_its_own" for info in client.get_publishers_info_by_topic(
            "/robopin/execute_task/_action/status")), 30.0, "the stack process's task server")
        return process, lambda process: stop_process(process)[1]

    run, closing = _run(ros_context, serve, deadman=True)  # robopin instruct's
    assert "(its process still runs: hung or starved)" in run.stack_lost, (run.stack_lost, run.message, closing)
    silent_s = float(run.stack_lost.split(" for ")[1].split(" s")[0])
    assert STARVED_S <= silent_s < _steps(), run.stack_lost


def test_robopin_ups_own_client_never_calls_its_silent_stack_lost(ros_context):
    # Last in the module: the in-process server stays in this process's graph until Python frees its context.
    from tests.ros.task_server_fixture import TaskServerFixture

    def serve(executor, _client):
        server = TaskServerFixture(1.0, _steps(), context=ros_context)
        executor.add_node(server)

        def stop(node) -> str:
            node.destroy_node()
            return ""

        return server, stop

    run, _ = _run(ros_context, serve, deadman=False)  # robopin up's own client
    assert not run.stack_lost, run.stack_lost
    assert run.result is not None and run.result.success and run.result.steps_executed == _steps(), run.message
