"""A minimal task server run as a separate process by the foundation tests (not a product node).

It answers robopin_interfaces/srv/Instruct and serves ExecuteTask with feedback, cancellation and the
single-goal policy of robopin_ros.actions, and publishes one PinnedReasoning per step, so the
tests exercise our interfaces over real DDS between processes. With ``--instruct-starts-goal`` an accepted
Instruct starts its task as an ExecuteTask goal of its own action, as task_node does; with
``--withhold-instruct-reply S`` it then keeps the reply for S seconds, which is what a client sees when
rmw_fastrtps drops the reply (a client not matched yet): the task started, no answer came.
"""

from __future__ import annotations

import argparse
import time
import uuid

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from robopin_interfaces.action import ExecuteTask
from robopin_interfaces.msg import Anchor, PinnedReasoning
from robopin_interfaces.srv import Instruct
from robopin_ros.actions import BUSY_REASON, ActionClient, SingleGoalGuard
from robopin_ros.runtime import run_node
from unique_identifier_msgs.msg import UUID


class TaskServerFixture(Node):
    def __init__(self, step_period_s: float, steps: int, instruct_starts_goal: bool = False,
                 withhold_reply_s: float = 0.0, **node_options) -> None:
        super().__init__("task_server_fixture", **node_options)
        self._step_period_s = step_period_s
        self._steps = steps
        self._withhold_reply_s = withhold_reply_s
        self._guard = SingleGoalGuard()
        group = ReentrantCallbackGroup()
        self._reasoning_pub = self.create_publisher(PinnedReasoning, "/robopin/reasoning", 10)
        self.create_service(Instruct, "/robopin/instruct", self.on_instruct, callback_group=group)
        self._action = self._guard.serve(
            self, ExecuteTask, "/robopin/execute_task", self.execute,
            lambda message: ExecuteTask.Result(reason=BUSY_REASON, message=message), accepting=lambda: True,
            callback_group=group)
        self._own_client = ActionClient(self, ExecuteTask, "/robopin/execute_task", callback_group=group) \
            if instruct_starts_goal else None

    def on_instruct(self, request: Instruct.Request, response: Instruct.Response) -> Instruct.Response:
        """Accept an instruction unless a task runs."""
        holder = self._guard.active
        if not request.instruction.strip():
            response.accepted, response.message = False, "empty instruction"
        elif holder is not None:
            response.accepted, response.message = False, self._guard.busy_message(holder)
        else:
            goal_uuid = uuid.uuid4()
            response.accepted, response.task_id = True, goal_uuid.hex[:8]
            response.message = f"accepted '{request.instruction}' in mode {request.mode or 'auto'}"
            if self._own_client is not None:
                self._own_client.send_goal_async(ExecuteTask.Goal(instruction=request.instruction),
                                                 goal_uuid=UUID(uuid=list(goal_uuid.bytes)))
                time.sleep(self._withhold_reply_s)
        return response

    def execute(self, goal_handle) -> ExecuteTask.Result:
        """Run a goal step by step with feedback, honouring cancel and the single-goal policy."""
        task_id = bytes(goal_handle.goal_id.uuid).hex()[:8]
        result = ExecuteTask.Result(task_id=task_id)
        for step in range(self._steps):
            if goal_handle.is_cancel_requested:
                result.reason, result.message = "canceled", f"canceled at step {step}"
                goal_handle.canceled()
                return result
            goal_handle.publish_feedback(ExecuteTask.Feedback(stage="executing", step=step, detail="tick"))
            msg = PinnedReasoning(task_id=task_id, step=step, instruction=goal_handle.request.instruction)
            msg.anchors.append(Anchor(kind="obj", name="duck", id="obj_01", img_idx=0, x=412.0, y=530.0))
            msg.valid = True
            self._reasoning_pub.publish(msg)
            result.reasoning_steps.append(msg)
            time.sleep(self._step_period_s)
        result.success, result.steps_executed, result.message = True, self._steps, "done"
        goal_handle.succeed()
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--step-period", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--instruct-starts-goal", action="store_true")
    parser.add_argument("--withhold-instruct-reply", type=float, default=0.0)
    args, ros_args = parser.parse_known_args()
    # Not the sole server: it stands for any server of the action, also one that never checked for another
    # (two started at once, another tool's), which every client must still refuse to send to.
    raise SystemExit(run_node(lambda: TaskServerFixture(args.step_period, args.steps, args.instruct_starts_goal,
                                                        args.withhold_instruct_reply), ros_args, sole_server=False))


if __name__ == "__main__":
    main()
