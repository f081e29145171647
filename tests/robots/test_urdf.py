"""The URDF tree read with urdf_parser_py: the URDF spec's defaults, refusals by name, read once per description."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.robots.description import load_description
from robopin.robots.urdf import UrdfTree, UrdfTreeError


def _robot(joints: str, links: str = "a b c") -> str:
    return ("<?xml version='1.0' encoding='utf-8'?><robot name='r'>"
            + "".join(f"<link name='{name}'/>" for name in links.split()) + joints + "</robot>")


def test_a_description_reads_its_urdf_tree_once_with_every_joint():
    description = load_description("xarm6")
    tree = description.urdf_tree
    assert tree is description.urdf_tree
    assert set(description.joint_names) | set(description.gripper_joints) <= set(tree.joints)
    assert tree.joints["gripper_fix"].type == "fixed"  # fixed joints stay joints of the tree
    assert tree.joints["left_finger_joint"].mimic_of == "drive_joint"
    assert description.tcp_link in tree.links and tree.joint_of(tree.root_link) is None


def test_the_urdf_specs_defaults_apply():
    tree = UrdfTree.from_urdf(_robot(
        "<joint name='j1' type='continuous'><parent link='a'/><child link='b'/>"
        "<limit effort='1' velocity='1'/></joint>"
        "<joint name='j2' type='revolute'><origin xyz='0 0 0.5' rpy='0 0 1.5707963267948966'/><axis xyz='0 0 2'/>"
        "<parent link='b'/><child link='c'/><limit lower='-1' upper='1' effort='1' velocity='1'/>"
        "<mimic joint='j1'/></joint>"))
    j1, j2 = tree.joints["j1"], tree.joints["j2"]
    np.testing.assert_array_equal(j1.origin, np.eye(4))
    np.testing.assert_array_equal(j1.axis, [1.0, 0.0, 0.0])
    assert (j1.lower, j1.upper) == (-np.inf, np.inf)
    np.testing.assert_array_equal(j2.axis, [0.0, 0.0, 1.0])
    assert (j2.mimic_of, j2.multiplier, j2.offset, j2.lower, j2.upper) == ("j1", 1.0, 0.0, -1.0, 1.0)
    np.testing.assert_allclose(j2.transform(np.pi / 2)[:3, 0], [-1.0, 0.0, 0.0], atol=1e-12)
    assert tree.movable_joint_names == ("j1",)
    edges = tree.moving_transforms({"j1": 0.25})
    assert [(e.parent, e.child) for e in edges] == [("a", "b"), ("b", "c")]


def test_transmissions_are_not_read():
    tree = UrdfTree.from_urdf(_robot(
        "<joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>"
        "<transmission name='t'><type>SimpleTransmission</type><joint name='j'/>"
        "<actuator name='m'><mechanicalReduction>reduction</mechanicalReduction></actuator></transmission>",
        links="a b"))
    assert list(tree.joints) == ["j"]


@pytest.mark.parametrize(("text", "match"), [
    ("<robot name='r'><link", "not a valid URDF"),
    (_robot("<joint name='j' type='fixed'><child link='b'/></joint>"), "Required element not set in XML: parent"),
    (_robot("<joint name='j' type='planar'><parent link='a'/><child link='b'/></joint>"), "'j' has type 'planar'"),
    (_robot("<joint name='j' type='revolute'><axis xyz='0 0 0'/><parent link='a'/><child link='b'/>"
            "<limit effort='1' velocity='1'/></joint>"), "'j' has a zero axis"),
    (_robot("<joint name='j' type='fixed'><parent link='a'/><child link='b'/></joint>"),
     r"one root link, found \['a', 'c'\]"),
    (_robot("<joint name='j' type='prismatic'><parent link='a'/><child link='b'/><mimic joint='k'/>"
            "<limit effort='1' velocity='1'/></joint>", links="a b"), "'j' mimics unknown joint 'k'"),
])
def test_a_urdf_the_tree_cannot_read_is_refused_by_name(text, match):
    with pytest.raises(UrdfTreeError, match=match):
        UrdfTree.from_urdf(text)
