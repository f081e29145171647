"""Targets from pybullet-rendered RGB-D land on the true object surfaces (static and wrist views).

The scene is the project's simulated workcell; ground truth is each object's pose from the physics
engine, and pixels come from the simulator's own projection (independent of robopin.geometry).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from robopin.geometry import (
    CameraModel,
    CameraMount,
    PointRequest,
    PoseBuffer,
    ProjectionConfig,
    Projector,
    ViewConfig,
    ViewData,
    depth_image_to_meters,
    estimate_object_extent,
    transform_from_xyz_rpy,
    transform_points,
)
from robopin.sim.render import DepthNoiseConfig, SimCameraSpec
from robopin.sim.world import SimWorld, look_at, top_down_grasp
from tests.geometry.geometry_scenes import pybullet_image_point

pybullet = pytest.importorskip("pybullet")

T_EE_WRIST = transform_from_xyz_rpy([0.07, 0.0, -0.06], [0.0, 0.12, math.pi / 2])
OBJECTS = [
    ("cube", "cube_0", (0.42, -0.10), 0.3),
    ("toy_block", "block_0", (0.55, 0.12), -0.5),
    ("plate", "plate_0", (0.35, 0.15), 0.0),
]


@pytest.fixture(scope="module")
def world():
    w = SimWorld("geometry-accuracy", robot="panda", register=False)
    try:
        for kind, name, xy, yaw in OBJECTS:
            w.add_object(kind, name, xy, yaw)
        w.settle()
        w.add_camera(SimCameraSpec("static_cam", look_at([1.05, 0.45, 0.65], [0.45, 0.0, 0.0])))
        w.add_camera(
            SimCameraSpec(
                "noisy_cam", look_at([1.05, -0.45, 0.65], [0.45, 0.0, 0.0]), depth_noise=DepthNoiseConfig.realsense()
            )
        )
        w.add_camera(SimCameraSpec("wrist_cam", T_EE_WRIST, mount="ee", vertical_fov_deg=58.0))
        q = w.inverse_kinematics(top_down_grasp([0.45, 0.0, 0.40], 0.0))
        w.reset_arm(q)
        yield w
    finally:
        w.close()


def image_point(world: SimWorld, camera_name: str, shot, p: np.ndarray) -> tuple[float, float]:
    """Where the base point ``p`` appears in the rendered image (OpenGL maths, not CameraModel)."""
    spec = world.camera(camera_name)
    projection = pybullet.computeProjectionMatrixFOV(spec.vertical_fov_deg, spec.aspect, spec.near_m, spec.far_m)
    return pybullet_image_point(shot.T_base_cam, projection, spec.width, spec.height, p)


def top_points(world: SimWorld, name: str) -> list[np.ndarray]:
    """Points on the object's top face: its centre and four points a third of the way to the edges."""
    obj = world.object(name)
    T = world.object_pose(name)
    top = obj.height_m / 2.0
    if obj.local_extent_xy != (0.0, 0.0):
        ex, ey = (e / 3.0 for e in obj.local_extent_xy)
    else:
        ex = ey = obj.radius_m / 3.0
    local = [[0, 0, top], [ex, 0, top], [-ex, 0, top], [0, ey, top], [0, -ey, top]]
    return list(transform_points(T, np.array(local, dtype=np.float64)))


def view_setup(world: SimWorld, name: str, img_idx: int):
    spec = world.camera(name)
    shot = world.render(name)
    projection = pybullet.computeProjectionMatrixFOV(spec.vertical_fov_deg, spec.aspect, spec.near_m, spec.far_m)
    camera = CameraModel.from_pybullet_projection(projection, spec.width, spec.height)
    data = ViewData(depth_image_to_meters(shot.depth_m), camera, shot.stamp_s)
    if spec.mount == "ee":
        mount = CameraMount("wrist", spec.T_mount_cam, parent_frame="ee")
    else:
        mount = CameraMount("static", spec.T_mount_cam)
    return ViewConfig(name, img_idx, mount), data, shot


@pytest.mark.parametrize("camera_name", ["static_cam", "noisy_cam", "wrist_cam"])
def test_projected_targets_within_5_mm_of_ground_truth(world, camera_name):
    view, data, shot = view_setup(world, camera_name, 0)
    poses = PoseBuffer()
    poses.add(world.sim_time_s, world.ee_pose())  # the arm pose at the frame's time
    projector = Projector([view], ProjectionConfig(), poses)
    requests, truths = [], []
    for _, name, _, _ in OBJECTS:
        for p in top_points(world, name):
            u, v = image_point(world, camera_name, shot, p)
            if not (0 <= u < 640 and 0 <= v < 480):
                continue
            # Only points the camera actually sees (the body under the pixel is this object).
            if world.object_by_body(int(shot.segmentation[math.floor(v), math.floor(u)])) is not world.object(name):
                continue
            requests.append(PointRequest(u, v, 0, name))
            truths.append(p)
    assert len(requests) >= 8, f"{camera_name} sees too few ground-truth points ({len(requests)})"
    targets = projector.project(requests, {0: data})
    errors = [np.linalg.norm(t.point - p) for t, p in zip(targets, truths, strict=True) if t.valid]
    assert len(errors) >= 0.8 * len(targets), [(t.id, t.reason) for t in targets if not t.valid]
    print(
        f"{camera_name}: {len(errors)} targets, max error {max(errors) * 1000:.2f} mm",
        [(t.id, round(float(e) * 1000, 2)) for t, e in zip(targets, errors, strict=False)],
    )
    assert max(errors) < 0.005, f"{camera_name}: errors {np.round(errors, 4).tolist()} m"
    for t in targets:
        if t.valid:
            assert np.dot(t.normal, [0, 0, 1]) > math.cos(math.radians(10)), (t.id, t.normal)


def test_object_extent_in_the_rendered_scene(world):
    _, data, shot = view_setup(world, "static_cam", 0)
    obj = world.object("block_0")
    centre = transform_points(world.object_pose("block_0"), np.array([0.0, 0.0, obj.height_m / 2]))
    u, v = image_point(world, "static_cam", shot, centre)
    ext = estimate_object_extent(data.depth_m, data.camera, shot.T_base_cam, u, v)
    assert ext is not None
    assert ext.support_height_m == pytest.approx(0.0, abs=0.005)
    assert ext.height_m == pytest.approx(obj.height_m, abs=0.005)


def test_tiny_renderer_depth_matches_the_analytic_table_under_the_camera_model(world):
    """The half-pixel sampling claim of CameraModel.from_pybullet_projection, on the table plane."""
    _, data, shot = view_setup(world, "static_cam", 0)
    table = shot.segmentation == world.table_id
    u, v = data.camera.pixel_centres()
    n_cam = shot.T_base_cam[:3, :3].T @ [0.0, 0.0, 1.0]  # table plane z = 0 in the optical frame
    offset = -shot.T_base_cam[2, 3]
    analytic = offset / (data.camera.pixel_to_ray(u, v) @ n_cam)
    error = np.abs(data.depth_m - analytic)[table]
    assert error.max() < 2e-5  # 20 µm; without the half-pixel correction this is ~2 mm
