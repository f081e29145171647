"""The motion-planner contract every backend implements, its configs, and the factory.

A planner plans from a start configuration to a joint goal or a TCP pose goal against a
:class:`~robopin.motion.world.CollisionWorld` and returns a :class:`~robopin.motion.types.PlanResult`
with a named status, the time-parameterised trajectory and the planning time. The shared pipeline
(limit and collision checks of start and goal, IK, time parameterisation, the dense verification)
lives here; a backend supplies only the geometric search (``_solve_path``).
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from robopin.motion.errors import BackendUnavailableError, MotionConfigError, UnknownPlannerError
from robopin.motion.robot import RobotModel, robot_spec
from robopin.motion.timing import time_parameterize
from robopin.motion.types import JointTrajectory, PlanResult, PlanStatus
from robopin.motion.verify import verify_trajectory
from robopin.motion.world import CollisionWorld
from robopin.registry import RegisteredBackend, RegisteredConfig, Registry

logger = logging.getLogger(__name__)

# Type name -> config and planner class. Planner modules (OMPL, roboplan, cuRobo and torch) are imported
# only when that type is built; cuRobo's config lives in its own module, which imports nothing of cuRobo.
PLANNERS: Registry[PlannerConfig, MotionPlanner] = Registry(
    "planner", unknown_error=UnknownPlannerError, config_error=MotionConfigError,
    unavailable_error=BackendUnavailableError,
)
PLANNERS.declare("ompl", "robopin.motion.ompl_planner", config_module=__name__)
PLANNERS.declare("roboplan", "robopin.motion.roboplan_planner", config_module=__name__)
PLANNERS.declare("curobo", "robopin.motion.curobo.planner", config_module="robopin.motion.curobo.config")


@dataclass
class PlannerConfig(RegisteredConfig, registry=PLANNERS):
    """Settings shared by every backend. Lengths in metres, angles in radians, times in seconds.

    Each backend's config subclasses this and sets ``type``, its registry key.
    """

    type: ClassVar[str] = ""
    robot: str = "panda"
    timeout_s: float = 2.0
    padding_m: float = 0.01  # obstacles are inflated by this much while searching
    verify_tolerance_m: float = 0.001  # robot-point travel the continuous check may leave unchecked
    verify_margin_m: float = 0.0  # clearance the dense check demands (0: no contact)
    velocity_scale: float = 0.5
    acceleration_scale: float = 0.5
    sample_dt_s: float = 0.02  # spacing of the returned trajectory samples
    # Trajectories are slowed down until the TCP stays under this speed: the arm safety layer
    # refuses anything over its limit (tcp_speed, 1.0 m/s by default), and joint-space timing
    # alone lets a long transport swing the TCP faster than that.
    max_tcp_speed_m_s: float = 0.8
    ik_restarts: int = 20
    near_endpoint_rad: float = 0.2  # configurations this close to start/goal are judged without padding
    max_search_attempts: int = 3  # searches per request when the continuous check rejects a path
    seed: int = 0

    def __post_init__(self) -> None:
        positive = {
            "timeout_s": self.timeout_s,
            "verify_tolerance_m": self.verify_tolerance_m,
            "sample_dt_s": self.sample_dt_s,
            "max_tcp_speed_m_s": self.max_tcp_speed_m_s,
        }
        for name, value in positive.items():
            if not (np.isfinite(value) and value > 0.0):
                raise MotionConfigError(f"{type(self).__name__}.{name} must be > 0, got {value}")
        for name in ("padding_m", "verify_margin_m", "near_endpoint_rad"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise MotionConfigError(f"{type(self).__name__}.{name} must be >= 0, got {value}")
        for name in ("velocity_scale", "acceleration_scale"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise MotionConfigError(f"{type(self).__name__}.{name} must be in (0, 1], got {value}")
        if self.verify_margin_m > self.padding_m:
            raise MotionConfigError(
                f"verify_margin_m ({self.verify_margin_m}) must not exceed padding_m ({self.padding_m}): the "
                "search would return paths the verifier rejects"
            )
        if self.ik_restarts < 0:
            raise MotionConfigError(f"ik_restarts must be >= 0, got {self.ik_restarts}")
        if self.max_search_attempts < 1:
            raise MotionConfigError(f"max_search_attempts must be >= 1, got {self.max_search_attempts}")


@dataclass
class OmplPlannerConfig(PlannerConfig):
    """OMPL (official nanobind bindings) with pinocchio/coal state validity."""

    type: ClassVar[str] = "ompl"
    algorithm: str = "RRTConnect"
    range_rad: float = 0.0  # tree extension step, 0 = OMPL's own default
    check_resolution_rad: float = 0.02  # motion-validation step of OMPL's discrete motion validator
    simplify: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.algorithm not in {"RRTConnect", "RRT", "KPIECE1", "BKPIECE1", "LBKPIECE1", "PRM", "BITstar", "AORRTC"}:
            raise MotionConfigError(f"OMPL algorithm {self.algorithm!r} is not one this backend wires up")
        if self.check_resolution_rad <= 0.0 or self.range_rad < 0.0:
            raise MotionConfigError(
                "check_resolution_rad must be > 0 and range_rad >= 0, got "
                f"{self.check_resolution_rad}, {self.range_rad}"
            )


@dataclass
class RoboplanPlannerConfig(PlannerConfig):
    """roboplan's C++ RRT-Connect and path shortcutting on its own pinocchio/coal scene."""

    type: ClassVar[str] = "roboplan"
    max_connection_distance_rad: float = 1.0
    collision_check_step_rad: float = 0.02
    shortcut_iterations: int = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_connection_distance_rad <= 0.0 or self.collision_check_step_rad <= 0.0:
            raise MotionConfigError(
                "max_connection_distance_rad and collision_check_step_rad must be > 0, got "
                f"{self.max_connection_distance_rad}, {self.collision_check_step_rad}"
            )


class MotionPlanner(abc.ABC, RegisteredBackend, registry=PLANNERS):
    """Plans collision-free, time-parameterised joint trajectories for one arm.

    Not thread-safe; one instance per planning thread. Subclasses implement :meth:`_solve_path` (and
    may override :meth:`plan_to_pose` when their library plans to poses natively, as cuRobo does), and
    name their config dataclass in ``config_class``, which registers them under that config's ``type``.
    """

    config_class: ClassVar[type[PlannerConfig]] = PlannerConfig

    def __init__(self, config: PlannerConfig, robot: RobotModel | None = None) -> None:
        self.config = config
        self.robot = robot if robot is not None else RobotModel(robot_spec(config.robot), seed=config.seed)
        self.world = CollisionWorld()
        self.robot.set_world(self.world, padding_m=config.padding_m)
        self._start: NDArray[np.float64] | None = None
        self._goal: NDArray[np.float64] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(robot={self.config.robot!r})"

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the planned joints, in trajectory column order."""
        return self.robot.joint_names

    def update_world(self, world: CollisionWorld) -> None:
        """Plan against ``world`` from the next request on."""
        self.world = world
        self.robot.set_world(world, padding_m=self.config.padding_m)

    def reseed(self) -> None:
        """Restart every random stream at the configured seed, where a new planner starts them: after a trial
        boundary a batch on one stack then plans as a bring-up per trial does (IK restarts pick the same goal)."""
        self.robot.reseed(self.config.seed)

    def warmup(self) -> None:
        """Do the slow first-call work now (library loading, caches) so the first plan is fast."""
        q = self.robot.home
        self.robot.in_collision(q)
        self.robot.forward_kinematics(q)
        # Importing toppra (scipy, matplotlib) costs seconds: pay it here, not in the first plan. Timed at the
        # configured scales: toppra's limit constraints are built (tens to hundreds of ms, formatting every
        # limit into a description) and cached per scaled limit, so the plans' own scales must be the ones built.
        q_next = q + 0.01 * (self.robot.upper - q) / np.maximum(np.abs(self.robot.upper - q), 1e-9)
        time_parameterize(
            np.stack([q, q_next]), self.joint_names, self.robot.max_velocity, self.robot.max_acceleration,
            velocity_scale=self.config.velocity_scale, acceleration_scale=self.config.acceleration_scale,
        )

    # --- state validity shared by CPU searches ---------------------------------------------------

    def is_valid(self, q: NDArray[np.float64]) -> bool:
        """Within limits and clear of the padded world; near the endpoints, clear of the unpadded one.

        Grasp and place poses sit within the padding of the table or object by design; demanding
        padding there would make every pick impossible, and the dense check still forbids contact.
        """
        if not self.robot.within_limits(q):
            return False
        if not self.robot.in_collision(q):
            return True
        near = self.config.near_endpoint_rad
        for endpoint in (self._start, self._goal):
            if endpoint is not None and np.max(np.abs(q - endpoint)) <= near:
                return not self.robot.in_collision(q, margin_m=self.config.verify_margin_m)
        return False

    # --- planning ---------------------------------------------------------------------------------

    def plan_to_joints(
        self,
        q_start: Sequence[float],
        q_goal: Sequence[float],
        *,
        velocity_scale: float | None = None,
        timeout_s: float | None = None,
    ) -> PlanResult:
        """Plan from ``q_start`` to the joint configuration ``q_goal``."""
        started = time.perf_counter()
        start = self._as_configuration(q_start, "q_start")
        goal = self._as_configuration(q_goal, "q_goal")
        status = self._check_endpoints(start, goal)
        if status is not None:
            return PlanResult(status[0], time.perf_counter() - started, message=status[1], goal_q=goal)
        return self._plan_checked(start, goal, started, velocity_scale, timeout_s)

    def plan_to_pose(
        self,
        q_start: Sequence[float],
        T_base_ee: NDArray[np.float64] | Sequence[NDArray[np.float64]],
        *,
        velocity_scale: float | None = None,
        timeout_s: float | None = None,
    ) -> PlanResult:
        """Plan from ``q_start`` to a TCP pose, or to the first reachable one of several candidates.

        Candidates (e.g. grasp yaw variants) are tried in order: IK for each, then a plan to the first
        collision-free solution; the statuses of failed candidates are reported in the message.
        """
        started = time.perf_counter()
        start = self._as_configuration(q_start, "q_start")
        candidates = self._as_pose_list(T_base_ee)
        status = self._check_endpoints(start, None)
        if status is not None:
            return PlanResult(status[0], time.perf_counter() - started, message=status[1])
        failures: list[str] = []
        last = PlanStatus.IK_FAIL
        for index, T in enumerate(candidates):
            goal = self.robot.inverse_kinematics(T, start, restarts=self.config.ik_restarts)
            if goal is None:
                # Distinguish "unreachable" from "reachable only in collision" for the caller.
                goal_any = self.robot.inverse_kinematics(
                    T, start, restarts=self.config.ik_restarts, collision_free=False
                )
                last = PlanStatus.IK_FAIL if goal_any is None else PlanStatus.GOAL_IN_COLLISION
                failures.append(f"candidate {index}: {last.value}")
                continue
            result = self._plan_checked(start, goal, started, velocity_scale, timeout_s)
            if result.success:
                if failures:
                    result.message = f"candidate {index} of {len(candidates)} ({'; '.join(failures)})"
                return result
            last = result.status
            failures.append(f"candidate {index}: {result.status.value} ({result.message})")
        return PlanResult(last, time.perf_counter() - started, message="; ".join(failures))

    def plan_linear(
        self,
        q_start: Sequence[float],
        T_base_ee_goal: NDArray[np.float64],
        *,
        step_m: float = 0.01,
        velocity_scale: float | None = None,
        ignore_world: bool = False,
    ) -> PlanResult:
        """A straight-line TCP move (approach, lift, retreat) by chained IK, timed and verified.

        Fails with ``ik_fail`` when a step has no solution near the previous one (a jump in joint
        space would not be a straight line).
        """
        started = time.perf_counter()
        start = self._as_configuration(q_start, "q_start")
        T0 = self.robot.forward_kinematics(start)
        T1 = np.asarray(T_base_ee_goal, dtype=np.float64)
        distance = float(np.linalg.norm(T1[:3, 3] - T0[:3, 3]))
        steps = max(1, int(np.ceil(distance / step_m)))
        from robopin.motion.grasps import interpolate_pose

        path = [start]
        for k in range(1, steps + 1):
            T = interpolate_pose(T0, T1, k / steps)
            q = self.robot.inverse_kinematics(T, path[-1], restarts=0, collision_free=False)
            if q is None or np.max(np.abs(q - path[-1])) > 0.3:
                return PlanResult(
                    PlanStatus.IK_FAIL,
                    time.perf_counter() - started,
                    message=f"straight line breaks at {k}/{steps} ({distance:.3f} m)",
                )
            path.append(q)
        return self._finish(np.asarray(path), started, velocity_scale, verify=not ignore_world)

    # --- pipeline ---------------------------------------------------------------------------------

    def _plan_checked(self, start, goal, started, velocity_scale, timeout_s) -> PlanResult:
        if np.max(np.abs(goal - start)) < 1e-6:
            trajectory = JointTrajectory.stationary(self.joint_names, start)
            return PlanResult(
                PlanStatus.SUCCESS, time.perf_counter() - started, trajectory, path=start[None], goal_q=goal
            )
        timeout = self.config.timeout_s if timeout_s is None else float(timeout_s)
        result: PlanResult | None = None
        # A search result the continuous check rejects (the search's own checks are discrete) is
        # searched again while time is left: sampling-based planners find another path.
        for _ in range(self.config.max_search_attempts):
            remaining = timeout - (time.perf_counter() - started)
            if result is not None and remaining <= 0.0:
                break
            self._start, self._goal = start, goal
            try:
                searched = time.perf_counter()
                path, status, message = self._solve_path(start, goal, max(1e-3, remaining))
                search_time = time.perf_counter() - searched
            except Exception as exc:  # a backend library failure becomes a named status, never a crash
                logger.exception("%s failed", self)
                return PlanResult(
                    PlanStatus.BACKEND_ERROR, time.perf_counter() - started, message=f"{type(exc).__name__}: {exc}"
                )
            finally:
                self._start = self._goal = None
            if path is None:
                return PlanResult(status, time.perf_counter() - started, message=message, goal_q=goal)
            result = self._finish(path, started, velocity_scale)
            result.goal_q = goal
            result.details["search_time_s"] = search_time
            if result.status is not PlanStatus.COLLISION_IN_RESULT:
                break
        return result

    def _finish(
        self, path: NDArray[np.float64], started: float, velocity_scale: float | None, *, verify: bool = True
    ) -> PlanResult:
        """Time-parameterise ``path`` and verify the timed trajectory densely."""
        scale = self.config.velocity_scale if not velocity_scale else float(velocity_scale)
        timing_started = time.perf_counter()
        trajectory = time_parameterize(
            path,
            self.joint_names,
            self.robot.max_velocity,
            self.robot.max_acceleration,
            velocity_scale=scale,
            acceleration_scale=self.config.acceleration_scale,
            sample_dt_s=self.config.sample_dt_s,
            position_limits=(self.robot.lower, self.robot.upper),
        )
        if trajectory is None:
            return PlanResult(
                PlanStatus.TIME_PARAMETERIZATION_FAIL,
                time.perf_counter() - started,
                path=path,
                message="TOPP-RA found no feasible time scaling",
            )
        trajectory = self._within_tcp_speed(trajectory)
        verify_started = time.perf_counter()
        result = self._verified(trajectory, path, started, verify=verify)
        result.details["timing_time_s"] = verify_started - timing_started
        result.details["verify_time_s"] = time.perf_counter() - verify_started
        return result

    def _within_tcp_speed(self, trajectory: JointTrajectory) -> JointTrajectory:
        """``trajectory`` stretched in time (same path) so the TCP never exceeds ``max_tcp_speed_m_s``."""
        if len(trajectory.times_s) < 2:
            return trajectory
        tcp = np.array([self.robot.forward_kinematics(q)[:3, 3] for q in trajectory.positions])
        speeds = np.linalg.norm(np.diff(tcp, axis=0), axis=1) / np.diff(trajectory.times_s)
        # Samples are sparse (sample_dt_s): keep 10 % headroom for the speed between them.
        factor = float(np.max(speeds)) * 1.1 / self.config.max_tcp_speed_m_s
        if factor <= 1.0:
            return trajectory
        return JointTrajectory(
            trajectory.joint_names,
            trajectory.times_s * factor,
            trajectory.positions,
            trajectory.velocities / factor,
            trajectory.accelerations / factor**2,
        )

    def _verified(self, trajectory: JointTrajectory, path, started: float, *, verify: bool = True) -> PlanResult:
        if verify:
            check = verify_trajectory(
                self.robot, trajectory, tolerance_m=self.config.verify_tolerance_m, margin_m=self.config.verify_margin_m
            )
            if not check.collision_free:
                logger.warning("%s: rejected its own result: %s", self, check.describe())
                return PlanResult(
                    PlanStatus.COLLISION_IN_RESULT, time.perf_counter() - started, path=path, message=check.describe()
                )
        return PlanResult(PlanStatus.SUCCESS, time.perf_counter() - started, trajectory, path=path)

    def _check_endpoints(self, start, goal) -> tuple[PlanStatus, str] | None:
        margin = self.config.verify_margin_m
        if not self.robot.within_limits(start):
            return PlanStatus.START_OUTSIDE_LIMITS, f"start {np.round(start, 3).tolist()} is outside the joint limits"
        if self.robot.in_collision(start, margin_m=margin):
            pairs = self.robot.colliding_pairs(start, margin_m=margin)
            return PlanStatus.START_IN_COLLISION, f"start in collision: {pairs}"
        if goal is not None:
            if not self.robot.within_limits(goal):
                return PlanStatus.GOAL_OUTSIDE_LIMITS, f"goal {np.round(goal, 3).tolist()} is outside the joint limits"
            if self.robot.in_collision(goal, margin_m=margin):
                pairs = self.robot.colliding_pairs(goal, margin_m=margin)
                return PlanStatus.GOAL_IN_COLLISION, f"goal in collision: {pairs}"
        return None

    def _as_configuration(self, q: Sequence[float], name: str) -> NDArray[np.float64]:
        array = np.asarray(q, dtype=np.float64).reshape(-1)
        if array.shape != (self.robot.dof,) or not np.all(np.isfinite(array)):
            raise MotionConfigError(
                f"{name} must be {self.robot.dof} finite joint positions, got {np.asarray(q).tolist()}"
            )
        return array

    @staticmethod
    def _as_pose_list(T: Any) -> list[NDArray[np.float64]]:
        array = np.asarray(T, dtype=np.float64)
        if array.shape == (4, 4):
            return [array]
        if array.ndim == 3 and array.shape[1:] == (4, 4) and len(array):
            return list(array)
        raise MotionConfigError(f"pose goal must be a 4x4 matrix or a list of them, got shape {array.shape}")

    @abc.abstractmethod
    def _solve_path(
        self, start: NDArray[np.float64], goal: NDArray[np.float64], timeout_s: float
    ) -> tuple[NDArray[np.float64] | None, PlanStatus, str]:
        """Find a geometric path (waypoints × dof, start first) or return (None, status, message)."""


def planner_config_from_dict(values: dict[str, Any]) -> PlannerConfig:
    """Build the config of the backend named by ``values["type"]`` from a YAML-style mapping."""
    return PLANNERS.config_from_dict(values)


def make_planner(config: PlannerConfig, robot: RobotModel | None = None) -> MotionPlanner:
    """Instantiate the backend for ``config`` (its library is imported here, not before)."""
    return PLANNERS.build(config, robot)
