"""The operator console's ROS side: live views, the task's stage, Instruct and Stop, over the stack's interfaces.

:class:`ConsoleRosLink` is the link :class:`robopin.trials.console.ConsoleServer` serves. It is a
client of the interfaces every stack has, nothing more: the camera images
(``/cameras/<view>/color/image_raw``) and the planner's annotated views
(``/robopin/reasoning/<view>/image``: pins and IDs drawn), the ExecuteTask feedback and status
topics (and, once a task has ended, its result from the action's ``get_result`` service: how it ended and
why), ``/robopin/instruct`` (the same call as ``robopin instruct``), and for Stop both the
ExecuteTask action's ``cancel_goal`` service with a zero goal id and zero stamp (action_msgs
CancelGoal.srv: that cancels every goal) and the arm driver's ``<prefix>/stop`` (std_srvs/Trigger,
``arm_driver_node``). It runs in an rclpy context of its own, so it outlives the per-trial stacks
``robopin trial`` brings up in the same process, and works as well against a stack in another process.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from action_msgs.msg import GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from robopin_interfaces.action import ExecuteTask
from robopin_interfaces.srv import Instruct
from sensor_msgs.msg import Image
from std_srvs.srv import Trigger

from robopin.cameras.topics import ViewTopics
from robopin.cameras.topics import view_topics as core_view_topics
from robopin.interfaces import (
    ARM,
    EXECUTE_TASK,
    INSTRUCT,
    action_cancel_goal,
    action_feedback,
    action_get_result,
    action_status,
    arm_names,
    reasoning_image,
)
from robopin.trials.log import encode_png
from robopin_ros import conversions
from robopin_ros.actions import (
    STATUS_NAMES,
    ActionServers,
    ask,
    canceled_by_status,
    canceled_goals,
    wait_future,
)
from robopin_ros.camera_snapshot import camera_qos
from robopin_ros.logs import LoggedNode
from robopin_ros.runtime import destroy_when_stopped, end_context

__all__ = ["ConsoleRosLink", "open_console_link"]

_KINDS = ("camera", "reasoning")
_RESULT_WAIT_S = 30.0  # an ended goal's result is asked for this long (a server keeps it 900 s: rclpy)
_ENDED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)
# The planner answers Instruct at once (it validates, then starts the goal); a reply not here this long after
# the task's goal showed in the status topic was dropped on the way.
_INSTRUCT_REPLY_S = 30.0
_LOST_REPLY_S = 2.0


class ConsoleRosLink(LoggedNode):
    """Subscribes to the views and the task, calls Instruct, cancel and stop (see the module docstring)."""

    def __init__(self, views: Sequence[str], *, arm_prefix: str = ARM.prefix,
                 topics: Mapping[str, ViewTopics] | None = None, **node_options: Any) -> None:
        """``topics``: view -> its camera topics and QoS (a system's ``view_topics()``; default: camera_node's)."""
        self._destroying = threading.Event()
        super().__init__("robopin_operator_console", **node_options)
        self.view_names = tuple(views)
        self.arm_prefix = arm_names(arm_prefix).prefix
        self._lock = threading.Lock()
        self._images: dict[tuple[str, str], tuple[int, Image]] = {}
        self._png: dict[tuple[str, str], tuple[int, bytes]] = {}
        self._feedback: dict[str, Any] = {}
        self._status: dict[bytes, int] = {}
        self._accepted: dict[bytes, float] = {}  # goal id -> when the server accepted it (its goal_info stamp)
        self._results: dict[bytes, dict[str, Any] | None] = {}  # None: asked, not answered yet
        self.instruct_client = self.create_client(Instruct, INSTRUCT)
        self.result_client = self.create_client(ExecuteTask.Impl.GetResultService, action_get_result(EXECUTE_TASK))
        self.cancel_client = self.create_client(CancelGoal, action_cancel_goal(EXECUTE_TASK))
        self.stop_client = self.create_client(Trigger, arm_names(self.arm_prefix).stop)
        self._servers = ActionServers(self)  # an instruction is refused while two stacks answer
        for view in self.view_names:
            camera = (topics or {}).get(view) or core_view_topics(view)
            self.create_subscription(Image, camera.color, lambda msg, v=view: self._on_image("camera", v, msg),
                                     camera_qos(camera.qos, depth=2))
            self.create_subscription(Image, reasoning_image(view),
                                     lambda msg, v=view: self._on_image("reasoning", v, msg), 2)
        self.create_subscription(ExecuteTask.Impl.FeedbackMessage, action_feedback(EXECUTE_TASK),
                                 self._on_feedback, 20)
        self.create_subscription(GoalStatusArray, action_status(EXECUTE_TASK), self._on_status, 10)

    def _on_image(self, kind: str, view: str, msg: Image) -> None:
        """Keep the newest image of a view (encoded only when a page asks for it)."""
        with self._lock:
            seq = self._images.get((kind, view), (0, None))[0] + 1
            self._images[(kind, view)] = (seq, msg)

    def _on_feedback(self, msg: ExecuteTask.Impl.FeedbackMessage) -> None:
        """Keep the running task's stage."""
        with self._lock:
            self._feedback = {"stage": msg.feedback.stage, "step": int(msg.feedback.step),
                              "detail": msg.feedback.detail, "task_id": bytes(msg.goal_id.uuid).hex()[:8],
                              "time": time.time()}

    def _on_status(self, msg: GoalStatusArray) -> None:
        """Keep every task goal's status; ask for the result of one that has ended (how and why it ended)."""
        ended = []
        with self._lock:
            for status in msg.status_list:
                goal = bytes(status.goal_info.goal_id.uuid)
                self._status[goal] = status.status
                self._accepted.setdefault(goal, conversions.stamp_to_seconds(status.goal_info.stamp))
                if status.status in _ENDED and goal not in self._results:
                    self._results[goal] = None
                    ended.append(goal)
        for goal in ended:
            threading.Thread(target=self._fetch_result, args=(goal,), name="console-result", daemon=True).start()

    def _fetch_result(self, goal: bytes) -> None:
        """Ask for an ended goal's result, again if Fast DDS dropped the reply (actions.ask), on a thread of its own."""
        request = ExecuteTask.Impl.GetResultService.Request()
        request.goal_id.uuid = list(goal)
        try:
            answer = ask(self.result_client, request, _RESULT_WAIT_S, self._destroying.is_set)
        except Exception:  # the client was destroyed with the node between two requests
            if not self._destroying.is_set():
                raise
            return
        result = None if answer is None else answer.result
        with self._lock:
            if result is None:
                self._results.pop(goal, None)  # unanswered: asked again with the next status message
            else:
                self._results[goal] = {"success": bool(result.success), "reason": result.reason,
                                       "message": result.message}

    # ------------------------------------------------------------------ the ConsoleLink interface
    def views(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"name": view, "kind": kind, "seq": self._images[(kind, view)][0]}
                    for kind in _KINDS for view in self.view_names if (kind, view) in self._images]

    def latest_color(self, kind: str, view: str) -> np.ndarray | None:
        """The newest image of a view as RGB (None before the first)."""
        with self._lock:
            entry = self._images.get((kind, view))
        return None if entry is None else conversions.image_msg_to_color(entry[1])

    def png(self, kind: str, view: str) -> bytes | None:
        with self._lock:
            entry = self._images.get((kind, view))
            cached = self._png.get((kind, view))
        if entry is None:
            return None
        if cached is not None and cached[0] == entry[0]:
            return cached[1]
        data = encode_png(conversions.image_msg_to_color(entry[1]), level=1)
        with self._lock:
            self._png[(kind, view)] = (entry[0], data)
        return data

    def task(self) -> dict[str, Any]:
        """The newest task: its last stage, its status, and once it ended its result (``success``, ``reason``,
        ``message``). ``{}`` before any task."""
        with self._lock:
            feedback = dict(self._feedback)
            newest = max(self._accepted, key=self._accepted.__getitem__, default=None)
            known = {goal.hex()[:8] for goal in self._accepted}
            if newest is None or (feedback and feedback["task_id"] not in known):
                return {**feedback, "status": ""} if feedback else {}  # its status has not arrived yet
            task_id = newest.hex()[:8]
            task = feedback if feedback.get("task_id") == task_id else {"task_id": task_id}
            code = self._status.get(newest)
            task["status"] = STATUS_NAMES.get(code, "") if code else ""
            result = self._results.get(newest)
        if result is not None:
            task["result"] = result
        return task

    def instruct(self, instruction: str, dry_run: bool = False) -> dict[str, Any]:
        """The same call as ``robopin instruct``: the planner validates and answers at once."""
        if not self.instruct_client.wait_for_service(timeout_sec=5.0):
            return {"accepted": False, "task_id": "",
                    "message": f"{self.instruct_client.srv_name} is not available: is the stack up?"}
        others = self._servers.refusal(EXECUTE_TASK)
        if others:
            return {"accepted": False, "task_id": "", "message": others}
        request = Instruct.Request(instruction=instruction, dry_run=dry_run)
        with self._lock:
            known = set(self._accepted)
        response, started = self._instruct_reply(self.instruct_client.call_async(request), known)
        if response is not None:
            return {"accepted": bool(response.accepted), "task_id": response.task_id, "message": response.message}
        name = self.instruct_client.srv_name
        ids = [goal.hex()[:8] for goal in started]
        if len(ids) == 1:
            return {"accepted": True, "task_id": ids[0],
                    "message": f"task {ids[0]} started: {instruction.strip()!r} ({name}'s reply was lost; the "
                               f"task's status shows it started)"}
        if ids:
            return {"accepted": False, "task_id": "",
                    "message": f"{name}'s reply was lost and tasks {', '.join(ids)} started meanwhile: see the "
                               f"task, Stop cancels them"}
        return {"accepted": False, "task_id": "",
                "message": f"{name} did not answer within {_INSTRUCT_REPLY_S:.0f} s and no task started"}

    def _instruct_reply(self, future: Any, known: set[bytes]) -> tuple[Any, list[bytes]]:
        """The planner's reply to Instruct, or (None, the goals that started since ``known``) when none came.

        rmw_fastrtps drops a reply whose client's reply reader the server has not matched yet (see
        :class:`robopin_ros.actions.GoalResult`); it happens to a request sent right after the service showed up.
        The planner has then started the task all the same: it runs it as an ExecuteTask goal, whose status this
        link follows (the status topic is transient-local, so a late match still brings it). A goal new since
        the request with no reply ``_LOST_REPLY_S`` after it showed is taken as the sign of a lost reply.
        """
        started: list[bytes] = []
        started_seen: list[float] = []

        def reply_lost() -> bool:
            with self._lock:
                started[:] = [goal for goal in self._accepted if goal not in known]
            if started and not started_seen:
                started_seen.append(time.monotonic())
            return bool(started_seen) and time.monotonic() - started_seen[0] >= _LOST_REPLY_S

        if wait_future(future, _INSTRUCT_REPLY_S, reply_lost) or future.done():
            return future.result(), []
        return None, started

    def destroy_node(self) -> None:
        self._destroying.set()  # result fetches still asking end
        self._servers.close()
        super().destroy_node()

    def stop(self) -> dict[str, Any]:
        """Cancel every ExecuteTask goal and stop the arm; both are tried whatever the other answers."""
        # action_msgs/srv/CancelGoal: goal id zero and stamp zero cancel all goals.
        request = CancelGoal.Request()
        request.goal_info.goal_id.uuid = [0] * 16
        canceled, cancel_message = [], "the task action's cancel service is not available"
        if self.cancel_client.wait_for_service(timeout_sec=2.0):
            with self._lock:
                running = {goal for goal, status in self._status.items() if status not in _ENDED}

            def by_status() -> list[bytes]:
                with self._lock:
                    return canceled_by_status(self._status, running)

            goals = canceled_goals(self.cancel_client.call_async(request), 10.0, by_status)
            if goals is None:
                cancel_message = "the cancel request was not answered within 10 s"
            else:
                canceled = [goal.hex()[:8] for goal in goals]
                cancel_message = (f"canceling task(s) {', '.join(canceled)}" if canceled else "no task was running")
        arm_ok, arm_message = False, f"{self.arm_prefix}/stop is not available"
        if self.stop_client.wait_for_service(timeout_sec=2.0):
            # Stopping a stopped arm stops it again: asked again if Fast DDS dropped the reply (actions.ask), so a
            # stop the arm obeyed is confirmed. The cancel above is not: a second cancel-all answers "none running".
            answer = ask(self.stop_client, Trigger.Request(), 10.0)
            if answer is None:
                arm_message = f"{self.arm_prefix}/stop did not answer within 10 s"
            else:
                arm_ok, arm_message = bool(answer.success), answer.message
        # The arm's stop is what Stop promises: when it was not confirmed, the answer says STOP FAILED first.
        head = "STOP" if arm_ok else "STOP FAILED (the arm's stop was not confirmed)"
        return {"ok": arm_ok, "canceled": canceled, "message": f"{head}: arm {arm_message}; {cancel_message}",
                "arm": arm_message, "cancel": cancel_message}


class _LinkHandle:
    """A started link in its own context; ``close()`` stops it (and only it)."""

    def __init__(self, link: ConsoleRosLink, executor: MultiThreadedExecutor, context: Context,
                 thread: threading.Thread) -> None:
        self.link, self._executor, self._context, self._thread = link, executor, context, thread

    def close(self) -> None:
        destroy_when_stopped(self._executor, self._thread, [self.link])
        end_context(self._context)


def open_console_link(views: Sequence[str], *, arm_prefix: str = ARM.prefix, namespace: str = "",
                      initialize_logging: bool = True, topics: Mapping[str, ViewTopics] | None = None) -> _LinkHandle:
    """Start a :class:`ConsoleRosLink` spinning in a context and thread of its own.

    ``namespace``: the robot's (its system file's ``namespace``), where the link's relative names resolve.
    ``initialize_logging=False`` where the process brings stacks up and down in the default context
    (``robopin trial``): rclpy configures logging once per process and finalizes it with the last
    context, so a console context holding it would keep the first stack's rosout publishers alive
    and every later stack's nodes would log into a shut-down context.
    """
    from robopin.env import apply_ros_environment

    apply_ros_environment()
    context = Context()
    context.init(["robopin_console"], initialize_logging=initialize_logging)  # no signal handlers: ours
    try:
        link = ConsoleRosLink(views, arm_prefix=arm_prefix, topics=topics, context=context, namespace=namespace)
        executor = MultiThreadedExecutor(num_threads=3, context=context)
        executor.add_node(link)
    except BaseException:
        end_context(context)
        raise

    def spin() -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):
            executor.spin()

    thread = threading.Thread(target=spin, name="robopin-console-ros", daemon=True)
    thread.start()
    return _LinkHandle(link, executor, context, thread)
