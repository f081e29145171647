"""Hand-eye solvers on synthetic arm/board pose sets: every method, both mounts, noise, degenerate input."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.calibration import HAND_EYE_METHODS, DegenerateSamplesError, SolverConfig, solve_hand_eye
from robopin.calibration.handeye import Corners, check_motion_diversity, predicted_cam_board
from robopin.geometry import invert, make_transform, rotation_angle, rpy_to_matrix

T_EE_CAM = make_transform(rpy_to_matrix(0.05, -0.1, 1.57), [0.07, 0.01, -0.09])
T_BASE_CAM = make_transform(rpy_to_matrix(-2.0, 0.02, 1.6), [1.2, 0.05, 0.45])
CORNERS = np.array([[x * 0.04, y * 0.04, 0.0] for x in range(1, 7) for y in range(1, 5)])
K = np.array([[600.0, 0.0, 319.5], [0.0, 600.0, 239.5], [0.0, 0.0, 1.0]])


def hand_poses(rng: np.random.Generator, n: int, spread_rad: float = 0.45) -> list[np.ndarray]:
    """Hand poses around a downward-looking home with rotations about all three axes."""
    return [
        make_transform(
            rpy_to_matrix(
                np.pi + rng.uniform(-spread_rad, spread_rad), rng.uniform(-spread_rad, spread_rad), rng.uniform(-1, 1)
            ),
            np.array([0.45, 0.0, 0.45]) + rng.uniform(-0.08, 0.08, 3),
        )
        for _ in range(n)
    ]


def observations(kind, T_mount_cam, T_anchor_board, ee, rng, *, pose_noise=(0.0, 0.0)):
    """Board poses each hand pose implies, optionally perturbed (rotation rad, translation m)."""
    cams = []
    for A in ee:
        B = predicted_cam_board(kind, T_mount_cam, T_anchor_board, A)
        if pose_noise[0] or pose_noise[1]:
            B = B @ make_transform(rpy_to_matrix(*rng.normal(0, pose_noise[0], 3)), rng.normal(0, pose_noise[1], 3))
        cams.append(B)
    return cams


def setups(kind):
    if kind == "eye_in_hand":
        return T_EE_CAM, make_transform(np.diag([1.0, -1.0, -1.0]), [0.4, -0.1, 0.0])
    # A board held 3 cm beyond the tool centre, facing away from the hand.
    return T_BASE_CAM, make_transform(np.diag([1.0, -1.0, -1.0]), [-0.14, 0.1, 0.03])


@pytest.mark.parametrize("kind", ["eye_in_hand", "eye_to_hand"])
@pytest.mark.parametrize("method", HAND_EYE_METHODS)
def test_every_method_recovers_the_mount_from_exact_data(kind, method):
    rng = np.random.default_rng(1)
    X, Y = setups(kind)
    ee = hand_poses(rng, 8)
    result = solve_hand_eye(kind, ee, observations(kind, X, Y, ee, rng), SolverConfig(method=method, heldout=False))
    assert result.method == method
    assert np.linalg.norm(result.T_mount_cam[:3, 3] - X[:3, 3]) < 1e-6
    assert rotation_angle(result.T_mount_cam, X) < 1e-6
    assert np.linalg.norm(result.T_anchor_board[:3, 3] - Y[:3, 3]) < 1e-6
    assert result.mount_frame == ("ee" if kind == "eye_in_hand" else "base")


@pytest.mark.parametrize("kind", ["eye_in_hand", "eye_to_hand"])
def test_auto_with_noise_stays_close_and_reports_heldout_residuals(kind):
    rng = np.random.default_rng(2)
    X, Y = setups(kind)
    ee = hand_poses(rng, 15)
    cams = observations(kind, X, Y, ee, rng, pose_noise=(np.radians(0.05), 0.0003))
    result = solve_hand_eye(kind, ee, cams)
    assert result.method in HAND_EYE_METHODS
    assert np.linalg.norm(result.T_mount_cam[:3, 3] - X[:3, 3]) < 0.003
    assert np.degrees(rotation_angle(result.T_mount_cam, X)) < 0.1
    assert result.heldout is not None
    # Residuals reflect the injected noise: not zero, and held-out no better than the fit.
    assert 0.01 < result.fit.rotation_rms_deg < 0.5
    assert result.heldout.translation_rms_mm >= result.fit.translation_rms_mm * 0.9
    assert set(result.per_method) == set(HAND_EYE_METHODS)


@pytest.mark.slow
def test_refinement_from_corners_beats_closed_form_under_pixel_noise():
    """Views whose PnP poses are noisy: refining on the corners themselves gets closer to the truth."""
    rng = np.random.default_rng(3)
    kind = "eye_in_hand"
    X, Y = setups(kind)
    ee = hand_poses(rng, 12, spread_rad=0.3)
    cams, corners = [], []
    for B in observations(kind, X, Y, ee, rng):
        p = CORNERS @ B[:3, :3].T + B[:3, 3]
        pixels = (p[:, :2] / p[:, 2:3]) * 600.0 + np.array([319.5, 239.5])
        pixels += rng.normal(0, 0.3, pixels.shape)
        corners.append(Corners(CORNERS, pixels, K))
        _, rvec, tvec = cv2.solvePnP(CORNERS, pixels, K, None, flags=cv2.SOLVEPNP_IPPE)
        cams.append(make_transform(cv2.Rodrigues(rvec)[0], tvec.reshape(3)))
    plain = solve_hand_eye(kind, ee, cams, SolverConfig(refine=False))
    refined = solve_hand_eye(kind, ee, cams, SolverConfig(), corners)
    assert refined.method.endswith("+refine")
    assert refined.heldout_reprojection_px is not None and refined.heldout_reprojection_px < 1.0
    error = lambda r: 1000 * np.linalg.norm(r.T_mount_cam[:3, 3] - X[:3, 3])  # noqa: E731
    assert error(refined) < error(plain)


@given(
    rpy=st.tuples(*[st.floats(-np.pi, np.pi)] * 3),
    xyz=st.tuples(*[st.floats(-0.2, 0.2)] * 3),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=15, deadline=None)
def test_any_wrist_mount_is_recovered(rpy, xyz, seed):
    rng = np.random.default_rng(seed)
    X = make_transform(rpy_to_matrix(*rpy), xyz)
    Y = make_transform(rpy_to_matrix(np.pi, 0, 0.3), [0.5, 0.0, 0.0])
    ee = hand_poses(rng, 6)
    result = solve_hand_eye("eye_in_hand", ee, observations("eye_in_hand", X, Y, ee, rng), SolverConfig(heldout=False))
    assert np.allclose(result.T_mount_cam, X, atol=1e-6)


# ----------------------------------------------------------------------------- degenerate input
def test_too_few_poses_is_refused_with_the_count():
    rng = np.random.default_rng(4)
    X, Y = setups("eye_in_hand")
    ee = hand_poses(rng, 3)
    with pytest.raises(DegenerateSamplesError, match="3 usable sample"):
        solve_hand_eye("eye_in_hand", ee, observations("eye_in_hand", X, Y, ee, rng))


def test_rotations_about_one_axis_are_refused():
    """A hand that only turns about its vertical axis cannot reveal the camera's height on it."""
    X, Y = setups("eye_in_hand")
    ee = [
        make_transform(rpy_to_matrix(np.pi, 0.0, yaw), [0.4 + 0.01 * i, 0.0, 0.4])
        for i, yaw in enumerate(np.linspace(-1, 1, 8))
    ]
    with pytest.raises(DegenerateSamplesError, match="nearly parallel axes"):
        solve_hand_eye("eye_in_hand", ee, observations("eye_in_hand", X, Y, ee, None))


def test_pure_translations_are_refused():
    ee = [make_transform(rpy_to_matrix(np.pi, 0.0, 0.0), [0.4 + 0.02 * i, 0.01 * i, 0.4]) for i in range(8)]
    with pytest.raises(DegenerateSamplesError, match="rotates at most"):
        check_motion_diversity(ee)


def test_mismatched_sample_lists_and_bad_settings_are_named():
    rng = np.random.default_rng(5)
    ee = hand_poses(rng, 6)
    with pytest.raises(ValueError, match="6 arm poses but 5 board poses"):
        solve_hand_eye("eye_in_hand", ee, ee[:5])
    with pytest.raises(ValueError, match="kind must be"):
        solve_hand_eye("eye_on_base", ee, ee)
    with pytest.raises(ValueError, match="method 'magic'"):
        SolverConfig(method="magic")
    with pytest.raises(ValueError, match="min_samples"):
        SolverConfig(min_samples=2)


def test_inverse_convention_is_what_the_solution_means():
    """The result maps camera points into the mount frame: a camera-frame point lands where the truth puts it."""
    rng = np.random.default_rng(6)
    X, Y = setups("eye_to_hand")
    ee = hand_poses(rng, 8)
    result = solve_hand_eye("eye_to_hand", ee, observations("eye_to_hand", X, Y, ee, rng), SolverConfig(heldout=False))
    p_cam = np.array([0.1, -0.05, 0.7, 1.0])
    assert np.allclose(result.T_mount_cam @ p_cam, X @ p_cam, atol=1e-6)
    assert not np.allclose(invert(result.T_mount_cam) @ p_cam, X @ p_cam, atol=1e-3)
