"""Several robots on one network, on loopback: one ROS domain per robot isolates them completely; inside
one domain a namespace separates a second robot only where its names are relative (docs/runbook.md).

Each robot is its own process (pybullet world + the real arm_driver_node), as on a robot PC; the test
probes each domain with an rclpy context of that domain.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from tests.ros.rostest_utils import start_process, stop_process, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]

PANDA_JOINT = "panda_joint1"


def two_free_domains() -> tuple[int, int]:
    """Two domain IDs next to this run's own (so parallel runs, which differ by pid, rarely meet)."""
    base = int(os.environ["ROS_DOMAIN_ID"])
    first = (base + 33) % 101 + 1
    second = (first + 33) % 101 + 1
    assert len({base, first, second}) == 3
    return first, second


class DomainProbe:
    """An rclpy context and node in one domain that records who publishes joint states, and how."""

    def __init__(self, domain_id: int, topics: tuple[str, ...]) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = Node("deploy_probe", context=self.context)
        self.joint_names: dict[str, set[str]] = {topic: set() for topic in topics}
        self._lock = threading.Lock()
        for topic in topics:
            self.node.create_subscription(JointState, topic, lambda msg, t=topic: self._record(t, msg), 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _record(self, topic: str, message: JointState) -> None:
        with self._lock:
            self.joint_names[topic].update(message.name)

    def names(self, topic: str) -> set[str]:
        with self._lock:
            return set(self.joint_names[topic])

    def services(self) -> set[str]:
        return {name for name, _ in self.node.get_service_names_and_types()}

    def call_stop(self, service: str) -> Trigger.Response:
        client = self.node.create_client(Trigger, service)
        assert client.wait_for_service(timeout_sec=20.0), f"{service} not found"
        future = client.call_async(Trigger.Request())
        wait_for(future.done, 20.0, f"{service} answer")
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.thread.join(timeout=5)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def robot(robot_name: str, domain_id: int, *ros_args: str):
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain_id))
    return start_process(["-m", "tests.deploy.sim_robot_process", robot_name, *ros_args], env=env)


def test_one_domain_per_robot_isolates_them_and_a_namespace_separates_a_second_robot_in_one_domain():
    domain_a, domain_b = two_free_domains()
    processes = [
        robot("panda", domain_a),
        robot("xarm6", domain_b),
        # A second robot inside domain A, in namespace /robot_b with relative names.
        robot("xarm6", domain_a, "-r", "__ns:=/robot_b", "-p", "prefix:=robopin/arm", "-p",
              "joint_states_topic:=joint_states"),
    ]  # fmt: skip
    probe_a = probe_b = None
    try:
        probe_a = DomainProbe(domain_a, ("/joint_states", "/robot_b/joint_states"))
        probe_b = DomainProbe(domain_b, ("/joint_states",))
        wait_for(lambda: probe_a.names("/joint_states"), 90.0, "panda joint states in domain A")
        wait_for(lambda: probe_b.names("/joint_states"), 90.0, "xArm joint states in domain B")
        wait_for(lambda: probe_a.names("/robot_b/joint_states"), 90.0, "namespaced xArm joint states in domain A")
        time.sleep(1.0)  # let any leaked message arrive before judging

        # Domains: each probe hears only its own robot.
        assert all(name.startswith("panda_") for name in probe_a.names("/joint_states"))
        assert PANDA_JOINT not in probe_b.names("/joint_states")
        assert probe_b.names("/joint_states") == probe_a.names("/robot_b/joint_states")
        # Namespace: the second robot's relative names moved under /robot_b, without mixing the two streams.
        assert not any(name.startswith("panda_") for name in probe_a.names("/robot_b/joint_states"))
        services_a = probe_a.services()
        assert {"/robopin/arm/stop", "/robot_b/robopin/arm/stop"} <= services_a
        assert "/robot_b/robopin/arm/stop" not in probe_b.services()

        # A stop sent in domain A to robot B's namespace reaches only that driver.
        assert probe_a.call_stop("/robot_b/robopin/arm/stop").success
        assert probe_b.call_stop("/robopin/arm/stop").success
    finally:
        for probe in (probe_a, probe_b):
            if probe is not None:
                probe.close()
        outputs = [stop_process(process, timeout_s=20.0) for process in processes]
    for code, output in outputs:
        assert code == 0, output[-3000:]
