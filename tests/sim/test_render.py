"""Rendered RGB-D views: depth deprojects onto the real geometry, intrinsics and poses are consistent."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.sim.render import DepthNoiseConfig, SimCameraSpec, apply_depth_noise, deproject, project
from robopin.sim.world import SimWorld, look_at

from .helpers import unique_world_name

# Objects whose render mesh equals their collision shape, so a ray test measures the true surface.
_PRIMITIVES = ("cube", "toy_block", "plate", "ball")


@pytest.fixture(scope="module")
def world():
    world = SimWorld(unique_world_name("render"), register=False)
    world.add_object("cube", "cube", [0.45, 0.12], 0.5, color="red")
    world.add_object("toy_block", "toy_block", [0.6, -0.05], 0.2, color="blue")
    world.add_object("plate", "plate", [0.5, -0.2], color="green", radius_m=0.07)
    world.add_object("ball", "ball", [0.62, 0.15], color="yellow")
    world.add_object("duck", "duck", [0.38, -0.05], 1.0)
    world.add_camera(SimCameraSpec("static", look_at([1.25, 0.0, 0.4], [0.5, 0.0, 0.0]), vertical_fov_deg=43))
    world.add_camera(SimCameraSpec("wrist", world.model.T_ee_wrist_camera, mount="ee", vertical_fov_deg=42))
    world.settle()
    yield world
    world.close()


@pytest.mark.parametrize("camera", ["static", "wrist"])
def test_depth_deprojects_onto_the_objects_within_5mm(world, camera):
    import pybullet as p

    view = world.render(camera)
    rng = np.random.default_rng(0)
    origin = view.T_base_cam[:3, 3]
    checked = 0
    for name in _PRIMITIVES:
        rows, cols = np.nonzero(view.segmentation == world.object(name).body_id)
        assert len(rows) > 50, f"{name} should be visible in {camera}"
        for k in rng.choice(len(rows), size=min(25, len(rows)), replace=False):
            point = deproject(view, cols[k] + 0.5, rows[k] + 0.5)
            # The ray through the same pixel hits the collision surface: where depth says it is.
            direction = point - origin
            end = origin + direction / np.linalg.norm(direction) * 3.0
            hit = p.rayTest(origin.tolist(), end.tolist(), physicsClientId=world.client)[0]
            if hit[0] != world.object(name).body_id:
                continue  # grazing ray at a silhouette edge hit the neighbour: not a depth error
            if abs(np.dot(hit[4], direction)) < 0.3 * np.linalg.norm(direction):
                continue  # a face seen within 17° of edge-on: depth along it is not resolved to 5 mm
            assert np.linalg.norm(np.array(hit[3]) - point) < 0.005, (name, camera)
            checked += 1
    assert checked > 60


def test_table_top_deprojects_to_z_zero(world):
    view = world.render("static")
    rows, cols = np.nonzero(view.segmentation == world.table_id)
    rng = np.random.default_rng(1)
    heights = [deproject(view, cols[k] + 0.5, rows[k] + 0.5)[2] for k in rng.choice(len(rows), 200, replace=False)]
    np.testing.assert_allclose(heights, 0.0, atol=0.003)


def test_project_inverts_deproject(world):
    view = world.render("wrist")
    for u, v in [(100.5, 80.5), (320.5, 240.5), (600.5, 400.5)]:
        point = deproject(view, u, v)
        pu, pv, z = project(view, point)
        assert (pu, pv) == pytest.approx((u, v), abs=1e-6)
        assert z > 0


def test_wrist_camera_moves_with_the_hand(world):
    before = world.camera_pose("wrist")
    np.testing.assert_allclose(before, world.ee_pose() @ world.model.T_ee_wrist_camera, atol=1e-9)
    q = world.joint_positions()
    world.reset_arm(q + np.array([0.3, 0, 0, 0, 0, 0, 0]))
    try:
        after = world.render("wrist").T_base_cam
        assert np.linalg.norm(after[:3, 3] - before[:3, 3]) > 0.05
        np.testing.assert_allclose(after, world.ee_pose() @ world.model.T_ee_wrist_camera, atol=1e-9)
    finally:
        world.reset_arm(q)


def test_view_shapes_types_and_intrinsics(world):
    view = world.render("static")
    assert view.color.shape == (480, 640, 3) and view.color.dtype == np.uint8
    assert view.depth_m.shape == (480, 640) and view.depth_m.dtype == np.float32
    assert view.segmentation.dtype == np.int32
    # 43° vertical field of view: fy = 240 / tan(21.5°).
    assert view.model.fy == pytest.approx(240.0 / np.tan(np.radians(21.5)), rel=1e-4)
    # The optical frame is right-handed with z toward the scene.
    R = view.T_base_cam[:3, :3]
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-9)
    assert np.linalg.det(R) == pytest.approx(1.0)
    assert R[:, 2] @ (np.array([0.5, 0, 0]) - view.T_base_cam[:3, 3]) > 0


def test_depth_noise_adds_holes_and_error_growing_with_range():
    rng = np.random.default_rng(0)
    near = np.full((200, 200), 0.5, dtype=np.float32)
    far = np.full((200, 200), 2.0, dtype=np.float32)
    noise = DepthNoiseConfig(sigma_at_1m_m=0.002, random_hole_fraction=0.01)
    noisy_near = apply_depth_noise(near, noise, rng)
    noisy_far = apply_depth_noise(far, noise, rng)
    holes = np.mean(noisy_near == 0)
    assert 0.005 < holes < 0.02
    error_near = np.std(noisy_near[noisy_near > 0] - 0.5)
    error_far = np.std(noisy_far[noisy_far > 0] - 2.0)
    assert error_far > 8 * error_near  # σ ∝ z²: 16x in theory


def test_depth_noise_drops_pixels_at_depth_edges():
    depth = np.full((50, 50), 1.0, dtype=np.float32)
    depth[:, 25:] = 1.5
    noisy = apply_depth_noise(depth, DepthNoiseConfig(edge_hole_threshold_m=0.03), np.random.default_rng(0))
    assert np.all(noisy[:, 24:26] == 0)
    assert np.all(noisy[:, :23] == 1.0)


def test_camera_spec_validation_names_the_value():
    with pytest.raises(ValueError, match="200"):
        SimCameraSpec("c", np.eye(4), vertical_fov_deg=200)
    with pytest.raises(ValueError, match="'ceiling'"):
        SimCameraSpec("c", np.eye(4), mount="ceiling")
    with pytest.raises(ValueError, match=r"1\.5"):
        DepthNoiseConfig(random_hole_fraction=1.5)
