"""Robust depth at a point: holes, range, noise, tilted planes, depth edges, flying pixels, decoding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robopin.geometry import (
    CameraModel,
    DepthConfig,
    DepthError,
    RefusalReason,
    align_depth_to_color,
    depth_image_to_meters,
    make_transform,
    robust_depth,
    rpy_to_matrix,
)
from tests.geometry.geometry_scenes import CAMERA, plane_depth, step_depth, tilted_plane


def flat(depth_m: float) -> np.ndarray:
    return np.full((CAMERA.height, CAMERA.width), depth_m, dtype=np.float32)


def test_fronto_parallel_plane_is_exact():
    s = robust_depth(flat(1.234), 100.5, 200.5)
    assert s.valid
    assert s.depth_m == pytest.approx(1.234, abs=1e-6)
    assert s.spread_m == pytest.approx(0.0, abs=1e-6)
    assert s.valid_fraction == 1.0
    assert s.n_surfaces == 1


@pytest.mark.parametrize("tilt_deg", [0.0, 30.0, 60.0])
def test_tilted_plane_gives_the_plane_depth_at_the_pixel(tilt_deg):
    n, d = tilted_plane(math.radians(tilt_deg), 0.9)
    depth = plane_depth(CAMERA, n, d)
    u, v = 300.5, 180.5
    expected = d / (CAMERA.pixel_to_ray(u, v) @ n)
    s = robust_depth(depth, u, v)
    assert s.valid
    assert s.depth_m == pytest.approx(expected, abs=2e-4)
    # A continuously sloping surface is one surface, not a stack of edges.
    assert s.n_surfaces == 1


def test_holes_are_skipped_and_reported_in_the_valid_fraction():
    d = flat(0.8)
    d[200:204, 100:107] = np.nan  # 28 of 49 window pixels are holes around (103.5, 203.5)
    s = robust_depth(d, 103.5, 203.5, DepthConfig(window_px=7, min_valid_fraction=0.3))
    assert s.valid
    assert s.depth_m == pytest.approx(0.8)
    assert s.valid_fraction == pytest.approx(21 / 49)


def test_zero_is_a_hole_not_a_distance():
    d = flat(0.8)
    d[200:207, 100:107] = 0.0
    d[203, 103] = 0.8
    s = robust_depth(d, 103.5, 203.5, DepthConfig(window_px=7, min_valid_fraction=0.1))
    assert s.reason is RefusalReason.NO_DEPTH
    assert math.isnan(s.depth_m)
    assert s.valid_fraction == pytest.approx(1 / 49)


def test_out_of_range_is_named_apart_from_holes():
    s = robust_depth(flat(4.0), 320.5, 240.5, DepthConfig(max_depth_m=3.0))
    assert s.reason is RefusalReason.OUT_OF_RANGE
    s = robust_depth(flat(0.05), 320.5, 240.5, DepthConfig(min_depth_m=0.1))
    assert s.reason is RefusalReason.OUT_OF_RANGE


@pytest.mark.parametrize(("u", "v"), [(-0.1, 10.0), (640.0, 10.0), (10.0, 480.0), (math.nan, 1.0)])
def test_point_outside_the_image(u, v):
    assert robust_depth(flat(1.0), u, v).reason is RefusalReason.OUT_OF_IMAGE


def test_window_clipped_at_the_image_border():
    s = robust_depth(flat(1.0), 0.5, 0.5, DepthConfig(window_px=7))
    assert s.valid
    assert s.n_valid == 16  # 4x4 of the 7x7 window lies on the image


def test_noise_median_and_spread():
    rng = np.random.default_rng(3)
    d = flat(1.0) + rng.normal(0, 0.002, (480, 640)).astype(np.float32)
    s = robust_depth(d, 320.5, 240.5, DepthConfig(window_px=15))
    assert s.depth_m == pytest.approx(1.0, abs=0.001)
    assert s.spread_m == pytest.approx(0.002, rel=0.35)


@pytest.mark.parametrize(
    ("u", "expected"),
    [
        (98.5, 0.6),  # the 7x7 window reaches 2 columns onto the background
        (97.5, 0.6),  # ... 1 column
        (100.5, 1.1),  # the window reaches 3 columns onto the foreground
        (102.5, 1.1),
    ],
)
def test_depth_edge_picks_the_surface_the_point_is_on(u, expected):
    d = step_depth(CAMERA, 0.6, 1.1, edge_u=100)
    s = robust_depth(d, u, 240.5, DepthConfig(window_px=7))
    assert s.valid, s
    assert s.depth_m == pytest.approx(expected)
    assert s.n_surfaces == 2
    # The median over the whole window would have mixed surfaces; only one surface's samples are used.
    assert s.spread_m == pytest.approx(0.0, abs=1e-6)


def test_point_on_the_edge_itself_is_ambiguous():
    d = step_depth(CAMERA, 0.6, 1.1, edge_u=100)
    # u = 100.0 is the boundary between column 99 (foreground) and column 100 (background).
    s = robust_depth(d, 100.0, 240.5, DepthConfig(window_px=7))
    assert s.reason is RefusalReason.DEPTH_EDGE_AMBIGUOUS
    assert math.isnan(s.depth_m)


def test_flying_pixels_between_surfaces_are_ignored():
    d = step_depth(CAMERA, 0.6, 1.1, edge_u=100)
    d[230:251, 100] = 0.85  # a column of mixed-depth pixels along the edge, as stereo cameras produce
    s = robust_depth(d, 97.5, 240.5, DepthConfig(window_px=9))
    assert s.depth_m == pytest.approx(0.6)
    s = robust_depth(d, 103.5, 240.5, DepthConfig(window_px=9))
    assert s.depth_m == pytest.approx(1.1)


def test_small_object_in_a_large_window_is_kept_when_pointed_at():
    d = flat(0.9)
    d[238:243, 318:323] = 0.85  # a 5x5 px object 5 cm above the table, pointed at its centre
    s = robust_depth(d, 320.5, 240.5, DepthConfig(window_px=15, min_surface_fraction=0.1))
    assert s.depth_m == pytest.approx(0.85)


def test_mask_marks_the_chosen_surface():
    d = step_depth(CAMERA, 0.6, 1.1, edge_u=100)
    s = robust_depth(d, 98.5, 240.5, DepthConfig(window_px=7))
    assert s.mask is not None
    assert s.mask.sum() == 7 * 5  # columns 95..99 of the window are foreground
    assert s.window_origin == (237, 95)


def test_decode_16uc1_millimetres_and_32fc1_metres():
    mm = np.array([[0, 1234], [65535, 1]], dtype=np.uint16)
    m = depth_image_to_meters(mm, "16UC1")
    assert m.dtype == np.float32
    assert math.isnan(m[0, 0])
    assert m[0, 1] == pytest.approx(1.234)
    f = np.array([[np.nan, 1.5], [np.inf, -1.0]], dtype=np.float32)
    out = depth_image_to_meters(f, "32FC1")
    assert np.isnan(out).sum() == 3
    assert out[0, 1] == pytest.approx(1.5)


def test_decode_refuses_a_mismatched_encoding():
    with pytest.raises(DepthError, match="uint16"):
        depth_image_to_meters(np.zeros((2, 2), np.float32), "16UC1")
    with pytest.raises(DepthError, match="2-D"):
        depth_image_to_meters(np.zeros((2, 2, 3), np.uint16))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window_px": 4}, "odd"),
        ({"min_depth_m": 2.0, "max_depth_m": 1.0}, "min_depth_m"),
        ({"min_valid_fraction": 1.5}, "fraction"),
        ({"centre_majority": 0.4}, "centre_majority"),
    ],
)
def test_bad_depth_config_is_refused(kwargs, message):
    with pytest.raises(DepthError, match=message):
        DepthConfig(**kwargs)


def test_unaligned_depth_registered_to_color_matches_the_analytic_plane():
    # Depth camera: different intrinsics, 5 cm to the side and slightly rotated relative to color.
    depth_cam = CameraModel(640, 480, 385.0, 385.0, 321.3, 238.7)
    color_cam = CameraModel(640, 480, 615.0, 615.0, 318.9, 242.1, "plumb_bob", (0.05, -0.1, 0.001, 0.0, 0.0))
    T_color_depth = make_transform(rpy_to_matrix(0.01, -0.02, 0.005), [-0.05, 0.002, 0.001])
    # A plane tilted 25 degrees, 0.8 m away, described in the color frame.
    n_c, d_c = tilted_plane(math.radians(25.0), 0.8)
    # The same plane in the depth frame: n_d = R^T n_c, d_d = d_c - n_c . t
    R, t = T_color_depth[:3, :3], T_color_depth[:3, 3]
    depth = plane_depth(depth_cam, R.T @ n_c, d_c - n_c @ t)
    aligned = align_depth_to_color(depth, depth_cam, color_cam, T_color_depth)
    expected = plane_depth(color_cam, n_c, d_c)
    inner = np.s_[60:420, 80:560]
    filled = np.isfinite(aligned[inner])
    assert filled.mean() > 0.6  # color pixels are denser than depth pixels: some stay empty
    # Each depth point lands inside its color pixel, up to half a pixel from the centre: on this
    # slope that is under 1 mm of depth.
    err = np.abs(aligned[inner][filled] - expected[inner][filled])
    assert err.max() < 1.5e-3
    s = robust_depth(aligned, 320.5, 240.5)
    assert s.depth_m == pytest.approx(expected[240, 320], abs=1e-3)


def test_unaligned_depth_nearest_surface_wins_where_samples_collide():
    # A near strip seen from a depth imager 5 cm beside color shifts 6 px over the far background
    # (fx 60: 60 * 0.05 / 0.5) while the background shifts 1.5 px: where both land, the near one wins.
    cam = CameraModel(80, 60, 60.0, 60.0, 39.5, 29.5)
    T_color_depth = make_transform(np.eye(3), [0.05, 0.0, 0.0])
    depth = np.full((60, 80), 2.0, np.float32)
    depth[:, 30:40] = 0.5
    depth[:, :2] = np.nan  # no data stays out
    aligned = align_depth_to_color(depth, cam, cam, T_color_depth)
    assert np.all(aligned[:, 36:46] == np.float32(0.5)), "the strip covers the background it moved over"
    assert np.all(aligned[:, 60:75] == np.float32(2.0))
    assert np.isnan(aligned[:, :3]).all()
    # The background behind the strip's old place, now uncovered, has no sample: NaN, not a guess.
    assert np.isnan(aligned[30, 33:35]).all()
