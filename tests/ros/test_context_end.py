"""A stack's context ends with its participant: nothing of the middleware outlives the command.

Fast DDS (rmw_fastrtps_cpp, ROS 2 Jazzy's default) runs a participant per rclpy context, with receive and event
threads of its own (``dds.udp.<port>``, ``dds.ev.<n>``). rclpy's shutdown leaves the participant to the context's
handle, and a destroyed node kept in a reference cycle (a node and its action server) keeps that handle until a
garbage collection, at worst the interpreter's last, where a finished `robopin trial` process died of SIGSEGV.
The real rclpy action server and client run in a child process here, as the
task node and task client do.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.ros

_CHILD = textwrap.dedent("""
    import os, sys, threading
    import rclpy
    from rclpy.action import ActionClient, ActionServer
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from control_msgs.action import FollowJointTrajectory
    from robopin_ros.runtime import destroy_when_stopped, end_context

    def participant_threads():
        names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
        # dds.shm.wdog is Fast DDS's process-wide shared-memory watchdog, not a participant's.
        return sorted(n for n in names if n.startswith("dds.") and n != "dds.shm.wdog")

    context = Context()
    context.init(["context_end"])

    def serve_and_stop():
        node = rclpy.create_node("context_end", context=context)
        def execute(goal_handle):
            goal_handle.succeed()
            return FollowJointTrajectory.Result()
        server = ActionServer(node, FollowJointTrajectory, "context_end_action", execute)
        client = ActionClient(node, FollowJointTrajectory, "context_end_action")
        executor = MultiThreadedExecutor(num_threads=2, context=context)
        executor.add_node(node)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        assert client.wait_for_server(timeout_sec=10.0)
        for _ in range(3):
            done = threading.Event()
            future = client.send_goal_async(FollowJointTrajectory.Goal())
            future.add_done_callback(lambda f: f.result().get_result_async().add_done_callback(lambda _r: done.set()))
            assert done.wait(10.0), "the goal never finished"
        # A node that keeps its servers, as every robopin node does: node <-> server is a reference cycle.
        node.kept = (server, client, executor)
        threads = participant_threads()
        assert destroy_when_stopped(executor, spinner, [node])
        return threads

    before = serve_and_stop()
    if sys.argv[1] == "end_context":
        end_context(context)
    else:
        context.try_shutdown()
    print("before", before, "after", participant_threads(), flush=True)
""")


def _threads_after(how: str, ros_env) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", _CHILD, how], env=ros_env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    line = done.stdout.strip().splitlines()[-1]
    before, after = line.removeprefix("before ").split(" after ")
    return before, after


def test_ending_a_context_ends_its_participant_threads(ros_env):
    before, after = _threads_after("end_context", ros_env)
    assert before != "[]", "the participant's threads were not found while it ran"
    assert after == "[]", f"participant threads outlived the context: {after}"


def test_a_shut_down_context_alone_keeps_its_participant_until_a_collection(ros_env):
    """What end_context is for: rclpy's shutdown alone leaves the participant running."""
    before, after = _threads_after("try_shutdown", ros_env)
    assert before != "[]" and after != "[]", (before, after)
