"""arm_driver_node: one arm (xArm | Franka | sim) behind actions, services and state topics.

Serves, under ``prefix`` (default ``/robopin/arm``), the ros2_control actions a MoveIt or ros2_control client
expects: ``follow_joint_trajectory`` (control_msgs/FollowJointTrajectory, answered as
joint_trajectory_controller answers: error codes, path and goal tolerances, goal_time_tolerance) and
``gripper_cmd`` (control_msgs/GripperCommand); and robopin's ``execute_trajectory`` (ExecuteTrajectory), kept
for what FollowJointTrajectory cannot carry: the core's named reason as a field, progress and waypoint
feedback, and the final error. Cancel stops the arm; one motion at a time across both trajectory actions (a
second goal is aborted with reason ``busy``). Also serves ``enable`` (std_srvs/SetBool), ``stop`` and
``recover`` (std_srvs/Trigger), publishes ``/joint_states`` and ``<prefix>/ee_pose`` (frame ``base``) at
``state_rate_hz``, and reports connection, enable state and faults on ``/diagnostics``. Every refusal comes
back with the core's named reason. When the controller cannot be reached the node stays up, reports it and
retries.
Example::

    ros2 run robopin_ros arm_driver_node --ros-args -p backend:=xarm -p options:="{ip: 192.168.1.200}"
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.action import CancelResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from robopin_interfaces.action import ExecuteTrajectory
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from robopin.interfaces import DIAGNOSTICS_TOPIC, arm_names
from robopin.robots import Arm, ArmError, make_arm, make_arm_config
from robopin.robots.errors import Reason, TrajectoryError
from robopin.system.names import namespaced_label
from robopin.system.node_settings import ArmDriverSettings, settings_from
from robopin_ros import conversions
from robopin_ros.actions import BUSY_REASON, SingleGoalGuard, goal_key
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import StreamSpinner, run_node, steady_timer


class _FeedbackThrottle:
    """Action feedback at most once per ``period_s`` (monotonic clock); the final progress always goes out."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._sent_s = -math.inf

    def due(self, progress: float) -> bool:
        """Whether feedback for ``progress`` (0–1) should be published now."""
        return progress >= 1.0 or time.monotonic() - self._sent_s >= self.period_s

    def sent(self) -> None:
        """Note that feedback went out now."""
        self._sent_s = time.monotonic()


class _PathWatch:
    """The first path-tolerance violation of a FollowJointTrajectory goal, named for its result."""

    def __init__(self) -> None:
        self.violation: str | None = None


def _answer(response: Any, command: Callable[[], Any], done: str) -> Any:
    """Run an arm command for a SetBool / Trigger service: success and ``done``, or the arm's named refusal."""
    try:
        command()
    except ArmError as error:
        response.success, response.message = False, f"{error.reason.value}: {error}"
        return response
    response.success, response.message = True, done
    return response


class ArmDriverNode(LoggedNode):
    """Owns one arm backend and exposes it to the ROS graph (see the module docstring)."""

    def __init__(self, **node_options: Any) -> None:
        super().__init__("arm_driver", **node_options)
        settings = settings_from(ArmDriverSettings, declare_settings(self, ArmDriverSettings()))
        names = arm_names(settings.prefix)
        self.base_frame = settings.base_frame
        self.enable_on_connect = settings.enable_on_connect
        self.reconnect_period_s = settings.reconnect_period_s
        self.feedback_period_s = 1.0 / settings.feedback_rate_hz
        state_rate_hz = settings.state_rate_hz
        backend, options = settings.backend, settings.options

        self.arm: Arm = make_arm(make_arm_config(backend, options))
        self.execute_guard = SingleGoalGuard()
        self.gripper_guard = SingleGoalGuard()
        self._connect_lock = threading.Lock()
        self.last_error = ""
        self._shutting_down = False

        # Actions and services may block for seconds; state publishing must not wait behind them.
        actions = ReentrantCallbackGroup()
        state = MutuallyExclusiveCallbackGroup()
        self.joint_state_pub = self.create_publisher(JointState, settings.joint_states_topic, 10)
        self.ee_pose_pub = self.create_publisher(PoseStamped, settings.ee_pose_topic or names.ee_pose, 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        accepting = lambda: not self._shutting_down  # noqa: E731
        self.execute_server = self.execute_guard.serve(
            self, ExecuteTrajectory, names.execute_trajectory, self._run_trajectory,
            lambda message: ExecuteTrajectory.Result(success=False, reason=BUSY_REASON, message=message,
                                                     final_error_rad=math.nan),
            accepting=accepting, cancel_callback=self._cancel_trajectory, callback_group=actions)
        # Shares the one-motion-at-a-time slot with ExecuteTrajectory. joint_trajectory_controller preempts
        # the running goal instead; robopin never replaces a motion under way without a cancel.
        self.follow_server = self.execute_guard.serve(
            self, FollowJointTrajectory, names.follow_joint_trajectory, self._follow_joint_trajectory,
            lambda message: conversions.follow_joint_trajectory_result(
                FollowJointTrajectory.Result.INVALID_GOAL, BUSY_REASON, message),
            accepting=accepting, cancel_callback=self._cancel_trajectory, callback_group=actions)
        # ros2_controllers' gripper_action_controller serves the same action as <controller>/gripper_cmd.
        self.gripper_server = self.gripper_guard.serve(
            self, GripperCommand, names.gripper_cmd, self._execute_gripper, self._gripper_busy,
            accepting=accepting, cancel_callback=self._refuse_gripper_cancel, callback_group=actions)
        self.create_service(SetBool, names.enable, self._enable, callback_group=actions)
        self.create_service(Trigger, names.stop, self._stop, callback_group=actions)
        self.create_service(Trigger, names.recover, self._recover, callback_group=actions)
        # The state stream's timer runs on a child node spun on its own thread (robopin_ros.runtime
        # .StreamSpinner): this node's pool is for the goals, which block while the arm moves.
        self._stream_spinner = StreamSpinner(self)
        steady_timer(self._stream_spinner.node, 1.0 / state_rate_hz, self._publish_state)
        self._stream_spinner.start()
        steady_timer(self, 1.0, self._publish_diagnostics, callback_group=state)
        steady_timer(self, self.reconnect_period_s, self._ensure_connected, callback_group=actions)
        threading.Thread(target=self._ensure_connected, name="arm-connect", daemon=True).start()

    # ----- connection and state --------------------------------------------------------------------

    def _ensure_connected(self) -> None:
        """Connect (and enable) when not connected; report failures and let the timer retry."""
        if self.arm.is_connected or not self._connect_lock.acquire(blocking=False):
            return
        try:
            self.arm.connect()
            self.get_logger().info(f"{self.arm} connected")
            if self.enable_on_connect:
                self.arm.enable()
            self.last_error = ""
        except ArmError as error:
            self._report_error(f"connect failed ({error.reason.value}): {error}")
        finally:
            self._connect_lock.release()

    def _report_error(self, message: str) -> None:
        if message != self.last_error:
            self.get_logger().error(message)
        self.last_error = message

    def _publish_state(self) -> None:
        """Publish the newest joint state and the TCP pose, stamped with the measurement time."""
        if not self.arm.is_connected:
            return
        try:
            state = self.arm.joint_state()
        except ArmError as error:
            self._report_error(f"joint state unavailable: {error}")
            return
        # A simulated arm's state is stamped on the simulator's clock, which this node's clock follows (/clock); a
        # real arm's at its measurement, on the node's (wall) clock.
        stamp_s = self.arm.simulated_time()
        if stamp_s is None:
            stamp_s = self.get_clock().now().nanoseconds * 1e-9 - max(0.0, time.monotonic() - state.stamp_s)
        self.joint_state_pub.publish(conversions.joint_state_to_msg(state, stamp_s))
        pose = PoseStamped(pose=conversions.matrix_to_pose(self.arm.ee_pose(state)))
        pose.header.stamp = conversions.seconds_to_stamp(stamp_s)
        pose.header.frame_id = self.base_frame
        self.ee_pose_pub.publish(pose)

    def not_ready(self) -> list[str]:
        """What keeps the arm from taking a task (its ``~/ready`` answer; ``robopin up`` asks it too)."""
        if self.arm.is_connected and self.arm.is_enabled:
            return []
        return [f"arm not connected/enabled ({self.last_error or 'starting'})"]

    def _publish_diagnostics(self) -> None:
        """Publish connection, enable state, motion and the active fault on /diagnostics."""
        fault = None
        if self.arm.is_connected:
            try:
                fault = self.arm.fault()
            except ArmError as error:
                self._report_error(f"fault query failed: {error}")
        if fault is not None:
            level, message = DiagnosticStatus.ERROR, f"fault {fault.name}: {fault.message}"
        elif not self.arm.is_connected:
            level, message = DiagnosticStatus.ERROR, self.last_error or "not connected"
        elif not self.arm.is_enabled:
            level, message = DiagnosticStatus.WARN, "disabled"
        else:
            level, message = DiagnosticStatus.OK, "moving" if self.arm.is_moving else "ready"
        values = {
            "connected": self.arm.is_connected,
            "enabled": self.arm.is_enabled,
            "moving": self.arm.is_moving,
            "fault": fault.name if fault else "",
            "fault_code": "" if fault is None or fault.code is None else fault.code,
            "last_error": self.last_error,
        }
        status = DiagnosticStatus(
            level=level,
            name=namespaced_label(f"robopin arm_driver: {self.arm.config.name}", self.get_namespace()),
            message=message,
            hardware_id=type(self.arm).__name__,
            values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(array)

    # ----- services ---------------------------------------------------------------------------------

    def _enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """Enable (true) or stop and disable (false) the arm."""
        if request.data:
            return _answer(response, self.arm.enable, "enabled")
        return _answer(response, self.arm.disable, "disabled")

    def _stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Stop any motion now (the running goal ends with reason 'canceled')."""
        return _answer(response, self.arm.stop, "stopped")

    def _recover(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Clear the controller's fault and restore the enable state."""
        return _answer(response, self.arm.recover, "recovered")

    def new_scene(self, changed_at_s: float, **_: Any) -> None:
        """The cell was reset between trials (nothing moving): a fault the last trial left is cleared, as the
        operator does when resetting a real cell, so the next trial starts as on a fresh stack."""
        fault = self.arm.fault() if self.arm.is_connected else None
        if fault is not None:
            self.get_logger().info(f"trial boundary: clearing the fault the last trial left ({fault.name}: "
                                   f"{fault.message})")
            self.arm.recover()

    # ----- actions ----------------------------------------------------------------------------------

    def _cancel_trajectory(self, goal_handle) -> CancelResponse:
        """Accept the cancel and stop the arm at once (not at the next feedback)."""
        if self.execute_guard.active == goal_key(goal_handle):
            self.arm.cancel()
        return CancelResponse.ACCEPT

    def _refuse_gripper_cancel(self, goal_handle) -> CancelResponse:
        """Gripper commands are short and cannot be interrupted through the SDKs: refuse."""
        del goal_handle
        return CancelResponse.REJECT

    def _run_trajectory(self, goal_handle) -> ExecuteTrajectory.Result:
        """Validate and run the trajectory, streaming progress; map every outcome to a named reason."""
        throttle = _FeedbackThrottle(self.feedback_period_s)

        def on_progress(progress) -> None:
            if not throttle.due(progress.progress):
                return
            throttle.sent()
            goal_handle.publish_feedback(
                ExecuteTrajectory.Feedback(
                    progress=progress.progress,
                    waypoint=progress.waypoint,
                    time_from_start_s=progress.time_from_start_s,
                    tracking_error_rad=progress.tracking_error_rad,
                )
            )

        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
            return ExecuteTrajectory.Result(success=False, reason=Reason.CANCELED.value, final_error_rad=math.nan)
        try:
            trajectory = conversions.msg_to_arm_trajectory(goal_handle.request.trajectory)
            outcome = self.arm.execute(trajectory, on_progress=on_progress)
        except (ArmError, TrajectoryError) as error:
            self.get_logger().warning(f"trajectory refused: {error}")
            goal_handle.abort()
            return ExecuteTrajectory.Result(
                success=False, reason=error.reason.value, message=str(error), final_error_rad=math.nan
            )
        result = ExecuteTrajectory.Result(
            success=outcome.success,
            reason=outcome.reason.value,
            message=outcome.message,
            final_error_rad=outcome.final_error_rad,
        )
        if outcome.success:
            goal_handle.succeed()
        elif outcome.reason is Reason.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            self.get_logger().warning(f"trajectory ended early ({outcome.reason.value}): {outcome.message}")
            goal_handle.abort()
        return result

    def _gripper_busy(self, message: str) -> GripperCommand.Result:
        self.get_logger().warning(f"gripper goal refused: busy ({message})")
        return _gripper_failed()

    def _execute_gripper(self, goal_handle) -> GripperCommand.Result:
        """Move the fingers to the goal width (max_effort > 0: grasp with that force)."""
        try:
            command = goal_handle.request.command
            outcome = self.arm.gripper_move(float(command.position), float(command.max_effort))
        except ArmError as error:
            self.get_logger().warning(f"gripper command refused ({error.reason.value}): {error}")
            goal_handle.abort()
            return _gripper_failed()
        goal_handle.succeed()
        return GripperCommand.Result(
            position=outcome.width_m,
            effort=outcome.effort_n,
            stalled=outcome.stalled,
            reached_goal=outcome.reached_goal,
        )

    def _refuse_follow(self, goal_handle, code: int, reason: str, message: str) -> FollowJointTrajectory.Result:
        self.get_logger().warning(f"FollowJointTrajectory refused ({reason}): {message}")
        goal_handle.abort()
        return conversions.follow_joint_trajectory_result(code, reason, message)

    def _follow_joint_trajectory(self, goal_handle) -> FollowJointTrajectory.Result:
        """Validate as joint_trajectory_controller does, then run with per-goal path and goal tolerances.

        ros2_controllers joint_trajectory_controller.cpp (validate_trajectory_msg) refuses empty joint
        names or points, joints it does not control, a partial set of joints (allow_partial_joints_goal
        defaults to false), times not strictly increasing, a non-zero velocity at the last point
        (allow_nonzero_velocity_at_trajectory_end: false) and a trajectory whose stamped end is in the past.
        The controller rejects such goals at once (no result); robopin accepts and aborts them before
        anything moves, so the client reads the standard error code and why in error_string.
        """
        codes = FollowJointTrajectory.Result
        request = goal_handle.request
        names = tuple(self.arm.joint_names)
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
            return conversions.follow_joint_trajectory_result(codes.SUCCESSFUL, Reason.CANCELED.value, "")
        if request.multi_dof_trajectory.joint_names or request.multi_dof_trajectory.points:
            return self._refuse_follow(goal_handle, codes.INVALID_JOINTS, Reason.JOINT_NAMES.value,
                                       "multi-DOF joints given; this arm has only revolute joints")
        goal_names = tuple(request.trajectory.joint_names)
        if set(goal_names) != set(names) or len(goal_names) != len(names):
            return self._refuse_follow(goal_handle, codes.INVALID_JOINTS, Reason.JOINT_NAMES.value,
                                       f"joints {list(goal_names)} do not match the arm's {list(names)}")
        points = request.trajectory.points
        # The controller's threshold: std::numeric_limits<float>::epsilon().
        if points and any(abs(v) > np.finfo(np.float32).eps for v in points[-1].velocities):
            return self._refuse_follow(goal_handle, codes.INVALID_GOAL, Reason.INVALID_TRAJECTORY.value,
                                       "the last point's velocities are not zero")
        stamp_s = conversions.stamp_to_seconds(request.trajectory.header.stamp)
        if stamp_s != 0.0 and points:
            now_s = self.get_clock().now().nanoseconds * 1e-9
            end_s = stamp_s + conversions.duration_to_seconds(points[-1].time_from_start)
            if end_s < now_s:
                return self._refuse_follow(goal_handle, codes.OLD_HEADER_TIMESTAMP, Reason.INVALID_TRAJECTORY.value,
                                           f"the trajectory ended {now_s - end_s:.3f} s ago (header.stamp)")
            if abs(stamp_s - now_s) > 0.5:
                return self._refuse_follow(goal_handle, codes.INVALID_GOAL, Reason.INVALID_TRAJECTORY.value,
                                           "a trajectory starts when it is received: leave header.stamp zero")
        goal_time_s = conversions.duration_to_seconds(request.goal_time_tolerance)
        try:
            path_tolerance = conversions.resolve_joint_tolerances(request.path_tolerance, names, math.inf)
            goal_tolerance = conversions.resolve_joint_tolerances(
                request.goal_tolerance, names, self.arm.config.goal_tolerance_rad)
            trajectory = conversions.msg_to_arm_trajectory(request.trajectory)
            # The trajectory as the arm will run it (arm order, from the current state, speed-scaled):
            # path tolerances are measured against it. execute() validates the same way again.
            planned = self.arm.safety.validate(trajectory, self.arm.joint_state())
        except KeyError as error:
            return self._refuse_follow(goal_handle, codes.INVALID_JOINTS, Reason.JOINT_NAMES.value, error.args[0])
        except (ArmError, TrajectoryError) as error:
            return self._refuse_follow(goal_handle, codes.INVALID_GOAL, error.reason.value, str(error))
        except ValueError as error:
            return self._refuse_follow(goal_handle, codes.INVALID_GOAL, Reason.INVALID_TRAJECTORY.value, str(error))

        watch = _PathWatch()
        throttle = _FeedbackThrottle(self.feedback_period_s)

        def on_progress(progress) -> None:
            due = throttle.due(progress.progress)
            if not (due or np.isfinite(path_tolerance).any()):
                return
            t = min(progress.time_from_start_s, planned.duration_s)
            desired, desired_velocity = planned.sample(t)
            try:
                actual = np.asarray(self.arm.joint_state().positions, dtype=np.float64)
            except ArmError:
                return
            error = actual - desired
            over = np.abs(error) > path_tolerance
            if over.any() and watch.violation is None:
                j = int(np.argmax(np.abs(error) - path_tolerance))
                watch.violation = (f"{names[j]} is {abs(error[j]):.4f} rad off the path at t = {t:.3f} s "
                                   f"(path tolerance {path_tolerance[j]:.4f} rad)")
                self.arm.cancel(Reason.CANCELED, "path tolerance violated")
            if due:
                throttle.sent()
                feedback = FollowJointTrajectory.Feedback(
                    joint_names=list(names),
                    desired=conversions.trajectory_point_msg(desired, desired_velocity, t),
                    actual=conversions.trajectory_point_msg(actual, None, t),
                    error=conversions.trajectory_point_msg(error, None, t),
                )
                feedback.header.stamp = self.get_clock().now().to_msg()
                goal_handle.publish_feedback(feedback)

        try:
            outcome = self.arm.execute(trajectory, on_progress=on_progress)
        except (ArmError, TrajectoryError) as error:
            code = conversions.follow_joint_trajectory_error_code(error.reason, started=False)
            return self._refuse_follow(goal_handle, code, error.reason.value, str(error))
        if watch.violation is not None:
            self.get_logger().warning(f"FollowJointTrajectory aborted: {watch.violation}")
            goal_handle.abort()
            return conversions.follow_joint_trajectory_result(codes.PATH_TOLERANCE_VIOLATED, "path_tolerance",
                                                              watch.violation)
        if outcome.reason is Reason.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()  # as the controller: canceled, with an empty (SUCCESSFUL) result
            return conversions.follow_joint_trajectory_result(codes.SUCCESSFUL, Reason.CANCELED.value, outcome.message)
        if outcome.reason is Reason.DRY_RUN:  # validated, nothing moved: the goal succeeds as it would
            goal_handle.succeed()
            return conversions.follow_joint_trajectory_result(codes.SUCCESSFUL, outcome.reason.value, outcome.message)
        if outcome.success or outcome.reason is Reason.GOAL_TOLERANCE:
            return self._judge_goal(goal_handle, planned.positions[-1], goal_tolerance, goal_time_s, outcome)
        code = conversions.follow_joint_trajectory_error_code(outcome.reason, started=True)
        self.get_logger().warning(f"trajectory ended early ({outcome.reason.value}): {outcome.message}")
        goal_handle.abort()
        return conversions.follow_joint_trajectory_result(code, outcome.reason.value, outcome.message)

    def _judge_goal(self, goal_handle, goal_q, tolerance, goal_time_s: float, outcome) -> FollowJointTrajectory.Result:
        """Succeed once every joint is within its goal tolerance, waiting up to goal_time_tolerance for it."""
        codes = FollowJointTrajectory.Result
        deadline = time.monotonic() + goal_time_s
        while True:
            try:
                error = np.abs(np.asarray(self.arm.joint_state().positions, dtype=np.float64) - goal_q)
            except ArmError as failure:
                goal_handle.abort()
                return conversions.follow_joint_trajectory_result(codes.GOAL_TOLERANCE_VIOLATED,
                                                                  failure.reason.value, str(failure))
            if np.all(error <= tolerance):
                goal_handle.succeed()
                return conversions.follow_joint_trajectory_result(codes.SUCCESSFUL, Reason.COMPLETED.value,
                                                                  outcome.message or "goal reached")
            if time.monotonic() >= deadline:
                j = int(np.argmax(error - tolerance))
                message = (f"{self.arm.joint_names[j]} ended {error[j]:.4f} rad from the goal "
                           f"(goal tolerance {tolerance[j]:.4f} rad)")
                self.get_logger().warning(f"FollowJointTrajectory aborted: {message}")
                goal_handle.abort()
                return conversions.follow_joint_trajectory_result(codes.GOAL_TOLERANCE_VIOLATED,
                                                                  Reason.GOAL_TOLERANCE.value, message)
            time.sleep(0.01)

    def begin_shutdown(self) -> None:
        """Stop the arm now and take no new goal (the running one ends with reason 'canceled')."""
        self._shutting_down = True
        if self.arm.is_connected:
            try:
                self.arm.stop()
                self.get_logger().info("shutdown: arm stopped")
            except ArmError as error:
                self.get_logger().error(f"shutdown: stopping the arm failed: {error}")

    def busy(self) -> list[str]:
        """The goals still running and results not yet sent to their clients (empty when neither)."""
        guards = (("trajectory", self.execute_guard), ("gripper", self.gripper_guard))
        return [f"{kind} {what}" for kind, guard in guards for what in guard.busy()]

    def destroy_node(self) -> None:
        """Stop the arm and close the connection before the node goes away."""
        self._stream_spinner.close()
        try:
            self.arm.disconnect()
        except ArmError as error:
            self.get_logger().error(f"disconnect failed: {error}")
        super().destroy_node()


def _gripper_failed() -> GripperCommand.Result:
    return GripperCommand.Result(position=math.nan, effort=math.nan, stalled=False, reached_goal=False)


def main(args=None) -> int:
    return run_node(ArmDriverNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
