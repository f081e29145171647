"""Intel RealSense backend (D400 series incl. D405) on ``pyrealsense2``: live devices and recorded-file playback.

librealsense 2.59 (the pinned pyrealsense2) does not support the L515: the SDK's 2.55.1 release notes
say "Removed support for L515, SR300" (librealsense PR #12002 "Remove L500"), and an L515 then shows
as no device at all (librealsense issue #12960). 2.54.2 is the last release that drives one.

Depth is filtered (optional SDK spatial / temporal / hole-filling filters), aligned to the color stream
with ``rs.align`` (or left in the depth imager's frame with ``align_depth: false``), scaled by the
device's depth units to metres, and zero (no data) becomes NaN. The presence of the requested serial is
checked with ``query_devices()`` before the pipeline starts, because ``pipeline.start()`` with no
camera blocks for 15 s.

A live pipeline that stops delivering frames (the "Frame didn't arrive" hang users of realsense-ros
and librealsense report) is restarted in place after ``stall_restart_s``; after
``hardware_reset_after`` restarts that brought no frame, the device gets ``hardware_reset()`` and is
waited for (``reconnect_timeout_s``) before the next restart. realsense-ros itself resets the hardware
at start (``initial_reset``) and when the device is reported removed, then waits ``reconnect_timeout``
(6 s) between device queries (realsense_node_factory.cpp); it has no watchdog for a pipeline that
stays connected but silent, which is the case handled here. The camera object, its reader thread and
the node around it stay up throughout.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import time
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np

from robopin.cameras.base import (
    Camera,
    CameraBackendUnavailableError,
    CameraConfig,
    CameraDescription,
    CameraError,
    CameraNotFoundError,
    CameraReadError,
    CameraTimeoutError,
    Frame,
    StreamProfile,
)
from robopin.geometry.camera_model import CameraModel
from robopin.settings import check_ranges, setting

__all__ = [
    "REALSENSE_FILTERS",
    "ProcessedFrameset",
    "RealSenseCamera",
    "RealSenseCameraConfig",
    "RealSenseFrameProcessor",
]

logger = logging.getLogger(__name__)

# Filters in the order librealsense recommends applying them (post-processing doc): spatial edge-
# preserving smoothing, then temporal smoothing, then hole filling last so it fills what remains.
REALSENSE_FILTERS = ("spatial", "temporal", "hole_filling")


def import_pyrealsense2() -> Any:
    """Import ``pyrealsense2`` or raise :class:`CameraBackendUnavailableError` saying how to get it."""
    try:
        import pyrealsense2 as rs
    except ImportError as exc:
        raise CameraBackendUnavailableError(
            f"the RealSense backend needs pyrealsense2 ({exc}); install it with "
            "`pip install pyrealsense2` (Linux also needs Debian libusb-1.0-0)"
        ) from exc
    return rs


@dataclasses.dataclass
class RealSenseCameraConfig(CameraConfig):
    """A RealSense device by serial number, or a recording played back as if it were one.

    ``align_depth`` false leaves depth in the depth imager's frame with its own intrinsics and the depth → color
    extrinsics (``Frame.depth_intrinsics`` / ``Frame.T_color_depth``), like realsense-ros without
    ``align_depth.enable``: a D435 frame then costs the camera process ~4 ms less, and the one consumer that
    needs registered depth aligns only the frame it uses. ``restamp`` None restamps playback, so a recording
    behaves like a live camera, and keeps device time for live cameras; hardware-clock stamps, not comparable
    across devices, are always replaced by the arrival time. Real-time playback is stamped with the host time
    at which librealsense played the frame (recorded stamp + playback offset), so a frame that waited in the
    queue shows its wait as latency.
    """

    type: ClassVar[str] = "realsense"

    serial: str = setting("", "device serial number (empty: the only connected device, an error if several)")
    playback_file: str = setting("", "a .db3 (or legacy .bag) recording played instead of a device")
    playback_realtime: bool = setting(True, "play at the recorded rate (false: each frame as fast as it is read)")
    repeat_playback: bool = setting(False, "start the recording again at its end instead of reporting the end")
    enable_depth: bool = setting(True, "stream depth (false: color-only frames)")
    align_depth: bool = setting(True, "register depth to color in every frame (rs.align)")
    depth_width: int = setting(0, "depth stream width, pixels (0: the color mode's)", min=0)
    depth_height: int = setting(0, "depth stream height, pixels (0: the color mode's)", min=0)
    filters: tuple[str, ...] = ()  # SDK post-processing filters from REALSENSE_FILTERS, applied in that order
    hole_filling_mode: int = setting(1, "0 fill from left, 1 farthest from around, 2 nearest from around", min=0,
                                     max=2)
    min_depth_m: float = setting(0.0, "nearer depth becomes NaN, metres")
    max_depth_m: float = setting(10.0, "farther depth becomes NaN, metres")
    restamp: bool | None = None  # host clock (True), device time (False), None: by source (above)
    stall_restart_s: float = setting(2.0, "seconds without a frame before a live pipeline is restarted (0: never)",
                                     min=0.0)
    hardware_reset_after: int = setting(2, "restarts in a row without a frame before a hardware reset (0: never)",
                                        min=0)
    # realsense-ros's reconnect_timeout default: 6 s.
    reconnect_timeout_s: float = setting(6.0, "seconds to wait for the device to re-enumerate after a reset", min=0.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.serial = str(self.serial)
        check_ranges(self, ValueError, prefix=f"camera {self.name!r}: ")
        if 0 < self.stall_restart_s < self.read_timeout_s:
            raise ValueError(f"camera {self.name!r}: stall_restart_s ({self.stall_restart_s}) must be 0 or at least "
                             f"read_timeout_s ({self.read_timeout_s})")
        self.filters = tuple(self.filters)
        unknown = [f for f in self.filters if f not in REALSENSE_FILTERS]
        if unknown:
            raise ValueError(f"camera {self.name!r}: unknown RealSense filter(s) {unknown}; "
                             f"expected some of {list(REALSENSE_FILTERS)}")
        if len(set(self.filters)) != len(self.filters):
            raise ValueError(f"camera {self.name!r}: filters repeat a name: {list(self.filters)}")
        if not (0.0 <= self.min_depth_m < self.max_depth_m) or math.isnan(self.max_depth_m):
            raise ValueError(f"camera {self.name!r}: need 0 <= min_depth_m < max_depth_m, got "
                             f"{self.min_depth_m!r}, {self.max_depth_m!r}")
        if self.playback_file and not Path(self.playback_file).suffix:
            raise ValueError(f"camera {self.name!r}: playback_file {self.playback_file!r} has no extension; "
                             "expected a .db3 or .bag recording")


class ProcessedFrameset(NamedTuple):
    """What :class:`RealSenseFrameProcessor` makes of one frameset (see ``Frame`` for the fields)."""

    color: np.ndarray
    depth_m: np.ndarray | None
    intrinsics: CameraModel
    depth_intrinsics: CameraModel | None = None  # None: depth_m is aligned to color
    T_color_depth: np.ndarray | None = None


class RealSenseFrameProcessor:
    """Turns one librealsense frameset into color RGB, depth in metres (aligned to color unless
    ``align_depth`` is off) and the intrinsics.

    Shared by live and playback capture (and run directly on software-device framesets in tests):
    filters → ``rs.align(color)`` → z16 × depth units → metres, no-data and out-of-range → NaN.
    Where depth and color share intrinsics and the depth → color extrinsics are the identity (a D405,
    whose color comes from the depth imager, or a recording made so), alignment would copy every pixel
    to where it already is: it is skipped (``alignments_skipped`` counts it). That saves ~2 ms of CPU a
    640x480 frame, and the rounding holes ``rs.align`` leaves even then (~7 % of pixels zero on a
    sloped plane).
    """

    def __init__(self, config: RealSenseCameraConfig, rs: Any | None = None) -> None:
        self._rs = rs or import_pyrealsense2()
        self.config = config
        self._align = self._rs.align(self._rs.stream.color)
        self._filters = [self._make_filter(name) for name in config.filters]
        self._models: dict[tuple[int, int, float, float, float, float], CameraModel] = {}
        self._identity_alignment: dict[tuple[int, int], bool] = {}
        self._extrinsics: dict[tuple[int, int], np.ndarray] = {}
        self.alignments_skipped = 0

    def _make_filter(self, name: str) -> Any:
        rs = self._rs
        if name == "spatial":
            return rs.spatial_filter()
        if name == "temporal":
            return rs.temporal_filter()
        hole_filling = rs.hole_filling_filter()
        hole_filling.set_option(rs.option.holes_fill, float(self.config.hole_filling_mode))
        return hole_filling

    def stream_model(self, frame: Any) -> CameraModel:
        """The CameraModel of a (color or depth) frame's stream profile (cached per distinct intrinsics)."""
        intrinsics = frame.profile.as_video_stream_profile().get_intrinsics()
        i = intrinsics
        key = (i.width, i.height, i.fx, i.fy, i.ppx, i.ppy)
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = CameraModel.from_realsense(intrinsics)
        return model

    def process(self, frameset: Any) -> ProcessedFrameset:
        """Filter, align (unless ``align_depth`` is off) and convert ``frameset``; raise CameraReadError
        if a stream is missing."""
        color_frame = frameset.get_color_frame()
        if not color_frame:
            raise CameraReadError(f"camera {self.config.name!r}: frameset has no color frame")
        depth_m = None
        depth_model = T_color_depth = None
        if self.config.enable_depth:
            depth_frame = frameset.get_depth_frame()
            if not depth_frame:
                raise CameraReadError(f"camera {self.config.name!r}: frameset has no depth frame")
            # Processing blocks given a frameset process the depth inside it and keep color attached.
            for block in self._filters:
                frameset = block.process(frameset).as_frameset()
            if not self.config.align_depth:
                # Left in the depth imager's frame (even when that is the color frame: consumers of
                # unaligned depth get one form from every device).
                aligned = frameset
                depth_model = self.stream_model(frameset.get_depth_frame())
                T_color_depth = self._T_color_depth(frameset.get_depth_frame(), frameset.get_color_frame())
            elif self._alignment_is_identity(frameset.get_depth_frame(), frameset.get_color_frame()):
                aligned = frameset
                self.alignments_skipped += 1
            else:
                aligned = self._align.process(frameset)
            color_frame = aligned.get_color_frame()
            depth_frame = aligned.get_depth_frame()
            if not depth_frame or not color_frame:
                raise CameraReadError(f"camera {self.config.name!r}: alignment returned no depth/color")
            depth_m = self._depth_to_metres(depth_frame)
        color = self._color_to_rgb(color_frame)
        model = self.stream_model(color_frame)
        expected = color.shape[:2] if depth_model is None else (depth_model.height, depth_model.width)
        if depth_m is not None and depth_m.shape != expected:
            raise CameraReadError(f"camera {self.config.name!r}: depth {depth_m.shape} does not match "
                                  f"{'color' if depth_model is None else 'its intrinsics'} {expected}")
        return ProcessedFrameset(color, depth_m, model, depth_model, T_color_depth)

    def _T_color_depth(self, depth_frame: Any, color_frame: Any) -> np.ndarray:
        """The depth → color extrinsics of the two stream profiles as a 4x4 (cached per profile pair)."""
        key = (depth_frame.profile.unique_id(), color_frame.profile.unique_id())
        T = self._extrinsics.get(key)
        if T is None:
            extrinsics = depth_frame.profile.get_extrinsics_to(color_frame.profile)
            T = np.eye(4)
            # librealsense stores the rotation column-major: p_color = R p_depth + t.
            T[:3, :3] = np.reshape(extrinsics.rotation, (3, 3)).T
            T[:3, 3] = extrinsics.translation
            T.setflags(write=False)
            self._extrinsics[key] = T
        return T

    def _alignment_is_identity(self, depth_frame: Any, color_frame: Any) -> bool:
        """Whether aligning depth to color maps every pixel onto itself (cached per pair of stream profiles)."""
        key = (depth_frame.profile.unique_id(), color_frame.profile.unique_id())
        identity = self._identity_alignment.get(key)
        if identity is None:
            d = depth_frame.profile.as_video_stream_profile().get_intrinsics()
            c = color_frame.profile.as_video_stream_profile().get_intrinsics()
            same_intrinsics = (d.width, d.height, d.fx, d.fy, d.ppx, d.ppy, d.model, list(d.coeffs)) == (
                c.width, c.height, c.fx, c.fy, c.ppx, c.ppy, c.model, list(c.coeffs))
            # 1e-9: float noise of an identity written by the SDK, far below a real 1 mm / 0.1° offset.
            same_pose = np.allclose(self._T_color_depth(depth_frame, color_frame), np.eye(4), rtol=0.0, atol=1e-9)
            identity = self._identity_alignment[key] = same_intrinsics and same_pose
        return identity

    def _depth_to_metres(self, depth_frame: Any) -> np.ndarray:
        raw = np.asanyarray(depth_frame.get_data())
        scale = float(depth_frame.as_depth_frame().get_units())
        depth = raw.astype(np.float32)
        depth *= np.float32(scale)
        invalid = raw == 0
        if self.config.min_depth_m > 0:
            invalid |= depth < self.config.min_depth_m
        if math.isfinite(self.config.max_depth_m):
            invalid |= depth > self.config.max_depth_m
        depth[invalid] = np.nan
        return depth

    def _color_to_rgb(self, color_frame: Any) -> np.ndarray:
        rs = self._rs
        fmt = color_frame.profile.format()
        data = np.asanyarray(color_frame.get_data())
        if fmt == rs.format.rgb8:
            return np.array(data, dtype=np.uint8, copy=True)
        if fmt == rs.format.bgr8:
            return np.ascontiguousarray(data[..., ::-1])
        if fmt == rs.format.rgba8:
            return np.ascontiguousarray(data[..., :3])
        if fmt == rs.format.bgra8:
            return np.ascontiguousarray(data[..., 2::-1])
        raise CameraReadError(f"camera {self.config.name!r}: color format {fmt} is not supported; "
                              "expected rgb8, bgr8, rgba8 or bgra8")


class RealSenseCamera(Camera):
    """A RealSense camera (by serial) or a RealSense recording, read through ``rs.pipeline``."""

    config_class = RealSenseCameraConfig
    config: RealSenseCameraConfig

    def __init__(self, config: RealSenseCameraConfig, *, software_device: Any = None) -> None:
        """``software_device`` (a :class:`robopin.cameras.synthetic.SoftwareRealSense`) replaces the USB
        device: frames come from it through a real ``rs.syncer``, with the same recovery."""
        super().__init__(config)
        self._rs: Any = None
        self._software_device = software_device
        self._context: Any = None  # one librealsense context per camera, for every device query
        self._rs_config: Any = None
        self._pipeline: Any = None
        self._playback: Any = None
        self._processor: RealSenseFrameProcessor | None = None
        self._serial = ""
        self._index = 0
        self._last_frame_number: int | None = None
        # Real-time playback: host time minus recorded stamp of the least-delayed frame since (re)start.
        self._playback_offset_s: float | None = None
        self._last_recorded_s = -math.inf
        self.dropped_frames = 0
        """Frames the device numbered but this camera never saw (gaps in frame numbers)."""
        self.pipeline_restarts = 0
        """Times a stalled pipeline was stopped and started again."""
        self.hardware_resets = 0
        """Times the device was hardware-reset after restarts did not help (attempts, failed ones included)."""
        self._last_frame_mono = 0.0
        self._restarts_without_frame = 0

    @staticmethod
    def find_cameras() -> list[CameraDescription]:
        """Connected RealSense devices with their color (rgb8) and depth (z16) profiles."""
        rs = import_pyrealsense2()
        found = []
        for device in rs.context().query_devices():
            info = _device_info(rs, device)
            profiles = set()
            for sensor in device.query_sensors():
                for profile in sensor.get_stream_profiles():
                    if not profile.is_video_stream_profile():
                        continue
                    if profile.format() not in (rs.format.rgb8, rs.format.z16):
                        continue
                    video = profile.as_video_stream_profile()
                    profiles.add(StreamProfile(
                        stream=profile.stream_name().lower(), width=video.width(), height=video.height(),
                        fps=profile.fps(), format=str(profile.format()).split(".")[-1],
                    ))
            found.append(CameraDescription(
                type="realsense", serial=info["serial"], name=info["name"], firmware=info["firmware"],
                profiles=tuple(sorted(profiles, key=lambda p: (p.stream, -p.width, -p.height, -p.fps))),
            ))
        return found

    def _connect(self) -> None:
        rs = self._rs = import_pyrealsense2()
        config = self.config
        self._context = self._context or rs.context()
        if self._software_device is not None:
            pipeline = self._software_device.pipeline()
            pipeline.start()
            self._serial = self._software_device.serial
            self._start_state(pipeline, None)
            return
        cfg = rs.config()
        if config.playback_file:
            path = Path(config.playback_file)
            if not path.is_file():
                raise CameraNotFoundError(f"camera {config.name!r}: recording {str(path)!r} does not exist")
            cfg.enable_device_from_file(str(path), repeat_playback=config.repeat_playback)
        else:
            self._serial = self._select_serial(rs)
            cfg.enable_device(self._serial)
            cfg.enable_stream(rs.stream.color, config.width, config.height, rs.format.rgb8, config.fps)
            if config.enable_depth:
                cfg.enable_stream(rs.stream.depth, config.depth_width or config.width,
                                  config.depth_height or config.height, rs.format.z16, config.fps)
        pipeline = rs.pipeline(self._context)
        try:
            if config.playback_file:
                recorded = cfg.resolve(pipeline).get_device()
                # A recording of another camera is refused before anything streams from it: a playback
                # pipeline stopped just after it started leaves its reader thread winding down as it goes.
                self._serial = _device_info(rs, recorded)["serial"] or Path(config.playback_file).stem
                if config.serial and config.serial != self._serial:
                    raise CameraNotFoundError(f"camera {config.name!r}: recording {config.playback_file!r} holds "
                                              f"serial {self._serial!r}, expected {config.serial!r}")
                # Real-time mode must be chosen before streaming starts: switching after start() lets a
                # quickly recorded file play out (and drop frames) before the first read.
                recorded.as_playback().set_real_time(config.playback_realtime)
            profile = pipeline.start(cfg)
        except CameraError:
            raise
        except RuntimeError as exc:
            raise CameraNotFoundError(
                f"camera {config.name!r}: could not start {self._source()} with color "
                f"{config.width}x{config.height}@{config.fps}: {exc}"
            ) from exc
        device = profile.get_device()
        if config.playback_file:
            self._playback = device.as_playback()
            if self._playback.is_real_time() != config.playback_realtime:
                # resolve() handed out another device instance than start() used: switch now and rewind
                # so frames played out in the wrong mode are not lost.
                self._playback.pause()
                self._playback.set_real_time(config.playback_realtime)
                self._playback.seek(datetime.timedelta(0))
                self._playback.resume()
        self._start_state(pipeline, cfg)

    def _start_state(self, pipeline: Any, rs_config: Any) -> None:
        self._pipeline = pipeline
        self._rs_config = rs_config
        self._processor = RealSenseFrameProcessor(self.config, self._rs)
        self._index = 0
        self._last_frame_number = None
        self._playback_offset_s = None
        self._last_recorded_s = -math.inf
        self._last_frame_mono = time.monotonic()
        self._restarts_without_frame = 0

    def _connected_serials(self) -> set[str]:
        return {_device_info(self._rs, d)["serial"] for d in self._context.query_devices()}

    def _select_serial(self, rs: Any) -> str:
        serials = [_device_info(rs, d)["serial"] for d in self._context.query_devices()]
        wanted = self.config.serial
        if wanted:
            if wanted not in serials:
                raise CameraNotFoundError(
                    f"camera {self.config.name!r}: no RealSense with serial {wanted!r} is connected; "
                    f"found {serials or 'none'}"
                )
            return wanted
        if len(serials) != 1:
            raise CameraNotFoundError(
                f"camera {self.config.name!r}: no serial configured and {len(serials)} RealSense devices are "
                f"connected ({serials}); set serial to one of them"
            )
        return serials[0]

    def _source(self) -> str:
        if self._software_device is not None:
            return f"software device {self._serial!r}"
        if self.config.playback_file:
            return f"recording {self.config.playback_file!r}"
        return f"RealSense {self._serial!r}"

    def _read(self, timeout_s: float) -> Frame:
        assert self._pipeline is not None and self._processor is not None
        rs = self._rs
        ok, frameset = self._pipeline.try_wait_for_frames(max(1, int(timeout_s * 1000)))
        if not ok:
            if self._playback is not None and self._playback.current_status() == rs.playback_status.stopped:
                raise CameraReadError(f"camera {self.config.name!r}: end of {self._source()}")
            live = self._playback is None
            if live and self._software_device is None and self._serial not in self._connected_serials():
                raise CameraReadError(f"camera {self.config.name!r}: {self._source()} was disconnected")
            stalled_s = time.monotonic() - self._last_frame_mono
            if live and self.config.stall_restart_s and stalled_s >= self.config.stall_restart_s:
                self._recover(stalled_s)
            raise CameraTimeoutError(
                f"camera {self.config.name!r}: no frame from {self._source()} "
                f"within {timeout_s * 1000:.0f} ms"
            )
        self._last_frame_mono = time.monotonic()
        self._restarts_without_frame = 0
        arrival_s = time.time()
        processed = self._processor.process(frameset)
        number = int(frameset.get_frame_number())
        if self._last_frame_number is not None and number > self._last_frame_number + 1:
            self.dropped_frames += number - self._last_frame_number - 1
        self._last_frame_number = number
        frame = Frame(
            color=processed.color, depth_m=processed.depth_m, intrinsics=processed.intrinsics,
            timestamp_s=self._timestamp_s(frameset, arrival_s), serial=self._serial, index=self._index,
            camera_name=self.config.name, depth_intrinsics=processed.depth_intrinsics,
            T_color_depth=processed.T_color_depth,
        )
        self._index += 1
        return frame

    def _recover(self, stalled_s: float) -> None:
        """Restart a silent pipeline; hardware-reset the device first when restarts have not helped."""
        config = self.config
        if config.hardware_reset_after and self._restarts_without_frame >= config.hardware_reset_after:
            logger.warning("%s: no frame for %.1f s after %d pipeline restart(s); hardware reset",
                           self, stalled_s, self._restarts_without_frame)
            self._hardware_reset()
            self._restarts_without_frame = 0
        else:
            logger.warning("%s: no frame for %.1f s; restarting the pipeline", self, stalled_s)
        try:
            self._pipeline.stop()
        except RuntimeError as exc:  # already stopped, or the device went away in a reset
            logger.debug("%s: pipeline.stop(): %s", self, exc)
        try:
            self._pipeline.start(self._rs_config)
        except RuntimeError as exc:  # the device is not back yet: the next stall window tries again
            logger.warning("%s: pipeline restart failed: %s", self, exc)
        self.pipeline_restarts += 1
        self._restarts_without_frame += 1
        self._last_frame_mono = time.monotonic()  # a whole stall window before the next step

    def _hardware_reset(self) -> None:
        self.hardware_resets += 1
        try:
            if self._software_device is not None:
                self._pipeline.hardware_reset()
                return
            device = self._pipeline.get_active_profile().get_device()
            device.hardware_reset()
        except RuntimeError as exc:
            logger.warning("%s: hardware_reset() failed: %s", self, exc)
            return
        # The device drops off the bus and re-enumerates (a few seconds); pipeline.start before that fails.
        deadline = time.monotonic() + self.config.reconnect_timeout_s
        time.sleep(min(0.5, self.config.reconnect_timeout_s))
        while time.monotonic() < deadline and self._serial not in self._connected_serials():
            time.sleep(0.25)

    def _timestamp_s(self, frameset: Any, arrival_s: float) -> float:
        rs = self._rs
        restamp = self.config.restamp if self.config.restamp is not None else self._playback is not None
        if restamp:
            if self._playback is not None and self.config.playback_realtime:
                return self._played_at_s(float(frameset.get_timestamp()) / 1000.0, arrival_s)
            return arrival_s
        if frameset.get_frame_timestamp_domain() == rs.timestamp_domain.hardware_clock:
            return arrival_s
        return float(frameset.get_timestamp()) / 1000.0

    def _played_at_s(self, recorded_s: float, arrival_s: float) -> float:
        """Host time at which real-time playback released a frame recorded at ``recorded_s``.

        Playback releases every frame at one fixed offset from its recorded stamp; a frame that reaches
        this thread later waited in librealsense's queue while the thread was busy. The least offset seen
        since the recording (re)started is the playback's own, so recorded stamp + that offset is the
        frame's "acquisition" time; the arrival time would hide the queueing from every latency figure.
        """
        offset_s = arrival_s - recorded_s
        if self._playback_offset_s is None or recorded_s < self._last_recorded_s or offset_s < self._playback_offset_s:
            self._playback_offset_s = offset_s  # first frame, a repeat from the start, or less delayed
        self._last_recorded_s = recorded_s
        return recorded_s + self._playback_offset_s

    def _disconnect(self) -> None:
        pipeline, self._pipeline, self._playback, self._processor = self._pipeline, None, None, None
        if pipeline is not None:
            try:
                pipeline.stop()
            except RuntimeError as exc:  # already stopped, or the device is gone
                logger.debug("%s: pipeline.stop(): %s", self, exc)


def _device_info(rs: Any, device: Any) -> dict[str, str]:
    def get(key: Any) -> str:
        return device.get_info(key) if device.supports(key) else ""

    return {
        "serial": get(rs.camera_info.serial_number),
        "name": get(rs.camera_info.name),
        "firmware": get(rs.camera_info.firmware_version),
    }
