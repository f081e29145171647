"""Stereolabs ZED backend (ZED 2/2i/X/Mini) on the ZED SDK's ``pyzed.sl``: live by serial, or an SVO file.

Color is the rectified LEFT image; depth is ``MEASURE.DEPTH`` in metres, which the SDK registers to the
LEFT image, so it is already aligned to color. The SDK marks invalid depth as NaN (occluded), -inf (too
close) or +inf (too far); all become NaN here. ``pyzed.sl`` ships only with the Stereolabs SDK
installer (it needs CUDA); the ``pyzed`` package on PyPI is an unrelated project.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robopin.cameras.base import (
    Camera,
    CameraBackendUnavailableError,
    CameraConfig,
    CameraDescription,
    CameraNotFoundError,
    CameraReadError,
    CameraTimeoutError,
    Frame,
    StreamProfile,
)
from robopin.geometry.camera_model import CameraModel

__all__ = ["ZED_DEPTH_MODES", "ZED_RESOLUTIONS", "ZedCamera", "ZedCameraConfig", "import_pyzed"]

logger = logging.getLogger(__name__)

# sl.RESOLUTION name for each (width, height) the SDK offers.
ZED_RESOLUTIONS: dict[tuple[int, int], str] = {
    (2208, 1242): "HD2K",
    (1920, 1080): "HD1080",
    (1920, 1200): "HD1200",
    (1280, 720): "HD720",
    (960, 600): "SVGA",
    (672, 376): "VGA",
}
ZED_DEPTH_MODES = ("PERFORMANCE", "QUALITY", "ULTRA", "NEURAL", "NEURAL_PLUS")


def import_pyzed() -> Any:
    """Import ``pyzed.sl`` or raise :class:`CameraBackendUnavailableError` saying where it comes from."""
    try:
        from pyzed import sl
    except ImportError as exc:
        raise CameraBackendUnavailableError(
            f"the ZED backend needs pyzed.sl from the Stereolabs ZED SDK ({exc}); install the ZED SDK and run "
            "its get_python_api.py (the 'pyzed' package on PyPI is an unrelated project)"
        ) from exc
    return sl


@dataclasses.dataclass
class ZedCameraConfig(CameraConfig):
    """A ZED camera by serial number, or an SVO recording played back as if it were one.

    Attributes:
        serial: camera serial number (an integer in the SDK); empty selects the only connected camera.
        svo_file: an ``.svo``/``.svo2`` recording to play instead of a camera.
        svo_realtime: play the SVO at its recorded rate (True) or frame by frame as fast as read.
        depth_mode: one of ``ZED_DEPTH_MODES``.
        min_depth_m, max_depth_m: the SDK's depth range; outside it depth is NaN.
        restamp: as for RealSense; None restamps SVO playback with the host clock, keeps camera time live.
    """

    type: ClassVar[str] = "zed"

    width: int = 1280
    height: int = 720
    serial: str = ""
    svo_file: str = ""
    svo_realtime: bool = True
    depth_mode: str = "NEURAL"
    min_depth_m: float = 0.3
    max_depth_m: float = 10.0
    restamp: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.serial = str(self.serial)
        if self.serial and not self.serial.isdigit():
            raise ValueError(f"camera {self.name!r}: ZED serial must be digits, got {self.serial!r}")
        if (self.width, self.height) not in ZED_RESOLUTIONS:
            raise ValueError(
                f"camera {self.name!r}: {self.width}x{self.height} is not a ZED resolution; expected one of "
                f"{[f'{w}x{h}' for w, h in ZED_RESOLUTIONS]}"
            )
        if self.depth_mode not in ZED_DEPTH_MODES:
            raise ValueError(f"camera {self.name!r}: depth_mode {self.depth_mode!r} is not one of {ZED_DEPTH_MODES}")
        if not (0.0 < self.min_depth_m < self.max_depth_m) or not math.isfinite(self.max_depth_m):
            raise ValueError(f"camera {self.name!r}: need 0 < min_depth_m < max_depth_m (finite), got "
                             f"{self.min_depth_m!r}, {self.max_depth_m!r}")


class ZedCamera(Camera):
    """A ZED stereo camera (rectified left image + registered depth) or an SVO recording."""

    config_class = ZedCameraConfig
    config: ZedCameraConfig

    def __init__(self, config: ZedCameraConfig) -> None:
        super().__init__(config)
        self._sl: Any = None
        self._camera: Any = None
        self._runtime: Any = None
        self._image: Any = None
        self._depth: Any = None
        self._model: CameraModel | None = None
        self._serial = ""
        self._index = 0

    @staticmethod
    def find_cameras() -> list[CameraDescription]:
        """Connected ZED cameras (serial, model); empty when the SDK is not installed."""
        try:
            sl = import_pyzed()
        except CameraBackendUnavailableError:
            return []
        found = []
        for device in sl.Camera.get_device_list():
            profiles = tuple(
                StreamProfile("color", w, h, 0, "bgra8") for (w, h) in ZED_RESOLUTIONS
            )
            found.append(CameraDescription(
                type="zed", serial=str(device.serial_number), name=str(device.camera_model),
                profiles=profiles,
            ))
        return found

    def _connect(self) -> None:
        sl = self._sl = import_pyzed()
        config = self.config
        init = sl.InitParameters()
        init.camera_resolution = getattr(sl.RESOLUTION, ZED_RESOLUTIONS[(config.width, config.height)])
        init.camera_fps = config.fps
        init.depth_mode = getattr(sl.DEPTH_MODE, config.depth_mode)
        init.coordinate_units = sl.UNIT.METER
        init.depth_minimum_distance = config.min_depth_m
        init.depth_maximum_distance = config.max_depth_m
        if config.svo_file:
            if not Path(config.svo_file).is_file():
                raise CameraNotFoundError(f"camera {config.name!r}: SVO file {config.svo_file!r} does not exist")
            init.set_from_svo_file(config.svo_file)
            init.svo_real_time_mode = config.svo_realtime
        else:
            # Checked before open(): the SDK otherwise retries for several seconds on an absent camera.
            serials = [str(d.serial_number) for d in sl.Camera.get_device_list()]
            if config.serial and config.serial not in serials:
                raise CameraNotFoundError(f"camera {config.name!r}: no ZED with serial {config.serial!r} is "
                                          f"connected; found {serials or 'none'}")
            if not config.serial and len(serials) != 1:
                raise CameraNotFoundError(f"camera {config.name!r}: no serial configured and {len(serials)} "
                                          f"ZED cameras are connected ({serials}); set serial")
            init.set_from_serial_number(int(config.serial or serials[0]))
        camera = sl.Camera()
        status = camera.open(init)
        if status != sl.ERROR_CODE.SUCCESS:
            source = config.svo_file or config.serial
            raise CameraNotFoundError(f"camera {config.name!r}: ZED open({source!r}) failed: {status}")
        info = camera.get_camera_information()
        calibration = info.camera_configuration.calibration_parameters.left_cam
        self._model = CameraModel.from_zed(calibration, rectified=True)
        self._serial = str(info.serial_number)
        if config.serial and config.svo_file and config.serial != self._serial:
            camera.close()
            raise CameraNotFoundError(f"camera {config.name!r}: SVO {config.svo_file!r} holds serial "
                                      f"{self._serial!r}, expected {config.serial!r}")
        self._camera = camera
        self._runtime = sl.RuntimeParameters()
        self._image = sl.Mat()
        self._depth = sl.Mat()
        self._index = 0

    def _read(self, timeout_s: float) -> Frame:
        sl = self._sl
        deadline = time.monotonic() + timeout_s
        status = self._camera.grab(self._runtime)
        # grab() blocks until the next frame; a few transient errors mean "not yet".
        while status in (sl.ERROR_CODE.CAMERA_NOT_READY,) and time.monotonic() < deadline:
            time.sleep(0.001)
            status = self._camera.grab(self._runtime)
        if status == sl.ERROR_CODE.END_OF_SVOFILE_REACHED:
            raise CameraReadError(f"camera {self.config.name!r}: end of SVO file {self.config.svo_file!r}")
        if status == sl.ERROR_CODE.CAMERA_NOT_READY:
            raise CameraTimeoutError(f"camera {self.config.name!r}: no ZED frame within {timeout_s * 1000:.0f} ms")
        if status != sl.ERROR_CODE.SUCCESS:
            raise CameraReadError(f"camera {self.config.name!r}: ZED grab failed: {status}")
        arrival_s = time.time()
        self._camera.retrieve_image(self._image, sl.VIEW.LEFT)
        self._camera.retrieve_measure(self._depth, sl.MEASURE.DEPTH)
        bgra = self._image.get_data()
        color = np.ascontiguousarray(bgra[..., 2::-1])
        depth = np.array(self._depth.get_data(), dtype=np.float32, copy=True)
        depth[~np.isfinite(depth)] = np.nan
        restamp = self.config.restamp if self.config.restamp is not None else bool(self.config.svo_file)
        if restamp:
            stamp_s = arrival_s
        else:
            stamp_s = self._camera.get_timestamp(sl.TIME_REFERENCE.IMAGE).get_nanoseconds() * 1e-9
        assert self._model is not None
        model = self._model
        if (model.width, model.height) != (color.shape[1], color.shape[0]):
            model = model.resized(color.shape[1], color.shape[0])
        frame = Frame(color=color, depth_m=depth, intrinsics=model, timestamp_s=stamp_s, serial=self._serial,
                      index=self._index, camera_name=self.config.name)
        self._index += 1
        return frame

    def _disconnect(self) -> None:
        camera, self._camera = self._camera, None
        if camera is not None:
            camera.close()
