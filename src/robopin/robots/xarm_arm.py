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

from robopin.geometry.transforms import matrix_to_rpy
from robopin.robots.base import Arm, ArmConfig, Execution
from robopin.robots.errors import (
    ArmConfigError,
    ArmConnectionError,
    ArmError,
    ArmFault,
    ArmFaultError,
    GripperError,
)
from robopin.robots.state import GripperResult, GripperState, JointState
from robopin.robots.trajectory import JointTrajectory

logger = logging.getLogger(__name__)

CONTROL_PORT = 502

# SDK return codes (xarm/x3/code.py APIState; 1 and 2 are the reply's error and warning status bits).
_CODE_OK = 0
_CODE_NOT_CONNECTED = -1
_CODE_UNCLEARED_ERROR = 1
_CODE_WARNING = 2
_CODE_END_EFFECTOR_FAULT = 102  # APIState.END_EFFECTOR_HAS_FAULT

# Controller error codes -> (name, recoverable with clean_error). The codes and their meaning are the
# SDK's own table (xarm/core/config/x_code.py, ControllerErrorCodeMap); its English title becomes the
# fault message. "Not recoverable" means the SDK's advice is an operator action (release the e-stop,
# restart the controller, call support) before clean_error can help.
_CONTROLLER_ERRORS: dict[int, tuple[str, bool]] = {
    1: ("emergency_stop", False),  # e-stop button on the controller pushed in
    2: ("emergency_stop", False),  # emergency IO of the control box triggered
    3: ("emergency_stop", False),  # e-stop of the three-state switch pressed
    10: ("servo_error", False),
    **{code: (f"servo_error_joint{code - 10}", False) for code in range(11, 18)},
    18: ("force_torque_sensor_communication", True),
    19: ("end_effector_communication", True),
    21: ("kinematics", True),
    22: ("self_collision", True),
    23: ("joint_limit", True),  # "Joints Angle Exceed Limit"
    24: ("speed_limit", True),  # "Speed Exceeds Limit"
    25: ("planning", True),
    26: ("linux_rt", False),
    27: ("command_reply", False),
    28: ("end_module_communication", True),
    30: ("feedback_speed_limit", True),  # "Feedback Speed Exceeds limit"
    31: ("collision", True),  # "Collision Caused Abnormal Current"
    32: ("circle_calculation", True),
    33: ("controller_gpio", True),
    34: ("recording_timeout", True),
    35: ("safety_boundary", True),  # "Safety Boundary Limit"
    36: ("delay_command_limit", True),
    37: ("manual_mode_motion", True),
    38: ("abnormal_joint_angle", False),  # the SDK says: e-stop the arm and contact support
    39: ("power_board_communication", False),
    40: ("trajectory_solution_failed", True),  # "Solution failure of error-free joint trajectory" (not IK)
    41: ("friction_file_invalid", False),
    42: ("calibration_file_invalid", False),
    50: ("force_torque_sensor_read", True),
    51: ("force_torque_sensor_mode", True),
    52: ("force_torque_sensor_zero", True),
    53: ("force_torque_sensor_overload", True),
    60: ("servo_linear_speed_limit", True),  # "Linear speed exceeded limit in servo_j mode."
    110: ("base_board_communication", False),
    111: ("external_rs485_communication", True),
}

GRIPPER_FAMILIES = ("xarm_gripper", "g2", "lite6", "bio", "none")

# The xArm Gripper's mass and centre of gravity in the flange frame: the sum of its links' inertials in
# pybullet_data's xarm/xarm6_with_gripper.urdf, fingers open (0.751 kg at 64 mm along the flange z; its
# base link matches xarm_ros2's xarm_gripper.urdf.xacro, 0.542 kg at 48 mm).
XARM_GRIPPER_LOAD_KG = 0.75
XARM_GRIPPER_CENTER_OF_GRAVITY_M = (0.0, 0.0, 0.064)


def _sdk_error_title(code: int) -> str | None:
    """The SDK's English title for a controller error code, when the SDK is installed."""
    try:
        from xarm.core.config.x_code import ControllerErrorCodeMap
    except ImportError:
        return None
    entry = ControllerErrorCodeMap.get(code)
    return entry["en"]["title"] if entry else None


def controller_fault(code: int) -> ArmFault:
    """The named fault for an xArm controller error code (C<code> on the controller's display)."""
    name, recoverable = _CONTROLLER_ERRORS.get(code, (f"controller_error_{code}", True))
    title = _sdk_error_title(code)
    message = f"xArm controller error C{code}" + (f": {title}" if title else "")
    return ArmFault(name=name, message=message, code=code, recoverable=recoverable)


@dataclass(kw_only=True)
class XArmConfig(ArmConfig):
    """xArm controller address, streaming rate, gripper family and controller-side safety settings."""

    type: ClassVar[str] = "xarm"

    robot: str = "xarm6"
    ip: str = ""
    connect_timeout_s: float = 1.0  # TCP probe: an unreachable controller is reported this fast
    handshake_timeout_s: float = 5.0  # version check and first state report (a hung controller)
    stream_rate_hz: float = 100.0
    settle_timeout_s: float = 1.0  # after the last command, wait this long for the arm to reach the goal
    gripper: str = "xarm_gripper"
    gripper_timeout_s: float = 5.0
    # The xArm Gripper's speed register is in r/min (SDK set_gripper_speed, a u16); xarm_ros2's default is
    # 2000. ArmConfig.gripper_speed_m_s does not apply to this gripper: the SDK gives no conversion.
    gripper_speed_rpm: int = 2000
    # Payload the controller compensates (SDK set_tcp_load: kg, centre of gravity in the flange frame).
    # None: the xArm Gripper's for gripper="xarm_gripper", nothing for "none", else left as configured.
    tcp_load_kg: float | None = None
    tcp_load_center_of_gravity_m: tuple[float, float, float] | None = None
    reduced_mode: bool = True  # push the workspace box, TCP and joint speed limits into the controller too
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
        if not (isinstance(self.gripper_speed_rpm, int) and 1 <= self.gripper_speed_rpm <= 0xFFFF):
            raise ArmConfigError(
                f"gripper_speed_rpm must be an integer in [1, 65535] r/min, got {self.gripper_speed_rpm!r}"
            )
        if self.tcp_load_kg is not None and not (math.isfinite(self.tcp_load_kg) and self.tcp_load_kg >= 0.0):
            raise ArmConfigError(f"tcp_load_kg must be a finite number >= 0, got {self.tcp_load_kg}")
        if (self.tcp_load_kg is None) != (self.tcp_load_center_of_gravity_m is None):
            raise ArmConfigError("tcp_load_kg and tcp_load_center_of_gravity_m are set together or not at all")
        if self.tcp_load_center_of_gravity_m is not None:
            center = tuple(float(v) for v in self.tcp_load_center_of_gravity_m)
            if len(center) != 3 or not all(math.isfinite(v) for v in center):
                raise ArmConfigError(f"tcp_load_center_of_gravity_m must be 3 finite numbers (m), got {center}")
            self.tcp_load_center_of_gravity_m = center  # type: ignore[assignment]

    def tcp_load(self) -> tuple[float, tuple[float, float, float]] | None:
        """(kg, centre of gravity in m) the controller should compensate, or None to leave it alone."""
        if self.tcp_load_kg is not None and self.tcp_load_center_of_gravity_m is not None:
            return self.tcp_load_kg, self.tcp_load_center_of_gravity_m
        if self.gripper == "xarm_gripper":
            return XARM_GRIPPER_LOAD_KG, XARM_GRIPPER_CENTER_OF_GRAVITY_M
        if self.gripper == "none":
            return 0.0, (0.0, 0.0, 0.0)
        return None


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


class RepeatedLines(logging.Filter):
    """Collapse a logger's repeated lines: the first passes, repeats are counted and reported once per
    ``every_s`` ("... repeated 57 times in 5.0 s") and when another line comes.

    The xArm SDK logs "xArm is not connected" from its connection check on every API call (its
    ``xarm.core.utils.log`` logger, a StreamHandler on stdout of its own): a dropped controller printed 322 of
    them before robopin's one line naming the fault, and an operator learns to skip the real warning.
    """

    def __init__(self, every_s: float = 5.0) -> None:
        super().__init__()
        self.every_s = every_s
        self.handlers: list[logging.Handler] = []  # where a held-back count is written (the logger's own)
        self._lock = threading.Lock()
        self._last: tuple[int, str] | None = None
        self._repeats = 0
        self._since_s = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.levelno, record.getMessage())
        now = time.monotonic()
        with self._lock:
            if key == self._last:
                self._repeats += 1
                if now - self._since_s < self.every_s:
                    return False
                summary = self._summary(now)
                record.msg, record.args = f"{key[1]} (repeated {summary})", ()
                return True
            if self._repeats and self._last is not None:
                level, text = self._last
                summary = logging.LogRecord(record.name, level, record.pathname, record.lineno,
                                            f"{text} (repeated {self._summary(now)})", (), None)
                for handler in self.handlers:
                    handler.handle(summary)
            self._last, self._repeats, self._since_s = key, 0, now
            return True

    def _summary(self, now: float) -> str:
        text = f"{self._repeats} more time(s) in {now - self._since_s:.1f} s"
        self._repeats, self._since_s = 0, now
        return text


_SDK_REPEATS = RepeatedLines()


def _import_sdk() -> Any:
    """Import ``xarm.wrapper.XArmAPI`` with the process-wide socket timeout side effect removed, and its
    logger's repeated lines collapsed (:class:`RepeatedLines`)."""
    from xarm.core.comm import socket_port
    from xarm.core.utils.log import logger as sdk_logger
    from xarm.wrapper import XArmAPI

    if not isinstance(socket_port.socket, _SocketWithoutProcessTimeout):
        socket_port.socket = _SocketWithoutProcessTimeout()
    if _SDK_REPEATS not in sdk_logger.filters:
        _SDK_REPEATS.handlers = list(sdk_logger.handlers)
        sdk_logger.addFilter(_SDK_REPEATS)
    return XArmAPI


def _code_of(code: int | list[int] | tuple[int, ...]) -> int:
    if isinstance(code, (list, tuple)):  # a few SDK calls return [code] or (code, value)
        return int(code[0])
    return int(code)


def _check(code: int | list[int] | tuple[int, ...], what: str) -> None:
    code = _code_of(code)
    if code == _CODE_NOT_CONNECTED:
        raise ArmConnectionError(f"xArm {what}: controller not connected")
    if code not in (_CODE_OK, _CODE_WARNING):
        raise ArmError(f"xArm {what} failed with SDK code {code}")


def _check_setting(code: int | list[int] | tuple[int, ...], what: str) -> None:
    """Like :func:`_check` for a settings register, where code 1 only says an error is standing.

    Every reply carries the controller's status byte; several SDK setters (set_collision_sensitivity,
    set_reduced_*, set_fence_mode, set_tcp_offset) return its error bit (0x40, code 1) unfiltered,
    while the SDK's own _check_code treats 1 as success for non-motion commands. A standing error is
    reported by fault() and cleared by recover(); it must not make the settings, or connect, fail.
    """
    if _code_of(code) == _CODE_UNCLEARED_ERROR:
        return
    _check(code, what)


class GripperFaultError(GripperError):
    """The gripper reports its own error code (G<code>); recover() clears it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


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
    """The xArm Gripper: 0 (closed) .. 850 pulses for 0 .. 85 mm; speed in r/min (its own register)."""

    PULSES_PER_M = 10000.0

    def __init__(self, api: Any, max_width_m: float, timeout_s: float, speed_rpm: int) -> None:
        super().__init__(api, max_width_m, timeout_s)
        self.speed_rpm = speed_rpm

    def prepare(self) -> None:
        self._check(self.api.set_gripper_mode(0), "set_gripper_mode")
        self._check(self.api.set_gripper_enable(True), "set_gripper_enable")
        self._check(self.api.set_gripper_speed(self.speed_rpm), "set_gripper_speed")

    def move(self, width_m: float, speed_m_s: float, force_n: float | None) -> None:
        del speed_m_s, force_n  # speed is the r/min register set in prepare(); no force setting (it stalls)
        code = self.api.set_gripper_position(round(width_m * self.PULSES_PER_M), wait=True, timeout=self.timeout_s)
        self._check(code, "set_gripper_position")

    def width_m(self) -> float:
        reply = self.api.get_gripper_position()
        # On a gripper fault the SDK returns the bare code END_EFFECTOR_HAS_FAULT, not (code, pulses).
        if not isinstance(reply, (list, tuple)):
            self._check(reply, "get_gripper_position")
            raise ArmError(f"xArm get_gripper_position returned {reply!r}")
        code, pulses = reply
        self._check(code, "get_gripper_position")
        if pulses is None:
            raise ArmError("xArm get_gripper_position returned no position")
        return float(pulses) / self.PULSES_PER_M

    def _check(self, code: int | list[int] | tuple[int, ...], what: str) -> None:
        if _code_of(code) == _CODE_END_EFFECTOR_FAULT:
            _, error = self.api.get_gripper_err_code()
            raise GripperFaultError(int(error), f"xArm Gripper fault G{error} during {what}")
        _check(code, what)


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

    config_class = XArmConfig
    config: XArmConfig

    def __init__(self, config: XArmConfig) -> None:
        super().__init__(config)
        self._api: Any = None
        self._gripper: _XArmGripper | None = None
        self._state_lock = threading.Lock()
        self._latest: JointState | None = None
        self._needs_rearm = True
        self._gripper_fault: ArmFault | None = None
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
        if self.config.gripper == "xarm_gripper":
            self._gripper = _XArmGripperClassic(
                api, self.description.gripper_max_width_m, self.config.gripper_timeout_s, self.config.gripper_speed_rpm
            )
        elif self.config.gripper != "none":
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
        """Mirror our safety settings and tool in the controller, so it refuses what we would refuse.

        Works while the controller holds an error (the replies then carry the error bit, see
        :func:`_check_setting`), so connect() succeeds and recover() can clear it; recover() applies
        the settings again.
        """
        api, safety = self._api, self.config.safety
        _check_setting(api.set_collision_sensitivity(safety.collision_sensitivity), "set_collision_sensitivity")
        _check_setting(
            api.set_self_collision_detection(self.config.self_collision_detection), "set_self_collision_detection"
        )
        # The controller's TCP is the point its reduced-mode boundary and TCP speed apply to: make it
        # robopin's TCP (the description's flange-to-TCP offset; SDK set_tcp_offset takes mm and, with
        # is_radian, rad). Nothing is queued at connect, so there is nothing to wait for.
        T = self.description.T_link_tcp
        roll, pitch, yaw = (float(v) for v in matrix_to_rpy(T[:3, :3]))
        offset = [*(float(v) * 1000.0 for v in T[:3, 3]), roll, pitch, yaw]
        _check_setting(api.set_tcp_offset(offset, is_radian=True, wait=False), "set_tcp_offset")
        if self.config.reduced_mode:
            low = np.array(safety.workspace_min_m) * 1000.0
            high = np.array(safety.workspace_max_m) * 1000.0
            boundary = [high[0], low[0], high[1], low[1], high[2], low[2]]
            _check_setting(api.set_reduced_tcp_boundary([float(v) for v in boundary]), "set_reduced_tcp_boundary")
            _check_setting(
                api.set_reduced_max_tcp_speed(safety.max_tcp_speed_m_s * 1000.0), "set_reduced_max_tcp_speed"
            )
            joint_speed = float(np.max(self.safety.max_velocity_rad_s))
            _check_setting(api.set_reduced_max_joint_speed(joint_speed, is_radian=True), "set_reduced_max_joint_speed")
            _check_setting(api.set_fence_mode(True), "set_fence_mode")
            # Last: the SDK documents that the reduced limits take effect when reduced mode is (re)set.
            _check_setting(api.set_reduced_mode(True), "set_reduced_mode")

    def _set_tcp_load(self) -> None:
        """Tell the controller the payload (collision detection compares currents against the model).

        The SDK sends set_tcp_load as a queued motion command (xarm_is_ready, _check_code with
        is_move_cmd): it needs an enabled, ready arm, so it runs at enable, in position mode.
        """
        load = self.config.tcp_load()
        if load is None:
            return
        mass, center_m = load
        code = self._api.set_tcp_load(mass, [float(v) * 1000.0 for v in center_m], wait=True)
        _check(code, "set_tcp_load")

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
            self._latest = state = JointState(self.joint_names, positions, velocities, None, now)
        self._state_arrived(state)

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
            _check(api.motion_enable(True), "motion_enable")
            _check(api.set_mode(0), "set_mode(0)")
            _check(api.set_state(0), "set_state(0)")
            self._set_tcp_load()
            self._arm_for_streaming()
            if self._gripper is not None:
                try:
                    self._gripper.prepare()
                except GripperFaultError as error:
                    self._gripper_fault = ArmFault("gripper_fault", str(error), error.code, True)
                    raise ArmFaultError(self._gripper_fault) from None
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
        if error:
            return controller_fault(int(error))
        # A gripper fault (its own G code) is not a controller error; it stands until recover().
        return self._gripper_fault

    def _recover(self) -> None:
        api = self._api
        fault = self._read_fault()
        if fault is not None and not fault.recoverable:
            raise ArmFaultError(
                fault, f"xArm fault {fault.name} needs an operator first ({fault.message}); then call recover()"
            )
        _check_setting(api.clean_error(), "clean_error")
        api.clean_warn()
        if self._gripper is not None and self.config.gripper in ("xarm_gripper", "g2"):
            api.clean_gripper_error()
        self._gripper_fault = None
        # Settings sent while the error stood are sent again now that the controller is clear.
        self._configure_controller_safety()
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
        # State 4 (stop), not 6 (deceleration stop): both are in the SDK's set_state documentation, but
        # 4 is the stop every firmware and mode honours and after which the controller waits for
        # set_state(0), so nothing streamed late can move the arm again. In servo mode the last
        # target is at most one stream period ahead, so the arm is already near rest.
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
            final = gripper.width_m()
        except GripperFaultError as error:
            self._gripper_fault = ArmFault("gripper_fault", str(error), error.code, True)
            raise
        except ArmError as error:
            raise GripperError(str(error)) from None
        tolerance = 0.002
        reached = abs(final - width_m) <= tolerance
        stalled = not reached and force_n is not None and final > width_m
        return GripperResult(final, math.nan, stalled, reached)

    def _read_gripper(self) -> GripperState:
        gripper = self._require_gripper()
        try:
            width = gripper.width_m()
        except GripperFaultError as error:
            self._gripper_fault = ArmFault("gripper_fault", str(error), error.code, True)
            raise
        except ArmError as error:
            raise GripperError(str(error)) from None
        # Without force feedback the grasp flag means: not fully closed after a close command.
        return GripperState(width, False, gripper.max_width_m)
