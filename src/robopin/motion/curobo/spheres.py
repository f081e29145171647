"""Collision-sphere models of robot links, fitted to and checked against the URDF collision meshes.

cuRobo represents the robot by spheres per link; it ships them for its own Franka URDF but not for
the URDFs robopin plans and checks with, nor for the xArm, so the models are fitted here from the
URDF meshes and checked for coverage (every sampled
surface point of every mesh lies inside a sphere) and tightness (how far spheres stick out). The
same spheres mask the robot out of depth point clouds (:meth:`RobotSpheres.mask_points`).

Regenerate a shipped file with ``python -m robopin.motion.curobo.spheres xarm6 robots/xarm6.yml``
(``panda`` for ``robots/panda.yml``, which FR3 shares).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
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


def fit_link_spheres(vertices: NDArray[np.float64], *, max_spheres: int = 10, overlap: float = 0.5) -> list[Sphere]:
    """Spheres covering every given point of one link mesh, strung along its principal axis.

    Pass the vertices plus surface samples (:func:`surface_samples`) so long triangles stay covered.
    The mesh is cut into slabs half as long as it is thick; each sphere is the smallest sphere
    around its slab's bounding-box centre containing the slab's vertices plus ``overlap`` of a slab
    on each side, so surfaces crossing slab boundaries stay covered.
    """
    points = np.asarray(vertices, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) == 0:
        raise MotionConfigError(f"need an N×3 vertex array with N > 0, got shape {points.shape}")
    centroid = points.mean(axis=0)
    _, _singular, axes = np.linalg.svd(points - centroid, full_matrices=False)
    along = (points - centroid) @ axes[0]
    across = np.linalg.norm((points - centroid) - np.outer(along, axes[0]), axis=1)
    length = float(along.max() - along.min())
    thickness = max(2.0 * float(np.percentile(across, 90)), 1e-3)
    count = int(np.clip(np.ceil(2.0 * length / thickness), 1, max_spheres))
    edges = np.linspace(along.min(), along.max(), count + 1)
    slab = (edges[1] - edges[0]) if count > 1 else length
    spheres = []
    for k in range(count):
        low, high = edges[k] - overlap * slab, edges[k + 1] + overlap * slab
        members = points[(along >= low) & (along <= high)]
        if len(members) == 0:
            continue
        center = 0.5 * (members.min(axis=0) + members.max(axis=0))
        radius = float(np.max(np.linalg.norm(members - center, axis=1)))
        spheres.append(Sphere(tuple(float(c) for c in center), radius))
    return spheres


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


@dataclass(frozen=True)
class CoverageReport:
    """How well one link's spheres cover (and how far they overhang) its collision mesh."""

    link: str
    spheres: int
    uncovered_fraction: float  # surface samples outside every sphere (by more than the tolerance)
    worst_gap_m: float  # largest distance of a surface sample outside the sphere union
    overhang_m: float  # largest distance a sphere reaches beyond the mesh's bounding box


def check_coverage(link: str, spheres: list[Sphere], samples: NDArray[np.float64], tolerance_m: float = 0.002):
    """Compare a link's spheres with surface samples of its mesh (both in one frame)."""
    centers = np.array([s.center for s in spheres])
    radii = np.array([s.radius for s in spheres])
    gaps = np.min(np.linalg.norm(samples[:, None, :] - centers[None], axis=2) - radii[None], axis=1)
    low, high = samples.min(axis=0), samples.max(axis=0)
    overhang = float(
        np.max(np.maximum(np.maximum(low - (centers - radii[:, None]), (centers + radii[:, None]) - high), 0.0))
    )
    return CoverageReport(link, len(spheres), float(np.mean(gaps > tolerance_m)), float(max(gaps.max(), 0.0)), overhang)


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

    def __init__(self, robot, spheres: dict[str, list[Sphere]]) -> None:
        self.robot = robot
        self.spheres = spheres
        self._placements = link_placements(robot)

    @classmethod
    def fit(cls, robot, **kwargs) -> RobotSpheres:
        """Fit spheres to every collision mesh of ``robot`` (a RobotModel), in each link's own frame."""
        placements = link_placements(robot)
        per_link: dict[str, list[Sphere]] = {}
        for name, (vertices, triangles) in robot.link_meshes().items():
            link = name.rsplit("_", 1)[0]
            T_link_joint = np.linalg.inv(placements[link][1])
            points = np.vstack([vertices, surface_samples(vertices, triangles, 4000)])
            local = points @ T_link_joint[:3, :3].T + T_link_joint[:3, 3]
            per_link.setdefault(link, []).extend(fit_link_spheres(local, **kwargs))
        return cls(robot, per_link)

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

    def overlapping_links(self, q: NDArray[np.float64], margin_m: float = 0.0) -> set[frozenset[str]]:
        """Pairs of links whose spheres (grown by ``margin_m`` each) overlap at ``q``."""
        frames = self.link_frames(q)
        placed = {}
        for link, spheres in self.spheres.items():
            T = frames[link]
            centers = np.array([s.center for s in spheres]) @ T[:3, :3].T + T[:3, 3]
            placed[link] = (centers, np.array([s.radius for s in spheres]) + margin_m)
        links = sorted(placed)
        pairs = set()
        for i, a in enumerate(links):
            for b in links[i + 1 :]:
                (ca, ra), (cb, rb) = placed[a], placed[b]
                if np.any(np.linalg.norm(ca[:, None] - cb[None], axis=2) < ra[:, None] + rb[None]):
                    pairs.add(frozenset((a, b)))
        return pairs

    def to_curobo_spheres(self) -> dict[str, list[dict[str, object]]]:
        """The ``collision_spheres`` mapping of a cuRobo robot config."""
        return {
            link: [{"center": [round(c, 4) for c in s.center], "radius": round(s.radius, 4)} for s in spheres]
            for link, spheres in self.spheres.items()
        }

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


# Pairs whose spheres overlap in any of this many random configurations the mesh checker calls free are
# left to robopin's exact mesh check (every cuRobo trajectory passes it before it leaves the planner):
# otherwise cuRobo reports INVALID_START_STATE_SELF_COLLISION for poses that are fine. The margin keeps
# pairs that only nearly touch in the samples out of cuRobo's check too.
IGNORE_SAMPLES = 4000
IGNORE_MARGIN_M = 0.01


def sphere_ignore_pairs(robot, spheres: RobotSpheres, *, samples: int = IGNORE_SAMPLES, seed: int = 1):
    """Link pairs whose spheres overlap in some mesh-collision-free configuration (or at home)."""
    rng = np.random.default_rng(seed)
    pairs = set(spheres.overlapping_links(robot.home, IGNORE_MARGIN_M))
    found = 0
    while found < samples:
        q = rng.uniform(robot.lower, robot.upper)
        if robot.in_collision(q, margin_m=0.0):
            continue
        found += 1
        pairs |= spheres.overlapping_links(q, IGNORE_MARGIN_M)
    return pairs


def curobo_robot_config(robot, spheres: RobotSpheres, *, ignore_pairs=None) -> dict[str, object]:
    """A cuRobo v1 ``robot_cfg`` for ``robot`` (RobotModel) with the given sphere model.

    Paths are relative to pybullet_data and resolved at load time
    (:func:`robopin.motion.curobo.robot_config.prepare_robot_config`). The ee_link is the TCP's link;
    the planner converts TCP goals with the offset between them. Only joints cuRobo knows by name are
    locked (a mimic joint follows the joint it copies).
    """
    from robopin.motion.curobo.robot_config import ATTACHED_OBJECT_LINK, read_urdf

    spec = robot.spec
    links, joints = read_urdf(spec.resolve(spec.urdf))
    children = {j.child for j in joints.values()}
    roots = sorted(links - children)
    if len(roots) != 1:
        raise MotionConfigError(f"robot {spec.name!r}: URDF has {len(roots)} root links {roots}")
    lock = {name: float(v) for name, v in spec.locked_joints.items() if joints[name].mimic_of is None}
    collision_links = [*sorted(spheres.spheres), ATTACHED_OBJECT_LINK]
    pairs = set(ignore_pairs if ignore_pairs is not None else sphere_ignore_pairs(robot, spheres))
    pairs |= {frozenset(p) for p in robot.ignored_self_collision_links()}
    # A held object touches the hand that holds it.
    pairs |= {frozenset((link, ATTACHED_OBJECT_LINK)) for link in robot.hand_links() if link in spheres.spheres}
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
                "base_link": roots[0],
                "ee_link": spec.tcp_link,
                "collision_link_names": collision_links,
                "collision_spheres": spheres.to_curobo_spheres(),
                "collision_sphere_buffer": 0.004,
                "self_collision_ignore": {k: ignore[k] for k in sorted(ignore, key=order.__getitem__)},
                "self_collision_buffer": dict.fromkeys(collision_links, 0.0),
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
