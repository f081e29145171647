"""The arm contract every backend (sim, xArm, Franka) implements, its config base and the factory.

:class:`Arm` owns the behaviour common to all arms: connection and enable state, the safety layer
(every trajectory is validated before anything is sent), the watchdog, cancellation, the
single-motion policy, goal tolerance and recovery. A backend implements only the ``_``-prefixed
hooks that talk to its SDK. :func:`make_arm` builds an arm from its config, importing the backend
module only when that backend is used.
"""

from __future__ import annotations

import abc
import collections
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from robopin.errors import nearest_name
from robopin.registry import RegisteredBackend, RegisteredConfig, Registry, config_fields
from robopin.robots.description import RobotDescription, available_descriptions, load_description
from robopin.robots.errors import (
    ArmBusyError,
    ArmConfigError,
    ArmConnectionError,
    ArmError,
    ArmFault,
    ArmFaultError,
    ArmNotConnectedError,
    ArmNotEnabledError,
    GripperError,
    Reason,
    SafetyViolationError,
    TrajectoryError,
    UnknownArmTypeError,
)
from robopin.robots.safety import SafetyChecker, SafetyConfig, Watchdog
from robopin.robots.state import (
    ExecutionProgress,
    ExecutionResult,
    GripperResult,
    GripperState,
    JointState,
)
from robopin.robots.trajectory import JointTrajectory, min_jerk_move
from robopin.settings import check_fields, positive

__all__ = [
    "ARMS",
    "Arm",
    "ArmBusyError",
    "ArmConfig",
    "ArmConfigError",
    "ArmConnectionError",
    "ArmError",
    "ArmFault",
    "ArmFaultError",
    "ArmNotConnectedError",
    "ArmNotEnabledError",
    "Execution",
    "ExecutionProgress",
    "ExecutionResult",
    "GripperError",
    "GripperResult",
    "GripperState",
    "JointState",
    "JointTrajectory",
    "Reason",
    "SafetyConfig",
    "SafetyViolationError",
    "TrajectoryError",
    "UnknownArmTypeError",
    "arm_config_class",
    "available_arm_types",
    "make_arm",
    "make_arm_config",
    "register_arm_backend",
]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[ExecutionProgress], None]


# Type name -> config and arm class; a backend module (and its SDK) is imported only when its type is used.
ARMS: Registry[ArmConfig, Arm] = Registry("arm", unknown_error=UnknownArmTypeError, config_error=ArmConfigError)
ARMS.declare("sim", "robopin.sim.arm")
ARMS.declare("xarm", "robopin.robots.xarm_arm")
ARMS.declare("franka", "robopin.robots.franka_arm")


@dataclass(kw_only=True)
class ArmConfig(RegisteredConfig, registry=ARMS):
    """Settings every arm backend shares; subclasses add their own and set ``type`` (their registry key).

    ``robot`` names a description (see :mod:`robopin.robots.description`). ``dry_run`` validates
    every command without moving. ``goal_tolerance_rad`` is the largest joint error at the end of a
    trajectory that still counts as success.
    """

    type: ClassVar[str] = ""

    robot: str = "panda"
    name: str = "arm"
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    goal_tolerance_rad: float = 0.02
    dry_run: bool = False
    gripper_speed_m_s: float = 0.05
    gripper_force_n: float = 20.0  # grasp force when a command gives none
    still_speed_rad_s: float = 0.02  # after a stop, the arm counts as at rest below this joint speed
    stop_timeout_s: float = 3.0  # longest wait for rest after a stop before reporting anyway
    still_window_s: float = 0.1  # ... averaged over this long

    def __post_init__(self) -> None:
        if isinstance(self.safety, Mapping):
            known = config_fields(SafetyConfig)
            unknown = sorted(set(self.safety) - known, key=str)
            if unknown:
                hints = "".join(f" {key!r}: did you mean {best!r}?" for key in unknown
                                if (best := nearest_name(key, known)) is not None)
                raise ArmConfigError(f"unknown safety setting(s) {unknown};{hints} expected some of {sorted(known)}")
            self.safety = SafetyConfig(**self.safety)
        if not isinstance(self.safety, SafetyConfig):
            raise ArmConfigError(f"safety must be a SafetyConfig or a mapping, got {type(self.safety).__name__}")
        if self.robot not in available_descriptions():
            raise ArmConfigError(f"robot {self.robot!r} has no description; expected one of {available_descriptions()}")
        check_fields(self, ("goal_tolerance_rad", "gripper_speed_m_s", "gripper_force_n", "still_speed_rad_s",
                            "stop_timeout_s", "still_window_s"), positive, ArmConfigError, "a finite number > 0")


class Execution:
    """The handle a backend gets for one running trajectory.

    The backend calls :meth:`report` at its command rate (with the newest measured state when it
    has one), :meth:`report_state` for states in between, and polls :meth:`should_stop`; when it
    returns True the backend stops the motion and returns.
    """

    def __init__(
        self,
        trajectory: JointTrajectory,
        safety: SafetyConfig,
        on_progress: ProgressCallback | None,
        on_trip: Callable[[], None],
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.trajectory = trajectory
        # With a clock of its own (a simulated world's) the backend reads each state in its command loop at
        # that clock's now, so a state counts as measured when it is reported; otherwise states carry their
        # monotonic measurement stamps.
        self._clock = clock
        self._on_progress = on_progress
        self._on_trip = on_trip
        self._stop = threading.Event()
        self._stop_reason: Reason | None = None
        self._stop_message = ""
        self._lock = threading.Lock()
        self.max_tracking_error_rad = 0.0
        self.last_progress: ExecutionProgress | None = None
        self.start_s = time.monotonic()
        self.watchdog = Watchdog(
            state_max_age_s=safety.state_max_age_s,
            command_timeout_s=safety.command_timeout_s,
            on_trip=self._trip,
            clock=clock or time.monotonic,
        )

    @property
    def stop_reason(self) -> Reason | None:
        return self._stop_reason

    @property
    def stop_message(self) -> str:
        return self._stop_message

    def should_stop(self) -> bool:
        """True once a cancel, stop or the watchdog asked the motion to end."""
        return self._stop.is_set()

    def wait_stop(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s`` unless a stop is requested first; True when one was."""
        return self._stop.wait(timeout_s)

    def request_stop(self, reason: Reason, message: str = "") -> None:
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
                self._stop_message = message or reason.value
        self._stop.set()
        # The motion is being stopped: the wind-down must not trip the watchdog a second time.
        self.watchdog.disarm()

    def _trip(self, reason: Reason, message: str) -> None:
        self.request_stop(reason, message)
        # The backend thread may be blocked (that can be why things went stale): stop from here.
        self._on_trip()

    def allow_blocking(self, seconds: float) -> None:
        """Tell the watchdog that the next SDK call may block up to ``seconds`` (ends at the next state)."""
        self.watchdog.grace(seconds)

    def report_state(self, state: JointState) -> None:
        """Feed a measured state to the watchdog."""
        self.watchdog.feed_state(self._stamp(state))

    def _stamp(self, state: JointState) -> float:
        return state.stamp_s if self._clock is None else self._clock()

    def start_watching(self, start_s: float) -> None:
        """Start the watchdog at the motion's start (``start_s``, monotonic; the own clock's now when it has one)."""
        self.watchdog.start(start_s if self._clock is None else self._clock())

    def report(self, time_from_start_s: float, state: JointState | None = None) -> ExecutionProgress:
        """Record that the command for ``time_from_start_s`` was sent; publish progress."""
        self.watchdog.feed_command()
        error = math.nan
        if state is not None:
            self.watchdog.feed_state(self._stamp(state))
            expected, _ = self.trajectory.sample(min(time_from_start_s, self.trajectory.duration_s))
            error = float(np.max(np.abs(np.asarray(state.positions) - expected)))
            self.max_tracking_error_rad = max(self.max_tracking_error_rad, error)
        progress = ExecutionProgress(
            time_from_start_s=float(time_from_start_s),
            duration_s=self.trajectory.duration_s,
            waypoint=self.trajectory.segment_index(time_from_start_s),
            tracking_error_rad=error,
        )
        self.last_progress = progress
        if self._on_progress is not None:
            try:
                self._on_progress(progress)
            except Exception:  # a broken progress consumer must not leave the arm moving unsupervised
                logger.exception("progress callback failed")
        return progress


class Arm(abc.ABC, RegisteredBackend, registry=ARMS):
    """One arm with its gripper. Public methods are safe to call from any thread.

    Backends implement the ``_`` hooks; they never need to check limits, connection or enable
    state themselves: this class does so before calling them. A backend names its config dataclass
    in ``config_class``, which registers it under that config's ``type``.
    """

    config_class: ClassVar[type[ArmConfig]] = ArmConfig

    def __init__(self, config: ArmConfig) -> None:
        self.config = config
        self.description: RobotDescription = load_description(config.robot)
        self.safety = SafetyChecker(config.safety, self.description)
        self._connected = False
        self._enabled = False
        self._motion_lock = threading.Lock()
        self._execution: Execution | None = None
        self._execution_guard = threading.Lock()

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.config.name})"

    # ----- backend hooks ---------------------------------------------------------------------------

    @abc.abstractmethod
    def _connect(self) -> None:
        """Open the connection to the controller; raise ArmConnectionError when it cannot be reached."""

    @abc.abstractmethod
    def _disconnect(self) -> None:
        """Close the connection (the arm is already stopped)."""

    @abc.abstractmethod
    def _set_enabled(self, enabled: bool) -> None:
        """Power the motors and make the arm ready to move (or disable it)."""

    @abc.abstractmethod
    def _read_joint_state(self) -> JointState:
        """The newest measured joint state, in ``description.joint_names`` order."""

    @abc.abstractmethod
    def _run_trajectory(self, trajectory: JointTrajectory, execution: Execution) -> None:
        """Move along a validated ``trajectory`` (arm joint order, starts at t = 0).

        Call ``execution.report`` as commands go out, return when the motion is done, and stop the
        motion and return as soon as ``execution.should_stop()`` is True. Raise ArmFaultError for a
        controller fault.
        """

    @abc.abstractmethod
    def _stop_motion(self) -> None:
        """Bring the arm to rest now. Must be idempotent and callable from any thread."""

    @abc.abstractmethod
    def _read_fault(self) -> ArmFault | None:
        """The controller's active fault, or None."""

    @abc.abstractmethod
    def _recover(self) -> None:
        """Clear the controller's error so the arm can move again (re-enable is done by the caller)."""

    @abc.abstractmethod
    def _gripper_command(self, width_m: float, speed_m_s: float, force_n: float | None) -> GripperResult:
        """Move the fingers to ``width_m``; with ``force_n``, grasp (closing onto an object is success)."""

    @abc.abstractmethod
    def _read_gripper(self) -> GripperState:
        """The gripper's opening and grasp flag."""

    def _motion_clock(self) -> Callable[[], float] | None:
        """The clock a running motion's watchdog measures on; None: the monotonic wall clock (real arms)."""
        return None

    def simulated_time(self) -> float | None:
        """The simulator's time now, for a connected simulated arm; None for a real one (its cell ages in wall
        time). The stamp of its joint states (a simulated system's nodes run on this clock: /clock)."""
        clock = self._motion_clock() if self.is_connected else None
        return None if clock is None else clock()

    # ----- connection and enable -------------------------------------------------------------------

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.description.joint_names

    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def is_enabled(self) -> bool:
        return self._connected and self._enabled

    @property
    def is_moving(self) -> bool:
        return self._motion_lock.locked()

    def connect(self) -> None:
        """Connect to the controller (idempotent)."""
        if self._connected:
            return
        self._connect()
        self._connected = True
        logger.info("%s connected.", self)

    def disconnect(self) -> None:
        """Stop any motion and close the connection (idempotent)."""
        if not self._connected:
            return
        try:
            self.stop()
        finally:
            self._disconnect()
            self._connected = False
            self._enabled = False
            logger.info("%s disconnected.", self)

    def __enter__(self) -> Arm:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def _require_connected(self) -> None:
        if not self._connected:
            raise ArmNotConnectedError(f"{self} is not connected; call connect() first")

    def enable(self) -> None:
        """Power the motors. Refused while the controller reports a fault (call recover())."""
        self._require_connected()
        fault = self._read_fault()
        if fault is not None:
            raise ArmFaultError(fault, f"{self} cannot be enabled while fault {fault.name} is active: recover first")
        self._set_enabled(True)
        self._enabled = True
        logger.info("%s enabled.", self)

    def disable(self) -> None:
        """Stop and disable the motors."""
        self._require_connected()
        self.stop()
        self._set_enabled(False)
        self._enabled = False
        logger.info("%s disabled.", self)

    # ----- state -----------------------------------------------------------------------------------

    def joint_state(self) -> JointState:
        """The newest measured joint state."""
        self._require_connected()
        state = self._read_joint_state()
        if state.names != self.joint_names:
            raise ArmError(f"{self} backend reported joints {state.names}, expected {self.joint_names}")
        return state

    def ee_pose(self, state: JointState | None = None) -> np.ndarray:
        """``T_base_ee`` from forward kinematics of ``state`` (default: a fresh reading)."""
        state = self.joint_state() if state is None else state
        return self.description.forward_kinematics(state.positions)

    def fault(self) -> ArmFault | None:
        """The controller's active fault, or None."""
        self._require_connected()
        return self._read_fault()

    def gripper_state(self) -> GripperState:
        self._require_connected()
        return self._read_gripper()

    # ----- motion ----------------------------------------------------------------------------------

    def _require_ready(self) -> None:
        self._require_connected()
        fault = self._read_fault()
        if fault is not None:
            raise ArmFaultError(fault)
        if not self._enabled:
            raise ArmNotEnabledError(f"{self} is disabled; call enable() first")

    def validate(self, trajectory: JointTrajectory) -> JointTrajectory:
        """The trajectory as it would run, or SafetyViolationError; moves nothing."""
        self._require_connected()
        return self.safety.validate(trajectory, self.joint_state())

    def execute(
        self,
        trajectory: JointTrajectory,
        *,
        on_progress: ProgressCallback | None = None,
        dry_run: bool | None = None,
    ) -> ExecutionResult:
        """Run ``trajectory`` to the end, a cancel, a watchdog stop or a fault.

        Refusals raise before anything is sent: SafetyViolationError (named reason), ArmBusyError while
        another motion runs, ArmNotEnabledError, ArmFaultError, ArmNotConnectedError. Once motion
        has started the outcome is an ExecutionResult.
        """
        dry_run = self.config.dry_run if dry_run is None else dry_run
        self._require_connected()
        if not dry_run:
            self._require_ready()
        if not self._motion_lock.acquire(blocking=False):
            raise ArmBusyError(f"{self} is already executing a motion; cancel it first")
        try:
            validated = self.safety.validate(trajectory, self.joint_state())
            if dry_run:
                return ExecutionResult(True, Reason.DRY_RUN, "validated, not executed (dry run)", 0.0, 0.0)
            return self._execute_validated(validated, on_progress)
        finally:
            self._motion_lock.release()

    def _execute_validated(self, trajectory: JointTrajectory, on_progress: ProgressCallback | None) -> ExecutionResult:
        execution = Execution(trajectory, self.config.safety, on_progress, self._stop_motion_logged,
                              self._motion_clock())
        with self._execution_guard:
            self._execution = execution
        start = time.monotonic()
        execution.start_watching(start)
        fault: ArmFault | None = None
        try:
            self._run_trajectory(trajectory, execution)
        except ArmFaultError as error:
            fault = error.fault
        except BaseException:
            self._stop_motion_logged()
            raise
        finally:
            execution.watchdog.stop()
            with self._execution_guard:
                self._execution = None
        duration = time.monotonic() - start
        if fault is None:
            fault = self._read_fault()
        if fault is not None:
            self._stop_motion_logged()
            return ExecutionResult(False, Reason.FAULT, f"{fault.name}: {fault.message}", math.nan, duration, fault)
        if execution.stop_reason is not None:
            # Cancel stops the arm, whatever the backend already did; report once it is at rest.
            self._stop_motion_logged()
            self.wait_until_still()
            error = self._final_error(trajectory)
            return ExecutionResult(False, execution.stop_reason, execution.stop_message, error, duration)
        error = self._final_error(trajectory)
        if not error <= self.config.goal_tolerance_rad:
            return ExecutionResult(
                False,
                Reason.GOAL_TOLERANCE,
                f"ended {error:.4f} rad from the goal; tolerance {self.config.goal_tolerance_rad:.4f} rad",
                error,
                duration,
            )
        return ExecutionResult(True, Reason.COMPLETED, "trajectory executed", error, duration)

    def wait_until_still(self) -> bool:
        """Wait until no joint has moved faster than ``still_speed_rad_s``, averaged over ``still_window_s``.

        Judged from positions, not reported velocities: simulators and filters report velocity
        chatter on a joint that is not going anywhere. Returns False after ``stop_timeout_s``.
        """
        deadline = time.monotonic() + self.config.stop_timeout_s
        window = self.config.still_window_s
        samples: collections.deque[JointState] = collections.deque()
        while time.monotonic() < deadline:
            try:
                state = self.joint_state()
            except ArmError:
                return False
            samples.append(state)
            while len(samples) > 2 and state.stamp_s - samples[1].stamp_s >= window:
                samples.popleft()
            oldest = samples[0]
            span = state.stamp_s - oldest.stamp_s
            if span >= window:
                speed = float(np.max(np.abs(state.positions - oldest.positions))) / span
                if speed < self.config.still_speed_rad_s:
                    return True
            time.sleep(0.005)
        logger.warning("%s still moving %.1f s after a stop", self, self.config.stop_timeout_s)
        return False

    def _final_error(self, trajectory: JointTrajectory) -> float:
        try:
            state = self.joint_state()
        except ArmError:
            return math.nan
        return float(np.max(np.abs(state.positions - trajectory.positions[-1])))

    def _stop_motion_logged(self) -> None:
        try:
            self._stop_motion()
        except Exception:
            logger.exception("%s: stopping the motion failed", self)

    def plan_move(self, goal_rad: np.ndarray, start: JointState | None = None) -> JointTrajectory:
        """A min-jerk trajectory from the current (or ``start``) state to ``goal_rad`` within the joint
        velocity, acceleration and TCP speed limits (workspace and position limits are still checked
        when it is executed)."""
        start = self.joint_state() if start is None else start
        goal = np.asarray(goal_rad, dtype=np.float64)
        if goal.shape != (self.description.dof,):
            raise TrajectoryError(f"goal needs {self.description.dof} joint values, got shape {goal.shape}")
        trajectory = min_jerk_move(
            self.joint_names,
            start.positions,
            goal,
            self.safety.max_velocity_rad_s,
            self.safety.max_acceleration_rad_s2,
        )
        times = trajectory.dense_times(self.config.safety.fk_check_step_s)
        points = self.description.forward_kinematics_batch(trajectory.sample(times)[0])[:, :3, 3]
        if times.size > 1:
            peak = float(np.max(np.linalg.norm(np.diff(points, axis=0), axis=1) / np.diff(times)))
            # 5 % below the limit: the check samples the same path on a different grid.
            allowed = 0.95 * self.config.safety.max_tcp_speed_m_s
            if peak > allowed:
                trajectory = trajectory.scaled(allowed / peak)
        return trajectory

    def move_to_joints(
        self,
        goal_rad: np.ndarray,
        *,
        on_progress: ProgressCallback | None = None,
        dry_run: bool | None = None,
    ) -> ExecutionResult:
        """Move to a joint configuration along a min-jerk path, through the same safety checks."""
        self._require_connected()
        return self.execute(self.plan_move(goal_rad), on_progress=on_progress, dry_run=dry_run)

    def _state_arrived(self, state: JointState) -> None:
        """Feed a state the backend's own state thread received to the running motion's watchdog.

        The watchdog's state limit then measures the controller's state stream itself; a command loop
        that falls behind is the command timeout's to catch.
        """
        execution = self._execution
        if execution is not None:
            execution.report_state(state)

    def cancel(self, reason: Reason = Reason.CANCELED, message: str = "") -> bool:
        """Ask the running motion to stop; True when one was running."""
        with self._execution_guard:
            execution = self._execution
        if execution is None:
            return False
        execution.request_stop(reason, message or "canceled by request")
        return True

    def stop(self) -> None:
        """Cancel any running motion and bring the arm to rest now."""
        self.cancel(Reason.CANCELED, "stop requested")
        if self._connected:
            self._stop_motion_logged()

    def recover(self) -> None:
        """Clear the controller's error and restore the enable state it had, so the arm can move again."""
        self._require_connected()
        self.stop()
        was_enabled = self._enabled
        self._recover()
        fault = self._read_fault()
        if fault is not None:
            raise ArmFaultError(fault, f"{self} still reports {fault.name} after recovery: {fault.message}")
        if was_enabled:
            self._set_enabled(True)
        logger.info("%s recovered.", self)

    # ----- gripper ---------------------------------------------------------------------------------

    def gripper_move(self, width_m: float, max_effort_n: float = 0.0, *, dry_run: bool | None = None) -> GripperResult:
        """Move the fingers to ``width_m``; ``max_effort_n`` > 0 grasps with that force limit."""
        dry_run = self.config.dry_run if dry_run is None else dry_run
        d = self.description
        if not (math.isfinite(width_m) and d.gripper_min_width_m - 1e-9 <= width_m <= d.gripper_max_width_m + 1e-9):
            raise GripperError(
                f"gripper width {width_m} m is outside [{d.gripper_min_width_m}, {d.gripper_max_width_m}] m"
            )
        if not (math.isfinite(max_effort_n) and max_effort_n >= 0.0):
            raise GripperError(f"max_effort_n must be a finite number >= 0, got {max_effort_n}")
        self._require_connected()
        if dry_run:
            state = self._read_gripper()
            return GripperResult(state.width_m, math.nan, False, False)
        self._require_ready()
        force = max_effort_n if max_effort_n > 0.0 else None
        return self._gripper_command(float(width_m), self.config.gripper_speed_m_s, force)

    def gripper_open(self) -> GripperResult:
        """Open the fingers fully."""
        return self.gripper_move(self.description.gripper_max_width_m)

    def gripper_close(self, force_n: float | None = None) -> GripperResult:
        """Close onto an object with ``force_n`` (default from config); holding one is success."""
        return self.gripper_move(self.description.gripper_min_width_m, force_n or self.config.gripper_force_n)


# ----- factory -------------------------------------------------------------------------------------

def register_arm_backend(type_name: str, module: str) -> None:
    """Declare an out-of-tree backend: ``module`` defines its config and ``Arm`` subclass, imported when used."""
    ARMS.declare(type_name, module)


def available_arm_types() -> tuple[str, ...]:
    return ARMS.types()


def arm_config_class(type_name: str) -> type[ArmConfig]:
    """The config dataclass of the backend registered as ``type_name`` (imports its module)."""
    return ARMS.config_class(type_name)


def make_arm_config(type_name: str, params: Mapping[str, Any] | None = None) -> ArmConfig:
    """Build a backend's config from plain values (a YAML mapping); unknown keys are refused."""
    return ARMS.config_from_dict({**(params or {}), "type": type_name})


def make_arm(config: ArmConfig) -> Arm:
    """The arm for ``config``, built by the backend registered under ``config.type`` (not connected)."""
    if not isinstance(config, ArmConfig):
        raise ArmConfigError(f"make_arm needs an ArmConfig, got {type(config).__name__}")
    return ARMS.build(config)
