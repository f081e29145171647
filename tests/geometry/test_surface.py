"""Surface normals from a depth patch and object extents above the support surface."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robopin.geometry import (
    CameraModel,
    estimate_normal,
    estimate_object_extent,
    invert,
    make_transform,
    rotation_angle,
)
from tests.geometry.geometry_scenes import CAMERA, plane_depth, step_depth, tilted_plane


def angle_between(a, b) -> float:
    return math.acos(float(np.clip(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b), -1, 1)))


@pytest.mark.parametrize("tilt_deg", [0.0, 20.0, 45.0, 70.0])
def test_normal_of_a_tilted_plane_points_to_the_camera(tilt_deg):
    n, d = tilted_plane(math.radians(tilt_deg), 1.0)
    depth = plane_depth(CAMERA, n, d)
    u, v = 250.5, 300.5
    z = float(depth[300, 250])
    result = estimate_normal(depth, CAMERA, u, v, z)
    assert result.valid
    # float32 depth quantisation is the only error source: well under half a degree.
    assert math.degrees(angle_between(result.normal, n)) < 0.5
    assert np.dot(result.normal, CAMERA.deproject(u, v, z)) < 0
    assert result.rms_m < 1e-4


def test_normal_next_to_an_edge_ignores_the_background():
    # Foreground plane tilted 40 degrees in front of a flat background.
    n, d = tilted_plane(math.radians(40.0), 0.6)
    depth = plane_depth(CAMERA, n, d)
    depth[:, 100:] = 1.4
    z = float(depth[240, 97])
    result = estimate_normal(depth, CAMERA, 97.5, 240.5, z, window_px=11)
    assert math.degrees(angle_between(result.normal, n)) < 0.5


def test_normal_with_noise_is_within_a_few_degrees():
    rng = np.random.default_rng(7)
    n, d = tilted_plane(math.radians(30.0), 0.8)
    depth = plane_depth(CAMERA, n, d) + rng.normal(0, 0.001, (480, 640)).astype(np.float32)
    result = estimate_normal(depth, CAMERA, 320.5, 240.5, float(depth[240, 320]), window_px=15)
    assert math.degrees(angle_between(result.normal, n)) < 5.0


def test_no_normal_without_enough_depth():
    depth = np.full((480, 640), np.nan, dtype=np.float32)
    depth[240, 320] = 1.0
    assert not estimate_normal(depth, CAMERA, 320.5, 240.5, 1.0).valid
    assert not estimate_normal(step_depth(CAMERA, 1, 2, 5), CAMERA, 320.5, 240.5, math.nan).valid


def top_down_box_scene(yaw_rad: float, size=(0.10, 0.04, 0.05), camera_height_m=0.8):
    """Camera 0.8 m above a table (z = 0), looking straight down; a box centred under it, rotated by yaw."""
    cam = CameraModel(640, 480, 600.0, 600.0, 319.5, 239.5)
    # Optical z points down (-z base); x right = base x; y down = base -y.
    T_base_cam = make_transform(np.diag([1.0, -1.0, -1.0]), [0.0, 0.0, camera_height_m])
    u, v = cam.pixel_centres()
    rays = cam.pixel_to_ray(u, v)
    rays_base = rays @ T_base_cam[:3, :3].T
    top = size[2]
    # Where each ray meets the box top plane z = top, in base x, y.
    s = (top - camera_height_m) / rays_base[..., 2]
    x = s * rays_base[..., 0]
    y = s * rays_base[..., 1]
    c, sn = math.cos(yaw_rad), math.sin(yaw_rad)
    along = c * x + sn * y
    across = -sn * x + c * y
    on_top = (np.abs(along) <= size[0] / 2) & (np.abs(across) <= size[1] / 2)
    depth = np.where(on_top, camera_height_m - top, camera_height_m).astype(np.float32)
    return cam, T_base_cam, depth


@pytest.mark.parametrize("yaw_deg", [0.0, 30.0, -60.0])
def test_object_extent_of_a_box_on_a_table(yaw_deg):
    yaw = math.radians(yaw_deg)
    cam, T_base_cam, depth = top_down_box_scene(yaw)
    ext = estimate_object_extent(depth, cam, T_base_cam, 320.5, 240.5)
    assert ext is not None
    assert ext.support_height_m == pytest.approx(0.0, abs=1e-3)
    assert ext.height_m == pytest.approx(0.05, abs=1e-3)
    # A pixel is ~1.25 mm on the box top at 0.75 m: extents are good to a couple of pixels.
    assert ext.length_m == pytest.approx(0.10, abs=4e-3)
    assert ext.width_m == pytest.approx(0.04, abs=4e-3)
    expected_axis = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    assert abs(np.dot(ext.principal_axis, expected_axis)) == pytest.approx(1.0, abs=2e-3)
    np.testing.assert_allclose(ext.centroid[:2], [0, 0], atol=2e-3)


def test_object_extent_of_a_point_on_the_table_is_flat():
    cam, T_base_cam, depth = top_down_box_scene(0.0)
    ext = estimate_object_extent(depth, cam, T_base_cam, 40.5, 40.5)
    assert ext is not None
    assert ext.height_m == 0.0
    assert ext.n_points == 0


def test_object_extent_without_depth_is_none():
    cam, T_base_cam, depth = top_down_box_scene(0.0)
    depth[:] = np.nan
    assert estimate_object_extent(depth, cam, T_base_cam, 320.5, 240.5) is None


def test_inverse_camera_pose_sanity():
    _, T_base_cam, _ = top_down_box_scene(0.0)
    assert rotation_angle(T_base_cam @ invert(T_base_cam)) == pytest.approx(0.0, abs=1e-12)
