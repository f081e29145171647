"""cuRobo v1 robot configs read the way cuRobo reads them, checked and prepared without cuRobo or a GPU.

The robot YAML is the contract with cuRobo: a mistake in it shows only on a GPU machine, as a
KeyError at load or as a planner that plans the wrong thing. The rules below are cuRobo v0.7.8's own,
read in NVlabs/curobo ``src/curobo/cuda_robot_model/urdf_kinematics_parser.py`` and
``cuda_robot_generator.py``:

- a mimic joint is recorded under the name of the joint it copies (``get_link_parameters`` sets
  ``joint_name = joint.mimic.joint``), so ``lock_joints`` may only name non-mimic joints; the mimic
  joints of a locked joint are fixed with it (``_build_kinematics_with_lock_joints``);
- ``collision_spheres[link]`` centres are in that link's own frame (``_build_collision_model`` keys
  them by the link's index in the kinematic tree);
- two links' spheres collide when ``|c1 - c2| < r1 + r2 + b1 + b2`` with ``b`` the link's
  ``self_collision_buffer``; ``collision_sphere_buffer`` pads the radii and is subtracted again for
  self-collision, so it only affects world collision; pairs in ``self_collision_ignore`` are skipped;
- attached-object spheres are computed in the ee_link frame (``MotionGen.attach_external_objects_to_robot``
  multiplies by ``ee_pose.inverse()``), so the ``attached_object`` link must sit on ``ee_link`` at identity.

:class:`CuroboKinematics` is a forward-kinematics model of the URDF's tree
(:class:`robopin.robots.urdf.UrdfTree`) composed by those rules (not by pinocchio), so tests can hold
cuRobo's reading of a config against robopin's pinocchio model.
"""

from __future__ import annotations

import copy
import hashlib
import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robopin.motion.errors import MotionConfigError
from robopin.robots.urdf import UrdfJoint, UrdfTree, UrdfTreeError

ATTACHED_OBJECT_LINK = "attached_object"


def read_urdf_tree(path: Path) -> UrdfTree:
    """The link and joint tree of the URDF file cuRobo loads (robopin's one URDF reader)."""
    try:
        return UrdfTree.from_file(path)
    except UrdfTreeError as error:
        raise MotionConfigError(f"cuRobo config: {Path(path).name}: {error}") from None


def _pose7_matrix(pose: list[float]) -> NDArray[np.float64]:
    from robopin.motion.curobo.conversions import curobo_pose_to_matrix

    return curobo_pose_to_matrix(pose)


class CuroboKinematics:
    """Forward kinematics of a cuRobo ``kinematics`` mapping, evaluated by cuRobo's rules in numpy."""

    def __init__(self, kinematics: dict[str, Any], urdf_path: Path) -> None:
        self.kinematics = kinematics
        self.tree = read_urdf_tree(urdf_path)
        self.joints = self.tree.joints
        self.base_link = kinematics["base_link"]
        self.ee_link = kinematics["ee_link"]
        self.lock = {str(k): float(v) for k, v in (kinematics.get("lock_joints") or {}).items()}
        self.joint_names = list(kinematics["cspace"]["joint_names"])
        self.extra_links = dict(kinematics.get("extra_links") or {})

    def _joint_value(self, joint: UrdfJoint, free: dict[str, float]) -> float:
        if joint.mimic_of is not None:
            return joint.multiplier * self._joint_value(self.joints[joint.mimic_of], free) + joint.offset
        if joint.name in self.lock:
            return self.lock[joint.name]
        return free[joint.name]

    def link_poses(self, q: NDArray[np.float64], links: list[str] | None = None) -> dict[str, NDArray[np.float64]]:
        """``T_base_link`` of ``links`` (default: every collision link and the ee_link) at cspace ``q``."""
        free = dict(zip(self.joint_names, np.asarray(q, dtype=np.float64), strict=True))
        wanted = links if links is not None else [*self.kinematics["collision_link_names"], self.ee_link]
        cache: dict[str, NDArray[np.float64]] = {self.base_link: np.eye(4)}

        def pose(link: str) -> NDArray[np.float64]:
            if link in cache:
                return cache[link]
            if link in self.extra_links:
                extra = self.extra_links[link]
                T = pose(extra["parent_link_name"]) @ _pose7_matrix(extra["fixed_transform"])
            else:
                joint = self.tree.joint_of(link)
                if joint is None:
                    raise MotionConfigError(f"link {link!r} is not below base_link {self.base_link!r}")
                motion = joint.motion(self._joint_value(joint, free)) if joint.movable else np.eye(4)
                T = pose(joint.parent) @ joint.origin @ motion
            cache[link] = T
            return T

        return {link: pose(link) for link in wanted}

    def world_spheres(self, q: NDArray[np.float64]) -> dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]:
        """Per collision link: sphere centres (base frame) and radii, as cuRobo places them at ``q``."""
        spheres = self.kinematics["collision_spheres"]
        poses = self.link_poses(q)
        result = {}
        for link in self.kinematics["collision_link_names"]:
            entries = spheres.get(link) or []
            if not entries:
                continue
            centers = np.array([s["center"] for s in entries], dtype=np.float64)
            radii = np.array([s["radius"] for s in entries], dtype=np.float64)
            T = poses[link]
            result[link] = (centers @ T[:3, :3].T + T[:3, 3], radii)
        return result

    def self_collisions(self, q: NDArray[np.float64]) -> list[tuple[str, str]]:
        """Link pairs whose spheres collide at ``q`` by cuRobo's self-collision rule (ignore list applied)."""
        placed = self.world_spheres(q)
        buffer = self.kinematics.get("self_collision_buffer") or {}
        ignore = {(a, b) for a, values in (self.kinematics.get("self_collision_ignore") or {}).items() for b in values}
        names = list(placed)
        hits = []
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if (a, b) in ignore or (b, a) in ignore:
                    continue
                (ca, ra), (cb, rb) = placed[a], placed[b]
                distance = np.linalg.norm(ca[:, None, :] - cb[None, :, :], axis=2)
                threshold = ra[:, None] + rb[None, :] + float(buffer.get(a, 0.0)) + float(buffer.get(b, 0.0))
                if np.any(distance < threshold):
                    hits.append((a, b))
        return hits


def check_robot_config(kinematics: dict[str, Any], urdf_path: Path) -> None:
    """Raise :class:`MotionConfigError` for what cuRobo v0.7.8 would reject or misread in ``kinematics``."""
    tree = read_urdf_tree(urdf_path)
    joints = tree.joints
    extra = dict(kinematics.get("extra_links") or {})
    known_links = tree.links | set(extra)
    for key in ("base_link", "ee_link"):
        if kinematics.get(key) not in known_links:
            raise MotionConfigError(f"cuRobo config: {key} {kinematics.get(key)!r} is not a link of {urdf_path.name}")
    collision_links = list(kinematics.get("collision_link_names") or [])
    spheres = kinematics.get("collision_spheres") or {}
    extra_spheres = kinematics.get("extra_collision_spheres") or {}
    for link in collision_links:
        if link not in known_links:
            raise MotionConfigError(f"cuRobo config: collision link {link!r} is not a link of {urdf_path.name}")
        if link not in spheres and link not in extra_spheres:
            raise MotionConfigError(f"cuRobo config: collision link {link!r} has no collision_spheres entry")
    for link, ignored in (kinematics.get("self_collision_ignore") or {}).items():
        unknown = [name for name in [link, *ignored] if name not in collision_links]
        if unknown:
            raise MotionConfigError(
                f"cuRobo config: self_collision_ignore names {unknown}, not in collision_link_names "
                "(cuRobo skips them silently)"
            )
    for name, value in (kinematics.get("lock_joints") or {}).items():
        joint = joints.get(name)
        if joint is None or not joint.movable:
            raise MotionConfigError(f"cuRobo config: lock_joints names {name!r}, not a movable joint of the URDF")
        if joint.mimic_of is not None:
            # urdf_kinematics_parser: a mimic joint's link carries the name of the joint it copies.
            raise MotionConfigError(
                f"cuRobo config: lock_joints names the mimic joint {name!r}; cuRobo knows it only as "
                f"{joint.mimic_of!r} (lock that one; its mimic joints follow)"
            )
        if not joint.lower - 1e-9 <= float(value) <= joint.upper + 1e-9:
            raise MotionConfigError(f"cuRobo config: lock value {value} of {name!r} is outside its URDF limits")
    kin = CuroboKinematics(kinematics, urdf_path)
    chain_joints = set()
    for link in [*collision_links, kinematics["ee_link"]]:
        node = link
        while node != kin.base_link:
            if node in extra:
                node = extra[node]["parent_link_name"]
                continue
            joint = kin.tree.joint_of(node)
            if joint is None:
                raise MotionConfigError(f"cuRobo config: link {link!r} is not below base_link {kin.base_link!r}")
            if joint.movable and joint.mimic_of is None and joint.name not in kin.lock:
                chain_joints.add(joint.name)
            node = joint.parent
    missing = sorted(chain_joints - set(kin.joint_names))
    if missing:
        raise MotionConfigError(
            f"cuRobo config: joints {missing} move but are neither locked nor in cspace.joint_names"
        )
    attached = extra.get(ATTACHED_OBJECT_LINK)
    if attached is not None:
        T = _pose7_matrix(attached["fixed_transform"])
        if attached["parent_link_name"] != kinematics["ee_link"] or not np.allclose(T, np.eye(4), atol=1e-9):
            raise MotionConfigError(
                "cuRobo config: the attached_object link must sit on ee_link at identity (cuRobo computes "
                f"attached spheres in the ee_link frame); got parent {attached['parent_link_name']!r}, "
                f"transform {attached['fixed_transform']}"
            )


@dataclass(frozen=True)
class PreparedRobotConfig:
    """A robot config ready for ``MotionGenConfig.load_from_robot_config`` plus what the planner needs."""

    robot_cfg: dict[str, Any]  # the ``robot_cfg`` mapping, paths absolute
    ee_link: str
    T_ee_tcp: NDArray[np.float64]  # robopin's TCP in the ee_link frame: goal(ee_link) = goal(TCP) · inv(T_ee_tcp)
    urdf_path: Path


def _write_planning_urdf(source: Path, robot, mesh_root: Path, out_dir: Path) -> Path:
    """A copy of ``source`` whose arm limits are robopin's planning limits (cuRobo reads limits from the URDF).

    The shared description can be stricter than the URDF (FR3 on the Panda URDF) and the planner keeps a
    margin inside it so the arm's safety layer never refuses a planned state; cuRobo has no per-joint
    limit override in its config (``CSpaceConfig.position_limit_clip`` is a symmetric clip only).
    """
    tree = ET.parse(source)
    limits = dict(zip(robot.joint_names, zip(robot.lower, robot.upper, robot.max_velocity, strict=True), strict=True))
    for element in tree.getroot().findall("joint"):
        name = element.get("name")
        limit = element.find("limit")
        if name in limits and limit is not None:
            lower, upper, velocity = limits[name]
            limit.set("lower", repr(float(lower)))
            limit.set("upper", repr(float(upper)))
            limit.set("velocity", repr(float(velocity)))
            if element.get("type") == "continuous":
                element.set("type", "revolute")
    for mesh in tree.getroot().iter("mesh"):
        filename = mesh.get("filename", "")
        if filename and not filename.startswith(("package://", "/")):
            mesh.set("filename", str(mesh_root / filename))
    text = ET.tostring(tree.getroot(), encoding="unicode")
    # Named by content: planners of one robot share the file, concurrent writers write the same bytes.
    path = out_dir / f"{robot.spec.name}_planning_{hashlib.sha1(text.encode()).hexdigest()[:12]}.urdf"
    if not path.is_file():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        os.replace(partial, path)
    return path


def tool_offset(robot, ee_link: str) -> NDArray[np.float64]:
    """``T_ee_tcp``: robopin's TCP in the frame of ``ee_link`` (both must be on one rigid body)."""
    import pinocchio as pin

    frame = robot.model.getFrameId(ee_link)
    if frame >= robot.model.nframes:
        raise MotionConfigError(f"cuRobo config: ee_link {ee_link!r} is not a frame of robot {robot.spec.name!r}")
    offsets = []
    for q in (robot.home, robot.random_configuration()):
        T_tcp = robot.forward_kinematics(q)
        pin.framesForwardKinematics(robot.model, robot.data, q)
        offsets.append(np.linalg.inv(robot.data.oMf[frame].homogeneous) @ T_tcp)
    if not np.allclose(offsets[0], offsets[1], atol=1e-9):
        raise MotionConfigError(f"cuRobo config: ee_link {ee_link!r} does not move rigidly with the TCP")
    return offsets[0]


def prepare_robot_config(robot_file: str | Path, robot, *, work_dir: Path | None = None) -> PreparedRobotConfig:
    """Load, check and resolve a cuRobo robot YAML for ``robot`` (a RobotModel); no cuRobo needed.

    Relative ``urdf_path`` / ``asset_root_path`` are taken relative to pybullet_data. The URDF cuRobo
    loads is a copy carrying the planner's joint limits (written under ``work_dir``, default a
    per-user folder in the temporary directory).
    """
    import yaml

    path = Path(robot_file)
    if not path.is_file():
        raise MotionConfigError(f"cuRobo robot config {path} not found")
    document = yaml.safe_load(path.read_text()) or {}
    try:
        kinematics = copy.deepcopy(document["robot_cfg"]["kinematics"])
    except (KeyError, TypeError):
        raise MotionConfigError(f"{path.name}: no robot_cfg.kinematics mapping") from None
    urdf = robot.spec.resolve(kinematics["urdf_path"])
    asset_root = robot.spec.resolve(kinematics.get("asset_root_path", str(Path(kinematics["urdf_path"]).parent)))
    if not urdf.is_file():
        raise MotionConfigError(f"{path.name}: URDF {urdf} not found")
    check_robot_config(kinematics, urdf)
    cspace = list(kinematics["cspace"]["joint_names"])
    arm = [name for name in cspace if name not in (kinematics.get("lock_joints") or {})]
    if arm != list(robot.joint_names):
        raise MotionConfigError(
            f"{path.name}: cspace joints {arm} are not robot {robot.spec.name!r}'s joints {list(robot.joint_names)}"
        )
    out_dir = Path(work_dir) if work_dir is not None else Path(tempfile.gettempdir()) / f"robopin-curobo-{os.getuid()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    kinematics["urdf_path"] = str(_write_planning_urdf(urdf, robot, asset_root, out_dir))
    kinematics["asset_root_path"] = str(asset_root)
    document = copy.deepcopy(document)
    document["robot_cfg"]["kinematics"] = kinematics
    return PreparedRobotConfig(
        robot_cfg=document["robot_cfg"],
        ee_link=kinematics["ee_link"],
        T_ee_tcp=tool_offset(robot, kinematics["ee_link"]),
        urdf_path=Path(kinematics["urdf_path"]),
    )


__all__ = [
    "ATTACHED_OBJECT_LINK",
    "CuroboKinematics",
    "PreparedRobotConfig",
    "check_robot_config",
    "prepare_robot_config",
    "read_urdf_tree",
    "tool_offset",
]
