"""CameraModel: pixel-centre convention, project/deproject inverses, distortion, constructors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.geometry import CameraModel, CameraModelError

PLAIN = CameraModel(640, 480, 600.0, 610.0, 319.5, 239.5)
DISTORTED = {
    "plumb_bob": CameraModel(640, 480, 600, 600, 318.2, 241.7, "plumb_bob", (0.12, -0.25, 0.001, -0.002, 0.08)),
    "rational_polynomial": CameraModel(
        640,
        480,
        600,
        600,
        320.1,
        240.3,
        "rational_polynomial",
        (0.3, -0.1, 0.001, 0.002, 0.01, 0.2, 0.02, 0.001),
    ),
    "modified_brown_conrady": CameraModel(
        640, 480, 615, 615, 321, 238, "modified_brown_conrady", (0.1, -0.2, 0.002, 0.001, 0.05)
    ),
    "inverse_brown_conrady": CameraModel(
        640, 480, 615, 615, 321, 238, "inverse_brown_conrady", (-0.1, 0.05, 0.002, 0.001, 0.0)
    ),
}


def test_principal_point_pixel_deprojects_onto_the_optical_axis():
    # cx = 319.5 in the SDK convention is the centre of the image: u = 320.0 in robopin's.
    np.testing.assert_allclose(PLAIN.deproject(320.0, 240.0, 2.0), [0, 0, 2.0], atol=1e-12)


def test_deproject_known_value():
    # One pixel right of the centre at 1.2 m: x = 1.2 * 1 / 600.
    np.testing.assert_allclose(PLAIN.deproject(321.0, 240.0, 1.2), [0.002, 0.0, 1.2], atol=1e-12)
    np.testing.assert_allclose(PLAIN.deproject(320.0, 250.0, 1.22), [0.0, 0.02, 1.22], atol=1e-12)


@given(st.floats(0, 639.999), st.floats(0, 479.999), st.floats(0.05, 10.0))
@settings(deadline=None)  # timing is never pass/fail; the machine is shared
def test_project_inverts_deproject_plain(u, v, z):
    uu, vv = PLAIN.project(PLAIN.deproject(u, v, z))
    assert uu == pytest.approx(u, abs=1e-9)
    assert vv == pytest.approx(v, abs=1e-9)


@pytest.mark.parametrize("name", sorted(DISTORTED))
@given(u=st.floats(0, 639.999), v=st.floats(0, 479.999), z=st.floats(0.05, 10.0))
@settings(max_examples=60, deadline=None)
def test_project_inverts_deproject_distorted(name, u, v, z):
    cam = DISTORTED[name]
    p = cam.deproject(u, v, z)
    assert p[2] == pytest.approx(z)
    uu, vv = cam.project(p)
    assert uu == pytest.approx(u, abs=1e-6)
    assert vv == pytest.approx(v, abs=1e-6)


def test_distortion_moves_corner_rays_and_undistort_is_exact():
    cam = DISTORTED["plumb_bob"]
    ideal = CameraModel(640, 480, cam.fx, cam.fy, cam.cx, cam.cy)
    # With k1 > 0 a corner pixel's true ray is closer to the axis than the pinhole model says.
    assert np.linalg.norm(cam.pixel_to_ray(0.5, 0.5)[:2]) < np.linalg.norm(ideal.pixel_to_ray(0.5, 0.5)[:2])
    x, y = cam.undistort_normalized(*cam.distort_normalized(np.array([0.4, -0.3]), np.array([-0.2, 0.35])))
    np.testing.assert_allclose(x, [0.4, -0.3], atol=1e-9)
    np.testing.assert_allclose(y, [-0.2, 0.35], atol=1e-9)


def test_vectorised_project_and_deproject_shapes():
    u, v = PLAIN.pixel_centres()
    pts = PLAIN.deproject(u, v, np.full(u.shape, 1.5))
    assert pts.shape == (480, 640, 3)
    uu, vv = PLAIN.project(pts.reshape(-1, 3))
    np.testing.assert_allclose(uu, u.ravel(), atol=1e-9)
    np.testing.assert_allclose(vv, v.ravel(), atol=1e-9)


def test_points_behind_the_camera_project_to_nan():
    u, v = PLAIN.project([0.1, 0.1, -1.0])
    assert math.isnan(u)
    assert math.isnan(v)


def test_contains_uses_half_open_pixel_edges():
    assert PLAIN.contains(0.0, 0.0)
    assert PLAIN.contains(639.999, 479.999)
    assert not PLAIN.contains(640.0, 10.0)
    assert not PLAIN.contains(-0.01, 10.0)
    assert PLAIN.pixel_index(639.7, 0.2) == (639, 0)


def test_camera_info_round_trip():
    cam = DISTORTED["plumb_bob"]
    info = SimpleNamespace(**cam.to_camera_info_fields())
    assert CameraModel.from_camera_info(info) == cam


def test_camera_info_with_trailing_zero_coefficients_and_no_distortion():
    info = SimpleNamespace(
        width=640,
        height=480,
        k=[600, 0, 319.5, 0, 600, 239.5, 0, 0, 1],
        d=[0.0] * 8,
        distortion_model="plumb_bob",
    )
    cam = CameraModel.from_camera_info(info)
    assert not cam.has_distortion


def test_uncalibrated_camera_info_refused():
    info = SimpleNamespace(width=640, height=480, k=[0.0] * 9, d=[], distortion_model="")
    with pytest.raises(CameraModelError, match="not calibrated"):
        CameraModel.from_camera_info(info)


def test_realsense_intrinsics():
    intr = SimpleNamespace(
        width=640,
        height=480,
        fx=615.0,
        fy=615.5,
        ppx=321.1,
        ppy=239.2,
        model="distortion.inverse_brown_conrady",
        coeffs=[0.01, 0.0, 0.0, 0.0, 0.0],
    )
    cam = CameraModel.from_realsense(intr)
    assert (cam.fx, cam.fy, cam.cx, cam.cy) == (615.0, 615.5, 321.1, 239.2)
    assert cam.distortion_model == "inverse_brown_conrady"


def test_zed_rectified_and_raw():
    params = SimpleNamespace(
        fx=700.0,
        fy=700.0,
        cx=640.0,
        cy=360.0,
        disto=[-0.05, 0.02, 0.0, 0.0, -0.01] + [0.0] * 7,
        image_size=SimpleNamespace(width=1280, height=720),
    )
    assert not CameraModel.from_zed(params).has_distortion
    raw = CameraModel.from_zed(params, rectified=False)
    assert raw.distortion_model == "plumb_bob"
    assert raw.coeffs == (-0.05, 0.02, 0.0, 0.0, -0.01)


def test_pybullet_projection_matrix_matches_measured_intrinsics():
    pybullet = pytest.importorskip("pybullet")
    P = pybullet.computeProjectionMatrixFOV(fov=45.0, aspect=640 / 480, nearVal=0.05, farVal=5.0)
    ideal = CameraModel.from_pybullet_projection(P, 640, 480, tiny_renderer=False)
    # 579.41 px for a 45 degree vertical field of view; the image centre is u = 320.0.
    assert ideal.fx == pytest.approx(579.41, abs=0.01)
    assert ideal.fy == pytest.approx(579.41, abs=0.01)
    assert ideal.cx + 0.5 == pytest.approx(320.0)
    assert ideal.cy + 0.5 == pytest.approx(240.0)
    from_fov = CameraModel.from_fov(640, 480, math.radians(45.0))
    assert (from_fov.fx, from_fov.cx, from_fov.cy) == pytest.approx((ideal.fx, ideal.cx, ideal.cy), rel=1e-6)
    # TinyRenderer samples pixel (i, j) at (i, j + 1) of the ideal image: half a pixel right and up.
    tiny = CameraModel.from_pybullet_projection(P, 640, 480)
    assert (tiny.cx, tiny.cy) == pytest.approx((320.0, 239.0))


def test_resized_keeps_the_same_rays():
    half = PLAIN.resized(320, 240)
    # The centre of the image and a corner map to the same ray at both resolutions.
    np.testing.assert_allclose(half.pixel_to_ray(160.0, 120.0), PLAIN.pixel_to_ray(320.0, 240.0), atol=1e-12)
    np.testing.assert_allclose(half.pixel_to_ray(0.0, 0.0), PLAIN.pixel_to_ray(0.0, 0.0), atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"width": 0}, "width"),
        ({"fx": -1.0}, "focal"),
        ({"cy": float("nan")}, "cy"),
        ({"distortion_model": "equidistant", "coeffs": (0.1,)}, "equidistant"),
        ({"distortion_model": "plumb_bob", "coeffs": (0.1,) * 6}, "at most 5"),
    ],
)
def test_bad_intrinsics_are_refused_naming_the_value(kwargs, message):
    args = {"width": 640, "height": 480, "fx": 600.0, "fy": 600.0, "cx": 320.0, "cy": 240.0} | kwargs
    with pytest.raises(CameraModelError, match=message):
        CameraModel(**args)
