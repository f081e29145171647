"""A URDF's tree of links and joints, read once with ROS's URDF parser and shared by TF publishing and cuRobo's config.

Pinocchio's model (:mod:`robopin.robots.kinematics`) is the kinematics; it does not keep the URDF's own
tree: fixed joints become frames, origins are re-expressed in joint frames, and a mimic joint's axis is
not exposed. :class:`UrdfTree` keeps every joint as the URDF writes it (``urdf_parser_py``, the parser
of ros/urdf_parser_py that ROS 2 ships as ``urdfdom_py``), with the URDF spec's defaults: no origin is
the identity, no axis is (1, 0, 0), a mimic joint follows ``multiplier * leader + offset`` (1 and 0 when
absent).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from robopin.geometry.transforms import transform_from_xyz_rpy

__all__ = ["FrameTransform", "UrdfJoint", "UrdfTree", "UrdfTreeError"]

logger = logging.getLogger(__name__)

_SUPPORTED = ("fixed", "revolute", "continuous", "prismatic")
_PARSER_LOCK = threading.Lock()


class UrdfTreeError(ValueError):
    """The URDF text is not a tree of joints this module can read (names the bad joint)."""


@dataclasses.dataclass(frozen=True)
class FrameTransform:
    """``T_parent_child``: the pose of ``child`` in ``parent`` (one TF edge)."""

    parent: str
    child: str
    T_parent_child: NDArray[np.float64]


@dataclasses.dataclass(frozen=True)
class UrdfJoint:
    """One URDF joint: ``origin`` is ``T_parent_joint`` (4x4), ``axis`` a unit vector in the joint frame."""

    name: str
    type: str  # fixed | revolute | continuous | prismatic (floating and planar are refused)
    parent: str
    child: str
    origin: NDArray[np.float64]
    axis: NDArray[np.float64]
    lower: float  # position limits, -inf/inf where the URDF gives none (and for continuous joints)
    upper: float
    mimic_of: str | None = None
    multiplier: float = 1.0
    offset: float = 0.0

    @property
    def movable(self) -> bool:
        return self.type != "fixed"

    def motion(self, value: float) -> NDArray[np.float64]:
        """The joint's own motion at position ``value`` (rad or m): rotation about or translation along ``axis``."""
        T = np.eye(4)
        if self.type == "prismatic":
            T[:3, 3] = value * self.axis
        elif self.movable:
            x, y, z = self.axis
            K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
            T[:3, :3] = np.eye(3) + np.sin(value) * K + (1.0 - np.cos(value)) * (K @ K)
        return T

    def transform(self, value: float = 0.0) -> NDArray[np.float64]:
        """``T_parent_child`` at position ``value``."""
        return self.origin @ self.motion(value)


def _quiet(message: str) -> None:
    # Tags outside the URDF spec (pybullet_data's <contact>, a <material> inside <collision>) are
    # reported by the parser on stderr; they carry nothing the tree reads.
    logger.debug("urdf_parser_py: %s", message)


def _joint(element) -> UrdfJoint:
    name, kind = element.name, element.type
    if kind not in _SUPPORTED:
        raise UrdfTreeError(f"joint {name!r} has type {kind!r}; supported: {', '.join(_SUPPORTED)}")
    origin = element.origin
    xyz = (0.0, 0.0, 0.0) if origin is None else origin.xyz
    rpy = (0.0, 0.0, 0.0) if origin is None else origin.rpy
    axis = np.asarray((1.0, 0.0, 0.0) if element.axis is None else element.axis, dtype=np.float64)
    norm = float(np.linalg.norm(axis))
    if kind != "fixed" and not norm > 0:
        raise UrdfTreeError(f"joint {name!r} has a zero axis")
    limit = element.limit
    lower, upper = (-np.inf, np.inf) if limit is None or kind == "continuous" else (limit.lower, limit.upper)
    mimic = element.mimic
    return UrdfJoint(
        name=name,
        type=kind,
        parent=element.parent,
        child=element.child,
        origin=transform_from_xyz_rpy(xyz, rpy),
        axis=axis / (norm or 1.0),
        lower=float(lower),
        upper=float(upper),
        mimic_of=None if mimic is None else mimic.joint,
        multiplier=1.0 if mimic is None or mimic.multiplier is None else float(mimic.multiplier),
        offset=0.0 if mimic is None or mimic.offset is None else float(mimic.offset),
    )


class UrdfTree:
    """Every link and joint of one URDF (joints in file order, keyed by name), checked to form one tree."""

    def __init__(self, links: Sequence[str], joints: Sequence[UrdfJoint]) -> None:
        if not joints:
            raise UrdfTreeError("robot description has no joints")
        self.joints: Mapping[str, UrdfJoint] = {j.name: j for j in joints}
        children = [j.child for j in joints]
        duplicated = sorted({c for c in children if children.count(c) > 1})
        if duplicated:
            raise UrdfTreeError(f"links {duplicated} have more than one parent joint; a URDF must be a tree")
        self.links = frozenset(links) | {j.parent for j in joints} | set(children)
        roots = sorted(self.links - set(children))
        if len(roots) != 1:
            raise UrdfTreeError(f"a URDF has exactly one root link, found {roots}")
        self.root_link = roots[0]
        for joint in joints:
            if joint.mimic_of is not None and joint.mimic_of not in self.joints:
                raise UrdfTreeError(f"joint {joint.name!r} mimics unknown joint {joint.mimic_of!r}")
        self._joint_of_child = {j.child: j for j in joints}

    @classmethod
    def from_urdf(cls, text: str | bytes) -> UrdfTree:
        """Parse URDF XML text."""
        from lxml import etree
        from urdf_parser_py import urdf
        from urdf_parser_py.xml_reflection import core

        data = text.encode("utf-8") if isinstance(text, str) else text
        with _PARSER_LOCK:  # the parser reports through one module-level hook
            reporter, core.on_error = core.on_error, _quiet
            try:
                root = etree.fromstring(data)
                # Transmissions are ros2_control's, not the tree's; urdfdom's model (what robot_state_publisher
                # reads) skips them, and pybullet_data's xArm URDF has an unexpanded xacro value in one
                # (<mechanicalReduction>reduction</mechanicalReduction>) that urdf_parser_py refuses.
                for element in root.findall("transmission"):
                    root.remove(element)
                robot = urdf.URDF.from_xml_string(etree.tostring(root))
            except (etree.XMLSyntaxError, core.ParseError) as error:
                raise UrdfTreeError(f"robot description is not a valid URDF: {error}") from None
            finally:
                core.on_error = reporter
        return cls([link.name for link in robot.links], [_joint(j) for j in robot.joints])

    @classmethod
    def from_file(cls, path: Path) -> UrdfTree:
        """Parse the URDF file at ``path``."""
        return cls.from_urdf(Path(path).read_bytes())

    def joint_of(self, link: str) -> UrdfJoint | None:
        """The joint whose child is ``link`` (None for the root and links not in the tree)."""
        return self._joint_of_child.get(link)

    @property
    def movable_joint_names(self) -> tuple[str, ...]:
        """Joints whose position comes from /joint_states (mimic joints follow their leader instead)."""
        return tuple(j.name for j in self.joints.values() if j.movable and j.mimic_of is None)

    def fixed_transforms(self) -> list[FrameTransform]:
        """The edges of fixed joints (robot_state_publisher's /tf_static)."""
        return [FrameTransform(j.parent, j.child, j.origin.copy()) for j in self.joints.values() if not j.movable]

    def moving_transforms(self, positions: Mapping[str, float]) -> list[FrameTransform]:
        """The edges of movable joints whose position (or mimic leader's position) is known, in metres/radians.

        A joint without a known position is left out, as robot_state_publisher does.
        """
        edges = []
        for joint in self.joints.values():
            if not joint.movable:
                continue
            if joint.mimic_of is not None:
                if joint.mimic_of not in positions:
                    continue
                value = joint.multiplier * float(positions[joint.mimic_of]) + joint.offset
            elif joint.name in positions:
                value = float(positions[joint.name])
            else:
                continue
            edges.append(FrameTransform(joint.parent, joint.child, joint.transform(value)))
        return edges
