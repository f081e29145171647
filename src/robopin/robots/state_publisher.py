"""The transforms robot_state_publisher derives from a URDF and joint positions, plus robopin's own frames.

:class:`UrdfTree` reads every joint of a URDF (not only the base → TCP chain that
:class:`robopin.robots.description.RobotDescription` keeps): fixed joints give static transforms,
movable joints give one transform per joint state, mimic joints follow their leader
(``value = multiplier * leader + offset``, as in the URDF spec), and a joint without a known position
is left out, as robot_state_publisher does. :func:`robopin_frame_transforms` adds the frames the rest of
the stack names: ``base`` (an identity child of the URDF's base link, so TF stays a tree),
``ee`` (the TCP, child of the TCP link) and the camera optical frames from their mounts.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from robopin.geometry.transforms import make_transform, rpy_to_matrix

__all__ = ["FrameTransform", "UrdfJoint", "UrdfTree", "UrdfTreeError", "robopin_frame_transforms"]

BASE_FRAME = "base"
EE_FRAME = "ee"


class UrdfTreeError(ValueError):
    """The URDF text is not a tree of joints this module can read (names the bad joint)."""


@dataclasses.dataclass(frozen=True)
class FrameTransform:
    """``T_parent_child``: the pose of ``child`` in ``parent`` (one TF edge)."""

    parent: str
    child: str
    T_parent_child: np.ndarray


@dataclasses.dataclass(frozen=True)
class UrdfJoint:
    name: str
    kind: str  # fixed | revolute | continuous | prismatic (floating/planar are not supported)
    parent: str
    child: str
    T_parent_joint: np.ndarray
    axis: np.ndarray
    mimic: tuple[str, float, float] | None = None  # (leader joint, multiplier, offset)


def _floats(text: str | None, default: tuple[float, float, float]) -> np.ndarray:
    values = default if text is None else tuple(float(v) for v in text.split())
    if len(values) != 3:
        raise UrdfTreeError(f"expected three numbers, got {text!r}")
    return np.asarray(values, dtype=np.float64)


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * (K @ K)


class UrdfTree:
    """Every joint of one URDF, to compute the TF edges for given joint positions."""

    def __init__(self, joints: Sequence[UrdfJoint]) -> None:
        self.joints = tuple(joints)
        children = [j.child for j in self.joints]
        duplicated = sorted({c for c in children if children.count(c) > 1})
        if duplicated:
            raise UrdfTreeError(f"links {duplicated} have more than one parent joint; a URDF must be a tree")
        parents = {j.parent for j in self.joints}
        roots = sorted(parents - set(children))
        if len(roots) != 1:
            raise UrdfTreeError(f"a URDF has exactly one root link, found {roots}")
        self.root_link = roots[0]
        names = {j.name for j in self.joints}
        for joint in self.joints:
            if joint.mimic is not None and joint.mimic[0] not in names:
                raise UrdfTreeError(f"joint {joint.name!r} mimics unknown joint {joint.mimic[0]!r}")

    @classmethod
    def from_urdf(cls, text: str) -> UrdfTree:
        """Parse URDF XML text."""
        try:
            root = ET.fromstring(text)
        except ET.ParseError as error:
            raise UrdfTreeError(f"robot description is not valid XML: {error}") from error
        joints = []
        for element in root.findall("joint"):
            name, kind = element.get("name", ""), element.get("type", "")
            if kind not in ("fixed", "revolute", "continuous", "prismatic"):
                raise UrdfTreeError(f"joint {name!r} has type {kind!r}; supported: fixed, revolute, continuous, "
                                    "prismatic")
            origin = element.find("origin")
            xyz = _floats(None if origin is None else origin.get("xyz"), (0.0, 0.0, 0.0))
            rpy = _floats(None if origin is None else origin.get("rpy"), (0.0, 0.0, 0.0))
            axis_element = element.find("axis")
            # URDF spec: the axis defaults to (1, 0, 0) when the element is absent.
            axis = _floats(None if axis_element is None else axis_element.get("xyz"), (1.0, 0.0, 0.0))
            norm = float(np.linalg.norm(axis))
            if kind != "fixed" and not norm > 0:
                raise UrdfTreeError(f"joint {name!r} has a zero axis")
            mimic_element = element.find("mimic")
            mimic = None
            if mimic_element is not None:
                mimic = (mimic_element.get("joint", ""), float(mimic_element.get("multiplier", 1.0)),
                         float(mimic_element.get("offset", 0.0)))
            joints.append(UrdfJoint(name, kind, element.find("parent").get("link"), element.find("child").get("link"),
                                    make_transform(rpy_to_matrix(*rpy), xyz), axis / (norm or 1.0), mimic))
        if not joints:
            raise UrdfTreeError("robot description has no joints")
        return cls(joints)

    @property
    def movable_joint_names(self) -> tuple[str, ...]:
        """Joints whose position comes from /joint_states (mimic joints follow their leader instead)."""
        return tuple(j.name for j in self.joints if j.kind != "fixed" and j.mimic is None)

    def fixed_transforms(self) -> list[FrameTransform]:
        """The edges of fixed joints (robot_state_publisher's /tf_static)."""
        return [FrameTransform(j.parent, j.child, j.T_parent_joint.copy()) for j in self.joints if j.kind == "fixed"]

    def moving_transforms(self, positions: Mapping[str, float]) -> list[FrameTransform]:
        """The edges of movable joints whose position (or mimic leader's position) is known, in metres/radians."""
        edges = []
        for joint in self.joints:
            if joint.kind == "fixed":
                continue
            if joint.mimic is not None:
                leader, multiplier, offset = joint.mimic
                if leader not in positions:
                    continue
                value = multiplier * float(positions[leader]) + offset
            elif joint.name in positions:
                value = float(positions[joint.name])
            else:
                continue
            motion = np.eye(4)
            if joint.kind == "prismatic":
                motion[:3, 3] = value * joint.axis
            else:
                motion[:3, :3] = _axis_angle(joint.axis, value)
            edges.append(FrameTransform(joint.parent, joint.child, joint.T_parent_joint @ motion))
        return edges


def robopin_frame_transforms(base_link: str, tcp_link: str, T_link_tcp: np.ndarray,
                             camera_mounts: Iterable[tuple[str, object]] = (),
                             depth_to_color: Mapping[str, np.ndarray] | None = None) -> list[FrameTransform]:
    """Static edges of robopin's frames: ``base`` under the URDF base link, ``ee`` under the TCP link, cameras.

    ``camera_mounts`` are ``(view, CameraMount)``: a static mount hangs ``<view>_optical`` off ``base``, a wrist
    mount off ``ee``. ``depth_to_color`` maps a view to ``T_color_depth`` of a depth imager not aligned to color
    (``<view>_depth_optical`` under ``<view>_optical``, the frame camera_node stamps unaligned depth with).
    """
    edges = [FrameTransform(base_link, BASE_FRAME, np.eye(4)),
             FrameTransform(tcp_link, EE_FRAME, np.asarray(T_link_tcp, dtype=np.float64))]
    for view, mount in camera_mounts:
        parent = BASE_FRAME if mount.kind == "static" else EE_FRAME
        edges.append(FrameTransform(parent, f"{view}_optical", np.asarray(mount.T_parent_cam, dtype=np.float64)))
    for view, T_color_depth in (depth_to_color or {}).items():
        edges.append(FrameTransform(f"{view}_optical", f"{view}_depth_optical", np.asarray(T_color_depth)))
    return edges
