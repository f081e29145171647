"""Rigid transforms: composition, inversion, quaternion / rpy round trips, interpolation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robopin.geometry import (
    TransformError,
    as_transform,
    interpolate_transforms,
    invert,
    make_transform,
    matrix_to_quaternion,
    matrix_to_rpy,
    quaternion_to_matrix,
    rotation_angle,
    rpy_to_matrix,
    transform_from_xyz_quaternion,
    transform_from_xyz_rpy,
    transform_points,
    transform_to_xyz_quaternion,
    transform_vectors,
)

angles = st.floats(-math.pi, math.pi, allow_nan=False)
coords = st.floats(-5, 5, allow_nan=False)
quats = st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 4).filter(lambda q: np.linalg.norm(q) > 0.1)


def test_rpy_matches_elementary_rotations():
    # yaw 90 deg turns x into y; pitch 90 deg turns z into x; roll 90 deg turns y into z.
    np.testing.assert_allclose(rpy_to_matrix(0, 0, math.pi / 2) @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(rpy_to_matrix(0, math.pi / 2, 0) @ [0, 0, 1], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(rpy_to_matrix(math.pi / 2, 0, 0) @ [0, 1, 0], [0, 0, 1], atol=1e-12)


def test_quaternion_known_value_xyzw_order():
    # 90 deg about z: [0, 0, sin45, cos45] in [x, y, z, w]
    q = [0, 0, math.sqrt(0.5), math.sqrt(0.5)]
    np.testing.assert_allclose(quaternion_to_matrix(q), rpy_to_matrix(0, 0, math.pi / 2), atol=1e-12)
    np.testing.assert_allclose(matrix_to_quaternion(rpy_to_matrix(0, 0, math.pi / 2)), q, atol=1e-12)


def test_quaternion_scalar_first_order():
    # The same 90 deg about z in [w, x, y, z] (cuRobo's order).
    q = [math.sqrt(0.5), 0, 0, math.sqrt(0.5)]
    np.testing.assert_allclose(quaternion_to_matrix(q, order="wxyz"), rpy_to_matrix(0, 0, math.pi / 2), atol=1e-12)
    np.testing.assert_allclose(matrix_to_quaternion(rpy_to_matrix(0, 0, math.pi / 2), order="wxyz"), q, atol=1e-12)
    with pytest.raises(TransformError, match="order"):
        matrix_to_quaternion(np.eye(3), order="zyxw")


@given(angles, st.floats(-1.5, 1.5), angles)
@settings(deadline=None)  # timing is never pass/fail; the machine is shared
def test_rpy_round_trip(roll, pitch, yaw):
    R = rpy_to_matrix(roll, pitch, yaw)
    np.testing.assert_allclose(rpy_to_matrix(*matrix_to_rpy(R)), R, atol=1e-9)


@given(quats)
@settings(deadline=None)  # timing is never pass/fail; the machine is shared
def test_quaternion_round_trip_up_to_sign(q):
    q = np.asarray(q) / np.linalg.norm(q)
    back = matrix_to_quaternion(quaternion_to_matrix(q))
    assert back[3] >= 0
    assert min(np.abs(back - q).max(), np.abs(back + q).max()) < 1e-9
    wxyz = matrix_to_quaternion(quaternion_to_matrix(q), order="wxyz")
    np.testing.assert_allclose(wxyz, np.roll(back, 1), atol=1e-12)
    np.testing.assert_allclose(quaternion_to_matrix(wxyz, order="wxyz"), quaternion_to_matrix(q), atol=1e-9)


@given(st.tuples(angles, angles, angles), st.tuples(coords, coords, coords))
@settings(max_examples=50, deadline=None)
def test_invert_composes_to_identity_and_maps_points_back(rpy, xyz):
    T_a_b = transform_from_xyz_rpy(xyz, rpy)
    np.testing.assert_allclose(T_a_b @ invert(T_a_b), np.eye(4), atol=1e-12)
    pts = np.array([[0.1, -0.2, 0.3], [1.0, 2.0, -3.0]])
    np.testing.assert_allclose(transform_points(invert(T_a_b), transform_points(T_a_b, pts)), pts, atol=1e-12)


def test_chain_convention_T_a_c_is_T_a_b_times_T_b_c():
    T_a_b = make_transform(rpy_to_matrix(0, 0, math.pi / 2), [1, 0, 0])
    T_b_c = make_transform(None, [0, 2, 0])
    p_c = np.zeros(3)
    # Origin of c is at (0, 2, 0) in b; b is rotated 90 deg about z and shifted 1 m along x in a.
    np.testing.assert_allclose(transform_points(T_a_b @ T_b_c, p_c), [-1, 0, 0], atol=1e-12)


def test_transform_vectors_ignores_translation():
    T = make_transform(rpy_to_matrix(0, 0, math.pi), [5, 5, 5])
    np.testing.assert_allclose(transform_vectors(T, [1, 0, 0]), [-1, 0, 0], atol=1e-12)


def test_xyz_quaternion_round_trip():
    T = transform_from_xyz_quaternion([0.1, 0.2, 0.3], [0.1, 0.2, 0.3, 0.9])
    xyz, q = transform_to_xyz_quaternion(T)
    np.testing.assert_allclose(transform_from_xyz_quaternion(xyz, q), T, atol=1e-12)


def test_interpolation_halfway_and_ends():
    T0 = make_transform(None, [0, 0, 0])
    T1 = transform_from_xyz_rpy([1, 0, 0], [0, 0, math.pi / 2])
    mid = interpolate_transforms(T0, T1, 0.5)
    np.testing.assert_allclose(mid[:3, 3], [0.5, 0, 0], atol=1e-12)
    assert rotation_angle(mid) == pytest.approx(math.pi / 4, abs=1e-12)
    np.testing.assert_allclose(interpolate_transforms(T0, T1, 1.0), T1, atol=1e-12)


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.diag([1.0, 1.0, 1.0]), "4x4"),
        (np.diag([2.0, 1.0, 1.0, 1.0]), "not orthonormal"),
        (np.diag([1.0, 1.0, -1.0, 1.0]), "reflection"),
        (np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1.0]]), "bottom row"),
    ],
)
def test_invalid_transforms_are_refused_with_the_reason(matrix, message):
    with pytest.raises(TransformError, match=message):
        as_transform(matrix)


def test_zero_quaternion_refused():
    with pytest.raises(TransformError, match="zero norm"):
        quaternion_to_matrix([0, 0, 0, 0])
