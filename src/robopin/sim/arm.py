"""The simulated arm backend (arm type ``sim``): the robot of a registered SimWorld.

``SimArm`` attaches to the world named in its config and drives that world's robot through the
same :class:`~robopin.robots.base.Arm` contract as the xArm and Franka backends: validated joint
trajectories executed by the simulated position controllers (sampled at ``command_rate_hz``, like a
streaming driver), joint state and end-effector pose from the physics, a gripper with width and
grasp detection. Works whether the world's physics thread runs (real-time or faster) or not (then
the arm steps the world itself while it moves).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from robopin.robots.base import Arm, ArmConfig, ArmConfigError, ArmConnectionError, Execution
from robopin.robots.errors import ArmFault
from robopin.robots.state import GripperResult, GripperState, JointState
from robopin.robots.trajectory import JointTrajectory
from robopin.sim.world import SimWorld, UnknownNameError, get_world

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class SimArmConfig(ArmConfig):
    """The robot of a simulated world.

    ``world`` names the registered :class:`~robopin.sim.world.SimWorld`; its robot must be the one
    ``robot`` describes. ``command_rate_hz`` is how often progress is reported and the controller
    state is checked (the targets themselves follow the trajectory at every physics step).
    ``settle_s`` is how long the final point is held so the arm converges before success is judged.
    """

    type: ClassVar[str] = "sim"

    world: str = "workcell"
    command_rate_hz: float = 50.0
    settle_s: float = 0.3

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.world:
            raise ArmConfigError(f"world must name a registered simulated world, got {self.world!r}")
        if not (math.isfinite(self.command_rate_hz) and 1.0 <= self.command_rate_hz <= 1000.0):
            raise ArmConfigError(f"command_rate_hz must be in [1, 1000], got {self.command_rate_hz}")
        if not (math.isfinite(self.settle_s) and self.settle_s >= 0.0):
            raise ArmConfigError(f"settle_s must be >= 0 s, got {self.settle_s}")


class SimArm(Arm):
    """Arm backend over a :class:`~robopin.sim.world.SimWorld` (see the module docstring)."""

    config_class = SimArmConfig

    def __init__(self, config: SimArmConfig) -> None:
        super().__init__(config)
        self.config: SimArmConfig = config
        self.world: SimWorld | None = None
        self._fault: ArmFault | None = None
        self._follower_lock = threading.Lock()
        self._follower = None

    # ----- connection ----------------------------------------------------------------------------
    def _connect(self) -> None:
        try:
            world = get_world(self.config.world)
        except UnknownNameError as error:
            raise ArmConnectionError(f"{self}: {error}") from None
        if tuple(world.model.arm_joints) != tuple(self.description.joint_names):
            raise ArmConnectionError(
                f"{self}: world {world.name!r} simulates {world.model.name} with joints {world.model.arm_joints}, "
                f"but the config describes {self.config.robot} with {self.description.joint_names}"
            )
        self.world = world

    def _disconnect(self) -> None:
        self._clear_follower()
        self.world = None

    def _set_enabled(self, enabled: bool) -> None:
        # The simulated motors are always powered; disabling holds the current configuration.
        self._hold()

    # ----- state ---------------------------------------------------------------------------------
    def _require_world(self) -> SimWorld:
        if self.world is None:
            raise ArmConnectionError(f"{self} is not attached to a simulated world")
        return self.world

    def _read_joint_state(self) -> JointState:
        world = self._require_world()
        with world.lock:
            positions = world.joint_positions()
            velocities = world.joint_velocities()
            # With no physics thread (real_time_factor 0) only a running trajectory advances time: between
            # motions the joints stand still for anyone watching, while pybullet keeps the last step's
            # velocities. A bag or a "stopped?" check must not see a moving arm there.
            if not world.running and self._follower is None:
                velocities = np.zeros_like(velocities)
        return JointState(self.description.joint_names, positions, velocities)

    def _read_fault(self) -> ArmFault | None:
        return self._fault

    def inject_fault(self, fault: ArmFault) -> None:
        """Raise a controller fault as the real arm would (e.g. a collision reflex); the arm stops."""
        self._fault = fault
        self._stop_motion()
        self.cancel()

    def _recover(self) -> None:
        self._fault = None

    # ----- motion --------------------------------------------------------------------------------
    def _hold(self) -> None:
        world = self.world
        if world is not None:
            self._clear_follower()
            world.set_arm_targets(world.joint_positions())

    def _clear_follower(self) -> None:
        with self._follower_lock:
            follower, self._follower = self._follower, None
        if follower is not None and self.world is not None:
            self.world.remove_step_callback(follower)

    def _run_trajectory(self, trajectory: JointTrajectory, execution: Execution) -> None:
        world = self._require_world()
        start: list[float] = []

        def follow(sim_time_s: float) -> None:
            if not start:
                start.append(sim_time_s)
            elapsed = sim_time_s - start[0]
            q, qd = trajectory.sample(min(elapsed, trajectory.duration_s))
            world.set_arm_targets(q, qd if elapsed < trajectory.duration_s else None)

        with self._follower_lock:
            self._follower = follow
        world.add_step_callback(follow)
        period = 1.0 / self.config.command_rate_hz
        sim_start = world.sim_time_s
        try:
            while True:
                if execution.should_stop() or self._fault is not None:
                    return
                elapsed = world.sim_time_s - sim_start
                execution.report(min(elapsed, trajectory.duration_s), self._read_joint_state())
                if elapsed >= trajectory.duration_s + self.config.settle_s:
                    return
                world.advance(period, timeout_s=max(5.0, 50 * period))
        finally:
            self._clear_follower()
            world.set_arm_targets(
                trajectory.positions[-1] if execution.stop_reason is None else world.joint_positions()
            )

    def _stop_motion(self) -> None:
        self._hold()

    def _motion_clock(self) -> Callable[[], float]:
        # The simulator's clock: this backend steps the physics in its own command loop (lockstep, as a
        # ros2_control hardware loop under Gazebo runs on /clock), so on a starved CPU the arm moves slower
        # in wall time and its states are exactly as fresh in simulated time. The limits stay the shipped ones.
        world = self._require_world()
        return lambda: world.sim_time_s

    # ----- gripper -------------------------------------------------------------------------------
    def _gripper_command(self, width_m: float, speed_m_s: float, force_n: float | None) -> GripperResult:
        world = self._require_world()
        target = world.model.command_from_width(width_m)
        world.set_gripper(target, force_n)
        start_width = world.gripper_width()
        budget = abs(start_width - width_m) / max(speed_m_s, 1e-3) + 0.5
        previous = start_width
        waited = 0.0
        while waited < budget:
            world.advance(0.05)
            waited += 0.05
            width = world.gripper_width()
            if abs(width - width_m) < 0.002 or (waited > 0.2 and abs(width - previous) < 1e-4):
                break
            previous = width
        width = world.gripper_width()
        reached = abs(width - width_m) < 0.005
        # A grasp that stops on an object has reached its goal; an opening that stops on one has not.
        grasped = force_n is not None and width_m < start_width and world.grasped_object() is not None
        effort = float(force_n) if force_n is not None else math.nan
        return GripperResult(width, effort, stalled=not reached, reached_goal=reached or grasped)

    def _read_gripper(self) -> GripperState:
        world = self._require_world()
        return GripperState(world.gripper_width(), world.grasped_object() is not None, world.model.max_width_m)

    # ----- ground truth --------------------------------------------------------------------------
    def true_ee_pose(self) -> np.ndarray:
        """``T_base_ee`` straight from the simulator (to check the description's kinematics against)."""
        return self._require_world().ee_pose()
