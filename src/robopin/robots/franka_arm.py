"""Franka (FR3 / Panda) backend on ``franky`` (``franky-control``): waypoint motions, reflexes as named faults.

A validated trajectory runs as one asynchronous ``JointWaypointMotion``: its waypoints are the
trajectory's samples every ``waypoint_spacing_s`` carrying the planned velocities, so the arm passes
through them without stopping, and franky times the motion itself within
``relative_dynamics_factor`` (the path is the planned one; its timing is franky's time-optimal one
under the scaled limits). Progress is the planned time of the path point nearest the measured
configuration. Cancel preempts the motion with ``Robot.stop``. The SDK is imported lazily.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from robopin.robots.base import Arm, ArmConfig, Execution
from robopin.robots.errors import ArmConfigError, ArmConnectionError, ArmFault, ArmFaultError, GripperError
from robopin.robots.scheduling import caller_scheduling_kept
from robopin.robots.state import GripperResult, GripperState, JointState
from robopin.robots.trajectory import JointTrajectory
from robopin.settings import check_fields, positive

logger = logging.getLogger(__name__)

# libfranka error flags, most specific first, mapped to the names we report.
_ERROR_NAMES: tuple[tuple[str, str], ...] = (
    ("cartesian_reflex", "collision"),
    ("joint_reflex", "collision"),
    ("self_collision_avoidance_violation", "self_collision"),
    ("joint_position_limits_violation", "joint_limit"),
    ("cartesian_position_limits_violation", "safety_boundary"),
    ("joint_velocity_violation", "speed_limit"),
    ("cartesian_velocity_violation", "speed_limit"),
    ("power_limit_violation", "power_limit"),
    ("tau_j_range_violation", "torque_limit"),
    ("communication_constraints_violation", "communication"),
    ("instability_detected", "instability"),
)


def fault_from_state(state: Any, franky: Any) -> ArmFault | None:
    """The fault a libfranka ``RobotState`` shows, or None.

    The robot mode counts as much as the error flags: after a reflex the robot reports mode Reflex and
    refuses every motion until automatic error recovery, even once ``current_errors`` is empty again
    (the reflex stays in ``last_motion_errors``); UserStopped (external activation device or e-stop
    pressed) refuses motions and recovery until it is released.
    """
    mode = state.robot_mode
    if mode == franky.RobotMode.UserStopped:
        return ArmFault(
            "user_stopped",
            "Franka user stop pressed (external activation device / e-stop): release it, then recover",
            None,
            False,
        )
    if active_errors(state.current_errors):
        return fault_from_errors(state.current_errors)
    if mode == franky.RobotMode.Reflex:
        fault = fault_from_errors(state.last_motion_errors)
        return ArmFault(fault.name, f"reflex (robot mode Reflex): {fault.message}", None, True)
    return None


def active_errors(errors: Any) -> list[str]:
    """The flags set in a libfranka ``Errors`` (the Python object is truthy even when none is set)."""
    return [name for name in dir(errors) if not name.startswith("_") and getattr(errors, name) is True]


def fault_from_errors(errors: Any, message: str = "") -> ArmFault:
    """Name a libfranka ``Errors`` set (from ``RobotState.current_errors`` / ``last_motion_errors``)."""
    active = active_errors(errors)
    for flag, name in _ERROR_NAMES:
        if flag in active:
            return ArmFault(name, message or f"libfranka: {', '.join(active)}", None, True)
    if active:
        return ArmFault(active[0], message or f"libfranka: {', '.join(active)}", None, True)
    return ArmFault("control_exception", message or "libfranka reported a control exception", None, True)


@dataclass(kw_only=True)
class FrankaArmConfig(ArmConfig):
    """Franka FCI address, dynamics scaling, collision thresholds and gripper use."""

    type: ClassVar[str] = "franka"

    robot: str = "fr3"
    ip: str = ""
    relative_dynamics_factor: float = 0.2  # franky scales its velocity/acceleration/jerk limits by this
    realtime: bool = False  # True needs a PREEMPT_RT kernel (libfranka's Enforce)
    torque_thresholds_nm: tuple[float, ...] = field(default_factory=lambda: (20.0,) * 7)
    force_thresholds_n: tuple[float, ...] = field(default_factory=lambda: (30.0,) * 6)
    waypoint_spacing_s: float = 0.2  # planned time between motion waypoints
    poll_period_s: float = 0.01
    motion_start_timeout_s: float = 1.0  # watchdog grace while franky starts a motion
    settle_timeout_s: float = 1.5
    recovery_check_s: float = 0.5  # after recover_from_errors() reports failure, how long to re-read the state
    gripper: bool = True
    home_gripper_on_enable: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.ip:
            raise ArmConfigError("FrankaArmConfig.ip must name the robot (FCI) address, got an empty string")
        if not 0.0 < self.relative_dynamics_factor <= 1.0:
            raise ArmConfigError(f"relative_dynamics_factor must be in (0, 1], got {self.relative_dynamics_factor}")
        if len(self.torque_thresholds_nm) != 7 or len(self.force_thresholds_n) != 6:
            raise ArmConfigError(
                f"torque_thresholds_nm needs 7 values and force_thresholds_n 6, got "
                f"{len(self.torque_thresholds_nm)} and {len(self.force_thresholds_n)}"
            )
        check_fields(self, ("waypoint_spacing_s", "poll_period_s", "settle_timeout_s", "motion_start_timeout_s",
                            "recovery_check_s"), positive, ArmConfigError, "> 0")


class PathProgress:
    """Maps a measured configuration to the planned time of the nearest point of a trajectory's path.

    The search only moves forward (within a window) so a path that crosses itself is followed in order.
    """

    def __init__(self, trajectory: JointTrajectory, step_s: float = 0.01, window_s: float = 1.0) -> None:
        self.times = trajectory.dense_times(step_s)
        self.points, _ = trajectory.sample(self.times)
        self._window = max(1, int(window_s / step_s))
        self._index = 0

    def update(self, positions: np.ndarray) -> tuple[float, float]:
        """(planned time, distance in rad to the path) for ``positions``."""
        stop = min(len(self.times), self._index + self._window + 1)
        distances = np.max(np.abs(self.points[self._index : stop] - positions), axis=1)
        best = int(np.argmin(distances))
        self._index += best
        return float(self.times[self._index]), float(distances[best])


class FrankaArm(Arm):
    """A Franka Research 3 or Panda through franky's ``Robot`` and ``Gripper``."""

    config_class = FrankaArmConfig
    config: FrankaArmConfig

    def __init__(self, config: FrankaArmConfig) -> None:
        super().__init__(config)
        self._franky: Any = None
        self._robot: Any = None
        self._gripper: Any = None
        self._fault: ArmFault | None = None
        self._stopping = False

    # ----- connection ------------------------------------------------------------------------------

    def _connect(self) -> None:
        import franky

        self._franky = franky
        realtime = franky.RealtimeConfig.Enforce if self.config.realtime else franky.RealtimeConfig.Ignore
        try:
            # franky.Robot() raises its caller to SCHED_FIFO 99 even with Ignore; every thread that caller
            # starts (a ROS executor's, a test runner's child nodes) would inherit it. With realtime: true
            # (PREEMPT_RT) franky's motion thread should inherit it, so it stays.
            with contextlib.nullcontext() if self.config.realtime else caller_scheduling_kept():
                robot = franky.Robot(self.config.ip, realtime_config=realtime)
            # franky times motions itself: keep its limits inside the ones our safety layer allows.
            safety = self.config.safety
            robot.relative_dynamics_factor = min(
                self.config.relative_dynamics_factor, safety.velocity_fraction * safety.speed_scale
            )
            robot.set_collision_behavior(list(self.config.torque_thresholds_nm), list(self.config.force_thresholds_n))
            gripper = franky.Gripper(self.config.ip) if self.config.gripper else None
        except franky.Exception as error:
            raise ArmConnectionError(f"Franka at {self.config.ip} unreachable: {error}") from None
        self._robot, self._gripper = robot, gripper

    def _disconnect(self) -> None:
        # franky closes the connection when the objects go away.
        self._robot = None
        self._gripper = None

    def _set_enabled(self, enabled: bool) -> None:
        # The FCI has no motor enable (brakes are opened in Desk); enabling checks control and homes.
        if enabled and self._gripper is not None and self.config.home_gripper_on_enable:
            self._gripper_call(self._gripper.homing)

    # ----- state and faults --------------------------------------------------------------------------

    def _read_joint_state(self) -> JointState:
        state = self._robot.current_joint_state
        return JointState(
            self.joint_names, np.asarray(state.position, dtype=np.float64), np.asarray(state.velocity), None
        )

    def _read_fault(self) -> ArmFault | None:
        if self._fault is not None:
            return self._fault
        robot = self._robot
        if robot is None:
            return None
        try:
            state = robot.state
        except self._franky.Exception as error:
            return ArmFault("connection_lost", f"Franka robot state unreadable: {error}", None, True)
        return fault_from_state(state, self._franky)

    def _recover(self) -> None:
        franky = self._franky
        fault = self._read_fault()
        if fault is not None and not fault.recoverable:
            raise ArmFaultError(fault, f"Franka {fault.name}: {fault.message}")
        try:
            # franky returns whether the robot reports no error afterwards (Robot::recoverFromErrors).
            recovered = bool(self._robot.recover_from_errors())
        except franky.Exception as error:  # the robot refused the recovery (e.g. still user-stopped)
            raise ArmFaultError(fault or ArmFault("recovery_refused", str(error), None, True), str(error)) from None
        self._fault = None
        if recovered:
            return
        # franky judges success from the next state it reads, which can predate the recovery (the
        # control thread's last buffered state after an aborted motion): give the robot's own state a
        # bounded moment to show the outcome before calling it a failure.
        deadline = time.monotonic() + self.config.recovery_check_s
        still = self._read_fault()
        while still is not None and time.monotonic() < deadline:
            time.sleep(self.config.poll_period_s)
            still = self._read_fault()
        if still is not None:
            self._fault = still
            raise ArmFaultError(still, f"Franka error recovery failed: {still.name} remains ({still.message})")

    # ----- motion ----------------------------------------------------------------------------------

    def franky_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Joint velocity (rad/s) and acceleration (rad/s²) limits franky plans with right now.

        franky's own limits (``Robot.joint_velocity_limit`` / ``joint_acceleration_limit``; with
        libfranka >= 0.10 the FR3 values 2.175 x4, 2.61 x3 rad/s and 15, 7.5, 10, 12.5, 15, 20, 20
        rad/s², franky src/robot.cpp) times the robot's relative dynamics factor. Its Ruckig planner
        rejects a waypoint whose velocity exceeds them, however the description's limits compare.
        """
        robot = self._robot
        factor = robot.relative_dynamics_factor
        velocity = np.asarray(robot.joint_velocity_limit.get(), dtype=np.float64) * float(factor.velocity)
        acceleration = np.asarray(robot.joint_acceleration_limit.get(), dtype=np.float64) * float(factor.acceleration)
        return velocity, acceleration

    def _feasible(self, trajectory: JointTrajectory) -> JointTrajectory:
        """Slow ``trajectory`` down until its velocities and accelerations fit franky's scaled limits.

        The path stays the planned one; only its timing stretches. A 5 % margin keeps sampled peaks
        (the check runs on a 10 ms grid) under the limits Ruckig enforces exactly.
        """
        velocity_limit, acceleration_limit = self.franky_limits()
        times = trajectory.dense_times(0.01)
        _, velocity = trajectory.sample(times)
        peak_velocity = float(np.max(np.abs(velocity) / velocity_limit))
        if times.size > 1:
            acceleration = np.diff(velocity, axis=0) / np.diff(times)[:, None]
            peak_acceleration = float(np.max(np.abs(acceleration) / acceleration_limit))
        else:
            peak_acceleration = 0.0
        margin = 0.95
        scale = 1.0
        if peak_velocity > 0:
            scale = min(scale, margin / peak_velocity)
        if peak_acceleration > 0:
            scale = min(scale, math.sqrt(margin / peak_acceleration))
        return trajectory.scaled(scale) if scale < 1.0 else trajectory

    def _waypoint_motion(self, trajectory: JointTrajectory) -> Any:
        franky = self._franky
        spacing = self.config.waypoint_spacing_s
        times = np.arange(spacing, trajectory.duration_s, spacing)
        times = np.append(times[times < trajectory.duration_s - spacing / 2], trajectory.duration_s)
        positions, velocities = trajectory.sample(times)
        velocities[-1] = 0.0  # rest at the goal
        waypoints = [franky.JointWaypoint(franky.JointState(q, v)) for q, v in zip(positions, velocities, strict=True)]
        return franky.JointWaypointMotion(waypoints)

    def _run_trajectory(self, trajectory: JointTrajectory, execution: Execution) -> None:
        franky = self._franky
        robot = self._robot
        # Building and starting the motion is the one step without state updates; under CPU load it
        # can outlast state_max_age_s, so the watchdog waits for the first state after it.
        execution.allow_blocking(self.config.motion_start_timeout_s)
        trajectory = self._feasible(trajectory)
        progress = PathProgress(trajectory)
        self._stopping = False
        try:
            robot.move(self._waypoint_motion(trajectory), asynchronous=True)
        except franky.Exception as error:
            self._raise_fault(error)
        finished = False
        while not finished:
            if execution.should_stop():
                self._stop_motion()
                break
            try:
                # poll_motion() reads False before an asynchronous motion has started; join with a
                # short timeout does not.
                finished = robot.join_motion(self.config.poll_period_s)
            except (franky.Exception, RuntimeError) as error:
                if self._stopping or execution.should_stop():
                    break  # our own preemption
                self._raise_fault(error)
            state = self._read_joint_state()
            planned_t, _ = progress.update(state.positions)
            execution.report(planned_t, state)
        if execution.should_stop():
            return  # the base class waits for the arm to come to rest
        goal = trajectory.positions[-1]
        deadline = time.monotonic() + self.config.settle_timeout_s
        while time.monotonic() < deadline and not execution.should_stop():
            state = self._read_joint_state()
            execution.report(trajectory.duration_s, state)
            if np.max(np.abs(state.positions - goal)) <= self.config.goal_tolerance_rad * 0.5:
                break
            execution.wait_stop(self.config.poll_period_s)

    def _raise_fault(self, error: BaseException) -> None:
        message = f"{type(error).__name__}: {error}"
        fault = self._read_fault()
        if fault is not None:
            # A reflex or limit violation: the robot stays faulted (mode Reflex) until recover().
            self._fault = ArmFault(fault.name, f"{fault.message} ({message})", fault.code, fault.recoverable)
            raise ArmFaultError(self._fault) from error
        # franky refused or aborted the motion without a robot error (e.g. its planner failed).
        raise ArmFaultError(ArmFault("motion_rejected", message, None, True)) from error

    def _stop_motion(self) -> None:
        robot = self._robot
        if robot is None:
            return
        self._stopping = True
        franky = self._franky
        try:
            # A stop motion takes over the running joint motion seamlessly and decelerates within the
            # robot's limits (preempting the control loop outright can trip a discontinuity reflex).
            robot.move(franky.JointStopMotion(), asynchronous=True)
            robot.join_motion(self.config.settle_timeout_s)
        except (franky.Exception, RuntimeError) as error:
            logger.debug("franky stop motion: %s; stopping the control loop", error)
            try:
                robot.stop()
                robot.join_motion(1.0)
            except (franky.Exception, RuntimeError) as stop_error:
                # Preempting an asynchronous motion surfaces as an exception: the arm is stopping anyway.
                logger.debug("franky stop: %s", stop_error)

    # ----- gripper ---------------------------------------------------------------------------------

    def _gripper_call(self, call: Any, *args: Any) -> Any:
        if self._gripper is None:
            raise GripperError(f"{self} has no gripper configured (gripper=False)")
        try:
            return call(*args)
        except self._franky.Exception as error:
            raise GripperError(f"Franka gripper: {error}") from None

    def _gripper_command(self, width_m: float, speed_m_s: float, force_n: float | None) -> GripperResult:
        gripper = self._gripper
        if gripper is None:
            raise GripperError(f"{self} has no gripper configured (gripper=False)")
        if force_n is None:
            self._gripper_call(gripper.move, width_m, speed_m_s)
        else:
            # Any final width between the target and fully open counts as a grasp.
            self._gripper_call(gripper.grasp, width_m, speed_m_s, force_n, 0.005, gripper.max_width)
        final = float(gripper.width)
        tolerance = 0.003
        reached = abs(final - width_m) <= tolerance
        stalled = force_n is not None and final > width_m + tolerance
        return GripperResult(final, force_n if force_n is not None else math.nan, stalled, reached)

    def _read_gripper(self) -> GripperState:
        state = self._gripper_call(lambda: self._gripper.state)
        return GripperState(float(state.width), bool(state.is_grasped), float(state.max_width))
