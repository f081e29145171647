"""The task client: a task is an ExecuteTask goal, followed through an rclpy ActionClient behind three verbs.

:meth:`TaskClient.run_task` sends the goal and follows it to its end (feedback, the views the planner
reasoned on, the targets it drew), canceling it on timeout or when the caller stops it;
:meth:`TaskClient.cancel_task` cancels a goal by its id (ours or one another process started) or every goal;
:meth:`TaskClient.result` waits for a goal's final status and result. The verbs follow
nav2_simple_commander's BasicNavigator (``goToPose`` / ``cancelTask`` / ``getResult`` over one
ActionClient). ``/robopin/instruct`` is a thin wrapper over the same action for shells and consoles.
:func:`instruct_running_stack` and :func:`cancel_running_tasks` are ``robopin instruct`` and
``robopin cancel``, each in a process of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from action_msgs.msg import GoalStatus, GoalStatusArray
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import qos_profile_action_status_default
from rclpy.signals import SignalHandlerOptions
from robopin_interfaces.action import ExecuteTask
from sensor_msgs.msg import Image
from unique_identifier_msgs.msg import UUID
from visualization_msgs.msg import MarkerArray

from robopin.cameras.images import ImageEncodingError
from robopin.cameras.topics import ViewTopics
from robopin.cameras.topics import view_topics as core_view_topics
from robopin.env import apply_ros_environment
from robopin.interfaces import (
    EXECUTE_TASK,
    TARGET_MARKERS,
    TASK_CLIENT_HEARTBEAT,
    TASK_SERVER_HEARTBEAT,
    action_status,
)
from robopin.system.names import absolute_name
from robopin.system.task_run import TaskRun
from robopin.system.timing import FeedbackEvent
from robopin_ros import conversions
from robopin_ros.actions import (
    BUSY_REASON,
    SERVER_LOST_S,
    STARVED_S,
    STATUS_NAMES,
    TERMINAL_STATUSES,
    ActionClient,
    ActionServers,
    GoalResult,
    HeartbeatSender,
    HeartbeatWatch,
    canceled_by_status,
    canceled_goals,
    follow_goal,
)
from robopin_ros.camera_snapshot import camera_qos
from robopin_ros.logs import LoggedNode
from robopin_ros.runtime import destroy_when_stopped, end_context

__all__ = ["TASK_ACTION", "CancelOutcome", "TaskClient", "TaskRun", "cancel_running_tasks", "instruct_running_stack"]

TASK_ACTION = EXECUTE_TASK  # relative: under the stack's namespace (robopin.system.names)
# Reasons with which the planner ends a goal before any step ran (robopin.reasoning.loop's checks of the
# request, and the single-goal refusal): the task did not start, as an Instruct rejection says.
_NOT_STARTED = (BUSY_REASON, "invalid_instruction", "invalid_mode", "not_ready")
_ANSWER_TIMEOUT_S = 30.0
_CANCEL_WAIT_S = 30.0


def _rgb(msg: Image) -> np.ndarray | None:
    """The view as uint8 RGB; None for an image no color encoding describes (the step keeps the views it can show)."""
    try:
        return conversions.image_msg_to_color(msg)
    except ImageEncodingError:
        return None


class TaskClient(LoggedNode):
    """Runs, cancels and reads tasks through the ExecuteTask action; keeps the views each step reasoned on."""

    # Callers wait on its futures from their own threads; its callbacks only store what arrived.
    EXECUTOR_THREADS = 1  # robopin_ros.runtime.make_executor

    def __init__(self, views: Sequence[str], *, topics: Mapping[str, ViewTopics] | None = None,
                 deadman: bool = True, **node_options: Any) -> None:
        """``topics``: view -> where its color image is and its QoS (default: our camera_node's names).

        ``deadman``: send the heartbeat that makes the planner cancel our task once we are gone. A client in the
        planner's own process (``robopin up``'s) sends none: it cannot die without the planner, and its beats
        would share the interpreter with every node. Nor does it take its planner for lost when the planner's
        heartbeat goes unheard: the two cannot part, and there the silence is their shared interpreter starved, for
        as long as the machine is loaded; the task's timeout ends a hung one.
        """
        super().__init__("robopin_task_client", **node_options)
        self.views = tuple(views)
        self._lock = threading.Lock()
        self._latest: dict[str, Image] = {}
        self._run: TaskRun | None = None
        self._statuses: dict[bytes, int] = {}
        self._status_received = threading.Event()
        self.action = ActionClient(self, ExecuteTask, TASK_ACTION)
        self.task_action = absolute_name(TASK_ACTION, self.get_namespace())  # as messages name it
        # The task this client follows belongs to it: the planner cancels it once these heartbeats stop
        # (robopin_ros.actions), and the server's tell this client whether its stack still runs.
        self._following: bytes | None = None
        self._created_s = time.monotonic()
        self._heartbeat = HeartbeatSender(self, TASK_CLIENT_HEARTBEAT, lambda: self._following) if deadman else None
        self._server_beats = HeartbeatWatch(self, TASK_SERVER_HEARTBEAT,
                                            reference=TASK_CLIENT_HEARTBEAT if deadman else None)
        self._servers = ActionServers(self)  # who serves the task action (other_servers)
        # Only to learn which tasks run (`robopin cancel` from a fresh process): the action server's own
        # status QoS (transient local) hands a late subscriber the current statuses at once.
        self._status_sub = self.create_subscription(GoalStatusArray, action_status(TASK_ACTION),
                                                    self._on_status, qos_profile_action_status_default)
        for view in self.views:
            view_topics = (topics or {}).get(view) or core_view_topics(view)
            self.create_subscription(Image, view_topics.color, lambda msg, v=view: self._on_image(v, msg),
                                     camera_qos(view_topics.qos, depth=2))
        self.create_subscription(MarkerArray, TARGET_MARKERS, self._on_targets, 10)

    def not_ready(self) -> list[str]:
        """The action server and camera images this client still waits for."""
        waiting = []
        if not self.action.server_is_ready():
            waiting.append(f"{self.task_action} not available yet")
        with self._lock:
            missing = [v for v in self.views if v not in self._latest]
        if missing:
            waiting.append(f"no image received yet from view(s) {missing}")
        return waiting

    # ------------------------------------------------------------------ the verbs
    def run_task(self, instruction: str, *, mode: str = "", dry_run: bool = False, max_steps: int = 0,
                 timeout_s: float = 600.0, on_event: Callable[[FeedbackEvent], None] | None = None,
                 stop: threading.Event | None = None, wait_s: float = 30.0) -> TaskRun:
        """Send the task as an ExecuteTask goal and follow it to its end.

        After ``timeout_s``, or once ``stop`` is set, the goal is canceled (the planner stops the arm) and
        its final status awaited. ``on_event`` sees each feedback as it arrives.
        """
        run = TaskRun(instruction)
        if not self.action.wait_for_server(timeout_sec=wait_s):
            run.message = (f"no {self.task_action} action server within {wait_s:.0f} s: is a stack running in this "
                           "ROS domain and namespace?")
            return run
        others = self.other_servers()
        if others:
            run.message = others
            return run
        goal_uuid = uuid.uuid4()
        run.goal_id, run.task_id = goal_uuid.bytes, goal_uuid.hex[:8]
        goal = ExecuteTask.Goal(instruction=instruction, mode=mode, dry_run=dry_run, max_steps=max_steps)
        answered: list[float] = []

        def server_lost() -> str:
            """Why the stack is taken for gone: its heartbeat for our goal stopped ('' while it answers)."""
            silent = self._server_beats.silent_for(goal_uuid.bytes)
            if silent is None and answered:
                silent = time.monotonic() - answered[0]
            if silent is None or silent <= SERVER_LOST_S:
                return ""
            alive = self._servers.process_alive(action_status(self.task_action))
            if alive and silent <= STARVED_S:
                return ""  # starved, not gone: its process still runs on this host
            still = " (its process still runs: hung or starved)" if alive else ""
            return f"no heartbeat from {self.task_action}'s server for {silent:.1f} s{still}"

        def on_feedback(msg: Any) -> None:
            event = self._on_feedback(run, msg)
            if on_event is not None:
                on_event(event)

        with self._lock:
            self._run = run
        run.start_s = time.monotonic()
        self._following = goal_uuid.bytes  # heartbeats from before the goal is sent: the server never waits
        if self._heartbeat is not None:
            self._heartbeat.beat_now()  # heard before the goal starts (HeartbeatSender.beat_now)
        try:
            outcome = follow_goal(self.action, goal, answer_timeout_s=_ANSWER_TIMEOUT_S, timeout_s=timeout_s,
                                  feedback=on_feedback, should_stop=lambda: stop is not None and stop.is_set(),
                                  cancel_wait_s=_CANCEL_WAIT_S, goal_uuid=UUID(uuid=list(goal_uuid.bytes)),
                                  on_answer=lambda _handle: answered.append(time.monotonic()),
                                  server_lost=server_lost if self._heartbeat is not None else None)
        finally:
            self._following = None
            run.end_s = time.monotonic()
            with self._lock:
                self._run = None
        run.result = outcome.result
        if outcome.ending == "unanswered":
            run.message = f"{self.task_action} did not answer the goal within {_ANSWER_TIMEOUT_S:.0f} s"
        elif outcome.ending == "rejected":
            run.message = f"{self.task_action} rejected the goal: the planner is shutting down"
        elif outcome.result is not None and outcome.result.reason in _NOT_STARTED and not outcome.result.success:
            run.message = outcome.result.message
        else:
            run.accepted = True
            run.message = f"task {run.task_id} started"
            run.timed_out = outcome.ending == "timed_out"
            run.interrupted = outcome.ending == "stopped"
            if outcome.ending == "server_lost":
                run.stack_lost = f"the stack stopped answering: {outcome.lost}; check the arm"
                run.message = run.stack_lost
        return run

    def other_servers(self, settle_s: float = 0.3) -> str:
        """Why a goal must not be sent: more than one server of the task action answers ('' when one does).

        Waits ``settle_s`` for the graph once a server was found (the others are discovered with it).
        """
        young_s = time.monotonic() - self._created_s
        if young_s < 1.0:  # a client long in the graph has discovered every server already
            time.sleep(min(settle_s, 1.0 - young_s))
        return self._servers.refusal(self.task_action)

    def destroy_node(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.close()
        self._servers.close()
        super().destroy_node()

    def cancel_task(self, goal_id: bytes | None = None, wait_s: float = _CANCEL_WAIT_S) -> dict[bytes, int]:
        """Cancel the goal ``goal_id``, or every goal (None); return each canceled goal's final status.

        The planner stops the arm before a goal ends canceled. Works for any client's goal: the action's
        cancel and result services take a goal id, and action_msgs/srv/CancelGoal reads a zero goal id with
        a zero stamp as "cancel all goals". A status of 0 (unknown): no final status within ``wait_s``.
        """
        with self._lock:
            running = {goal for goal, status in self._statuses.items()
                       if status not in TERMINAL_STATUSES and goal_id in (None, goal)}
        sent = self.action.handle_for(goal_id if goal_id is not None else bytes(16)).cancel_goal_async()

        def by_status() -> list[bytes]:
            with self._lock:
                return canceled_by_status(self._statuses, running, goal_id)

        canceling = canceled_goals(sent, min(wait_s, 10.0), by_status) or []
        return {goal: self.result(goal, wait_s)[0] for goal in canceling}

    def result(self, goal_id: bytes, wait_s: float = _CANCEL_WAIT_S) -> tuple[int, Any]:
        """The goal's final status and result once it ended; ``(0, None)`` when it did not within ``wait_s``."""
        answer = GoalResult(self.action.handle_for(goal_id)).answer(wait_s)  # asked again if its reply was dropped
        return (answer.status, answer.result) if answer is not None else (GoalStatus.STATUS_UNKNOWN, None)

    def running_tasks(self, discover_s: float = 10.0) -> list[bytes]:
        """Goal ids of the tasks the action server reports as not yet ended.

        The server's latched status arrives some time after the subscription matched its publisher (seconds
        on a busy machine); a server that never ran a goal has published none: waits ``discover_s`` then.
        """
        self._status_received.wait(timeout=discover_s)
        with self._lock:
            return [goal for goal, status in self._statuses.items() if status not in TERMINAL_STATUSES]

    # ------------------------------------------------------------------ callbacks
    def _on_image(self, view: str, msg: Image) -> None:
        """Keep the newest color image of a view (what the planner is about to see)."""
        with self._lock:
            self._latest[view] = msg

    def _on_targets(self, msg: MarkerArray) -> None:
        """Keep where the projection put the current step's pinned points (the trial log shows them)."""
        targets = conversions.marker_array_to_targets(msg)
        with self._lock:
            run = self._run
            if run is not None and run.events:
                run.targets[run.events[-1].step] = targets

    def _on_status(self, msg: GoalStatusArray) -> None:
        with self._lock:
            for status in msg.status_list:
                self._statuses[bytes(status.goal_info.goal_id.uuid)] = status.status
        self._status_received.set()

    def _on_feedback(self, run: TaskRun, msg: Any) -> FeedbackEvent:
        """Timestamp our task's feedback; keep the views the planner reasons on at each step."""
        feedback = msg.feedback
        step = int(feedback.step)
        event = FeedbackEvent(time.monotonic(), feedback.stage, step, feedback.detail)
        with self._lock:
            run.events.append(event)
            # The planner runs one task at a time (single-goal policy), so these are our task's views.
            grab = feedback.stage == "reasoning" and step not in run.views
            if grab:
                run.views[step] = {}
                latest = dict(self._latest)
        if grab:
            # Decoded outside the lock: copying two 640x480 images must not delay the other callbacks.
            images = {v: _rgb(m) for v, m in latest.items()}
            run.views[step] = {v: img for v, img in images.items() if img is not None}
        return event


# ---------------------------------------------------------------------------------------------------
# `robopin instruct` and `robopin cancel`: a client in a process of its own
# ---------------------------------------------------------------------------------------------------


def instruct_running_stack(instruction: str, *, views: Sequence[str] = ("static", "wrist"), mode: str = "",
                           dry_run: bool = False, max_steps: int = 0, timeout_s: float = 600.0,
                           wait_s: float = 30.0, on_event: Callable[[FeedbackEvent], None] | None = None,
                           stop: threading.Event | None = None, namespace: str = "") -> TaskRun:
    """From a process of its own: give a stack running elsewhere in this ROS domain a task and follow it.

    Setting ``stop`` (the CLI does on Ctrl-C and SIGTERM) cancels the task this call started. ``namespace``
    is the stack's (its system file's ``namespace``; empty: the root namespace).
    """
    with _client_process(views, namespace) as client:
        return client.run_task(instruction, mode=mode, dry_run=dry_run, max_steps=max_steps, timeout_s=timeout_s,
                               on_event=on_event, stop=stop, wait_s=wait_s)


@dataclasses.dataclass
class CancelOutcome:
    """What ``robopin cancel`` did: the tasks it asked to cancel and the final status each reached."""

    requested: list[str]
    final: dict[str, str]
    message: str = ""


def cancel_running_tasks(task_id: str = "", *, wait_s: float = 10.0, discover_s: float = 10.0,
                         namespace: str = "") -> CancelOutcome:
    """From a process of its own: cancel the running task ``task_id`` (a prefix of its id), or every one.

    The planner stops the arm before the goal ends ``canceled``. Waits up to ``wait_s`` for each final status.
    """
    with _client_process((), namespace) as client:
        if not client.action.wait_for_server(timeout_sec=discover_s):
            return CancelOutcome([], {}, f"no {client.task_action} action server: is a stack running in this ROS "
                                         "domain and namespace?")
        others = client.other_servers()
        if others:
            return CancelOutcome([], {}, others)
        if task_id:
            goals = [g for g in client.running_tasks(discover_s) if g.hex().startswith(task_id.lower())]
            statuses = {goal: status for g in goals for goal, status in client.cancel_task(g, wait_s).items()}
        else:
            statuses = client.cancel_task(None, wait_s)  # needs no discovery of what runs
        if not statuses:
            which = f"task {task_id!r}" if task_id else "task"
            return CancelOutcome([], {}, f"no running {which}")
        final = {goal.hex()[:8]: STATUS_NAMES[status] if status in TERMINAL_STATUSES else "still running"
                 for goal, status in statuses.items()}
        return CancelOutcome(list(final), final)


@contextlib.contextmanager
def _client_process(views: Sequence[str], namespace: str = "") -> Iterator[TaskClient]:
    """rclpy context, a TaskClient and its spinning executor for a CLI process; all closed on exit."""
    import rclpy

    apply_ros_environment()
    rclpy.init(args=["robopin_client"], signal_handler_options=SignalHandlerOptions.NO)
    client = TaskClient(views, namespace=namespace)
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, name="robopin-client", daemon=True)
    spinner.start()
    try:
        yield client
    finally:
        destroy_when_stopped(executor, spinner, [client])
        end_context()
