"""task_node: language instruction → pinned reasoning → ProjectPoints → PickPlace, as a ROS task.

Serves ``/robopin/instruct`` (srv Instruct: validates the instruction, answers at once with a task
id, rejects while a task runs) and ``/robopin/execute_task`` (action ExecuteTask, one goal at a time:
a second goal is aborted with reason ``busy``; cancel stops the reasoning and cancels the PickPlace
goal, which stops the arm). Each task runs :class:`robopin.reasoning.ReasoningLoop` with ROS stages:
a multi-view snapshot from the camera topics (``/cameras/<view>/color/...``, or a driver's own set by
``cameras.<view>.*``), the configured VLM backend, the projection node's ``/robopin/project_points``
and the motion planner's ``/robopin/motion/pick_place``. Publishes every reasoning step on ``/robopin/reasoning``
(PinnedReasoning), the PinCoT drawn on each view on ``/robopin/reasoning/<view>/image`` and the
chosen targets on ``/robopin/reasoning/markers``; feedback stages are observing, reasoning,
validating, projecting, planning, executing, done.

    ros2 run robopin_ros task_node --ros-args -p views:="['static', 'wrist']" \\
        -p vlm.type:=openai -p vlm.base_url:=http://gpu-server:8000/v1 -p vlm.model:=vlm
    ros2 param set /task_node vlm.base_url http://other-server:8000/v1   # applied between tasks
    ros2 service call /robopin/instruct robopin_interfaces/srv/Instruct "{instruction: 'put the duck on the plate'}"
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.action import CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.parameter import Parameter
from robopin_interfaces.action import ExecuteTask, PickPlace
from robopin_interfaces.msg import PinnedReasoning, Target3D
from robopin_interfaces.srv import Instruct, ProjectPoints
from sensor_msgs.msg import Image
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger
from unique_identifier_msgs.msg import UUID
from visualization_msgs.msg import MarkerArray

from robopin.cameras import SnapshotConfig
from robopin.geometry import PointRequest, Target, WorkspaceBox
from robopin.interfaces import (
    EXECUTE_TASK,
    INSTRUCT,
    REASONING,
    REASONING_MARKERS,
    REASONING_SEARCH,
    TARGETS,
    TASK_CLIENT_HEARTBEAT,
    TASK_SERVER_HEARTBEAT,
    ready_service,
    reasoning_image,
)
from robopin.pincot import draw_trace
from robopin.reasoning import (
    MotionOutcome,
    Observation,
    ReasoningConfig,
    ReasoningLoop,
    ReasoningRecord,
    TaskCanceled,
    TaskRefusal,
    TaskRequest,
    TaskResult,
)
from robopin.reasoning.ground_truth import make_ground_truth
from robopin.reasoning.snapshot_stages import SnapshotObserver
from robopin.reasoning.tts import reads_depth, step_log_lines
from robopin.system.node_settings import TaskNodeSettings, settings_from
from robopin.vlm import VLMBackend, make_backend
from robopin.vlm.errors import VLMRequestError
from robopin.vlm.prompts import check_instruction
from robopin_ros import conversions
from robopin_ros.actions import (
    BUSY_REASON,
    CLIENT_DEADMAN_S,
    CLIENT_LOST_REASON,
    STARVED_S,
    ActionClient,
    HeartbeatSender,
    HeartbeatWatch,
    SingleGoalGuard,
    ask,
    follow_goal,
    goal_key,
    wait_future,
)
from robopin_ros.camera_snapshot import CameraViewsSubscriber, declare_view_topics
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings, nested_value
from robopin_ros.runtime import StreamSpinner, release_free_heap, run_node

# Parameters a running node accepts changes to (checked by building what they configure).
_NESTED = ("vlm", "reasoning", "workspace")  # nested settings, dotted parameters, applied at run time


_MODEL_CHECK_PERIOD_S = 2.0
# A step's own path, from the frames to the plan: display work waits while a task is in one of these.
_STEP_CRITICAL_STAGES = frozenset({"observing", "reasoning", "validating", "projecting", "planning"})
_DISPLAY_HOLD_S = 5.0  # the longest an image waits for the step (a plan runs up to its 3 s timeout)
_STOP_POLL_S = 0.05  # how often a task's stop watch asks whether the task must stop (a cancel waits this long)
_DISPLAY_FLUSH_S = 5.0  # the longest a final status waits for the task's images and targets to be published


def _model_status(backend: VLMBackend | None) -> str:
    """'' when the backend's server lists its configured model (or it has no server to ask); else why not."""
    list_models = getattr(backend, "list_models", None)
    if list_models is None:
        return ""
    wanted = str(getattr(backend.config, "model", "") or "")
    url = getattr(backend.config, "base_url", "the model server")
    try:
        served = list_models()
    except Exception as error:  # every failure is reported by name; the check runs again
        return f"model server {url} not reachable: {type(error).__name__}: {error}"
    if wanted and wanted not in served:
        return f"model server {url} does not serve {wanted!r} (it serves {served})"
    return ""


class _RosObserver(SnapshotObserver):
    """Snapshot from the camera topics; keeps the last observation for the annotated images.

    A snapshot that is refused is retried for up to ``wait_s`` (a node that just started, or a view
    a frame late, should not fail a task), then the refusal stands with its name. After the arm has
    moved (:meth:`motion_ended`), only frames captured after the motion ended (plus ``settle_s``)
    count: the model must see the world as the motion left it, not a frame from the retreat.
    """

    def __init__(
        self, cameras: CameraViewsSubscriber, wait_s: float, settle_s: float, stopped: Callable[[], bool]
    ) -> None:
        super().__init__(cameras.snapshot)
        self.cameras = cameras
        self.wait_s = wait_s
        self.settle_s = settle_s
        self.stopped = stopped
        self.not_before_s = 0.0
        self.last: Observation | None = None

    def motion_ended(self) -> None:
        """Frames taken before now (+ settle time, on the cameras' clock) no longer describe the world."""
        self.not_before_s = self.cameras.now_s() + self.settle_s

    def observe(self) -> Observation:
        """Take the newest synchronised set of views taken after the last motion (named refusal if none)."""
        deadline = time.monotonic() + self.wait_s + max(0.0, self.not_before_s - self.cameras.now_s())
        while True:
            seen = self.cameras.frames_added
            try:
                observation = super().observe()
                oldest = min(frame.timestamp_s for frame in observation.source.frames.values())
                if oldest < self.not_before_s:
                    raise TaskRefusal(
                        "stale_frame",
                        f"no snapshot taken after the last motion ended: the oldest frame is "
                        f"{self.not_before_s - oldest:.2f} s too old",
                    )
                self.last = observation
                return observation
            except TaskRefusal:
                if self.stopped():
                    raise TaskCanceled("canceled while waiting for a snapshot") from None
                if time.monotonic() >= deadline:
                    raise
                # Try again as soon as the next frame arrives (what usually completes a snapshot), and at
                # least every 50 ms (an arm pose can complete one too; a cancel is seen).
                self.cameras.wait_for_frame(seen, min(0.05, deadline - time.monotonic()))


class _RosProjector:
    """ProjectPoints service client; publishes the targets it got (Target3D each, and as RViz markers)."""

    def __init__(self, node: TaskNode) -> None:
        self.node = node

    def project(self, requests: Sequence[PointRequest], observation: Observation) -> list[Target]:
        """Project pixel points on the frames the model saw (the observation's stamp) via the projection node."""
        client = self.node.project_client
        if not client.wait_for_service(timeout_sec=self.node.service_timeout_s):
            raise TaskRefusal("projection_unavailable", f"service {client.srv_name} is not available")
        sizes = observation.image_sizes
        kinds = ["obj", "space"] + ["obj"] * max(0, len(requests) - 2)
        anchors = [
            conversions.point_request_to_anchor_msg(r, sizes[r.img_idx], kind)
            for r, kind in zip(requests, kinds, strict=False)
        ]
        # The observation's stamp (its newest frame): depth comes from the frames the points were drawn on,
        # not from whatever frame is newest when the model has answered.
        stamp = conversions.seconds_to_stamp(max(observation.stamp_s, 0.0))
        # The same anchors on the same stamp give the same targets: the request may be sent again (ask).
        response = ask(client, ProjectPoints.Request(anchors=anchors, target_frame=self.node.target_frame, stamp=stamp),
                       self.node.service_timeout_s)
        if response is None:
            raise TaskRefusal(
                "projection_unavailable", f"{client.srv_name} did not answer within {self.node.service_timeout_s} s"
            )
        if not response.success:
            raise TaskRefusal("projection_unavailable", response.message or "the projection could not run")
        targets = [conversions.target3d_msg_to_target(t) for t in response.targets]
        self.node.display(self._publish_targets, list(response.targets), targets)
        return targets

    def _publish_targets(self, messages: list, targets: list[Target]) -> None:
        for target in messages:
            self.node.targets_pub.publish(target)
        stamp = self.node.get_clock().now().to_msg()
        self.node.markers_pub.publish(
            conversions.targets_to_marker_array(targets, self.node.target_frame, stamp, "robopin_planner")
        )


class _RosActor:
    """PickPlace action client: planning/approaching/... feedback relayed, cancel forwarded."""

    def __init__(self, node: TaskNode) -> None:
        self.node = node

    def pick_place(self, pick: Target, place: Target, *, dry_run, on_stage, should_stop) -> MotionOutcome:
        """Send one PickPlace goal and wait for it; cancel it when the task is canceled."""
        node = self.node
        client = node.pick_place_client
        if not client.wait_for_server(timeout_sec=node.service_timeout_s):
            return MotionOutcome(False, "motion_unavailable", f"action {node.pick_place_action} is not available")
        goal = PickPlace.Goal(
            pick=conversions.target_to_msg(pick, node.target_frame),
            place=conversions.target_to_msg(place, node.target_frame),
            grasp_yaw=float("nan"),
            velocity_scale=node.velocity_scale,
            dry_run=bool(dry_run),
        )

        def relay(message) -> None:
            stage = message.feedback.stage
            on_stage("planning" if stage == "planning" else "executing", f"{stage} {message.feedback.progress:.2f}")

        # A cancel stops the arm downstream (motion planner → driver); follow_goal waits for it to confirm.
        try:
            # The answer counts against the goal's own deadline, as the motion planner's driver goals do.
            outcome = follow_goal(client, goal, answer_timeout_s=node.motion_timeout_s,
                                  timeout_s=node.motion_timeout_s, feedback=relay, should_stop=should_stop,
                                  cancel_wait_s=node.service_timeout_s)
        finally:
            if not dry_run:
                node.observer.motion_ended()
        if outcome.ending == "unanswered":
            return MotionOutcome(False, "motion_unavailable",
                                 f"the PickPlace goal was not answered within {node.motion_timeout_s:.0f} s")
        if outcome.ending == "rejected":
            return MotionOutcome(False, "motion_rejected", "the motion planner rejected the PickPlace goal")
        if not outcome.finished:
            node.observer.motion_ended()
            status = "canceled" if outcome.ending == "stopped" else "motion_timeout"
            message = f"PickPlace goal {status} after the arm was told to stop"
            return MotionOutcome(False, status, message, executed=True)
        result = outcome.result
        return MotionOutcome(
            bool(result.success),
            result.status or ("success" if result.success else "motion_failed"),
            result.message,
            float(result.planning_time_s),
            executed=bool(result.success and not dry_run),
        )


class _StageLog:
    """Logs each stage (and motion phase) of a task once: motion progress arrives many times a second."""

    def __init__(self, logger, task_id: str) -> None:
        self.logger, self.task_id = logger, task_id
        self._last: tuple | None = None

    def stage(self, stage: str, step: int, detail: str) -> None:
        """Log ``stage`` of ``step`` unless it repeats the last line logged."""
        key = (step, stage, detail.partition(" ")[0] if stage in ("planning", "executing") else detail)
        if key != self._last:
            self._last = key
            self.logger.info(f"task {self.task_id} step {step}: {stage} {detail}".rstrip())


class TaskNode(LoggedNode):
    """Runs language instructions through the reasoning loop (see the module docstring)."""

    def __init__(self, **node_options: Any) -> None:
        super().__init__("task_node", **node_options)
        own = settings_from(TaskNodeSettings, declare_settings(self, TaskNodeSettings()))
        self.views = list(own.views)
        self.target_frame = own.target_frame
        self.service_timeout_s = own.service_timeout_s
        self.ready_wait_s = own.ready_wait_s
        self.motion_timeout_s = own.motion_timeout_s
        self.velocity_scale = own.velocity_scale
        self.publish_images = own.publish_images
        self.project_service = own.project_service
        self.pick_place_action = own.pick_place_action
        snapshot = SnapshotConfig(tuple(self.views), sync_tolerance_s=own.sync_tolerance_s,
                                  max_age_s=own.max_frame_age_s)
        # vlm, reasoning and workspace are dynamic: _on_set_parameters rebuilds the backend and config while no
        # task runs (each a nested setting declared as dotted parameters: vlm.base_url, reasoning.max_steps, ...).
        self.ground_truth = make_ground_truth(own.ground_truth or None)
        self._backend: VLMBackend | None = None
        self._config: ReasoningConfig | None = None
        self._config_lock = threading.Lock()
        self._model_check_lock = threading.Lock()
        self._model_check_thread: threading.Thread | None = None
        self._model_status = ""
        self._configure({name: nested_value(self, name) for name in _NESTED})
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.guard = SingleGoalGuard()
        group = ReentrantCallbackGroup()
        # Image callbacks on a child node with a single-threaded executor of their own: the planner's
        # multi-threaded executor costs 10-18 % of a core more per 30 Hz view (benchmarks/bench_cameras.py).
        # Depth only where the reason stage reads it (E-TTS samples actions from the pick's depth segment):
        # each depth stream costs the node as much as its colour stream.
        self.reads_depth = self._config is not None and reads_depth(self._config.reasoner)
        # Frames age on this node's clock: a simulated cell's is the simulator's (/clock), which a loaded machine
        # slows with the cell and its cameras, so a still scene's frames stay young.
        self.cameras = CameraViewsSubscriber(self, snapshot, require_depth=self.reads_depth, own_executor=True,
                                             topics=declare_view_topics(self, self.views))
        self._shutting_down = False
        self.observer = _RosObserver(self.cameras, own.snapshot_wait_s, own.settle_s, lambda: self._shutting_down)
        # The calls a step waits on, on a child node with a single-threaded executor of their own. rclpy runs a
        # future's done callbacks as a new executor task (Future._schedule_or_invoke_done_callbacks): on this
        # node's MultiThreadedExecutor a reply took two passes over the node's whole wait set and two hand-offs
        # to its pool before the waiting step saw it (14 ms median from ProjectPoints' return; 3.7 ms here).
        self._calls = StreamSpinner(self, "calls")
        self.project_client = self._calls.node.create_client(ProjectPoints, self.project_service)
        self.pick_place_client = ActionClient(self._calls.node, PickPlace, self.pick_place_action)
        # A task belongs to its client: its heartbeats are watched here, away from the pool the task runs on.
        self._client_beats = HeartbeatWatch(self._calls.node, TASK_CLIENT_HEARTBEAT, reference=TASK_SERVER_HEARTBEAT)
        self._calls.start()
        self._server_heartbeat = HeartbeatSender(
            self, TASK_SERVER_HEARTBEAT, lambda: bytes.fromhex(goal) if (goal := self.guard.followed()) else None)
        # Tasks wait here until whoever started the stack says it is ready (Bringup: the recorder hears every
        # camera), so the first task is recorded like every other; a node started alone is ready at once.
        self._ready = threading.Event()
        self._ready.set()
        self._not_ready_reason = ""
        # Under ros2 launch every node runs in a process of its own and nothing supervises the start: the
        # launch names the stack's other nodes here, and tasks wait until each one's ~/ready answers success.
        ready_nodes = own.ready_nodes
        if ready_nodes:
            self.hold_tasks(f"every node's readiness ({', '.join(ready_nodes)})")
            clients = {name: self._calls.node.create_client(Trigger, ready_service(name)) for name in ready_nodes}
            threading.Thread(target=self._release_when_nodes_ready, args=(clients,), name="robopin-ready",
                             daemon=True).start()
        self.reasoning_pub = self.create_publisher(PinnedReasoning, REASONING, 10)
        self.search_pub = self.create_publisher(String, REASONING_SEARCH, 10)
        self._search: tuple[str, list[dict[str, Any]]] = ("", [])  # the newest task's search logs, by step
        self._search_lock = threading.Lock()
        self.markers_pub = self.create_publisher(MarkerArray, REASONING_MARKERS, 10)
        self.targets_pub = self.create_publisher(Target3D, TARGETS, 10)
        self.image_pubs = {v: self.create_publisher(Image, reasoning_image(v), 2) for v in self.views}
        # Annotated images and target markers are for people watching: drawn and published on this worker
        # once the step has moved past its plan request (every node of `robopin up` shares one interpreter,
        # so a drawing during the projection or the plan is time the step waits for).
        self._display = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="robopin-display")
        self._display_open = threading.Event()
        self._display_open.set()
        self.create_service(Instruct, INSTRUCT, self._on_instruct, callback_group=group)
        self.task_server = self.guard.serve(
            self, ExecuteTask, EXECUTE_TASK, self._execute_task,
            lambda message: ExecuteTask.Result(reason=BUSY_REASON, message=message),
            accepting=lambda: not self._shutting_down, cancel_callback=self._cancel_task, callback_group=group)
        # Instruct runs its task as a goal of our own action, so clients can watch or cancel it there.
        self.task_client = ActionClient(self, ExecuteTask, EXECUTE_TASK, callback_group=group)
        self.get_logger().info(f"planner ready: views {self.views}, backend {self._backend!r}")

    # ------------------------------------------------------------------ configuration
    def _configure(self, values: dict[str, dict[str, Any]]) -> None:
        """Build the reasoning config and backend from the vlm, reasoning and workspace mappings (raises, named)."""
        reasoning = dict(values["reasoning"])
        if values["workspace"]:
            reasoning["workspace"] = WorkspaceBox.from_dict(values["workspace"])
        config = ReasoningConfig.from_dict(reasoning)
        backend = make_backend(values["vlm"])
        # Build a loop once so a bad reasoner setting fails here, not in the first task.
        ReasoningLoop(config, backend, None, None, None)  # type: ignore[arg-type]
        with self._config_lock:
            old, self._backend, self._config = self._backend, backend, config
        if old is not None:
            old.close()

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        """Accept vlm / reasoning / workspace changes only when they build; never during a task."""
        changed = {p.name: p.value for p in parameters if p.name.split(".", 1)[0] in _NESTED}
        if not changed:
            return SetParametersResult(successful=True)
        if self.guard.active is not None:
            return SetParametersResult(successful=False, reason=f"a task is running ({self.guard.active})")
        try:
            self._configure({name: nested_value(self, name, changed) for name in _NESTED})
        except Exception as error:  # every config error must reach the caller, named
            return SetParametersResult(successful=False, reason=f"{type(error).__name__}: {error}")
        self.get_logger().info(f"reconfigured {sorted(changed)}: backend {self._backend!r}")
        if self._config is not None and reads_depth(self._config.reasoner) and not self.reads_depth:
            self.get_logger().warning("the reason stage now samples actions from depth, which this node did not "
                                      "subscribe to at start: E-TTS gets no depth segments until it is restarted")
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ Instruct
    def _on_instruct(self, request: Instruct.Request, response: Instruct.Response) -> Instruct.Response:
        """Validate the instruction and start it as an ExecuteTask goal; answer at once."""
        try:
            check_instruction(request.instruction)
            mode = self._config.choose_mode(request.mode, request.instruction) if self._config else ""
        except (VLMRequestError, ValueError) as error:
            response.accepted, response.message = False, str(error)
            return response
        if request.max_steps < 0:
            response.accepted, response.message = False, f"max_steps must be >= 0, got {request.max_steps}"
            return response
        if self._shutting_down:
            response.accepted, response.message = False, "the planner is shutting down"
            return response
        conflict = self.guard.conflict(EXECUTE_TASK)  # a request sent to this namespace reaches every stack in it
        if conflict:
            response.accepted, response.message = False, conflict
            return response
        goal_uuid = uuid.uuid4()
        task_id = goal_uuid.hex[:8]
        holder = self.guard.try_acquire(goal_uuid.hex)  # reserved now so a second Instruct is refused at once
        if holder is not None:
            response.accepted, response.message = False, self.guard.busy_message(holder)
            return response
        goal = ExecuteTask.Goal(
            instruction=request.instruction, mode=request.mode, dry_run=request.dry_run, max_steps=request.max_steps
        )
        future = self.task_client.send_goal_async(goal, goal_uuid=UUID(uuid=list(goal_uuid.bytes)))
        future.add_done_callback(lambda f: self._on_own_goal_response(f, goal_uuid.hex))
        response.accepted, response.task_id = True, task_id
        response.goal_id = UUID(uuid=list(goal_uuid.bytes))
        response.message = f"task {task_id} started: {request.instruction.strip()!r} in mode {mode}" + (
            " (dry run)" if request.dry_run else ""
        )
        self.get_logger().info(response.message)
        return response

    def _on_own_goal_response(self, future, key: str) -> None:
        """Release the reservation if our own goal did not start."""
        handle = future.result() if future.exception() is None else None
        if handle is None or not handle.accepted:
            self.guard.release(key)
            self.get_logger().error(f"task {key[:8]} could not start as an ExecuteTask goal")

    # ------------------------------------------------------------------ ExecuteTask
    def _cancel_task(self, goal_handle) -> CancelResponse:
        """Accept the cancel: the task's stop watch (:meth:`_watch_stop`) abandons a model call in flight."""
        return CancelResponse.ACCEPT

    def _watch_stop(self, should_stop: Callable[[], bool], ended: threading.Event) -> None:
        """Abandon the task's model calls in flight from the moment the task must stop until ``ended`` is set.

        The loop checks ``should_stop`` between stages; a model call can last a minute. Whatever stops the task
        (a cancel, a client whose heartbeat stopped, a shutdown) must not wait for the model's answer. Polled
        rather than triggered from the cancel callback: rclpy's action server marks the goal canceling only
        after that callback returns, and a call abandoned before would end the task as aborted, not canceled.
        Kept up while the task ends: a reasoner that samples several calls in a row gets each abandoned (a cancel
        with nothing in flight does nothing).
        """
        while not ended.wait(_STOP_POLL_S):
            if should_stop():
                self._cancel_model_call()

    def _cancel_model_call(self) -> None:
        with self._config_lock:
            backend = self._backend
        cancel = getattr(backend, "cancel", None)
        if cancel is not None:
            cancel()

    def _execute_task(self, goal_handle) -> ExecuteTask.Result:
        """Run one task through the reasoning loop with feedback, honouring cancel and single-goal."""
        task_id = goal_key(goal_handle)[:8]
        result = ExecuteTask.Result(task_id=task_id)
        client_lost: list[str] = []
        try:
            with self._config_lock:
                config, backend = self._config, self._backend
            loop = ReasoningLoop(config, backend, self.observer, _RosProjector(self), _RosActor(self),
                                 ground_truth=self.ground_truth)
            lost_lock = threading.Lock()  # the loop and the stop watch both ask
            starved_logged: list[bool] = []

            def should_stop() -> bool:
                if goal_handle.is_cancel_requested or self._shutting_down or client_lost:
                    return True
                goal = bytes.fromhex(goal_key(goal_handle))
                silent = self._client_beats.silent_for(goal)
                if silent is None or silent <= CLIENT_DEADMAN_S:
                    return False
                runs = self._client_beats.sender_runs(goal)
                if runs and silent <= STARVED_S:
                    if not starved_logged:
                        starved_logged.append(True)
                        self.get_logger().warning(
                            f"task {task_id}: no heartbeat from its client for {silent:.2f} s, but the client's "
                            f"process still runs on this host (starved): the task goes on, for up to {STARVED_S:.0f} s")
                    return False
                with lost_lock:
                    if not client_lost:
                        why = "its process still runs: hung or starved" if runs else "the client is gone"
                        client_lost.append(f"the task's client sent no heartbeat for {silent:.2f} s ({why})")
                        self.get_logger().warning(f"task {task_id}: {client_lost[0]}: canceling it, the arm stops")
                return True

            if not self._wait_ready(goal_handle, should_stop):
                if not should_stop():
                    result.success, result.reason = False, "not_ready"
                    result.message = f"the stack is not ready for a task: {self._not_ready_reason}"
                    goal_handle.abort()
                    return result
                # Stopped while it waited: ended below like any stopped task (canceled, client lost, shutdown).
                result.success, result.reason = False, "canceled"
                result.message = f"canceled while the stack was starting ({self._not_ready_reason})"
                return self._end_goal(goal_handle, result, client_lost)
            self.observer.stopped = should_stop  # one task at a time (single-goal policy)
            goal = goal_handle.request
            request = TaskRequest(goal.instruction, goal.mode, goal.dry_run, goal.max_steps, task_id)
            messages: list[PinnedReasoning] = []

            stage_log = _StageLog(self.get_logger(), task_id)

            def on_stage(stage: str, step: int, detail: str) -> None:
                goal_handle.publish_feedback(ExecuteTask.Feedback(stage=stage, step=step, detail=detail))
                stage_log.stage(stage, step, detail)
                if stage in _STEP_CRITICAL_STAGES:
                    self._display_open.clear()
                else:
                    self._display_open.set()

            def on_reasoning(record: ReasoningRecord) -> None:
                messages.append(self._publish_reasoning(record))

            ended = threading.Event()
            threading.Thread(target=self._watch_stop, args=(should_stop, ended), name=f"stop-watch-{task_id}",
                             daemon=True).start()
            try:
                outcome = loop.run(
                    request,
                    should_stop=should_stop,
                    on_stage=on_stage,
                    on_reasoning=on_reasoning,
                )
            finally:
                ended.set()
            self._fill_result(result, outcome, messages)
        except Exception as error:  # a bug must still end the goal with a named reason
            self.get_logger().error(f"task {task_id}: {type(error).__name__}: {error}")
            result.success, result.reason, result.message = False, "internal_error", f"{type(error).__name__}: {error}"
        finally:
            self._display_open.set()
        self._flush_display()
        with contextlib.suppress(RuntimeError):  # shut down: the process ends anyway
            self._display.submit(self._release_heap, task_id)
        return self._end_goal(goal_handle, result, client_lost)

    def _end_goal(self, goal_handle, result: ExecuteTask.Result, client_lost: list[str]) -> ExecuteTask.Result:
        """Give the goal its final status; a stopped task's reason says who stopped it."""
        if result.reason == "canceled" and self._shutting_down and not goal_handle.is_cancel_requested:
            result.reason, result.message = "shutdown", f"the stack is shutting down: {result.message}"
        elif result.reason == "canceled" and client_lost and not goal_handle.is_cancel_requested:
            result.reason, result.message = CLIENT_LOST_REASON, f"{client_lost[0]}: {result.message}"
        if result.success:
            goal_handle.succeed()
        elif result.reason == "canceled" and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    def hold_tasks(self, reason: str) -> None:
        """Make tasks wait (up to ``ready_wait_s``) until :meth:`release_tasks`; ``reason`` says what is missing."""
        self._not_ready_reason = reason
        self._ready.clear()

    def release_tasks(self) -> None:
        """The stack is ready: tasks run."""
        self._ready.set()

    def _release_when_nodes_ready(self, clients: dict[str, Any]) -> None:
        """Ask each node's ``~/ready`` until all answer success, then release the tasks (ros2 launch's gate)."""
        while not self._ready.is_set():
            waiting = []
            for name, client in clients.items():
                if not client.service_is_ready():
                    waiting.append(f"{name}: starting")
                    continue
                future = client.call_async(Trigger.Request())
                if not wait_future(future, 2.0) or future.result() is None:
                    waiting.append(f"{name}: {client.srv_name} did not answer within 2 s")
                elif not future.result().success:
                    waiting.append(f"{name}: {future.result().message}")
            if not waiting:
                self.get_logger().info(f"every node of the stack is ready ({', '.join(clients)}): tasks run")
                self.release_tasks()
                return
            self._not_ready_reason = "; ".join(waiting)
            self._ready.wait(0.5)

    def _wait_ready(self, goal_handle, should_stop: Callable[[], bool]) -> bool:
        """Wait until the stack is ready for a task; False when it is not within ``ready_wait_s`` or stopped."""
        if self._ready.is_set():
            return True
        goal_handle.publish_feedback(ExecuteTask.Feedback(stage="waiting", step=0,
                                                          detail=f"the stack is starting: {self._not_ready_reason}"))
        deadline = time.monotonic() + self.ready_wait_s
        while not self._ready.wait(0.05):
            if should_stop() or time.monotonic() > deadline:
                return False
        return True

    def _fill_result(self, result: ExecuteTask.Result, outcome: TaskResult, messages: list[PinnedReasoning]) -> None:
        result.success = outcome.success
        result.reason = outcome.reason
        result.message = outcome.message
        result.reasoning_steps = messages
        result.steps_executed = outcome.steps_executed
        timings = [
            f"step {s.step}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in s.timings_s.items())
            for s in outcome.steps
            if s.timings_s
        ]
        line = f"task {outcome.task_id} ({outcome.mode}) %s: {outcome.message}; {'; '.join(timings)}"
        # rclpy refuses one call site logging at two severities: one call per severity.
        if outcome.success:
            self.get_logger().info(line % "succeeded")
        else:
            self.get_logger().warning(line % f"ended with {outcome.reason}")

    def _publish_reasoning(self, record: ReasoningRecord) -> PinnedReasoning:
        """Publish one reasoning step and, for PinCoT, the trace drawn on each view."""
        header = Header(stamp=conversions.seconds_to_stamp(max(record.stamp_s, 0.0)))
        msg = conversions.reasoning_record_to_msg(record, header)
        self.reasoning_pub.publish(msg)
        if record.search:
            self._publish_search(record)
        observation = self.observer.last
        if self.publish_images and record.trace is not None and observation is not None:
            self.display(self._publish_annotated, observation, record.trace, header.stamp)
        return msg

    def _publish_search(self, record: ReasoningRecord) -> None:
        """E-TTS's log of the step on REASONING_SEARCH (recorded), its outcome in the node's log."""
        entry = {"task_id": record.task_id, "step": record.step, "search": dict(record.search)}
        with self._search_lock:
            if self._search[0] != record.task_id:
                self._search = (record.task_id, [])
            self._search[1].append(entry)
        self.search_pub.publish(String(data=json.dumps(entry, separators=(",", ":"))))
        lines = step_log_lines(record.search, record.step)
        for line in lines[:-1]:
            self.get_logger().debug(f"task {record.task_id}: E-TTS {line}")
        self.get_logger().info(f"task {record.task_id}: E-TTS {lines[-1]}")

    def search_logs(self, task_id: str) -> list[dict[str, Any]]:
        """The search logs (``{"task_id", "step", "search"}``) of ``task_id``'s steps, if it is the newest task."""
        with self._search_lock:
            return list(self._search[1]) if self._search[0] == task_id else []

    def _publish_annotated(self, observation: Observation, trace, stamp) -> None:
        """The trace drawn on each view the model saw, one image topic per view."""
        images = [view.rgb for view in observation.views]
        for view, image in zip(observation.views, draw_trace(images, trace), strict=True):
            publisher = self.image_pubs.get(view.name)
            if publisher is not None:
                frame_header = Header(stamp=stamp, frame_id=f"{view.name}_optical")
                publisher.publish(conversions.color_to_image_msg(image, frame_header))

    def display(self, publish: Callable[..., None], *args) -> None:
        """Run ``publish(*args)`` on the display worker (a failure there is logged, never the task's)."""
        def run() -> None:
            self._display_open.wait(_DISPLAY_HOLD_S)
            try:
                publish(*args)
            except Exception as error:  # a display failure must not end a task or the worker
                self.get_logger().warning(f"display publish failed: {type(error).__name__}: {error}")

        with contextlib.suppress(RuntimeError):  # shut down: nothing more to show
            self._display.submit(run)

    def _release_heap(self, task_id: str) -> None:
        """Give the heap's free pages back to the OS once a task ended (on the display worker: off the result's path).

        A task's frames, clouds and plans are freed when it ends, but glibc keeps freed memory in the arena of
        the thread that freed it, and this process's executors run many threads: without this the stack's resident
        memory keeps growing over a soak (benchmarks/bench_soak.py).
        """
        taken_s = release_free_heap()
        self.get_logger().debug(f"task {task_id}: free heap given back in {taken_s * 1e3:.1f} ms")

    def _flush_display(self) -> None:
        """Wait (up to ``_DISPLAY_FLUSH_S``) until the task's targets, markers and drawn views are published.

        The recorder closes a task's bag on its final status: what the display worker published after it (a
        first drawing is slow on a loaded machine) was missing from the bag, which then could not be replayed.
        The worker is one thread, so a no-op submitted now runs after everything the task gave it.
        """
        with contextlib.suppress(RuntimeError, concurrent.futures.TimeoutError):
            self._display.submit(lambda: None).result(_DISPLAY_FLUSH_S)

    # ------------------------------------------------------------------ readiness
    def model_not_ready(self) -> str:
        """Why the configured model cannot answer yet; '' once it served its model list (or has none to check).

        Asked repeatedly while a stack comes up (``robopin up`` waits on it); the server is asked from a
        thread of its own every ``_MODEL_CHECK_PERIOD_S`` until it answers with the configured model.
        """
        with self._model_check_lock:
            if self._model_check_thread is None:
                self._model_status = "checking the model server"
                self._model_check_thread = threading.Thread(target=self._check_model, name="model-check", daemon=True)
                self._model_check_thread.start()
            return self._model_status

    def _check_model(self) -> None:
        while not self._shutting_down:
            with self._config_lock:
                backend = self._backend
            status = _model_status(backend)
            with self._model_check_lock:
                self._model_status = status
            if not status:
                return
            time.sleep(_MODEL_CHECK_PERIOD_S)

    def drawn_model_errors(self) -> list[tuple[str, ...]]:
        """The named errors a simulated model drew per sample so far (empty for any other backend)."""
        with self._config_lock:
            return list(getattr(self._backend, "injected", ()))

    def new_scene(self, changed_at_s: float, *, layout_seed: int | None = None) -> None:
        """The cell was laid out anew at ``changed_at_s`` (a trial boundary; no task runs): frames taken before
        then show another scene, and the model backend starts over as on a fresh stack (a simulated model's error
        draws belong to a layout). ``layout_seed``: E-TTS follows the layout's seed (Bringup's rule)."""
        if self.guard.active is not None:
            raise RuntimeError(f"a task is running ({self.guard.active})")
        if layout_seed is not None:
            result = self.set_parameters([Parameter("reasoning.reasoner.seed", value=int(layout_seed))])[0]
            if not result.successful:
                raise RuntimeError(f"reseeding E-TTS for the new layout failed: {result.reason}")
        else:
            self._configure({name: nested_value(self, name) for name in _NESTED})
        self.observer.not_before_s = max(self.observer.not_before_s, float(changed_at_s))

    def stop_tasks(self) -> None:
        """End the running task at its next check (the arm is told to stop) and start no new one."""
        self._shutting_down = True
        self._cancel_model_call()

    def begin_shutdown(self) -> None:
        """End the running task with a final status (reason 'shutdown') and accept no new one."""
        self.stop_tasks()

    def busy(self) -> list[str]:
        """The task still running and results not yet sent to their clients (empty when neither)."""
        return self.guard.busy()

    def destroy_node(self, drain_s: float = 3.0) -> None:
        self.stop_tasks()
        self._ready.set()
        # Destroyed without runtime.stop_nodes (a test, an embedding program): give a running task a moment
        # to end with its final status; its goal handle is unusable once the action server is gone.
        deadline = time.monotonic() + drain_s
        while self.busy() and time.monotonic() < deadline:
            time.sleep(0.02)
        self._display_open.set()
        self._display.shutdown(wait=True, cancel_futures=True)
        if self._backend is not None:
            self._backend.close()
        self.cameras.close()
        self._server_heartbeat.close()
        self._calls.close()
        super().destroy_node()


def main(args=None) -> int:
    return run_node(TaskNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
