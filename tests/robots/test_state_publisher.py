"""robot_state_publisher's transforms from a URDF: the chain through them is the description's forward kinematics."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.robots.description import load_description
from robopin.robots.state_publisher import robopin_frame_transforms
from robopin.robots.urdf import UrdfTree, UrdfTreeError


def _compose(edges, child: str, root: str) -> np.ndarray:
    by_child = {e.child: e for e in edges}
    T = np.eye(4)
    while child != root:
        edge = by_child[child]
        T = edge.T_parent_child @ T
        child = edge.parent
    return T


@pytest.mark.parametrize("robot", ["panda", "xarm6"])
def test_tf_edges_of_the_urdf_chain_to_ee_equal_the_description_forward_kinematics(robot):
    description = load_description(robot)
    tree = UrdfTree.from_urdf(description.urdf_path.read_text())
    static = tree.fixed_transforms() + robopin_frame_transforms(description.base_link, description.tcp_link,
                                                                description.T_link_tcp)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(description.lower_rad, description.upper_rad)
        edges = static + tree.moving_transforms(dict(zip(description.joint_names, q, strict=True)))
        # "base" is an identity child of the URDF base link, so base→ee equals base_link→ee.
        T_base_ee = _compose(edges, "ee", description.base_link)
        np.testing.assert_allclose(T_base_ee, description.forward_kinematics(q), atol=1e-12)


def test_mimic_joints_follow_their_leader_and_unknown_joints_are_left_out():
    tree = UrdfTree.from_urdf(load_description("xarm6").urdf_path.read_text())
    assert "drive_joint" in tree.movable_joint_names and "left_finger_joint" not in tree.movable_joint_names
    edges = {e.child: e for e in tree.moving_transforms({"drive_joint": 0.3})}
    assert set(edges) >= {"left_outer_knuckle", "left_finger", "right_inner_knuckle"}
    assert "link1" not in edges  # joint1 has no known position: no transform, as robot_state_publisher does
    left = tree.moving_transforms({"drive_joint": 0.0})
    assert not np.allclose({e.child: e for e in left}["left_finger"].T_parent_child,
                           edges["left_finger"].T_parent_child)


def test_a_urdf_that_is_no_tree_is_refused_by_name():
    urdf = ("<robot name='r'><link name='a'/><link name='b'/>"
            "<joint name='j1' type='fixed'><parent link='a'/><child link='b'/></joint>"
            "<joint name='j2' type='fixed'><parent link='a'/><child link='b'/></joint></robot>")
    with pytest.raises(UrdfTreeError, match=r"links \['b'\] have more than one parent"):
        UrdfTree.from_urdf(urdf)
    with pytest.raises(UrdfTreeError, match="floating"):
        UrdfTree.from_urdf("<robot name='r'><joint name='j' type='floating'><parent link='a'/>"
                           "<child link='b'/></joint></robot>")
