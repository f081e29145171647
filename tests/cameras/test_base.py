"""The camera contract: Frame and config validation, the lazy factory, and Camera's connect/read/async_read."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time
from typing import ClassVar

import numpy as np
import pytest

from robopin.cameras import (
    Camera,
    CameraConfig,
    CameraDescription,
    CameraReadError,
    CameraTimeoutError,
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    Frame,
    UnknownCameraTypeError,
    camera_config_from_dict,
    make_camera,
)
from robopin.cameras.synthetic import SyntheticScene
from robopin.geometry.camera_model import CameraModel

MODEL = CameraModel(8, 6, 10.0, 10.0, 3.5, 2.5)


def _frame(index: int = 0, t: float = 1.0) -> Frame:
    scene = SyntheticScene(1.0)
    return Frame(scene.color(MODEL, index), scene.depth_m(MODEL), MODEL, t, "S1", index, "top")


@dataclasses.dataclass
class CountingConfig(CameraConfig):
    type: ClassVar[str] = "counting-test"
    period_s: float = 0.005
    fail_after: int = -1


class CountingCamera(Camera):
    """A camera defined in this test: frames from a synthetic scene at a fixed period (tests the base only)."""

    config_class = CountingConfig

    def __init__(self, config: CountingConfig) -> None:
        super().__init__(config)
        self.n = 0
        self.opened = False

    @staticmethod
    def find_cameras() -> list[CameraDescription]:
        return [CameraDescription(type="counting-test", serial="S1")]

    def _connect(self) -> None:
        self.opened = True

    def _read(self, timeout_s: float) -> Frame:
        if self.config.fail_after >= 0 and self.n >= self.config.fail_after:
            raise OSError("cable pulled")
        if self.config.period_s > timeout_s:
            time.sleep(timeout_s)
            raise CameraTimeoutError("slow")
        time.sleep(self.config.period_s)
        self.n += 1
        return _frame(self.n - 1, time.time())

    def _disconnect(self) -> None:
        self.opened = False


def test_frame_rejects_wrong_color_dtype_and_names_it():
    with pytest.raises(ValueError, match="float64"):
        Frame(np.zeros((6, 8, 3)), None, MODEL, 0.0)


def test_frame_rejects_depth_not_aligned_to_color():
    with pytest.raises(ValueError, match=r"\(6, 8\)"):
        Frame(np.zeros((6, 8, 3), np.uint8), np.zeros((3, 4), np.float32), MODEL, 0.0)


def test_unaligned_frame_needs_its_depth_model_and_extrinsics_together():
    from robopin.geometry.camera_model import CameraModel

    depth_model = CameraModel(4, 3, 3.0, 3.0, 1.5, 1.0)
    color = np.zeros((6, 8, 3), np.uint8)
    depth = np.ones((3, 4), np.float32)
    frame = Frame(color, depth, MODEL, 0.0, depth_intrinsics=depth_model, T_color_depth=np.eye(4))
    assert not frame.depth_aligned and frame.aligned_depth_m().shape == (6, 8)
    with pytest.raises(ValueError, match="come together"):
        Frame(color, depth, MODEL, 0.0, depth_intrinsics=depth_model)
    with pytest.raises(ValueError, match=r"\(3, 4\) \(the depth intrinsics\)"):
        Frame(color, np.ones((6, 8), np.float32), MODEL, 0.0, depth_intrinsics=depth_model, T_color_depth=np.eye(4))
    with pytest.raises(ValueError, match="4x4"):
        Frame(color, depth, MODEL, 0.0, depth_intrinsics=depth_model, T_color_depth=np.eye(3))
    aligned = Frame(color, np.ones((6, 8), np.float32), MODEL, 0.0)
    assert aligned.depth_aligned and aligned.aligned_depth_m() is aligned.depth_m


def test_frame_rejects_intrinsics_of_another_size():
    with pytest.raises(ValueError, match="8x6"):
        Frame(np.zeros((12, 16, 3), np.uint8), None, MODEL, 0.0)


def test_frame_optical_frame_follows_camera_name():
    assert _frame().optical_frame_id == "top_optical"


@pytest.mark.parametrize(("field", "value"), [("width", 0), ("fps", -30), ("name", "bad name"), ("warmup_s", -1.0)])
def test_config_rejects_bad_values_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        CountingConfig(**{field: value})


def test_factory_rejects_unknown_type_listing_known_ones():
    with pytest.raises(UnknownCameraTypeError, match="realsense"):
        make_camera({"type": "kinect"})


def test_config_from_dict_rejects_unknown_option():
    with pytest.raises(ValueError, match="exposure_us"):
        camera_config_from_dict({"type": "realsense", "exposure_us": 100})


def test_config_round_trips_through_dict():
    config = camera_config_from_dict({"type": "realsense", "name": "wrist", "serial": "123", "filters": ["spatial"]})
    again = camera_config_from_dict(config.to_dict())
    assert again == config
    assert again.filters == ("spatial",)


def test_factory_imports_only_the_configured_backend():
    # A fresh interpreter, so modules other tests imported do not hide an eager import.
    code = (
        "import sys; from robopin.cameras import make_camera; "
        "camera = make_camera({'type': 'zed', 'name': 'static'}); "
        "print(type(camera).__name__, 'robopin.cameras.bag' in sys.modules, 'pyrealsense2' in sys.modules, "
        "'robopin.cameras.realsense' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["ZedCamera", "False", "False", "False"]


def test_read_before_connect_is_refused():
    with pytest.raises(DeviceNotConnectedError, match="connect"):
        CountingCamera(CountingConfig()).read()


def test_second_connect_is_refused():
    camera = CountingCamera(CountingConfig())
    camera.connect()
    with pytest.raises(DeviceAlreadyConnectedError):
        camera.connect()
    camera.disconnect()


def test_context_manager_connects_and_releases():
    camera = CountingCamera(CountingConfig())
    with camera as cam:
        assert cam.opened and cam.is_connected
        assert cam.read().index == 0
    assert not camera.opened and not camera.is_connected


def test_async_read_never_returns_the_same_frame_twice():
    with CountingCamera(CountingConfig(period_s=0.003)) as camera:
        indices = [camera.async_read(timeout_s=1.0).index for _ in range(10)]
    assert indices == sorted(indices) and len(set(indices)) == 10


def test_async_read_times_out_when_camera_is_too_slow():
    with CountingCamera(CountingConfig(period_s=5.0, read_timeout_s=0.05)) as camera, pytest.raises(
        CameraTimeoutError, match="ms"
    ):
        camera.async_read(timeout_s=0.05)


def test_async_read_surfaces_reader_failure():
    with CountingCamera(CountingConfig(fail_after=2)) as camera:
        camera.async_read(timeout_s=1.0)
        with pytest.raises(CameraReadError, match="cable pulled"):
            for _ in range(5):
                camera.async_read(timeout_s=1.0)


def test_disconnect_stops_the_reader_thread():
    camera = CountingCamera(CountingConfig())
    camera.connect()
    camera.async_read(timeout_s=1.0)
    camera.disconnect()
    assert not any(t.name.startswith("CountingCamera") for t in threading.enumerate())
