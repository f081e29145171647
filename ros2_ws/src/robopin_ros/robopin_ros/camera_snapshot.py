"""Camera topics → synchronised multi-view snapshots, for any node that needs "what every camera sees now".

:class:`CameraViewsSubscriber` subscribes to each view's realsense-ros topics (color, aligned depth,
camera info) on a given node, pairs color with depth by header stamp (robopin.cameras.pairing), turns them into
``robopin.cameras.Frame`` and feeds a ``robopin.cameras.SnapshotSynchronizer``; ``snapshot()`` returns
the newest synchronised set or raises ``SnapshotError`` (``stale_frame``, ``views_out_of_sync``,
``stale_arm_pose``). Not a node itself: the planner (or a benchmark) owns the node. With
``own_executor=True`` the image subscriptions live on a child node spun by a SingleThreadedExecutor
thread of their own, so a process whose node runs a MultiThreadedExecutor does not pay its per-callback
thread hand-off for six image callbacks per frame (measured in benchmarks/bench_cameras.py: a
MultiThreadedExecutor costs the subscriber 10–18 % of a core more at two views × 30 Hz).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import ArrayLike
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

from robopin.cameras import Frame, MultiViewSnapshot, SnapshotConfig, SnapshotSynchronizer
from robopin.cameras.memory import retain_freed_image_memory
from robopin.cameras.pairing import StampPairer
from robopin.cameras.snapshot import PoseSource
from robopin_ros import conversions
from robopin_ros.runtime import shutdown_executor

# The camera topics' QoS, publisher (camera_node) and subscribers alike. Reliable publishers serve both
# reliable and best-effort subscribers; a few frames of history let a subscriber that is briefly late
# still get every frame.
IMAGE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=ReliabilityPolicy.RELIABLE)


def view_topics(view: str, *, unaligned: bool = False) -> dict[str, str]:
    """The realsense-ros topic names of ``view`` under ``/cameras/<view>`` (``unaligned``: depth in the
    depth imager's frame, as camera_node publishes it with ``align_depth:=false``, with its own info)."""
    prefix = f"/cameras/{view}"
    topics = {
        "color": f"{prefix}/color/image_raw",
        "info": f"{prefix}/color/camera_info",
        "depth": f"{prefix}/aligned_depth_to_color/image_raw",
    }
    if unaligned:
        topics["depth"] = f"{prefix}/depth/image_rect_raw"
        topics["depth_info"] = f"{prefix}/depth/camera_info"
    return topics


class _View:
    """One view's latest intrinsics and its color and depth images paired by stamp."""

    def __init__(self, require_depth: bool, tolerance_s: float) -> None:
        self.info: CameraInfo | None = None
        self.depth_info: CameraInfo | None = None
        self.pairer = (StampPairer("depth", ["color"], tolerance_s) if require_depth
                       else StampPairer("color", [], tolerance_s))
        self.index = 0


class CameraViewsSubscriber:
    """Subscribes to every configured view on ``node`` and keeps a SnapshotSynchronizer fed."""

    def __init__(
        self,
        node: Node,
        config: SnapshotConfig,
        *,
        poses: PoseSource | None = None,
        require_depth: bool = True,
        pair_tolerance_s: float = 0.005,
        on_frame: Callable[[str, Frame, float], None] | None = None,
        own_executor: bool = False,
        unaligned_depth: Mapping[str, ArrayLike] | None = None,
    ) -> None:
        """``unaligned_depth``: view → T_color_depth (4x4) for views whose camera_node leaves depth
        unaligned (``align_depth:=false``); their frames keep depth in the depth imager's frame
        (``Frame.aligned_depth_m()`` registers it when needed)."""
        # Received images are megabyte buffers freed a frame later: keep them mapped in this process.
        retain_freed_image_memory()
        self._executor: SingleThreadedExecutor | None = None
        self._spinner: threading.Thread | None = None
        if own_executor:
            node = Node(f"{node.get_name()}_cameras", namespace=node.get_namespace(), context=node.context)
            self._executor = SingleThreadedExecutor(context=node.context)
            self._executor.add_node(node)
        self.node = node
        self.synchronizer = SnapshotSynchronizer(config, poses=poses)
        self.on_frame = on_frame
        self._lock = threading.Lock()
        self._views = {v: _View(require_depth, pair_tolerance_s) for v in config.views}
        unaligned = dict(unaligned_depth or {})
        unknown = sorted(set(unaligned) - set(config.views))
        if unknown:
            raise ValueError(f"unaligned_depth names unknown views {unknown}; views: {list(config.views)}")
        self._T_color_depth = {v: np.asarray(T, dtype=np.float64).reshape(4, 4) for v, T in unaligned.items()}
        self.subscriptions = []
        for view in config.views:
            topics = view_topics(view, unaligned=view in self._T_color_depth)
            self.subscriptions.append(node.create_subscription(
                CameraInfo, topics["info"], lambda msg, v=view: self._on_info(v, msg), IMAGE_QOS))
            if require_depth and "depth_info" in topics:
                self.subscriptions.append(node.create_subscription(
                    CameraInfo, topics["depth_info"], lambda msg, v=view: self._on_depth_info(v, msg),
                    IMAGE_QOS))
            self.subscriptions.append(node.create_subscription(
                Image, topics["color"], lambda msg, v=view: self._on_image(v, "color", msg), IMAGE_QOS))
            if require_depth:
                self.subscriptions.append(node.create_subscription(
                    Image, topics["depth"], lambda msg, v=view: self._on_image(v, "depth", msg), IMAGE_QOS))
        if self._executor is not None:
            self._spinner = threading.Thread(target=self._executor.spin, name="camera-views", daemon=True)
            self._spinner.start()

    def _on_info(self, view: str, msg: CameraInfo) -> None:
        """Keep the view's latest intrinsics."""
        with self._lock:
            self._views[view].info = msg

    def _on_depth_info(self, view: str, msg: CameraInfo) -> None:
        """Keep an unaligned view's depth intrinsics."""
        with self._lock:
            self._views[view].depth_info = msg

    def _on_image(self, view: str, kind: str, msg: Image) -> None:
        """Pair the image with its partner and, when complete, hand the frame to the synchronizer."""
        received_s = time.time()
        with self._lock:
            state = self._views[view]
            groups = state.pairer.add(kind, conversions.stamp_to_seconds(msg.header.stamp), msg)
            info, depth_info = state.info, state.depth_info
            T_color_depth = self._T_color_depth.get(view)
            if not groups or info is None:
                return
            depth = groups[-1].items.get("depth")
            if depth is not None and T_color_depth is not None and depth_info is None:
                return  # unaligned depth is unusable until its intrinsics arrive
            index = state.index
            state.index += 1
        frame = conversions.msgs_to_frame(
            groups[-1].items["color"], depth, info, camera_name=view, index=index, depth_info=depth_info,
            T_color_depth=T_color_depth,
        )
        self.synchronizer.add(view, frame)
        if self.on_frame is not None:
            self.on_frame(view, frame, received_s)

    def snapshot(self, now_s: float | None = None) -> MultiViewSnapshot:
        """The newest synchronised set of frames (raises robopin.cameras.SnapshotError)."""
        return self.synchronizer.snapshot(now_s)

    def close(self) -> None:
        """Remove the subscriptions from the node (with ``own_executor``: stop its thread, destroy the child node)."""
        if self._executor is not None:
            shutdown_executor(self._executor, self._spinner)
            self._executor = self._spinner = None
            self.node.destroy_node()
            self.subscriptions = []
            return
        for subscription in self.subscriptions:
            self.node.destroy_subscription(subscription)
        self.subscriptions = []
