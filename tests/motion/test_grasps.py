"""Grasp and place pose generation from 3D targets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.motion.errors import MotionConfigError
from robopin.motion.grasps import (
    GraspConfig,
    grasp_candidates,
    interpolate_pose,
    place_candidates,
    principal_yaw,
    top_down_rotation,
)


@given(st.floats(-10.0, 10.0))
@settings(max_examples=50, deadline=None)
def test_top_down_rotation_is_proper_and_points_down(yaw):
    R = top_down_rotation(yaw)
    assert np.allclose(R @ R.T, np.eye(3), atol=1e-12) and np.isclose(np.linalg.det(R), 1.0)
    assert np.allclose(R[:, 2], [0.0, 0.0, -1.0])
    assert np.isclose(np.arctan2(R[1, 0], R[0, 0]), np.arctan2(np.sin(yaw), np.cos(yaw)))


def test_grasp_closes_across_the_long_axis():
    rng = np.random.default_rng(0)
    along = rng.uniform(-0.08, 0.08, 400)
    across = rng.uniform(-0.015, 0.015, 400)
    axis = 0.6
    points = np.stack([along * np.cos(axis) - across * np.sin(axis), along * np.sin(axis) + across * np.cos(axis)], 1)
    assert principal_yaw(points) == pytest.approx(axis, abs=0.05) or principal_yaw(points) == pytest.approx(
        axis - np.pi, abs=0.05
    )
    best = grasp_candidates([0.4, 0.0, 0.05], GraspConfig(), object_points=points)[0]
    closing = best.T_base_grasp[:3, 1]  # fingers close along the TCP y axis
    long_axis = np.array([np.cos(axis), np.sin(axis), 0.0])
    assert abs(closing @ long_axis) < 0.05


def test_round_objects_have_no_axis():
    angles = np.linspace(0, 2 * np.pi, 100, endpoint=False)
    assert principal_yaw(np.stack([np.cos(angles), np.sin(angles)], 1) * 0.03) is None


def test_grasp_offsets_follow_the_config():
    config = GraspConfig(pre_grasp_distance_m=0.12, grasp_depth_m=0.015, lift_height_m=0.2, yaw_variants=3)
    candidates = grasp_candidates([0.5, 0.1, 0.06], config, yaw_rad=0.2)
    assert len(candidates) == 3
    yaws = sorted(c.yaw_rad for c in candidates)
    assert np.allclose(np.diff(yaws), np.pi / 3)
    first = candidates[0]
    assert first.yaw_rad == pytest.approx(0.2)
    assert np.allclose(first.T_base_grasp[:3, 3], [0.5, 0.1, 0.045])
    assert np.allclose(first.T_base_pre_grasp[:3, 3], [0.5, 0.1, 0.165])
    assert np.allclose(first.T_base_lift[:3, 3], [0.5, 0.1, 0.245])


def test_normal_aligned_grasp_approaches_against_the_normal():
    config = GraspConfig(normal_aligned=True)
    normal = np.array([0.3, 0.0, 1.0]) / np.linalg.norm([0.3, 0.0, 1.0])
    grasp = grasp_candidates([0.4, 0.0, 0.1], config, surface_normal=normal)[0]
    assert np.allclose(grasp.T_base_grasp[:3, 2], -normal)
    steep = grasp_candidates([0.4, 0.0, 0.1], config, surface_normal=[1.0, 0.0, 0.1])[0]
    assert np.allclose(steep.T_base_grasp[:3, 2], [0.0, 0.0, -1.0])  # too steep: falls back to top-down


def test_place_height_clears_the_surface():
    config = GraspConfig(grasp_depth_m=0.02, place_clearance_m=0.01)
    pick = np.array([0.4, 0.2, 0.05])  # top of a 5 cm object on the table
    grasp = grasp_candidates(pick, config, yaw_rad=0.0)[0]
    place = place_candidates([0.3, -0.2, 0.10], grasp, pick, config, object_height_m=0.05)[0]
    # TCP 2 cm below the object's top, object 5 cm tall: its bottom is 1 cm above the 10 cm surface.
    assert place.T_base_place[2, 3] == pytest.approx(0.10 + 0.05 + 0.01 - 0.02)
    assert place.yaw_rad == pytest.approx(grasp.yaw_rad)
    assert place.T_base_pre_place[2, 3] > place.T_base_place[2, 3]


def test_config_rejects_bad_offsets():
    with pytest.raises(MotionConfigError, match="pre_grasp_distance_m"):
        GraspConfig(pre_grasp_distance_m=0.0)
    with pytest.raises(MotionConfigError, match="yaw_variants"):
        GraspConfig(yaw_variants=0)
    with pytest.raises(MotionConfigError, match="pick point"):
        grasp_candidates([np.nan, 0.0, 0.0], GraspConfig())


def test_interpolate_pose_ends_and_middle():
    a = np.eye(4)
    b = np.eye(4)
    b[:3, :3] = top_down_rotation(1.0)
    b[:3, 3] = [1.0, 2.0, 3.0]
    assert np.allclose(interpolate_pose(a, b, 0.0), a)
    assert np.allclose(interpolate_pose(a, b, 1.0), b)
    mid = interpolate_pose(a, b, 0.5)
    assert np.allclose(mid[:3, 3], [0.5, 1.0, 1.5])
    assert np.allclose(mid[:3, :3] @ mid[:3, :3].T, np.eye(3))


@pytest.mark.parametrize("cube_m", [0.02, 0.03, 0.05])
def test_grasp_on_a_small_cube_never_puts_the_tcp_below_the_table(cube_m):
    # Regression (xArm long-horizon `workspace`): a pick point on a small object's top minus the grasp
    # depth put the TCP 0.5 mm under the table. With the support surface known it stays above it.
    config = GraspConfig()
    for pick_z in (cube_m, cube_m - 0.01, -0.0005):  # top, side face, depth noise below the table
        for candidate in grasp_candidates([0.5, 0.0, pick_z], config, support_height_m=0.0):
            assert candidate.T_base_grasp[2, 3] >= config.min_tcp_height_m - 1e-12
            assert candidate.T_base_pre_grasp[2, 3] > candidate.T_base_grasp[2, 3]
    # A tall object is grasped grasp_depth below its top as before: the clamp only lifts, never lowers.
    tall = grasp_candidates([0.5, 0.0, 0.12], config, support_height_m=0.0)[0]
    assert tall.T_base_grasp[2, 3] == pytest.approx(0.12 - config.grasp_depth_m)


def test_tilted_grasp_backs_out_along_its_approach_when_clamped():
    config = GraspConfig(normal_aligned=True)
    normal = np.array([0.3, 0.0, 1.0]) / np.linalg.norm([0.3, 0.0, 1.0])
    candidate = grasp_candidates([0.5, 0.0, 0.01], config, surface_normal=normal, support_height_m=0.0)[0]
    tcp = candidate.T_base_grasp[:3, 3]
    assert tcp[2] == pytest.approx(config.min_tcp_height_m)
    # Still on the line through the pick point along the approach (−normal).
    offset = tcp - np.array([0.5, 0.0, 0.01])
    assert np.linalg.norm(np.cross(offset, normal)) < 1e-9


def _box_cloud(centre_xy, size_m, height_m, spacing=0.005):
    """Surface points a camera would see on a box standing on the table: its top and its +x face."""
    xs = np.arange(-size_m / 2, size_m / 2 + 1e-9, spacing)
    top = np.array([[centre_xy[0] + x, centre_xy[1] + y, height_m] for x in xs for y in xs])
    zs = np.arange(0.0, height_m, spacing)
    front = np.array([[centre_xy[0] + size_m / 2, centre_xy[1] + y, z] for y in xs for z in zs])
    return np.vstack([top, front])


def test_grasp_centres_on_the_object_when_the_pick_point_is_on_a_side_face():
    # Regression (panda long-horizon grasp_missed / goal_tolerance): the seen point lay on a cube's
    # front face 2 cm off its centre, so one finger landed on the cube.
    config = GraspConfig()
    cloud = _box_cloud((0.46, 0.26), 0.045, 0.045)
    plate = np.array([[0.46 + dx, 0.33, 0.012] for dx in np.linspace(-0.03, 0.03, 7)])  # a plate beside it
    pick = np.array([0.46 + 0.0225, 0.262, 0.03])  # on the +x face, where the static camera saw it
    best = grasp_candidates(pick, config, object_points=np.vstack([cloud, plate]), support_height_m=0.0)[0]
    assert np.linalg.norm(best.T_base_grasp[:2, 3] - [0.46, 0.26]) < 0.006  # fingers open 8 cm around 4.5
    assert best.T_base_grasp[2, 3] == pytest.approx(0.045 - config.grasp_depth_m, abs=0.002)
    # Never moved farther than max_centring_m, and an empty neighbourhood leaves the point alone.
    far = grasp_candidates([0.46 + 0.06, 0.26, 0.03], config, object_points=cloud, support_height_m=0.0)[0]
    assert np.linalg.norm(far.T_base_grasp[:2, 3] - [0.52, 0.26]) <= config.max_centring_m + 1e-9
    alone = grasp_candidates([0.7, 0.0, 0.03], config, object_points=cloud, support_height_m=0.0)[0]
    assert np.allclose(alone.T_base_grasp[:2, 3], [0.7, 0.0])
