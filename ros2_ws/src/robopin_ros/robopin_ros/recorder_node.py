"""recorder_node: records each task of a trial to its own rosbag2 MCAP bag, raw CDR straight to disk.

Subscribes with ``raw=True`` to every configured topic (cameras, camera info, joint states, arm pose,
reasoning and the drawn views, targets, the workspace cloud, action feedback and status, ``/tf``,
``/tf_static`` and ``/robot_description``) as soon as it appears in the graph, and hands the bytes to
:class:`robopin.bags.TrialRecorder` without decoding them. A bag starts when a task starts and stops
when it ends: automatically from the ExecuteTask action's status topic (one bag per goal, named by the
goal id), or by hand with ``~/start`` / ``~/stop`` (std_srvs/Trigger); run as a process of its own, its
``~/ready`` (runtime.serve_readiness) says whether every camera topic has reached it yet. Static transforms,
``/robot_description`` and the parameters of the nodes named in ``parameter_nodes`` (fetched once
through their parameter services, as ``ros2 param dump`` does, and written as YAML on
``/robopin/parameters/<node>``) are re-written at the start of every bag.

Action results travel on a service, not a topic: when a recorded action's status shows a goal
finished, the node asks the server for the result and writes it on ``<action>/_action/result``
(``<Name>_GetResult_Response``, trimmed to its exact CDR length: see
:func:`robopin.bags.typestore.trim_cdr`), so the task result and the PickPlace trajectories are in the
bag; the planned phases also go on ``/robopin/planned_trajectory`` (JointTrajectory) and, with
``robot`` set, their tool path on ``/robopin/planned_trajectory/markers`` (MarkerArray), which RViz,
Foxglove and ``ros2 bag`` read. The open MCAP chunk is closed every ``flush_interval_s``: a killed
recorder loses about that much (plus however long its writer thread waits for the CPU), and
``robopin bag recover BAG`` makes its bag readable again. Run::

    ros2 run robopin_ros recorder_node --ros-args -p output_dir:=trials/bags
"""

from __future__ import annotations

import fnmatch
import importlib
import threading
import time
from typing import Any

import yaml
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from robopin.bags.recorder import (
    LATCHED_TOPICS,
    PARAMETERS_PREFIX,
    TF_STATIC_TOPIC,
    TrialRecorder,
)
from robopin.bags.typestore import trim_cdr
from robopin.interfaces import (
    ACTION_STATUS_SUFFIX,
    CAMERA_ROOT,
    PLANNED_PATH_MARKERS,
    PLANNED_TRAJECTORY,
    RECORDER_START,
    RECORDER_STOP,
    action_feedback,
    action_get_result,
    action_result,
)
from robopin.system.names import absolute_name, strip_namespace
from robopin.system.node_settings import RecorderSettings, settings_from
from robopin_ros import conversions
from robopin_ros.actions import TERMINAL_STATUSES, ask
from robopin_ros.camera_snapshot import camera_qos, declare_view_topics
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import run_node, steady_timer

# Written by this node from each PickPlace result, named as if it published them (a topic every ROS tool reads;
# the result itself is on <action>/_action/result): one JointTrajectory per planned phase and the tool path as markers.
PLANNED_TRAJECTORY_TOPIC = PLANNED_TRAJECTORY
PLANNED_PATH_MARKERS_TOPIC = PLANNED_PATH_MARKERS
_ACTIVE = {1, 2, 3}  # ACCEPTED, EXECUTING, CANCELING
_PARAMETER_FETCH_S = 2.0  # a parameter fetch unanswered this long is asked again
_MATCH_WAIT_S = 5.0  # readiness waits this long for a new subscription to match one of its topic's publishers

# Our camera node publishes reliably; a reliable subscriber with 100 frames of history (about 0.8 s of
# two camera pairs at 30 Hz) rides out scheduling stalls of a loaded machine without loss, where 30
# frames lost up to a quarter of them in bench_bags. realsense-ros publishers that are best-effort
# need sensor_reliability:=best_effort. Every other topic is recorded with the same profile.
_RELIABLE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
_LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)


def message_class(type_name: str) -> Any:
    """The rclpy class of ``pkg/msg/Name``, a service half or an action part (``pkg/action/Name_FeedbackMessage``,
    ``pkg/action/Name_GetResult_Response``: rosidl's names, as rosbag2 records them)."""
    package, kind, name = type_name.split("/")
    module = importlib.import_module(f"{package}.{kind}")
    if kind == "action" and "_" in name:
        action, part = name.split("_", 1)
        action_class = getattr(module, action)
        if part in ("Goal", "Result", "Feedback"):
            return getattr(action_class, part)
        service, _, half = part.partition("_")  # SendGoal_Request, GetResult_Response
        if half in ("Request", "Response"):
            return getattr(getattr(action_class.Impl, f"{service}Service"), half)
        return getattr(action_class.Impl, part)  # FeedbackMessage
    if kind == "srv" and name.endswith(("_Request", "_Response")):
        service, _, half = name.rpartition("_")
        return getattr(getattr(module, service), half)
    return getattr(module, name)


class RecorderNode(LoggedNode):
    """Subscribes raw to the configured topics and writes one bag per task."""

    # Every callback is a short hand-off to the bag writer's thread; the calls it makes are asynchronous.
    EXECUTOR_THREADS = 1  # robopin_ros.runtime.make_executor

    def __init__(self, **kwargs: Any) -> None:
        self._destroying = threading.Event()
        super().__init__("recorder_node", **kwargs)
        settings = settings_from(RecorderSettings, declare_settings(self, RecorderSettings()))
        # The graph gives absolute names; the bag keeps them as the root namespace has them (TrialRecorder).
        self.namespace = self.get_namespace()
        self.parameter_nodes = [absolute_name(str(n), self.namespace)
                                for n in settings.parameter_nodes]
        self._parameter_clients: dict[str, Any] = {}
        self._parameters_recorded: set[str] = set()  # parameter nodes whose parameters every bag now carries
        self._parameter_fetches: dict[str, float] = {}  # parameter node -> when its fetch under way was asked
        self.result_wait_s = settings.result_wait_s
        self._fetches = threading.Condition()
        self._pending_fetches = 0
        self.sensor_qos = _RELIABLE_QOS
        if settings.sensor_reliability == "best_effort":
            self.sensor_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30,
                                         reliability=ReliabilityPolicy.BEST_EFFORT)
        self.patterns = [absolute_name(str(p), self.namespace) for p in settings.topics]
        # Views whose topics a system names (cameras.<view>.*: a driver's own names and QoS) are recorded
        # with the rest; cameras/<view>/... of our camera_node stays recognised without them.
        self.camera_topics = {absolute_name(topic, self.namespace): topics for topics in declare_view_topics(
            self, settings.views).values() for topic in topics.all_names()}
        self.recorder = TrialRecorder(settings.output_dir, namespace=self.namespace, queue_size=settings.queue_size,
                                      flush_interval_s=settings.flush_interval_s)
        robot = settings.robot
        self.description = None
        if robot:
            from robopin.robots.description import load_description

            self.description = load_description(robot)
        self.task_status_topic = absolute_name(settings.task_status_topic, self.namespace)
        self._subscribed: dict[str, Any] = {}
        self._subscribed_at: dict[str, float] = {}  # topic -> when its subscription was made (monotonic)
        self._heard: set[str] = set()  # topics that delivered a message (set.add: atomic under the GIL)
        self._lock = threading.Lock()
        self._auto_goal = ""
        self.unsupported: dict[str, str] = {}
        self._result_clients: dict[str, tuple[Any, str, str]] = {}  # status topic → (client, topic, type)
        self._fetched: dict[str, set[str]] = {}  # status topic → goal ids whose result was requested
        self.create_service(Trigger, RECORDER_START, self._on_start)
        self.create_service(Trigger, RECORDER_STOP, self._on_stop)
        steady_timer(self, settings.discovery_period_s, self._discover)
        self._discover()

    def _wanted(self, topic: str) -> bool:
        return topic in self.camera_topics or any(fnmatch.fnmatchcase(topic, pattern) for pattern in self.patterns)

    def _is_camera_topic(self, topic: str) -> bool:
        return topic in self.camera_topics or strip_namespace(topic, self.namespace).startswith(f"/{CAMERA_ROOT}/")

    def _camera_qos(self, topic: str) -> QoSProfile:
        """A camera topic's subscription QoS: its view's (history 100), unless sensor_reliability says best effort."""
        topics = self.camera_topics.get(topic)
        if topics is None or self.sensor_qos.reliability == ReliabilityPolicy.BEST_EFFORT:
            return self.sensor_qos
        return camera_qos(topics.qos, depth=self.sensor_qos.depth)

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
            # An action's status is latched by its server (rclpy's qos_profile_action_status_default: transient
            # local): a recorder that found the topic after a goal was accepted still learns the goal runs, and
            # opens its bag (the planner holds the task until the recorder is ready, so nothing is lost).
            latched = strip_namespace(topic, self.namespace) in (TF_STATIC_TOPIC, *LATCHED_TOPICS) \
                or topic.endswith(ACTION_STATUS_SUFFIX)
            qos = _LATCHED_QOS if latched else (
                self._camera_qos(topic) if self._is_camera_topic(topic) else _RELIABLE_QOS)
            self._subscribed[topic] = self.create_subscription(
                cls, topic, self._make_callback(topic, type_name), qos, raw=True)
            self._subscribed_at[topic] = time.monotonic()
            self.get_logger().info(f"recording {topic} ({type_name})")
        self._discover_result_clients()
        self._discover_parameter_nodes()

    def _discover_parameter_nodes(self) -> None:
        """Fetch the parameters of each configured node once it is up (ros2 param dump's services).

        A request goes out only once both services are matched: rclpy sends one to a service it has not
        discovered yet into the void, and the future never completes (a recorder in another process than the
        node finds it late). Even then Fast DDS can drop the reply ("failed to send response (timeout): client will not
        receive response", rmw_fastrtps' rmw_response.cpp, while the server has not yet matched the client's
        reply reader): a fetch that failed, or is unanswered after ``_PARAMETER_FETCH_S``, is asked again.
        """
        from rcl_interfaces.srv import GetParameters, ListParameters

        running = {f"{ns.rstrip('/')}/{name}" for name, ns in self.get_node_names_and_namespaces()}
        for node in self.parameter_nodes:
            if node not in running or node in self._parameters_recorded:
                continue
            if node not in self._parameter_clients:
                self._parameter_clients[node] = (self.create_client(ListParameters, f"{node}/list_parameters"),
                                                 self.create_client(GetParameters, f"{node}/get_parameters"))
            lister, getter = self._parameter_clients[node]
            asked = self._parameter_fetches.get(node)
            if asked is not None and time.monotonic() - asked < _PARAMETER_FETCH_S:
                continue
            if not (lister.service_is_ready() and getter.service_is_ready()):
                continue
            self._parameter_fetches[node] = time.monotonic()

            def on_names(future, node=node, getter=getter) -> None:
                if future.result() is None:
                    self._parameter_fetches.pop(node, None)
                    return
                names = sorted(future.result().result.names)
                getter.call_async(GetParameters.Request(names=names)).add_done_callback(
                    lambda f: self._record_parameters(node, names, f.result()))

            lister.call_async(ListParameters.Request()).add_done_callback(on_names)

    def _record_parameters(self, node: str, names: list[str], response: Any) -> None:
        """Record one node's parameters as YAML on /robopin/parameters/<node> (kept for every later bag)."""
        from rclpy.parameter import parameter_value_to_python
        from std_msgs.msg import String

        self._parameter_fetches.pop(node, None)
        if response is None:  # asked again at the next discovery
            return
        values = {name: parameter_value_to_python(value) for name, value in zip(names, response.values, strict=False)}
        root_name = strip_namespace(node, self.namespace)  # as the bag names it
        text = yaml.safe_dump({root_name.lstrip("/"): values}, sort_keys=True)
        self.recorder.record(f"{PARAMETERS_PREFIX}{root_name}", "std_msgs/msg/String",
                             self._exact(String(data=text), "std_msgs/msg/String"), time.time_ns())
        self._parameters_recorded.add(node)

    def _discover_result_clients(self) -> None:
        """For each recorded action status, a get_result client (the action type comes from its feedback)."""
        types = dict(self.get_topic_names_and_types())
        for status_topic in self._subscribed:
            if not status_topic.endswith(ACTION_STATUS_SUFFIX) or status_topic in self._result_clients:
                continue
            action_name = status_topic.removesuffix(ACTION_STATUS_SUFFIX)
            feedback_type = next(iter(types.get(action_feedback(action_name), [])), "")
            if not feedback_type.endswith("_FeedbackMessage"):
                continue
            action_type = feedback_type[: -len("_FeedbackMessage")]
            try:
                package, _, name = action_type.split("/")
                action = getattr(importlib.import_module(f"{package}.action"), name)
            except (ImportError, AttributeError, ValueError) as error:
                self.get_logger().warning(f"cannot fetch results of {action_name}: {error}")
                continue
            client = self.create_client(action.Impl.GetResultService, action_get_result(action_name))
            self._result_clients[status_topic] = (client, action_result(action_name),
                                                  f"{action_type}_GetResult_Response")

    def _make_callback(self, topic: str, type_name: str):
        recorder = self.recorder
        is_status = topic == self.task_status_topic
        # The task's feedback opens its bag too: a status the server latched reaches a recorder that matched late
        # only after the writer's next heartbeat (Fast DDS: every 3 s by default), while a task held until the
        # stack was ready publishes its first feedback live the moment it starts observing.
        is_feedback = topic == action_feedback(self.task_status_topic.rsplit("/_action/", 1)[0])

        heard = self._heard

        def on_message(data: bytes) -> None:
            if is_feedback:
                self._on_task_feedback(data, type_name)
            recorder.record(topic, type_name, data, time.time_ns())
            heard.add(topic)
            if topic.endswith(ACTION_STATUS_SUFFIX):
                self._on_action_status(topic, data, is_task=is_status)

        return on_message

    def _on_task_feedback(self, data: bytes, type_name: str) -> None:
        """Open the task's bag at its first feedback if its status has not opened it yet."""
        with self._lock:
            if self.recorder.recording:
                return
        message = self.recorder.typestore.deserialize_cdr(data, type_name)
        goal_id = bytes(message.goal_id.uuid).hex()
        with self._lock:
            if not self.recorder.recording and goal_id not in self._fetched.get(self.task_status_topic, set()):
                self._auto_goal = goal_id
                self.recorder.start(f"task-{goal_id[:12]}")

    def _on_action_status(self, topic: str, data: bytes, *, is_task: bool) -> None:
        """Fetch the results of goals that just ended; for the task action, start and stop the bag."""
        status = self.recorder.typestore.deserialize_cdr(data, "action_msgs/msg/GoalStatusArray")
        fetched = self._fetched.setdefault(topic, set())
        for goal in status.status_list:
            goal_id = bytes(goal.goal_info.goal_id.uuid).hex()
            ends_task = False
            with self._lock:
                if is_task and goal.status in _ACTIVE and not self.recorder.recording and goal_id not in fetched:
                    self._auto_goal = goal_id
                    self.recorder.start(f"task-{goal_id[:12]}")
                elif is_task and goal.status in TERMINAL_STATUSES and goal_id == self._auto_goal:
                    ends_task = True
            if goal.status in TERMINAL_STATUSES and goal_id not in fetched:
                fetched.add(goal_id)
                self._fetch_result(topic, goal.goal_info.goal_id, stop_after=ends_task)

    def _fetch_result(self, status_topic: str, goal_id: Any, *, stop_after: bool) -> None:
        """Ask the action server for a finished goal's result and record it (then end the task's bag)."""
        from unique_identifier_msgs.msg import UUID

        entry = self._result_clients.get(status_topic)
        if entry is None or not entry[0].service_is_ready():
            if stop_after:
                self._stop_task_after_fetches()
            return
        client, result_topic, result_type = entry
        request = client.srv_type.Request()
        request.goal_id = UUID(uuid=list(goal_id.uuid))
        with self._fetches:
            self._pending_fetches += 1

        def fetch() -> None:
            try:
                try:  # a reply Fast DDS dropped is asked again
                    response = ask(client, request, self.result_wait_s, self._destroying.is_set)
                except Exception:  # the client was destroyed with the node between two requests
                    if not self._destroying.is_set():
                        raise
                    response = None
                if response is not None and not self._destroying.is_set():
                    stamp_ns = time.time_ns()
                    self.recorder.record(result_topic, result_type, self._exact(response, result_type), stamp_ns)
                    self._record_planned_trajectories(response.result, stamp_ns)
            finally:
                with self._fetches:
                    self._pending_fetches -= 1
                    self._fetches.notify_all()
            if stop_after:
                self._stop_task_after_fetches()

        threading.Thread(target=fetch, name="recorder-result-fetch", daemon=True).start()

    def _stop_task_after_fetches(self) -> None:
        """End the task's bag once the results still being fetched (the last PickPlace's) are in it."""
        def stop() -> None:
            with self._fetches:
                self._fetches.wait_for(lambda: self._pending_fetches == 0, timeout=self.result_wait_s)
            self._stop_task()

        # Off the executor thread: the fetches being waited for complete on the executor.
        threading.Thread(target=stop, name="recorder-stop", daemon=True).start()

    def _record_planned_trajectories(self, result: Any, stamp_ns: int) -> None:
        """Write a motion result's planned phases as JointTrajectory messages and their tool path as markers."""
        from trajectory_msgs.msg import JointTrajectory

        phases = getattr(result, "trajectories", None)  # PickPlace
        if phases is None and isinstance(getattr(result, "trajectory", None), JointTrajectory):  # MoveToPose
            phases = [result.trajectory]
        phases = [p for p in phases or () if isinstance(p, JointTrajectory) and len(p.points)]
        if not phases:
            return
        for phase in phases:
            self.recorder.record(absolute_name(PLANNED_TRAJECTORY_TOPIC, self.namespace),
                                 "trajectory_msgs/msg/JointTrajectory",
                                 self._exact(phase, "trajectory_msgs/msg/JointTrajectory"), stamp_ns)
        if self.description is not None:
            paths = conversions.trajectory_tool_paths(phases, self.description)
            markers = conversions.tool_paths_to_marker_array(paths, "base", self.get_clock().now().to_msg())
            self.recorder.record(absolute_name(PLANNED_PATH_MARKERS_TOPIC, self.namespace),
                                 "visualization_msgs/msg/MarkerArray",
                                 self._exact(markers, "visualization_msgs/msg/MarkerArray"), stamp_ns)

    def _exact(self, msg: Any, type_name: str) -> bytes:
        """A message this node built or was answered with, serialized as DDS would deliver it."""
        from rclpy.serialization import serialize_message

        return trim_cdr(self.recorder.typestore, serialize_message(msg), type_name)

    def _stop_task(self) -> None:
        with self._lock:
            self._auto_goal = ""
            if self.recorder.recording:
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

    def not_ready(self) -> list[str]:
        """Recorded topics in the graph the recorder has not subscribed to yet, camera topics it has not heard
        from yet, and running parameter nodes whose parameters it has not recorded yet.

        A task's bag must hold the frames of its first observation and the projection's parameters; a
        recorder that found a camera's topics (graph polling every ``discovery_period_s``, then DDS
        matching) after the planner observed would write a bag that cannot be replayed, so bring-up waits
        for this before the first task.
        """
        waiting = []
        running = {f"{ns.rstrip('/')}/{name}" for name, ns in self.get_node_names_and_namespaces()}
        for node in self.parameter_nodes:
            if node in running and node not in self._parameters_recorded:
                waiting.append(f"parameters of {node} not recorded yet")
        for topic, types in self.get_topic_names_and_types():
            if not self._wanted(topic) or topic in self.unsupported:
                continue
            image = (topic in self.camera_topics and "sensor_msgs/msg/Image" in types) or (
                self._is_camera_topic(topic) and topic.endswith("/image_raw"))
            subscription = self._subscribed.get(topic)
            if subscription is None:  # every recorded topic the graph has, the task's status first
                waiting.append(f"not subscribed yet to {topic}")
            elif (subscription.get_publisher_count() < self.count_publishers(topic)
                  and time.monotonic() - self._subscribed_at.get(topic, 0.0) < _MATCH_WAIT_S):
                # Subscribed is not matched: a message published before DDS matched the writer is lost to the
                # bag. Every writer counts (one matched leftover of another process is not the stack's own); a
                # writer whose QoS never matches ours is not waited for past _MATCH_WAIT_S.
                waiting.append(f"not matched yet to every publisher of {topic}")
            elif image and topic not in self._heard:
                waiting.append(f"no message recorded yet on {topic}")
        return waiting

    def busy(self) -> list[str]:
        """A task's bag still open, waiting for the task's final status (runtime.stop_nodes waits for it)."""
        with self._lock:
            goal = self._auto_goal if self.recorder.recording else ""
        return [f"bag of task {goal[:8]} open"] if goal else []

    def destroy_node(self) -> None:
        self._destroying.set()  # result fetches still asking end
        self.recorder.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    return run_node(RecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
