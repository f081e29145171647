"""A robopin node's log line is rclpy's own line on /rosout (name, level, text, function, file), no caller search.

rclpy 7.1 (Jazzy) ``RcutilsLogger.log`` resolves its caller with ``inspect.getframeinfo`` on every frame up
the stack (``os.stat`` / ``realpath`` per frame); :class:`robopin_ros.logs.NodeLogger` writes through the
same rcutils call with the caller read from the frame. Both loggers log from one helper here and every field
of the two ``rcl_interfaces/msg/Log`` records must match but the line number.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from rcl_interfaces.msg import Log
from rclpy.node import Node
from robopin_ros.logs import LoggedNode, NodeLogger

from tests.ros.rostest_utils import SpunNode, wait_for

pytestmark = pytest.mark.ros


def _say(logger, text: str, level: str = "info", **filters) -> bool:
    return getattr(logger, level)(text, **filters)


def _say_plain(logger, text: str, level: str = "info") -> bool:
    # rclpy's logger takes one severity per call site: one call each.
    if level == "info":
        return logger.info(text)
    if level == "warning":
        return logger.warning(text)
    return logger.error(text)


@pytest.fixture
def rosout(ros_context):
    listener = SpunNode("rosout_listener", ros_context)
    got: list[Log] = []
    lock = threading.Lock()

    def keep(msg: Log) -> None:
        with lock:
            got.append(msg)

    listener.node.create_subscription(Log, "/rosout", keep, 100)

    def lines(text: str) -> list[Log]:
        with lock:
            return [m for m in got if m.msg == text]

    yield lines
    listener.close()


def test_node_logger_writes_what_rclpy_writes_on_rosout(ros_context, rosout):
    ours = LoggedNode("logged_node", context=ros_context)
    theirs = Node("plain_node", context=ros_context)
    try:
        assert isinstance(ours.get_logger(), NodeLogger)
        time.sleep(0.5)  # the listener's /rosout subscription matches both nodes' rosout publishers
        for level in ("info", "warning", "error"):
            _say(ours.get_logger(), f"ours {level}", level)
            _say_plain(theirs.get_logger(), f"theirs {level}", level)
            wait_for(lambda level=level: rosout(f"ours {level}") and rosout(f"theirs {level}"), 10.0,
                     f"both {level} lines on /rosout")
            mine, rclpys = rosout(f"ours {level}")[0], rosout(f"theirs {level}")[0]
            assert (mine.level, mine.name, mine.file) == (rclpys.level, "logged_node", rclpys.file)
            assert rclpys.name == "plain_node"
            assert mine.function == "_say" and rclpys.function == "_say_plain"
            assert os.path.basename(mine.file) == "test_logs.py"
    finally:
        ours.destroy_node()
        theirs.destroy_node()


def test_one_call_site_may_log_at_two_severities(ros_context, rosout):
    # rclpy refuses this ("Logger severity cannot be changed between calls"); a robopin node need not care.
    node = LoggedNode("two_severities", context=ros_context)
    try:
        time.sleep(0.5)
        for level in ("info", "warning"):
            assert _say(node.get_logger(), f"site {level}", level)
        wait_for(lambda: rosout("site info") and rosout("site warning"), 10.0, "both lines on /rosout")
        assert rosout("site info")[0].level == Log.INFO and rosout("site warning")[0].level == Log.WARN
    finally:
        node.destroy_node()


def test_filters_still_apply_through_rclpy(ros_context, rosout):
    node = LoggedNode("throttled", context=ros_context)
    try:
        time.sleep(0.5)
        logged = [_say(node.get_logger(), "throttled line", throttle_duration_sec=60.0) for _ in range(3)]
        assert logged == [True, False, False]
        assert not node.get_logger().debug("below the level")  # INFO is the default level
        wait_for(lambda: rosout("throttled line"), 10.0, "the throttled line on /rosout")
        time.sleep(0.3)
        assert len(rosout("throttled line")) == 1 and not rosout("below the level")
    finally:
        node.destroy_node()


def test_a_dropped_service_reply_is_reported_once_with_its_meaning():
    import subprocess
    import sys

    # A process of its own: pytest records warnings instead of showing them. The text is what rclpy's
    # Service.send_response warns with when rmw_send_response returns RMW_RET_TIMEOUT.
    script = (
        "import logging, warnings\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "from robopin_ros.logs import explain_dropped_replies\n"
        "explain_dropped_replies()\n"
        "for _ in range(3):\n"
        "    warnings.warn('failed to send response (timeout): client will not receive response', RuntimeWarning)\n"
        "warnings.warn('another warning', RuntimeWarning)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("a service reply was dropped") == 1, run.stderr
    assert "failed to send response" not in run.stderr, run.stderr
    assert "another warning" in run.stderr, run.stderr
