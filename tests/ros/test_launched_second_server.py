"""One stack per namespace on the launch path: under ``ros2 launch`` every node runs in a process of its own and no
``robopin up`` probes the graph first, so a node that serves an action refuses to start while a living process
already serves that action in its namespace and domain (``runtime.run_node`` → ``actions.served_elsewhere``).

Real node processes (``python -m robopin_ros.task_node``, as the launch file starts them) over DDS.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros


def _planner(*ros_args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "robopin_ros.task_node", "--ros-args", *ros_args],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_ready(node, name: str, timeout_s: float) -> bool:
    """Until the node process answers ``~/ready`` (served once its own start-up checks passed)."""
    from std_srvs.srv import Trigger

    client = node.create_client(Trigger, f"{name}/ready")
    try:
        return client.wait_for_service(timeout_sec=timeout_s)
    finally:
        node.destroy_client(client)


def test_a_second_launched_planner_in_the_namespace_is_refused_naming_the_first(ros_context):
    import rclpy

    watcher = rclpy.create_node("launch_watcher", context=ros_context)
    first = _planner()
    others: list[subprocess.Popen] = []
    try:
        assert _wait_ready(watcher, "/task_node", 60.0), "the first planner never got ready"
        second = _planner()
        others.append(second)
        _out, err = second.communicate(timeout=60.0)
        print(f"\nsecond planner: exit {second.returncode}: {err}")
        assert second.returncode == 1, err
        assert f"/robopin/execute_task is served by /task_node (process {first.pid & 0xFFFF} on this host)" in err
        assert first.poll() is None, "the first planner must keep running"

        # Its own namespace is another stack's place: it starts.
        elsewhere = _planner("-r", "__ns:=/left")
        others.append(elsewhere)
        assert _wait_ready(watcher, "/left/task_node", 60.0), elsewhere.poll()
        assert elsewhere.poll() is None, elsewhere.communicate(timeout=5.0)
    finally:
        for process in (*others, first):
            if process.poll() is None:
                process.terminate()
                process.communicate(timeout=30.0)
        watcher.destroy_node()


# The start-up window missed the first planner (on a busy machine discovery took longer than it looked): the
# process replaces only that one look, so everything after it (the late watch) runs as shipped.
_MISSED_AT_START = """
import robopin_ros.runtime as runtime
runtime.served_elsewhere = lambda node: {}
from robopin_ros.task_node import main
raise SystemExit(main())
"""


def test_a_planner_that_missed_an_older_one_at_start_stops_once_it_finds_it(ros_context):
    import rclpy

    watcher = rclpy.create_node("late_watcher", context=ros_context)
    first = _planner()
    late = None
    try:
        assert _wait_ready(watcher, "/task_node", 60.0), "the first planner never got ready"
        late = subprocess.Popen([sys.executable, "-c", _MISSED_AT_START, "--ros-args"], env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _out, err = late.communicate(timeout=60.0)
        print(f"\nlate planner: exit {late.returncode}: {err}")
        assert late.returncode == 1, err
        assert "/task_node stops: /robopin/execute_task is served by /task_node " \
               f"(process {first.pid & 0xFFFF} on this host)" in err, err
        assert first.poll() is None, "the older planner must keep running"
    finally:
        for process in (late, first):
            if process is not None and process.poll() is None:
                process.terminate()
                process.communicate(timeout=30.0)
        watcher.destroy_node()
