"""Planning model of an arm: IK and collision checking (pinocchio + coal) on the robot's kinematic model.

Shared by every CPU backend and the independent judge of every returned path (:mod:`robopin.motion.verify`).
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from robopin.motion.errors import BackendUnavailableError, MotionConfigError, UnknownRobotError
from robopin.motion.types import AttachedObject, Box
from robopin.motion.world import CLOUD_GEOMETRY_NAME, CollisionWorld
from robopin.robots.errors import ArmConfigError
from robopin.robots.kinematics import ArmKinematics

logger = logging.getLogger(__name__)

WORLD_STATES_CACHED = 6
"""Collision worlds whose built geometry a model keeps (a pick-and-place plans against four)."""


@dataclass(frozen=True)
class PlanningRobotSpec:
    """What the planner needs to know about one arm with its gripper.

    ``urdf`` and ``package_dir`` are relative to ``pybullet_data`` unless absolute. ``locked_joints``
    (the gripper) are held at the given positions while planning. The TCP (``ee`` frame) is
    ``tcp_link`` · ``T_link_tcp``; its z axis is the approach direction of the fingers. Limits left
    as None come from the URDF.
    """

    name: str
    urdf: str
    package_dir: str
    arm_joints: tuple[str, ...]
    locked_joints: dict[str, float]
    tcp_link: str
    T_link_tcp: NDArray[np.float64]
    home_q: tuple[float, ...]
    max_acceleration_rad_s2: tuple[float, ...]
    gripper_links: tuple[str, ...] = field(default_factory=tuple)
    lower_rad: tuple[float, ...] | None = None
    upper_rad: tuple[float, ...] | None = None
    max_velocity_rad_s: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.arm_joints)
        for name in ("home_q", "max_acceleration_rad_s2", "lower_rad", "upper_rad", "max_velocity_rad_s"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise MotionConfigError(f"robot {self.name!r}: {name} has {len(value)} values, expected {n}")

    def resolve(self, relative: str) -> Path:
        """Absolute path of a file named relative to pybullet_data."""
        path = Path(relative)
        if path.is_absolute():
            return path
        import pybullet_data

        return Path(pybullet_data.getDataPath()) / path


def _planning_limit_margin_rad() -> float:
    from robopin.robots.safety import SafetyConfig

    # The arm's safety layer refuses states within position_margin_rad of a limit; plan inside twice that
    # band so a planned goal or IK solution is never refused a few mrad from a limit.
    return 2.0 * SafetyConfig().position_margin_rad


PLANNING_LIMIT_MARGIN_RAD = _planning_limit_margin_rad()


def robot_spec(name: str) -> PlanningRobotSpec:
    """The planning description of robot ``name``, built from :mod:`robopin.robots.description`.

    Joint names, limits, TCP, home and acceleration limits are the shared description's, so the
    planner, the drivers and the simulator agree on what a joint state means.
    """
    from robopin.robots.description import UnknownRobotDescriptionError, load_description, pybullet_data_path

    try:
        description = load_description(name)
    except UnknownRobotDescriptionError as exc:
        raise UnknownRobotError(str(exc)) from None
    # Relative to pybullet_data, as the generated cuRobo configs name them.
    root = pybullet_data_path()
    return PlanningRobotSpec(
        name=name,
        urdf=str(_relative_to(description.urdf_path, root)),
        package_dir=str(_relative_to(description.package_dir, root)),
        arm_joints=tuple(description.joint_names),
        locked_joints=dict.fromkeys(description.gripper_joints, description.gripper_open_position),
        tcp_link=description.tcp_link,
        T_link_tcp=np.asarray(description.T_link_tcp, dtype=np.float64),
        home_q=tuple(float(v) for v in description.home_rad),
        max_acceleration_rad_s2=tuple(float(v) for v in description.acceleration_rad_s2),
        gripper_links=description.gripper_links,
        lower_rad=tuple(float(v) + PLANNING_LIMIT_MARGIN_RAD for v in description.lower_rad),
        upper_rad=tuple(float(v) - PLANNING_LIMIT_MARGIN_RAD for v in description.upper_rad),
        max_velocity_rad_s=tuple(float(v) for v in description.velocity_rad_s),
    )


def _relative_to(path: Path, root: Path) -> Path:
    try:
        return Path(path).relative_to(root)
    except ValueError:
        return Path(path)


def _import_pinocchio():
    try:
        import coal
        import pinocchio
    except ImportError as exc:  # pragma: no cover - exercised only without the wheels
        raise BackendUnavailableError(f"the CPU planning model needs pin and coal: {exc}") from exc
    return pinocchio, coal


class RobotModel:
    """Kinematics and collision checking of one arm (gripper locked) in a collision world.

    Not thread-safe: each planner owns one. ``padding_m`` inflates every world obstacle for the
    planner's own checks; :meth:`in_collision` accepts another margin so the verifier can judge
    with zero padding.
    """

    def __init__(self, spec: PlanningRobotSpec, *, self_collision_samples: int = 300, seed: int = 0) -> None:
        pin, _ = _import_pinocchio()
        self._pin = pin
        self.spec = spec
        try:
            self.kinematics = ArmKinematics(
                spec.resolve(spec.urdf),
                joint_names=spec.arm_joints,
                tcp_link=spec.tcp_link,
                T_link_tcp=spec.T_link_tcp,
                locked_joints=spec.locked_joints,
                package_dir=spec.resolve(spec.package_dir),
            )
        except ArmConfigError as exc:
            raise MotionConfigError(f"robot {spec.name!r}: {exc}") from None
        self.model, self._robot_geom = self.kinematics.model, self.kinematics.geometry
        self._link_meshes = {obj.name: obj.geometry for obj in self._robot_geom.geometryObjects}
        # Check with each link's convex hull: a triangle mesh is only a surface, so an obstacle (a
        # cloud voxel) wholly inside a link would go unseen; the hull is solid and slightly larger.
        # buildConvexHull, not buildConvexRepresentation: that one "does not compute a convex hull"
        # (coal BVH_model.h), and GJK hill-climbing a non-convex mesh's vertex graph misses contacts.
        for obj in self._robot_geom.geometryObjects:
            mesh = obj.geometry.clone()
            mesh.buildConvexHull(False, "Qt")
            obj.geometry = mesh.convex
        self.joint_names = spec.arm_joints
        self.dof = self.model.nq
        self.lower = np.array(spec.lower_rad or self.model.lowerPositionLimit, dtype=np.float64)
        self.upper = np.array(spec.upper_rad or self.model.upperPositionLimit, dtype=np.float64)
        self.max_velocity = np.array(spec.max_velocity_rad_s or self.model.velocityLimit, dtype=np.float64)
        # The shared description may be stricter than the URDF (FR3): the model clamps IK to it too.
        self.model.lowerPositionLimit = self.lower
        self.model.upperPositionLimit = self.upper
        self.max_acceleration = np.array(spec.max_acceleration_rad_s2, dtype=np.float64)
        self.home = np.array(spec.home_q, dtype=np.float64)
        self.data = self.kinematics.data
        self._tcp_frame = self.kinematics.tcp_frame
        self._T_link_tcp = self.kinematics.T_link_tcp
        self._rng = np.random.default_rng(seed)
        self._self_pairs = self._find_self_collision_pairs(self_collision_samples)
        self._base_reach = self._joint_reach = self._reach_of(self._robot_vertices_by_joint())
        self._world: CollisionWorld | None = None
        self._world_version = -1
        self._padding = -1.0
        self.padding_m = 0.0
        self._geom = None
        self._geom_data = None
        self._world_states: collections.OrderedDict[tuple[int, float], tuple] = collections.OrderedDict()
        self.set_world(CollisionWorld(), padding_m=0.0)

    # --- kinematics -------------------------------------------------------------------------------

    def forward_kinematics(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        """``T_base_ee`` of the TCP at joint configuration ``q``."""
        return self.kinematics.forward_kinematics(q)

    def within_limits(self, q: NDArray[np.float64], tolerance: float = 1e-6) -> bool:
        """True when every joint of ``q`` lies inside its position limits."""
        q = np.asarray(q, dtype=np.float64)
        return bool(np.all(q >= self.lower - tolerance) and np.all(q <= self.upper + tolerance))

    def reseed(self, seed: int) -> None:
        """Restart the random stream used by IK restarts (repeatable benchmarks)."""
        self._rng = np.random.default_rng(seed)

    def random_configuration(self) -> NDArray[np.float64]:
        """A uniformly sampled configuration inside the joint limits (wide limits clipped to ±π)."""
        low = np.maximum(self.lower, -np.pi)
        high = np.minimum(self.upper, np.pi)
        return self._rng.uniform(low, high)

    def inverse_kinematics(
        self,
        T_base_ee: NDArray[np.float64],
        q_seed: NDArray[np.float64],
        *,
        position_tolerance_m: float = 1e-3,
        orientation_tolerance_rad: float = 1e-2,
        max_iterations: int = 200,
        restarts: int = 20,
        collision_free: bool = True,
    ) -> NDArray[np.float64] | None:
        """A joint configuration reaching ``T_base_ee`` (closest to ``q_seed`` first), or None.

        Damped least squares on pinocchio's frame Jacobian from the seed, then from random restarts;
        with ``collision_free`` a solution in collision with the current world is discarded.
        """
        pin = self._pin
        target = pin.SE3(np.asarray(T_base_ee, dtype=np.float64) @ np.linalg.inv(self._T_link_tcp))
        seed = np.asarray(q_seed, dtype=np.float64)
        # The caller's seed first (the nearest solution), then home (a good top-down posture), then random.
        seeds = [seed, self.home]
        for attempt in range(restarts + 2):
            q = seeds[attempt].copy() if attempt < len(seeds) else self.random_configuration()
            if not self._solve_ik(q, target, position_tolerance_m, orientation_tolerance_rad, max_iterations):
                continue
            q = self._nearest_equivalent(self._last_ik, seed)
            if collision_free and self.in_collision(q):
                continue
            return q
        return None

    def _solve_ik(self, q, target, pos_tol: float, rot_tol: float, max_iterations: int) -> bool:
        """Damped least squares from ``q``; the result is left in ``self._last_ik``."""
        pin = self._pin
        best = np.inf
        for iteration in range(max_iterations):
            pin.framesForwardKinematics(self.model, self.data, q)
            current = self.data.oMf[self._tcp_frame]
            error = pin.log6(current.actInv(target)).vector
            position_error, rotation_error = np.linalg.norm(error[:3]), np.linalg.norm(error[3:])
            if position_error < pos_tol and rotation_error < rot_tol:
                self._last_ik = q
                return True
            # Give up on a seed that stopped improving (stuck at a limit or a singularity).
            norm = position_error + 0.1 * rotation_error
            if iteration and iteration % 25 == 0:
                if norm > 0.95 * best:
                    return False
                best = norm
            J = pin.computeFrameJacobian(self.model, self.data, q, self._tcp_frame, pin.LOCAL)
            J = -pin.Jlog6(current.actInv(target)) @ J
            step = -J.T @ np.linalg.solve(J @ J.T + 1e-4 * np.eye(6), error)
            largest = np.max(np.abs(step))
            if largest > 0.4:  # keep each step inside the region where the linearisation holds
                step *= 0.4 / largest
            q = np.clip(q + step, self.lower, self.upper)
        return False

    def _nearest_equivalent(self, q: NDArray[np.float64], reference: NDArray[np.float64]) -> NDArray[np.float64]:
        q = q.copy()
        for i in range(self.dof):
            while q[i] - reference[i] > np.pi and q[i] - 2 * np.pi >= self.lower[i]:
                q[i] -= 2 * np.pi
            while reference[i] - q[i] > np.pi and q[i] + 2 * np.pi <= self.upper[i]:
                q[i] += 2 * np.pi
        return q

    # --- collision --------------------------------------------------------------------------------

    def _robot_link_of(self, geometry_index: int) -> str:
        return self._robot_geom.geometryObjects[geometry_index].name.rsplit("_", 1)[0]

    def _find_self_collision_pairs(self, samples: int) -> list[tuple[int, int]]:
        """Pairs of robot geometries to check against each other, found the way MoveIt's setup does.

        Pairs on adjacent joints, or touching in (nearly) every random sample — meshes that overlap
        at a joint — can never tell a real self-collision and are dropped; so are pairs within the
        locked gripper, which move together.
        """
        pin = self._pin
        geom = self._robot_geom
        count = len(geom.geometryObjects)
        candidates = []
        gripper = set(self.spec.gripper_links)
        for a in range(count):
            for b in range(a + 1, count):
                ja, jb = geom.geometryObjects[a].parentJoint, geom.geometryObjects[b].parentJoint
                if ja == jb or abs(ja - jb) <= 1:
                    continue
                if self._robot_link_of(a) in gripper and self._robot_link_of(b) in gripper:
                    continue
                candidates.append((a, b))
        probe = pin.GeometryModel()
        for obj in geom.geometryObjects:
            probe.addGeometryObject(obj)
        for a, b in candidates:
            probe.addCollisionPair(pin.CollisionPair(a, b))
        probe_data = pin.GeometryData(probe)
        hits = np.zeros(len(candidates))
        configurations = [self.home] + [self.random_configuration() for _ in range(samples)]
        for q in configurations:
            pin.updateGeometryPlacements(self.model, self.data, probe, probe_data, q)
            pin.computeCollisions(probe, probe_data, False)
            hits += [probe_data.collisionResults[k].isCollision() for k in range(len(candidates))]
        always = hits >= 0.95 * len(configurations)
        pin.updateGeometryPlacements(self.model, self.data, probe, probe_data, self.home)
        pin.computeCollisions(probe, probe_data, False)
        in_home = np.array([probe_data.collisionResults[k].isCollision() for k in range(len(candidates))])
        kept = [
            pair
            for pair, drop_always, drop_home in zip(candidates, always, in_home, strict=True)
            if not (drop_always or drop_home)
        ]
        logger.debug("robot %s: %d of %d self-collision pairs kept", self.spec.name, len(kept), len(candidates))
        return kept

    def set_world(self, world: CollisionWorld, *, padding_m: float | None = None) -> None:
        """Check against ``world`` from now on (rebuilt only when it or the padding changed)."""
        padding = self.padding_m if padding_m is None else float(padding_m)
        if padding < 0.0:
            raise MotionConfigError(f"padding_m must be >= 0, got {padding}")
        if world is self._world and world.version == self._world_version and padding == self._padding:
            return
        # A pick-and-place switches between a few worlds (full, object removed, holding, released)
        # segment after segment: each keeps its built geometry and per-margin checkers.
        cached = self._world_states.get((id(world), padding))
        if cached is not None and cached[0] is world and cached[1] == world.version:
            self._world_states.move_to_end((id(world), padding))
            (_, _, self._geom, self._geom_data, self._obstacle_pairs, self._checkers) = cached
            self._world, self._world_version, self._padding, self.padding_m = world, world.version, padding, padding
            self._update_reach_for(world.attached)
            return
        pin, coal = self._pin, _import_pinocchio()[1]
        geom = pin.GeometryModel()
        robot_ids = [geom.addGeometryObject(obj) for obj in self._robot_geom.geometryObjects]
        for a, b in self._self_pairs:
            geom.addCollisionPair(pin.CollisionPair(a, b))
        obstacle_ids: list[int] = []
        for box in world.boxes.values():
            obstacle_ids.append(
                geom.addGeometryObject(
                    pin.GeometryObject(f"world/{box.name}", 0, pin.SE3(box.T_base_box), coal.Box(*box.size_m))
                )
            )
        if world.points is not None and len(world.points):
            octree = coal.makeOctree(np.ascontiguousarray(world.points), world.voxel_size_m)
            obstacle_ids.append(
                geom.addGeometryObject(pin.GeometryObject(CLOUD_GEOMETRY_NAME, 0, pin.SE3.Identity(), octree))
            )
        # The base link never moves and stands on the table it is mounted to: checking it against the
        # world would only report the mount itself.
        moving_ids = [rid for rid in robot_ids if self._robot_geom.geometryObjects[rid].parentJoint != 0]
        for rid in moving_ids:
            for oid in obstacle_ids:
                geom.addCollisionPair(pin.CollisionPair(rid, oid))
        if world.attached is not None:
            attached_id = geom.addGeometryObject(self._attached_geometry(world.attached))
            for oid in obstacle_ids:
                geom.addCollisionPair(pin.CollisionPair(attached_id, oid))
            # The held object must not sweep through the arm either (the hand holding it is exempt).
            gripper = set(self.spec.gripper_links) | {self.spec.tcp_link}
            for rid in moving_ids:
                if self._robot_link_of(rid) not in gripper:
                    geom.addCollisionPair(pin.CollisionPair(rid, attached_id))
        geom_data = pin.GeometryData(geom)
        obstacle_set = set(obstacle_ids)
        for k, pair in enumerate(geom.collisionPairs):
            if pair.second in obstacle_set:
                geom_data.collisionRequests[k].security_margin = padding
        self._geom, self._geom_data = geom, geom_data
        self._world, self._world_version, self._padding, self.padding_m = world, world.version, padding, padding
        self._obstacle_pairs = [k for k, p in enumerate(geom.collisionPairs) if p.second in obstacle_set]
        self._checkers = {}
        # The entry holds the world itself, so its id cannot be reused while cached.
        self._world_states[(id(world), padding)] = (
            world, world.version, geom, geom_data, self._obstacle_pairs, self._checkers
        )
        while len(self._world_states) > WORLD_STATES_CACHED:
            self._world_states.popitem(last=False)
        self._update_reach_for(world.attached)

    def _update_reach_for(self, attached: AttachedObject | None) -> None:
        """Widen the displacement bound by a held object's corners (restored when it is released)."""
        if attached is getattr(self, "_reach_attached", None):
            return
        self._reach_attached = attached
        if attached is None:
            self._joint_reach = self._base_reach.copy()
            return
        half = np.asarray(attached.size_m) / 2.0
        corners = np.array(
            [[x, y, z] for x in (-half[0], half[0]) for y in (-half[1], half[1]) for z in (-half[2], half[2])]
        )
        T = self.T_joint_tcp() @ attached.T_ee_object
        joint = self.model.frames[self._tcp_frame].parentJoint
        # The maximum over robot and object points is the larger of the two maxima over the same sampled
        # configurations: only the 8 corners need the sweep, not the whole robot again.
        self._joint_reach = np.maximum(self._base_reach, self._reach_of({joint: corners @ T[:3, :3].T + T[:3, 3]}))

    def T_joint_tcp(self) -> NDArray[np.float64]:
        """The TCP in the frame of the joint that carries it (where geometry placements are expressed)."""
        return self.model.frames[self._tcp_frame].placement.homogeneous @ self._T_link_tcp

    def _attached_geometry(self, attached: AttachedObject):
        pin, coal = self._pin, _import_pinocchio()[1]
        frame = self.model.frames[self._tcp_frame]
        placement = self.T_joint_tcp() @ attached.T_ee_object
        return pin.GeometryObject(
            f"attached/{attached.name}", frame.parentJoint, pin.SE3(placement), coal.Box(*attached.size_m)
        )

    def _checker(self, margin_m: float, *, self_margin_m: float | None = None):
        """Geometry data with obstacle pairs at ``margin_m`` (and the robot's own pairs at ``self_margin_m``, by
        default in contact only) and its broadphase manager.

        Cached per pair of margins. The dynamic AABB tree culls far-apart pairs in C++, which halves a check
        against a point cloud; it honours the security margin (a pair counts when closer than it).
        """
        key = (margin_m, self_margin_m)
        checker = self._checkers.get(key)
        if checker is None:
            pin = self._pin
            data = pin.GeometryData(self._geom)
            obstacle = set(self._obstacle_pairs)
            for k in range(len(self._geom.collisionPairs)):
                if k in obstacle:
                    data.collisionRequests[k].security_margin = margin_m
                elif self_margin_m is not None:
                    data.collisionRequests[k].security_margin = self_margin_m
            manager = pin.BroadPhaseManager_DynamicAABBTreeCollisionManager(self.model, self._geom, data)
            checker = self._checkers[key] = (data, manager)
        return checker

    def within_clearance(self, q: NDArray[np.float64], clearance_m: float, world_clearance_m: float | None = None
                         ) -> bool:
        """True when the robot's own pairs (links, and the object it holds) are at least ``clearance_m`` apart at
        ``q`` and the robot and the world at least ``world_clearance_m`` (default ``clearance_m``)."""
        world = float(clearance_m if world_clearance_m is None else world_clearance_m)
        _, manager = self._checker(world, self_margin_m=float(clearance_m))
        return not self._pin.computeCollisions(self.model, self.data, manager, np.asarray(q, dtype=np.float64), True)

    def displacement_bound(self, q_a: NDArray[np.float64], q_b: NDArray[np.float64]) -> float:
        """Upper bound (m) on how far any point of the robot (or held object) moves from ``q_a`` to ``q_b``.

        Along the straight joint-space segment a point at most ``r_i`` from joint ``i`` moves at most
        ``r_i · |Δq_i|`` by that joint, so ``Σ r_i |Δq_i|`` bounds every point's travel.
        """
        return float(self._joint_reach @ np.abs(np.asarray(q_b) - np.asarray(q_a)))

    def _robot_vertices_by_joint(self) -> dict[int, NDArray[np.float64]]:
        """Every collision vertex of the robot, in the frame of the joint that carries it."""
        points_by_joint: dict[int, list[NDArray[np.float64]]] = {}
        for obj in self._robot_geom.geometryObjects:
            T = obj.placement.homogeneous
            vertices = np.asarray(obj.geometry.points(), dtype=np.float64) @ T[:3, :3].T + T[:3, 3]
            points_by_joint.setdefault(obj.parentJoint, []).append(vertices)
        return {j: np.vstack(v) for j, v in points_by_joint.items()}

    def _reach_of(self, points_by_joint: dict[int, NDArray[np.float64]]) -> NDArray[np.float64]:
        """``r_i``: the farthest any of these points downstream of joint ``i`` gets from that joint's origin.

        Maximised over a fixed set of sampled configurations (the same every call, so maxima of
        separate point sets combine with ``np.maximum``) with a 10 % margin; the chain is serial, so
        the points on joint ``j >= i`` are downstream of joint ``i``.
        """
        rotations, translations = self._reach_frames()
        reach = np.zeros(self.dof)
        for j, pts in points_by_joint.items():
            # Every sample at once: (samples, points, 3) in the base frame.
            world_points = np.einsum("sab,nb->sna", rotations[:, j], pts) + translations[:, j, None, :]
            for i in range(1, min(j, self.dof) + 1):
                distance = np.linalg.norm(world_points - translations[:, i, None, :], axis=2)
                reach[i - 1] = max(reach[i - 1], float(np.max(distance)))
        return 1.1 * reach

    def _reach_frames(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Joint placements (samples × joints) at the fixed configurations :meth:`_reach_of` maximises over."""
        frames = getattr(self, "_reach_frames_cache", None)
        if frames is None:
            pin = self._pin
            rng = np.random.default_rng(12345)
            low, high = np.maximum(self.lower, -np.pi), np.minimum(self.upper, np.pi)
            rotations, translations = [], []
            for q in [self.home, *rng.uniform(low, high, size=(64, self.dof))]:
                pin.forwardKinematics(self.model, self.data, q)
                rotations.append([np.array(self.data.oMi[j].rotation) for j in range(self.model.njoints)])
                translations.append([np.array(self.data.oMi[j].translation) for j in range(self.model.njoints)])
            frames = self._reach_frames_cache = (np.array(rotations), np.array(translations))
        return frames

    def _compute(self, q: NDArray[np.float64], margin_m: float | None, stop_at_first: bool) -> bool:
        pin = self._pin
        q = np.asarray(q, dtype=np.float64)
        margin = self._padding if margin_m is None else float(margin_m)
        data, manager = self._checker(margin)
        if stop_at_first:
            return bool(pin.computeCollisions(self.model, self.data, manager, q, True))
        self._geom_data = data
        return bool(pin.computeCollisions(self.model, self.data, self._geom, data, q, False))

    def in_collision(self, q: NDArray[np.float64], *, margin_m: float | None = None) -> bool:
        """True when ``q`` touches the world (inflated by ``margin_m``, default the padding) or itself."""
        return self._compute(q, margin_m, True)

    def colliding_pairs(self, q: NDArray[np.float64], *, margin_m: float | None = None) -> list[tuple[str, str]]:
        """Names of every geometry pair in contact at ``q`` (for messages and debugging)."""
        self._compute(q, margin_m, False)
        names = []
        for k, pair in enumerate(self._geom.collisionPairs):
            if self._geom_data.collisionResults[k].isCollision():
                names.append(
                    (self._geom.geometryObjects[pair.first].name, self._geom.geometryObjects[pair.second].name)
                )
        return names

    def hand_world_contacts(self, q: NDArray[np.float64], *, margin_m: float | None = None) -> list[tuple[str, str]]:
        """The pairs of :meth:`colliding_pairs` between a gripper link (or the object it holds) and a world
        obstacle.

        Where the hand and its load are depends on the TCP pose alone, so these contacts hold for every
        arm configuration reaching that pose.
        """
        hand = set(self.hand_links())
        return [
            (a, b)
            for a, b in self.colliding_pairs(q, margin_m=margin_m)
            if b.startswith("world/") and (a.rsplit("_", 1)[0] in hand or a.startswith("attached/"))
        ]

    def nearest_cloud_points(
        self, q: NDArray[np.float64], geometry_name: str, count: int = 5
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The world point-cloud points (base frame) nearest the bounding box of one robot or held-object
        geometry at ``q``, with their distances to that box (0 inside), nearest first.

        The octree contact carries no position; this says *where* a ``…↔world/point_cloud`` contact is
        (a cloud point becomes a voxel-sized cube, so a contact point can lie up to a voxel outside).
        """
        world = self._world
        if world is None or world.points is None or not len(world.points):
            return np.zeros((0, 3)), np.zeros(0)
        self._compute(q, None, False)
        index = self._geom.getGeometryId(geometry_name)
        if index >= len(self._geom.geometryObjects):
            return np.zeros((0, 3)), np.zeros(0)
        geometry = self._geom.geometryObjects[index].geometry
        geometry.computeLocalAABB()
        low, high = np.asarray(geometry.aabb_local.min_), np.asarray(geometry.aabb_local.max_)
        placement = self._geom_data.oMg[index]
        points = np.asarray(world.points)
        local = (points - placement.translation) @ placement.rotation
        distance = np.linalg.norm(np.maximum(low - local, 0.0) + np.maximum(local - high, 0.0), axis=1)
        order = np.argsort(distance)[:count]
        return points[order], distance[order]

    def ignored_self_collision_links(self) -> list[tuple[str, str]]:
        """Link pairs never checked against each other (adjacent, always touching, or both in the hand)."""
        geom = self._robot_geom
        links = sorted({self._robot_link_of(i) for i in range(len(geom.geometryObjects))})
        kept = {frozenset((self._robot_link_of(a), self._robot_link_of(b))) for a, b in self._self_pairs}
        return [(a, b) for i, a in enumerate(links) for b in links[i + 1 :] if frozenset((a, b)) not in kept]

    def static_links(self) -> list[str]:
        """Links fixed to the base (never checked against the world, which they are mounted on)."""
        geom = self._robot_geom
        return sorted({self._robot_link_of(i) for i, obj in enumerate(geom.geometryObjects) if obj.parentJoint == 0})

    def hand_links(self) -> list[str]:
        """Links of the gripper (and the TCP link), exempt from contact with a held object."""
        return sorted(set(self.spec.gripper_links) | {self.spec.tcp_link})

    def link_meshes(self) -> dict[str, tuple[NDArray[np.float64], NDArray[np.int64]]]:
        """Collision meshes (vertices in the link's joint frame, triangle indices) of every robot link."""
        result = {}
        vertices = self.link_vertices()
        for obj in self._robot_geom.geometryObjects:
            g = self._link_meshes[obj.name]
            triangles = np.array([[g.tri_indices(i)[j] for j in range(3)] for i in range(g.num_tris)], dtype=np.int64)
            result[obj.name] = (vertices[obj.name], triangles)
        return result

    def link_vertices(self) -> dict[str, NDArray[np.float64]]:
        """Collision-mesh vertices of every robot link, in that link's joint frame (for sphere fitting)."""
        result: dict[str, NDArray[np.float64]] = {}
        for obj in self._robot_geom.geometryObjects:
            vertices = np.asarray(self._link_meshes[obj.name].vertices(), dtype=np.float64)
            T = obj.placement.homogeneous
            result[obj.name] = vertices @ T[:3, :3].T + T[:3, 3]
        return result

    def geometry_frames(self, q: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
        """``T_base_geometry`` of every robot collision geometry at ``q``."""
        pin = self._pin
        pin.forwardKinematics(self.model, self.data, np.asarray(q, dtype=np.float64))
        return {obj.name: self.data.oMi[obj.parentJoint].homogeneous for obj in self._robot_geom.geometryObjects}


__all__ = ["Box", "PlanningRobotSpec", "RobotModel", "robot_spec"]
