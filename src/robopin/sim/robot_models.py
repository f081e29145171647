"""How the simulator drives each robot: the shared robot description plus pybullet gains and the wrist mount."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from robopin.geometry.transforms import make_transform
from robopin.robots.description import RobotDescription, load_description


class UnknownRobotError(KeyError):
    """A robot type the simulator has no model for."""


@dataclass(frozen=True)
class SimRobotModel:
    """One robot arm with its gripper as pybullet loads it.

    URDF, joints, TCP, home and gripper range are the robot's :class:`RobotDescription`, so a joint
    state from the simulator means the same as one from hardware. Gripper command ``c`` in 0..1
    (0 open, 1 closed) drives every finger joint to ``open + (closed - open) * c``. For the xArm
    gripper the six linkage joints follow the URDF ``mimic`` entries (multiplier 1), each driven by
    its own position motor, which is how a parallel linkage that pybullet cannot close as a loop
    still squeezes an object with a bounded force. That open chain gives way under load, so it
    cannot hold by friction: with ``grasp_weld`` the world locks an object to the hand once both
    finger sides touch it while the gripper is closing, and releases it when the gripper opens (the
    Panda's prismatic fingers hold by friction alone and do not use this). ``T_ee_wrist_camera``
    mounts the wrist camera.
    """

    description: RobotDescription
    finger_is_prismatic: bool
    grasp_force_n: float
    arm_force_n: tuple[float, ...]
    T_ee_wrist_camera: np.ndarray
    top_down_reach_m: float
    grasp_weld: bool = False

    @property
    def name(self) -> str:
        return self.description.name

    @property
    def urdf(self) -> str:
        return str(self.description.urdf_path)

    @property
    def arm_joints(self) -> tuple[str, ...]:
        return self.description.joint_names

    @property
    def finger_joints(self) -> dict[str, float]:
        """Finger joint names with the multiplier of each on the gripper command (all mimic at 1)."""
        return dict.fromkeys(self.description.gripper_joints, 1.0)

    @property
    def finger_open_position(self) -> float:
        return self.description.gripper_open_position

    @property
    def finger_closed_position(self) -> float:
        return self.description.gripper_closed_position

    @property
    def max_width_m(self) -> float:
        return self.description.gripper_max_width_m

    @property
    def tcp_link(self) -> str:
        return self.description.tcp_link

    @property
    def T_link_tcp(self) -> np.ndarray:
        return self.description.T_link_tcp

    @property
    def home_q(self) -> tuple[float, ...]:
        return tuple(float(v) for v in self.description.home_rad)

    def width_from_command(self, closed_fraction: float) -> float:
        """Unobstructed opening (m) at ``closed_fraction`` (0 open .. 1 closed)."""
        return self.max_width_m * (1.0 - float(np.clip(closed_fraction, 0.0, 1.0)))

    def command_from_width(self, width_m: float) -> float:
        """Closed fraction that opens the gripper to ``width_m`` (clipped to the gripper's range)."""
        return float(np.clip(1.0 - width_m / self.max_width_m, 0.0, 1.0))


# The wrist camera sits on the hand 8 cm to the front of the fingers (toward ee +x) and 10 cm behind
# the fingertips, looking along the approach direction like a D435 on a bracket. Its image "up" is
# ee +x, so with the hand in its usual yaw the far side of the table is at the top of the image, and
# the hand and fingers stay just outside the 42° vertical field of view. ``tilt_rad`` turns it about
# its own x axis toward the fingers if wanted.
def _wrist_mount(offset_x: float, back_m: float, tilt_rad: float = 0.0) -> np.ndarray:
    c, s = np.cos(tilt_rad), np.sin(tilt_rad)
    ee_from_image = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    return make_transform(ee_from_image @ tilt, [offset_x, 0.0, -back_m])


# Everything the simulator adds to each robot's description, keyed by description name.
_SIM_PARAMETERS: dict[str, dict] = {
    "panda": dict(
        finger_is_prismatic=True,
        grasp_force_n=40.0,
        arm_force_n=(87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0),
        T_ee_wrist_camera=_wrist_mount(0.08, 0.10),
        # The planner's IK reaches 0.16 m TCP height (grasp, lift, pre-place) up to 0.80 m out
        # (tests/sim/test_tasks.py checks it); 0.02 m kept for off-centre place points.
        top_down_reach_m=0.78,
    ),
    "xarm6": dict(
        finger_is_prismatic=False,
        grasp_force_n=30.0,
        arm_force_n=(50.0, 50.0, 32.0, 32.0, 32.0, 20.0),
        T_ee_wrist_camera=_wrist_mount(0.08, 0.10),
        # As for the Panda: 0.68 m out at 0.16 m TCP height, 0.02 m kept likewise.
        top_down_reach_m=0.66,
        grasp_weld=True,
    ),
}


@functools.cache
def robot_model(name: str) -> SimRobotModel:
    """Return the simulator model of robot type ``name`` or raise :class:`UnknownRobotError`."""
    try:
        parameters = _SIM_PARAMETERS[name]
    except KeyError:
        raise UnknownRobotError(f"unknown sim robot {name!r}; expected one of {sorted(_SIM_PARAMETERS)}") from None
    return SimRobotModel(description=load_description(name), **parameters)
