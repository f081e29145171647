"""A FAKE ``pyzed.sl`` (the ZED SDK cannot be installed here: it needs the Stereolabs installer and CUDA).

It implements only the documented calls the ZED backend makes, with the SDK's conventions: BGRA left
image, float32 depth in metres registered to it, NaN/±inf for invalid depth, ERROR_CODE results,
end-of-SVO after the last frame. Install it with :func:`install_fake_pyzed` (monkeypatches sys.modules).
"""

from __future__ import annotations

import enum
import sys
import types
from dataclasses import dataclass, field

import numpy as np


class ERROR_CODE(enum.Enum):  # noqa: N801 - the SDK's name
    SUCCESS = 0
    CAMERA_NOT_DETECTED = 1
    CAMERA_NOT_READY = 2
    INVALID_SVO_FILE = 3
    END_OF_SVOFILE_REACHED = 4
    FAILURE = 5


class RESOLUTION(enum.Enum):
    HD2K = (2208, 1242)
    HD1080 = (1920, 1080)
    HD1200 = (1920, 1200)
    HD720 = (1280, 720)
    SVGA = (960, 600)
    VGA = (672, 376)


DEPTH_MODE = enum.Enum("DEPTH_MODE", "PERFORMANCE QUALITY ULTRA NEURAL NEURAL_PLUS")
UNIT = enum.Enum("UNIT", "MILLIMETER METER")
VIEW = enum.Enum("VIEW", "LEFT RIGHT")
MEASURE = enum.Enum("MEASURE", "DEPTH XYZ")
TIME_REFERENCE = enum.Enum("TIME_REFERENCE", "IMAGE CURRENT")


@dataclass
class _Size:
    width: int
    height: int


@dataclass
class CameraParameters:
    fx: float
    fy: float
    cx: float
    cy: float
    image_size: _Size
    disto: list = field(default_factory=lambda: [0.0] * 12)


@dataclass
class DeviceProperties:
    serial_number: int
    camera_model: str = "ZED 2i"


class InitParameters:
    def __init__(self) -> None:
        self.camera_resolution = RESOLUTION.HD720
        self.camera_fps = 30
        self.depth_mode = DEPTH_MODE.PERFORMANCE
        self.coordinate_units = UNIT.MILLIMETER
        self.depth_minimum_distance = -1.0
        self.depth_maximum_distance = -1.0
        self.svo_real_time_mode = False
        self.serial = None
        self.svo = None

    def set_from_serial_number(self, serial: int) -> None:
        self.serial = int(serial)

    def set_from_svo_file(self, path: str) -> None:
        self.svo = str(path)


class RuntimeParameters:
    pass


class Mat:
    def __init__(self) -> None:
        self._data = None

    def get_data(self) -> np.ndarray:
        return self._data


class Timestamp:
    def __init__(self, ns: int) -> None:
        self._ns = ns

    def get_nanoseconds(self) -> int:
        return self._ns


# What the fake "hardware" holds: connected serials, SVO files (path -> (serial, n_frames)).
STATE = types.SimpleNamespace(devices=[], svo_files={}, opened=[], fail_grab_after=None)


class Camera:
    @staticmethod
    def get_device_list() -> list[DeviceProperties]:
        return [DeviceProperties(s) for s in STATE.devices]

    def __init__(self) -> None:
        self._init = None
        self._n = 0
        self._frames = None
        self._serial = 0

    def open(self, init: InitParameters) -> ERROR_CODE:
        if init.coordinate_units != UNIT.METER:
            raise AssertionError("the backend must ask for metres")
        if init.svo is not None:
            if init.svo not in STATE.svo_files:
                return ERROR_CODE.INVALID_SVO_FILE
            self._serial, self._frames = STATE.svo_files[init.svo]
        elif init.serial in STATE.devices:
            self._serial = init.serial
        else:
            return ERROR_CODE.CAMERA_NOT_DETECTED
        self._init = init
        STATE.opened.append(self)
        return ERROR_CODE.SUCCESS

    def _size(self) -> tuple[int, int]:
        return self._init.camera_resolution.value

    def get_camera_information(self):
        w, h = self._size()
        left = CameraParameters(fx=0.5 * w, fy=0.5 * w, cx=w / 2 - 0.5, cy=h / 2 - 0.5, image_size=_Size(w, h))
        calibration = types.SimpleNamespace(left_cam=left)
        configuration = types.SimpleNamespace(calibration_parameters=calibration, resolution=_Size(w, h))
        return types.SimpleNamespace(serial_number=self._serial, camera_configuration=configuration)

    def grab(self, runtime: RuntimeParameters) -> ERROR_CODE:
        if STATE.fail_grab_after is not None and self._n >= STATE.fail_grab_after:
            return ERROR_CODE.CAMERA_NOT_DETECTED
        if self._frames is not None and self._n >= self._frames:
            return ERROR_CODE.END_OF_SVOFILE_REACHED
        self._n += 1
        return ERROR_CODE.SUCCESS

    def retrieve_image(self, mat: Mat, view: VIEW) -> ERROR_CODE:
        w, h = self._size()
        bgra = np.zeros((h, w, 4), np.uint8)
        bgra[..., 0] = 10  # blue
        bgra[..., 1] = 20  # green
        bgra[..., 2] = 30  # red
        bgra[..., 3] = 255
        bgra[0, 0, 2] = self._n % 256
        mat._data = bgra
        return ERROR_CODE.SUCCESS

    def retrieve_measure(self, mat: Mat, measure: MEASURE) -> ERROR_CODE:
        w, h = self._size()
        depth = np.full((h, w), 1.25, np.float32)
        depth[0, :] = np.nan   # occluded
        depth[1, :] = -np.inf  # too close
        depth[2, :] = np.inf   # too far
        mat._data = depth
        return ERROR_CODE.SUCCESS

    def get_timestamp(self, reference: TIME_REFERENCE) -> Timestamp:
        return Timestamp(1_700_000_000_000_000_000 + self._n * 33_333_333)

    def close(self) -> None:
        if self in STATE.opened:
            STATE.opened.remove(self)


def install_fake_pyzed(monkeypatch) -> types.ModuleType:
    """Make ``import pyzed.sl`` return this fake for the rest of the test; returns the fake module."""
    STATE.devices, STATE.svo_files, STATE.opened, STATE.fail_grab_after = [], {}, [], None
    module = sys.modules[__name__]
    package = types.ModuleType("pyzed")
    package.sl = module
    monkeypatch.setitem(sys.modules, "pyzed", package)
    monkeypatch.setitem(sys.modules, "pyzed.sl", module)
    return module
