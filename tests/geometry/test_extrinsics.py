"""Camera mounts from calibration YAML, the time-indexed arm-pose buffer, and the workspace box."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from robopin.calibration import load_mount_for_view
from robopin.geometry import (
    CalibrationError,
    CameraMount,
    PoseBuffer,
    StalePoseError,
    WorkspaceBox,
    WorkspaceError,
    matrix_to_quaternion,
    mount_from_dict,
    rotation_angle,
    rpy_to_matrix,
    transform_from_xyz_rpy,
)


def test_static_mount_from_yaml_quaternion(tmp_path):
    R = rpy_to_matrix(-2.2, 0.0, 1.57)
    q = matrix_to_quaternion(R)
    path = tmp_path / "static_cam.yaml"
    path.write_text(
        "parent_frame: base\nchild_frame: static_cam_optical\n"
        f"translation: [0.9, -0.1, 0.6]\nrotation: [{q[0]}, {q[1]}, {q[2]}, {q[3]}]\n"
    )
    mount = load_mount_for_view(tmp_path, "static_cam")  # the one calibration-file reader
    assert mount.kind == "static"
    np.testing.assert_allclose(
        mount.T_base_cam(), transform_from_xyz_rpy([0.9, -0.1, 0.6], [-2.2, 0.0, 1.57]), atol=1e-12
    )


def test_wrist_mount_composes_with_the_arm_pose():
    T_ee_cam = transform_from_xyz_rpy([0.05, 0.0, 0.04], [0.0, 0.0, -math.pi / 2])
    mount = mount_from_dict({"parent_frame": "ee", "matrix": T_ee_cam.tolist()})
    assert mount.kind == "wrist"
    T_base_ee = transform_from_xyz_rpy([0.4, 0.1, 0.3], [math.pi, 0.0, 0.3])
    np.testing.assert_allclose(mount.T_base_cam(T_base_ee), T_base_ee @ T_ee_cam, atol=1e-12)
    with pytest.raises(StalePoseError):
        mount.T_base_cam(None)


def test_easy_handeye_style_and_rpy_forms():
    m1 = mount_from_dict({"transformation": {"x": 1, "y": 2, "z": 3, "qx": 0, "qy": 0, "qz": 0, "qw": 1}})
    np.testing.assert_allclose(m1.T_parent_cam[:3, 3], [1, 2, 3])
    m2 = mount_from_dict({"translation": [0, 0, 1], "rpy": [0, 0, math.pi / 2]})
    assert rotation_angle(m2.T_parent_cam) == pytest.approx(math.pi / 2)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"translation": [0, 0, 1]}, "expected 'translation'"),
        ({"translation": [0, 0], "rotation": [0, 0, 0, 1]}, "bad transform"),
        ({"matrix": np.diag([2.0, 1, 1, 1]).tolist()}, "orthonormal"),
        ([1, 2, 3], "mapping"),
    ],
)
def test_bad_calibration_is_refused(data, message):
    with pytest.raises((CalibrationError, ValueError), match=message):
        mount_from_dict(data)


def test_unknown_mount_kind():
    with pytest.raises(CalibrationError, match="static"):
        CameraMount("ceiling", np.eye(4))


def pose_at(x: float, yaw: float = 0.0) -> np.ndarray:
    return transform_from_xyz_rpy([x, 0.0, 0.5], [0.0, 0.0, yaw])


def test_pose_buffer_interpolates_between_neighbours():
    buf = PoseBuffer()
    buf.add(10.0, pose_at(0.0, 0.0))
    buf.add(10.02, pose_at(0.02, 0.2))
    T = buf.lookup(10.005, tolerance_s=0.05)
    assert T[0, 3] == pytest.approx(0.005)
    assert rotation_angle(T) == pytest.approx(0.05)


def test_pose_buffer_accepts_out_of_order_stamps():
    buf = PoseBuffer(max_interpolation_gap_s=2.0)
    for t in (3.0, 1.0, 2.0):
        buf.add(t, pose_at(t))
    assert buf.lookup(1.5, 0.6)[0, 3] == pytest.approx(1.5)
    assert buf.latest()[0] == 3.0


def test_pose_buffer_refuses_stale_and_never_extrapolates():
    buf = PoseBuffer()
    with pytest.raises(StalePoseError, match="no arm pose"):
        buf.lookup(1.0, 0.05)
    buf.add(1.0, pose_at(1.0))
    buf.add(1.02, pose_at(1.02))
    with pytest.raises(StalePoseError, match="ms from the frame"):
        buf.lookup(1.2, tolerance_s=0.05)
    # Just past the newest pose, within tolerance: the newest pose itself, not an extrapolation.
    assert buf.lookup(1.04, tolerance_s=0.05)[0, 3] == pytest.approx(1.02)


def test_pose_buffer_uses_the_nearest_pose_across_a_gap():
    buf = PoseBuffer(max_interpolation_gap_s=0.1)
    buf.add(0.0, pose_at(0.0))
    buf.add(1.0, pose_at(1.0))
    assert buf.lookup(0.03, tolerance_s=0.05)[0, 3] == pytest.approx(0.0)
    with pytest.raises(StalePoseError):
        buf.lookup(0.5, tolerance_s=0.05)


def test_pose_buffer_capacity_drops_the_oldest():
    buf = PoseBuffer(capacity=3)
    for t in range(5):
        buf.add(float(t), pose_at(t))
    assert len(buf) == 3
    with pytest.raises(StalePoseError):
        buf.lookup(0.0, 0.1)


def test_pose_buffer_is_safe_across_threads():
    buf = PoseBuffer(capacity=5000)

    def writer(offset):
        for i in range(500):
            buf.add(offset + i * 1e-3, pose_at(0.0))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(buf) == 2000


def test_workspace_box():
    box = WorkspaceBox((0.2, -0.4, -0.01), (0.8, 0.4, 0.5))
    assert box.contains([0.5, 0.0, 0.1])
    assert not box.contains([0.9, 0.0, 0.1])
    assert not box.contains([np.nan, 0.0, 0.1])
    np.testing.assert_array_equal(box.contains([[0.5, 0, 0], [0, 0, 0]]), [True, False])
    assert box.clearance([0.5, 0.0, 0.1]) == pytest.approx(0.11)
    assert box.clearance([0.9, 0.0, 0.1]) == pytest.approx(-0.1)
    assert WorkspaceBox.from_dict({"min_xyz": [0, 0, 0], "max_xyz": [1, 1, 1]}).frame == "base"


@pytest.mark.parametrize(
    ("lo", "hi", "message"),
    [((0, 0, 0), (1, 1), "3 numbers"), ((0, 0, 1), (1, 1, 1), "below"), ((0, 0, math.inf), (1, 1, 1), "finite")],
)
def test_bad_workspace_refused(lo, hi, message):
    with pytest.raises(WorkspaceError, match=message):
        WorkspaceBox(lo, hi)


def test_a_pose_buffer_forgets_the_poses_before_a_teleport():
    # A simulated cell reset between trials puts the arm at its start pose without motion: a frame taken just
    # after must not be interpolated towards the pose before.
    buffer = PoseBuffer()
    before, after = np.eye(4), np.eye(4)
    before[:3, 3] = [0.3, 0.0, 0.4]
    after[:3, 3] = [0.5, 0.2, 0.3]
    buffer.add(1.00, before)
    buffer.add(1.05, after)
    assert not np.allclose(buffer.lookup(1.04, 0.1), after)  # interpolated across the jump
    buffer.forget_before(1.02)
    np.testing.assert_allclose(buffer.lookup(1.04, 0.1), after)
    assert len(buffer) == 1
    with pytest.raises(StalePoseError):
        buffer.lookup(0.9, 0.1)


def _resting_poses(buf: PoseBuffer, start: float, end: float, *, shifted_from: float | None = None,
                   shift=(0.0, 0.0, 0.0), yaw: float = 0.0) -> None:
    """Poses every 50 ms; from ``shifted_from`` on, moved by ``shift`` (m) and turned by ``yaw`` (rad)."""
    base = transform_from_xyz_rpy([0.4, 0.0, 0.3], [np.pi, 0.0, 0.0])
    for k in range(round((end - start) / 0.05) + 1):
        stamp = start + 0.05 * k
        T = base.copy()
        if shifted_from is not None and stamp >= shifted_from:
            T = transform_from_xyz_rpy(shift, [0.0, 0.0, yaw]) @ T
        buf.add(stamp, T)


def test_an_arm_at_rest_is_still_and_a_motion_between_is_named():
    buf = PoseBuffer()
    _resting_poses(buf, 10.0, 11.0)
    assert buf.why_not_still(10.2, 10.8, 0.05) == ""
    moved = PoseBuffer()
    _resting_poses(moved, 10.0, 11.0, shifted_from=10.5, shift=(0.003, 0.0, 0.0))
    assert moved.why_not_still(10.0, 10.45, 0.05) == ""  # before the motion
    assert "the arm moved 3.0 mm" in moved.why_not_still(10.2, 10.8, 0.05)
    turned = PoseBuffer()
    _resting_poses(turned, 10.0, 11.0, shifted_from=10.5, yaw=np.radians(1.0))
    assert "/ 1.00 deg" in turned.why_not_still(10.2, 10.8, 0.05)


def test_a_motion_undone_before_the_end_is_still_seen_in_the_poses_between():
    """Out 5 mm and back between the ends: the ends agree, a pose received in between does not."""
    buf = PoseBuffer()
    _resting_poses(buf, 10.0, 11.0)
    buf.add(10.5, transform_from_xyz_rpy([0.405, 0.0, 0.3], [np.pi, 0.0, 0.0]))
    assert "the arm moved 5.0 mm" in buf.why_not_still(10.2, 10.8, 0.05)


def test_stillness_needs_a_pose_at_each_end():
    buf = PoseBuffer()
    _resting_poses(buf, 10.0, 10.5)
    assert "nearest arm pose is" in buf.why_not_still(10.2, 10.8, 0.05)  # no pose near 10.8 s
    assert "no arm pose received yet" in PoseBuffer().why_not_still(10.2, 10.8, 0.05)
