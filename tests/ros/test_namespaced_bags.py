"""A namespaced robot's bag, end to end over DDS: the real recorder_node in /left records only /left's topics and
writes them as the root namespace names them; replay_node in another namespace republishes them under its own."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("robopin_interfaces.msg")

from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from robopin.bags import TrialBag

from .rostest_utils import wait_for, wait_future

pytestmark = pytest.mark.ros


def test_a_bag_recorded_in_a_namespace_replays_under_another(ros_context, tmp_path):
    from robopin_ros.recorder_node import RecorderNode
    from robopin_ros.replay_node import ReplayNode

    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    robots = {ns: Node("joint_source", namespace=ns, context=ros_context) for ns in ("/left", "/right")}
    publishers = {ns: node.create_publisher(JointState, "joint_states", 10) for ns, node in robots.items()}
    recorder = RecorderNode(context=ros_context, namespace="/left",
                            parameter_overrides=[Parameter("output_dir", value=str(tmp_path / "bags"))])
    probe = Node("bag_probe", context=ros_context)
    replayed: list[JointState] = []
    probe.create_subscription(JointState, "/replay/joint_states", replayed.append, 50)
    start = probe.create_client(Trigger, "/left/recorder_node/start")
    stop = probe.create_client(Trigger, "/left/recorder_node/stop")
    for node in (*robots.values(), recorder, probe):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    running = threading.Event()

    def publish() -> None:
        while not running.wait(0.02):
            for ns, publisher in publishers.items():
                publisher.publish(JointState(name=[f"{ns[1:]}_joint1"], position=[0.1]))

    source = threading.Thread(target=publish, daemon=True)
    source.start()
    replay = None
    try:
        wait_for(lambda: "/left/joint_states" in recorder._subscribed, 20.0, "the recorder subscribing /left's states")
        assert "/right/joint_states" not in recorder._subscribed
        assert start.wait_for_service(timeout_sec=20.0)
        answer = wait_future(start.call_async(Trigger.Request()), 20.0, "the recorder's start")
        assert answer.success, answer.message
        time.sleep(1.0)
        assert wait_future(stop.call_async(Trigger.Request()), 20.0, "the recorder's stop").success
        bag_path = answer.message
        with TrialBag(bag_path) as bag:
            assert "/joint_states" in bag.topics and not [t for t in bag.topics if t.startswith(("/left", "/right"))]
            names = {tuple(msg.name) for _, msg in bag.decoded(["/joint_states"])}
        assert names == {("left_joint1",)}  # only its own robot's states

        replay = ReplayNode(context=ros_context, namespace="/replay",
                            parameter_overrides=[Parameter("bag", value=bag_path), Parameter("rate", value=1.0)])
        executor.add_node(replay)
        wait_for(replay.done.is_set, 30.0, "the replay to finish")
        wait_for(lambda: len(replayed) > 0, 10.0, "replayed states on /replay/joint_states")
        assert {tuple(m.name) for m in replayed} == {("left_joint1",)}
    finally:
        running.set()
        source.join(timeout=5)
        executor.shutdown()
        spinner.join(timeout=5)
        for node in (*robots.values(), recorder, probe, *([replay] if replay is not None else [])):
            node.destroy_node()
