"""A goal whose acceptance the middleware will not send is ended, never run, and frees nothing it did not take.

rclpy (jazzy, ``ActionServer._execute_goal_request``) creates the goal handle, which lists the goal ACCEPTED in the
status array, before it sends the goal response; when rcl refuses that send it logs "Failed to send goal response
(the client may have gone away)" and returns without calling the accepted callback; it happens on a loaded
machine. Nothing then runs or ends that goal: it stays ACCEPTED for the server's life, and the recorder, which
opens a task's bag on an accepted goal, would by its code record the next task under its name and keep that bag open.

The rmw's refusal cannot be caused on demand (a reliable writer that cannot place the reply in time), so it is the
one part stood in for: rclpy's own ``ActionServer`` handle class, subclassed so its ``send_goal_response`` raises
rclpy's ``RCLError`` once, as the binding does when rcl returns an error. Everything else is rclpy and Fast DDS.
"""

from __future__ import annotations

import threading
import uuid

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture
def refusing_middleware(monkeypatch):
    """The next goal response any action server of this process sends is refused by the middleware."""
    from rclpy.impl.implementation_singleton import rclpy_implementation

    refuse = threading.Event()
    refuse.set()

    class RefusingHandle(rclpy_implementation.ActionServer):
        def send_goal_response(self, header, response):
            if refuse.is_set():
                refuse.clear()
                raise rclpy_implementation.RCLError("failed to send response (the middleware refused the write)")
            return super().send_goal_response(header, response)

    monkeypatch.setattr(rclpy_implementation, "ActionServer", RefusingHandle)
    return refuse


def test_a_goal_whose_acceptance_is_never_sent_ends_aborted_unrun_and_the_next_goal_runs(ros_context,
                                                                                         refusing_middleware):
    from action_msgs.msg import GoalStatus, GoalStatusArray
    from robopin_interfaces.action import ExecuteTask
    from robopin_ros.actions import future_result
    from unique_identifier_msgs.msg import UUID

    from .rostest_utils import guarded_action, wait_for

    ran = []

    def execute(goal_handle):
        ran.append(goal_handle.request.instruction)
        goal_handle.succeed()
        return ExecuteTask.Result(success=True, reason="done")

    statuses: dict[bytes, list[int]] = {}
    lock = threading.Lock()

    def on_status(msg):
        with lock:
            for status in msg.status_list:
                seen = statuses.setdefault(bytes(status.goal_info.goal_id.uuid), [])
                if not seen or seen[-1] != status.status:
                    seen.append(status.status)

    with guarded_action(ros_context, "/unsenttest", ExecuteTask, "task", execute=execute,
                        busy_result=lambda message: ExecuteTask.Result(success=False, reason="busy",
                                                                       message=message)) as (guard, client, _spinner):
        client._node.create_subscription(GoalStatusArray, "task/_action/status", on_status, 10)
        wait_for(lambda: client._node.count_publishers("/unsenttest/task/_action/status") > 0, 10.0,
                 "the status publisher to be discovered")
        lost = uuid.uuid4().bytes
        unanswered = client.send_goal_async(ExecuteTask.Goal(instruction="lost"), goal_uuid=UUID(uuid=list(lost)))
        wait_for(lambda: not refusing_middleware.is_set(), 10.0, "the server to try sending the goal response")
        server = guard._servers[0]
        wait_for(lambda: lost in server._goal_handles
                 and server._goal_handles[lost].status == GoalStatus.STATUS_ABORTED, 10.0,
                 "the server to end the unsent goal aborted")
        assert ran == [], "the goal whose acceptance was never sent ran"
        assert guard.active is None, f"the unsent goal holds the slot ({guard.active})"
        assert not unanswered.done(), "the client heard an answer the middleware refused to send"

        handle = future_result(client.send_goal_async(ExecuteTask.Goal(instruction="next")), 10.0)
        assert handle is not None and handle.accepted
        answer = future_result(handle.get_result_async(), 10.0)
        assert answer is not None and answer.result.success, answer
        assert ran == ["next"]
        # What the status array says to every watcher (recorder, console, clients), once the next goal's end is out.
        ended = bytes(handle.goal_id.uuid)
        wait_for(lambda: statuses.get(ended, [0])[-1] == GoalStatus.STATUS_SUCCEEDED, 10.0,
                 f"the next goal's end in the status array ({statuses})")
        with lock:
            assert statuses.get(lost, [0])[-1] == GoalStatus.STATUS_ABORTED, statuses
            still_open = [goal.hex()[:8] for goal, seen in statuses.items()
                          if seen[-1] in (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING)]
        assert still_open == [], f"goals the status array still lists as open: {still_open} ({statuses})"
