"""The camera contract every backend (RealSense, ZED, simulator, bag) implements, and its factory.

A camera yields :class:`Frame` objects: RGB color, depth in metres aligned to the color image, the
color intrinsics as a :class:`robopin.geometry.CameraModel`, a host-clock timestamp, the device serial
and a frame index. Backends subclass :class:`Camera` and implement four small hooks; the public
``connect/read/async_read/disconnect`` behaviour (state checks, warm-up, the background reader thread,
timeouts) lives here once. ``make_camera(config)`` imports a backend module only when it is used, so
``pyrealsense2`` or ``pyzed`` is needed only by whoever configures that camera.

Depth convention: ``depth_m`` is float32 metres; **invalid pixels are NaN** (never 0). NaN cannot be
mistaken for a valid distance by arithmetic and ``np.nanmedian`` skips it; the ROS edge writes 0 for
NaN in 16UC1 millimetres, as realsense-ros does.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from robopin.registry import RegisteredBackend, RegisteredConfig, Registry, UnknownTypeError
from robopin.settings import setting

if TYPE_CHECKING:
    from robopin.geometry import CameraModel

logger = logging.getLogger(__name__)

__all__ = [
    "CAMERAS",
    "Camera",
    "CameraBackendUnavailableError",
    "CameraConfig",
    "CameraConfigError",
    "CameraDescription",
    "CameraError",
    "CameraNotFoundError",
    "CameraReadError",
    "CameraTimeoutError",
    "DeviceAlreadyConnectedError",
    "DeviceNotConnectedError",
    "Frame",
    "StreamProfile",
    "UnknownCameraTypeError",
    "camera_class",
    "camera_config_class",
    "camera_config_from_dict",
    "make_camera",
]


# --------------------------------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------------------------------


class CameraError(RuntimeError):
    """Base class of every camera failure; catch this to handle any of them."""


class CameraConfigError(CameraError, ValueError):
    """A camera configuration value is unusable (the message names the field, the value and what is expected)."""


class DeviceNotConnectedError(CameraError):
    """An operation needs a connected camera and this one is not connected."""


class DeviceAlreadyConnectedError(CameraError):
    """``connect()`` was called on a camera that is already connected."""


class CameraNotFoundError(CameraError):
    """No device (or recording) matches the configured serial number or file."""


class CameraTimeoutError(CameraError, TimeoutError):
    """No new frame arrived within the allowed time."""


class CameraReadError(CameraError):
    """The device or file failed while delivering a frame (unplugged, corrupt data, end of file)."""


class CameraBackendUnavailableError(CameraError, ImportError):
    """The SDK a backend needs (pyrealsense2, pyzed.sl, rosbags) cannot be imported here."""


class UnknownCameraTypeError(CameraError, UnknownTypeError):
    """A configuration names a camera type no backend is registered for."""


# --------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Frame:
    """One capture of one view: color, aligned depth, intrinsics and when it was taken.

    Attributes:
        color: uint8 array (H, W, 3), RGB order.
        depth_m: float32 array in metres, NaN where the sensor has no valid measurement; ``None`` for a
            color-only camera. Registered to ``color`` pixel for pixel (H, W) unless ``depth_intrinsics``
            is given: then it is the depth imager's own image, of that model's size.
        intrinsics: the pinhole model of the color image (its width/height equal the image's).
        timestamp_s: capture time on the cell's clock, so frames of different cameras and the arm state can be
            compared: a real camera's on the host's wall clock (``time.time()`` seconds, the clock ROS stamps use
            by default), a simulated one's on the simulator's (what ``use_sim_time`` nodes stamp with).
        serial: device serial number (or the recording's name for file playback).
        index: frame counter of this camera since connect, starting at 0 (gaps mean dropped frames
            where the backend can see them).
        camera_name: the configured view name (``CameraConfig.name``); optical frame ``<name>_optical``.
        depth_intrinsics: None (depth aligned to color), or the depth imager's pinhole model when depth
            was left unaligned (a RealSense with ``align_depth: false``, as realsense-ros publishes
            ``depth/image_rect_raw``): registering every frame costs the camera process ~4 ms a 640x480
            D435 frame, while a consumer that needs color-registered depth at a few points aligns the one
            frame it uses (``aligned_depth_m()``, or projection_node's ``unaligned_depth``).
        T_color_depth: with ``depth_intrinsics``, the 4x4 transform taking points of the depth optical
            frame into the color optical frame (metres).
    """

    color: np.ndarray
    depth_m: np.ndarray | None
    intrinsics: CameraModel
    timestamp_s: float
    serial: str = ""
    index: int = 0
    camera_name: str = ""
    depth_intrinsics: CameraModel | None = None
    T_color_depth: np.ndarray | None = None

    def __post_init__(self) -> None:
        color = self.color
        ok_color = isinstance(color, np.ndarray) and color.dtype == np.uint8 and color.ndim == 3
        if not ok_color or color.shape[2] != 3:
            raise ValueError(
                "Frame.color must be a uint8 array of shape (H, W, 3), got "
                f"{type(color).__name__} {getattr(color, 'dtype', '?')} {getattr(color, 'shape', '?')}"
            )
        if (self.depth_intrinsics is None) != (self.T_color_depth is None):
            raise ValueError("Frame.depth_intrinsics and Frame.T_color_depth come together (unaligned depth) "
                             "or not at all (depth aligned to color)")
        if self.T_color_depth is not None:
            T = self.T_color_depth
            if not (isinstance(T, np.ndarray) and T.shape == (4, 4) and np.all(np.isfinite(T))):
                raise ValueError(f"Frame.T_color_depth must be a finite 4x4 array, got {getattr(T, 'shape', T)!r}")
        if self.depth_m is not None:
            depth = self.depth_m
            if self.depth_intrinsics is None:
                shape, what = color.shape[:2], "aligned to color"
            else:
                shape, what = (self.depth_intrinsics.height, self.depth_intrinsics.width), "the depth intrinsics"
            ok_depth = isinstance(depth, np.ndarray) and depth.dtype == np.float32
            if not ok_depth or depth.shape != shape:
                raise ValueError(
                    f"Frame.depth_m must be float32 of shape {shape} ({what}), got "
                    f"{type(depth).__name__} {getattr(depth, 'dtype', '?')} {getattr(depth, 'shape', '?')}"
                )
        if not math.isfinite(self.timestamp_s):
            raise ValueError(f"Frame.timestamp_s must be finite, got {self.timestamp_s!r}")
        width = getattr(self.intrinsics, "width", None)
        height = getattr(self.intrinsics, "height", None)
        if (width, height) != (color.shape[1], color.shape[0]):
            raise ValueError(
                f"Frame.intrinsics are for {width}x{height} but the color image is "
                f"{color.shape[1]}x{color.shape[0]}"
            )

    @property
    def height(self) -> int:
        return int(self.color.shape[0])

    @property
    def width(self) -> int:
        return int(self.color.shape[1])

    @property
    def optical_frame_id(self) -> str:
        """The TF frame the intrinsics refer to: ``<camera_name>_optical``."""
        return f"{self.camera_name or 'camera'}_optical"

    @property
    def depth_aligned(self) -> bool:
        """True when ``depth_m`` is registered to the color image (or there is no depth)."""
        return self.depth_intrinsics is None

    def aligned_depth_m(self) -> np.ndarray | None:
        """Depth registered to the color image: ``depth_m`` itself, or unaligned depth aligned now
        (``robopin.geometry.align_depth_to_color``, nearest surface winning, as ``rs.align`` does)."""
        if self.depth_m is None or self.depth_intrinsics is None:
            return self.depth_m
        from robopin.geometry.depth import align_depth_to_color

        return align_depth_to_color(self.depth_m, self.depth_intrinsics, self.intrinsics, self.T_color_depth)


@dataclasses.dataclass(frozen=True)
class StreamProfile:
    """One stream mode a device offers (for ``find_cameras`` and ``robopin cameras list``)."""

    stream: str  # "color" | "depth" | ...
    width: int
    height: int
    fps: int
    format: str  # SDK format name, e.g. "rgb8", "z16"

    def __str__(self) -> str:
        return f"{self.stream} {self.width}x{self.height}@{self.fps} {self.format}"


@dataclasses.dataclass(frozen=True)
class CameraDescription:
    """A device or source a backend can open, as found by ``find_cameras()``."""

    type: str
    serial: str
    name: str = ""
    firmware: str = ""
    profiles: tuple[StreamProfile, ...] = ()


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


# Type name -> config and camera class; each backend module is imported only when its type is used.
CAMERAS: Registry[CameraConfig, Camera] = Registry(
    "camera", unknown_error=UnknownCameraTypeError, config_error=CameraConfigError,
    unavailable_error=CameraBackendUnavailableError,
)
CAMERAS.declare("realsense", "robopin.cameras.realsense")
CAMERAS.declare("zed", "robopin.cameras.zed")
CAMERAS.declare("bag", "robopin.cameras.bag")
CAMERAS.declare("sim", "robopin.sim.camera")


@dataclasses.dataclass
class CameraConfig(RegisteredConfig, registry=CAMERAS):
    """Settings every camera shares; each backend subclasses it and sets ``type`` (its registry key).

    Attributes:
        name: view name; topics go under ``/cameras/<name>/`` and the optical frame is ``<name>_optical``.
        width, height, fps: requested color (and depth) stream mode.
        warmup_s: how long ``connect(warmup=True)`` reads and discards frames so auto-exposure settles.
        read_timeout_s: the longest one blocking ``read()`` waits for the device before
            :class:`CameraTimeoutError`.
    """

    type: ClassVar[str] = ""

    name: str = setting("camera", "camera view name: topics /cameras/<name>/..., frame <name>_optical")
    width: int = setting(640, "color (and depth) stream width, pixels", min=1)
    height: int = setting(480, "color (and depth) stream height, pixels", min=1)
    fps: int = setting(30, "stream frame rate, frames per second", min=1)
    warmup_s: float = 0.0
    read_timeout_s: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not self.name.replace("_", "a").isalnum():
            raise CameraConfigError(
                f"camera name must be a non-empty identifier (letters, digits, '_'), got {self.name!r}"
            )
        for field in ("width", "height", "fps"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise CameraConfigError(f"camera {self.name!r}: {field} must be a positive integer, got {value!r}")
        if not (math.isfinite(self.warmup_s) and self.warmup_s >= 0):
            raise CameraConfigError(f"camera {self.name!r}: warmup_s must be >= 0 s, got {self.warmup_s!r}")
        if not (math.isfinite(self.read_timeout_s) and self.read_timeout_s > 0):
            raise CameraConfigError(
                f"camera {self.name!r}: read_timeout_s must be > 0 s, got {self.read_timeout_s!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return a plain dict (with ``type``) that :func:`camera_config_from_dict` turns back into this."""
        out: dict[str, Any] = {"type": self.type}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            out[field.name] = list(value) if isinstance(value, tuple) else value
        return out


# --------------------------------------------------------------------------------------------------
# The abstract camera
# --------------------------------------------------------------------------------------------------


class Camera(abc.ABC, RegisteredBackend, registry=CAMERAS):
    """Base class of all cameras: state checks, warm-up and the background reader live here.

    Subclasses implement ``find_cameras`` and the hooks ``_connect``, ``_read`` (blocking, one new
    frame or an exception, given a timeout), ``_disconnect``. ``read()`` and the reader thread behind
    ``async_read()`` share one lock, so the SDK is never called from two threads at once.
    """

    config_class: ClassVar[type[CameraConfig]] = CameraConfig

    def __init__(self, config: CameraConfig) -> None:
        if not isinstance(config, self.config_class):
            raise TypeError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, got {type(config).__name__}"
            )
        self.config = config
        self._connected = False
        self._io_lock = threading.Lock()
        # Reader thread state (async_read): the latest frame, who waits for it, and why it stopped.
        self._latest: Frame | None = None
        self._latest_seq = 0
        self._returned_seq = 0
        self._reader_error: BaseException | None = None
        self._new_frame = threading.Condition()
        self._reader_thread: threading.Thread | None = None
        self._stop_reader = threading.Event()

    def __repr__(self) -> str:
        config = getattr(self, "config", None)
        return f"{type(self).__name__}({getattr(config, 'name', '?')!r})"

    # --- backend hooks ----------------------------------------------------------------------------

    @staticmethod
    @abc.abstractmethod
    def find_cameras() -> list[CameraDescription]:
        """Return the devices of this backend that are present now (empty list if none)."""

    @abc.abstractmethod
    def _connect(self) -> None:
        """Open the device or file; raise CameraNotFoundError if it is absent."""

    @abc.abstractmethod
    def _read(self, timeout_s: float) -> Frame:
        """Block until the next frame (at most ``timeout_s``) and return it."""

    @abc.abstractmethod
    def _disconnect(self) -> None:
        """Release the device; must not raise if the device has already gone."""

    # --- public API -------------------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self, warmup: bool = True) -> None:
        """Open the camera; with ``warmup``, read and discard frames for ``config.warmup_s``."""
        if self._connected:
            raise DeviceAlreadyConnectedError(f"{self} is already connected")
        self._connect()
        self._connected = True
        self._reader_error = None
        self._returned_seq = self._latest_seq
        if warmup and self.config.warmup_s > 0:
            deadline = time.monotonic() + self.config.warmup_s
            while time.monotonic() < deadline:
                self.read()
        logger.info("%s connected.", self)

    def read(self) -> Frame:
        """Block until the camera delivers its next frame and return it.

        Use either ``read()`` or ``async_read()`` on one camera: once the reader thread behind
        ``async_read`` runs, the two take turns at the device and each sees only some frames.
        """
        self._require_connected()
        with self._io_lock:
            return self._read(self.config.read_timeout_s)

    def async_read(self, timeout_s: float = 0.2) -> Frame:
        """Return the newest frame not returned before, waiting at most ``timeout_s`` for one.

        The first call starts a background thread that reads continuously, so the device's queue
        never fills while the caller is busy; later calls return at once when a frame is waiting.
        """
        self._require_connected()
        if not (timeout_s >= 0):
            raise ValueError(f"timeout_s must be >= 0 s, got {timeout_s!r}")
        if self._reader_thread is None or not self._reader_thread.is_alive():
            self._start_reader()
        deadline = time.monotonic() + timeout_s
        with self._new_frame:
            while self._latest_seq == self._returned_seq:
                if self._reader_error is not None:
                    error = self._reader_error
                    raise CameraReadError(f"{self} reader stopped: {error}") from error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CameraTimeoutError(f"{self}: no new frame within {timeout_s * 1000:.0f} ms")
                self._new_frame.wait(remaining)
            self._returned_seq = self._latest_seq
            assert self._latest is not None
            return self._latest

    def disconnect(self) -> None:
        """Stop the reader thread and release the device."""
        self._require_connected()
        self._stop_reader_thread()
        try:
            with self._io_lock:
                self._disconnect()
        finally:
            self._connected = False
        logger.info("%s disconnected.", self)

    def __enter__(self) -> Camera:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._connected:
            self.disconnect()

    def __del__(self) -> None:  # best effort: a forgotten camera must not keep a device busy
        try:
            if getattr(self, "_connected", False):
                self.disconnect()
        except Exception:  # interpreter shutdown, device already gone
            pass

    # --- internals --------------------------------------------------------------------------------

    def _require_connected(self) -> None:
        if not self._connected:
            raise DeviceNotConnectedError(f"{self} is not connected; call connect() first")

    def _start_reader(self) -> None:
        self._stop_reader.clear()
        self._reader_error = None
        self._reader_thread = threading.Thread(target=self._reader_loop, name=f"{self}-reader", daemon=True)
        self._reader_thread.start()

    def _stop_reader_thread(self) -> None:
        if self._reader_thread is not None:
            self._stop_reader.set()
            self._reader_thread.join(timeout=self.config.read_timeout_s + 1.0)
            self._reader_thread = None

    def _reader_loop(self) -> None:
        # A short per-call timeout keeps the loop responsive to stop requests; a timeout is not an
        # error here (a slow device simply has no frame yet), anything else ends the thread and is
        # re-raised to the next async_read caller.
        poll_s = min(self.config.read_timeout_s, 0.1)
        while not self._stop_reader.is_set():
            try:
                with self._io_lock:
                    frame = self._read(poll_s)
            except CameraTimeoutError:
                continue
            except Exception as exc:  # handed to the caller of async_read
                with self._new_frame:
                    self._reader_error = exc
                    self._new_frame.notify_all()
                return
            with self._new_frame:
                self._latest = frame
                self._latest_seq += 1
                self._new_frame.notify_all()


# --------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------

def camera_config_class(type_name: str) -> type[CameraConfig]:
    """Return the config dataclass registered for ``type_name`` (importing its module if needed)."""
    return CAMERAS.config_class(type_name)


def camera_class(type_name: str) -> type[Camera]:
    """Return the Camera subclass for ``type_name`` (importing its module)."""
    return CAMERAS.backend_class(type_name)


def camera_config_from_dict(data: Mapping[str, Any]) -> CameraConfig:
    """Build a config from a YAML-style mapping with a ``type`` key; unknown keys are an error."""
    # YAML gives lists; the configs hold tuples (frozen, comparable, hashable).
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in dict(data).items()}
    return CAMERAS.config_from_dict(values)


def make_camera(config: CameraConfig | Mapping[str, Any]) -> Camera:
    """Create (not connect) the camera a config describes, importing only that backend."""
    if not isinstance(config, CameraConfig):
        config = camera_config_from_dict(config)
    return CAMERAS.build(config)
