"""UFACTORY xArm backend on ``xarm-python-sdk``: servo streaming, named faults, explicit recovery.

Trajectories are streamed in servo mode (mode 1) with ``set_servo_angle_j`` at a fixed rate on an
absolute schedule (the controller executes only the newest target, as xarm_ros2's ros2_control
plugin does at 150 Hz). Units are converted only here: the SDK runs with ``is_radian=True`` and
millimetres where it needs lengths. The SDK is imported lazily, its process-wide socket default
timeout is undone, and the connection is made on a worker thread after a short TCP probe, so an
unreachable controller is reported within ``connect_timeout_s`` and a hung one within
``handshake_timeout_s``.
"""

from __future__ import annotations

import abc
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from robopin.robots.base import Arm, ArmConfig, Execution
from robopin.robots.errors import (
    ArmConfigError,
    ArmConnectionError,
    ArmError,
    ArmFaultError,
    GripperError,
)
from robopin.robots.state import ArmFault, GripperResult, GripperState, JointState
from robopin.robots.trajectory import JointTrajectory

logger = logging.getLogger(__name__)

CONTROL_PORT = 502

# SDK return codes (xarm_api_code.md).
_CODE_OK = 0
_CODE_NOT_CONNECTED = -1
_CODE_UNCLEARED_ERROR = 1
_CODE_WARNING = 2

# Controller error codes → (name, recoverable by clean_error). Names for codes the documentation
# groups; anything unlisted is reported as controller_error_<code>.
_CONTROLLER_ERRORS: dict[int, tuple[str, bool]] = {
    1: ("emergency_stop", False),
    2: ("emergency_stop", False),
    3: ("emergency_stop", False),
    **{code: (f"servo_error_joint{code - 10}", False) for code in range(11, 18)},
    19: ("end_effector_communication", True),
    21: ("kinematics", True),
    22: ("self_collision", True),
    23: ("joint_limit", True),
    24: ("speed_limit", True),
    25: ("planning", True),
    28: ("end_effector_communication", True),
    31: ("collision", True),
    35: ("safety_boundary", True),
    40: ("no_ik_solution", True),
}

GRIPPER_FAMILIES = ("xarm_gripper", "g2", "lite6", "bio", "none")


def controller_fault(code: int) -> ArmFault:
    """The named fault for an xArm controller error code."""
    name, recoverable = _CONTROLLER_ERRORS.get(code, (f"controller_error_{code}", True))
    return ArmFault(name=name, message=f"xArm controller error {code}", code=code, recoverable=recoverable)


@dataclass(kw_only=True)
class XArmConfig(ArmConfig):
    """xArm controller address, streaming rate, gripper family and controller-side safety settings."""

    type_name: ClassVar[str] = "xarm"

    robot: str = "xarm6"
    ip: str = ""
    connect_timeout_s: float = 1.0  # TCP probe: an unreachable controller is reported this fast
    handshake_timeout_s: float = 5.0  # version check and first state report (a hung controller)
    stream_rate_hz: float = 100.0
    settle_timeout_s: float = 1.0  # after the last command, wait this long for the arm to reach the goal
    gripper: str = "xarm_gripper"
    gripper_timeout_s: float = 5.0
    reduced_mode: bool = True  # push the workspace box and TCP speed limit into the controller too
    self_collision_detection: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.ip:
            raise ArmConfigError("XArmConfig.ip must name the controller address, got an empty string")
        if not 1.0 <= self.stream_rate_hz <= 250.0:
            raise ArmConfigError(f"stream_rate_hz must be in [1, 250] Hz, got {self.stream_rate_hz}")
        for name in ("connect_timeout_s", "handshake_timeout_s"):
            if not getattr(self, name) > 0.0:
                raise ArmConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.gripper not in GRIPPER_FAMILIES:
            raise ArmConfigError(f"gripper must be one of {GRIPPER_FAMILIES}, got {self.gripper!r}")


class _SocketWithoutProcessTimeout:
    """The ``socket`` module as the SDK's socket layer sees it, minus ``setdefaulttimeout``.

    The SDK calls ``socket.setdefaulttimeout(1)`` each time it opens a socket, including when its
    report thread reconnects long after connect(), which would give every other socket in the
    process (rclpy, HTTP clients) a 1 s timeout. Its own sockets set their timeouts explicitly.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)

    @staticmethod
    def setdefaulttimeout(_timeout: float | None) -> None:
        return None


def _import_sdk() -> Any:
    """Import ``xarm.wrapper.XArmAPI`` with the process-wide socket timeout side effect removed."""
    from xarm.core.comm import socket_port
    from xarm.wrapper import XArmAPI

    if not isinstance(socket_port.socket, _SocketWithoutProcessTimeout):
        socket_port.socket = _SocketWithoutProcessTimeout()
    return XArmAPI


def _check(code: int | list[int] | tuple[int, ...], what: str) -> None:
    if isinstance(code, (list, tuple)):  # a few SDK calls return [code] or (code, value)
        code = code[0]
    if code == _CODE_NOT_CONNECTED:
        raise ArmConnectionError(f"xArm {what}: controller not connected")
    if code not in (_CODE_OK, _CODE_WARNING):
        raise ArmError(f"xArm {what} failed with SDK code {code}")


class _XArmGripper(abc.ABC):
    """One gripper family's SDK calls; widths in m at this interface."""

    def __init__(self, api: Any, max_width_m: float, timeout_s: float) -> None:
        self.api = api
        self.max_width_m = max_width_m
        self.timeout_s = timeout_s

    def prepare(self) -> None:  # noqa: B027 - most families need no preparation
        """Enable the gripper once after connecting."""

    @abc.abstractmethod
    def move(self, width_m: float, speed_m_s: float, force_n: float | None) -> None: ...

    @abc.abstractmethod
    def width_m(self) -> float: ...


class _XArmGripperClassic(_XArmGripper):
    """The xArm Gripper: 0 (closed) .. 850 pulses for 0 .. 85 mm, speed in pulses/s (r/min in the SDK docs)."""

    PULSES_PER_M = 10000.0

    def prepare(self) -> None:
        _check(self.api.set_gripper_mode(0), "set_gripper_mode")
        _check(self.api.set_gripper_enable(True), "set_gripper_enable")

    def move(self, width_m: float, speed_m_s: float, force_n: float | None) -> None:
        del force_n  # the xArm Gripper has no force setting; it stalls on the object
        _check(self.api.set_gripper_speed(max(1000, round(speed_m_s * self.PULSES_PER_M * 60))), "set_gripper_speed")
        code = self.api.set_gripper_position(round(width_m * self.PULSES_PER_M), wait=True, timeout=self.timeout_s)
        _check(code, "set_gripper_position")

    def width_m(self) -> float:
        code, pulses = self.api.get_gripper_position()
        _check(code, "get_gripper_position")
        return float(pulses) / self.PULSES_PER_M


class _XArmGripperG2(_XArmGripper):
    """The xArm Gripper G2: position in mm (0..84), speed 15..225 mm/s, force 1..100 (%)."""

    def prepare(self) -> None:
        _check(self.api.set_gripper_enable(True), "set_gripper_enable")

    def move(self, width_m: float, speed_m_s: float, force_n: float | None) -> None:
        speed = int(min(225, max(15, speed_m_s * 1000.0)))
        force = 50 if force_n is None else int(min(100, max(1, force_n)))
        code = self.api.set_gripper_g2_position(
            width_m * 1000.0, speed=speed, force=force, wait=True, timeout=self.timeout_s
        )
        _check(code, "set_gripper_g2_position")

    def width_m(self) -> float:
        code, millimetres = self.api.get_gripper_g2_position()
        _check(code, "get_gripper_g2_position")
        return float(millimetres) / 1000.0


class _Lite6Gripper(_XArmGripper):
    """The Lite 6 gripper: open or closed only, no position feedback."""

    def __init__(self, api: Any, max_width_m: float, timeout_s: float) -> None:
        super().__init__(api, max_width_m, timeout_s)
        self._commanded = max_width_m

    def move(self, width_m: float, speed_m_s: float, force_n: float | None) -> None:
        close = width_m < self.max_width_m / 2
        _check(self.api.close_lite6_gripper() if close else self.api.open_lite6_gripper(), "lite6 gripper")
        self._commanded = 0.0 if close else self.max_width_m

    def width_m(self) -> float:
        return self._commanded


class _BioGripper(_XArmGripper):
    """The BIO gripper: open or close with the SDK's own positions, force in % (1..100)."""

    def __init__(self, api: Any, max_width_m: float, timeout_s: float) -> None:
        super().__init__(api, max_width_m, timeout_s)
        self._commanded = max_width_m

    def prepare(self) -> None:
        _check(self.api.set_bio_gripper_enable(True), "set_bio_gripper_enable")

    def move(self, width_m: float, speed_m_s: float, force_n: float | None) -> None:
        close = width_m < self.max_width_m / 2
        if force_n is not None:
            _check(self.api.set_bio_gripper_force(int(min(100, max(1, force_n)))), "set_bio_gripper_force")
        call = self.api.close_bio_gripper if close else self.api.open_bio_gripper
        _check(call(wait=True, timeout=self.timeout_s), "bio gripper")
        self._commanded = 0.0 if close else self.max_width_m

    def width_m(self) -> float:
        return self._commanded


_GRIPPER_CLASSES: dict[str, type[_XArmGripper]] = {
    "xarm_gripper": _XArmGripperClassic,
    "g2": _XArmGripperG2,
    "lite6": _Lite6Gripper,
    "bio": _BioGripper,
}


class XArm(Arm):
    """An xArm 5/6/7 or Lite 6 driven through ``xarm.wrapper.XArmAPI``."""

    config: XArmConfig

    def __init__(self, config: XArmConfig) -> None:
        super().__init__(config)
        self._api: Any = None
        self._gripper: _XArmGripper | None = None
        self._state_lock = threading.Lock()
        self._latest: JointState | None = None
        self._needs_rearm = True
        self.last_stream_times_s: np.ndarray = np.zeros(0)  # send times of the last trajectory (monotonic)

    # ----- connection ------------------------------------------------------------------------------

    def _connect(self) -> None:
        address = (self.config.ip, CONTROL_PORT)
        try:
            with socket.create_connection(address, timeout=self.config.connect_timeout_s):
                pass
        except OSError as error:
            raise ArmConnectionError(f"xArm controller {self.config.ip}:{CONTROL_PORT} unreachable: {error}") from None

        deadline = time.monotonic() + self.config.handshake_timeout_s
        XArmAPI = _import_sdk()
        previous_timeout = socket.getdefaulttimeout()
        outcome: dict[str, BaseException | None] = {"error": None}
        api = XArmAPI(
            self.config.ip,
            is_radian=True,
            do_not_open=True,
            report_type="real",
            check_joint_limit=True,
        )

        def handshake() -> None:
            try:
                api.connect()
            except BaseException as error:  # surfaced to the caller below
                outcome["error"] = error

        worker = threading.Thread(target=handshake, name="xarm-connect", daemon=True)
        try:
            worker.start()
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive() or outcome["error"] is not None or not api.connected:
                self._close_quietly(api)
                detail = "no answer" if worker.is_alive() else str(outcome["error"] or "refused")
                raise ArmConnectionError(
                    f"xArm controller {self.config.ip} did not complete the handshake within "
                    f"{self.config.handshake_timeout_s:.2f} s: {detail}"
                )
            api.register_report_location_callback(self._on_report, report_cartesian=False, report_joints=True)
            while self._latest is None and time.monotonic() < deadline:
                time.sleep(0.002)
            if self._latest is None:
                self._close_quietly(api)
                raise ArmConnectionError(f"xArm controller {self.config.ip} sent no state report")
        finally:
            # Belt and braces: whatever set a process-wide default during the handshake, undo it.
            socket.setdefaulttimeout(previous_timeout)
        self._api = api
        self._needs_rearm = True
        try:
            self._configure_controller_safety()
        except ArmError:
            self._disconnect()
            raise
        if self.config.gripper != "none":
            self._gripper = _GRIPPER_CLASSES[self.config.gripper](
                api, self.description.gripper_max_width_m, self.config.gripper_timeout_s
            )

    @staticmethod
    def _close_quietly(api: Any) -> None:
        try:
            api.disconnect()
        except Exception:
            logger.debug("xArm disconnect after a failed connect raised", exc_info=True)

    def _configure_controller_safety(self) -> None:
        """Mirror our safety settings in the controller, so it refuses what we would refuse."""
        api, safety = self._api, self.config.safety
        _check(api.set_collision_sensitivity(safety.collision_sensitivity), "set_collision_sensitivity")
        _check(api.set_self_collision_detection(self.config.self_collision_detection), "set_self_collision_detection")
        if self.config.reduced_mode:
            low = np.array(safety.workspace_min_m) * 1000.0
            high = np.array(safety.workspace_max_m) * 1000.0
            boundary = [high[0], low[0], high[1], low[1], high[2], low[2]]
            _check(api.set_reduced_tcp_boundary([float(v) for v in boundary]), "set_reduced_tcp_boundary")
            _check(api.set_reduced_max_tcp_speed(safety.max_tcp_speed_m_s * 1000.0), "set_reduced_max_tcp_speed")
            _check(api.set_fence_mode(True), "set_fence_mode")
            _check(api.set_reduced_mode(True), "set_reduced_mode")

    def _disconnect(self) -> None:
        if self._api is not None:
            self._close_quietly(self._api)
        self._api = None
        self._gripper = None
        self._latest = None

    def _on_report(self, report: dict) -> None:
        """Keep the newest joint angles from the real-time report (rad) with their arrival time."""
        angles = report.get("joints")
        if angles is None:
            return
        now = time.monotonic()
        positions = np.asarray(angles[: self.description.dof], dtype=np.float64)
        with self._state_lock:
            previous = self._latest
            velocities = None
            if previous is not None and now > previous.stamp_s:
                velocities = (positions - previous.positions) / (now - previous.stamp_s)
            self._latest = JointState(self.joint_names, positions, velocities, None, now)

    # ----- enable, state, faults -------------------------------------------------------------------

    def _arm_for_streaming(self) -> None:
        """Servo mode and ready state: the sequence the controller needs after enable, stop or an error."""
        api = self._api
        _check(api.motion_enable(True), "motion_enable")
        _check(api.set_mode(1), "set_mode(1)")
        _check(api.set_state(0), "set_state(0)")
        self._needs_rearm = False

    def _set_enabled(self, enabled: bool) -> None:
        api = self._api
        if enabled:
            api.clean_warn()
            self._arm_for_streaming()
            if self._gripper is not None:
                self._gripper.prepare()
        else:
            api.set_state(4)
            _check(api.motion_enable(False), "motion_enable(False)")
            self._needs_rearm = True

    def _read_joint_state(self) -> JointState:
        with self._state_lock:
            latest = self._latest
        if latest is None:
            raise ArmConnectionError("xArm has not reported any joint state")
        return latest

    def _read_fault(self) -> ArmFault | None:
        api = self._api
        if api is None or not api.connected:
            return ArmFault("connection_lost", "xArm controller connection lost", None, True)
        code, (error, _warning) = api.get_err_warn_code()
        if code == _CODE_NOT_CONNECTED:
            return ArmFault("connection_lost", "xArm controller connection lost", None, True)
        return controller_fault(int(error)) if error else None

    def _recover(self) -> None:
        api = self._api
        fault = self._read_fault()
        if fault is not None and not fault.recoverable:
            raise ArmFaultError(
                fault, f"xArm fault {fault.name} needs an operator (release the e-stop, check the servo)"
            )
        _check(api.clean_error(), "clean_error")
        api.clean_warn()
        if self._gripper is not None and self.config.gripper in ("xarm_gripper", "g2"):
            api.clean_gripper_error()
        # The base class re-enables (motion_enable, servo mode, state 0) when the arm was enabled.
        self._needs_rearm = True

    # ----- motion ----------------------------------------------------------------------------------

    def _run_trajectory(self, trajectory: JointTrajectory, execution: Execution) -> None:
        api = self._api
        if self._needs_rearm or api.mode != 1 or api.state in (3, 4, 5):
            self._arm_for_streaming()
        period = 1.0 / self.config.stream_rate_hz
        duration = trajectory.duration_s
        steps = math.ceil(duration / period)
        sent = np.empty(steps + 1)
        start = time.monotonic()
        count = 0
        for k in range(steps + 1):
            if execution.should_stop():
                break
            t = min(k * period, duration)
            target, _ = trajectory.sample(t)
            code = api.set_servo_angle_j([float(v) for v in target], is_radian=True)
            sent[count] = time.monotonic()
            count += 1
            if code != _CODE_OK:
                self._raise_for_code(code, "set_servo_angle_j")
            execution.report(t, self._read_joint_state())
            delay = start + (k + 1) * period - time.monotonic()
            if delay > 0 and k < steps:
                execution.wait_stop(delay)
        self.last_stream_times_s = sent[:count]
        if execution.should_stop():
            return
        # The last target is commanded; wait for the arm to arrive (keep feeding the watchdog).
        goal = trajectory.positions[-1]
        settle_deadline = time.monotonic() + self.config.settle_timeout_s
        while time.monotonic() < settle_deadline and not execution.should_stop():
            state = self._read_joint_state()
            execution.report(duration, state)
            if np.max(np.abs(state.positions - goal)) <= self.config.goal_tolerance_rad * 0.5:
                break
            execution.wait_stop(period)
        fault = self._read_fault()
        if fault is not None:
            raise ArmFaultError(fault)

    def _raise_for_code(self, code: int, what: str) -> None:
        fault = self._read_fault()
        if fault is not None:
            raise ArmFaultError(fault)
        if code == _CODE_NOT_CONNECTED:
            raise ArmConnectionError(f"xArm {what}: controller not connected")
        raise ArmError(f"xArm {what} returned SDK code {code}")

    def _stop_motion(self) -> None:
        api = self._api
        if api is None:
            return
        # State 4 stops the arm with the controller's own deceleration; the next motion re-arms.
        api.set_state(4)
        self._needs_rearm = True

    # ----- gripper ---------------------------------------------------------------------------------

    def _require_gripper(self) -> _XArmGripper:
        if self._gripper is None:
            raise GripperError(f"{self} has no gripper configured (gripper='none')")
        return self._gripper

    def _gripper_command(self, width_m: float, speed_m_s: float, force_n: float | None) -> GripperResult:
        gripper = self._require_gripper()
        try:
            gripper.move(width_m, speed_m_s, force_n)
        except ArmError as error:
            raise GripperError(str(error)) from None
        final = gripper.width_m()
        tolerance = 0.002
        reached = abs(final - width_m) <= tolerance
        stalled = not reached and force_n is not None and final > width_m
        return GripperResult(final, math.nan, stalled, reached)

    def _read_gripper(self) -> GripperState:
        gripper = self._require_gripper()
        try:
            width = gripper.width_m()
        except ArmError as error:
            raise GripperError(str(error)) from None
        # Without force feedback the grasp flag means: not fully closed after a close command.
        return GripperState(width, False, gripper.max_width_m)
