"""The simulated workcell: one pybullet world with a table, a robot arm, objects and RGB-D cameras.

A :class:`SimWorld` owns a pybullet DIRECT client and a lock around it. It can be stepped
synchronously (tests, scripted self-checks) or by its own physics thread at a configurable
real-time factor (the stack, where camera and arm backends read and command it concurrently).
Worlds are registered by name so the sim camera and sim arm backends of one process attach to
the same world (``get_world("workcell")``).

Frames: the world frame *is* the robot ``base`` frame. The table top is the plane z = 0, the
robot base sits at the origin facing +x, and the static camera looks back at the robot from +x,
so "in front of" in the tasks means larger x (nearer the static camera).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.transforms import (
    invert,
    make_transform,
    rpy_to_matrix,
    transform_from_xyz_quaternion,
    transform_to_xyz_quaternion,
)
from robopin.sim.assets import asset, color_rgba
from robopin.sim.render import RenderedView, SimCameraSpec, body_segmentation, camera_buffers, view_from_buffers
from robopin.sim.render_worker import BodyState, Recipe, RenderWorker, RenderWorkerError
from robopin.sim.robot_models import SimRobotModel, robot_model

logger = logging.getLogger(__name__)

TABLE_TOP_Z = 0.0
TABLE_CENTER_X = 0.45
"""The pybullet table (1.5 m x 1.0 m) is shifted so the robot base sits 0.3 m inside its near edge."""
_TABLE_URDF_TOP = 0.625


class SimWorldError(RuntimeError):
    """A simulator request that cannot be carried out (closed world, unknown name, bad state)."""


class UnknownNameError(SimWorldError, KeyError):
    """An object, camera or world name that does not exist."""


@dataclass
class SimObject:
    """One body in the world: ``name`` is unique (``duck_0``), ``kind`` is its catalogue entry."""

    name: str
    kind: str
    body_id: int
    color: str | None
    words: tuple[str, ...]
    radius_m: float
    height_m: float
    graspable: bool
    local_extent_xy: tuple[float, float] = (0.0, 0.0)
    """Footprint (m) along the object's own x and y axes; grasps close across the smaller one."""


T = TypeVar("T")


class ByName(Generic[T]):
    """Objects registered by name in this process, safe across threads: the worlds, and the scene laid out on each
    (how backends built from a name in a system file find them). ``missing`` words the refusal of an unknown name."""

    def __init__(self, missing: str, error: type[Exception]) -> None:
        self._missing, self._error = missing, error
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> T:
        with self._lock:
            if name not in self._items:
                raise self._error(f"{self._missing} {name!r}; registered: {sorted(self._items)}")
            return self._items[name]

    def add(self, name: str, item: T, *, replace: bool = False) -> bool:
        """Register ``item``; False (and nothing changed) when the name is taken and ``replace`` is not set."""
        with self._lock:
            if name in self._items and not replace:
                return False
            self._items[name] = item
            return True

    def holds(self, name: str, item: T) -> bool:
        with self._lock:
            return self._items.get(name) is item

    def discard(self, name: str, item: T) -> None:
        """Unregister ``name`` if ``item`` is what it names (a newer one under the name stays)."""
        with self._lock:
            if self._items.get(name) is item:
                del self._items[name]

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._items)


_WORLDS: ByName[SimWorld] = ByName("no simulated world named", UnknownNameError)


def get_world(name: str) -> SimWorld:
    """Return the registered world called ``name`` (sim backends attach to their world this way)."""
    return _WORLDS.get(name)


def registered_worlds() -> list[str]:
    """Names of the worlds registered in this process."""
    return _WORLDS.names()


class SimWorld:
    """A pybullet workcell. Every pybullet call goes through :attr:`lock`; close it when done."""

    def __init__(
        self,
        name: str = "workcell",
        robot: str = "panda",
        *,
        time_step_s: float = 1.0 / 240.0,
        seed: int = 0,
        register: bool = True,
    ) -> None:
        import pybullet as p
        import pybullet_data

        if time_step_s <= 0 or time_step_s > 0.05:
            raise ValueError(f"time_step_s must be in (0, 0.05], got {time_step_s}")
        self.name = name
        self.time_step_s = float(time_step_s)
        self.rng = np.random.default_rng(seed)
        self.lock = threading.RLock()
        self._tick = threading.Condition(self.lock)
        self._p = p
        self.client = p.connect(p.DIRECT)
        self._closed = False
        self.sim_time_s = 0.0
        self._step_callbacks: list[Callable[[float], None]] = []
        self._thread: threading.Thread | None = None
        self._stop_thread = threading.Event()
        self.real_time_factor = 0.0
        self.objects: dict[str, SimObject] = {}
        self._objects_by_body: dict[int, SimObject] = {}
        self.cameras: dict[str, SimCameraSpec] = {}
        # Every body-creation call, in order, so a render worker can build the same bodies (render_worker.py).
        self._recipe: Recipe = []
        self._render_worker: RenderWorker | None = None
        self._worker_recipe = 0  # how much of the recipe the worker has replayed
        self._render_lock = threading.RLock()  # orders worker renders and their depth-noise draws; held() nests
        self._movable_joints: dict[int, tuple[int, list[int]]] = {}  # body -> (joint count, movable joints)
        self._render_cache: dict[str, tuple[tuple, tuple]] = {}  # camera -> (state key, raw buffers)
        self._segmentation_cache: dict[str, tuple] = {}  # camera -> (raw segmentation buffer, body ids of it)

        p.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=self.client)
        self.model: SimRobotModel = robot_model(robot)
        self._build_cell()
        if register and not _WORLDS.add(name, self):
            p.disconnect(self.client)
            raise SimWorldError(f"a simulated world named {name!r} is already registered; close it first")
        self._registered = register
        logger.info("%s created", self)

    def __repr__(self) -> str:
        return f"SimWorld({self.name!r}, robot={self.model.name!r}, objects={len(self.objects)})"

    def _create(self, name: str, *args, **kwargs):
        """Call pybullet's body-creation function ``name`` on this world's client and record the call."""
        value = getattr(self._p, name)(*args, physicsClientId=self.client, **kwargs)
        self._recipe.append((name, args, kwargs, value))
        return value

    def _build_cell(self) -> None:
        """Physics settings, floor, table and arm at home: what every world holds before its objects."""
        p = self._p
        p.setGravity(0, 0, -9.81, physicsClientId=self.client)
        p.setTimeStep(self.time_step_s, physicsClientId=self.client)
        # Deterministic contact ordering so one seed gives one outcome.
        p.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=self.client)
        self.plane_id = self._create("loadURDF", "plane.urdf", [0, 0, -_TABLE_URDF_TOP])
        self.table_id = self._create(
            "loadURDF",
            "table/table.urdf",
            [TABLE_CENTER_X, 0, -_TABLE_URDF_TOP],
            useFixedBase=True,
        )
        self._load_robot()

    @contextlib.contextmanager
    def held(self) -> Iterator[SimWorld]:
        """No render, physics step or state read by another thread until the block ends: changes made in it (a
        new layout) are seen whole. Takes the render lock first, as a render does."""
        with self._render_lock, self.lock:
            yield self

    def reset(self, seed: int = 0) -> None:
        """Empty the cell for a new layout, as a fresh world built with ``seed`` would be: no objects or cameras,
        the arm at home, the random draws (depth noise) restarted. The world keeps its name, its physics thread,
        its simulated clock (stamps only move forward) and its step callbacks (the arm driver's controller), so
        a running stack carries on with the new layout.

        pybullet's ``resetSimulation`` followed by the same creation calls gives the same body ids and the same
        physics as a new client; the render worker's mirror is rebuilt the same way.
        """
        with self.held():
            self._check_open()
            self._p.resetSimulation(physicsClientId=self.client)
            self.rng = np.random.default_rng(seed)
            self.objects.clear()
            self._objects_by_body.clear()
            self.cameras.clear()
            self._recipe = []
            self._movable_joints.clear()
            self._render_cache.clear()
            self._segmentation_cache.clear()
            self._build_cell()
            if self._render_worker is not None:
                try:
                    self._render_worker.reset()
                except RenderWorkerError as error:
                    self._worker_failed(error)
            self._worker_recipe = 0
        logger.info("%s reset (seed %d)", self, seed)

    # ------------------------------------------------------------------ robot
    def _load_robot(self) -> None:
        p = self._p
        self.robot_id = self._create(
            "loadURDF",
            self.model.urdf,
            [0, 0, 0],
            useFixedBase=True,
            flags=p.URDF_USE_SELF_COLLISION_EXCLUDE_PARENT,
        )
        joints = {}
        links = {}
        for index in range(p.getNumJoints(self.robot_id, physicsClientId=self.client)):
            info = p.getJointInfo(self.robot_id, index, physicsClientId=self.client)
            joints[info[1].decode()] = index
            links[info[12].decode()] = index
        try:
            self.arm_joint_indices = [joints[j] for j in self.model.arm_joints]
            self.finger_joint_indices = [joints[j] for j in self.model.finger_joints]
            self.tcp_link_index = links[self.model.tcp_link]
        except KeyError as missing:
            raise SimWorldError(f"{self.model.urdf} has no joint/link {missing}") from None
        self.finger_multipliers = list(self.model.finger_joints.values())
        self.finger_link_indices = list(self.finger_joint_indices)
        lower, upper = [], []
        for index in self.arm_joint_indices:
            info = p.getJointInfo(self.robot_id, index, physicsClientId=self.client)
            lower.append(info[8])
            upper.append(info[9])
        self.arm_lower = np.array(lower)
        self.arm_upper = np.array(upper)
        for index in self.finger_joint_indices:
            p.changeDynamics(
                self.robot_id, index, lateralFriction=1.5, spinningFriction=0.01, physicsClientId=self.client
            )
        self._weld: tuple[int, str] | None = None  # (constraint id, object name) while welded
        self._steps = 0
        self.arm_targets = np.array(self.model.home_q, dtype=np.float64)
        self.gripper_command = 0.0
        self.reset_arm(self.model.home_q)
        self.set_gripper(0.0)

    def reset_arm(self, q: Sequence[float]) -> None:
        """Teleport the arm to ``q`` (no dynamics) and hold it there."""
        q = self._check_q(q)
        with self.lock:
            for index, value in zip(self.arm_joint_indices, q, strict=True):
                self._p.resetJointState(self.robot_id, index, float(value), 0.0, physicsClientId=self.client)
            self.arm_targets = q.copy()
            self._send_arm_targets(q)

    def _check_q(self, q: Sequence[float]) -> NDArray[np.float64]:
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (len(self.arm_joint_indices),):
            raise ValueError(
                f"{self.model.name}: expected {len(self.arm_joint_indices)} joint values, got shape {q.shape}"
            )
        if not np.all(np.isfinite(q)):
            raise ValueError(f"{self.model.name}: joint values must be finite, got {q}")
        return q

    def _send_arm_targets(self, q: NDArray[np.float64], qd: NDArray[np.float64] | None = None) -> None:
        p = self._p
        p.setJointMotorControlArray(
            self.robot_id,
            self.arm_joint_indices,
            p.POSITION_CONTROL,
            targetPositions=q.tolist(),
            targetVelocities=(np.zeros_like(q) if qd is None else qd).tolist(),
            forces=list(self.model.arm_force_n),
            positionGains=[0.3] * len(q),
            velocityGains=[1.0] * len(q),
            physicsClientId=self.client,
        )

    def set_arm_targets(self, q: Sequence[float], qd: Sequence[float] | None = None) -> None:
        """Command the arm's joint position controllers (and optional feed-forward velocities)."""
        q = self._check_q(q)
        with self.lock:
            self.arm_targets = q.copy()
            self._send_arm_targets(q, None if qd is None else np.asarray(qd, dtype=np.float64))

    def joint_positions(self) -> NDArray[np.float64]:
        """Measured arm joint positions (rad)."""
        with self.lock:
            states = self._p.getJointStates(self.robot_id, self.arm_joint_indices, physicsClientId=self.client)
        return np.array([s[0] for s in states])

    def joint_velocities(self) -> NDArray[np.float64]:
        """Measured arm joint velocities (rad/s)."""
        with self.lock:
            states = self._p.getJointStates(self.robot_id, self.arm_joint_indices, physicsClientId=self.client)
        return np.array([s[1] for s in states])

    def ee_pose(self) -> NDArray[np.float64]:
        """``T_base_ee`` of the tool centre point from the current simulated state."""
        with self.lock:
            state = self._p.getLinkState(
                self.robot_id, self.tcp_link_index, computeForwardKinematics=True, physicsClientId=self.client
            )
        return transform_from_xyz_quaternion(state[4], state[5]) @ self.model.T_link_tcp

    def inverse_kinematics(
        self,
        T_base_ee: NDArray[np.float64],
        q_seed: Sequence[float] | None = None,
        iterations: int = 200,
        tolerance_m: float = 1e-4,
    ) -> NDArray[np.float64]:
        """Joint positions that put the TCP at ``T_base_ee`` (pybullet damped least squares)."""
        p = self._p
        T_base_link = T_base_ee @ invert(self.model.T_link_tcp)
        xyz, quat = transform_to_xyz_quaternion(T_base_link)
        n_dof = len(self.arm_joint_indices)
        with self.lock:
            movable = [
                i
                for i in range(p.getNumJoints(self.robot_id, physicsClientId=self.client))
                if p.getJointInfo(self.robot_id, i, physicsClientId=self.client)[2] != p.JOINT_FIXED
            ]
            saved = [p.getJointState(self.robot_id, i, physicsClientId=self.client)[0] for i in movable]
            seed = self.joint_positions() if q_seed is None else self._check_q(q_seed)
            rest = [saved[movable.index(i)] for i in movable]
            for index, value in zip(self.arm_joint_indices, seed, strict=True):
                rest[movable.index(index)] = float(value)
            lower = [-1e3] * len(movable)
            upper = [1e3] * len(movable)
            ranges = [2e3] * len(movable)
            for k, index in enumerate(self.arm_joint_indices):
                slot = movable.index(index)
                lower[slot], upper[slot] = float(self.arm_lower[k]), float(self.arm_upper[k])
                ranges[slot] = float(self.arm_upper[k] - self.arm_lower[k])
            try:
                for index, value in zip(movable, rest, strict=True):
                    p.resetJointState(self.robot_id, index, value, physicsClientId=self.client)
                solution = p.calculateInverseKinematics(
                    self.robot_id,
                    self.tcp_link_index,
                    xyz.tolist(),
                    quat.tolist(),
                    lowerLimits=lower,
                    upperLimits=upper,
                    jointRanges=ranges,
                    restPoses=rest,
                    maxNumIterations=iterations,
                    residualThreshold=tolerance_m,
                    physicsClientId=self.client,
                )
            finally:
                for index, value in zip(movable, saved, strict=True):
                    p.resetJointState(self.robot_id, index, value, physicsClientId=self.client)
        q = np.array([solution[movable.index(i)] for i in self.arm_joint_indices][:n_dof])
        return np.clip(q, self.arm_lower, self.arm_upper)

    def forward_kinematics(self, q: Sequence[float]) -> NDArray[np.float64]:
        """``T_base_ee`` at joint positions ``q`` (the simulated state is restored afterwards)."""
        q = self._check_q(q)
        p = self._p
        with self.lock:
            saved = [p.getJointState(self.robot_id, i, physicsClientId=self.client)[:2] for i in self.arm_joint_indices]
            try:
                for index, value in zip(self.arm_joint_indices, q, strict=True):
                    p.resetJointState(self.robot_id, index, float(value), physicsClientId=self.client)
                state = p.getLinkState(
                    self.robot_id,
                    self.tcp_link_index,
                    computeForwardKinematics=True,
                    physicsClientId=self.client,
                )
            finally:
                for index, (position, velocity) in zip(self.arm_joint_indices, saved, strict=True):
                    p.resetJointState(self.robot_id, index, position, velocity, physicsClientId=self.client)
        return transform_from_xyz_quaternion(state[4], state[5]) @ self.model.T_link_tcp

    # ---------------------------------------------------------------- gripper
    def set_gripper(self, closed_fraction: float, force_n: float | None = None) -> None:
        """Drive the gripper toward ``closed_fraction`` (0 open .. 1 closed) with a bounded force."""
        if not 0.0 <= closed_fraction <= 1.0:
            raise ValueError(f"closed_fraction must be in [0, 1], got {closed_fraction}")
        force = self.model.grasp_force_n if force_n is None else float(force_n)
        if force <= 0:
            raise ValueError(f"gripper force must be > 0 N, got {force}")
        p = self._p
        with self.lock:
            self.gripper_command = float(closed_fraction)
            model = self.model
            span = model.finger_closed_position - model.finger_open_position
            targets = [m * (model.finger_open_position + span * closed_fraction) for m in self.finger_multipliers]
            p.setJointMotorControlArray(
                self.robot_id,
                self.finger_joint_indices,
                p.POSITION_CONTROL,
                targetPositions=targets,
                forces=[force] * len(targets),
                positionGains=[0.2] * len(targets),
                physicsClientId=self.client,
            )

    def gripper_width(self) -> float:
        """Current opening (m), from the finger joint positions."""
        with self.lock:
            states = self._p.getJointStates(self.robot_id, self.finger_joint_indices, physicsClientId=self.client)
        if self.model.finger_is_prismatic:
            return float(sum(s[0] for s in states))
        model = self.model
        span = model.finger_closed_position - model.finger_open_position
        return model.width_from_command((states[0][0] - model.finger_open_position) / span)

    def _update_grasp_weld(self) -> None:
        """Lock / release the held object for grippers that cannot hold by friction (see SimRobotModel)."""
        p = self._p
        if self._weld is not None and self.gripper_command < 0.3:
            p.removeConstraint(self._weld[0], physicsClientId=self.client)
            self._finger_contacts(self.objects[self._weld[1]].body_id, enabled=True)
            self._weld = None
        elif self._weld is None and self.gripper_command >= 0.3:
            name = self._touched_by_both_sides()
            if name is not None:
                body = self.objects[name].body_id
                T_base_link = transform_from_xyz_quaternion(
                    *p.getLinkState(
                        self.robot_id, self.tcp_link_index, computeForwardKinematics=True, physicsClientId=self.client
                    )[4:6]
                )
                xyz, quat = p.getBasePositionAndOrientation(body, physicsClientId=self.client)
                T_link_object = invert(T_base_link) @ transform_from_xyz_quaternion(xyz, quat)
                position, orientation = transform_to_xyz_quaternion(T_link_object)
                constraint = p.createConstraint(
                    self.robot_id,
                    self.tcp_link_index,
                    body,
                    -1,
                    p.JOINT_FIXED,
                    [0, 0, 0],
                    position.tolist(),
                    [0, 0, 0],
                    orientation.tolist(),
                    physicsClientId=self.client,
                )
                p.changeConstraint(constraint, maxForce=50.0, physicsClientId=self.client)
                self._weld = (constraint, name)
                # The weld is the grip now. Left colliding, the open-chain fingers and the welded object push
                # into each other as the arm accelerates, and an object sunk into a finger leaves with the opened
                # hand; the fingers are held where they stopped, so nothing passes through the object while
                # contacts are off, and they come back with the release.
                self._finger_contacts(body, enabled=False)
                # The linkage gives way under load, so left alone it would close through the object
                # and report 0 mm (a missed grasp) while the weld holds it. A real gripper stalls on
                # the object: hold every finger joint where the contact stopped it.
                held = [
                    s[0]
                    for s in p.getJointStates(self.robot_id, self.finger_joint_indices, physicsClientId=self.client)
                ]
                p.setJointMotorControlArray(
                    self.robot_id,
                    self.finger_joint_indices,
                    p.POSITION_CONTROL,
                    targetPositions=held,
                    forces=[self.model.grasp_force_n] * len(held),
                    positionGains=[0.2] * len(held),
                    physicsClientId=self.client,
                )

    def _finger_contacts(self, body: int, *, enabled: bool) -> None:
        for link in self.finger_link_indices:
            self._p.setCollisionFilterPair(self.robot_id, body, link, -1, int(enabled), physicsClientId=self.client)

    def grasped_object(self) -> str | None:
        """Name of the graspable object both gripper sides touch (or the one locked to the hand), or None."""
        if self._weld is not None:
            return self._weld[1]
        return self._touched_by_both_sides()

    def _touched_by_both_sides(self) -> str | None:
        p = self._p
        with self.lock:
            contacts = p.getContactPoints(bodyA=self.robot_id, physicsClientId=self.client)
        touching: dict[str, set[int]] = {}
        half = len(self.finger_link_indices) // 2 if not self.model.finger_is_prismatic else 1
        left = set(self.finger_link_indices[:half])
        for contact in contacts:
            link, other = contact[3], contact[2]
            obj = self._objects_by_body.get(other)
            if obj is None or not obj.graspable or link not in self.finger_link_indices:
                continue
            touching.setdefault(obj.name, set()).add(0 if link in left else 1)
        for name, sides in touching.items():
            if sides == {0, 1}:
                return name
        return None

    # ---------------------------------------------------------------- objects
    def add_object(
        self,
        kind: str,
        name: str,
        xy: Sequence[float],
        yaw_rad: float = 0.0,
        *,
        color: str | None = None,
        radius_m: float | None = None,
        z_m: float | None = None,
    ) -> SimObject:
        """Place a catalogue object on the table top at ``xy`` (m, base frame) and return it."""
        if name in self.objects:
            raise SimWorldError(f"an object named {name!r} already exists")
        spec = asset(kind)
        color = color if color is not None else spec.default_color
        p = self._p
        with self.lock:
            if spec.primitive is not None:
                size = np.array(spec.size_m, dtype=np.float64)
                if radius_m is not None:
                    if spec.primitive != "cylinder":
                        raise ValueError(f"radius_m only applies to cylinder objects, not {kind!r}")
                    size[0] = size[1] = float(radius_m)
                if spec.primitive == "box":
                    collision = self._create("createCollisionShape", p.GEOM_BOX, halfExtents=(size / 2).tolist())
                    visual = self._create("createVisualShape", p.GEOM_BOX, halfExtents=(size / 2).tolist())
                    height, radius = size[2], float(np.hypot(size[0], size[1]) / 2)
                    local_extent = (size[0], size[1])
                else:
                    collision = self._create("createCollisionShape", p.GEOM_CYLINDER, radius=size[0], height=size[2])
                    visual = self._create("createVisualShape", p.GEOM_CYLINDER, radius=size[0], length=size[2])
                    height, radius = size[2], float(size[0])
                    local_extent = (2 * size[0], 2 * size[0])
                z = TABLE_TOP_Z + height / 2 + 0.0005 if z_m is None else z_m
                body = self._create(
                    "createMultiBody",
                    spec.mass_kg,
                    collision,
                    visual,
                    [xy[0], xy[1], z],
                    p.getQuaternionFromEuler([0, 0, yaw_rad]),
                )
            else:
                orientation = p.getQuaternionFromEuler([spec.base_rpy[0], spec.base_rpy[1], spec.base_rpy[2] + yaw_rad])
                body = self._create(
                    "loadURDF",
                    spec.urdf,
                    [0.0, 0.0, 0.3],
                    orientation,
                    globalScaling=spec.scale,
                    useFixedBase=not spec.graspable,
                )
                # Some meshes (the teddy) sit far from their link origin: move the body until its
                # bounding box is centred on xy with its bottom on the table (AABBs of fixed bodies
                # refresh only after a collision pass, hence the explicit passes).
                upright = p.getQuaternionFromEuler(list(spec.base_rpy))
                p.resetBasePositionAndOrientation(body, [0.0, 0.0, 0.3], upright, physicsClientId=self.client)
                p.performCollisionDetection(physicsClientId=self.client)
                low0, high0 = p.getAABB(body, physicsClientId=self.client)
                local_extent = (high0[0] - low0[0], high0[1] - low0[1])
                base = np.array([0.0, 0.0, 0.3])
                for _ in range(2):
                    p.resetBasePositionAndOrientation(body, base.tolist(), orientation, physicsClientId=self.client)
                    p.performCollisionDetection(physicsClientId=self.client)
                    low, high = p.getAABB(body, physicsClientId=self.client)
                    bottom = TABLE_TOP_Z + 0.001 if z_m is None else z_m
                    base += [xy[0] - (low[0] + high[0]) / 2, xy[1] - (low[1] + high[1]) / 2, bottom - low[2]]
                p.resetBasePositionAndOrientation(body, base.tolist(), orientation, physicsClientId=self.client)
                height = high[2] - low[2]
                radius = spec.footprint_radius_m
                if spec.graspable:
                    p.changeDynamics(body, -1, mass=spec.mass_kg, physicsClientId=self.client)
            if color is not None:
                self._create("changeVisualShape", body, -1, rgbaColor=list(color_rgba(color)))
            p.changeDynamics(
                body,
                -1,
                lateralFriction=1.0,
                spinningFriction=0.002,
                rollingFriction=0.0005,
                physicsClientId=self.client,
            )
            obj = SimObject(
                name,
                kind,
                body,
                color,
                spec.words,
                float(radius),
                float(height),
                spec.graspable,
                (float(local_extent[0]), float(local_extent[1])),
            )
            self.objects[name] = obj
            self._objects_by_body[body] = obj
        return obj

    def object(self, name: str) -> SimObject:
        """The object called ``name``."""
        try:
            return self.objects[name]
        except KeyError:
            raise UnknownNameError(f"no object named {name!r}; objects: {sorted(self.objects)}") from None

    def object_by_body(self, body_id: int) -> SimObject | None:
        """The object with pybullet body id ``body_id`` (None for robot, table, floor)."""
        return self._objects_by_body.get(int(body_id))

    def object_pose(self, name: str) -> NDArray[np.float64]:
        """``T_base_object`` of the object's base link."""
        obj = self.object(name)
        with self.lock:
            xyz, quat = self._p.getBasePositionAndOrientation(obj.body_id, physicsClientId=self.client)
        return transform_from_xyz_quaternion(xyz, quat)

    def object_aabb(self, name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Axis-aligned bounds (min, max) of the object in ``base``."""
        obj = self.object(name)
        with self.lock:
            low, high = self._p.getAABB(obj.body_id, physicsClientId=self.client)
        return np.array(low), np.array(high)

    def object_center(self, name: str) -> NDArray[np.float64]:
        """Centre of the object's bounding box in ``base`` (the point grasps and answers aim at)."""
        low, high = self.object_aabb(name)
        return (low + high) / 2.0

    def object_velocity(self, name: str) -> float:
        """Linear speed (m/s) of the object."""
        obj = self.object(name)
        with self.lock:
            linear, _ = self._p.getBaseVelocity(obj.body_id, physicsClientId=self.client)
        return float(np.linalg.norm(linear))

    def settle(self, max_time_s: float = 2.0, speed_m_s: float = 0.002) -> float:
        """Step until graspable objects are nearly still (or ``max_time_s``); returns simulated time spent."""
        start = self.sim_time_s
        movers = [o.name for o in self.objects.values() if o.graspable]
        while self.sim_time_s - start < max_time_s:
            self.step(12)
            if all(self.object_velocity(n) < speed_m_s for n in movers):
                break
        return self.sim_time_s - start

    # ---------------------------------------------------------------- cameras
    def add_camera(self, spec: SimCameraSpec) -> None:
        """Add a static (mount 'world') or wrist (mount 'ee') camera."""
        if spec.name in self.cameras:
            raise SimWorldError(f"a camera named {spec.name!r} already exists")
        self.cameras[spec.name] = spec

    def camera(self, name: str) -> SimCameraSpec:
        """The camera called ``name``."""
        try:
            return self.cameras[name]
        except KeyError:
            raise UnknownNameError(f"no camera named {name!r}; cameras: {sorted(self.cameras)}") from None

    def camera_pose(self, name: str) -> NDArray[np.float64]:
        """``T_base_cam`` of the camera's optical frame now."""
        spec = self.camera(name)
        return spec.T_mount_cam if spec.mount == "world" else self.ee_pose() @ spec.T_mount_cam

    def render(self, name: str) -> RenderedView:
        """Render camera ``name`` at the current state.

        TinyRenderer is deterministic: a camera whose pose and every body's state (base poses, joint
        positions, the bodies themselves) are exactly those of its last render gets that render's buffers
        again, so a still scene costs one render per camera, not one per frame (the oracle's own renders
        included). Depth noise is drawn afresh each time, as before. Otherwise the render is drawn in this
        process, holding the lock (physics pauses) and, inside pybullet, the GIL; or, with a render worker
        running (:meth:`start_render_worker`), in the worker's process while the world and this process go
        on. Frames are bit-identical on every path (tests/sim/test_render_worker.py). Call it without
        holding :attr:`lock` (renders are ordered by their own lock, taken first), and change bodies'
        looks only through this class (a colour set on :attr:`client` directly is not seen by the reuse).
        """
        spec, T_base_cam, stamp_s, buffers = self._buffers(name)
        return view_from_buffers(spec, T_base_cam, stamp_s, buffers, rng=self.rng)

    def segmentation(self, name: str) -> NDArray[np.int32]:
        """Camera ``name``'s body-id segmentation at the current state (-1 background), as :meth:`render` draws it.

        The same buffers as :meth:`render` (reused while the scene is still), without the depth and colour
        a render also converts: ground truth needs only which body each pixel shows. While the scene is still
        the same read-only array is returned again (callers may key their own results on it).
        """
        raw = self._buffers(name)[3][2]
        cached = self._segmentation_cache.get(name)
        if cached is not None and cached[0] is raw:
            return cached[1]
        segmentation = body_segmentation(raw)
        segmentation.setflags(write=False)
        self._segmentation_cache[name] = (raw, segmentation)
        return segmentation

    def _buffers(self, name: str):
        """(spec, T_base_cam, sim stamp, raw buffers) of camera ``name`` now (see :meth:`render`)."""
        spec = self.camera(name)

        def drawn_state():  # under self.lock: what the render draws, and the key its buffers are kept under
            self._check_open()
            ids, states = self._body_states()
            T_base_cam = self.camera_pose(name)
            key = (id(spec), len(self._recipe), T_base_cam.tobytes(), ids, states)
            return ids, states, T_base_cam, self.sim_time_s, key

        with self._render_lock:
            with self.lock:
                ids, states, T_base_cam, stamp_s, key = drawn_state()
                cached = self._render_cache.get(name)
                buffers = cached[1] if cached is not None and cached[0] == key else None
                worker = self._worker_for(ids) if buffers is None else None
                if buffers is None and worker is None:
                    buffers = camera_buffers(self.client, spec, T_base_cam)
            if buffers is None:
                # The world is free from here: physics steps and every other thread runs while the worker draws.
                try:
                    buffers = worker.render(states, spec, T_base_cam)
                except RenderWorkerError as error:
                    self._worker_failed(error)
                    with self.lock:
                        ids, states, T_base_cam, stamp_s, key = drawn_state()
                        buffers = camera_buffers(self.client, spec, T_base_cam)
            self._render_cache[name] = (key, buffers)
            return spec, T_base_cam, stamp_s, buffers

    def start_render_worker(self, timeout_s: float = 60.0, *, background: bool = False) -> None:
        """Draw this world's renders in a child process from now on (see :mod:`robopin.sim.render_worker`).

        Bodies added later by :meth:`add_object` join the worker's mirror; a body created on :attr:`client`
        by anyone else makes renders fall back to this process until it is gone. ``background`` returns at
        once: renders stay in this process until the worker has started (its pybullet import takes seconds).
        """
        self._check_open()
        if self._render_worker is not None:
            return
        if background:
            threading.Thread(target=self._start_worker, args=(timeout_s,), name=f"render-worker-{self.name}",
                             daemon=True).start()
        else:
            self._start_worker(timeout_s)

    def _start_worker(self, timeout_s: float) -> None:
        with self.lock:
            recipe = list(self._recipe)
        try:
            worker = RenderWorker(recipe, timeout_s=timeout_s)
        except (RenderWorkerError, OSError) as error:
            logger.warning("%s: no render worker (%s); rendering in this process", self, error)
            return
        with self._render_lock:
            if self._closed or self._render_worker is not None:
                worker.close()
                return
            self._render_worker, self._worker_recipe = worker, len(recipe)
        logger.info("%s: renders drawn in worker process %d (%d bodies)", self, worker.pid, worker.bodies)

    def stop_render_worker(self) -> None:
        """Render in this process again (idempotent)."""
        with self._render_lock:
            worker, self._render_worker = self._render_worker, None
        if worker is not None:
            worker.close()

    def _body_states(self) -> tuple[tuple[int, ...], list[BodyState]]:
        """Body ids, and each body's base pose and movable joint positions; the caller holds the lock."""
        p, client = self._p, self.client
        ids = tuple(p.getBodyUniqueId(i, physicsClientId=client) for i in range(p.getNumBodies(physicsClientId=client)))
        states = []
        for body in ids:
            count = p.getNumJoints(body, physicsClientId=client)
            if self._movable_joints.get(body, (None,))[0] != count:
                movable = [j for j in range(count)
                           if p.getJointInfo(body, j, physicsClientId=client)[2] != p.JOINT_FIXED]
                self._movable_joints[body] = (count, movable)
            joints = self._movable_joints[body][1]
            position, orientation = p.getBasePositionAndOrientation(body, physicsClientId=client)
            values = tuple(s[0] for s in p.getJointStates(body, joints, physicsClientId=client)) if joints else ()
            states.append((tuple(position), tuple(orientation), values))
        return ids, states

    def _worker_for(self, ids: tuple[int, ...]) -> RenderWorker | None:
        """The worker, its mirror brought up to date, if it can draw bodies ``ids``; the caller holds both locks."""
        worker = self._render_worker
        if worker is None:
            return None
        if len(self._recipe) != self._worker_recipe:  # add_object since the last render
            try:
                worker.extend(self._recipe[self._worker_recipe:])
            except RenderWorkerError as error:
                self._worker_failed(error)
                return None
            self._worker_recipe = len(self._recipe)
        if ids != tuple(range(worker.bodies)):
            return None  # bodies made outside add_object (a calibration board): not in the mirror
        return worker

    def _worker_failed(self, error: RenderWorkerError) -> None:
        """Stop using a failed worker (the caller holds the render lock); renders continue in this process."""
        logger.warning("%s: render worker failed (%s); rendering in this process from now on", self, error)
        worker, self._render_worker = self._render_worker, None
        if worker is not None:
            threading.Thread(target=worker.close, name="render-worker-close", daemon=True).start()

    # ---------------------------------------------------------------- stepping
    def add_step_callback(self, callback: Callable[[float], None]) -> None:
        """Call ``callback(sim_time_s)`` before every physics step (controllers hook in here)."""
        with self.lock:
            self._step_callbacks.append(callback)

    def remove_step_callback(self, callback: Callable[[float], None]) -> None:
        """Stop calling ``callback``; unknown callbacks are ignored."""
        with self.lock:
            if callback in self._step_callbacks:
                self._step_callbacks.remove(callback)

    def step(self, n: int = 1) -> None:
        """Advance the physics ``n`` steps now, in the calling thread."""
        for _ in range(int(n)):
            with self.lock:
                self._check_open()
                for callback in list(self._step_callbacks):
                    callback(self.sim_time_s)
                self._p.stepSimulation(physicsClientId=self.client)
                self.sim_time_s += self.time_step_s
                self._steps += 1
                if self.model.grasp_weld and self._steps % 8 == 0:
                    self._update_grasp_weld()
                self._tick.notify_all()

    def advance(self, duration_s: float, timeout_s: float | None = None) -> None:
        """Let ``duration_s`` of simulated time pass: step here, or wait for the running physics thread."""
        if duration_s <= 0:
            return
        target = self.sim_time_s + duration_s
        if not self.running:
            self.step(int(np.ceil(duration_s / self.time_step_s - 1e-9)))
            return
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._tick:
            while self.sim_time_s < target - 1e-9:
                if not self.running:
                    raise SimWorldError(f"{self}: physics thread stopped while waiting for simulated time")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{self}: simulated time did not reach {target:.3f} s within {timeout_s} s")
                self._tick.wait(0.1 if remaining is None else min(0.1, remaining))

    @property
    def running(self) -> bool:
        """True while the physics thread steps the world."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, real_time_factor: float = 1.0) -> None:
        """Step physics in a background thread; ``real_time_factor`` 1 = real time, 0 = flat out."""
        if real_time_factor < 0:
            raise ValueError(f"real_time_factor must be >= 0, got {real_time_factor}")
        if self.running:
            raise SimWorldError(f"{self}: physics thread already running")
        self._check_open()
        self.real_time_factor = float(real_time_factor)
        self._stop_thread.clear()
        self._thread = threading.Thread(target=self._run, name=f"sim-physics-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the physics thread (if any) and wait for it."""
        self._stop_thread.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._thread = None

    def _run(self) -> None:
        wall_start = time.monotonic()
        sim_start = self.sim_time_s
        while not self._stop_thread.is_set():
            try:
                self.step(1)
            except SimWorldError:
                break
            if self.real_time_factor > 0:
                # Sleep to the wall time at which this much simulated time is due, so the rate does
                # not drift when a render holds the lock for 100+ ms.
                due = wall_start + (self.sim_time_s - sim_start) / self.real_time_factor
                delay = due - time.monotonic()
                if delay > 0:
                    self._stop_thread.wait(delay)
            else:
                # Give other threads a chance to take the lock between steps.
                time.sleep(0)

    # ---------------------------------------------------------------- life cycle
    def _check_open(self) -> None:
        if self._closed:
            raise SimWorldError(f"simulated world {self.name!r} is closed")

    def close(self) -> None:
        """Stop physics and the render worker, disconnect pybullet and unregister the world (idempotent)."""
        self.stop()
        with self.lock:
            if not self._closed:
                self._closed = True
                self._p.disconnect(physicsClientId=self.client)
        self.stop_render_worker()  # after _closed: a worker still starting in the background sees it
        if self._registered:
            _WORLDS.discard(self.name, self)

    def __enter__(self) -> SimWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def look_at(
    eye: Sequence[float], target: Sequence[float], up: Sequence[float] = (0.0, 0.0, 1.0)
) -> NDArray[np.float64]:
    """``T_base_cam`` of an optical frame at ``eye`` looking at ``target`` (image 'up' toward ``up``)."""
    eye = np.asarray(eye, dtype=np.float64)
    z = np.asarray(target, dtype=np.float64) - eye
    norm = np.linalg.norm(z)
    if norm < 1e-9:
        raise ValueError(f"look_at: eye and target coincide at {eye}")
    z /= norm
    x = np.cross(z, np.asarray(up, dtype=np.float64))
    if np.linalg.norm(x) < 1e-9:
        raise ValueError(f"look_at: viewing direction {z} is parallel to up {up}")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return make_transform(np.column_stack([x, y, z]), eye)


def top_down_grasp(position: Sequence[float], yaw_rad: float) -> NDArray[np.float64]:
    """``T_base_ee`` of a vertical grasp at ``position``: ee z down, fingers closing across ``yaw_rad``."""
    rotation = rpy_to_matrix(np.pi, 0.0, 0.0) @ rpy_to_matrix(0.0, 0.0, -yaw_rad)
    return make_transform(rotation, position)
