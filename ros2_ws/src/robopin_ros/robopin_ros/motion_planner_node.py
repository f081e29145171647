"""motion_planner_node: PickPlace and MoveToPose actions — 3D targets to verified, executed arm motion.

Plans with a robopin.motion backend (``planner`` parameter, a YAML mapping; CPU ``roboplan`` by default,
``curobo`` on a GPU machine), keeps the collision world fresh from the workspace point cloud (``cloud_topic``,
robot masked out at the joint state of capture) and the configured table, and executes through the standard
ros2_control actions: control_msgs ``FollowJointTrajectory`` (``execute_action``, default the arm driver's
``/robopin/arm/follow_joint_trajectory``; a system file can point it at an external controller, e.g.
xarm_ros2's ``/xarm6_traj_controller/follow_joint_trajectory``) and control_msgs ``GripperCommand``
(``gripper_action``). One goal at a time across both actions; targets outside the workspace are refused before
planning; ``dry_run`` plans only; cancelling a goal cancels the driver's goal, which stops the arm.

    ros2 run robopin_ros motion_planner_node --ros-args -p robot:=xarm6 \\
        -p planner:="{type: roboplan, timeout_s: 2.0}" -p table_height_m:=0.0
"""

from __future__ import annotations

import collections
import math
import re
import threading
import time
from typing import Any

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from robopin_interfaces.action import MoveToPose, PickPlace
from sensor_msgs.msg import JointState, PointCloud2

from robopin.geometry.workspace import WorkspaceBox
from robopin.interfaces import MOVE_TO_POSE, PICK_PLACE
from robopin.motion import make_planner, planner_config_from_dict
from robopin.motion.errors import MotionGoalError
from robopin.motion.grasps import GraspConfig
from robopin.motion.pick_place_task import PickPlaceRequest, PickPlaceSettings, PickPlaceTask
from robopin.motion.scene import SceneConfig, SceneKeeper
from robopin.robots.state import GripperResult
from robopin.system.node_settings import MotionPlannerNodeSettings, settings_from
from robopin_ros import conversions
from robopin_ros.actions import BUSY_REASON, ActionClient, SingleGoalGuard, follow_goal
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import StreamSpinner, run_node

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=2, reliability=ReliabilityPolicy.BEST_EFFORT)
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)


class MotionPlannerNode(LoggedNode):
    """Serves /robopin/motion/pick_place and /robopin/motion/move_to_pose."""

    def __init__(self, **node_options: Any) -> None:
        super().__init__("motion_planner_node", **node_options)
        own = settings_from(MotionPlannerNodeSettings, declare_settings(self, MotionPlannerNodeSettings()))
        planner_values = {"type": "roboplan", **own.planner, "robot": own.robot}
        self.planner = make_planner(planner_config_from_dict(planner_values))
        self.planner.warmup()
        workspace = WorkspaceBox.from_dict(own.workspace)
        self._stream_spinner = StreamSpinner(self)
        # Joint states and clouds age on this node's clock: a simulated cell's is the simulator's (/clock), which a
        # loaded machine slows with the cell and its sensors, so a still scene's cloud or joint state stays young.
        self.scene = SceneKeeper(self.planner.robot, SceneConfig(
            workspace=workspace, table_height_m=own.table, **declare_settings(self, SceneConfig())),
            clock=self._now_s)
        grasp = GraspConfig(**declare_settings(self, GraspConfig()))
        self.task = PickPlaceTask(self.planner, self.scene,
                                  PickPlaceSettings(grasp=grasp, **declare_settings(self, PickPlaceSettings())),
                                  clock=self._now_s)
        self.max_joint_state_age_s = own.max_joint_state_age_s
        self.execution_timeout_s = own.execution_timeout_s
        self.driver_wait_s = own.driver_wait_s

        self.guard = SingleGoalGuard()
        self._shutting_down = False
        self._last_cloud: tuple[np.ndarray, np.ndarray] | None = None  # (points, joint state) last masked
        self._state_lock = threading.Lock()
        self._joint_history: collections.deque[tuple[float, np.ndarray]] = collections.deque(maxlen=200)
        group = ReentrantCallbackGroup()
        # Joint states and the cloud arrive on a child node spun on its own thread (robopin_ros.runtime
        # .StreamSpinner): this node's pool is for the goals, which block while the arm moves.
        self._stream_spinner.node.create_subscription(
            JointState,
            own.joint_states_topic,
            self._on_joint_state,
            STATE_QOS,
        )
        self._stream_spinner.node.create_subscription(
            PointCloud2,
            own.cloud_topic,
            self._on_cloud,
            SENSOR_QOS,
        )
        self._stream_spinner.start()
        self.execute_action, self.gripper_action = own.execute_action, own.gripper_action
        self.execute_client = ActionClient(self, FollowJointTrajectory, self.execute_action, callback_group=group)
        self.gripper_client = ActionClient(self, GripperCommand, self.gripper_action, callback_group=group)
        # One goal at a time across both actions; cancelling one cancels the running phase's driver goal.
        accepting = lambda: not self._shutting_down  # noqa: E731
        self.pick_place_server = self.guard.serve(
            self, PickPlace, PICK_PLACE, self._execute_pick_place,
            lambda message: PickPlace.Result(status=BUSY_REASON, message=message), accepting=accepting,
            callback_group=group)
        self.move_server = self.guard.serve(
            self, MoveToPose, MOVE_TO_POSE, self._execute_move_to_pose,
            lambda message: MoveToPose.Result(status=BUSY_REASON, message=message), accepting=accepting,
            callback_group=group)
        self.get_logger().info(f"motion planner ready: {self.planner!r}, workspace {workspace}")

    # --- inputs -----------------------------------------------------------------------------------

    def _now_s(self) -> float:
        # Converted as the stamps are: a still simulated cell's joint states and clouds carry exactly this time.
        return conversions.stamp_to_seconds(self.get_clock().now().to_msg())

    def _on_joint_state(self, msg: JointState) -> None:
        """Keep the arm joint positions, in planner order, with their stamp."""
        index = {name: i for i, name in enumerate(msg.name)}
        try:
            q = np.array([msg.position[index[name]] for name in self.planner.joint_names], dtype=np.float64)
        except (KeyError, IndexError):
            return  # a message about other joints (e.g. the gripper alone)
        stamp = conversions.stamp_to_seconds(msg.header.stamp) or self._now_s()
        with self._state_lock:
            self._joint_history.append((stamp, q))
        self.scene.update_joint_state(stamp, q)

    def _on_cloud(self, msg: PointCloud2) -> None:
        """Take the workspace cloud, masking the robot at the joint state nearest its stamp."""
        if msg.header.frame_id not in ("", "base"):
            self.get_logger().warning(f"ignoring cloud in frame {msg.header.frame_id!r}; expected 'base'")
            return
        stamp = conversions.stamp_to_seconds(msg.header.stamp) or self._now_s()
        with self._state_lock:
            history = list(self._joint_history)
        q = min(history, key=lambda item: abs(item[0] - stamp))[1] if history else None
        points = conversions.point_cloud_msg_to_points(msg)
        # A still scene sends the same cloud every period: masking the robot out of it again (tens of ms
        # holding the interpreter, while a goal may be planning) would give the same points.
        last = self._last_cloud
        if last is not None and q is not None and np.array_equal(last[1], q) and np.array_equal(last[0], points):
            self.scene.restamp_cloud(stamp)
            return
        self.scene.update_cloud(points, q, stamp)
        self._last_cloud = (points, q) if q is not None else None

    def _current_q(self) -> np.ndarray:
        with self._state_lock:
            latest = self._joint_history[-1] if self._joint_history else None
        if latest is None:
            raise MotionGoalError("no_joint_state", "no joint state received yet")
        age = self._now_s() - latest[0]
        if age > self.max_joint_state_age_s:
            raise MotionGoalError("stale_state", f"joint state is {age:.2f} s old (max {self.max_joint_state_age_s} s)")
        return latest[1]

    # --- downstream actions -----------------------------------------------------------------------

    def _stop_requested(self, goal_handle) -> bool:
        return goal_handle.is_cancel_requested or self._shutting_down

    def _call(self, client: ActionClient, name: str, goal, goal_handle, *, feedback=None, timeout_s: float = 30.0):
        """Run one driver action to its end; cancels it when our own goal is cancelled."""
        if not client.wait_for_server(timeout_sec=self.driver_wait_s):
            raise MotionGoalError("driver_unavailable", f"arm driver action {name} is not available")
        # The goal's answer counts against the action's own deadline, not the server-discovery wait: a driver
        # whose process is starved answers late but answers. MoveIt 2 does the same: its
        # FollowJointTrajectoryControllerHandle::sendTrajectory blocks on the goal-response future with no
        # deadline of its own, and only the execution wait after it is bounded.
        outcome = follow_goal(client, goal, answer_timeout_s=timeout_s, timeout_s=timeout_s,
                              feedback=feedback, should_stop=lambda: self._stop_requested(goal_handle))
        if outcome.ending == "unanswered":
            raise MotionGoalError(
                "canceled" if self._stop_requested(goal_handle) else "driver_timeout",
                f"driver did not answer the {name} goal within {timeout_s:.0f} s",
            )
        if outcome.ending == "rejected":
            raise MotionGoalError("driver_rejected", f"{name} rejected the goal")
        if outcome.ending == "stopped":
            why = "canceled by the client" if goal_handle.is_cancel_requested else "the motion planner is shutting down"
            raise MotionGoalError("canceled", why)
        if outcome.ending == "timed_out":
            raise MotionGoalError("execution_timeout", f"driver took longer than {timeout_s} s")
        return outcome.result

    def _execute(self, trajectory, goal_handle, stage: str, feedback_type) -> None:
        goal = FollowJointTrajectory.Goal(trajectory=conversions.motion_trajectory_to_msg(trajectory))
        duration_s = max(float(trajectory.duration_s), 1e-9)

        def relay(message) -> None:
            progress = min(1.0, conversions.duration_to_seconds(message.feedback.desired.time_from_start) / duration_s)
            goal_handle.publish_feedback(feedback_type(stage=stage, progress=progress))

        result = self._call(
            self.execute_client,
            self.execute_action,
            goal,
            goal_handle,
            feedback=relay,
            timeout_s=max(self.execution_timeout_s, 3.0 * trajectory.duration_s),
        )
        if result.error_code != FollowJointTrajectory.Result.SUCCESSFUL:
            raise MotionGoalError(_trajectory_status(result), f"{self.execute_action}: {result.error_string}")

    def _gripper(self, width_m: float, max_effort_n: float, goal_handle):
        goal = GripperCommand.Goal()
        goal.command.position, goal.command.max_effort = float(width_m), float(max_effort_n)
        answer = self._call(self.gripper_client, self.gripper_action, goal, goal_handle, timeout_s=15.0)
        return GripperResult(float(answer.position), float(answer.effort), bool(answer.stalled),
                             bool(answer.reached_goal))

    # --- MoveToPose -------------------------------------------------------------------------------

    def _execute_move_to_pose(self, goal_handle) -> MoveToPose.Result:
        """Plan to the TCP pose, then (unless dry run) execute it."""
        request = goal_handle.request
        result = MoveToPose.Result()
        try:
            frame = request.target.header.frame_id or "base"
            if frame != "base":
                raise MotionGoalError("unsupported_frame", f"target frame {frame!r}; expected 'base'")
            T_goal = conversions.pose_to_matrix(request.target.pose)
            if not self.scene.inside_workspace(T_goal[:3, 3]):
                raise MotionGoalError(
                    "outside_workspace", f"target {T_goal[:3, 3].round(3).tolist()} is outside the workspace"
                )
            goal_handle.publish_feedback(MoveToPose.Feedback(stage="planning", progress=0.0))
            q_start = self._current_q()
            with self.task.lock:
                self.planner.update_world(self.task.world())
                plan = self.planner.plan_to_pose(q_start, T_goal, velocity_scale=request.velocity_scale or None)
            result.planning_time_s = plan.planning_time_s
            if not plan.success:
                raise MotionGoalError(plan.status.value, plan.message or "planning failed")
            result.trajectory = conversions.motion_trajectory_to_msg(plan.trajectory)
            if not request.dry_run:
                self._execute(plan.trajectory, goal_handle, "executing", MoveToPose.Feedback)
            result.success, result.status = True, "success"
            result.message = "planned (dry run)" if request.dry_run else "moved"
            goal_handle.succeed()
        except MotionGoalError as refusal:
            result.success, result.status, result.message = False, refusal.status, str(refusal)
            self._finish_failed(goal_handle, refusal)
        return result

    # --- PickPlace --------------------------------------------------------------------------------

    def _execute_pick_place(self, goal_handle) -> PickPlace.Result:
        """Plan every phase first, then run them with the gripper in between (unless dry run)."""
        request = goal_handle.request
        result = PickPlace.Result()
        try:
            for name, target in (("pick", request.pick), ("place", request.place)):
                if not target.valid:
                    raise MotionGoalError(
                        "invalid_target", f"{name} target is not valid: {target.reason or 'no reason given'}"
                    )
            pick, normal = conversions.target3d_to_pick_point(request.pick)
            place, _ = conversions.target3d_to_pick_point(request.place)
            task = PickPlaceRequest(pick, place, pick_normal=normal,
                                    yaw_rad=None if math.isnan(request.grasp_yaw) else float(request.grasp_yaw),
                                    approach_distance_m=float(request.approach_distance_m),
                                    velocity_scale=request.velocity_scale or None, dry_run=request.dry_run)
            self.task.check(task)
            goal_handle.publish_feedback(PickPlace.Feedback(stage="planning", progress=0.0))
            q_start = self._current_q()
            started = time.perf_counter()
            outcome = self.task.plan(q_start, task)
            planned = time.perf_counter()
            plan = outcome.plan
            result.planning_time_s = outcome.planning_time_s
            result.trajectories = [conversions.motion_trajectory_to_msg(ph.result.trajectory) for ph in plan.phases]
            stages = {**outcome.stages_s, "goal_to_plan": planned - started, "messages": time.perf_counter() - planned}
            if not outcome.success:
                raise MotionGoalError(outcome.status, outcome.message)
            grasp = plan.grasp.T_base_grasp
            self.get_logger().info(
                f"pick-and-place planned in {plan.planning_time_s:.2f} s: grasp TCP at "
                f"{np.round(grasp[:3, 3], 3).tolist()} yaw {math.degrees(plan.grasp.yaw_rad):.0f}° "
                f"(pick point {np.round(pick, 3).tolist()}), place at {np.round(plan.place_point, 3).tolist()}; "
                + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in stages.items())
            )
            if plan.place_offset_m > 0.0:
                self.get_logger().info(plan.message)
            if not request.dry_run:
                self.task.run(plan, _DriverArm(self, goal_handle), lambda: self._stop_requested(goal_handle))
            result.success, result.status = True, "success"
            result.message = "planned (dry run)" if request.dry_run else "picked and placed"
            if plan.place_offset_m > 0.0:
                result.message += f"; {plan.message}"
            goal_handle.succeed()
        except MotionGoalError as refusal:
            result.success, result.status, result.message = False, refusal.status, str(refusal)
            self._finish_failed(goal_handle, refusal)
        return result

    def new_scene(self, changed_at_s: float, **_: Any) -> None:
        """The cell was laid out anew at ``changed_at_s`` (a trial boundary): older clouds show another scene, and
        the planner's random streams start over as a fresh bring-up's do."""
        self.scene.forget_before(changed_at_s)
        self.planner.reseed()  # no goal runs at a trial boundary (Bringup.reset_scene refuses a busy stack)
        with self._state_lock:  # the arm was put at its start pose: a later cloud is masked with a later state
            while self._joint_history and self._joint_history[0][0] < changed_at_s:
                self._joint_history.popleft()

    # --- shutdown ---------------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Take no new goal; a running one cancels its driver goal and ends (runtime.stop_nodes)."""
        self._shutting_down = True

    def busy(self) -> list[str]:
        """The goal still running and results not yet sent to their clients (empty when neither)."""
        return self.guard.busy()

    # --- helpers ----------------------------------------------------------------------------------

    def destroy_node(self) -> None:
        self._stream_spinner.close()
        super().destroy_node()

    def _finish_failed(self, goal_handle, refusal: MotionGoalError) -> None:
        self.get_logger().warning(f"goal refused or failed: {refusal.status}: {refusal}")
        if refusal.status == "canceled" and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()


class _DriverArm:
    """The pick-and-place task's arm: the driver's FollowJointTrajectory and GripperCommand actions."""

    def __init__(self, node: MotionPlannerNode, goal_handle) -> None:
        self.node, self.goal_handle = node, goal_handle

    def run_trajectory(self, trajectory, stage: str) -> None:
        self.node._execute(trajectory, self.goal_handle, stage, PickPlace.Feedback)

    def move_gripper(self, width_m: float, max_effort_n: float) -> GripperResult:
        return self.node._gripper(width_m, max_effort_n, self.goal_handle)


_ERROR_CODE_NAMES = {getattr(FollowJointTrajectory.Result, name): name.lower() for name in (
    "INVALID_GOAL", "INVALID_JOINTS", "OLD_HEADER_TIMESTAMP", "PATH_TOLERANCE_VIOLATED", "GOAL_TOLERANCE_VIOLATED")}
_REASON_WORD = re.compile(r"^(?P<reason>[a-z_]+): ")


def _trajectory_status(result) -> str:
    """The status of a failed FollowJointTrajectory: robopin's driver puts its named reason first in
    error_string (``joint_limit: ...``); any other controller's goal gets its error code's name."""
    word = _REASON_WORD.match(result.error_string)
    return word["reason"] if word else _ERROR_CODE_NAMES.get(result.error_code, "execution_failed")


def main(args=None) -> int:
    """Run the motion planner node until Ctrl-C or SIGTERM."""
    return run_node(MotionPlannerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
