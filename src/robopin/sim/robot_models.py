"""How the simulator drives each robot model it can load: joints, gripper linkage, TCP and poses.

This is the pybullet side only (link indices, gripper joint maps, controller gains); the robot
description shared with the real drivers (joint names, limits, home) lives in
``robopin.robots.description``. Both name the same joints, so a joint state from the simulator
means the same thing as one from hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robopin.geometry.transforms import make_transform


class UnknownRobotError(KeyError):
    """A robot type the simulator has no model for."""


@dataclass(frozen=True)
class SimRobotModel:
    """One robot arm with its gripper as pybullet loads it.

    ``finger_joints`` maps gripper joint names to a multiplier on the gripper command ``c`` in 0..1
    (0 open, 1 closed): joint target = ``multiplier * (open + (closed - open) * c)``. For the xArm gripper the
    six linkage joints follow the URDF ``mimic`` entries, each driven by its own position motor,
    which is how a parallel linkage that pybullet cannot close as a loop still squeezes an object
    with a bounded force. That open chain gives way under load, so it cannot hold by friction:
    with ``grasp_weld`` the world locks an object to the hand once both finger sides touch it
    while the gripper is closing, and releases it when the gripper opens (the Panda's prismatic
    fingers hold by friction alone and do not use this). ``tcp_link`` is the link whose frame
    (times ``T_link_tcp``) is the ``ee`` frame. ``T_ee_wrist_camera`` mounts the wrist camera.
    """

    name: str
    urdf: str
    arm_joints: tuple[str, ...]
    finger_joints: dict[str, float]
    finger_open_position: float
    finger_closed_position: float
    finger_is_prismatic: bool
    max_width_m: float
    tcp_link: str
    T_link_tcp: np.ndarray
    home_q: tuple[float, ...]
    grasp_force_n: float
    arm_force_n: tuple[float, ...]
    T_ee_wrist_camera: np.ndarray
    top_down_reach_m: float
    grasp_weld: bool = False

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


MODELS: dict[str, SimRobotModel] = {
    "panda": SimRobotModel(
        name="panda",
        urdf="franka_panda/panda.urdf",
        arm_joints=tuple(f"panda_joint{i}" for i in range(1, 8)),
        finger_joints={"panda_finger_joint1": 1.0, "panda_finger_joint2": 1.0},
        finger_open_position=0.04,
        finger_closed_position=0.0,
        finger_is_prismatic=True,
        max_width_m=0.08,
        tcp_link="panda_grasptarget",
        T_link_tcp=np.eye(4),
        home_q=(0.0, -0.5, 0.0, -2.2, 0.0, 1.75, 0.785),
        grasp_force_n=40.0,
        arm_force_n=(87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0),
        T_ee_wrist_camera=_wrist_mount(0.08, 0.10),
        # Measured with the planner's IK (tests/sim/test_scenarios.py checks it): 0.80 m up to
        # 0.16 m TCP height (grasp, lift, pre-place); 0.02 m kept for off-centre place points.
        top_down_reach_m=0.78,
    ),
    "xarm6": SimRobotModel(
        name="xarm6",
        urdf="xarm/xarm6_with_gripper.urdf",
        arm_joints=tuple(f"joint{i}" for i in range(1, 7)),
        finger_joints={
            "drive_joint": 1.0,
            "left_finger_joint": 1.0,
            "left_inner_knuckle_joint": 1.0,
            "right_outer_knuckle_joint": 1.0,
            "right_finger_joint": 1.0,
            "right_inner_knuckle_joint": 1.0,
        },
        finger_open_position=0.0,
        finger_closed_position=0.85,
        finger_is_prismatic=False,
        max_width_m=0.085,
        tcp_link="link6",
        # xArm gripper TCP: 172 mm along link6 z (UFACTORY's documented TCP offset for this gripper).
        T_link_tcp=make_transform(None, [0.0, 0.0, 0.172]),
        home_q=(0.0, -0.35, -0.9, 0.0, 1.25, 0.0),
        grasp_force_n=30.0,
        arm_force_n=(50.0, 50.0, 32.0, 32.0, 32.0, 20.0),
        T_ee_wrist_camera=_wrist_mount(0.08, 0.10),
        # Measured as for the Panda: 0.68 m up to 0.16 m TCP height; 0.02 m kept likewise.
        top_down_reach_m=0.66,
        grasp_weld=True,
    ),
}


def robot_model(name: str) -> SimRobotModel:
    """Return the simulator model of robot type ``name`` or raise :class:`UnknownRobotError`."""
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownRobotError(f"unknown sim robot {name!r}; expected one of {sorted(MODELS)}") from None
