"""One description per robot (URDF, arm joints, limits, TCP, home, gripper), read by drivers, sim and planners."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robopin.geometry.transforms import make_transform
from robopin.robots.errors import ArmConfigError
from robopin.robots.kinematics import ArmKinematics
from robopin.robots.urdf import UrdfTree


class UnknownRobotDescriptionError(ArmConfigError):
    """No description is registered under the requested robot name."""


@dataclass(frozen=True, eq=False)
class RobotDescription:
    """Kinematics and limits of one arm with its gripper; angles in rad, lengths in m.

    Joint names, position and velocity limits and the kinematic chain come from the URDF that ships in
    ``pybullet_data``; acceleration limits, the TCP offset and the gripper range from the maker's
    datasheet. ``gripper_joints`` are the URDF's finger joints, at ``gripper_open_position`` when open
    and ``gripper_closed_position`` when closed (m or rad, as the joint); ``gripper_links`` move with
    them. ``package_dir`` is where the URDF's meshes resolve.
    """

    name: str
    urdf_path: Path
    package_dir: Path
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
    gripper_joints: tuple[str, ...]
    gripper_open_position: float
    gripper_closed_position: float
    gripper_links: tuple[str, ...]
    kinematics: ArmKinematics = field(repr=False)

    @functools.cached_property
    def urdf_tree(self) -> UrdfTree:
        """Every link and joint of the URDF (fixed ones too), read once: TF publishing and cuRobo's config use it."""
        return UrdfTree.from_file(self.urdf_path)

    @property
    def dof(self) -> int:
        return len(self.joint_names)

    def within_limits(self, q: np.ndarray, margin_rad: float = 0.0) -> bool:
        """True when every joint of ``q`` lies inside its position limits shrunk by ``margin_rad``."""
        q = np.asarray(q, dtype=np.float64)
        return bool(np.all(q >= self.lower_rad + margin_rad) and np.all(q <= self.upper_rad - margin_rad))

    def forward_kinematics(self, q: np.ndarray) -> np.ndarray:
        """``T_base_ee`` (4x4) for the arm configuration ``q`` (rad)."""
        return self.kinematics.forward_kinematics(q)

    def forward_kinematics_batch(self, q: np.ndarray) -> np.ndarray:
        """``T_base_ee`` for each row of ``q`` (N, dof): an (N, 4, 4) array."""
        q = np.asarray(q, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != self.dof:
            raise ValueError(f"q must have shape (N, {self.dof}) for {self.name}, got {q.shape}")
        return self.kinematics.forward_kinematics_batch(q)


@dataclass(frozen=True)
class _GripperSpec:
    joints: tuple[str, ...]
    open_position: float
    closed_position: float
    links: tuple[str, ...]
    width_m: tuple[float, float]


@dataclass(frozen=True)
class _DescriptionSpec:
    urdf: str  # path inside pybullet_data
    package_dir: str  # mesh root inside pybullet_data
    joint_names: tuple[str, ...]
    acceleration_rad_s2: tuple[float, ...]
    base_link: str
    tcp_link: str
    tcp_offset_m: tuple[float, float, float]
    home_rad: tuple[float, ...]
    gripper: _GripperSpec
    # Limits that replace the URDF's (a robot sharing another's kinematics but not its limits).
    lower_rad: tuple[float, ...] | None = None
    upper_rad: tuple[float, ...] | None = None
    velocity_rad_s: tuple[float, ...] | None = None


_PANDA_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
# franka_ros2 franka_example_controllers move_to_start_example_controller.cpp: the "start" pose
# q_goal_ = {0, -pi/4, 0, -3pi/4, 0, pi/2, pi/4}.
_PANDA_HOME = (0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4)
# pybullet_data's panda.urdf: each finger slides 0 .. 0.04 m; panda_grasptarget sits 0.105 m in
# front of the hand flange, between the fingertips, so it is the TCP with no extra offset.
_PANDA_HAND = _GripperSpec(
    joints=("panda_finger_joint1", "panda_finger_joint2"),
    open_position=0.04,
    closed_position=0.0,
    links=("panda_hand", "panda_leftfinger", "panda_rightfinger"),
    width_m=(0.0, 0.08),
)
_XARM6_JOINTS = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")
# xarm_ros2's SRDF "home" is all zeros, which with the gripper puts the fingertips below the mount
# plane; this top-down posture puts the TCP about 0.33 m in front of the base and 0.33 m up instead.
_XARM6_HOME = (0.0, -0.5, -1.0, 0.0, 1.5, 0.0)
# xarm_ros2 xarm_moveit_config/srdf/_xarm6_macro.srdf.xacro: gripper states "open" drive_joint = 0,
# "close" = 0.85; the five other linkage joints mimic drive_joint.
_XARM_GRIPPER = _GripperSpec(
    joints=(
        "drive_joint",
        "left_finger_joint",
        "left_inner_knuckle_joint",
        "right_outer_knuckle_joint",
        "right_finger_joint",
        "right_inner_knuckle_joint",
    ),
    open_position=0.0,
    closed_position=0.85,
    links=(
        "xarm_gripper_base_link",
        "left_outer_knuckle",
        "left_finger",
        "left_inner_knuckle",
        "right_inner_knuckle",
        "right_outer_knuckle",
        "right_finger",
    ),
    width_m=(0.0, 0.085),
)
_NO_GRIPPER = _GripperSpec(joints=(), open_position=0.0, closed_position=0.0, links=(), width_m=(0.0, 0.0))
# Acceleration limits are not in URDFs: Panda values from Franka's datasheet; the xArm's maximum joint
# acceleration is 1145 deg/s² (UFACTORY user manual), rounded down to 20 rad/s².
_PANDA = _DescriptionSpec(
    urdf="franka_panda/panda.urdf",
    package_dir="franka_panda",
    joint_names=_PANDA_JOINTS,
    acceleration_rad_s2=(15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
    base_link="panda_link0",
    tcp_link="panda_grasptarget",
    tcp_offset_m=(0.0, 0.0, 0.0),
    home_rad=_PANDA_HOME,
    gripper=_PANDA_HAND,
)
_XARM6 = _DescriptionSpec(
    urdf="xarm/xarm6_with_gripper.urdf",
    package_dir="xarm",
    joint_names=_XARM6_JOINTS,
    acceleration_rad_s2=(20.0,) * 6,
    base_link="link_base",
    # UFACTORY's xArm Gripper TCP is 172 mm along the flange z axis.
    tcp_link="link6",
    tcp_offset_m=(0.0, 0.0, 0.172),
    home_rad=_XARM6_HOME,
    gripper=_XARM_GRIPPER,
)
_SPECS: dict[str, _DescriptionSpec] = {
    "panda": _PANDA,
    # Franka Research 3: the Panda's kinematics (same joint origins) with FR3 limits from Franka's
    # datasheet (the limits franky-sim's FR3 model uses).
    "fr3": dataclasses.replace(
        _PANDA,
        acceleration_rad_s2=(10.0,) * 7,
        lower_rad=(-2.9007, -1.8361, -2.9007, -3.0770, -2.8763, 0.4398, -3.0508),
        upper_rad=(2.9007, 1.8361, 2.9007, -0.1169, 2.8763, 4.6216, 3.0508),
        velocity_rad_s=(2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
    ),
    "xarm6": _XARM6,
    # The arm alone, TCP at the flange: what the xArm controller's own kinematics compute.
    "xarm6_bare": dataclasses.replace(_XARM6, urdf="xarm/xarm6_robot.urdf", tcp_offset_m=(0.0, 0.0, 0.0),
                                      gripper=_NO_GRIPPER),
}


def available_descriptions() -> tuple[str, ...]:
    """Names accepted by :func:`load_description`."""
    return tuple(sorted(_SPECS))


def pybullet_data_path() -> Path:
    """Folder of the URDFs shipped with pybullet (imported lazily: only needed to read a description)."""
    import pybullet_data

    return Path(pybullet_data.getDataPath())


def _frozen(values: object) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


@functools.cache
def load_description(name: str) -> RobotDescription:
    """The description registered as ``name`` ("panda", "fr3", "xarm6", "xarm6_bare"), read from its URDF."""
    try:
        spec = _SPECS[name]
    except KeyError:
        raise UnknownRobotDescriptionError(
            f"unknown robot description {name!r}; expected one of {available_descriptions()}"
        ) from None
    urdf_path = pybullet_data_path() / spec.urdf
    T_link_tcp = _frozen(make_transform(t=spec.tcp_offset_m))
    kinematics = ArmKinematics(
        urdf_path,
        joint_names=spec.joint_names,
        base_link=spec.base_link,
        tcp_link=spec.tcp_link,
        T_link_tcp=T_link_tcp,
        locked_joints=dict.fromkeys(spec.gripper.joints, spec.gripper.open_position),
    )
    model = kinematics.model
    description = RobotDescription(
        name=name,
        urdf_path=urdf_path,
        package_dir=pybullet_data_path() / spec.package_dir,
        joint_names=spec.joint_names,
        lower_rad=_frozen(spec.lower_rad if spec.lower_rad is not None else model.lowerPositionLimit),
        upper_rad=_frozen(spec.upper_rad if spec.upper_rad is not None else model.upperPositionLimit),
        velocity_rad_s=_frozen(spec.velocity_rad_s if spec.velocity_rad_s is not None else model.velocityLimit),
        acceleration_rad_s2=_frozen(spec.acceleration_rad_s2),
        base_link=spec.base_link,
        tcp_link=spec.tcp_link,
        T_link_tcp=T_link_tcp,
        home_rad=_frozen(spec.home_rad),
        gripper_min_width_m=float(spec.gripper.width_m[0]),
        gripper_max_width_m=float(spec.gripper.width_m[1]),
        gripper_joints=spec.gripper.joints,
        gripper_open_position=spec.gripper.open_position,
        gripper_closed_position=spec.gripper.closed_position,
        gripper_links=spec.gripper.links,
        kinematics=kinematics,
    )
    if description.acceleration_rad_s2.shape != (description.dof,) or description.home_rad.shape != (description.dof,):
        raise ArmConfigError(f"{name}: acceleration limits and home need {description.dof} values each")
    if not description.within_limits(description.home_rad):
        raise ArmConfigError(f"{name}: home {description.home_rad.tolist()} is outside the joint limits")
    return description
