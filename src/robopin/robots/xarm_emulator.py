"""A loopback emulator of the UFACTORY xArm controller protocol, for tests, benchmarks and dry runs.

It speaks enough of the private Modbus-TCP protocol on port 502 and the real-time report stream on
port 30003 for the unmodified ``xarm-python-sdk`` to connect, enable, switch modes, stream
``set_servo_angle_j``, drive the xArm Gripper over the tool RS-485 bridge and see injected controller
errors. Ports are fixed by the SDK, so it binds another loopback address (127.0.0.2 by default; any
127.x address works on Linux). Joints follow servo targets with a velocity-limited lag like the real
controller; every command is recorded with its arrival time so tests can prove what was (not) sent.
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
REG_GET_TCP_POSE = 41
REG_GET_JOINT_POS = 42
REG_RS485_RTU = 124
REG_TGPIO_W16B = 127
REG_TGPIO_R16B = 128
TOOL_BAUDRATE_ADDRESS = 0x0A0B & 0x0FFF
TOOL_BAUDRATE_INDEX_2M = 11  # index of 2 000 000 baud (the grippers' default) in the SDK's BAUDRATES
MOTION_REGISTERS = frozenset(
    {REG_MOVE_LINE, 22, REG_MOVE_JOINT, 24, 25, 27, 28, REG_MOVE_SERVOJ, 30, 81, 82, 83, 92, 93}
)

# Reply status bits.
STATUS_ERROR = 0x40
STATUS_WARNING = 0x20
STATUS_NOT_READY = 0x10

# Controller states: 1 moving, 2 ready (idle), 3 paused, 4 stopped, 5 not enabled.
STATE_MOVING, STATE_READY, STATE_PAUSED, STATE_STOPPED = 1, 2, 3, 4

# xArm Gripper registers on its Modbus (slave 8); positions in pulses 0 (closed) .. 850 (open).
GRIPPER_SLAVE = 8
GRIPPER_REG_ENABLE = 0x0100
GRIPPER_REG_MODE = 0x0101
GRIPPER_REG_TARGET = 0x0700
GRIPPER_REG_SPEED = 0x0303
GRIPPER_REG_POSITION = 0x0702
GRIPPER_REG_ERROR = 0x000F
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
    joint_speed_limit_rad_s: float = math.pi
    servo_lag_s: float = 0.0  # extra latency before a servo target takes effect
    gripper_speed_pulses_s: float = 1500.0
    gripper_object_width_pulses: float | None = None  # an object between the fingers stops them here
    silent: bool = False
    initial_joints_rad: list[float] = field(default_factory=lambda: [0.0, -0.5, -1.0, 0.0, 1.5, 0.0])
    version: str = "6,6,XI1300000000,AC1300000000,v2.5.0"


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
        self.state = 5
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
            self.error_code = code
            self.state = STATE_STOPPED
            self.target = self.joints.copy()
            self._pending_targets.clear()

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
        if not self.enabled or self.state in (STATE_STOPPED, 5):
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
                self.state = STATE_STOPPED if self.enabled else 5
            elif register == REG_SET_STATE:
                requested = payload[0]
                if requested == 0:
                    if not self.error_code and self.enabled:
                        self.state = STATE_READY
                elif requested in (STATE_PAUSED, STATE_STOPPED):
                    self.state = requested
                    self.target = self.joints.copy()
                    self._pending_targets.clear()
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
                self.mode = payload[0]
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

    def _motion(self, register: int, payload: bytes, now: float) -> tuple[int, bytes]:
        status = self._status()
        if self.error_code or not self.enabled or self.state in (STATE_STOPPED, STATE_PAUSED, 5):
            return status, b""
        if register in (REG_MOVE_SERVOJ, REG_MOVE_JOINT) and len(payload) >= 28:
            target = np.array(struct.unpack("<7f", payload[:28]), dtype=np.float64)
            if register == REG_MOVE_SERVOJ and self.mode != 1:
                return status, b""
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
            elif address == GRIPPER_REG_TARGET and count == 2:
                pulses = struct.unpack(">i", values[:4])[0]
                self.gripper_target = float(min(max(pulses, 0), GRIPPER_MAX_PULSES))
            elif address == GRIPPER_REG_ERROR:
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
                if self.gripper_enabled:
                    g_limit = self.settings.gripper_speed_pulses_s * dt
                    self.gripper_position += float(np.clip(gripper_goal - self.gripper_position, -g_limit, g_limit))
