"""recorder_node over real DDS: rclpy publishers → raw subscriptions → MCAP bag → read back with rosbags."""

from __future__ import annotations

import array
import time

import numpy as np
import pytest

pytest.importorskip("robopin_interfaces.msg")

from rclpy.executors import SingleThreadedExecutor
from rclpy.serialization import deserialize_message

from robopin.bags import TrialBag

from .rostest_utils import SpunNode, wait_for, wait_future


def _image(k: int):
    from sensor_msgs.msg import Image

    rgb = np.full((48, 64, 3), k, np.uint8)
    msg = Image(height=48, width=64, encoding="rgb8", step=64 * 3)
    msg.header.stamp.sec, msg.header.frame_id = 100 + k, "static_optical"
    msg.data = array.array("B", rgb.tobytes())
    return msg


def _reasoning(k: int):
    from robopin_interfaces.msg import Anchor, PinnedReasoning

    return PinnedReasoning(task_id="t", step=k, instruction="put the duck on the plate", raw_text=f"<think>{k}</think>",
                           view_names=["static"], valid=True,
                           anchors=[Anchor(kind="obj", name="duck", id="obj_01", img_idx=0, x=500.0, y=400.0,
                                           u=320.0 + k, v=192.0, char_offset=7)])


def _feedback(k: int):
    from robopin_interfaces.action import ExecuteTask

    msg = ExecuteTask.Impl.FeedbackMessage()
    msg.goal_id.uuid = array.array("B", bytes(range(16)))
    msg.feedback.stage, msg.feedback.step, msg.feedback.detail = "reasoning", k, "thinking"
    return msg


def test_recorder_node_writes_every_published_message_intact(ros_context, tmp_path):
    from robopin_interfaces.action import ExecuteTask
    from robopin_interfaces.msg import PinnedReasoning
    from robopin_ros.recorder_node import RecorderNode
    from sensor_msgs.msg import Image
    from std_srvs.srv import Trigger

    recorder = RecorderNode(context=ros_context, parameter_overrides=[])
    recorder.set_parameters([])
    recorder.recorder.root = tmp_path  # record into the test's folder
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(recorder)
    import threading

    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    client = SpunNode("bag_test_publisher", ros_context)
    try:
        node = client.node
        publishers = {
            "/cameras/static/color/image_raw": (node.create_publisher(Image, "/cameras/static/color/image_raw", 10),
                                                Image, _image),
            "/robopin/reasoning": (node.create_publisher(PinnedReasoning, "/robopin/reasoning", 10), PinnedReasoning,
                                   _reasoning),
            "/robopin/execute_task/_action/feedback": (
                node.create_publisher(ExecuteTask.Impl.FeedbackMessage, "/robopin/execute_task/_action/feedback", 10),
                ExecuteTask.Impl.FeedbackMessage, _feedback),
        }
        wait_for(lambda: set(publishers) <= set(recorder._subscribed), 10.0, "the recorder to subscribe")
        wait_for(lambda: all(p.get_subscription_count() > 0 for p, _, _ in publishers.values()), 10.0, "matching")
        start = node.create_client(Trigger, "/recorder_node/start")
        assert start.wait_for_service(timeout_sec=10.0)
        assert wait_future(start.call_async(Trigger.Request()), 10.0, "start").success
        sent: dict[str, list] = {topic: [] for topic in publishers}
        for k in range(5):
            for topic, (publisher, _, make) in publishers.items():
                message = make(k)
                publisher.publish(message)
                sent[topic].append(message)
            time.sleep(0.02)
        wait_for(lambda: recorder.recorder._writer is not None and
                 recorder.recorder._writer._queue.qsize() == 0 and
                 sum(recorder.recorder._writer.stats.messages.get(t, 0) for t in publishers) == 15, 10.0,
                 "15 messages to reach the bag")
        stop = node.create_client(Trigger, "/recorder_node/stop")
        response = wait_future(stop.call_async(Trigger.Request()), 10.0, "stop")
        assert response.success, response.message
    finally:
        client.close()
        executor.shutdown()
        spinner.join(timeout=5)
        recorder.destroy_node()
    (bag_path,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    with TrialBag(bag_path) as bag:
        topics = bag.topics
        received: dict[str, list] = {topic: [] for topic in publishers}
        for message in bag.messages(list(publishers)):
            received[message.topic].append(deserialize_message(message.data, publishers[message.topic][1]))
        # the custom types decode with rosbags too (definitions registered in the bag)
        decoded = [bag.decode(m) for m in bag.messages(["/robopin/reasoning"])]
        annotations = [bag.decode(m) for m in bag.messages(["/cameras/static/color/pinned_annotations"])]
    assert topics["/robopin/reasoning"].msgtype == "robopin_interfaces/msg/PinnedReasoning"
    for topic in publishers:
        assert received[topic] == sent[topic], topic  # compare messages, not bytes (Fast CDR padding)
    assert [d.anchors[0].u for d in decoded] == [320.0 + k for k in range(5)]
    assert [a.circles[0].position.x for a in annotations] == [320.0 + k for k in range(5)]


def test_rclpy_serialized_messages_are_trimmed_to_the_cdr_rosbags_and_dds_carry():
    """rclpy's serialize_message pads past the message when a sequence is empty; the recorder cuts it."""
    from builtin_interfaces.msg import Duration
    from rclpy.serialization import deserialize_message, serialize_message
    from rosbags.serde import SerdeError
    from trajectory_msgs.msg import JointTrajectoryPoint

    from robopin.bags.typestore import robopin_typestore, trim_cdr

    typestore = robopin_typestore()
    point = JointTrajectoryPoint(positions=[0.5, 0.25], velocities=[0.1, 0.0], accelerations=[], effort=[],
                                 time_from_start=Duration(sec=1, nanosec=5))
    padded = serialize_message(point)
    with pytest.raises(SerdeError, match="size mismatch"):
        typestore.deserialize_cdr(padded, "trajectory_msgs/msg/JointTrajectoryPoint")
    exact = trim_cdr(typestore, padded, "trajectory_msgs/msg/JointTrajectoryPoint")
    assert len(exact) < len(padded)
    decoded = typestore.deserialize_cdr(exact, "trajectory_msgs/msg/JointTrajectoryPoint")
    assert list(decoded.positions) == [0.5, 0.25] and decoded.time_from_start.nanosec == 5
    assert deserialize_message(exact, JointTrajectoryPoint) == point
