"""Frame depth to a base-frame point cloud, workspace crop and voxel downsampling."""

from __future__ import annotations

import numpy as np
import pytest

from robopin.geometry import WorkspaceBox, depth_to_point_cloud, pixel_rays, voxel_downsample
from tests.geometry.geometry_scenes import CAMERA, look_at, render_boxes_on_table

T_BASE_CAM = look_at([1.0, 0.3, 0.7], [0.45, 0.0, 0.0])
BOXES = [((0.45, 0.0), 0.3, (0.10, 0.06, 0.08))]


def test_cloud_points_lie_on_the_scene_surfaces():
    depth = render_boxes_on_table(CAMERA, T_BASE_CAM, BOXES)
    cloud = depth_to_point_cloud(depth, CAMERA, T_BASE_CAM, voxel_size_m=None)
    assert len(cloud) == np.isfinite(depth).sum()
    z = cloud.points[:, 2]
    # Every point is on the table (z = 0) or on the box (z in [0, 0.08]).
    assert z.min() > -1e-4
    assert z.max() < 0.08 + 1e-4
    assert cloud.frame == "base"


def test_workspace_crop_and_voxels():
    depth = render_boxes_on_table(CAMERA, T_BASE_CAM, BOXES)
    box = WorkspaceBox((0.3, -0.15, 0.01), (0.6, 0.15, 0.3))
    cloud = depth_to_point_cloud(depth, CAMERA, T_BASE_CAM, workspace=box, voxel_size_m=0.01)
    assert len(cloud) > 0
    assert np.all(box.contains(cloud.points.astype(np.float64)))
    # Only the box rises above 1 cm: its visible surface spans at most ~(0.12 x 0.12) m in 1 cm voxels.
    assert len(cloud) < 400
    cells = np.floor(cloud.points / 0.01).astype(int)
    assert len(np.unique(cells, axis=0)) == len(cloud)


def test_voxel_downsample_centroids_and_colors():
    pts = np.array([[0.001, 0.001, 0.001], [0.003, 0.003, 0.003], [0.5, 0.5, 0.5]], dtype=np.float32)
    colors = np.array([[0, 0, 0], [100, 200, 50], [9, 9, 9]], dtype=np.uint8)
    out, out_colors = voxel_downsample(pts, 0.01, colors)
    order = np.argsort(out[:, 0])
    np.testing.assert_allclose(out[order], [[0.002, 0.002, 0.002], [0.5, 0.5, 0.5]], atol=1e-6)
    np.testing.assert_array_equal(out_colors[order], [[50, 100, 25], [9, 9, 9]])
    with pytest.raises(ValueError, match="voxel_size_m"):
        voxel_downsample(pts, 0.0)


def test_holes_and_stride_and_colors():
    depth = render_boxes_on_table(CAMERA, T_BASE_CAM, BOXES)
    depth[:100] = np.nan
    color = np.zeros((480, 640, 3), np.uint8)
    color[..., 0] = 255
    cloud = depth_to_point_cloud(depth, CAMERA, T_BASE_CAM, voxel_size_m=None, color=color, stride=2)
    assert len(cloud) == np.isfinite(depth[::2, ::2]).sum()
    assert np.all(cloud.colors[:, 0] == 255)


def test_rays_are_cached_per_camera():
    assert pixel_rays(CAMERA) is pixel_rays(CAMERA)
    assert pixel_rays(CAMERA).shape == (480, 640, 3)
