"""recorder_node: records each task of a trial to its own rosbag2 MCAP bag, raw CDR straight to disk.

Subscribes with ``raw=True`` to every configured topic (cameras, camera info, joint states, arm pose,
reasoning, targets, trajectories, action feedback and status, ``/tf_static``) as soon as it appears
in the graph, and hands the bytes to :class:`robopin.bags.TrialRecorder` without decoding them. A
bag starts when a task starts and stops when it ends: automatically from the ExecuteTask action's
status topic (one bag per goal, named by the goal id), or by hand with ``~/start`` / ``~/stop``
(std_srvs/Trigger). Static transforms are re-written at the start of every bag. Run::

    ros2 run robopin_ros recorder_node --ros-args -p output_dir:=trials/bags
"""

from __future__ import annotations

import fnmatch
import importlib
import threading
import time
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from robopin.bags.recorder import TF_STATIC_TOPIC, TrialRecorder
from robopin_ros.runtime import run_node

DEFAULT_TOPICS = [
    "/cameras/*/color/image_raw", "/cameras/*/color/camera_info", "/cameras/*/aligned_depth_to_color/image_raw",
    "/joint_states", "/arm/ee_pose", "/robopin/reasoning", "/robopin/targets", "/robopin/planned_trajectory",
    "/robopin/targets/markers", "*/_action/feedback", "*/_action/status", TF_STATIC_TOPIC,
]
_TERMINAL = {4, 5, 6}  # action_msgs/GoalStatus SUCCEEDED, CANCELED, ABORTED
_ACTIVE = {1, 2, 3}  # ACCEPTED, EXECUTING, CANCELING

# Our camera node publishes reliably; a reliable subscriber with 30 frames of history records without
# loss (best effort drops frames under load). realsense-ros publishers that are best-effort need
# sensor_reliability:=best_effort.
_SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30, reliability=ReliabilityPolicy.RELIABLE)
_RELIABLE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
_LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)


def message_class(type_name: str) -> Any:
    """The rclpy class of ``pkg/msg/Name`` or an action part such as ``pkg/action/Name_FeedbackMessage``."""
    package, kind, name = type_name.split("/")
    module = importlib.import_module(f"{package}.{kind}")
    if kind == "action" and "_" in name:
        action, part = name.split("_", 1)
        return getattr(getattr(module, action).Impl, part.replace("_", ""))
    return getattr(module, name)


class RecorderNode(Node):
    """Subscribes raw to the configured topics and writes one bag per task."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("recorder_node", **kwargs)
        self.declare_parameter("output_dir", "trials/bags")
        self.declare_parameter("topics", DEFAULT_TOPICS)
        self.declare_parameter("task_status_topic", "/robopin/execute_task/_action/status")
        self.declare_parameter("discovery_period_s", 0.5)
        self.declare_parameter("queue_size", 2000)
        self.declare_parameter("sensor_reliability", "reliable")
        self.sensor_qos = _SENSOR_QOS
        if str(self.get_parameter("sensor_reliability").value) == "best_effort":
            self.sensor_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30,
                                         reliability=ReliabilityPolicy.BEST_EFFORT)
        self.patterns = [str(p) for p in self.get_parameter("topics").value]
        self.recorder = TrialRecorder(str(self.get_parameter("output_dir").value),
                                      queue_size=int(self.get_parameter("queue_size").value))
        self.task_status_topic = str(self.get_parameter("task_status_topic").value)
        self._subscribed: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._auto_goal = ""
        self.unsupported: dict[str, str] = {}
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_timer(float(self.get_parameter("discovery_period_s").value), self._discover)
        self._discover()

    def _wanted(self, topic: str) -> bool:
        return any(fnmatch.fnmatchcase(topic, pattern) for pattern in self.patterns)

    def _discover(self) -> None:
        """Subscribe to configured topics that appeared in the graph since the last look."""
        for topic, types in self.get_topic_names_and_types():
            if topic in self._subscribed or topic in self.unsupported or not self._wanted(topic):
                continue
            type_name = types[0]
            try:
                cls = message_class(type_name)
            except (ImportError, AttributeError, ValueError) as error:
                self.unsupported[topic] = type_name
                self.get_logger().warning(f"cannot record {topic} ({type_name}): {error}")
                continue
            qos = _LATCHED_QOS if topic == TF_STATIC_TOPIC else (
                self.sensor_qos if topic.startswith("/cameras/") else _RELIABLE_QOS)
            self._subscribed[topic] = self.create_subscription(
                cls, topic, self._make_callback(topic, type_name), qos, raw=True)
            self.get_logger().info(f"recording {topic} ({type_name})")

    def _make_callback(self, topic: str, type_name: str):
        recorder = self.recorder
        is_status = topic == self.task_status_topic

        def on_message(data: bytes) -> None:
            if is_status:
                self._on_task_status(data)
            recorder.record(topic, type_name, data, time.time_ns())

        return on_message

    def _on_task_status(self, data: bytes) -> None:
        """Start a bag when a task goal becomes active, stop it when that goal ends."""
        status = self.recorder.typestore.deserialize_cdr(data, "action_msgs/msg/GoalStatusArray")
        with self._lock:
            for goal in status.status_list:
                goal_id = bytes(goal.goal_info.goal_id.uuid).hex()
                if goal.status in _ACTIVE and not self.recorder.recording:
                    self._auto_goal = goal_id
                    self.recorder.start(f"task-{goal_id[:12]}")
                elif goal.status in _TERMINAL and goal_id == self._auto_goal and self.recorder.recording:
                    self._auto_goal = ""
                    self.recorder.stop()

    def _on_start(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Start recording a new bag now (task id from the wall clock)."""
        with self._lock:
            try:
                path = self.recorder.start(time.strftime("trial-%Y%m%d-%H%M%S-") + f"{time.time_ns() % 10**9:09d}")
            except Exception as error:
                response.success, response.message = False, str(error)
                return response
        response.success, response.message = True, str(path)
        return response

    def _on_stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Stop the current bag and report what it holds."""
        with self._lock:
            stats = self.recorder.stop()
            self._auto_goal = ""
        if stats is None:
            response.success, response.message = False, "not recording"
        else:
            response.success = True
            response.message = f"{stats.path}: {stats.total} messages, {stats.dropped} dropped"
        return response

    def destroy_node(self) -> None:
        self.recorder.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    return run_node(RecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
