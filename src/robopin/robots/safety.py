"""The safety layer every arm backend goes through.

:class:`SafetyChecker` validates a whole trajectory before anything is sent to the arm (joint
position, velocity and acceleration limits, jumps between waypoints, the TCP inside the workspace box
along the whole path via forward kinematics, TCP speed, duration, fresh state) and applies the speed
scaling. :class:`Watchdog` stops a running motion when commands or state go stale. Every refusal is a
:class:`~robopin.robots.errors.SafetyViolationError` with a named reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from robopin.robots.description import RobotDescription
from robopin.robots.errors import ArmConfigError, Reason, SafetyViolationError
from robopin.robots.state import JointState
from robopin.robots.trajectory import JointTrajectory
from robopin.settings import check_fields, positive

logger = logging.getLogger(__name__)

# Floating-point slack on limit comparisons so a trajectory planned exactly at a limit passes.
_LIMIT_SLACK = 1e-6


def _triple(values: Sequence[float], name: str) -> tuple[float, float, float]:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (3,) or not np.all(np.isfinite(array)):
        raise ArmConfigError(f"{name} must be three finite numbers (x, y, z in m), got {values!r}")
    return (float(array[0]), float(array[1]), float(array[2]))


@dataclass(kw_only=True)
class SafetyConfig:
    """What the operator allows. Lengths in m (base frame), angles in rad, times in s."""

    workspace_min_m: tuple[float, float, float] = (-0.9, -0.9, 0.0)
    workspace_max_m: tuple[float, float, float] = (0.9, 0.9, 1.2)
    speed_scale: float = 1.0  # every trajectory is slowed by this factor (0 < s <= 1)
    velocity_fraction: float = 1.0  # of the description's joint velocity limits
    acceleration_fraction: float = 1.0  # of the description's joint acceleration limits
    position_margin_rad: float = 0.005  # kept away from each joint's position limits
    max_joint_jump_rad: float = 0.5  # between consecutive waypoints
    start_tolerance_rad: float = 0.05  # first waypoint (at t = 0) versus the measured state
    max_tcp_speed_m_s: float = 1.0
    max_duration_s: float = 300.0
    state_max_age_s: float = 0.25  # older joint state is stale: refuse, or stop a running motion
    command_timeout_s: float = 0.5  # a running motion with no command or progress this long is stopped
    fk_check_step_s: float = 0.01  # time step of the dense workspace / TCP speed check
    collision_sensitivity: int = 3  # 0 (off) .. 5, passed to controllers that support it
    extra: dict[str, float] = field(default_factory=dict)  # backend-specific thresholds

    def __post_init__(self) -> None:
        self.workspace_min_m = _triple(self.workspace_min_m, "workspace_min_m")
        self.workspace_max_m = _triple(self.workspace_max_m, "workspace_max_m")
        if not np.all(np.array(self.workspace_min_m) < np.array(self.workspace_max_m)):
            raise ArmConfigError(
                f"workspace_min_m {self.workspace_min_m} must be below workspace_max_m {self.workspace_max_m}"
            )
        check_fields(self, ("speed_scale", "velocity_fraction", "acceleration_fraction"),
                     lambda value: positive(value) and value <= 1.0, ArmConfigError, "in (0, 1]")
        check_fields(self, ("max_joint_jump_rad", "start_tolerance_rad", "max_tcp_speed_m_s", "max_duration_s",
                            "state_max_age_s", "command_timeout_s", "fk_check_step_s"),
                     positive, ArmConfigError, "a finite number > 0")
        if not 0.0 <= self.position_margin_rad < 0.5:
            raise ArmConfigError(f"position_margin_rad must be in [0, 0.5), got {self.position_margin_rad}")
        if self.collision_sensitivity not in range(6):
            raise ArmConfigError(f"collision_sensitivity must be an integer 0..5, got {self.collision_sensitivity}")

    def contains(self, point_m: np.ndarray) -> bool:
        """True when ``point_m`` (base frame) lies inside the workspace box."""
        p = np.asarray(point_m, dtype=np.float64)
        return bool(np.all(p >= self.workspace_min_m) and np.all(p <= self.workspace_max_m))


class SafetyChecker:
    """Validates trajectories against one robot description and one safety configuration."""

    def __init__(self, config: SafetyConfig, description: RobotDescription) -> None:
        self.config = config
        self.description = description

    @property
    def max_velocity_rad_s(self) -> np.ndarray:
        return self.description.velocity_rad_s * self.config.velocity_fraction

    @property
    def max_acceleration_rad_s2(self) -> np.ndarray:
        return self.description.acceleration_rad_s2 * self.config.acceleration_fraction

    def check_state(self, state: JointState, now_s: float | None = None) -> None:
        """Refuse (STALE_STATE) when ``state`` is older than ``state_max_age_s``."""
        age = state.age_s(now_s)
        if age > self.config.state_max_age_s:
            raise SafetyViolationError(
                Reason.STALE_STATE,
                f"joint state is {age:.3f} s old; the limit is {self.config.state_max_age_s:.3f} s",
            )

    def validate(self, trajectory: JointTrajectory, state: JointState) -> JointTrajectory:
        """The trajectory as it will run (arm joint order, starting at t = 0, speed-scaled), or raise.

        Raises :class:`SafetyViolationError` naming the first failed check; nothing is sent to the arm.
        """
        description = self.description
        self.check_state(state)
        try:
            trajectory = trajectory.reordered(description.joint_names)
        except ValueError as error:
            raise SafetyViolationError(Reason.JOINT_NAMES, str(error)) from None
        current = np.asarray(state.positions, dtype=np.float64)
        if trajectory.times_s[0] > 0.0:
            # Like a ROS trajectory controller: the motion starts where the arm is now.
            trajectory = trajectory.with_start(current)
        else:
            offset = np.abs(trajectory.positions[0] - current)
            if np.max(offset) > self.config.start_tolerance_rad:
                j = int(np.argmax(offset))
                raise SafetyViolationError(
                    Reason.START_MISMATCH,
                    f"first waypoint is {offset[j]:.3f} rad from the measured {description.joint_names[j]}; "
                    f"tolerance {self.config.start_tolerance_rad:.3f} rad",
                    waypoint=0,
                    joint=description.joint_names[j],
                )
        trajectory = trajectory.scaled(self.config.speed_scale) if self.config.speed_scale < 1.0 else trajectory
        self._check_positions(trajectory)
        self._check_jumps(trajectory)
        self._check_velocities(trajectory)
        self._check_accelerations(trajectory)
        if trajectory.duration_s > self.config.max_duration_s:
            raise SafetyViolationError(
                Reason.DURATION,
                f"trajectory lasts {trajectory.duration_s:.2f} s; the limit is {self.config.max_duration_s:.2f} s",
            )
        self._check_cartesian(trajectory)
        return trajectory

    def _joint_violation(self, reason: Reason, excess: np.ndarray, text: Callable[[int, int], str]) -> None:
        """Raise for the first (waypoint, joint) where ``excess`` > 0."""
        bad = np.argwhere(excess > _LIMIT_SLACK)
        if bad.size:
            k, j = (int(v) for v in bad[0])
            raise SafetyViolationError(reason, text(k, j), waypoint=k, joint=self.description.joint_names[j])

    def _check_positions(self, trajectory: JointTrajectory) -> None:
        d, margin = self.description, self.config.position_margin_rad
        # Dense samples too: a Hermite segment can overshoot between waypoints.
        times = trajectory.dense_times(self.config.fk_check_step_s)
        q, _ = trajectory.sample(times)
        low, high = d.lower_rad + margin, d.upper_rad - margin
        excess = np.maximum(low - q, q - high)

        def text(k: int, j: int) -> str:
            return (
                f"{d.joint_names[j]} reaches {q[k, j]:.4f} rad at t = {times[k]:.3f} s; allowed "
                f"[{low[j]:.4f}, {high[j]:.4f}] rad"
            )

        bad = np.argwhere(excess > _LIMIT_SLACK)
        if bad.size:
            k, j = (int(v) for v in bad[0])
            raise SafetyViolationError(
                Reason.JOINT_LIMIT,
                text(k, j),
                waypoint=trajectory.segment_index(times[k]),
                joint=d.joint_names[j],
            )

    def _check_jumps(self, trajectory: JointTrajectory) -> None:
        if trajectory.num_waypoints < 2:
            return
        step = np.abs(np.diff(trajectory.positions, axis=0))
        limit = self.config.max_joint_jump_rad
        self._joint_violation(
            Reason.JUMP,
            step - limit,
            lambda k, j: (
                f"{self.description.joint_names[j]} jumps {step[k, j]:.3f} rad between waypoints "
                f"{k} and {k + 1}; the limit is {limit:.3f} rad"
            ),
        )

    def _check_velocities(self, trajectory: JointTrajectory) -> None:
        vmax = self.max_velocity_rad_s
        if trajectory.velocities is None:
            if trajectory.num_waypoints < 2:
                return
            velocity = np.diff(trajectory.positions, axis=0) / np.diff(trajectory.times_s)[:, None]
        else:
            _, dense = trajectory.sample(trajectory.dense_times(self.config.fk_check_step_s))
            velocity = np.vstack([trajectory.velocities, dense])
        speed = np.abs(velocity)
        self._joint_violation(
            Reason.VELOCITY_LIMIT,
            speed - vmax,
            lambda k, j: (
                f"{self.description.joint_names[j]} moves at {speed[k, j]:.3f} rad/s; the limit is {vmax[j]:.3f} rad/s"
            ),
        )

    def _check_accelerations(self, trajectory: JointTrajectory) -> None:
        amax = self.max_acceleration_rad_s2
        if trajectory.num_waypoints < 2:
            return
        if trajectory.velocities is None:
            # Piecewise-linear: velocity changes at each waypoint over half of each adjacent segment,
            # starting from and ending at rest.
            dt = np.diff(trajectory.times_s)
            velocity = np.diff(trajectory.positions, axis=0) / dt[:, None]
            zero = np.zeros((1, trajectory.dof))
            dv = np.diff(np.vstack([zero, velocity, zero]), axis=0)
            span = np.concatenate([[0.0], dt, [0.0]])
            acceleration = dv / ((span[:-1] + span[1:]) / 2.0)[:, None]
        else:
            times = trajectory.dense_times(self.config.fk_check_step_s)
            _, velocity = trajectory.sample(times)
            acceleration = np.diff(velocity, axis=0) / np.diff(times)[:, None]
        magnitude = np.abs(acceleration)
        self._joint_violation(
            Reason.ACCELERATION_LIMIT,
            magnitude - amax,
            lambda k, j: (
                f"{self.description.joint_names[j]} accelerates at {magnitude[k, j]:.2f} rad/s²; "
                f"the limit is {amax[j]:.2f} rad/s²"
            ),
        )

    def _check_cartesian(self, trajectory: JointTrajectory) -> None:
        times = trajectory.dense_times(self.config.fk_check_step_s)
        q, _ = trajectory.sample(times)
        points = self.description.forward_kinematics_batch(q)[:, :3, 3]
        low, high = np.array(self.config.workspace_min_m), np.array(self.config.workspace_max_m)
        outside = np.any((points < low) | (points > high), axis=1)
        if np.any(outside):
            k = int(np.argmax(outside))
            raise SafetyViolationError(
                Reason.WORKSPACE,
                f"TCP at {np.round(points[k], 4).tolist()} m (t = {times[k]:.3f} s) leaves the workspace box "
                f"{list(self.config.workspace_min_m)} .. {list(self.config.workspace_max_m)} m",
                waypoint=trajectory.segment_index(times[k]),
            )
        if times.size > 1:
            tcp_speed = np.linalg.norm(np.diff(points, axis=0), axis=1) / np.diff(times)
            k = int(np.argmax(tcp_speed))
            if tcp_speed[k] > self.config.max_tcp_speed_m_s + _LIMIT_SLACK:
                raise SafetyViolationError(
                    Reason.TCP_SPEED,
                    f"TCP moves at {tcp_speed[k]:.3f} m/s near t = {times[k]:.3f} s; the limit is "
                    f"{self.config.max_tcp_speed_m_s:.3f} m/s",
                    waypoint=trajectory.segment_index(times[k]),
                )


class Watchdog:
    """Stops a running motion when state or commands go stale.

    The backend feeds it (through :class:`~robopin.robots.base.Execution`) with every state it
    measures and every command it sends; a thread checks both ages every ``period_s`` and calls
    ``on_trip(reason, message)`` once when either exceeds its limit. Ages are measured on ``clock``: the
    monotonic clock for a real arm, the simulator's clock for a simulated one (a simulated arm whose physics
    is starved of CPU is not silent, it is slow, and its state is as fresh as its world).
    """

    def __init__(
        self,
        *,
        state_max_age_s: float,
        command_timeout_s: float,
        on_trip: Callable[[Reason, str], None],
        period_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state_max_age_s = state_max_age_s
        self._clock = clock
        self.command_timeout_s = command_timeout_s
        self._on_trip = on_trip
        self._period_s = period_s or max(0.005, min(state_max_age_s, command_timeout_s) / 5.0)
        self._state_stamp_s = clock()
        self._command_stamp_s = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._grace_until_s = 0.0
        self.tripped: Reason | None = None
        self.late_s = 0.0  # how late past its period the watchdog's thread last woke

    def grace(self, seconds: float) -> None:
        """Tolerate silence for up to ``seconds`` from now (an SDK call known to block, e.g. starting a motion)."""
        self._grace_until_s = self._clock() + seconds

    def feed_state(self, stamp_s: float) -> None:
        """Record the measurement time (on the watchdog's clock) of the newest joint state."""
        self._state_stamp_s = max(self._state_stamp_s, stamp_s)
        self._grace_until_s = 0.0

    def feed_command(self) -> None:
        """Record that a command was just sent (or progress made)."""
        self._command_stamp_s = self._clock()

    def start(self, state_stamp_s: float) -> None:
        self._state_stamp_s = state_stamp_s
        self._command_stamp_s = self._clock()
        self._thread = threading.Thread(target=self._run, name="arm-watchdog", daemon=True)
        self._thread.start()

    def disarm(self) -> None:
        """Stop watching without waiting for the thread (a stop is already under way)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self._period_s):
            woke = time.monotonic()
            # How late this thread itself woke: a trip that follows a late wake happened on a starved machine
            # (the message says so; whether the feeder or the arm was the silent one is then in doubt).
            self.late_s = max(0.0, woke - last - self._period_s)
            last = woke
            now = self._clock()
            if now < self._grace_until_s:
                continue
            state_age = now - self._state_stamp_s
            command_age = now - self._command_stamp_s
            if state_age > self.state_max_age_s:
                self._trip(
                    Reason.STALE_STATE,
                    f"no joint state for {state_age:.3f} s (limit {self.state_max_age_s} s){self._lateness()}",
                )
                return
            if command_age > self.command_timeout_s:
                self._trip(
                    Reason.STALE_COMMAND,
                    f"no command for {command_age:.3f} s (limit {self.command_timeout_s} s){self._lateness()}",
                )
                return

    def _lateness(self) -> str:
        return f"; the watchdog itself woke {self.late_s:.3f} s late" if self.late_s > self._period_s else ""

    def _trip(self, reason: Reason, message: str) -> None:
        self.tripped = reason
        logger.warning("watchdog stopping the arm: %s", message)
        self._on_trip(reason, message)
