"""Synthetic RGB-D views and RealSense software devices: test fixtures and demo recordings made on the spot.

``SyntheticScene`` renders a tilted plane with a textured color image (known depth at every pixel, so
alignment and deprojection can be checked against the truth). ``SoftwareRealSense`` builds a real
``pyrealsense2.software_device`` (a depth and a color sensor with their intrinsics, depth units and
extrinsics) and pushes such frames through the SDK, optionally through ``rs.recorder`` into a ``.db3``
file that :class:`robopin.cameras.realsense.RealSenseCamera` can play back. Nothing here is a mock: the
frames travel through librealsense itself.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from robopin.cameras.base import CameraBackendUnavailableError
from robopin.geometry.camera_model import CameraModel

__all__ = ["SoftwareRealSense", "SyntheticScene", "write_realsense_recording"]


@dataclasses.dataclass(frozen=True)
class SyntheticScene:
    """A plane ``z = distance_m + slope_x * x`` in front of the camera, and a moving stripe texture.

    ``depth_m(model)`` is exact for that plane seen through ``model``; ``color(model, index)`` encodes
    the frame index in pixel (0, 0) (as ``index % 256`` in the red channel) so tests can tell frames apart.
    """

    distance_m: float = 1.0
    slope_x: float = 0.0

    def depth_m(self, model: CameraModel, T_camera_scene: np.ndarray | None = None) -> np.ndarray:
        """Exact z-depth (float32, metres, NaN where the plane is not in front) at every pixel centre.

        The plane is defined in the scene frame; ``T_camera_scene`` maps scene points into the camera
        (identity by default). For a software RealSense the scene frame is the depth camera's, so the
        truth for the color camera is ``depth_m(color_model, T_color_depth)``.
        """
        u, v = model.pixel_centres()
        ray = model.pixel_to_ray(u, v)
        T = np.eye(4) if T_camera_scene is None else np.asarray(T_camera_scene, dtype=np.float64)
        # Plane n_s . p_s = d with n_s = (-slope, 0, 1); in the camera n_c = R n_s and the offset gains
        # n_c . t; along the ray p = z * ray, so z = (d + n_c . t) / (n_c . ray).
        normal = T[:3, :3] @ np.array([-self.slope_x, 0.0, 1.0])
        offset = self.distance_m + float(normal @ T[:3, 3])
        with np.errstate(divide="ignore", invalid="ignore"):
            z = offset / (ray @ normal)
        z[~np.isfinite(z) | (z <= 0)] = np.nan
        return z.astype(np.float32)

    def color(self, model: CameraModel, index: int = 0) -> np.ndarray:
        """An RGB uint8 image with vertical stripes that move one pixel per frame."""
        columns = (np.arange(model.width) + index) % 32
        rows = np.arange(model.height)[:, None]
        image = np.empty((model.height, model.width, 3), dtype=np.uint8)
        image[..., 0] = (columns[None, :] * 8) % 256
        image[..., 1] = (rows * 4) % 256
        image[..., 2] = 128
        image[0, 0, 0] = index % 256
        return image

    def depth_mm_u16(self, model: CameraModel, depth_units_m: float = 0.001) -> np.ndarray:
        """The plane as a z16 image in ``depth_units_m`` (0 = no data), as a RealSense delivers it."""
        depth = self.depth_m(model)
        raw = np.round(np.nan_to_num(depth, nan=0.0) / depth_units_m)
        return np.clip(raw, 0, 65535).astype(np.uint16)


def _import_rs() -> Any:
    try:
        import pyrealsense2 as rs
    except ImportError as exc:
        raise CameraBackendUnavailableError(
            f"pyrealsense2 cannot be imported ({exc}); install pyrealsense2 (and Debian libusb-1.0-0)"
        ) from exc
    return rs


class SoftwareRealSense:
    """A librealsense software device with a z16 depth and an rgb8 color sensor.

    Call :meth:`start` with a callback/syncer target, then :meth:`push` one depth+color pair per frame.
    With ``record_to``, everything pushed is also written by ``rs.recorder`` to that ``.db3`` file,
    which is complete once :meth:`close` has run.
    """

    def __init__(
        self,
        color_model: CameraModel,
        depth_model: CameraModel | None = None,
        *,
        serial: str = "SW0001",
        fps: int = 30,
        depth_units_m: float = 0.001,
        T_color_depth: np.ndarray | None = None,
        record_to: str | Path | None = None,
    ) -> None:
        rs = self._rs = _import_rs()
        self.color_model = color_model
        self.depth_model = depth_model or color_model
        self.depth_units_m = depth_units_m
        self.serial = serial
        self._device = rs.software_device()
        self._device.register_info(rs.camera_info.serial_number, serial)
        self._device.register_info(rs.camera_info.name, "Intel RealSense software device")
        self._depth_sensor = self._device.add_sensor("Stereo Module")
        self._color_sensor = self._device.add_sensor("RGB Camera")
        self._depth_profile = self._depth_sensor.add_video_stream(
            self._stream(rs.stream.depth, 0, self.depth_model, fps, bpp=2, fmt=rs.format.z16), True
        ).as_video_stream_profile()
        self._depth_sensor.add_read_only_option(rs.option.depth_units, depth_units_m)
        self._color_profile = self._color_sensor.add_video_stream(
            self._stream(rs.stream.color, 1, self.color_model, fps, bpp=3, fmt=rs.format.rgb8), True
        ).as_video_stream_profile()
        # librealsense extrinsics map depth-frame points into the color frame: p_c = R p_d + t, with R
        # stored column-major.
        T = np.eye(4) if T_color_depth is None else np.asarray(T_color_depth, dtype=np.float64)
        extrinsics = rs.extrinsics()
        extrinsics.rotation = [float(x) for x in T[:3, :3].T.reshape(-1)]
        extrinsics.translation = [float(x) for x in T[:3, 3]]
        self._depth_profile.register_extrinsics_to(self._color_profile, extrinsics)
        self._device.create_matcher(rs.matchers.dlr_c)
        self._recorder = rs.recorder(str(record_to), self._device) if record_to is not None else None
        self._open_sensors: list[Any] = []
        self._frame_number = 0
        self._stalled: str | None = None  # None, "restart" (cleared by the next start) or "forever"

    def _stream(self, kind: Any, uid: int, model: CameraModel, fps: int, *, bpp: int, fmt: Any) -> Any:
        rs = self._rs
        intrinsics = rs.intrinsics()
        intrinsics.width, intrinsics.height = model.width, model.height
        intrinsics.fx, intrinsics.fy, intrinsics.ppx, intrinsics.ppy = model.fx, model.fy, model.cx, model.cy
        intrinsics.model = rs.distortion.none
        intrinsics.coeffs = [0.0] * 5
        stream = rs.video_stream()
        stream.type, stream.index, stream.uid = kind, 0, uid
        stream.width, stream.height, stream.fps = model.width, model.height, fps
        stream.bpp, stream.fmt = bpp, fmt
        stream.intrinsics = intrinsics
        return stream

    def start(self, target: Any) -> None:
        """Open both sensors and start streaming into ``target`` (an ``rs.syncer`` or a callback)."""
        # Through the recorder's sensors when recording, so the recorder sees the stream start and frames.
        owner = self._recorder if self._recorder is not None else self._device
        sensors = owner.query_sensors()
        by_name = {sensor.name: sensor for sensor in sensors}
        depth, color = by_name["Stereo Module"], by_name["RGB Camera"]
        depth.open(self._depth_profile)
        color.open(self._color_profile)
        depth.start(target)
        color.start(target)
        self._open_sensors = [depth, color]
        if self._stalled == "restart":
            self._stalled = None

    def stall(self, until: str = "restart") -> None:
        """Stop delivering frames, as a device whose stream hangs does: pushed frames are dropped until
        the sensors are started again (``until="restart"``), or until :meth:`resume` (``"forever"``)."""
        if until not in ("restart", "forever"):
            raise ValueError(f"until must be 'restart' or 'forever', got {until!r}")
        self._stalled = until

    def resume(self) -> None:
        """End a stall (frames pushed from now on are delivered)."""
        self._stalled = None

    def pipeline(self) -> SoftwareRealSensePipeline:
        """A pipeline over this device (librealsense 2.59 keeps software devices out of ``rs.context``
        queries, so ``rs.pipeline`` cannot find one): what ``rs.pipeline`` does with a device, opening
        both sensors into an ``rs.syncer`` and waiting on it."""
        return SoftwareRealSensePipeline(self)

    def push(self, color: np.ndarray, depth_raw: np.ndarray, timestamp_s: float | None = None) -> int:
        """Push one color (RGB uint8) and one depth (uint16 in depth units) frame; return their number."""
        rs = self._rs
        if color.shape != (self.color_model.height, self.color_model.width, 3) or color.dtype != np.uint8:
            raise ValueError(f"color must be uint8 {self.color_model.height}x{self.color_model.width}x3, "
                             f"got {color.dtype} {color.shape}")
        depth_shape = (self.depth_model.height, self.depth_model.width)
        if depth_raw.shape != depth_shape or depth_raw.dtype != np.uint16:
            raise ValueError(f"depth_raw must be uint16 {self.depth_model.height}x{self.depth_model.width}, "
                             f"got {depth_raw.dtype} {depth_raw.shape}")
        stamp_ms = (time.time() if timestamp_s is None else timestamp_s) * 1000.0
        number = self._frame_number
        self._frame_number += 1
        if self._stalled is not None or not self._open_sensors:
            return number  # numbered but never delivered, like a frame a hung device loses
        for sensor, profile, pixels, bpp in (
            (self._depth_sensor, self._depth_profile, np.ascontiguousarray(depth_raw), 2),
            (self._color_sensor, self._color_profile, np.ascontiguousarray(color), 3),
        ):
            frame = rs.software_video_frame()
            frame.pixels = pixels
            frame.stride = pixels.shape[1] * bpp
            frame.bpp = bpp
            frame.timestamp = stamp_ms
            frame.domain = rs.timestamp_domain.system_time
            frame.frame_number = number
            frame.profile = profile
            if bpp == 2:
                frame.depth_units = self.depth_units_m
            sensor.on_video_frame(frame)
        return number

    def close_sensors(self) -> None:
        """Stop and close both sensors (they can be started again)."""
        for sensor in self._open_sensors:
            sensor.stop()
            sensor.close()
        self._open_sensors = []

    def close(self) -> None:
        """Stop streaming and finish the recording (the file is complete after this)."""
        self.close_sensors()
        # The recorder writes its file when the last reference to it goes away.
        self._recorder = None


class SoftwareRealSensePipeline:
    """The ``rs.pipeline`` calls the RealSense camera makes (start, try_wait_for_frames, stop), over a
    :class:`SoftwareRealSense` with a real ``rs.syncer`` pairing its frames."""

    def __init__(self, device: SoftwareRealSense) -> None:
        self.device = device
        self._syncer: Any = None
        self.starts = 0

    def start(self, _config: Any = None) -> None:
        self._syncer = self.device._rs.syncer()
        self.device.start(self._syncer)
        self.starts += 1

    def try_wait_for_frames(self, timeout_ms: int) -> tuple[bool, Any]:
        if self._syncer is None:
            raise RuntimeError("try_wait_for_frames cannot be called before start()")
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            # The matcher can hand out a lone frame before it pairs them; the pipeline waits for a pair.
            remaining = max(1, int((deadline - time.monotonic()) * 1000))
            ok, frameset = self._syncer.try_wait_for_frames(remaining)
            if ok and frameset.size() >= 2:
                return True, frameset
            if time.monotonic() >= deadline:
                return False, None

    def stop(self) -> None:
        self.device.close_sensors()
        self._syncer = None

    def hardware_reset(self) -> None:
        # librealsense: "hardware_reset is not implemented for this device!" (a software device).
        self.device._device.hardware_reset()


def write_realsense_recording(
    path: str | Path,
    color_model: CameraModel,
    n_frames: int,
    *,
    scene: SyntheticScene | None = None,
    depth_model: CameraModel | None = None,
    fps: int = 30,
    serial: str = "SW0001",
    T_color_depth: np.ndarray | None = None,
    start_time_s: float = 1_700_000_000.0,
    paced: bool = False,
) -> Path:
    """Record ``n_frames`` of a synthetic scene from a software RealSense into ``path`` (a ``.db3`` file).

    Frames are stamped ``start_time_s + i / fps``; pixel (0, 0) of color frame ``i`` has red = ``i % 256``.
    Real-time playback follows the host time at which frames were *recorded*, not their stamps: pass
    ``paced=True`` to push at ``fps`` (takes ``n_frames / fps`` seconds) for a recording that plays
    back at that rate; unpaced recordings suit frame-by-frame playback (``playback_realtime=False``).
    """
    rs = _import_rs()
    path = Path(path)
    scene = scene or SyntheticScene()
    device = SoftwareRealSense(
        color_model, depth_model, serial=serial, fps=fps, T_color_depth=T_color_depth, record_to=path
    )
    syncer = rs.syncer()
    device.start(syncer)
    depth_raw = scene.depth_mm_u16(device.depth_model, device.depth_units_m)
    period_s = 1.0 / fps
    next_push = time.monotonic()
    for i in range(n_frames):
        if paced:
            time.sleep(max(0.0, next_push - time.monotonic()))
            next_push += period_s
        device.push(scene.color(color_model, i), depth_raw, start_time_s + i * period_s)
        syncer.try_wait_for_frames(math.ceil(period_s * 1000) + 100)
    device.close()
    del device
    return path
