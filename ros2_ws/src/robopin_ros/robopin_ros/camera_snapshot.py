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
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_policy_name_from_kind, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image

from robopin.cameras import Frame, MultiViewSnapshot, SnapshotConfig, SnapshotError, SnapshotSynchronizer
from robopin.cameras.memory import retain_freed_image_memory
from robopin.cameras.pairing import StampPairer
from robopin.cameras.snapshot import PoseSource
from robopin.cameras.topics import CAMERA_ROOT, ViewTopics
from robopin.cameras.topics import view_topics as core_view_topics
from robopin_ros import conversions
from robopin_ros.parameters import declare
from robopin_ros.runtime import StreamSpinner

# The QoS of a view's topics, publisher (camera_node) and subscribers alike, by the view's ``qos`` setting
# (robopin.cameras.topics.CAMERA_QOS). Reliable: a few frames of history let a subscriber that is briefly
# late still get every frame. sensor_data: rmw's qos_profile_sensor_data (best effort, keep last 5), what
# realsense-ros publishes with <stream>_qos:=SENSOR_DATA.
IMAGE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=ReliabilityPolicy.RELIABLE)
_CAMERA_QOS = {"reliable": IMAGE_QOS, "sensor_data": qos_profile_sensor_data}
_TOPIC_SETTINGS = {
    "driver": "camera driver whose topic layout the view has: robopin, realsense or zed",
    "prefix": "topic prefix of the view (empty: the driver's default with camera name = view, e.g. /cameras/<view>)",
    "qos": "QoS the view's driver publishes with: reliable or sensor_data (empty: the driver's default)",
    "color": "color image topic (empty: the driver's; relative names are under the prefix)",
    "info": "color camera_info topic (empty: the driver's)",
    "depth": "depth registered to color (16UC1 mm or 32FC1 m; empty: the driver's)",
}


def camera_qos(qos: str, depth: int | None = None) -> QoSProfile:
    """The QoS profile of a view's ``qos`` setting (``depth`` replaces its history depth)."""
    profile = _CAMERA_QOS[qos]
    if depth is None:
        return profile
    return QoSProfile(history=profile.history, depth=depth, reliability=profile.reliability,
                      durability=profile.durability)


def declare_view_topics(node: Node, views: Sequence[str], *,
                        robopin_root: str = CAMERA_ROOT) -> dict[str, ViewTopics]:
    """Declare ``cameras.<view>.{driver,prefix,qos,color,info,depth}`` on ``node`` and resolve each view's topics.

    The one place a node learns where its camera views publish (robopin.cameras.topics.view_topics);
    the system file's ``cameras:`` section sets these parameters on every node that uses camera topics.
    """
    topics = {}
    for view in views:
        settings = {key: str(declare(node, f"cameras.{view}.{key}", "", f"view {view}: {text}"))
                    for key, text in _TOPIC_SETTINGS.items()}
        topics[view] = core_view_topics(view, robopin_root=robopin_root, **settings)
    return topics


def view_topics(view: str, *, unaligned: bool = False) -> dict[str, str]:
    """Our camera_node's default topic names of ``view`` (``unaligned``: depth in the depth imager's frame,
    as camera_node publishes it with ``align_depth:=false``, with its own info)."""
    return core_view_topics(view).names(unaligned=unaligned)


class QosMismatchWatch:
    """Incompatible-QoS events of a node's camera endpoints, reported by name (``camera_qos_mismatch``).

    A RELIABLE subscription never matches a BEST_EFFORT publisher and DDS delivers nothing, silently;
    rclpy raises an incompatible-QoS event on both endpoints, which this turns into an error log naming
    the view, the topic, both sides' reliability and the setting to change, and keeps per view.
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self.mismatches: dict[str, str] = {}  # view -> message of its latest mismatch
        self._lock = threading.Lock()

    def subscription_events(self, topics: ViewTopics, topic: str) -> SubscriptionEventCallbacks:
        return SubscriptionEventCallbacks(
            incompatible_qos=lambda event: self._report(topics, topic, event, "publisher"))

    def publisher_events(self, topics: ViewTopics, topic: str) -> PublisherEventCallbacks:
        return PublisherEventCallbacks(
            incompatible_qos=lambda event: self._report(topics, topic, event, "subscription"))

    def _report(self, topics: ViewTopics, topic: str, event, other: str) -> None:
        policy = qos_policy_name_from_kind(event.last_policy_kind)
        try:
            peers = (self.node.get_publishers_info_by_topic(topic) if other == "publisher"
                     else self.node.get_subscriptions_info_by_topic(topic))
            offered = sorted({p.qos_profile.reliability.name.lower() for p in peers})
        except Exception:  # graph queries can fail during shutdown; the report stands without them
            offered = []
        message = (f"camera_qos_mismatch: view {topics.view!r} topic {topic}: a {other} with incompatible QoS "
                   f"(policy {policy}; this side {topics.qos!r}, {other}s {offered or 'unknown'}) gets no "
                   f"messages; set cameras.{topics.view}.qos to what the driver publishes "
                   "(sensor_data for best effort, reliable)")
        with self._lock:
            self.mismatches[topics.view] = message
        self.node.get_logger().error(message)


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
        topics: Mapping[str, ViewTopics] | None = None,
    ) -> None:
        """``unaligned_depth``: view → T_color_depth (4x4) for views whose camera_node leaves depth
        unaligned (``align_depth:=false``); their frames keep depth in the depth imager's frame
        (``Frame.aligned_depth_m()`` registers it when needed). ``topics``: view → its topic names and
        QoS (:func:`declare_view_topics`); a view missing there has our camera_node's defaults. Frames age on
        ``node``'s clock (a simulated system's: the simulator's, /clock)."""
        # Received images are megabyte buffers freed a frame later: keep them mapped in this process.
        retain_freed_image_memory()
        self._streams = StreamSpinner(node, "cameras") if own_executor else None
        if self._streams is not None:
            node = self._streams.node
        self.node = node
        self.synchronizer = SnapshotSynchronizer(config, poses=poses, clock=self.now_s)
        self.on_frame = on_frame
        self._lock = threading.Lock()
        self._frame_added = threading.Condition()
        self.frames_added = 0  # frames handed to the synchronizer so far (wait_for_frame waits on it)
        self._views = {v: _View(require_depth, pair_tolerance_s) for v in config.views}
        unaligned = dict(unaligned_depth or {})
        unknown = sorted(set(unaligned) - set(config.views))
        if unknown:
            raise ValueError(f"unaligned_depth names unknown views {unknown}; views: {list(config.views)}")
        self._T_color_depth = {v: np.asarray(T, dtype=np.float64).reshape(4, 4) for v, T in unaligned.items()}
        self.subscriptions = []
        self.qos_watch = QosMismatchWatch(node)
        self.topics = {v: (topics or {}).get(v) or core_view_topics(v) for v in config.views}

        def subscribe(msg_type, view: str, topic: str, callback) -> None:
            self.subscriptions.append(node.create_subscription(
                msg_type, topic, callback, camera_qos(self.topics[view].qos),
                event_callbacks=self.qos_watch.subscription_events(self.topics[view], topic)))

        for view in config.views:
            names = self.topics[view].names(unaligned=view in self._T_color_depth)
            subscribe(CameraInfo, view, names["info"], lambda msg, v=view: self._on_info(v, msg))
            if require_depth and "depth_info" in names:
                subscribe(CameraInfo, view, names["depth_info"], lambda msg, v=view: self._on_depth_info(v, msg))
            subscribe(Image, view, names["color"], lambda msg, v=view: self._on_image(v, "color", msg))
            if require_depth:
                subscribe(Image, view, names["depth"], lambda msg, v=view: self._on_image(v, "depth", msg))
        if self._streams is not None:
            self._streams.start()

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
        with self._frame_added:
            self.frames_added += 1
            self._frame_added.notify_all()
        if self.on_frame is not None:
            self.on_frame(view, frame, received_s)

    def now_s(self) -> float:
        """Now on the frames' clock (the node's: a simulated system's nodes run on the simulator's), converted as
        their stamps are: a still simulated cell's frames then carry exactly the time its clock stands at."""
        return conversions.stamp_to_seconds(self.node.get_clock().now().to_msg())

    def wait_for_frame(self, after: int, timeout_s: float) -> bool:
        """Wait until a frame beyond the first ``after`` (a ``frames_added`` read earlier) has arrived."""
        with self._frame_added:
            return self._frame_added.wait_for(lambda: self.frames_added > after, timeout=max(0.0, timeout_s))

    def snapshot(self, now_s: float | None = None) -> MultiViewSnapshot:
        """The newest synchronised set of frames (raises robopin.cameras.SnapshotError).

        A view without frames whose publisher's QoS cannot match is refused as ``camera_qos_mismatch``.
        """
        try:
            return self.synchronizer.snapshot(now_s)
        except SnapshotError as error:
            mismatched = [v for v in error.views if v in self.qos_watch.mismatches]
            if error.reason != "stale_frame" or not mismatched:
                raise
            raise SnapshotError("camera_qos_mismatch", "; ".join(self.qos_watch.mismatches[v] for v in mismatched),
                                mismatched) from None

    def close(self) -> None:
        """Remove the subscriptions from the node (with ``own_executor``: stop its thread, destroy the child node)."""
        if self._streams is not None:
            self._streams.close()
            self._streams = None
            self.subscriptions = []
            return
        for subscription in self.subscriptions:
            self.node.destroy_subscription(subscription)
        self.subscriptions = []
