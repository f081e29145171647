"""ZED backend against a FAKE pyzed.sl (the real one needs the Stereolabs SDK and CUDA)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from robopin.cameras import CameraBackendUnavailableError, CameraNotFoundError, CameraReadError, make_camera
from robopin.cameras.zed import ZedCamera, ZedCameraConfig

from .fake_pyzed_sl import install_fake_pyzed


@pytest.fixture
def fake_sl(monkeypatch):
    return install_fake_pyzed(monkeypatch)


def test_missing_sdk_gives_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyzed", None)
    monkeypatch.setitem(sys.modules, "pyzed.sl", None)
    with pytest.raises(CameraBackendUnavailableError, match="ZED SDK"):
        ZedCamera(ZedCameraConfig()).connect()


def test_config_rejects_non_zed_resolution():
    with pytest.raises(ValueError, match="640x480"):
        ZedCameraConfig(width=640, height=480)


def test_fake_sl_live_frame_is_rgb_metres_nan_invalid(fake_sl):
    fake_sl.STATE.devices = [31415]
    camera = make_camera({"type": "zed", "name": "static", "serial": "31415", "width": 672, "height": 376})
    with camera:
        frame = camera.read()
    assert frame.color.shape == (376, 672, 3)
    assert tuple(frame.color[5, 5]) == (30, 20, 10)  # BGRA (10, 20, 30) -> RGB
    assert frame.serial == "31415" and frame.camera_name == "static"
    assert np.isnan(frame.depth_m[:3]).all()  # NaN, -inf, +inf rows all invalid
    assert np.allclose(frame.depth_m[3:], 1.25)
    assert frame.intrinsics.width == 672 and frame.intrinsics.fx == pytest.approx(336.0)
    # Live cameras keep the SDK's image timestamp (host-synchronised).
    assert frame.timestamp_s == pytest.approx(1_700_000_000.0 + 1 / 30, abs=1e-6)


def test_fake_sl_absent_serial_refused_before_open(fake_sl):
    fake_sl.STATE.devices = [1]
    with pytest.raises(CameraNotFoundError, match=r"'2'.*found"):
        ZedCamera(ZedCameraConfig(serial="2")).connect()
    assert fake_sl.STATE.opened == []


def test_fake_sl_svo_plays_to_end_then_reports_it(fake_sl, tmp_path):
    svo = tmp_path / "run.svo2"
    svo.write_bytes(b"")
    fake_sl.STATE.svo_files[str(svo)] = (777, 3)
    camera = ZedCamera(ZedCameraConfig(svo_file=str(svo)))
    camera.connect()
    reds = [camera.read().color[0, 0, 0] for _ in range(3)]
    assert reds == [1, 2, 3]
    with pytest.raises(CameraReadError, match="end of SVO"):
        camera.read()
    camera.disconnect()
    assert fake_sl.STATE.opened == []


def test_fake_sl_svo_serial_mismatch_refused(fake_sl, tmp_path):
    svo = tmp_path / "run.svo2"
    svo.write_bytes(b"")
    fake_sl.STATE.svo_files[str(svo)] = (777, 3)
    with pytest.raises(CameraNotFoundError, match=r"'777'.*'778'"):
        ZedCamera(ZedCameraConfig(svo_file=str(svo), serial="778")).connect()


def test_fake_sl_lost_camera_is_read_error(fake_sl):
    fake_sl.STATE.devices = [5]
    fake_sl.STATE.fail_grab_after = 1
    with ZedCamera(ZedCameraConfig()) as camera:
        camera.read()
        with pytest.raises(CameraReadError, match="grab failed"):
            camera.read()


def test_fake_sl_find_cameras_lists_serials(fake_sl):
    fake_sl.STATE.devices = [11, 12]
    assert [d.serial for d in ZedCamera.find_cameras()] == ["11", "12"]
