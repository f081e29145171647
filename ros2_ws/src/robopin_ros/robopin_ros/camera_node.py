"""camera_node: one camera (RealSense | ZED | sim | bag) published on realsense-ros topics.

Publishes ``/cameras/<name>/color/image_raw`` (rgb8), ``/cameras/<name>/color/camera_info`` and
``/cameras/<name>/aligned_depth_to_color/image_raw`` (16UC1 mm, 0 = no data), all stamped with the
frame's capture time and the frame id ``<name>_optical``, plus health on ``/diagnostics``. With
``align_depth:=false`` (RealSense) depth is not registered to color in every frame: it goes out on
``/cameras/<name>/depth/image_rect_raw`` with ``depth/camera_info``, in frame ``<name>_depth_optical``,
as realsense-ros publishes it, and projection_node aligns the one frame a request uses
(its ``unaligned_depth`` parameter holds the depth → color extrinsics the node logs at connect). A capture
thread reads the camera; when it fails (unplugged, end of recording) the node keeps running, reports
the failure and reconnects every ``reconnect_period_s``. ``cameras.<name>.driver`` / ``prefix`` / ``qos`` publish
under another driver's layout and QoS instead (robopin.cameras.topics: realsense-ros, zed-ros2-wrapper), as
the system file's ``cameras:`` section sets them for every node. Run one node per camera, e.g.::

    ros2 run robopin_ros camera_node --ros-args -r __node:=camera_wrist \\
        -p name:=wrist -p backend:=realsense -p serial:="'123456789'" -p filters:="['hole_filling']"
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import CameraInfo, Image

from robopin.cameras import Camera, CameraError, CameraTimeoutError, camera_config_from_dict, make_camera
from robopin.cameras.base import CameraConfig
from robopin.cameras.memory import retain_freed_image_memory
from robopin.interfaces import DIAGNOSTICS_TOPIC
from robopin.system.names import namespaced_label
from robopin.system.node_settings import CameraNodeSettings
from robopin_ros import conversions
from robopin_ros.camera_snapshot import QosMismatchWatch, camera_qos, declare_view_topics
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.runtime import run_node, steady_timer

# Parameters that, when set, are copied into the backend config (only if that backend has the field).
_PASS_THROUGH = ("serial", "filters", "playback_file", "bag_path", "topic_prefix")
# Per-frame latency stages reported on /diagnostics as <stage>_p50_ms / <stage>_p95_ms: the whole of
# capture → published, then its parts: the backend (capture stamp → read() returned: alignment, filters,
# decoding), message building, and the three DDS writes.
_LATENCY_STAGES = ("capture_to_publish", "capture_to_read", "read_to_messages", "messages_to_published")


class CameraNode(LoggedNode):
    """Reads one camera on a capture thread and publishes color, aligned depth, camera info and health."""

    # Frames come from its capture threads; its callbacks are diagnostics and parameters.
    EXECUTOR_THREADS = 1  # robopin_ros.runtime.make_executor

    def __init__(self, **node_kwargs: Any) -> None:
        # node_kwargs (context, parameter_overrides, ...) let a test or the in-process runner host it.
        super().__init__("camera_node", **node_kwargs)
        # Each frame allocates and frees megabytes; keep them mapped rather than fault them in every frame.
        retain_freed_image_memory()
        declare_settings(self, CameraConfig())  # name, width, height, fps
        self.options = declare_settings(self, CameraNodeSettings())["options"]
        self.camera_name = str(self.get_parameter("name").value)
        self.reconnect_period_s = float(self.get_parameter("reconnect_period_s").value)
        self.camera = self._make_camera()
        self.add_on_set_parameters_callback(self._on_set_parameters)

        # Where and how this view publishes: our names by default, or a driver's (cameras.<name>.*), so a
        # stack configured for realsense-ros or zed-ros2-wrapper topics can run on this node unchanged.
        self.topics = declare_view_topics(self, [self.camera_name])[self.camera_name]
        self.qos_watch = QosMismatchWatch(self)
        qos = camera_qos(self.topics.qos)

        def publisher(msg_type, topic: str):
            return self.create_publisher(msg_type, topic, qos,
                                         event_callbacks=self.qos_watch.publisher_events(self.topics, topic))

        self.color_pub = publisher(Image, self.topics.color)
        self.info_pub = publisher(CameraInfo, self.topics.info)
        self.depth_pub = publisher(Image, self.topics.depth)
        self.raw_depth_pub = self.raw_depth_info_pub = None
        self._logged_extrinsics = None
        if not getattr(self.camera.config, "align_depth", True):  # the parameter, or options: {align_depth: false}
            unaligned = self.topics.names(unaligned=True)
            self.raw_depth_pub = publisher(Image, unaligned["depth"])
            self.raw_depth_info_pub = publisher(CameraInfo, unaligned["depth_info"])
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)

        self._stats_lock = threading.Lock()
        self._publish_times: collections.deque[float] = collections.deque(maxlen=300)
        # capture → published, per frame: the aligned-depth latency users of other drivers complain about;
        # and its stages (capture → read returned, → messages built, → published), so the diagnostics say
        # where that time goes.
        self._stage_latencies_s: dict[str, collections.deque[float]] = {
            stage: collections.deque(maxlen=300) for stage in _LATENCY_STAGES
        }
        self.frames_published = 0
        self.timeouts = 0
        self.failures = 0
        self.reconnects = 0
        self.last_error = ""
        self._serial = ""
        self._stop = threading.Event()
        self._capture = threading.Thread(target=self._capture_loop, name=f"capture-{self.camera_name}", daemon=True)
        self._capture.start()
        steady_timer(self, float(self.get_parameter("diagnostics_period_s").value), self._publish_diagnostics)

    def not_ready(self) -> list[str]:
        """What keeps this camera from serving a task (its ``~/ready`` answer; ``robopin up`` asks it too)."""
        return [] if self.frames_published else [f"no camera frame yet ({self.last_error or 'starting'})"]

    def _make_camera(self) -> Camera:
        """Build the camera config from parameters (validated by the backend's config class)."""
        options = dict(self.options)
        data: dict[str, Any] = {
            "type": str(self.get_parameter("backend").value),
            "name": self.camera_name,
            "width": int(self.get_parameter("width").value),
            "height": int(self.get_parameter("height").value),
            "fps": int(self.get_parameter("fps").value),
        }
        for key in _PASS_THROUGH:
            value = self.get_parameter(key).value
            if key == "filters":
                value = [f for f in value if f]
            elif key == "serial" and value is not None:
                value = str(value)
            if value:
                data[key] = value
        if not self.get_parameter("align_depth").value:
            data["align_depth"] = False  # a backend without the option refuses it by name
        data.update(options)
        return make_camera(camera_config_from_dict(data))

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        """Apply reconnect_period_s; every other parameter is read-only (it would need a new camera)."""
        for parameter in parameters:
            if parameter.name == "reconnect_period_s":
                if not float(parameter.value) > 0:
                    return SetParametersResult(successful=False, reason="reconnect_period_s must be > 0")
                self.reconnect_period_s = float(parameter.value)
        return SetParametersResult(successful=True)

    def _capture_loop(self) -> None:
        """Connect, read and publish until shutdown; on failure report, release and reconnect."""
        while not self._stop.is_set():
            if not self.camera.is_connected:
                try:
                    self.camera.connect()
                except Exception as error:  # keep the node up: report and retry
                    self._record_failure(f"connect failed: {error}")
                    self._stop.wait(self.reconnect_period_s)
                    continue
                with self._stats_lock:
                    if self.frames_published or self.failures:
                        self.reconnects += 1
                self.get_logger().info(f"camera {self.camera_name!r} connected ({type(self.camera).__name__})")
            try:
                frame = self.camera.read()
                read_s = self._now_s()
            except CameraTimeoutError:
                # Counted, not reported as the last error: that keeps the failure that matters visible.
                with self._stats_lock:
                    self.timeouts += 1
                continue
            except (CameraError, OSError, RuntimeError) as error:
                self._record_failure(f"read failed: {error}")
                self._release()
                self._stop.wait(self.reconnect_period_s)
                continue
            self._publish(frame, read_s)
        self._release()

    def _now_s(self) -> float:
        """Now on the frames' clock: the node's (a simulated camera's frames and nodes are on the simulator's)."""
        return self.get_clock().now().nanoseconds * 1e-9

    def _publish(self, frame, read_s: float) -> None:
        """Publish one frame's three messages with one header."""
        color, depth, info = conversions.frame_to_msgs(frame)
        depth_info = conversions.depth_camera_info(frame)
        converted_s = self._now_s()
        # Depth and info first: a subscriber that keys on color then finds its partners already there.
        if depth is not None and depth_info is None:
            self.depth_pub.publish(depth)
        elif depth is not None:  # unaligned: the publishers exist because the camera's config says so
            self.raw_depth_info_pub.publish(depth_info)
            self.raw_depth_pub.publish(depth)
            self._log_extrinsics(frame.T_color_depth)
        self.info_pub.publish(info)
        self.color_pub.publish(color)
        published_s = self._now_s()
        stages = (published_s - frame.timestamp_s, read_s - frame.timestamp_s, converted_s - read_s,
                  published_s - converted_s)
        with self._stats_lock:
            self.frames_published += 1
            self._serial = frame.serial
            self._publish_times.append(time.monotonic())
            for stage, seconds in zip(_LATENCY_STAGES, stages, strict=True):
                self._stage_latencies_s[stage].append(seconds)

    def _log_extrinsics(self, T_color_depth) -> None:
        """Say once (and again if they change) the unaligned_depth entry projection_node needs."""
        if self._logged_extrinsics is not None and np.array_equal(self._logged_extrinsics, T_color_depth):
            return
        self._logged_extrinsics = T_color_depth
        rows = ", ".join("[" + ", ".join(f"{v:.6f}" for v in row) + "]" for row in T_color_depth)
        self.get_logger().info(f"camera {self.camera_name!r}: depth left unaligned; projection_node needs "
                               f"unaligned_depth: {{{self.camera_name}: {{matrix: [{rows}]}}}}")

    def _record_failure(self, message: str) -> None:
        with self._stats_lock:
            self.failures += 1
            self.last_error = message
        self.get_logger().warning(f"camera {self.camera_name!r}: {message}; retrying in "
                                  f"{self.reconnect_period_s:.1f} s", throttle_duration_sec=5.0)

    def _release(self) -> None:
        if self.camera.is_connected:
            try:
                self.camera.disconnect()
            except Exception as error:  # the device may already be gone
                self.get_logger().debug(f"disconnect: {error}")

    def _publish_diagnostics(self) -> None:
        """Publish rate, drops, capture-to-publish latency, timeouts and reconnects on /diagnostics."""
        now = time.monotonic()
        with self._stats_lock:
            recent = [t for t in self._publish_times if now - t <= 2.0]
            rate_hz = (len(recent) - 1) / (recent[-1] - recent[0]) if len(recent) > 1 else 0.0
            values = {
                "backend": type(self.camera).__name__,
                "serial": self._serial,
                "connected": str(self.camera.is_connected),
                "rate_hz": f"{rate_hz:.2f}",
                "frames_published": str(self.frames_published),
            }
            for stage, latencies_s in self._stage_latencies_s.items():
                latencies_ms = sorted(x * 1000.0 for x in latencies_s)
                for name, q in (("p50", 0.5), ("p95", 0.95)):
                    value = latencies_ms[min(len(latencies_ms) - 1, int(q * len(latencies_ms)))] if latencies_ms \
                        else float("nan")
                    values[f"{stage}_{name}_ms"] = f"{value:.2f}"
            values.update({
                "dropped_frames": str(getattr(self.camera, "dropped_frames", 0)),
                "timeouts": str(self.timeouts),
                "failures": str(self.failures),
                "reconnects": str(self.reconnects),
                "last_error": self.last_error,
            })
        expected_hz = float(self.get_parameter("fps").value)
        if not self.camera.is_connected:
            level, message = DiagnosticStatus.ERROR, "disconnected"
        elif rate_hz < 0.8 * expected_hz:
            level, message = DiagnosticStatus.WARN, f"rate {rate_hz:.1f} Hz below {expected_hz:.0f} Hz"
        else:
            level, message = DiagnosticStatus.OK, "streaming"
        status = DiagnosticStatus(level=level, message=message,
                                  name=namespaced_label(f"camera_node: {self.camera_name}", self.get_namespace()),
                                  hardware_id=self._serial,
                                  values=[KeyValue(key=k, value=v) for k, v in values.items()])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self.diagnostics_pub.publish(array)

    def destroy_node(self) -> None:
        """Stop the capture thread and release the camera before the node goes."""
        self._stop.set()
        self._capture.join(timeout=5.0)
        super().destroy_node()


def main(args=None) -> int:
    return run_node(CameraNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
