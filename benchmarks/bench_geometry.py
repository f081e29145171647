"""Geometry benchmarks: one pinned point to a 3D target, and a full depth frame to a collision cloud.

Each figure is printed with its ratio to a baseline measured in the same run on the same data, so
results from different machines compare by ratio. Figures are reported, never judged pass/fail.
Goals: one target (depth window + normal + transform) under 1 ms; a 640x480 frame
to a cropped, voxel-downsampled cloud under 30 ms.

Run: ``python benchmarks/bench_geometry.py``
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from robopin.geometry import (
    CameraModel,
    CameraMount,
    PointRequest,
    PoseBuffer,
    ProjectionConfig,
    Projector,
    ViewConfig,
    ViewData,
    WorkspaceBox,
    align_depth_to_color,
    depth_to_point_cloud,
    make_transform,
    robust_depth,
    rpy_to_matrix,
    transform_from_xyz_rpy,
)
from robopin.stats import summarize

WIDTH, HEIGHT = 640, 480


def timed(fn: Callable[[], object], repeats: int, warmup: int = 3) -> float:
    """Median wall time of ``fn`` in milliseconds."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return summarize(samples).median * 1e3


def scene() -> tuple[CameraModel, np.ndarray, np.ndarray]:
    """A camera 0.7 m above a table looking down at 52 degrees, a box on the table, 2 mm noise, holes."""
    camera = CameraModel(WIDTH, HEIGHT, 605.0, 605.0, 318.7, 241.2, "plumb_bob", (0.08, -0.15, 0.0005, -0.0007, 0.03))
    eye, target = np.array([1.0, 0.0, 0.7]), np.array([0.45, 0.0, 0.0])
    z_axis = (target - eye) / np.linalg.norm(target - eye)
    x_axis = np.cross(z_axis, [0.0, 0.0, 1.0])
    x_axis /= np.linalg.norm(x_axis)
    T_base_cam = make_transform(np.column_stack([x_axis, np.cross(z_axis, x_axis), z_axis]), eye)
    u, v = camera.pixel_centres()
    rays = camera.pixel_to_ray(u, v) @ T_base_cam[:3, :3].T
    s = -T_base_cam[2, 3] / rays[..., 2]  # table plane z = 0
    hit = T_base_cam[:3, 3] + rays * s[..., None]
    box = (np.abs(hit[..., 0] - 0.45) < 0.05) & (np.abs(hit[..., 1]) < 0.04)
    s = np.where(box, s * 0.93, s)  # a raised patch standing in for an object
    rng = np.random.default_rng(0)
    depth = (s + rng.normal(0, 0.002, s.shape)).astype(np.float32)
    depth[rng.random(depth.shape) < 0.02] = np.nan
    return camera, T_base_cam, depth


def main() -> None:
    camera, T_base_cam, depth = scene()
    print(f"geometry benchmarks, {WIDTH}x{HEIGHT} depth, median of repeated runs")

    # --- one target ------------------------------------------------------------------------
    projector = Projector(
        [
            ViewConfig("static_cam", 0, CameraMount("static", T_base_cam)),
            ViewConfig("wrist_cam", 1, CameraMount("wrist", transform_from_xyz_rpy([0.05, 0, 0.03], [0, 0, 0]))),
        ],
        ProjectionConfig(workspace=WorkspaceBox((0.1, -0.5, -0.05), (0.9, 0.5, 0.6))),
        PoseBuffer(),
    )
    projector.pose_buffer.add(0.99, transform_from_xyz_rpy([0.4, 0.0, 0.5], [math.pi, 0.0, 0.0]))
    projector.pose_buffer.add(1.01, transform_from_xyz_rpy([0.41, 0.0, 0.5], [math.pi, 0.0, 0.0]))
    frames = {0: ViewData(depth, camera, 1.0), 1: ViewData(depth, camera, 1.0)}
    request = PointRequest(331.3, 250.8, 0, "obj_01")
    wrist_request = PointRequest(331.3, 250.8, 1, "obj_01")
    target = projector.project_point(request, frames)
    assert target.valid, target.reason  # a broken benchmark scene would time a refusal path

    def naive_target() -> np.ndarray:
        # Baseline: the usual one-liner: the pixel's raw depth, an undistorted pinhole, one transform.
        z = float(depth[250, 331])
        p = np.array([(331.3 - 0.5 - camera.cx) / camera.fx * z, (250.8 - 0.5 - camera.cy) / camera.fy * z, z, 1.0])
        return T_base_cam @ p

    base_ms = timed(naive_target, 2000)
    depth_ms = timed(lambda: robust_depth(depth, 331.3, 250.8), 500)
    target_ms = timed(lambda: projector.project_point(request, frames), 500)
    wrist_ms = timed(lambda: projector.project_point(wrist_request, frames), 500)
    print(f"  baseline: raw pixel depth + pinhole + transform      {base_ms:8.4f} ms   1.0x")
    print(f"  robust depth (7x7 window, edges, spread)             {depth_ms:8.4f} ms   {depth_ms / base_ms:6.1f}x")
    print(
        f"  one target, static view (depth+normal+transform)     {target_ms:8.4f} ms   {target_ms / base_ms:6.1f}x"
        f"   goal < 1 ms"
    )
    print(f"  one target, wrist view (+ pose interpolation)        {wrist_ms:8.4f} ms   {wrist_ms / base_ms:6.1f}x")

    # --- full frame to cloud ---------------------------------------------------------------
    workspace = WorkspaceBox((0.2, -0.4, 0.005), (0.8, 0.4, 0.5))

    def naive_cloud() -> np.ndarray:
        # Baseline: float64 meshgrid deprojection of every pixel and one transform, no crop or voxels.
        uu, vv = np.meshgrid(np.arange(WIDTH) + 0.5, np.arange(HEIGHT) + 0.5)
        x = (uu - 0.5 - camera.cx) / camera.fx * depth
        y = (vv - 0.5 - camera.cy) / camera.fy * depth
        pts = np.stack([x, y, depth], axis=-1).reshape(-1, 3)
        pts = pts[np.isfinite(pts[:, 2])]
        return pts @ T_base_cam[:3, :3].T + T_base_cam[:3, 3]

    cloud = depth_to_point_cloud(depth, camera, T_base_cam, workspace=workspace, voxel_size_m=0.01)
    naive_ms = timed(naive_cloud, 20)
    cloud_ms = timed(
        lambda: depth_to_point_cloud(depth, camera, T_base_cam, workspace=workspace, voxel_size_m=0.01), 20
    )
    full_ms = timed(lambda: depth_to_point_cloud(depth, camera, T_base_cam, voxel_size_m=0.01), 20)
    print(f"  baseline: full-frame pinhole deprojection (float64)   {naive_ms:8.2f} ms   1.0x")
    print(
        f"  frame -> cropped 1 cm voxel cloud ({len(cloud):5d} points)     {cloud_ms:8.2f} ms   "
        f"{cloud_ms / naive_ms:6.2f}x   goal < 30 ms"
    )
    print(f"  frame -> uncropped 1 cm voxel cloud                  {full_ms:8.2f} ms   {full_ms / naive_ms:6.2f}x")

    # --- registration of unaligned depth ---------------------------------------------------
    depth_camera = CameraModel(WIDTH, HEIGHT, 385.0, 385.0, 321.3, 238.7)
    T_color_depth = make_transform(rpy_to_matrix(0.0, 0.0, 0.0), [-0.015, 0.0, 0.0])
    align_ms = timed(lambda: align_depth_to_color(depth, depth_camera, camera, T_color_depth), 5, warmup=1)
    print(f"  align unaligned depth to color (2x2 splat)           {align_ms:8.2f} ms   {align_ms / naive_ms:6.2f}x")


if __name__ == "__main__":
    main()
