"""Robot descriptions shared by the drivers, the simulator and the planners.

A description names the arm joints, their limits, the tool centre point (TCP, frame ``ee``) and the
home configuration, read from the URDFs that ship in ``pybullet_data`` where the URDF has the value
(joint names, position and velocity limits, the kinematic chain) and from the maker's datasheet where
it does not (acceleration limits, TCP offset, gripper range). Forward kinematics runs on that chain in
numpy, so the safety layer can check a whole trajectory without any simulator.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robopin.geometry.transforms import make_transform, rpy_to_matrix
from robopin.robots.errors import ArmConfigError


class UnknownRobotDescriptionError(ArmConfigError):
    """No description is registered under the requested robot name."""


@dataclass(frozen=True)
class ChainJoint:
    """One URDF joint on the path from the base link to the TCP link."""

    name: str
    kind: str  # "revolute", "continuous", "prismatic" or "fixed"
    T_parent_joint: np.ndarray  # joint origin in its parent link frame
    axis: np.ndarray  # unit axis in the joint frame
    arm_index: int | None  # column in the arm's joint vector, None for fixed joints


@dataclass(frozen=True, eq=False)
class RobotDescription:
    """Kinematics and limits of one arm with its gripper; angles in rad, lengths in m."""

    name: str
    urdf_path: Path
    joint_names: tuple[str, ...]
    lower_rad: np.ndarray
    upper_rad: np.ndarray
    velocity_rad_s: np.ndarray
    acceleration_rad_s2: np.ndarray
    base_link: str
    tcp_link: str
    T_link_tcp: np.ndarray
    home_rad: np.ndarray
    gripper_min_width_m: float
    gripper_max_width_m: float
    chain: tuple[ChainJoint, ...]

    @property
    def dof(self) -> int:
        return len(self.joint_names)

    def within_limits(self, q: np.ndarray, margin_rad: float = 0.0) -> bool:
        """True when every joint of ``q`` lies inside its position limits shrunk by ``margin_rad``."""
        q = np.asarray(q, dtype=np.float64)
        return bool(np.all(q >= self.lower_rad + margin_rad) and np.all(q <= self.upper_rad - margin_rad))

    def forward_kinematics(self, q: np.ndarray) -> np.ndarray:
        """``T_base_ee`` (4x4) for the arm configuration ``q`` (rad)."""
        return self.forward_kinematics_batch(np.asarray(q, dtype=np.float64).reshape(1, -1))[0]

    def forward_kinematics_batch(self, q: np.ndarray) -> np.ndarray:
        """``T_base_ee`` for each row of ``q`` (N, dof): an (N, 4, 4) array."""
        q = np.asarray(q, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != self.dof:
            raise ValueError(f"q must have shape (N, {self.dof}) for {self.name}, got {q.shape}")
        T = np.broadcast_to(np.eye(4), (q.shape[0], 4, 4)).copy()
        for joint in self.chain:
            T = T @ joint.T_parent_joint
            if joint.arm_index is None:
                continue
            value = q[:, joint.arm_index]
            motion = np.broadcast_to(np.eye(4), (q.shape[0], 4, 4)).copy()
            if joint.kind == "prismatic":
                motion[:, :3, 3] = value[:, None] * joint.axis
            else:
                motion[:, :3, :3] = _axis_angle_matrices(joint.axis, value)
            T = T @ motion
        return T @ self.T_link_tcp


def _axis_angle_matrices(axis: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """Rotation matrices (N, 3, 3) about one unit ``axis`` by each angle (Rodrigues)."""
    x, y, z = axis
    K = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    s = np.sin(angles)[:, None, None]
    c = np.cos(angles)[:, None, None]
    return np.eye(3) + s * K + (1.0 - c) * (K @ K)


@dataclass(frozen=True)
class _DescriptionSpec:
    urdf: str  # path inside pybullet_data
    joint_names: tuple[str, ...]
    acceleration_rad_s2: tuple[float, ...]
    tcp_link: str
    tcp_offset_m: tuple[float, float, float]
    home_rad: tuple[float, ...]
    gripper_width_m: tuple[float, float]
    # Limits that replace the URDF's (a robot sharing another's kinematics but not its limits).
    lower_rad: tuple[float, ...] | None = None
    upper_rad: tuple[float, ...] | None = None
    velocity_rad_s: tuple[float, ...] | None = None


# Acceleration limits are not in URDFs: Panda values from Franka's datasheet; the xArm's maximum joint
# acceleration is 1145 deg/s² (UFACTORY user manual), rounded down to 20 rad/s².
_XARM6_JOINTS = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")
# TCP about 0.33 m in front of the base and 0.33 m up, pointing down.
_XARM6_HOME = (0.0, -0.5, -1.0, 0.0, 1.5, 0.0)
_SPECS: dict[str, _DescriptionSpec] = {
    "panda": _DescriptionSpec(
        urdf="franka_panda/panda.urdf",
        joint_names=tuple(f"panda_joint{i}" for i in range(1, 8)),
        acceleration_rad_s2=(15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
        # panda_grasptarget sits 0.105 m in front of the hand flange, between the fingertips.
        tcp_link="panda_grasptarget",
        tcp_offset_m=(0.0, 0.0, 0.0),
        home_rad=(0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4),
        gripper_width_m=(0.0, 0.08),
    ),
    # Franka Research 3: the Panda's kinematics (same joint origins) with FR3 limits from Franka's
    # datasheet (the limits franky-sim's FR3 model uses).
    "fr3": _DescriptionSpec(
        urdf="franka_panda/panda.urdf",
        joint_names=tuple(f"panda_joint{i}" for i in range(1, 8)),
        acceleration_rad_s2=(10.0,) * 7,
        tcp_link="panda_grasptarget",
        tcp_offset_m=(0.0, 0.0, 0.0),
        home_rad=(0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4),
        gripper_width_m=(0.0, 0.08),
        lower_rad=(-2.9007, -1.8361, -2.9007, -3.0770, -2.8763, 0.4398, -3.0508),
        upper_rad=(2.9007, 1.8361, 2.9007, -0.1169, 2.8763, 4.6216, 3.0508),
        velocity_rad_s=(2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
    ),
    "xarm6": _DescriptionSpec(
        urdf="xarm/xarm6_with_gripper.urdf",
        joint_names=_XARM6_JOINTS,
        acceleration_rad_s2=(20.0,) * 6,
        # UFACTORY's xArm Gripper TCP is 172 mm along the flange z axis.
        tcp_link="link6",
        tcp_offset_m=(0.0, 0.0, 0.172),
        home_rad=_XARM6_HOME,
        gripper_width_m=(0.0, 0.085),
    ),
    "xarm6_bare": _DescriptionSpec(
        urdf="xarm/xarm6_robot.urdf",
        joint_names=_XARM6_JOINTS,
        acceleration_rad_s2=(20.0,) * 6,
        tcp_link="link6",
        tcp_offset_m=(0.0, 0.0, 0.0),
        home_rad=_XARM6_HOME,
        gripper_width_m=(0.0, 0.0),
    ),
}


def available_descriptions() -> tuple[str, ...]:
    """Names accepted by :func:`load_description`."""
    return tuple(sorted(_SPECS))


def pybullet_data_path() -> Path:
    """Folder of the URDFs shipped with pybullet (imported lazily: only needed to read a description)."""
    import pybullet_data

    return Path(pybullet_data.getDataPath())


@functools.cache
def load_description(name: str) -> RobotDescription:
    """The description registered as ``name`` ("panda", "fr3", "xarm6", "xarm6_bare"), read from its URDF."""
    try:
        spec = _SPECS[name]
    except KeyError:
        raise UnknownRobotDescriptionError(
            f"unknown robot description {name!r}; expected one of {available_descriptions()}"
        ) from None
    return description_from_urdf(
        name,
        pybullet_data_path() / spec.urdf,
        joint_names=spec.joint_names,
        tcp_link=spec.tcp_link,
        T_link_tcp=make_transform(t=spec.tcp_offset_m),
        acceleration_rad_s2=np.array(spec.acceleration_rad_s2),
        home_rad=np.array(spec.home_rad),
        gripper_width_m=spec.gripper_width_m,
        lower_rad=spec.lower_rad,
        upper_rad=spec.upper_rad,
        velocity_rad_s=spec.velocity_rad_s,
    )


def _floats(text: str | None, count: int, default: float = 0.0) -> np.ndarray:
    if text is None:
        return np.full(count, default)
    values = np.array([float(v) for v in text.split()], dtype=np.float64)
    if values.size != count:
        raise ValueError(f"expected {count} numbers, got {text!r}")
    return values


def description_from_urdf(
    name: str,
    urdf_path: Path,
    *,
    joint_names: tuple[str, ...],
    tcp_link: str,
    T_link_tcp: np.ndarray,
    acceleration_rad_s2: np.ndarray,
    home_rad: np.ndarray,
    gripper_width_m: tuple[float, float],
    lower_rad: tuple[float, ...] | None = None,
    upper_rad: tuple[float, ...] | None = None,
    velocity_rad_s: tuple[float, ...] | None = None,
) -> RobotDescription:
    """Build a description from a URDF: the chain base → ``tcp_link`` and the limits of ``joint_names``.

    ``lower_rad``, ``upper_rad`` and ``velocity_rad_s`` replace the URDF's limits when given.
    """
    root = ET.parse(urdf_path).getroot()
    joints = {}
    parent_of_link: dict[str, str] = {}
    for element in root.findall("joint"):
        child = element.find("child").get("link")
        joints[child] = element
        parent_of_link[child] = element.find("parent").get("link")
    # Walk up from the TCP link to the root link.
    path: list[ET.Element] = []
    link = tcp_link
    while link in joints:
        path.append(joints[link])
        link = parent_of_link[link]
    base_link = link
    path.reverse()
    # A world link fixed to the base adds nothing; the arm's base frame is the first real link.
    if path and path[0].get("type") == "fixed" and base_link == "world":
        base_link = path[0].find("child").get("link")
        path = path[1:]

    chain: list[ChainJoint] = []
    lower, upper, velocity = {}, {}, {}
    for element in path:
        joint_name = element.get("name")
        kind = element.get("type")
        origin = element.find("origin")
        xyz = _floats(None if origin is None else origin.get("xyz"), 3)
        rpy = _floats(None if origin is None else origin.get("rpy"), 3)
        axis_element = element.find("axis")
        axis = _floats(None if axis_element is None else axis_element.get("xyz"), 3)
        arm_index = None
        if kind != "fixed":
            if joint_name not in joint_names:
                raise ArmConfigError(f"{urdf_path.name}: movable joint {joint_name!r} is not in {joint_names}")
            arm_index = joint_names.index(joint_name)
            axis = axis if np.linalg.norm(axis) > 0 else np.array([1.0, 0.0, 0.0])
            axis = axis / np.linalg.norm(axis)
            limit = element.find("limit")
            if kind == "continuous" or limit is None:
                lower[joint_name], upper[joint_name] = -np.pi * 2, np.pi * 2
            else:
                lower[joint_name], upper[joint_name] = float(limit.get("lower")), float(limit.get("upper"))
            velocity[joint_name] = float(limit.get("velocity")) if limit is not None else np.pi
        T = make_transform(rpy_to_matrix(*rpy), xyz)
        T.setflags(write=False)
        axis.setflags(write=False)
        chain.append(ChainJoint(joint_name, kind, T, axis, arm_index))
    missing = [j for j in joint_names if j not in lower]
    if missing:
        raise ArmConfigError(f"{urdf_path.name}: joints {missing} are not between {base_link} and {tcp_link}")

    def frozen(values: object) -> np.ndarray:
        array = np.array(values, dtype=np.float64)
        array.setflags(write=False)
        return array

    description = RobotDescription(
        name=name,
        urdf_path=Path(urdf_path),
        joint_names=tuple(joint_names),
        lower_rad=frozen(lower_rad if lower_rad is not None else [lower[j] for j in joint_names]),
        upper_rad=frozen(upper_rad if upper_rad is not None else [upper[j] for j in joint_names]),
        velocity_rad_s=frozen(velocity_rad_s if velocity_rad_s is not None else [velocity[j] for j in joint_names]),
        acceleration_rad_s2=frozen(acceleration_rad_s2),
        base_link=base_link,
        tcp_link=tcp_link,
        T_link_tcp=frozen(T_link_tcp),
        home_rad=frozen(home_rad),
        gripper_min_width_m=float(gripper_width_m[0]),
        gripper_max_width_m=float(gripper_width_m[1]),
        chain=tuple(chain),
    )
    if description.acceleration_rad_s2.shape != (description.dof,) or description.home_rad.shape != (description.dof,):
        raise ArmConfigError(f"{name}: acceleration limits and home need {description.dof} values each")
    if not description.within_limits(description.home_rad):
        raise ArmConfigError(f"{name}: home {description.home_rad.tolist()} is outside the joint limits")
    return description
