"""Collision-sphere models of robot links, fitted to and checked against the URDF collision meshes.

cuRobo represents the robot by spheres per link; it ships them for its own Franka URDF but not for
the URDFs robopin plans and checks with, nor for the xArm, so the models are fitted here. robopin's
mesh check holds each link to its mesh's convex hull, and so do the spheres: every sphere is centred
inside the hull, at most a per-link overhang out of it, and shrunk by that overhang (cuRobo's
``self_collision_buffer``) lies inside it. cuRobo then checks self-collision on every link pair
robopin's mesh check does, without reporting a pose that check calls free. The same spheres mask the
robot out of depth point clouds (:meth:`RobotSpheres.mask_points`).

Regenerate a shipped file with ``python -m robopin.motion.curobo.spheres xarm6 robots/xarm6.yml``
(``panda`` for ``robots/panda.yml``, which FR3 shares).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import yaml
from numpy.typing import NDArray

from robopin.motion.errors import MotionConfigError

ROBOT_CONFIG_DIR = Path(__file__).parent / "robots"


@dataclass(frozen=True)
class Sphere:
    """A sphere in its link's own (URDF) frame, the frame cuRobo reads ``collision_spheres[link]`` in."""

    center: tuple[float, float, float]
    radius: float


# Overhangs tried per link, smallest first: a link gets the smallest at which every one of its meshes
# is covered by at most ``max_spheres`` spheres.
OVERHANGS_M = (0.004, 0.006, 0.008, 0.010, 0.013, 0.016, 0.020, 0.025, 0.030)
# Covered means inside the sphere by this much, so points between the fitting samples are covered too.
_COVER_SLACK_M = 0.001


def _plane_values(points: NDArray[np.float64], normals: NDArray[np.float64], offsets: NDArray[np.float64]):
    """``normals · p + offsets`` for every point and plane, elementwise: a BLAS product rounds differently
    from machine to machine, and a fit that tips on the last bit would not reproduce the shipped file."""
    return np.sum(points[:, None, :] * normals[None, :, :], axis=2) + offsets


@dataclass(frozen=True, eq=False)
class ConvexRegion:
    """A mesh's convex hull as half-spaces ``normals · x + offsets <= 0`` (unit outward normals), plus
    the points a sphere model of the mesh must cover: samples of the hull's surface and of the mesh's."""

    normals: NDArray[np.float64]
    offsets: NDArray[np.float64]
    cover: NDArray[np.float64]
    candidates: NDArray[np.float64]  # sphere centres to choose from, all inside or on the hull

    @classmethod
    def of_mesh(cls, vertices: NDArray[np.float64], triangles: NDArray[np.int64], *, seed: int = 0) -> ConvexRegion:
        from scipy.spatial import ConvexHull

        points = np.asarray(vertices, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != 3 or len(points) < 4:
            raise MotionConfigError(f"need an N×3 vertex array with N >= 4, got shape {points.shape}")
        hull = ConvexHull(points)
        normals, offsets = hull.equations[:, :3], hull.equations[:, 3]
        cover = np.vstack(
            [
                surface_samples(points, hull.simplices, 800, seed=seed),
                surface_samples(points, np.asarray(triangles), 400, seed=seed + 1),
                points[hull.vertices],
            ]
        )
        low, high = points.min(axis=0), points.max(axis=0)
        step = max(float(np.prod(np.maximum(high - low, 1e-3)) / 600.0) ** (1.0 / 3.0), 1e-3)
        axes = [np.arange(lo + step / 2, hi, step) for lo, hi in zip(low, high, strict=True)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
        inside = grid[np.max(_plane_values(grid, normals, offsets), axis=1) < 0.0]
        return cls(normals, offsets, cover, np.vstack([inside, cover[::3]]))

    @cached_property
    def candidate_depth(self) -> NDArray[np.float64]:
        return self.depth(self.candidates)

    @cached_property
    def candidate_distance(self) -> NDArray[np.float64]:
        """Distances between every candidate centre and every cover point (elementwise, see _plane_values)."""
        return np.sqrt(np.sum((self.candidates[:, None, :] - self.cover[None, :, :]) ** 2, axis=2))

    def depth(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """Distance from each point inside the hull to the hull's boundary (0 on or outside it).

        Inside a convex polytope the nearest boundary point lies on the nearest face plane.
        """
        return np.maximum(-np.max(_plane_values(points, self.normals, self.offsets), axis=1), 0.0)


def fit_convex_spheres(region: ConvexRegion, overhang_m: float, max_spheres: int | None = None) -> list[Sphere]:
    """Spheres covering ``region.cover``, each centred inside the hull at depth ``d`` with radius ``d + overhang``.

    No point of such a sphere is farther than ``overhang_m`` from the hull (the segment from the centre
    to the point leaves the hull after at least ``d``), and the sphere of radius ``d`` about the same
    centre lies inside the hull. This is cuRobo's own construction made exact for a convex mesh
    (NVlabs/curobo v0.7.8 ``geom/sphere_fit.py`` ``voxel_fit_mesh``: spheres at voxel centres inside the
    mesh plus surface spheres whose radius inflates the mesh). Centres are chosen greedily, each
    covering the most points not yet covered.
    """
    if overhang_m <= _COVER_SLACK_M:
        raise MotionConfigError(f"overhang must exceed {_COVER_SLACK_M} m, got {overhang_m}")
    centers, depth = region.candidates, region.candidate_depth
    reach = depth + overhang_m - _COVER_SLACK_M
    covers = (region.candidate_distance <= reach[:, None]).astype(np.float32)
    uncovered = np.ones(len(region.cover), dtype=np.float32)
    chosen: list[tuple[NDArray[np.float64], float]] = []
    while uncovered.any() and (max_spheres is None or len(chosen) <= max_spheres):
        counts = covers @ uncovered
        best = int(np.argmax(counts))
        if counts[best] > 0.0:
            chosen.append((centers[best], float(depth[best])))
            uncovered[covers[best] > 0.0] = 0.0
            continue
        # No candidate reaches what is left: a sphere about a left point itself covers it.
        point = region.cover[int(np.argmax(uncovered))]
        point_depth = float(region.depth(point[None])[0])
        chosen.append((point, point_depth))
        reach_left = point_depth + overhang_m - _COVER_SLACK_M
        uncovered[np.linalg.norm(region.cover - point, axis=1) <= reach_left] = 0.0
    return [Sphere(tuple(float(c) for c in center), d + overhang_m) for center, d in chosen]


def fit_link_spheres(
    regions: list[ConvexRegion], *, max_spheres: int = 20, overhangs_m: tuple[float, ...] = OVERHANGS_M
) -> tuple[float, list[Sphere]]:
    """The overhang of ``overhangs_m`` at which each of a link's meshes needs at most ``max_spheres``
    spheres, bisected (the count falls as the overhang grows; the largest if none fits), and the spheres."""
    if not overhangs_m:
        raise MotionConfigError("overhangs_m must not be empty")

    def fit(overhang: float, limit: int | None) -> list[list[Sphere]] | None:
        groups = []
        for region in regions:
            groups.append(fit_convex_spheres(region, overhang, limit))
            if limit is not None and len(groups[-1]) > limit:
                return None
        return groups

    # The sphere count falls as the overhang grows: bisect for the smallest overhang that fits.
    low, high = 0, len(overhangs_m) - 1
    best = fit(overhangs_m[high], None)
    while low < high:
        middle = (low + high) // 2
        groups = fit(overhangs_m[middle], max_spheres)
        if groups is None:
            low = middle + 1
        else:
            high, best = middle, groups
    return overhangs_m[high], [sphere for group in best for sphere in group]


def surface_samples(vertices: NDArray[np.float64], triangles: NDArray[np.int64], count: int, seed: int = 0):
    """``count`` points sampled uniformly (by area) on a triangle mesh."""
    rng = np.random.default_rng(seed)
    corners = vertices[triangles]
    areas = 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    chosen = rng.choice(len(triangles), size=count, p=areas / areas.sum())
    u, v = rng.random(count), rng.random(count)
    flip = u + v > 1.0
    u[flip], v[flip] = 1.0 - u[flip], 1.0 - v[flip]
    c = corners[chosen]
    return c[:, 0] + u[:, None] * (c[:, 1] - c[:, 0]) + v[:, None] * (c[:, 2] - c[:, 0])


def link_placements(robot) -> dict[str, tuple[int, NDArray[np.float64]]]:
    """Per robot link with collision geometry: (pinocchio joint carrying it, ``T_joint_link``).

    After the gripper is locked, every gripper link hangs off joint6 with a fixed placement; spheres
    are stored in each link's own frame, so they are moved through this placement.
    """
    model = robot.model
    result = {}
    for name in robot.link_vertices():
        link = name.rsplit("_", 1)[0]
        if link in result:
            continue
        frame = model.getFrameId(link)
        if frame >= model.nframes:
            raise MotionConfigError(f"robot {robot.spec.name!r}: link {link!r} has no frame in the model")
        result[link] = (int(model.frames[frame].parentJoint), model.frames[frame].placement.homogeneous.copy())
    return result


class RobotSpheres:
    """Sphere model of a whole robot: per-link spheres (link frames) placed with pinocchio kinematics."""

    def __init__(self, robot, spheres: dict[str, list[Sphere]], overhangs: dict[str, float] | None = None) -> None:
        self.robot = robot
        self.spheres = spheres
        # Per link: no sphere reaches farther than this outside the link's convex hull, and each sphere
        # shrunk by it lies inside the hull (None where unknown).
        self.overhangs = dict(overhangs or {})
        self._placements = link_placements(robot)

    @classmethod
    def fit(cls, robot, **kwargs) -> RobotSpheres:
        """Fit spheres to every collision mesh of ``robot`` (a RobotModel), in each link's own frame.

        robopin checks collisions with each mesh's convex hull (RobotModel), so the spheres are fitted
        to the hull; ``kwargs`` go to :func:`fit_link_spheres`.
        """
        placements = link_placements(robot)
        regions: dict[str, list[ConvexRegion]] = {}
        for name, (vertices, triangles) in robot.link_meshes().items():
            link = name.rsplit("_", 1)[0]
            T_link_joint = np.linalg.inv(placements[link][1])
            local = vertices @ T_link_joint[:3, :3].T + T_link_joint[:3, 3]
            regions.setdefault(link, []).append(ConvexRegion.of_mesh(local, triangles))
        per_link, overhangs = {}, {}
        for link, link_regions in regions.items():
            overhangs[link], per_link[link] = fit_link_spheres(link_regions, **kwargs)
        return cls(robot, per_link, overhangs)

    def link_frames(self, q: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
        """``T_base_link`` of every link with spheres at ``q`` (pinocchio)."""
        import pinocchio as pin

        pin.forwardKinematics(self.robot.model, self.robot.data, np.asarray(q, dtype=np.float64))
        return {
            link: self.robot.data.oMi[joint].homogeneous @ T_joint_link
            for link, (joint, T_joint_link) in self._placements.items()
        }

    def world_spheres(self, q: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Centres (M×3, base frame) and radii of every sphere at configuration ``q``."""
        frames = self.link_frames(q)
        centers, radii = [], []
        for link, spheres in self.spheres.items():
            T = frames[link]
            for s in spheres:
                centers.append(T[:3, :3] @ np.asarray(s.center) + T[:3, 3])
                radii.append(s.radius)
        return np.asarray(centers), np.asarray(radii)

    def mask_points(self, points: NDArray[np.float64], q: NDArray[np.float64], padding_m: float = 0.02):
        """Boolean mask of the points that belong to the robot (inside a padded sphere) at ``q``."""
        points = np.asarray(points, dtype=np.float64)
        centers, radii = self.world_spheres(q)
        inside = np.zeros(len(points), dtype=bool)
        for c, r in zip(centers, radii, strict=True):
            inside |= np.sum((points - c) ** 2, axis=1) <= (r + padding_m) ** 2
        return inside

    def to_curobo_spheres(self) -> dict[str, list[dict[str, object]]]:
        """The ``collision_spheres`` mapping of a cuRobo robot config."""
        return {
            link: [{"center": [round(c, 4) for c in s.center], "radius": round(s.radius, 4)} for s in spheres]
            for link, spheres in self.spheres.items()
        }

    @classmethod
    def shipped_or_fit(cls, robot) -> RobotSpheres:
        """The spheres of the robot's shipped cuRobo config when it has one that covers every link with a
        mesh (a fit costs seconds of CPU at every planner start; the shipped file is that fit, held equal
        by the tests), else a fresh fit."""
        name = robot.spec.name
        if name in ROBOT_FILES:
            mapping = load_robot_config(name)["robot_cfg"]["kinematics"]["collision_spheres"]
            shipped = cls.from_curobo_spheres(robot, mapping)
            meshed = {mesh.rsplit("_", 1)[0] for mesh in robot.link_meshes()}
            if meshed <= set(shipped.spheres):
                return shipped
        return cls.fit(robot)

    @classmethod
    def from_curobo_spheres(cls, robot, mapping: dict[str, list[dict[str, object]]]) -> RobotSpheres:
        """Read back a ``collision_spheres`` mapping."""
        return cls(
            robot,
            {
                link: [Sphere(tuple(float(c) for c in s["center"]), float(s["radius"])) for s in spheres]
                for link, spheres in mapping.items()
                if link in link_placements(robot)
            },
        )


# cuRobo rounds nothing; the config does (4 decimals), which can move a sphere's surface out by up to
# 0.05 mm (radius) + 0.09 mm (centre): the self-collision shrink takes that much more.
_ROUNDING_M = 0.0002


def self_collision_buffers(spheres: RobotSpheres) -> dict[str, float]:
    """cuRobo ``self_collision_buffer`` per link: minus the link's overhang, so that for self-collision
    every sphere is the one of radius ``depth`` inside the link's convex hull.

    cuRobo v0.7.8 adds the buffer to each sphere's radius in the self-collision kernel only
    (``cuda_robot_generator.py``: ``self_collision_offset``; it subtracts ``collision_sphere_buffer``
    there the same way). Two links' shrunk spheres can then overlap only where their hulls overlap, i.e.
    where robopin's mesh check sees a collision too: no false self-collision report on any pair, so
    only pairs that check cannot tell apart (adjacent, always touching, within the locked hand) are
    ignored. The full spheres, at most the overhang outside the hull, are what the world sees.
    """
    missing = sorted(link for link in spheres.spheres if spheres.overhangs.get(link) is None)
    if missing:
        raise MotionConfigError(f"no fitted overhang known for links {missing}; fit the spheres (RobotSpheres.fit)")
    return {link: -round(spheres.overhangs[link] + _ROUNDING_M, 4) for link in spheres.spheres}


def curobo_robot_config(robot, spheres: RobotSpheres) -> dict[str, object]:
    """A cuRobo v1 ``robot_cfg`` for ``robot`` (RobotModel) with the given sphere model.

    Paths are relative to pybullet_data and resolved at load time
    (:func:`robopin.motion.curobo.robot_config.prepare_robot_config`). The ee_link is the TCP's link;
    the planner converts TCP goals with the offset between them. Only joints cuRobo knows by name are
    locked (a mimic joint follows the joint it copies).
    """
    from robopin.motion.curobo.robot_config import ATTACHED_OBJECT_LINK, read_urdf_tree

    spec = robot.spec
    tree = read_urdf_tree(spec.resolve(spec.urdf))
    lock = {name: float(v) for name, v in spec.locked_joints.items() if tree.joints[name].mimic_of is None}
    collision_links = [*sorted(spheres.spheres), ATTACHED_OBJECT_LINK]
    # The pairs robopin's own mesh check leaves out, and nothing else (see self_collision_buffers).
    pairs = {frozenset(p) for p in robot.ignored_self_collision_links()}
    # A held object touches the hand that holds it.
    pairs |= {frozenset((link, ATTACHED_OBJECT_LINK)) for link in robot.hand_links() if link in spheres.spheres}
    buffers = self_collision_buffers(spheres)
    order = {link: k for k, link in enumerate(collision_links)}
    ignore: dict[str, list[str]] = {}
    for pair in sorted(pairs, key=lambda p: sorted(order[x] for x in p)):
        a, b = sorted(pair, key=order.__getitem__)
        ignore.setdefault(a, []).append(b)
    for values in ignore.values():
        values.sort(key=order.__getitem__)
    joint_names = list(spec.arm_joints)
    return {
        "robot_cfg": {
            "kinematics": {
                "urdf_path": spec.urdf,
                "asset_root_path": spec.package_dir,
                "base_link": tree.root_link,
                "ee_link": spec.tcp_link,
                "collision_link_names": collision_links,
                "collision_spheres": spheres.to_curobo_spheres(),
                "collision_sphere_buffer": 0.004,
                "self_collision_ignore": {k: ignore[k] for k in sorted(ignore, key=order.__getitem__)},
                "self_collision_buffer": {link: buffers.get(link, 0.0) for link in collision_links},
                "mesh_link_names": sorted(spheres.spheres),
                # cuRobo fills the attached_object link with spheres when an object is attached.
                "extra_collision_spheres": {ATTACHED_OBJECT_LINK: 4},
                "extra_links": {
                    ATTACHED_OBJECT_LINK: {
                        "parent_link_name": spec.tcp_link,
                        "link_name": ATTACHED_OBJECT_LINK,
                        # MotionGen.attach_external_objects_to_robot places object spheres in the ee_link frame.
                        "fixed_transform": [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
                        "joint_type": "FIXED",
                        "joint_name": "attach_joint",
                    }
                },
                "lock_joints": lock,
                "cspace": {
                    "joint_names": joint_names,
                    "retract_config": [float(v) for v in spec.home_q],
                    "null_space_weight": [1.0] * len(joint_names),
                    "cspace_distance_weight": [1.0] * len(joint_names),
                    "max_acceleration": [float(v) for v in spec.max_acceleration_rad_s2],
                    "max_jerk": 500.0,
                },
            }
        }
    }


# Robots sharing a URDF share a file: FR3 is the Panda's kinematics with its own limits, which the
# planner writes into the URDF cuRobo loads (robot_config.prepare_robot_config).
ROBOT_FILES = {"panda": "panda.yml", "fr3": "panda.yml", "xarm6": "xarm6.yml"}


def robot_config_path(name: str) -> Path:
    """The shipped cuRobo robot config of robot ``name``."""
    if name not in ROBOT_FILES:
        raise MotionConfigError(f"no cuRobo robot config known for robot {name!r}; known: {sorted(ROBOT_FILES)}")
    return ROBOT_CONFIG_DIR / ROBOT_FILES[name]


def load_robot_config(name: str) -> dict[str, object]:
    """The shipped cuRobo robot config of robot ``name`` (``robots/<file>.yml``)."""
    path = robot_config_path(name)
    if not path.is_file():
        raise MotionConfigError(f"the cuRobo robot config {path.name} of {name!r} is missing")
    return yaml.safe_load(path.read_text())


def main(argv: list[str] | None = None) -> int:
    """Fit spheres for a robot and write its cuRobo config: ``spheres ROBOT OUT.yml``."""
    from robopin.motion.robot import RobotModel, robot_spec

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m robopin.motion.curobo.spheres ROBOT OUT.yml", file=sys.stderr)
        return 2
    robot = RobotModel(robot_spec(args[0]))
    config = curobo_robot_config(robot, RobotSpheres.fit(robot))
    header = (
        f"# cuRobo v1 robot config for {args[0]}, generated by robopin.motion.curobo.spheres from the URDF\n"
        "# collision meshes (paths relative to pybullet_data). Spheres are in each link's own frame;\n"
        "# tests/motion/test_curobo_configs.py checks them by cuRobo's rules. Do not edit by hand.\n"
    )

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    Path(args[1]).write_text(header + yaml.dump(config, Dumper=_NoAliases, sort_keys=False, default_flow_style=None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
