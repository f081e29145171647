"""Bag backend: one recorded view played back from a rosbag2 bag (MCAP or SQLite3) as if it were a camera.

It reads our camera_node's (realsense-ros's) topic layout under a prefix (robopin.cameras.topics) —
``<prefix>/color/image_raw``, ``<prefix>/color/camera_info`` and ``<prefix>/aligned_depth_to_color/image_raw`` —
with ``rosbags`` (pure Python, no rclpy), pairs each color image with the depth image whose header stamp is
closest (within ``max_depth_offset_s``), and paces delivery by the recorded stamps unless ``realtime`` is off.
:func:`write_camera_bag` writes frames in the same layout (test fixtures, demo bags).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from robopin.cameras.base import (
    Camera,
    CameraBackendUnavailableError,
    CameraConfig,
    CameraDescription,
    CameraNotFoundError,
    CameraReadError,
    CameraTimeoutError,
    Frame,
)
from robopin.cameras.images import (
    camera_info_message,
    color_image_fields,
    depth_image_fields,
    image_message,
    image_message_to_color,
    image_message_to_depth_m,
)
from robopin.cameras.topics import CAMERA_ROOT, prefix_topics
from robopin.geometry.camera_model import CameraModel
from robopin.messages import seconds_to_nanoseconds, stamp_to_seconds, time_msg_ns
from robopin.settings import check_ranges, setting

__all__ = ["BagCamera", "BagCameraConfig", "write_camera_bag"]

logger = logging.getLogger(__name__)


def _import_rosbags() -> Any:
    try:
        import rosbags.highlevel
        import rosbags.rosbag2
        import rosbags.typesys
    except ImportError as exc:
        raise CameraBackendUnavailableError(
            f"the bag camera backend needs rosbags ({exc}); install it with `pip install rosbags`"
        ) from exc
    return rosbags


@dataclasses.dataclass
class BagCameraConfig(CameraConfig):
    """A view recorded in a rosbag2 bag."""

    type: ClassVar[str] = "bag"

    bag_path: str = setting("", "the bag directory (with metadata.yaml) or a single .mcap/.db3 file")
    topic_prefix: str = setting("", "where the view's topics are in the bag (empty: /cameras/<name>)")
    realtime: bool = setting(True, "deliver frames at the recorded pace (false: as fast as they are read)")
    loop: bool = setting(False, "start again at the end of the bag instead of reporting the end as an error")
    enable_depth: bool = setting(True, "pair color with aligned depth (false: color only)")
    max_depth_offset_s: float = setting(0.02, "largest color/depth stamp difference of one frame, seconds", min=0.0)
    serial: str = setting("", "the frames' serial (empty: the bag's name)")
    # Host-clock stamps make a replayed view look live to the nodes that judge frame ages.
    restamp: bool = setting(True, "stamp frames with the host clock when due (false: keep the recorded stamps)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.bag_path:
            raise ValueError(f"camera {self.name!r}: bag_path is required for a bag camera")
        check_ranges(self, ValueError)

    @property
    def topics(self) -> dict[str, str]:
        return prefix_topics(self.topic_prefix or f"/{CAMERA_ROOT}/{self.name}")


@dataclasses.dataclass
class _Stamped:
    stamp_s: float
    message: Any


class BagCamera(Camera):
    """Plays one view's color, aligned depth and camera info back from a rosbag2 bag."""

    config_class = BagCameraConfig
    config: BagCameraConfig

    def __init__(self, config: BagCameraConfig) -> None:
        super().__init__(config)
        self._bag: Any = None
        self._messages: Iterator[tuple[str, Any]] | None = None
        self._colors: collections.deque[_Stamped] = collections.deque()
        self._depths: collections.deque[_Stamped] = collections.deque(maxlen=30)
        self._model: CameraModel | None = None
        self._pending: tuple[Frame, float] | None = None  # frame ready but not yet due (realtime)
        self._clock_origin: tuple[float, float] | None = None  # (host monotonic, recorded stamp)
        self._index = 0
        self.unmatched_colors = 0
        """Color images skipped because no depth image lay within ``max_depth_offset_s``."""

    @staticmethod
    def find_cameras() -> list[CameraDescription]:
        """Bags are files, not devices: nothing to discover."""
        return []

    def _connect(self) -> None:
        rosbags = _import_rosbags()
        path = Path(self.config.bag_path)
        if not path.exists():
            raise CameraNotFoundError(f"camera {self.config.name!r}: bag {str(path)!r} does not exist")
        reader = rosbags.highlevel.AnyReader([path])
        try:
            reader.open()
        except Exception as exc:
            raise CameraNotFoundError(f"camera {self.config.name!r}: cannot open bag {str(path)!r}: {exc}") from exc
        topics = self.config.topics
        wanted = {topics["color"], topics["info"]} | ({topics["depth"]} if self.config.enable_depth else set())
        present = {c.topic for c in reader.connections}
        missing = sorted(wanted - present)
        if missing:
            reader.close()
            raise CameraNotFoundError(
                f"camera {self.config.name!r}: bag {str(path)!r} has no topic(s) {missing}; it has "
                f"{sorted(t for t in present if '/color/' in t or '/aligned_depth' in t) or sorted(present)}"
            )
        self._bag = reader
        self._serial = self.config.serial or path.stem
        self._start_messages()
        self._index = 0

    def _start_messages(self) -> None:
        reader = self._bag
        topics = self.config.topics
        kinds = {topics["color"]: "color", topics["info"]: "info", topics["depth"]: "depth"}
        connections = [c for c in reader.connections if c.topic in kinds and
                       (self.config.enable_depth or kinds[c.topic] != "depth")]

        def generate() -> Iterator[tuple[str, Any]]:
            for connection, _, raw in reader.messages(connections=connections):
                yield kinds[connection.topic], reader.deserialize(raw, connection.msgtype)

        self._messages = generate()
        self._colors.clear()
        self._depths.clear()
        self._pending = None
        self._clock_origin = None

    def _next_pair(self) -> tuple[_Stamped, _Stamped | None]:
        tolerance = self.config.max_depth_offset_s
        while True:
            if self._colors and (not self.config.enable_depth or self._depths):
                color = self._colors[0]
                if not self.config.enable_depth:
                    return self._colors.popleft(), None
                best = min(self._depths, key=lambda d: abs(d.stamp_s - color.stamp_s))
                if abs(best.stamp_s - color.stamp_s) <= tolerance:
                    self._colors.popleft()
                    while self._depths and self._depths[0] is not best:
                        self._depths.popleft()
                    self._depths.popleft()
                    return color, best
                if self._depths[-1].stamp_s > color.stamp_s + tolerance:
                    # Depth has moved past this color image: its partner was never recorded.
                    self._colors.popleft()
                    self.unmatched_colors += 1
                    continue
            assert self._messages is not None
            try:
                kind, message = next(self._messages)
            except StopIteration:
                if self.config.loop and self._index > 0:
                    self._start_messages()
                    continue
                raise CameraReadError(f"camera {self.config.name!r}: end of bag {self.config.bag_path!r}") from None
            if kind == "info":
                self._model = CameraModel.from_camera_info(message)
                continue
            stamped = _Stamped(stamp_to_seconds(message.header.stamp), message)
            (self._colors if kind == "color" else self._depths).append(stamped)

    def _build_frame(self, color: _Stamped, depth: _Stamped | None) -> Frame:
        rgb = image_message_to_color(color.message)
        depth_m = None if depth is None else image_message_to_depth_m(depth.message)
        if self._model is None:
            raise CameraReadError(f"camera {self.config.name!r}: color image at {color.stamp_s:.3f} s came before "
                                  f"any {self.config.topics['info']} message")
        frame = Frame(color=rgb, depth_m=depth_m, intrinsics=self._model, timestamp_s=color.stamp_s,
                      serial=self._serial, index=self._index, camera_name=self.config.name)
        self._index += 1
        return frame

    def _read(self, timeout_s: float) -> Frame:
        if self._pending is None:
            color, depth = self._next_pair()
            frame = self._build_frame(color, depth)
            due = time.monotonic()
            if self.config.realtime:
                if self._clock_origin is None:
                    self._clock_origin = (due, color.stamp_s)
                due = self._clock_origin[0] + (color.stamp_s - self._clock_origin[1])
            self._pending = (frame, due)
        frame, due = self._pending
        wait_s = due - time.monotonic()
        if wait_s > timeout_s:
            time.sleep(timeout_s)
            raise CameraTimeoutError(f"camera {self.config.name!r}: next bag frame is due in "
                                     f"{wait_s * 1000:.0f} ms, more than the {timeout_s * 1000:.0f} ms allowed")
        if wait_s > 0:
            time.sleep(wait_s)
        self._pending = None
        if self.config.restamp:
            # The frame's capture time is when it was due, not when this thread woke up: a late wake-up
            # (a loaded machine) is latency the consumer must see, as it would with a real camera.
            frame = dataclasses.replace(frame, timestamp_s=time.time() - max(0.0, time.monotonic() - due))
        return frame

    def _disconnect(self) -> None:
        bag, self._bag, self._messages = self._bag, None, None
        if bag is not None:
            bag.close()


def write_camera_bag(
    path: str | Path,
    frames: Iterable[Frame],
    *,
    topic_prefix: str,
    storage: str = "mcap",
    depth_offset_s: float = 0.0,
) -> Path:
    """Write frames as realsense-ros topics (rgb8 color, 16UC1 mm aligned depth, CameraInfo) to a new bag.

    Each message's header stamp and the bag's receive time are the frame's ``timestamp_s``; the header
    frame id is the frame's optical frame. Depth is stamped ``depth_offset_s`` later than color (to
    record the desync real drivers show); a frame without depth writes no depth message.
    """
    rosbags = _import_rosbags()
    typestore = rosbags.typesys.get_typestore(rosbags.typesys.Stores.ROS2_JAZZY)
    types = typestore.types
    plugin = {"mcap": rosbags.rosbag2.StoragePlugin.MCAP, "sqlite3": rosbags.rosbag2.StoragePlugin.SQLITE3}[storage]
    topics = prefix_topics(topic_prefix)
    path = Path(path)
    with rosbags.rosbag2.Writer(path, version=9, storage_plugin=plugin) as writer:
        connections = {
            "color": writer.add_connection(topics["color"], "sensor_msgs/msg/Image", typestore=typestore),
            "info": writer.add_connection(topics["info"], "sensor_msgs/msg/CameraInfo", typestore=typestore),
            "depth": writer.add_connection(topics["depth"], "sensor_msgs/msg/Image", typestore=typestore),
        }
        for frame in frames:
            stamp_ns = seconds_to_nanoseconds(frame.timestamp_s)
            header = types["std_msgs/msg/Header"](stamp=time_msg_ns(types, stamp_ns), frame_id=frame.optical_frame_id)
            info = camera_info_message(types, header, frame.intrinsics)
            color = image_message(types, header, color_image_fields(frame.color))
            writer.write(connections["info"], stamp_ns, typestore.serialize_cdr(info, info.__msgtype__))
            writer.write(connections["color"], stamp_ns, typestore.serialize_cdr(color, color.__msgtype__))
            if frame.depth_m is not None:
                if not frame.depth_aligned:
                    raise ValueError(f"write_camera_bag: frame {frame.index} of {frame.camera_name!r} has unaligned "
                                     "depth; the bag layout holds aligned_depth_to_color only (align it first)")
                depth_ns = stamp_ns + round(depth_offset_s * 1e9)
                depth_header = types["std_msgs/msg/Header"](stamp=time_msg_ns(types, depth_ns),
                                                             frame_id=frame.optical_frame_id)
                depth = image_message(types, depth_header, depth_image_fields(frame.depth_m))
                writer.write(connections["depth"], depth_ns, typestore.serialize_cdr(depth, depth.__msgtype__))
    return path
