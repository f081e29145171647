"""Robot descriptions read from the pybullet_data URDFs: limits, chains and forward kinematics."""

from __future__ import annotations

import numpy as np
import pybullet
import pytest

from robopin.geometry.transforms import quaternion_to_matrix
from robopin.robots.description import (
    UnknownRobotDescriptionError,
    available_descriptions,
    load_description,
)


def test_limits_come_from_the_urdf():
    panda = load_description("panda")
    assert panda.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert panda.lower_rad[3] == pytest.approx(-3.0718, abs=0.1)
    assert panda.upper_rad[3] == pytest.approx(0.0)
    assert panda.velocity_rad_s[0] == pytest.approx(2.175)
    xarm = load_description("xarm6")
    assert xarm.joint_names == ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6")
    assert xarm.lower_rad[2] == pytest.approx(-3.927)
    assert xarm.gripper_max_width_m == pytest.approx(0.085)


def test_fr3_keeps_panda_kinematics_with_its_own_limits():
    panda, fr3 = load_description("panda"), load_description("fr3")
    q = fr3.home_rad
    np.testing.assert_allclose(panda.forward_kinematics(q), fr3.forward_kinematics(q))
    assert fr3.lower_rad[5] == pytest.approx(0.4398)


def test_unknown_description_names_the_choices():
    with pytest.raises(UnknownRobotDescriptionError, match="panda"):
        load_description("ur5")


@pytest.mark.parametrize("name", available_descriptions())
def test_home_is_inside_the_limits(name):
    description = load_description(name)
    assert description.within_limits(description.home_rad)


@pytest.mark.parametrize("name", ["panda", "xarm6"])
def test_forward_kinematics_matches_pybullet(name):
    description = load_description(name)
    client = pybullet.connect(pybullet.DIRECT)
    try:
        body = pybullet.loadURDF(str(description.urdf_path), useFixedBase=True, physicsClientId=client)
        joints, links = {}, {}
        for index in range(pybullet.getNumJoints(body, physicsClientId=client)):
            info = pybullet.getJointInfo(body, index, physicsClientId=client)
            joints[info[1].decode()] = index
            links[info[12].decode()] = index
        rng = np.random.default_rng(7)
        for _ in range(5):
            q = rng.uniform(description.lower_rad, description.upper_rad)
            for joint, value in zip(description.joint_names, q, strict=True):
                pybullet.resetJointState(body, joints[joint], value, physicsClientId=client)
            link = pybullet.getLinkState(
                body, links[description.tcp_link], computeForwardKinematics=True, physicsClientId=client
            )
            T_link = description.forward_kinematics(q) @ np.linalg.inv(description.T_link_tcp)
            np.testing.assert_allclose(T_link[:3, 3], link[4], atol=1e-6)
            np.testing.assert_allclose(T_link[:3, :3], quaternion_to_matrix(link[5]), atol=1e-6)
    finally:
        pybullet.disconnect(client)


def test_batch_forward_kinematics_equals_single():
    description = load_description("xarm6")
    q = np.random.default_rng(1).uniform(description.lower_rad, description.upper_rad, size=(4, 6))
    batch = description.forward_kinematics_batch(q)
    for row, T in zip(q, batch, strict=True):
        np.testing.assert_allclose(description.forward_kinematics(row), T)
