"""Action plumbing every robopin server and client shares: one goal at a time, waits, goals followed to their end.

:class:`SingleGoalGuard` is the policy every action server follows: one goal runs, a second is refused
with a reason (ARCHITECTURE.md, safety rules: never interleave). :func:`wait_future` is the one wait on
an rclpy future spun by other executor threads; :func:`follow_goal` sends a goal, follows it and
cancels it when its time is up or the caller stops it.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from robopin_interfaces.msg import TaskHeartbeat
from unique_identifier_msgs.msg import UUID

from robopin.interfaces import ACTION_STATUS_SUFFIX, PROCESS_PROBE_PREFIX, action_status

BUSY_REASON = "busy"
# A task belongs to its client (ARCHITECTURE.md, safety rules), and a client must learn when its stack is gone.
# Neither shows in the ROS graph in time: a process killed with SIGKILL leaves its DDS participant in the graph
# until Fast DDS's participant lease runs out (20 s by default, ParticipantAttributes.leaseDuration). So each
# side publishes the id of the goal it follows or runs (robopin_interfaces/TaskHeartbeat, on robopin.interfaces'
# TASK_CLIENT_HEARTBEAT and TASK_SERVER_HEARTBEAT) every HEARTBEAT_PERIOD_S, as a
# teleop pendant's deadman does: the server cancels a goal whose client heartbeat stopped for
# CLIENT_DEADMAN_S; the client gives up on a server whose heartbeat stopped for SERVER_LOST_S. A goal whose
# client never sent one (the Instruct service, `ros2 action send_goal`) has no client to watch and runs on.
HEARTBEAT_PERIOD_S = 0.1
CLIENT_DEADMAN_S = 0.5
SERVER_LOST_S = 2.0
# A peer of this host whose process still runs is starved (a loaded machine can leave its heartbeat thread
# unscheduled for seconds: a client's, 1.25 s beside two CPU hogs and two stacks), not gone: each side waits
# this long for it before it names it gone ("its process still runs"). A killed peer's process is gone at once,
# and so, to the server, is a client a person suspended (Ctrl-Z): nobody follows its task any more.
STARVED_S = 15.0
CLIENT_LOST_REASON = "client_lost"
TERMINAL_STATUSES = frozenset({GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED})
STATUS_NAMES = {GoalStatus.STATUS_UNKNOWN: "unknown", GoalStatus.STATUS_ACCEPTED: "accepted",
                GoalStatus.STATUS_EXECUTING: "executing", GoalStatus.STATUS_CANCELING: "canceling",
                GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_CANCELED: "canceled",
                GoalStatus.STATUS_ABORTED: "aborted"}


class ActionClient(_RclpyActionClient):
    """rclpy's ActionClient whose goal, cancel and result requests are registered before any answer is handled,
    and whose goal is taken as accepted once the server's status lists it, answered or not.

    rclpy (jazzy) sends a request, then records its sequence number; an executor thread that takes the
    answer in between logs "Ignoring unexpected ... response" and the future never completes
    (ros2/rclpy#1123, fix proposed in ros2/rclpy#1308, not in jazzy). With a MultiThreadedExecutor
    spinning beside the caller a lost cancel answer makes ``robopin cancel`` report no running task for a task
    it did cancel. Sending and handling an answer here take one lock, so an answer waits for its request's entry.

    A goal response can be dropped as any service reply (rmw_fastrtps, see :class:`GoalResult`): the server runs
    the goal (moves the arm) while its sender waits for an answer that never comes, and nobody follows or can
    cancel it. rclpy's server sends the response, then publishes the status of its goals (transient local, so it
    reaches a client matched late), which lists accepted goals only: :meth:`accept_from_status` answers a pending
    goal request the newest status lists as rclpy would answer it on the response (accepted, stamped with the
    status's accept stamp), and the response, if it still comes, is passed over.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Reentrant: a feedback callback runs inside execute() and may send a request of its own. Made before
        # rclpy's __init__, which ends by adding the client to its node's waitables: an executor already spinning
        # that node can execute() it (a server's latched status) before __init__ returns.
        self._requests_lock = threading.RLock()
        self._accepted_by_status: set[int] = set()  # goal requests answered from the status: their responses
        self._last_status: Any = None  # the server's newest GoalStatusArray
        super().__init__(*args, **kwargs)

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._requests_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle: Any) -> Any:
        with self._requests_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle: Any) -> Any:
        with self._requests_lock:
            return super()._get_result_async(goal_handle)

    async def execute(self, taken_data: Any) -> None:
        with self._requests_lock:
            if "goal" in taken_data and taken_data["goal"][0] in self._accepted_by_status:
                self._accepted_by_status.discard(taken_data["goal"][0])
                taken_data = {kind: data for kind, data in taken_data.items() if kind != "goal"}
            if "status" in taken_data:
                self._last_status = taken_data["status"]
            await super().execute(taken_data)

    def handle_for(self, goal_id: bytes) -> Any:
        """A goal handle for any client's goal, for its cancel and result services: this client's own handle when it
        follows that goal, else one whose status rclpy updates from the server's status from now on (the status it
        had in the newest status message, until then)."""
        with self._requests_lock:
            known = self._goal_handles.get(goal_id)
            handle = known() if known is not None else None
            return handle if handle is not None else self._adopt(UUID(uuid=list(goal_id)), self._listed(goal_id))

    def accept_from_status(self, sent: Any) -> bool:
        """Answer the goal request of ``sent`` (a future of :meth:`send_goal_async`) as accepted when the server's
        newest status lists its goal; True when ``sent`` is done."""
        with self._requests_lock:
            if sent.done():
                return True
            sequence = next((number for number, future in self._pending_goal_requests.items() if future is sent), None)
            goal_id = self._goal_sequence_number_to_goal_id.get(sequence)
            listed = None if goal_id is None else self._listed(bytes(goal_id.uuid))
            if listed is None:
                return False
            handle = self._adopt(goal_id, listed)
            self._accepted_by_status.add(sequence)
            self._node.get_logger().warning(f"{self._action_name}: goal {bytes(goal_id.uuid).hex()[:8]} taken as "
                                            "accepted from the server's status: its goal response did not arrive")
            sent.set_result(handle)
            return True

    def _listed(self, goal_id: bytes) -> Any:
        """The newest status message's entry (GoalStatus) for ``goal_id``, or None."""
        return next((status for status in getattr(self._last_status, "status_list", ())
                     if bytes(status.goal_info.goal_id.uuid) == goal_id), None)

    def _adopt(self, goal_id: Any, listed: Any) -> Any:
        """An accepted handle on ``goal_id`` (a UUID message) with the status and accept stamp ``listed`` gives (None:
        unknown), kept up to date by rclpy's execute() as long as the goal has not ended, as a handle made from a
        goal response is."""
        from rclpy.action.client import ClientGoalHandle

        response = self._action_type.Impl.SendGoalService.Response(accepted=True)
        if listed is not None:
            response.stamp = listed.goal_info.stamp
        handle = ClientGoalHandle(self, goal_id, response)
        handle._status = GoalStatus.STATUS_UNKNOWN if listed is None else listed.status
        if handle.status not in TERMINAL_STATUSES and any(goal_id.uuid):
            self._goal_handles[bytes(goal_id.uuid)] = weakref.ref(handle)
        return handle


def goal_key(goal_handle: Any) -> str:
    """The goal's full UUID as 32 hex digits (server or client goal handle alike)."""
    return bytes(goal_handle.goal_id.uuid).hex()


def wait_future(future: Any, timeout_s: float, should_stop: Callable[[], bool] | None = None) -> bool:
    """Wait for an rclpy future spun by the executor's other threads; False on timeout or once should_stop()."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    deadline = time.monotonic() + timeout_s
    while not done.wait(0.02 if should_stop is not None else max(0.0, min(0.5, deadline - time.monotonic()))):
        if time.monotonic() >= deadline or (should_stop is not None and should_stop()):
            return False
    return True


def future_result(future: Any, timeout_s: float) -> Any:
    """The future's result, or None when it did not complete within ``timeout_s``."""
    return future.result() if wait_future(future, timeout_s) else None


ASK_AGAIN_S = 1.0  # a request of a client never answered yet is sent again after this long (the wait then doubles)
SLOW_ANSWER_FACTOR = 4.0  # a client answered before asks again only after this many times its slowest answer
_slowest_answer_s: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # client -> its slowest answer, s
_slowest_lock = threading.Lock()


def ask(client: Any, request: Any, timeout_s: float, should_stop: Callable[[], bool] | None = None) -> Any:
    """Call a service whose request may be sent twice; its response, or None when none came within ``timeout_s``
    or once ``should_stop()``.

    A reply rmw_fastrtps dropped never comes (the server had not matched the client's reply reader yet, see
    :class:`GoalResult`: right after discovery, or after a starved participant was rediscovered), so an
    unanswered request is sent again: after :data:`ASK_AGAIN_S` for a client never answered, after
    :data:`SLOW_ANSWER_FACTOR` times its slowest answer for one answered before (a server slow on a loaded
    machine is not given the same work twice), the wait doubling each time. Earlier requests stay pending and the
    first answer to any of them is taken, so a slow server never has to beat a resend to be heard.
    """
    answered = threading.Event()
    futures: list[Any] = []
    sent_s: list[float] = []
    deadline = time.monotonic() + timeout_s
    with _slowest_lock:
        slowest = _slowest_answer_s.get(client)
    wait_s = ASK_AGAIN_S if slowest is None else max(ASK_AGAIN_S, SLOW_ANSWER_FACTOR * slowest)
    try:
        while True:
            sent_s.append(time.monotonic())
            future = client.call_async(request)
            futures.append(future)
            future.add_done_callback(lambda _f: answered.set())
            resend_at = sent_s[-1] + wait_s
            while not answered.wait(0.02):
                now = time.monotonic()
                if now >= deadline or (should_stop is not None and should_stop()):
                    return None
                if now >= resend_at:
                    break
            else:
                done = next(i for i, f in enumerate(futures) if f.done())
                took_s = time.monotonic() - sent_s[done]  # the answered request's own time, not the resends'
                with _slowest_lock:
                    _slowest_answer_s[client] = max(took_s, _slowest_answer_s.get(client, 0.0))
                return futures[done].result()
            wait_s *= 2
    finally:
        for future in futures:
            if not future.done():
                client.remove_pending_request(future)


class GoalResult:
    """The result of an accepted goal, asked for again when the status says it ended and no answer came.

    rmw_fastrtps drops a service response when the server's response writer has not matched the client's
    response reader within its max_blocking_time ("client will not receive response", rmw_response.cpp of
    rmw_fastrtps_shared_cpp): a goal that ends at once (a ``busy`` refusal) can end before the server has
    discovered a client that just started, and its result request then waits forever. The status topic is
    transient-local, so it reaches the client once matched; a goal whose status is terminal while no result
    came for :attr:`ASK_AGAIN_S` is asked again (the server keeps a result for rclpy's ``result_timeout``,
    900 s by default).
    """

    ASK_AGAIN_S = 1.0

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._done = threading.Event()
        self._answer: Any = None
        self._asked_s = time.monotonic()
        self._ask()

    def _ask(self) -> None:
        self._asked_s = time.monotonic()
        self._handle.get_result_async().add_done_callback(self._on_answer)

    def _on_answer(self, future: Any) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        if self._answer is None:
            self._answer = future.result()
        self._done.set()

    def wait(self, timeout_s: float, should_stop: Callable[[], bool] | None = None) -> bool:
        """Wait for the answer; False on timeout or once should_stop()."""
        deadline = time.monotonic() + timeout_s
        while not self._done.wait(0.02):
            now = time.monotonic()
            if now >= deadline or (should_stop is not None and should_stop()):
                return False
            if self._handle.status in TERMINAL_STATUSES and now - self._asked_s >= self.ASK_AGAIN_S:
                self._ask()
        return True

    def answer(self, timeout_s: float = 0.0) -> Any:
        """The GetResult answer (``status``, ``result``), or None when none came within ``timeout_s``."""
        return self._answer if self.wait(timeout_s) else None


class SingleGoalGuard:
    """The one slot for a running goal, shared by the action servers that may not run at the same time.

    The decision sits where ros2/examples' ``server_single_goal.py`` puts it: in the server's
    ``handle_accepted_callback`` under a lock, before the goal executes. That example aborts the goal
    already running in favour of the newcomer; robopin never replaces a motion under way without a
    cancel, so the newcomer is refused instead. ROS goal responses cannot carry a reason, so the
    newcomer is accepted and aborted at once with reason ``busy`` and the ID of the goal holding the slot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: str | None = None
        self._refused: dict[str, str] = {}  # goal key -> why it was refused when it came
        self._conflicts: dict[str, Callable[[], str]] = {}  # action served -> why another server forbids a goal
        self._servers: list[ResultOwingActionServer] = []

    @property
    def active(self) -> str | None:
        """Key of the goal holding the slot (see :func:`goal_key`), or None."""
        with self._lock:
            return self._active

    def owed(self) -> list[str]:
        """Keys of the ended goals of this guard's servers whose result is not yet sent to the client who asked."""
        return [goal.hex() for server in self._servers for goal in server.owed() if goal.hex() != self.active]

    def followed(self) -> str | None:
        """The goal a client is following here: the running one, else one whose result is still owed."""
        active = self.active
        if active is not None:
            return active
        owed = self.owed()
        return owed[0] if owed else None

    def busy(self) -> list[str]:
        """The goal running and the results still owed, as text (empty when neither)."""
        active = self.active
        return ([f"goal {active[:8]}"] if active is not None else []) + [
            f"goal {goal[:8]}'s result (not yet sent)" for goal in self.owed()]

    def try_acquire(self, goal_id: str) -> str | None:
        """Take the slot for goal_id; return None on success or the key of the goal already holding it."""
        with self._lock:
            if self._active is not None and self._active != goal_id:
                return self._active
            self._active = goal_id
            return None

    def release(self, goal_id: str) -> None:
        """Free the slot if goal_id holds it (releasing someone else's slot is a no-op)."""
        with self._lock:
            if self._active == goal_id:
                self._active = None

    def conflict(self, name: str) -> str:
        """Why no goal of the action ``name`` (as served) may run: another living process serves it too ('' if
        none does, or this guard does not serve it)."""
        check = self._conflicts.get(name)
        return check() if check is not None else ""

    def busy_message(self, holder: str) -> str:
        """Human-readable refusal naming the goal that holds the server."""
        return f"another goal is running ({holder}); wait for it to finish or cancel it first"

    def serve(self, node: Any, action_type: Any, name: str, execute: Callable[[Any], Any],
              busy_result: Callable[[str], Any], *, accepting: Callable[[], bool],
              cancel_callback: Callable[[Any], CancelResponse] | None = None,
              callback_group: Any = None) -> ActionServer:
        """An ActionServer whose goals take this slot: ``execute(goal_handle)`` runs only while it holds it.

        ``accepting()`` false (the node is stopping) rejects new goals outright. A goal that finds the slot
        taken, or another process serving the action too, is aborted at once with ``busy_result(message)``,
        as is one whose acceptance the middleware would not send to its client; the slot is freed when
        ``execute`` returns.
        """
        from robopin.system.names import absolute_name

        action = absolute_name(name, node.get_namespace())
        servers = ActionServers(node)
        self._conflicts[name] = lambda: servers.refusal(action, naming_s=0.0)

        def on_goal(_request: Any) -> GoalResponse:
            return GoalResponse.ACCEPT if accepting() else GoalResponse.REJECT

        def on_accepted(goal_handle: Any) -> None:
            key = goal_key(goal_handle)
            # A goal (or an Instruct request) reaches every server of the action: while another living process
            # serves it too (a stack its start-up check missed, one that never checked), both refuse, so
            # neither runs a task the other was sent. Named from the graph as it stands: no wait here.
            refusal = self.conflict(name)
            if not refusal:
                holder = self.try_acquire(key)
                refusal = self.busy_message(holder) if holder is not None else ""
            if refusal:
                with self._lock:
                    self._refused[key] = refusal
            goal_handle.execute()

        def on_execute(goal_handle: Any) -> Any:
            key = goal_key(goal_handle)
            with self._lock:
                refusal = self._refused.pop(key, None)
            if refusal is not None:
                self.release(key)  # the slot an Instruct request reserved for this goal (no-op otherwise)
                goal_handle.abort()
                return busy_result(refusal)
            try:
                return execute(goal_handle)
            finally:
                self.release(key)

        def on_unsent(goal_handle: Any) -> None:
            # Ended, never run: the refusal path aborts it before ``execute`` (no motion, no task).
            with self._lock:
                self._refused[goal_key(goal_handle)] = (
                    "not run: the middleware refused to send the goal's acceptance to its client, so the client "
                    "cannot follow or cancel it")
            goal_handle.execute()

        server = ResultOwingActionServer(
            node, action_type, name, execute_callback=on_execute, goal_callback=on_goal,
            handle_accepted_callback=on_accepted, unsent_callback=on_unsent,
            cancel_callback=cancel_callback or (lambda _goal: CancelResponse.ACCEPT), callback_group=callback_group)
        self._servers.append(server)
        return server


class ResultOwingActionServer(ActionServer):
    """rclpy's ActionServer that knows which goals' results it still owes a client who asked for them.

    rclpy (jazzy) answers a result request from a done-callback of the goal's result future, and a future's
    done-callbacks run as new tasks of the executor (``Future._schedule_or_invoke_done_callbacks``): after a
    goal ended, its result goes out only once the executor spins again. A process stopping, or a server
    heartbeat ending with the goal, must wait for that send, not for the goal's end alone.
    """

    def __init__(self, *args: Any, unsent_callback: Callable[[Any], None], **kwargs: Any) -> None:
        accepted = kwargs["handle_accepted_callback"]
        # All made before rclpy's __init__, which ends by adding the server to its node's waitables: from then an
        # executor already spinning that node can run its goal and result requests.
        self._handed: set[bytes] = set()
        self._unsent_callback = unsent_callback
        self._owed_lock = threading.Lock()
        self._owed: dict[bytes, int] = {}

        def on_accepted(goal_handle: Any) -> None:
            self._handed.add(bytes(goal_handle.goal_id.uuid))
            accepted(goal_handle)

        super().__init__(*args, **{**kwargs, "handle_accepted_callback": on_accepted})

    async def _execute_goal_request(self, request_header_and_message: Any) -> None:
        # rclpy (jazzy) accepts a goal (a goal handle, listed ACCEPTED in the status array) before it sends the
        # goal response, and when the rmw refuses that send ("Failed to send goal response", seen on a loaded
        # machine) it returns without handing the goal on: nothing would ever run or end it, and the status
        # array would list it ACCEPTED for the server's life (the recorder opens a task's bag on an accepted
        # goal). Such a goal is ended here instead, never run; its client hears nothing and says so.
        goal = bytes(request_header_and_message[1].goal_id.uuid)
        known = goal in self._goal_handles
        try:
            await super()._execute_goal_request(request_header_and_message)
        finally:
            handed = goal in self._handed
            self._handed.discard(goal)
        handle = None if known or handed else self._goal_handles.get(goal)
        if handle is not None and handle.status == GoalStatus.STATUS_ACCEPTED:
            self._unsent_callback(handle)

    def owed(self) -> list[bytes]:
        """Ids of the goals whose result a client asked for and has not been sent yet."""
        with self._owed_lock:
            return [goal for goal, count in self._owed.items() if count > 0]

    async def _execute_get_result_request(self, request_header_and_message: Any) -> None:
        goal = bytes(request_header_and_message[1].goal_id.uuid)
        known = goal in self._goal_handles  # an unknown goal is answered (UNKNOWN) at once by the base class
        if known:
            with self._owed_lock:
                self._owed[goal] = self._owed.get(goal, 0) + 1
        await super()._execute_get_result_request(request_header_and_message)

    def _send_result_response(self, request_header: Any, future: Any) -> None:
        try:
            super()._send_result_response(request_header, future)
        finally:
            goal = next((goal for goal, owed in self._result_futures.items() if owed is future), None)
            with self._owed_lock:
                if goal is not None and self._owed.get(goal, 0) > 0:
                    self._owed[goal] -= 1
                    if not self._owed[goal]:
                        del self._owed[goal]


@dataclasses.dataclass
class GoalOutcome:
    """How a goal sent with :func:`follow_goal` ended.

    ``ending``: ``finished`` (the server gave a final status; ``status`` and ``result`` hold it),
    ``unanswered`` (no goal response in time), ``rejected``, ``timed_out`` or ``stopped`` (canceled by us;
    ``result`` is the server's answer to the cancel when it came in time, else None), ``server_lost`` (the
    server stopped answering while the goal ran; ``lost`` says how it was noticed).
    """

    ending: str
    status: int = GoalStatus.STATUS_UNKNOWN
    result: Any = None
    handle: Any = None
    lost: str = ""

    @property
    def finished(self) -> bool:
        return self.ending == "finished"


def goal_answered(client: Any, sent: Any, timeout_s: float, should_stop: Callable[[], bool] | None = None) -> bool:
    """Wait for the answer to a goal request (``sent``); False on timeout or once ``should_stop()``. Unanswered after
    :data:`ASK_AGAIN_S`, the goal is looked for in the server's status (:meth:`ActionClient.accept_from_status`: its
    response may have been dropped)."""
    deadline = time.monotonic() + timeout_s
    wait_s = min(ASK_AGAIN_S, timeout_s)
    while not wait_future(sent, wait_s, should_stop):
        if should_stop is not None and should_stop():
            return False
        if isinstance(client, ActionClient) and client.accept_from_status(sent):
            return True
        wait_s = min(0.25, deadline - time.monotonic())
        if wait_s <= 0:
            return False
    return True


def canceled_goals(sent: Any, timeout_s: float, by_status: Callable[[], list[bytes]]) -> list[bytes] | None:
    """The goals a cancel request (``sent``, a CancelGoal future) reached: its answer's ``goals_canceling``; while
    it is unanswered after :data:`ASK_AGAIN_S`, those ``by_status()`` names from the server's status (a reply
    Fast DDS dropped, see :class:`GoalResult`, must not make a canceled task look as if none ran); None when neither
    came within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if wait_future(sent, min(ASK_AGAIN_S, max(0.0, deadline - time.monotonic()))):
            return [bytes(goal.goal_id.uuid) for goal in sent.result().goals_canceling]
        if time.monotonic() >= deadline:
            return None
        reached = by_status()
        if reached:
            return reached


def canceled_by_status(statuses: dict[bytes, int], running: set[bytes], goal_id: bytes | None = None) -> list[bytes]:
    """By the server's statuses (goal id -> status), the goals (``goal_id``, or any) a cancel request has reached:
    those canceling now, and those of ``running`` (running before the request) that ended canceled since."""
    return [goal for goal, status in statuses.items() if goal_id in (None, goal) and (
        status == GoalStatus.STATUS_CANCELING or (status == GoalStatus.STATUS_CANCELED and goal in running))]


def follow_goal(client: ActionClient, goal: Any, *, answer_timeout_s: float, timeout_s: float,
                feedback: Callable[[Any], None] | None = None, should_stop: Callable[[], bool] | None = None,
                cancel_wait_s: float = 5.0, goal_uuid: Any = None,
                on_answer: Callable[[Any], None] | None = None,
                server_lost: Callable[[], str] | None = None, lost_cancel_wait_s: float = 0.5) -> GoalOutcome:
    """Send ``goal`` and wait for its end; cancel it after ``timeout_s`` or once ``should_stop()``.

    A goal sent is followed until the server answers it even when the caller stops meanwhile (for up to
    ``cancel_wait_s`` more): a goal accepted after we stopped waiting would run (move the arm) with nobody to
    cancel it. A canceled goal
    is waited on for up to ``cancel_wait_s`` so the caller learns the arm was told to stop.
    ``on_answer(handle)`` sees the goal handle as soon as the server answered. ``server_lost()``, polled
    while the goal runs, returns why the server is gone ('' while it answers): the goal is then canceled
    (in case the server merely stalls) and waited on only ``lost_cancel_wait_s``. An exception raised while
    the goal runs (in this thread) cancels the goal before it propagates: a goal never outlives its
    follower by accident.
    """
    sent = client.send_goal_async(goal, feedback_callback=feedback, goal_uuid=goal_uuid)
    # A stop while the goal is unanswered still waits ``cancel_wait_s`` for the answer, so that a goal the server
    # accepts meanwhile is canceled below rather than left running with nobody following it.
    if not goal_answered(client, sent, answer_timeout_s, should_stop) and not (
            should_stop is not None and should_stop() and goal_answered(client, sent, cancel_wait_s)):
        return GoalOutcome("unanswered")
    handle = sent.result()
    if on_answer is not None:
        on_answer(handle)
    if not handle.accepted:
        return GoalOutcome("rejected", handle=handle)
    results = GoalResult(handle)
    lost = ""

    def stop_following() -> bool:
        nonlocal lost
        if should_stop is not None and should_stop():
            return True
        lost = server_lost() if server_lost is not None else ""
        return bool(lost)

    try:
        finished = results.wait(timeout_s,
                                stop_following if should_stop is not None or server_lost is not None else None)
    except BaseException:
        handle.cancel_goal_async()  # the request is on its way; the exception is the caller's to report
        raise
    if finished:
        answer = results.answer()
        return GoalOutcome("finished", answer.status, answer.result, handle)
    stopped = should_stop is not None and should_stop()
    if lost and not stopped and handle.status in TERMINAL_STATUSES:
        # The server ended the goal (its status topic says so) and then went quiet: its result is on the way or
        # lost with the server; nothing is left to cancel.
        answer = results.answer(cancel_wait_s)
        if answer is not None:
            return GoalOutcome("finished", answer.status, answer.result, handle)
        return GoalOutcome("server_lost", handle.status, None, handle, lost=lost)
    wait_s = lost_cancel_wait_s if lost and not stopped else cancel_wait_s
    wait_future(handle.cancel_goal_async(), wait_s)
    answer = results.answer(wait_s)
    ending = "stopped" if stopped else ("server_lost" if lost else "timed_out")
    return GoalOutcome(ending, answer.status if answer is not None else 0,
                       answer.result if answer is not None else None, handle, lost=lost)


# Heartbeats are worth nothing late: best effort, the newest only.
_HEARTBEAT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)


class HeartbeatSender:
    """Publishes the id of the goal ``current()`` names on ``topic`` every :data:`HEARTBEAT_PERIOD_S`.

    From a thread of its own, not an executor timer: an executor busy with long callbacks must not make a
    living peer look dead. Publishes nothing while ``current()`` is None.
    """

    def __init__(self, node: Any, topic: str, current: Callable[[], bytes | None]) -> None:
        self._publisher = node.create_publisher(TaskHeartbeat, topic, _HEARTBEAT_QOS)
        self._pid, self._pid_space = os.getpid(), pid_space()
        self._current = current
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{topic.rsplit('/', 1)[-1]}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.wait(HEARTBEAT_PERIOD_S):
            if not self.beat_now():
                return

    def beat_now(self) -> bool:
        """Publish the current goal's heartbeat now (False once the node is being destroyed).

        A client calls it before it sends its goal: a goal is watched only from its first heartbeat heard,
        and a client killed within the first period after its goal (a task can reach its model call in
        45 ms) would otherwise leave a task nobody watches.
        """
        goal = self._current()
        if goal is None:
            return True
        try:
            self._publisher.publish(TaskHeartbeat(goal_id=UUID(uuid=list(goal)), pid=self._pid,
                                                  pid_space=self._pid_space))
        except Exception:  # the node is being destroyed: nothing more to say
            return False
        return True

    def close(self) -> None:
        """Stop publishing (before the node is destroyed)."""
        self._closed.set()
        self._thread.join(timeout=1.0)


class HeartbeatWatch:
    """When each goal's heartbeat on ``topic`` was last heard (monotonic clock: the peers are real processes).

    ``reference``: a heartbeat topic this process publishes itself (the task server's own), heard through the
    same subscriber and executor. While it comes through, a peer's silence is counted to now; once it too has
    not come for :data:`REFERENCE_STALE_S`, this side is not hearing anything (its executor or the machine is
    starved) and the peer's silence is counted only up to the last own heartbeat heard: a busy server does not
    take a living client for a dead one, and a dead client is still found within the deadman time whenever the
    server hears at all. Each heartbeat names its sender's process: :meth:`sender_runs` tells a starved peer of
    this host from a gone one.
    """

    _FORGET_S = 600.0  # a goal silent this long is forgotten (its task ended long ago)
    REFERENCE_STALE_S = 2 * HEARTBEAT_PERIOD_S

    def __init__(self, node: Any, topic: str, reference: str | None = None) -> None:
        self._lock = threading.Lock()
        self._heard: dict[bytes, float] = {}
        self._senders: dict[bytes, tuple[int, str]] = {}
        self._reference_heard: float | None = None
        self._pid_space = pid_space()
        self._subscription = node.create_subscription(TaskHeartbeat, topic, self._on_heartbeat, _HEARTBEAT_QOS)
        self._reference = None if reference is None else node.create_subscription(
            TaskHeartbeat, reference, self._on_reference, _HEARTBEAT_QOS)

    def _on_reference(self, _msg: TaskHeartbeat) -> None:
        with self._lock:
            self._reference_heard = time.monotonic()

    def _on_heartbeat(self, msg: TaskHeartbeat) -> None:
        now = time.monotonic()
        goal = bytes(msg.goal_id.uuid)
        with self._lock:
            self._heard[goal] = now
            self._senders[goal] = (int(msg.pid), str(msg.pid_space))
            if len(self._heard) > 64:
                self._heard = {goal: t for goal, t in self._heard.items() if now - t < self._FORGET_S}
                self._senders = {goal: sender for goal, sender in self._senders.items() if goal in self._heard}

    def sender_runs(self, goal: bytes) -> bool | None:
        """Whether the process that sent the goal's heartbeats still runs: True while it lives and is not stopped
        (starved at worst); False once it is gone, a zombie or stopped (SIGSTOP, Ctrl-Z); None when it cannot be
        looked at (another host or pid namespace, or no heartbeat heard)."""
        with self._lock:
            sender = self._senders.get(goal)
        if sender is None or not sender[1] or sender[1] != self._pid_space:
            return None
        return process_state(sender[0]) not in (None, "Z", "X", "T", "t")

    def silent_for(self, goal: bytes) -> float | None:
        """Seconds since the goal's last heartbeat (to the last own one heard, while those stall); None if none
        was ever heard."""
        now = time.monotonic()
        with self._lock:
            heard, reference = self._heard.get(goal), self._reference_heard
        if heard is None:
            return None
        if reference is not None and now - reference > self.REFERENCE_STALE_S:
            return max(0.0, reference - heard)
        return now - heard


def pid_space() -> str:
    """This process's pid space: the kernel's boot id and its pid namespace (two processes' ids compare only
    within one), '' where /proc cannot tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` in /proc (proc(5): R, S, D, Z, T, …), None when there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _process_alive(pid16: int) -> bool:
    """Whether a living process of this host has an id whose low 16 bits are ``pid16``.

    A killed process stays in /proc as a zombie (state Z, proc(5)) until its parent reaps it: that is not alive.
    """
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit() and int(entry) & 0xFFFF == pid16]
    except OSError:
        return True  # cannot tell: count it as alive
    return any(process_state(int(entry)) not in (None, "Z", "X") for entry in entries)  # None: gone meanwhile


UNNAMED_NODE = "_NODE_NAME_UNKNOWN_"  # what rmw's graph cache names a node it has not heard of yet
DISCOVERY_S = 3.5
"""How long a process looks for another server once the graph holds its own endpoint. On loopback a participant
already in the domain is usually found within 0.1 s; on a busy machine it took up to 2.5 s (6 busy processes
on 2 cores), and up to 3.6 s with 8 participants in the domain beside a test run and a trial batch. Fast DDS
repeats a participant's announcement every 3 s (``leaseDuration_announcementperiod``) once its five initial
ones (100 ms apart) are sent: a window past one period gives a discovery that missed the first exchange a
second chance; a server found later still is handled by :func:`older_server_found`."""
LATE_DISCOVERY_S = 20.0
"""How long a node that started as the only server keeps looking for an older one it had not yet discovered:
Fast DDS's participant lease (``leaseDuration``, 20 s), the longest a living participant can stay unheard."""
NAMING_S = 3.0
"""How long a server found is given to be named (Jazzy names a node from its participant's discovery info,
which arrives after the endpoints)."""


class ActionServers:
    """Which processes serve an action, read from the graph: one stack per namespace is judged by this.

    A Fast DDS GUID prefix holds the host id (bytes 2-3), the low 16 bits of the process id (4-5) and a
    per-process random (6-7) (Fast DDS ``GuidUtils.hpp``; ``is_on_same_process_as`` compares bytes 2-7); each
    server's ``_action/status`` publisher gid carries it. Two kinds of leftovers are not servers: a server of a
    context this process closed (its participant leaves the graph only once Python frees the context) counts
    as this process, and one of a dead process of this host (killed: it stays in the graph until its 20 s
    participant lease ends) is dropped. This process is known by the gid of a publisher of its own.
    """

    def __init__(self, node: Any) -> None:
        from std_msgs.msg import Empty

        from robopin.system.names import absolute_name

        self._node = node
        relative = f"{PROCESS_PROBE_PREFIX}/pid{os.getpid()}_{id(self):x}"  # relative: under the node's namespace
        self._own_topic = absolute_name(relative, node.get_namespace())
        self._own_publisher = node.create_publisher(Empty, relative, 1)
        self._own: bytes | None = None

    def own_prefix(self) -> bytes | None:
        """This process's GUID prefix (None until the graph cache holds our own publisher)."""
        if self._own is None:
            infos = self._node.get_publishers_info_by_topic(self._own_topic)
            self._own = bytes(infos[0].endpoint_gid)[:12] if infos else None
        return self._own

    def by_process(self, status_topic: str) -> dict[bytes, list[str]]:
        """Process (GUID prefix bytes 2-7) -> the nodes of it that serve the action of ``status_topic``.

        Servers of this process are keyed ``b"self"``; each name says where it runs.
        """
        from robopin.system.names import absolute_name

        own = self.own_prefix()
        servers: dict[bytes, list[str]] = {}
        for info in self._node.get_publishers_info_by_topic(status_topic):
            gid = bytes(info.endpoint_gid)
            same_host = own is not None and gid[2:4] == own[2:4]
            pid16 = int.from_bytes(gid[4:6], "little")
            if own is not None and gid[2:8] == own[2:8]:
                key, where = b"self", "this process"
            elif same_host and not _process_alive(pid16):
                continue
            else:
                key, where = gid[2:8], f"process {pid16} on this host" if same_host else "another host"
            name = f"{absolute_name(info.node_name, info.node_namespace)} ({where})"
            if name not in servers.setdefault(key, []):
                servers[key].append(name)
        return servers

    def process_alive(self, status_topic: str) -> bool | None:
        """Whether a process of this host serving the action of ``status_topic`` still lives: True; False when no
        living process serves it; None when only another host's does (its process cannot be looked at)."""
        servers = self.by_process(status_topic)
        if any(key == b"self" or any("on this host" in name for name in names) for key, names in servers.items()):
            return True
        return None if servers else False

    def refusal(self, action: str, naming_s: float = 3.0) -> str:
        """Why a goal must not be sent to ``action``: more than one process serves it ('' when one does).

        Two stacks in one ROS domain and namespace would both take a goal sent to their action; which one moves
        is up to DDS. Every action server publishes the action's status topic, so its publishers are the servers.
        """
        servers = self.by_process(action_status(action))
        deadline = time.monotonic() + naming_s
        # rmw's graph cache knows an endpoint before its node's name (which comes with the participant's
        # discovery info): a newly found server is given a moment to be named, and is refused either way.
        while len(servers) > 1 and UNNAMED_NODE in str(servers) and time.monotonic() < deadline:
            time.sleep(0.1)
            servers = self.by_process(action_status(action))
        if len(servers) <= 1:
            return ""
        names = sorted(name for names in servers.values() for name in names)
        return (f"{len(servers)} servers answer {action} ({', '.join(names)}): two stacks share this ROS "
                "domain and namespace, and either could run the task; stop one, or give each its own namespace "
                "or ROS_DOMAIN_ID")

    def close(self) -> None:
        self._node.destroy_publisher(self._own_publisher)


def _other_servers(node: Any, servers: ActionServers) -> dict[str, dict[bytes, list[str]]]:
    """Actions ``node`` serves that another process serves too: action -> that process's key -> its servers."""
    found: dict[str, dict[bytes, list[str]]] = {}
    for topic, _types in node.get_topic_names_and_types():
        if not topic.endswith(ACTION_STATUS_SUFFIX):
            continue
        by_process = servers.by_process(topic)
        if b"self" in by_process and len(by_process) > 1:
            found[topic.removesuffix(ACTION_STATUS_SUFFIX)] = {
                key: names for key, names in by_process.items() if key != b"self"}
    return found


def _names(found: dict[str, dict[bytes, list[str]]]) -> dict[str, list[str]]:
    return {action: sorted(name for names in by_process.values() for name in names)
            for action, by_process in found.items()}


def served_elsewhere(node: Any, discovery_s: float = DISCOVERY_S, naming_s: float = NAMING_S,
                     max_wait_s: float = 10.0) -> dict[str, list[str]]:
    """Actions ``node`` serves that a living process other than this one serves too: action -> its other servers.

    What a node started on its own (``ros2 launch``: a process per node, no ``robopin up`` to probe first) checks
    before it takes goals: two servers of one action in a domain and namespace both take a goal sent to it, and
    which one moves is up to DDS. Looks ``discovery_s`` from the moment the graph holds this process's own
    endpoint (nothing needs to spin: rmw's discovery threads fill the graph cache), at most ``max_wait_s`` in
    all, and gives a server found up to ``naming_s`` to be named. Empty for a node serving no action.
    """
    if not any(isinstance(w, ActionServer) for w in node.waitables):
        return {}
    servers = ActionServers(node)
    started = time.monotonic()
    seen_own: float | None = None
    found_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if seen_own is None and servers.own_prefix() is not None:
                seen_own = now
            found = _names(_other_servers(node, servers)) if seen_own is not None else {}
            if found and found_at is None:
                found_at = now
            if found_at is not None and (UNNAMED_NODE not in str(found) or now - found_at >= naming_s):
                return found
            if (seen_own is not None and now - seen_own >= discovery_s) or now - started >= max_wait_s:
                return found
            time.sleep(0.1)
    finally:
        servers.close()


def _start_order(pid: int | str) -> tuple[int, int] | None:
    """(start time in clock ticks since boot, pid) of a process of this host; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[19]), int(pid) if pid != "self" else os.getpid()  # starttime: field 22 of proc(5)
    except (OSError, IndexError, ValueError):
        return None


def _started_before_this_process(pid16: int) -> bool:
    """Whether a living process of this host, whose id's low 16 bits are ``pid16``, started before this one."""
    own = _start_order("self")
    try:
        entries = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return False
    for pid in entries:
        if pid & 0xFFFF == pid16 and pid != os.getpid():
            order = _start_order(pid)
            if order is not None and own is not None and order < own:
                return True
    return False


def older_server_found(node: Any, stop: threading.Event, watch_s: float = LATE_DISCOVERY_S,
                       naming_s: float = NAMING_S) -> dict[str, list[str]]:
    """After start-up, watch ``watch_s`` for a server of this node's actions in a process of this host that
    started before this one (its discovery came after :func:`served_elsewhere` looked): action -> its servers.

    Discovery on a busy machine can take longer than the start-up window (Fast DDS announces a participant
    every 3 s after its first five announcements; up to 3.6 s measured with 8 participants in a domain beside a
    test run and a batch). Of two servers the later-started one is the duplicate, and it is the one that goes;
    a server on another host cannot be ordered, and each server's own goal check refuses while both answer.
    Empty when none is found within ``watch_s`` or once ``stop`` is set.
    """
    if not any(isinstance(w, ActionServer) for w in node.waitables):
        return {}
    servers = ActionServers(node)
    deadline = time.monotonic() + watch_s
    found_at: float | None = None
    try:
        while not stop.wait(0.2):
            now = time.monotonic()
            same_host = servers.own_prefix()
            found = {}
            for action, by_process in _other_servers(node, servers).items():
                older = {key: names for key, names in by_process.items()
                         if same_host is not None and key[:2] == same_host[2:4]
                         and _started_before_this_process(int.from_bytes(key[2:4], "little"))}
                if older:
                    found[action] = older
            if found:
                found_at = now if found_at is None else found_at
                named = _names(found)
                if UNNAMED_NODE not in str(named) or now - found_at >= naming_s:
                    return named
            elif now >= deadline:
                return {}
        return {}
    finally:
        servers.close()
