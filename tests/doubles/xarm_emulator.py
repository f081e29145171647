"""A loopback emulator of the UFACTORY xArm controller protocol, for tests, benchmarks and dry runs.

It speaks enough of the private Modbus-TCP protocol on port 502 and the real-time report stream on
port 30003 for the unmodified ``xarm-python-sdk`` to connect, enable, switch modes, stream
``set_servo_angle_j``, drive the xArm Gripper over the tool RS-485 bridge and see injected controller
errors. Ports are fixed by the SDK, so it binds another loopback address (127.0.0.2 by default; any
127.x address works on Linux). Joints follow servo targets with a velocity-limited lag like the real
controller; every command is recorded with its arrival time so tests can prove what was (not) sent.

It enforces the controller rules robopin depends on, with the SDK's codes (xarm/core/config/x_code.py):
a standing error sets the error bit (0x40) in every reply and refuses motion until clean_error and
set_state(0); servo targets outside the joint limits fault C23, steps faster than the joint speed
limit C24, TCP steps faster than the linear limit C60, and with reduced and fence mode on a TCP
outside the reduced boundary C35 (the TCP is the flange plus the TCP offset register); reduced mode
swaps in the reduced joint range and speeds once set_reduced_mode(True) is sent; set_mode takes
effect at the next set_state(0); the gripper moves at its speed register (r/min).
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import numpy as np

logger = logging.getLogger(__name__)

CONTROL_PORT = 502
REPORT_REAL_PORT = 30003

# Registers (the SDK's UxbusReg numbers).
REG_GET_VERSION = 1
REG_GET_ROBOT_SN = 2
REG_MOTION_EN = 11
REG_SET_STATE = 12
REG_GET_STATE = 13
REG_GET_CMDNUM = 14
REG_GET_ERROR = 15
REG_CLEAN_ERR = 16
REG_CLEAN_WARN = 17
REG_SET_MODE = 19
REG_MOVE_LINE = 21
REG_MOVE_JOINT = 23
REG_MOVE_SERVOJ = 29
REG_SET_TCP_OFFSET = 35
REG_SET_LOAD_PARAM = 36
REG_SET_COLLIS_SENS = 37
REG_SET_REDUCED_TRSV = 47  # reduced max TCP speed, mm/s
REG_SET_REDUCED_P2PV = 48  # reduced max joint speed, rad/s
REG_SET_REDUCED_MODE = 50
REG_SET_LIMIT_XYZ = 52  # reduced TCP boundary, mm: x_max, x_min, y_max, y_min, z_max, z_min
REG_SET_REDUCED_JRANGE = 58
REG_SET_FENSE_ON = 59
REG_GET_TCP_POSE = 41
REG_GET_JOINT_POS = 42
REG_RS485_RTU = 124
REG_TGPIO_W16B = 127
REG_TGPIO_R16B = 128
TOOL_BAUDRATE_ADDRESS = 0x0A0B & 0x0FFF
TOOL_BAUDRATE_INDEX_2M = 11  # index of 2 000 000 baud (the grippers' default) in the SDK's BAUDRATES
_SETTING_REGISTERS = frozenset(
    {
        REG_SET_TCP_OFFSET,
        REG_SET_LOAD_PARAM,
        REG_SET_COLLIS_SENS,
        REG_SET_REDUCED_TRSV,
        REG_SET_REDUCED_P2PV,
        REG_SET_REDUCED_MODE,
        REG_SET_LIMIT_XYZ,
        REG_SET_REDUCED_JRANGE,
        REG_SET_FENSE_ON,
    }
)
MOTION_REGISTERS = frozenset(
    {REG_MOVE_LINE, 22, REG_MOVE_JOINT, 24, 25, 27, 28, REG_MOVE_SERVOJ, 30, 81, 82, 83, 92, 93}
)

# Reply status bits.
STATUS_ERROR = 0x40
STATUS_WARNING = 0x20
STATUS_NOT_READY = 0x10

# Controller states: 1 moving, 2 ready (idle), 3 paused, 4 stopped, 5 not enabled, 6 decelerating to a stop.
STATE_MOVING, STATE_READY, STATE_PAUSED, STATE_STOPPED, STATE_NOT_ENABLED, STATE_DECELERATING = 1, 2, 3, 4, 5, 6

# Controller error codes the emulator raises (the SDK's ControllerErrorCodeMap).
ERROR_JOINT_LIMIT = 23  # Joints Angle Exceed Limit
ERROR_SPEED_LIMIT = 24  # Speed Exceeds Limit
ERROR_SAFETY_BOUNDARY = 35  # Safety Boundary Limit
ERROR_SERVO_LINEAR_SPEED = 60  # Linear speed exceeded limit in servo_j mode

# xArm Gripper registers on its Modbus (slave 8); positions in pulses 0 (closed) .. 850 (open).
GRIPPER_SLAVE = 8
GRIPPER_REG_ENABLE = 0x0100
GRIPPER_REG_MODE = 0x0101
GRIPPER_REG_TARGET = 0x0700
GRIPPER_REG_SPEED = 0x0303
GRIPPER_REG_POSITION = 0x0702
GRIPPER_REG_ERROR = 0x000F
GRIPPER_REG_RESET_ERROR = 0x0109
GRIPPER_REG_STATUS = 0x0000
GRIPPER_MAX_PULSES = 850


@dataclass
class ReceivedCommand:
    """One request as the emulator received it."""

    register: int
    payload: bytes
    time_s: float  # time.monotonic() at arrival


@dataclass
class EmulatorSettings:
    """Behaviour knobs; ``silent`` accepts TCP connections but never answers (a hung controller)."""

    host: str = "127.0.0.2"
    dof: int = 6
    report_rate_hz: float = 200.0
    joint_speed_limit_rad_s: float = math.pi  # xArm 6: 180 deg/s per joint
    tcp_speed_limit_mm_s: float = 1000.0  # xArm 6: 1 m/s TCP speed
    # The controller judges each servo target against the previous one as one step of this period (our
    # 100 Hz default stream, xarm_ros2 streams at 150 Hz): a step farther than the speed limits allow
    # in it faults. Real firmware's exact rule is not public; this is the emulator's reading.
    servo_period_s: float = 0.01
    servo_lag_s: float = 0.0  # extra latency before a servo target takes effect
    # Finger speed per r/min of the speed register (2000 r/min, xarm_ros2's default, gives 1500 pulses/s,
    # 85 mm in under 0.6 s). The r/min-to-pulses ratio is the emulator's assumption.
    gripper_pulses_s_per_rpm: float = 0.75
    gripper_initial_speed_rpm: int = 1500
    gripper_object_width_pulses: float | None = None  # an object between the fingers stops them here
    silent: bool = False
    initial_joints_rad: list[float] = field(default_factory=lambda: [0.0, -0.5, -1.0, 0.0, 1.5, 0.0])
    version: str = "6,6,XI1300000000,AC1300000000,v2.5.0"
    flange_description: str = "xarm6_bare"  # forward kinematics to the flange (robopin's description)


class XArmControllerEmulator:
    """Runs the emulated controller on background threads; use as a context manager."""

    def __init__(self, settings: EmulatorSettings | None = None) -> None:
        self.settings = settings or EmulatorSettings()
        s = self.settings
        self._lock = threading.RLock()
        self.joints = np.zeros(7)
        self.joints[: s.dof] = s.initial_joints_rad[: s.dof]
        self.target = self.joints.copy()
        self.velocities = np.zeros(7)
        self.mode = 0
        self.requested_mode = 0  # set_mode takes effect at the next set_state(0)
        self.state = STATE_NOT_ENABLED
        self.enabled = False
        self.error_code = 0
        self.warn_code = 0
        self.cmdnum = 0  # motion commands queued and not yet executed (the SDK blocks at 1024)
        self.settings_received: dict[int, bytes] = {}
        self.commands: list[ReceivedCommand] = []
        self.gripper_enabled = False
        self.gripper_position = float(GRIPPER_MAX_PULSES)
        self.gripper_target = float(GRIPPER_MAX_PULSES)
        self.gripper_error = 0
        self.gripper_speed_rpm = s.gripper_initial_speed_rpm
        self.gripper_velocity_pulses_s = 0.0
        # Safety registers, as the controller holds them (mm, rad).
        self.collision_sensitivity = 3
        self.tcp_offset = np.zeros(6)  # x, y, z (mm), roll, pitch, yaw (rad) of the TCP in the flange frame
        self.tcp_load = np.zeros(4)  # kg, centre of gravity x, y, z (mm)
        self.reduced_mode = False
        self.fence_mode = False
        self.reduced_tcp_speed_mm_s = s.tcp_speed_limit_mm_s
        self.reduced_joint_speed_rad_s = s.joint_speed_limit_rad_s
        self.reduced_boundary_mm: np.ndarray | None = None  # x_max, x_min, y_max, y_min, z_max, z_min
        self.reduced_joint_range: np.ndarray | None = None  # (lower, upper) per joint, rad
        self._last_servo_target: np.ndarray | None = None
        self.tool_registers: dict[int, int] = {TOOL_BAUDRATE_ADDRESS: TOOL_BAUDRATE_INDEX_2M}
        self._pending_targets: list[tuple[float, np.ndarray]] = []
        self._servers: list[socket.socket] = []
        self._clients: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._running = threading.Event()
        self.reports_paused = False  # True: the report stream goes quiet (a stalled controller)
        self.first_motion_s: float | None = None  # when the joints first moved after reset_motion_clock
        self.stopped_s: float | None = None  # when the joints last came to rest
        self._motion_reference = self.joints.copy()

    # ----- lifecycle --------------------------------------------------------------------------------

    def start(self) -> XArmControllerEmulator:
        # The controller boots with its kinematics and limit tables loaded. Loading them at the first
        # servo command instead (about 0.1 s idle, several times that on a loaded machine) held the
        # command lock long enough to stall the report stream past the driver's 0.25 s state watchdog.
        self._flange_kinematics()
        self._joint_limits()
        self._running.set()
        for port, handler in ((CONTROL_PORT, self._serve_control), (REPORT_REAL_PORT, self._serve_report)):
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((self.settings.host, port))
            server.listen(4)
            server.settimeout(0.1)
            self._servers.append(server)
            self._spawn(self._accept_loop, server, handler)
        self._spawn(self._physics_loop)
        return self

    def stop(self) -> None:
        self._running.clear()
        for sock in self._servers + self._clients:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._servers.clear()
        self._clients.clear()
        self._threads.clear()

    def __enter__(self) -> XArmControllerEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name=f"xarm-emulator-{target.__name__}")
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self, server: socket.socket, handler) -> None:
        while self._running.is_set():
            try:
                client, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._clients.append(client)
            self._spawn(handler, client)

    # ----- test controls ----------------------------------------------------------------------------

    def inject_error(self, code: int) -> None:
        """Raise a controller error (e.g. 22 self-collision, 31 collision): the arm stops at once."""
        with self._lock:
            self._fault(code)

    def inject_gripper_error(self, code: int) -> None:
        """Raise an xArm Gripper error (its own G code): the fingers stop where they are."""
        with self._lock:
            self.gripper_error = code
            self.gripper_target = self.gripper_position

    def _fault(self, code: int) -> None:
        self.error_code = code
        self.state = STATE_STOPPED
        self.target = self.joints.copy()
        self._pending_targets.clear()
        self._last_servo_target = None
        logger.info("xArm emulator: controller error C%d", code)

    def motion_commands(self, since_s: float = 0.0) -> list[ReceivedCommand]:
        """Motion requests received at or after ``since_s`` (monotonic)."""
        with self._lock:
            return [c for c in self.commands if c.register in MOTION_REGISTERS and c.time_s >= since_s]

    def state_requests(self, since_s: float = 0.0) -> list[int]:
        """States requested with set_state since ``since_s`` (4 = stop)."""
        with self._lock:
            return [c.payload[0] for c in self.commands if c.register == REG_SET_STATE and c.time_s >= since_s]

    def servo_times(self, since_s: float = 0.0) -> np.ndarray:
        """Arrival times of servo-j commands since ``since_s``."""
        with self._lock:
            return np.array([c.time_s for c in self.commands if c.register == REG_MOVE_SERVOJ and c.time_s >= since_s])

    def reset_motion_clock(self) -> None:
        """Forget when motion started/stopped, for the next latency measurement."""
        with self._lock:
            self.first_motion_s = None
            self.stopped_s = None
            self._motion_reference = self.joints.copy()

    # ----- protocol -----------------------------------------------------------------------------------

    def _serve_control(self, client: socket.socket) -> None:
        buffer = b""
        client.settimeout(0.1)
        while self._running.is_set():
            try:
                data = client.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            if self.settings.silent:
                continue
            buffer += data
            while len(buffer) >= 6:
                transaction, protocol, length = struct.unpack(">HHH", buffer[:6])
                if len(buffer) < 6 + length:
                    break
                body, buffer = buffer[6 : 6 + length], buffer[6 + length :]
                if protocol not in (2, 3) or not body:
                    continue  # heartbeat or standard Modbus: nothing to answer
                register, payload = body[0], body[1:]
                status, reply = self._handle(register, payload)
                frame = struct.pack(">HHHBB", transaction, protocol, len(reply) + 2, register, status) + reply
                try:
                    client.sendall(frame)
                except OSError:
                    return

    def _status(self) -> int:
        status = 0
        if self.error_code:
            status |= STATUS_ERROR
        if self.warn_code:
            status |= STATUS_WARNING
        if not self.enabled or self.state in (STATE_STOPPED, STATE_NOT_ENABLED):
            status |= STATUS_NOT_READY
        return status

    def _handle(self, register: int, payload: bytes) -> tuple[int, bytes]:
        now = time.monotonic()
        with self._lock:
            self.commands.append(ReceivedCommand(register, bytes(payload), now))
            if register == REG_GET_VERSION:
                return self._status(), self.settings.version.encode().ljust(40, b"\0")
            if register == REG_GET_ROBOT_SN:
                return self._status(), self.settings.version.split(",")[2].encode().ljust(40, b"\0")
            if register == REG_MOTION_EN:
                self.enabled = bool(payload[1]) if len(payload) > 1 else True
                self.state = STATE_STOPPED if self.enabled else STATE_NOT_ENABLED
            elif register == REG_SET_STATE:
                requested = payload[0]
                if requested == 0:
                    if not self.error_code and self.enabled:
                        self.state = STATE_READY
                        self.mode = self.requested_mode
                        self._last_servo_target = None
                elif requested in (STATE_PAUSED, STATE_STOPPED, STATE_DECELERATING):
                    self.state = STATE_STOPPED if requested == STATE_DECELERATING else requested
                    self.target = self.joints.copy()
                    self._pending_targets.clear()
                    self._last_servo_target = None
            elif register == REG_GET_STATE:
                return self._status(), bytes([self.state])
            elif register == REG_GET_CMDNUM:
                return self._status(), struct.pack(">H", self.cmdnum)
            elif register == REG_GET_ERROR:
                return self._status(), bytes([self.error_code, self.warn_code])
            elif register == REG_CLEAN_ERR:
                self.error_code = 0
            elif register == REG_CLEAN_WARN:
                self.warn_code = 0
            elif register == REG_SET_MODE:
                self.requested_mode = payload[0]
            elif register in _SETTING_REGISTERS:
                self.settings_received[register] = bytes(payload)
                self._apply_setting(register, payload)
            elif register == REG_GET_JOINT_POS:
                return self._status(), struct.pack("<7f", *self.joints)
            elif register == REG_GET_TCP_POSE:
                return self._status(), struct.pack("<6f", *([0.0] * 6))
            elif register == REG_TGPIO_R16B:
                address = struct.unpack(">H", payload[1:3])[0]
                return self._status(), struct.pack(">i", self.tool_registers.get(address, 0))
            elif register == REG_TGPIO_W16B:
                address = struct.unpack(">H", payload[1:3])[0]
                self.tool_registers[address & 0x0FFF] = struct.unpack(">H", payload[3:5])[0]
            elif register == REG_RS485_RTU:
                return self._status(), self._gripper_modbus(payload)
            elif register in MOTION_REGISTERS:
                return self._motion(register, payload, now)
            else:
                self.settings_received[register] = bytes(payload)
            return self._status(), b""

    def _apply_setting(self, register: int, payload: bytes) -> None:
        """Store a safety register as the controller does (applied even while an error stands)."""
        if register == REG_SET_COLLIS_SENS:
            self.collision_sensitivity = payload[0]
        elif register == REG_SET_TCP_OFFSET:
            self.tcp_offset = np.array(struct.unpack("<6f", payload[:24]), dtype=np.float64)
        elif register == REG_SET_LOAD_PARAM:
            self.tcp_load = np.array(struct.unpack("<4f", payload[:16]), dtype=np.float64)
        elif register == REG_SET_REDUCED_MODE:
            self.reduced_mode = bool(payload[0])
        elif register == REG_SET_FENSE_ON:
            self.fence_mode = bool(payload[0])
        elif register == REG_SET_REDUCED_TRSV:
            self.reduced_tcp_speed_mm_s = struct.unpack("<f", payload[:4])[0]
        elif register == REG_SET_REDUCED_P2PV:
            self.reduced_joint_speed_rad_s = struct.unpack("<f", payload[:4])[0]
        elif register == REG_SET_LIMIT_XYZ:
            self.reduced_boundary_mm = np.array(struct.unpack("<6i", payload[:24]), dtype=np.float64)
        elif register == REG_SET_REDUCED_JRANGE:
            self.reduced_joint_range = np.array(struct.unpack("<14f", payload[:56]), dtype=np.float64).reshape(7, 2)

    def _flange_kinematics(self):
        from robopin.robots.description import load_description

        return load_description(self.settings.flange_description)

    def tcp_position_mm(self, joints: np.ndarray) -> np.ndarray:
        """Where the controller puts its TCP for ``joints``: flange forward kinematics plus the TCP offset."""
        from robopin.geometry.transforms import make_transform, rpy_to_matrix

        T = self._flange_kinematics().forward_kinematics(np.asarray(joints[: self.settings.dof], dtype=np.float64))
        offset = make_transform(rpy_to_matrix(*self.tcp_offset[3:]), self.tcp_offset[:3] / 1000.0)
        return (T @ offset)[:3, 3] * 1000.0

    def _joint_limits(self) -> np.ndarray:
        """(lower, upper) rad per joint: the SDK's table for this model, narrowed by the reduced range."""
        from xarm.core.config.x_config import XCONF

        dof = self.settings.dof
        device_type = int(self.settings.version.split(",")[1])
        limits = np.array(XCONF.Robot.JOINT_LIMITS[dof][device_type], dtype=np.float64)
        if self.reduced_mode and self.reduced_joint_range is not None and np.any(self.reduced_joint_range[:dof]):
            reduced = self.reduced_joint_range[:dof]
            limits = np.stack([np.maximum(limits[:, 0], reduced[:, 0]), np.minimum(limits[:, 1], reduced[:, 1])], 1)
        return limits

    def _servo_violation(self, target: np.ndarray) -> int:
        """The controller error a servo target causes, or 0."""
        s, dof = self.settings, self.settings.dof
        q = target[:dof]
        limits = self._joint_limits()
        slack = math.radians(0.1)  # the SDK's own pre-check allows 0.1 deg
        if np.any(q < limits[:, 0] - slack) or np.any(q > limits[:, 1] + slack):
            return ERROR_JOINT_LIMIT
        previous = (self.joints if self._last_servo_target is None else self._last_servo_target)[:dof]
        joint_limit = min(s.joint_speed_limit_rad_s, self.reduced_joint_speed_rad_s if self.reduced_mode else math.inf)
        if float(np.max(np.abs(q - previous))) > joint_limit * s.servo_period_s * (1.0 + 1e-3) + 1e-6:
            return ERROR_SPEED_LIMIT
        tcp = self.tcp_position_mm(q)
        tcp_limit = min(s.tcp_speed_limit_mm_s, self.reduced_tcp_speed_mm_s if self.reduced_mode else math.inf)
        step_mm = float(np.linalg.norm(tcp - self.tcp_position_mm(previous)))
        if step_mm > tcp_limit * s.servo_period_s * (1.0 + 1e-3) + 1e-3:
            return ERROR_SERVO_LINEAR_SPEED
        if self.reduced_mode and self.fence_mode and self.reduced_boundary_mm is not None:
            x_max, x_min, y_max, y_min, z_max, z_min = self.reduced_boundary_mm
            if not (x_min <= tcp[0] <= x_max and y_min <= tcp[1] <= y_max and z_min <= tcp[2] <= z_max):
                return ERROR_SAFETY_BOUNDARY
        return 0

    def _motion(self, register: int, payload: bytes, now: float) -> tuple[int, bytes]:
        status = self._status()
        if self.error_code or not self.enabled or self.state in (STATE_STOPPED, STATE_PAUSED, STATE_NOT_ENABLED):
            return status, b""
        if register in (REG_MOVE_SERVOJ, REG_MOVE_JOINT) and len(payload) >= 28:
            target = np.array(struct.unpack("<7f", payload[:28]), dtype=np.float64)
            if register == REG_MOVE_SERVOJ:
                if self.mode != 1:
                    return status, b""
                violation = self._servo_violation(target)
                if violation:
                    self._fault(violation)
                    return self._status(), b""
                self._last_servo_target = target
            self._pending_targets.append((now + self.settings.servo_lag_s, target))
            self.cmdnum = len(self._pending_targets)
            self.state = STATE_MOVING
        return status, b""

    def _gripper_modbus(self, payload: bytes) -> bytes:
        host, rtu = payload[0], payload[1:]
        if len(rtu) < 6 or rtu[0] != GRIPPER_SLAVE:
            return bytes([host]) + rtu[:2]
        function = rtu[1]
        address, count = struct.unpack(">HH", rtu[2:6])
        if function == 0x10:
            values = rtu[7 : 7 + 2 * count]
            if address == GRIPPER_REG_ENABLE:
                self.gripper_enabled = bool(struct.unpack(">H", values[:2])[0])
            elif address == GRIPPER_REG_TARGET and count == 2 and not self.gripper_error:
                pulses = struct.unpack(">i", values[:4])[0]
                self.gripper_target = float(min(max(pulses, 0), GRIPPER_MAX_PULSES))
            elif address == GRIPPER_REG_SPEED:
                self.gripper_speed_rpm = struct.unpack(">H", values[:2])[0]
            elif address == GRIPPER_REG_RESET_ERROR:
                self.gripper_error = 0
            return bytes([host]) + rtu[:6]
        if function == 0x03:
            if address == GRIPPER_REG_POSITION:
                data = struct.pack(">i", round(self.gripper_position))
            elif address == GRIPPER_REG_ERROR:
                data = struct.pack(">H", self.gripper_error)
            elif address == GRIPPER_REG_STATUS:
                moving = abs(self.gripper_position - self.gripper_target) > 0.5
                data = struct.pack(">H", 1 if moving else 0)
            else:
                data = bytes(2 * count)
            return bytes([host, GRIPPER_SLAVE, 0x03, len(data)]) + data
        return bytes([host]) + rtu[:2]

    def _serve_report(self, client: socket.socket) -> None:
        period = 1.0 / self.settings.report_rate_hz
        next_time = time.monotonic()
        while self._running.is_set():
            if not (self.settings.silent or self.reports_paused):
                with self._lock:
                    frame = struct.pack(
                        ">IBH", 87, (self.state & 0x0F) | (self.mode << 4), self.cmdnum & 0xFFFF
                    ) + struct.pack("<7f6f7f", *self.joints, *([0.0] * 6), *([0.0] * 7))
                try:
                    client.sendall(frame)
                except OSError:
                    return
            next_time += period
            time.sleep(max(0.0, next_time - time.monotonic()))

    # ----- physics ------------------------------------------------------------------------------------

    def _physics_loop(self) -> None:
        step = 0.001
        last = time.monotonic()
        while self._running.is_set():
            time.sleep(step)
            now = time.monotonic()
            dt, last = now - last, now
            with self._lock:
                while self._pending_targets and self._pending_targets[0][0] <= now:
                    self.target = self._pending_targets.pop(0)[1]
                self.cmdnum = len(self._pending_targets)
                delta = self.target - self.joints
                limit = self.settings.joint_speed_limit_rad_s * dt
                move = np.clip(delta, -limit, limit)
                self.joints = self.joints + move
                self.velocities = move / dt if dt > 0 else np.zeros(7)
                moving = bool(np.any(np.abs(move) > 1e-7))
                if (
                    moving
                    and self.first_motion_s is None
                    and np.any(np.abs(self.joints - self._motion_reference) > 1e-5)
                ):
                    self.first_motion_s = now
                if moving:
                    self.stopped_s = None
                elif self.stopped_s is None:
                    self.stopped_s = now
                if self.state == STATE_MOVING and not moving and not self._pending_targets:
                    self.state = STATE_READY
                gripper_goal = self.gripper_target
                if self.settings.gripper_object_width_pulses is not None:
                    gripper_goal = max(gripper_goal, self.settings.gripper_object_width_pulses)
                if self.gripper_enabled and not self.gripper_error:
                    g_limit = self.gripper_speed_rpm * self.settings.gripper_pulses_s_per_rpm * dt
                    finger_step = float(np.clip(gripper_goal - self.gripper_position, -g_limit, g_limit))
                    self.gripper_position += finger_step
                    self.gripper_velocity_pulses_s = abs(finger_step) / dt if dt > 0 else 0.0
