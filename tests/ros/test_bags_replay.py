"""replay_node over real DDS: a recorded bag republished on schedule, messages equal to the recorded ones."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("robopin_interfaces.msg")

from rclpy.executors import SingleThreadedExecutor
from rclpy.serialization import deserialize_message

from robopin.bags.recorder import record_messages
from robopin.bags.typestore import robopin_typestore

from .rostest_utils import SpunNode, wait_for


def test_replay_node_republishes_on_the_recorded_schedule(ros_context, tmp_path):
    from rclpy.parameter import Parameter
    from robopin_ros.replay_node import ReplayNode
    from sensor_msgs.msg import JointState

    typestore = robopin_typestore()
    types = typestore.types
    period_ns = 50_000_000
    messages = []
    for k in range(10):
        msg = types["sensor_msgs/msg/JointState"](
            header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=k, nanosec=0),
                                                frame_id="base"),
            name=["j1"], position=np.array([0.1 * k]), velocity=np.zeros(0), effort=np.zeros(0))
        messages.append(("/joint_states", "sensor_msgs/msg/JointState",
                         bytes(typestore.serialize_cdr(msg, "sensor_msgs/msg/JointState")), 10**9 + k * period_ns))
    record_messages(tmp_path / "bag", messages, typestore=typestore)

    listener = SpunNode("replay_listener", ros_context)
    received: list[tuple[float, JointState]] = []
    lock = threading.Lock()

    def on_message(data: bytes) -> None:
        with lock:
            received.append((time.monotonic(), deserialize_message(data, JointState)))

    listener.node.create_subscription(JointState, "/joint_states", on_message, 30, raw=True)
    # Replay starts from the node's constructor, so the subscriber exists first.
    node = ReplayNode(context=ros_context, parameter_overrides=[
        Parameter("bag", value=str(tmp_path / "bag")), Parameter("rate", value=1.0)])
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        wait_for(node.done.is_set, 20.0, "the replay to finish")
        wait_for(lambda: len(received) >= 10 or node.stats.total == 10, 5.0, "messages to arrive")
        time.sleep(0.3)
    finally:
        executor.shutdown()
        spinner.join(timeout=5)
        node.destroy_node()
        listener.close()
    assert node.stats.total == 10
    # Discovery can swallow the first messages; every one that arrived must equal the recorded one.
    assert len(received) >= 5
    positions = [round(m.position[0], 6) for _, m in received]
    assert positions == [round(0.1 * k, 6) for k in range(10 - len(received), 10)]
    intervals = np.diff([t for t, _ in received])
    error_ms = np.abs(intervals - period_ns * 1e-9) * 1e3
    print(f"replay interval error p50 {np.median(error_ms):.2f} ms, max {error_ms.max():.2f} ms")
