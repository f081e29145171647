"""Calibration files: round trip, the projection layer's loader, direction, camera checks, samples files."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from robopin.calibration import (
    BoardConfig,
    BoardView,
    CalibrationFileError,
    CalibrationRecord,
    CaptureSample,
    camera_info_dict,
    load_calibration,
    load_mount_for_view,
    load_samples,
    save_calibration,
    save_samples,
)
from robopin.geometry import (
    CameraModel,
    PointRequest,
    Projector,
    ViewConfig,
    ViewData,
    make_transform,
    rpy_to_matrix,
    transform_points,
)

CAMERA = CameraModel(640, 480, 605.0, 604.0, 321.0, 238.5)
T_BASE_CAM = make_transform(rpy_to_matrix(-2.1, 0.03, 1.57), [1.2, 0.04, 0.42])


def static_record(**overrides) -> CalibrationRecord:
    values = dict(
        name="static",
        parent_frame="base",
        child_frame="static_optical",
        T_parent_child=T_BASE_CAM,
        method="park+refine",
        sample_count=14,
        residuals={"fit": {"translation_rms_mm": 0.3}},
        camera=camera_info_dict(CAMERA, name="static", serial="f1230456"),
        board=BoardConfig().to_dict(),
        target_frame="ee",
        T_target=make_transform(np.diag([1.0, -1.0, -1.0]), [-0.14, 0.1, 0.03]),
    )
    values.update(overrides)
    return CalibrationRecord(**values)


def test_round_trip_keeps_transform_and_metadata(tmp_path):
    record = static_record()
    path = save_calibration(record, tmp_path / "static.yaml")
    loaded = load_calibration(path)
    assert np.allclose(loaded.T_parent_child, T_BASE_CAM, atol=1e-9)
    assert np.allclose(loaded.T_target, record.T_target, atol=1e-9)
    assert (loaded.name, loaded.kind, loaded.method, loaded.sample_count) == (
        "static",
        "eye_to_hand",
        "park+refine",
        14,
    )
    assert loaded.camera["serial"] == "f1230456" and loaded.camera["fx"] == pytest.approx(605.0)
    assert loaded.date == record.date
    text = path.read_text()
    assert "maps points in child_frame into parent_frame" in text
    data = yaml.safe_load(text)
    assert len(data["rotation"]) == 4 and data["translation"] == pytest.approx(T_BASE_CAM[:3, 3].tolist())


def test_projection_hook_reads_the_stored_transform(tmp_path):
    """What projection_node loads (<dir>/<view>.yaml as a mount) is the transform that was saved."""
    save_calibration(static_record(), tmp_path / "static.yaml")
    mount = load_mount_for_view(tmp_path, "static")
    assert mount.kind == "static" and mount.parent_frame == "base" and mount.child_frame == "static_optical"
    assert np.allclose(mount.T_base_cam(), T_BASE_CAM, atol=1e-9)
    save_calibration(
        static_record(name="wrist", parent_frame="ee", child_frame="wrist_optical", target_frame="base"),
        tmp_path / "wrist.yaml",
    )
    assert load_mount_for_view(tmp_path, "wrist").kind == "wrist"


def test_projection_with_the_stored_calibration_lands_on_the_true_point(tmp_path):
    """Depth of a flat table seen by the static camera: a pixel projects to where the truth says."""
    save_calibration(static_record(), tmp_path / "static.yaml")
    mount = load_mount_for_view(tmp_path, "static", CAMERA, serial="f1230456")
    # Depth image of the plane z = 0 seen from T_BASE_CAM (computed independently of the projector).
    u, v = CAMERA.pixel_centres()
    rays_cam = np.stack([(u - 0.5 - CAMERA.cx) / CAMERA.fx, (v - 0.5 - CAMERA.cy) / CAMERA.fy, np.ones_like(u)], -1)
    rays_base = rays_cam @ T_BASE_CAM[:3, :3].T
    depth = (-T_BASE_CAM[2, 3] / rays_base[..., 2]).astype(np.float32)
    projector = Projector([ViewConfig("static", 0, mount)])
    target = projector.project_point(PointRequest(400.5, 300.5, 0), {0: ViewData(depth, CAMERA, 0.0)})
    assert target.valid, target.detail
    truth = transform_points(T_BASE_CAM, rays_cam[300, 400] * depth[300, 400])
    assert np.linalg.norm(target.point - truth) < 1e-3
    assert abs(target.point[2]) < 1e-3


def test_wrong_camera_is_refused(tmp_path):
    save_calibration(static_record(), tmp_path / "static.yaml")
    with pytest.raises(CalibrationFileError, match="serial 'f1230456'"):
        load_mount_for_view(tmp_path, "static", CAMERA, serial="999")
    with pytest.raises(CalibrationFileError, match="1280x720"):
        load_mount_for_view(tmp_path, "static", CameraModel(1280, 720, 900, 900, 640, 360))
    with pytest.raises(CalibrationFileError, match="fx"):
        load_mount_for_view(tmp_path, "static", CameraModel(640, 480, 590.0, 604.0, 321.0, 238.5))


def test_malformed_files_name_the_problem(tmp_path):
    with pytest.raises(CalibrationFileError, match="cannot read"):
        load_calibration(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("parent_frame: base\ntranslation: [1, 2]\nrotation: [0, 0, 0, 1]\n")
    with pytest.raises(CalibrationFileError, match="bad transform"):
        load_calibration(bad)
    contradictory = save_calibration(static_record(), tmp_path / "c.yaml")
    data = yaml.safe_load(contradictory.read_text())
    data["kind"] = "eye_in_hand"
    contradictory.write_text(yaml.safe_dump(data))
    with pytest.raises(CalibrationFileError, match="contradicts parent_frame"):
        load_calibration(contradictory)
    with pytest.raises(CalibrationFileError, match="two different frame names"):
        static_record(child_frame="base")


def test_easy_handeye_style_file_loads(tmp_path):
    """A bare transform (as easy_handeye2 users have) loads; metadata defaults stay honest."""
    path = tmp_path / "legacy.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "parent_frame": "ee",
                "child_frame": "cam_optical",
                "transformation": {"x": 0.1, "y": 0, "z": 0.05, "qx": 0, "qy": 0, "qz": 0, "qw": 1},
            }
        )
    )
    record = load_calibration(path)
    assert record.kind == "eye_in_hand" and record.method == "unknown" and record.T_target is None
    assert np.allclose(record.T_parent_child[:3, 3], [0.1, 0.0, 0.05])


def test_samples_file_round_trip(tmp_path):
    good = CaptureSample(0, make_transform(t=[0.4, 0, 0.4]), BoardView(True, T_cam_board=make_transform(t=[0, 0, 0.5])))
    bad = CaptureSample(1, make_transform(t=[0.5, 0, 0.4]), BoardView(False, rejection=None, message="x"))
    path = save_samples(tmp_path / "s.yaml", "eye_in_hand", [good, bad])
    kind, samples = load_samples(path)
    assert kind == "eye_in_hand" and [s.view.ok for s in samples] == [True, False]
    assert np.allclose(samples[0].view.T_cam_board, good.view.T_cam_board)
