"""Two robots in one ROS graph, told apart by namespace: each takes its own instruction and sees only its own names.

The real command line, as a user runs it in four shells of one ROS domain: ``robopin up config/sim_panda.yaml
--namespace left`` and ``--namespace right`` (the shipped system file twice, so every node name is the same and
only the namespace keeps them apart; two scenes with different objects), then ``robopin instruct --namespace
left|right`` with each scene's own instruction, at the same time. The oracle grounds an instruction in its own
scene and refuses what it cannot ground (there is no tray in the cube scene), so an instruction reaching the
wrong robot fails its task. A probe in this process reads the graph over DDS: every topic, service and action
of each robot's nodes lies under its namespace, but for the names that are global by design
(:data:`robopin.system.names.GLOBAL_NAMES`). A namespaced robot's bag then re-plans with ``bag replan``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from robopin.bags import TrialBag
from robopin.system.names import GLOBAL_NAMES

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = ROOT / "config" / "sim_panda.yaml"
SCENES = {"left": "sanity_cube", "right": "sanity_tray"}


class _Process:
    """A robopin command in its own process, its output collected line by line."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.popen = subprocess.Popen([sys.executable, "-m", "robopin.cli", *args], cwd=cwd, env=dict(os.environ),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.popen.stdout), daemon=True)
        self._reader.start()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_line(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(line.strip() == text for line in list(self.lines)):
            assert self.popen.poll() is None, \
                f"exited ({self.popen.returncode}) before {text!r}:\n{self.output[-4000:]}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout_s} s:\n{self.output[-4000:]}"
            time.sleep(0.1)

    def wait(self, timeout_s: float) -> int:
        try:
            code = self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.popen.send_signal(signal.SIGUSR1)  # robopin_ros.runtime prints every thread's stack
            time.sleep(0.5)
            self.popen.kill()
            self.popen.wait()
            code = -9
        self._reader.join(timeout=5)
        return code

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        return self.wait(60)


class _GraphProbe:
    """A node in the root namespace of this domain that reads who creates which names."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = Node("namespace_probe", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def nodes_in(self, namespace: str) -> set[str]:
        return {name for name, ns in self.node.get_node_names_and_namespaces() if ns == namespace}

    def names_of(self, name: str, namespace: str) -> set[str]:
        """Every topic, service and action endpoint of one node (actions show as their topics and services)."""
        node = self.node
        queries = (node.get_publisher_names_and_types_by_node, node.get_subscriber_names_and_types_by_node,
                   node.get_service_names_and_types_by_node, node.get_client_names_and_types_by_node)
        return {topic for query in queries for topic, _ in query(name, namespace)}

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.thread.join(timeout=5)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def test_two_namespaced_sim_robots_in_one_graph_each_take_their_own_instruction(tmp_path):
    from robopin.sim.tasks import load_scenario

    system_nodes = {"camera_static", "camera_wrist", "arm_driver", "projection_node", "motion_planner_node",
                    "task_node", "state_publisher_node", "recorder_node"}
    instructions = {ns: load_scenario(scene).instruction for ns, scene in SCENES.items()}
    probe = _GraphProbe()
    stacks: dict[str, _Process] = {}
    try:
        for ns, scene in SCENES.items():
            (tmp_path / ns).mkdir()
            stacks[ns] = _Process("up", str(SYSTEM), "--namespace", ns, "--scenario", scene, "--ready-timeout", "600",
                                  cwd=tmp_path / ns)
        started = time.monotonic()
        for up in stacks.values():
            up.wait_line("ready", 900)
        ready_s = time.monotonic() - started

        # The graph: both stacks' nodes by the same names, each in its namespace, every name of theirs under it.
        deadline = time.monotonic() + 120
        while any(not system_nodes <= probe.nodes_in(f"/{ns}") for ns in SCENES):
            assert time.monotonic() < deadline, {ns: sorted(probe.nodes_in(f"/{ns}")) for ns in SCENES}
            time.sleep(0.2)
        for ns in SCENES:
            names = {node: probe.names_of(node, f"/{ns}") for node in probe.nodes_in(f"/{ns}")}  # helper nodes too
            assert f"/{ns}/robopin/instruct" in names["task_node"]
            assert f"/{ns}/robopin/execute_task/_action/status" in names["task_node"]
            assert f"/{ns}/tf" in names["state_publisher_node"]
            outside = {node: sorted(n for n in found if not n.startswith(f"/{ns}/") and n not in GLOBAL_NAMES)
                       for node, found in names.items()}
            assert all(not names for names in outside.values()), outside
        root_topics = [t for t, _ in probe.node.get_topic_names_and_types() if t.split("/")[1] not in SCENES]
        assert set(root_topics) <= set(GLOBAL_NAMES), root_topics  # nothing of either robot in the root namespace

        # Each robot its own instruction, at the same time, through its own namespaced ExecuteTask.
        tasks = {ns: _Process("instruct", instructions[ns], "--namespace", ns, "--wait", "120", cwd=tmp_path / ns)
                 for ns in SCENES}
        started = time.monotonic()
        codes = {ns: task.wait(900) for ns, task in tasks.items()}
        both_s = time.monotonic() - started
        for ns, task in tasks.items():
            assert codes[ns] == 0 and ": SUCCESS" in task.output, f"{ns}:\n{task.output[-4000:]}"
        print(f"\ntwo namespaced stacks ready in {ready_s:.1f} s; both tasks ended in {both_s:.1f} s; "
              + "; ".join(f"{ns}: {next(line.strip() for line in task.lines if ': SUCCESS' in line)}"
                          for ns, task in tasks.items()))
    finally:
        probe.close()
        outputs = {ns: (up.stop(), up.output) for ns, up in stacks.items()}
    for ns, (code, output) in outputs.items():
        assert code == 0, f"robopin up --namespace {ns}:\n{output[-4000:]}"

    # Each robot's recorder wrote its task in root-namespace names, with its own instruction.
    for ns in SCENES:
        (bag_path,) = sorted(p.parent for p in (tmp_path / ns / "trials").rglob("metadata.yaml"))
        with TrialBag(bag_path) as bag:
            topics = set(bag.topics)
            reasoning = [r for _, r in bag.decoded(["/robopin/reasoning"])]
        assert {"/cameras/static/color/image_raw", "/tf_static", "/robopin/execute_task/_action/status",
                "/robopin/parameters/projection_node"} <= topics
        assert not [t for t in topics if t.startswith(("/left/", "/right/"))], sorted(topics)
        assert reasoning and {r.instruction for r in reasoning} == {instructions[ns]}

    from robopin.cli import main

    assert main(["bag", "replan", str(bag_path), "--backend", "recorded", "--tolerance-m", "0.002",
                 "--tolerance-px", "0.5"]) == 0
