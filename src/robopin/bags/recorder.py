"""Write a trial to a rosbag2 bag (MCAP) from raw CDR bytes, off the caller's thread.

:class:`BagWriter` takes serialized messages exactly as DDS delivered them (a ``raw=True``
subscription) and hands them to a writer thread through a bounded queue, so a subscription callback
costs one enqueue and never a decode. :class:`TrialRecorder` opens one bag per task: it keeps the
latest static transforms and writes them first in every bag (replays otherwise lack ``/tf_static``,
which was latched before the bag began), and turns each recorded ``PinnedReasoning`` into Foxglove
image annotations per view.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import queue
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robopin import messages
from robopin.bags.annotations import annotation_topic, reasoning_to_annotations
from robopin.bags.typestore import connection_definition, robopin_typestore
from robopin.interfaces import NODE_PARAMETERS_PREFIX, ROBOT_DESCRIPTION, TF, TF_STATIC
from robopin.system.names import absolute_name, normalize_namespace, strip_namespace
from robopin.system.node_settings import DEFAULT_FLUSH_INTERVAL_S

__all__ = [
    "DEFAULT_FLUSH_INTERVAL_S",
    "LATCHED_TOPICS",
    "PARAMETERS_PREFIX",
    "REASONING_TYPE",
    "TF_STATIC_TOPIC",
    "TF_TOPIC",
    "TF_TYPE",
    "BagClosedError",
    "BagStats",
    "BagWriter",
    "RecorderError",
    "StaticTransform",
    "TrialRecorder",
    "is_latched_topic",
]

logger = logging.getLogger(__name__)

# Bag names: as the root namespace has them (strip_namespace).
TF_STATIC_TOPIC = absolute_name(TF_STATIC)
TF_TOPIC = absolute_name(TF)
TF_TYPE = "tf2_msgs/msg/TFMessage"
# Latched topics other than /tf_static: the last message is written at the start of every bag, as the
# static transforms are (a bag that starts after the publisher latched it would lack it otherwise).
LATCHED_TOPICS = (absolute_name(ROBOT_DESCRIPTION),)
# recorder_node writes each configured node's parameters (YAML, std_msgs/String) on <prefix><node>,
# kept like a latched topic: a replay projects with the parameters the live projection_node had.
PARAMETERS_PREFIX = absolute_name(NODE_PARAMETERS_PREFIX)
# State a task starts from: the newest message of each such topic from before the bag began goes in,
# however old (a camera at 1 Hz, a still arm publishing rarely), so the frames the first observation
# took and the arm pose at them are in the bag.
STATE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CameraInfo", "sensor_msgs/msg/JointState",
               "geometry_msgs/msg/PoseStamped", "tf2_msgs/msg/TFMessage")
REASONING_TYPE = "robopin_interfaces/msg/PinnedReasoning"
_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def is_latched_topic(topic: str) -> bool:
    """Whether a recorder bag keeps ``topic`` as latched (transient local): written first, played first."""
    return topic == TF_STATIC_TOPIC or topic in LATCHED_TOPICS or topic.startswith(PARAMETERS_PREFIX + "/")


class RecorderError(RuntimeError):
    """The recorder cannot do what was asked (no task running, a bag already exists, bad task id)."""


class BagClosedError(RecorderError):
    """A message was written to a bag that is already closed."""


@dataclasses.dataclass(frozen=True)
class StaticTransform:
    """One fixed transform ``T_parent_child`` to publish on /tf_static (e.g. a calibrated camera)."""

    parent_frame: str
    child_frame: str
    T_parent_child: np.ndarray


@dataclasses.dataclass
class BagStats:
    """What one bag received and wrote; ``dropped`` counts messages refused because the queue was full."""

    path: Path
    messages: dict[str, int] = dataclasses.field(default_factory=dict)
    dropped: int = 0
    bytes_written: int = 0
    write_time_s: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.messages.values())


_STOP = object()


class BagWriter:
    """A rosbag2 MCAP writer fed raw CDR messages through a bounded queue drained by its own thread.

    Topics are added on first use with the type given; a message never waits for the disk: when the
    queue is full it is dropped and counted (the caller's callback must not stall DDS).
    """

    def __init__(self, path: str | Path, *, typestore: Any = None, queue_size: int = 2000,
                 storage: str = "mcap", qos: Mapping[str, Any] | None = None,
                 flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        if not flush_interval_s > 0:
            raise RecorderError(f"flush_interval_s must be > 0 seconds, got {flush_interval_s!r}")
        self.flush_interval_s = float(flush_interval_s)
        self.path = Path(path)
        if self.path.exists():
            raise RecorderError(f"bag {str(self.path)!r} already exists; choose a new path")
        plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
        if storage not in plugins:
            raise RecorderError(f"storage {storage!r} is unknown; expected one of {sorted(plugins)}")
        self.typestore = typestore or robopin_typestore()
        self._qos = dict(qos or {})
        self._writer = Writer(self.path, version=9, storage_plugin=plugins[storage])
        self._opened = threading.Event()
        self._connections: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self.stats = BagStats(self.path)
        self._error: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()
        # The storage is opened, written and closed on the writer thread alone (SQLite3 connections
        # must stay on the thread that made them).
        self._thread = threading.Thread(target=self._drain, name=f"bag-writer-{self.path.name}", daemon=True)
        self._thread.start()
        self._opened.wait()
        if self._error is not None:
            self._thread.join()
            raise RecorderError(f"cannot open bag {str(self.path)!r}: {self._error}") from self._error

    def write(self, topic: str, msgtype: str, data: bytes | memoryview, stamp_ns: int | None = None) -> bool:
        """Queue one serialized message; return False (and count it) when it had to be dropped."""
        if self._closed:
            raise BagClosedError(f"bag {str(self.path)!r} is closed; {topic} was not written")
        if self._error is not None:
            raise RecorderError(f"bag {str(self.path)!r} failed earlier: {self._error}") from self._error
        item = (topic, msgtype, bytes(data), time.time_ns() if stamp_ns is None else int(stamp_ns))
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.stats.dropped += 1
            return False
        return True

    def _connection(self, topic: str, msgtype: str) -> Any:
        connection = self._connections.get(topic)
        if connection is None:
            if msgtype not in self.typestore.fielddefs:
                raise RecorderError(f"topic {topic!r} has type {msgtype!r}, which the bag's typestore does not know")
            msgdef, rihs01 = connection_definition(self.typestore, msgtype)
            connection = self._writer.add_connection(topic, msgtype, msgdef=msgdef, rihs01=rihs01,
                                                     offered_qos_profiles=self._qos.get(topic, ()))
            self._connections[topic], self._types[topic] = connection, msgtype
        elif self._types[topic] != msgtype:
            raise RecorderError(f"topic {topic!r} was recorded as {self._types[topic]!r}, now offered as {msgtype!r}")
        return connection

    def _drain(self) -> None:
        try:
            self._writer.open()
        except BaseException as error:
            self._error = error
            return
        finally:
            self._opened.set()
        last_flush = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, last_flush + self.flush_interval_s - time.monotonic()))
            except queue.Empty:
                item = None
            if time.monotonic() - last_flush >= self.flush_interval_s:
                self._flush()
                last_flush = time.monotonic()
            if item is None:
                continue
            if item is _STOP:
                try:
                    self._writer.close()
                except BaseException as error:
                    self._error = self._error or error
                return
            topic, msgtype, data, stamp_ns = item
            started = time.perf_counter()
            try:
                self._writer.write(self._connection(topic, msgtype), stamp_ns, data)
            except BaseException as error:  # reported to the next write() and to close()
                logger.error("bag %s: writing %s failed: %s", self.path, topic, error)
                self._error = error
                continue
            with self._lock:
                self.stats.messages[topic] = self.stats.messages.get(topic, 0) + 1
                self.stats.bytes_written += len(data)
                self.stats.write_time_s += time.perf_counter() - started

    def _flush(self) -> None:
        """Put the messages written so far on disk as one complete MCAP chunk (see :mod:`robopin.bags.recover`).

        rosbags' MCAP writer keeps the open chunk in memory until it holds 1 MiB and writes summary,
        footer and metadata.yaml only on close; a recorder killed then loses everything since the last
        chunk. Closing the chunk every ``flush_interval_s`` bounds that loss; ``robopin bag recover``
        rebuilds the rest from the chunks.
        """
        storage = getattr(self._writer, "storage", None)
        chunk = getattr(storage, "chunk", None)
        if chunk is None or not chunk.bio.tell():
            return  # SQLite3 commits per write; an empty MCAP chunk needs nothing
        try:
            storage.close_chunk()
            storage.bio.flush()
        except BaseException as error:  # reported to the next write() and to close()
            logger.error("bag %s: flushing failed: %s", self.path, error)
            self._error = self._error or error

    def close(self) -> BagStats:
        """Write everything still queued, close the bag and return its statistics."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()
        if self._error is not None:
            raise RecorderError(f"bag {str(self.path)!r}: {self._error}") from self._error
        return self.stats


def _transient_local_qos() -> list[Any]:
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    never = QosTime(sec=0x7FFFFFFF, nsec=0xFFFFFFFF)
    return [Qos(QosHistory.KEEP_LAST, 1, QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL, never, never,
                QosLiveliness.AUTOMATIC, never, False)]


class TrialRecorder:
    """One bag per task under ``root``: start with a task, stop with it, static transforms first.

    Thread-safe: subscription callbacks call :meth:`record` from any thread. While no task runs the
    last ``preroll_s`` seconds of messages (at most ``preroll_bytes``) are kept and written right
    after the static transforms when a task starts: the task's first feedback and the frames the
    planner is about to observe often arrive just before the status that starts the bag. State topics
    (:data:`STATE_TYPES`: images, camera info, joint states, poses, /tf) keep ``state_preroll_s`` (the
    frames a first observation may take, a second or more old with 1 Hz cameras, and the arm poses
    around them) and the newest message of each goes in however old it is. ``/tf_static``, the latched
    :data:`LATCHED_TOPICS` and recorded node parameters are always remembered and written first. MCAP
    chunks are closed every ``flush_interval_s`` (see :class:`BagWriter`). ``namespace``: the recording
    node's ROS namespace; topics in it are written as the root namespace names them
    (:func:`robopin.system.names.strip_namespace`: ``/left/tf`` -> ``/tf``), so every reader, replay and
    report reads a namespaced robot's bag as any other.
    """

    def __init__(self, root: str | Path, *, static_transforms: Sequence[StaticTransform] = (),
                 typestore: Any = None, queue_size: int = 2000, annotate: bool = True, preroll_s: float = 1.0,
                 preroll_bytes: int = 256 * 2**20, flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 state_preroll_s: float = 3.0, namespace: str = "") -> None:
        if not preroll_s >= 0:
            raise RecorderError(f"preroll_s must be >= 0 seconds, got {preroll_s!r}")
        if not state_preroll_s >= 0:
            raise RecorderError(f"state_preroll_s must be >= 0 seconds, got {state_preroll_s!r}")
        self.state_preroll_s = state_preroll_s
        self.namespace = normalize_namespace(namespace)
        self.root = Path(root)
        self.preroll_s = preroll_s
        self.preroll_bytes = preroll_bytes
        self._preroll: collections.deque[tuple[str, str, bytes, int]] = collections.deque()
        self._preroll_size = 0
        self.typestore = typestore or robopin_typestore()
        self.queue_size = queue_size
        self.flush_interval_s = flush_interval_s
        self.annotate = annotate
        self._latched: dict[str, tuple[str, bytes]] = {}  # latched topic → (type, last message)
        self._latest_state: dict[str, tuple[str, str, bytes, int]] = {}  # state topic → newest message
        self._lock = threading.Lock()
        self._static: dict[str, Any] = {}  # child frame → geometry_msgs/TransformStamped (rosbags class)
        self._writer: BagWriter | None = None
        self.task_id = ""
        self.finished: list[BagStats] = []
        for transform in static_transforms:
            self.add_static_transform(transform)

    @property
    def recording(self) -> bool:
        return self._writer is not None

    def add_static_transform(self, transform: StaticTransform, stamp_ns: int = 0) -> None:
        """Remember one fixed transform; it is written at the start of every later bag."""
        types = self.typestore.types
        message = types["geometry_msgs/msg/TransformStamped"](
            header=types["std_msgs/msg/Header"](stamp=messages.time_msg_ns(types, stamp_ns),
                                                frame_id=transform.parent_frame),
            child_frame_id=transform.child_frame,
            transform=messages.transform_msg(types, transform.T_parent_child),
        )
        with self._lock:
            self._static[transform.child_frame] = message

    def _remember_static(self, data: bytes) -> None:
        # Low rate (a few latched messages per run), so decoding here costs nothing that matters.
        message = self.typestore.deserialize_cdr(bytes(data), TF_TYPE)
        with self._lock:
            for transform in message.transforms:
                self._static[transform.child_frame_id] = transform

    def static_transforms_message(self) -> bytes | None:
        """Every remembered static transform as one serialized TFMessage (None when there are none)."""
        with self._lock:
            transforms = list(self._static.values())
        if not transforms:
            return None
        message = self.typestore.types[TF_TYPE](transforms=transforms)
        return bytes(self.typestore.serialize_cdr(message, TF_TYPE))

    def start(self, task_id: str, stamp_ns: int | None = None) -> Path:
        """Open ``<root>/<task_id>`` as a new bag and write the static transforms into it first."""
        if not _TASK_ID.match(task_id):
            raise RecorderError(f"task id {task_id!r} must be letters, digits, '_', '-' or '.' (it names a folder)")
        with self._lock:
            if self._writer is not None:
                raise RecorderError(f"already recording task {self.task_id!r}; stop it before starting {task_id!r}")
        self.root.mkdir(parents=True, exist_ok=True)
        latched_qos = {topic: _transient_local_qos() for topic in (TF_STATIC_TOPIC, *LATCHED_TOPICS)}
        writer = BagWriter(self.root / task_id, typestore=self.typestore, queue_size=self.queue_size,
                           qos=latched_qos, flush_interval_s=self.flush_interval_s)
        static = self.static_transforms_message()
        now_ns = time.time_ns() if stamp_ns is None else stamp_ns
        with self._lock:
            latched = dict(self._latched)
            preroll, self._preroll, self._preroll_size = list(self._preroll), collections.deque(), 0
            oldest_ns = now_ns - round(self.preroll_s * 1e9)
            oldest_state_ns = now_ns - round(self.state_preroll_s * 1e9)
            preroll = [item for item in preroll if item[0] != TF_STATIC_TOPIC and item[0] not in latched and
                       item[3] >= (oldest_state_ns if item[1] in STATE_TYPES else oldest_ns)]
            in_window = {item[0] for item in preroll}
            state = sorted((item for topic, item in self._latest_state.items() if topic not in in_window),
                           key=lambda item: item[3])
            self._latest_state = {}
            earlier = [*state, *preroll]
            first_ns = min(earlier[0][3], now_ns) if earlier else now_ns
            if static is not None:
                writer.write(TF_STATIC_TOPIC, TF_TYPE, static, first_ns)
            for topic, (msgtype, data) in latched.items():
                writer.write(topic, msgtype, data, first_ns)
            for topic, msgtype, data, message_ns in earlier:
                writer.write(topic, msgtype, data, message_ns)
            self._writer, self.task_id = writer, task_id
        logger.info("recording task %s to %s", task_id, writer.path)
        return writer.path

    def record(self, topic: str, msgtype: str, data: bytes | memoryview, stamp_ns: int | None = None) -> bool:
        """Record one serialized message into the current task's bag; False when none runs or it was dropped."""
        topic = strip_namespace(topic, self.namespace)
        if msgtype == TF_TYPE and topic == TF_STATIC_TOPIC:
            self._remember_static(data)
        elif is_latched_topic(topic):
            with self._lock:
                self._latched[topic] = (msgtype, bytes(data))
        writer = self._writer
        if writer is None:
            if self.preroll_s > 0:
                self._keep_preroll(topic, msgtype, data, stamp_ns)
            return False
        try:
            written = writer.write(topic, msgtype, data, stamp_ns)
        except BagClosedError:
            return False  # the task stopped between the check and the write
        if written and self.annotate and msgtype == REASONING_TYPE:
            self._write_annotations(writer, data, stamp_ns)
        return written

    def _keep_preroll(self, topic: str, msgtype: str, data: bytes | memoryview, stamp_ns: int | None) -> None:
        now_ns = time.time_ns() if stamp_ns is None else int(stamp_ns)
        item = (topic, msgtype, bytes(data), now_ns)
        with self._lock:
            if self._writer is not None:
                return
            self._preroll.append(item)
            self._preroll_size += len(item[2])
            if msgtype in STATE_TYPES and topic != TF_STATIC_TOPIC:
                self._latest_state[topic] = item
            oldest_ns = now_ns - round(max(self.preroll_s, self.state_preroll_s) * 1e9)
            while self._preroll and (self._preroll[0][3] < oldest_ns or self._preroll_size > self.preroll_bytes):
                self._preroll_size -= len(self._preroll.popleft()[2])

    def _write_annotations(self, writer: BagWriter, data: bytes | memoryview, stamp_ns: int | None) -> None:
        reasoning = self.typestore.deserialize_cdr(bytes(data), REASONING_TYPE)
        for view, view_annotations in reasoning_to_annotations(reasoning, self.typestore).items():
            payload = self.typestore.serialize_cdr(view_annotations, "foxglove_msgs/msg/ImageAnnotations")
            try:
                writer.write(annotation_topic(view), "foxglove_msgs/msg/ImageAnnotations", bytes(payload), stamp_ns)
            except BagClosedError:
                return

    def stop(self) -> BagStats | None:
        """Close the current task's bag (None when no task was recording)."""
        with self._lock:
            writer, self._writer = self._writer, None
            task_id, self.task_id = self.task_id, ""
        if writer is None:
            return None
        stats = writer.close()
        self.finished.append(stats)
        logger.info("task %s: %d messages in %s (%d dropped)", task_id, stats.total, stats.path, stats.dropped)
        return stats

    def close(self) -> None:
        self.stop()


def record_messages(path: str | Path, messages: Iterable[tuple[str, str, bytes, int]], **kwargs: Any) -> BagStats:
    """Write ``(topic, type, raw CDR, stamp_ns)`` tuples to a new bag (test fixtures, conversions)."""
    writer = BagWriter(path, **kwargs)
    try:
        for topic, msgtype, data, stamp_ns in messages:
            while not writer.write(topic, msgtype, data, stamp_ns):
                time.sleep(0.001)  # offline: wait for room rather than drop
    finally:
        stats = writer.close()
    return stats
