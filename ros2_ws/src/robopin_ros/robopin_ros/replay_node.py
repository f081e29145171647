"""replay_node: republishes a trial bag on its original schedule (rate, loop, start offset, topic filters).

Raw CDR bytes go straight to publishers of the recorded types (no decode); ``/tf_static``,
``/robot_description`` and recorded parameters are published latched (transient local) and sent first
even with a start offset, so consumers (RViz, tf2) can place the cameras and the robot; ``/tf`` follows
in recorded order. Topics whose type this environment cannot import are skipped and named in the log. Topics
go out under the node's namespace (``/left/cameras/...`` with ``-r __ns:=/left``). Run::

    ros2 run robopin_ros replay_node --ros-args -p bag:=trials/bags/task-1234 -p rate:=0.5 -p loop:=true

Run as a process (``main``, ``robopin bag play``) it exits at the end of the bag unless ``loop`` is set, at any
rate (``rate:=0.0``: as fast as possible), after giving reliable subscribers up to ``ACK_WAIT_S`` to acknowledge.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from robopin.bags import ReplayOptions, TrialBag, replay
from robopin.bags.recorder import is_latched_topic
from robopin.bags.typestore import robopin_typestore
from robopin.system.node_settings import ReplaySettings, settings_from
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare_settings
from robopin_ros.recorder_node import message_class
from robopin_ros.runtime import run_node

_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=30, reliability=ReliabilityPolicy.RELIABLE)
_LATCHED_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)


class ReplayNode(LoggedNode):
    """Publishes a bag's messages on a worker thread at their recorded times divided by ``rate``."""

    # Publishing from the bag: short callbacks only.
    EXECUTOR_THREADS = 1  # robopin_ros.runtime.make_executor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("replay_node", **kwargs)
        settings = settings_from(ReplaySettings, declare_settings(self, ReplaySettings()))
        self.options = ReplayOptions(
            rate=math.inf if settings.rate == 0 else settings.rate, loop=settings.loop,
            start_offset_s=settings.start_offset_s, topics=tuple(settings.topics), exclude=tuple(settings.exclude))
        self.bag = TrialBag(settings.bag)
        self.publishers_by_topic: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}  # topic -> its recorded type, for the topics not replayed
        self.skip_reasons: dict[str, str] = {}  # topic -> why it is not replayed
        # Raw bytes of a type whose fields changed since the bag was recorded do not decode in a subscriber of this
        # environment's type (Fast DDS drops them without a word): such topics are left out, and named.
        changed = self.bag.types_differing_from(robopin_typestore())
        for info in self.bag.topics.values():
            try:
                cls = message_class(info.msgtype)
            except (ImportError, AttributeError, ValueError):
                self.skipped[info.topic] = info.msgtype
                self.skip_reasons[info.topic] = f"{info.msgtype}: this environment lacks the type"
                continue
            if info.topic in changed:
                self.skipped[info.topic] = info.msgtype
                self.skip_reasons[info.topic] = (f"{info.msgtype}: recorded with another definition of the type than "
                                                 f"this environment's (a subscriber could not decode it)")
                continue
            qos = _LATCHED_QOS if is_latched_topic(info.topic) else _QOS
            # A bag holds root-namespace names (TrialRecorder): relative here, they land in this node's namespace.
            self.publishers_by_topic[info.topic] = self.create_publisher(cls, info.topic.lstrip("/"), qos)
        for topic, why in self.skip_reasons.items():
            self.get_logger().warning(f"not replaying {topic}: {why}")
        self.stop = threading.Event()
        self.stats = None
        self.error: Exception | None = None  # why the replay failed, once it has
        self.done = threading.Event()
        self._worker = threading.Thread(target=self._run, name="bag-replay", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        """Replay the bag, then log the measured lateness."""
        def publish(message) -> None:
            publisher = self.publishers_by_topic.get(message.topic)
            if publisher is not None:
                publisher.publish(message.data)

        try:
            self.stats = replay(self.bag, publish, self.options, stop=self.stop)
            late = self.stats.lateness_summary_ms()
            self.get_logger().info(f"replayed {self.stats.total} messages; lateness p50 {late['p50']:.2f} ms, "
                                   f"p95 {late['p95']:.2f} ms, max {late['max']:.2f} ms")
        except Exception as error:  # reported, never silent
            self.error = error
            self.get_logger().error(f"replay of {self.bag.path} failed: {error}")
        finally:
            self.done.set()

    def destroy_node(self) -> None:
        self.stop.set()
        self._worker.join(timeout=5)
        self.bag.close()
        super().destroy_node()


ACK_WAIT_S = 2.0
"""How long a replay run as a process waits, after its last message, for reliable subscribers to acknowledge it."""


def _exit_when_done(node: ReplayNode) -> None:
    """End this process once the bag has played out, as ``ros2 bag play`` does (not when looping)."""
    node.done.wait()
    from rclpy.duration import Duration

    for publisher in list(node.publishers_by_topic.values()):  # the bag's tail reaches its readers first
        # A publisher already destroyed by a stop in between has nothing left to wait for.
        with contextlib.suppress(Exception):
            publisher.wait_for_all_acked(Duration(seconds=ACK_WAIT_S))
    node.get_logger().info("end of the bag: stopping")
    # run_node (robopin_ros.runtime) stops its node on SIGTERM: the same clean shutdown as an external stop.
    signal.raise_signal(signal.SIGTERM)


def main(args: list[str] | None = None) -> int:
    """Run the node until the bag has played out (with ``loop``: until Ctrl-C or SIGTERM); 1 when the replay failed."""
    made: list[ReplayNode] = []

    def node(**kwargs: Any) -> ReplayNode:
        made.append(ReplayNode(**kwargs))
        if not made[-1].options.loop:
            threading.Thread(target=_exit_when_done, args=(made[-1],), name="replay-exit", daemon=True).start()
        return made[-1]

    node.__name__ = ReplayNode.__name__  # run_node names a node that did not start by its factory's name
    code = run_node(node, args)
    return 1 if code == 0 and made and made[-1].error is not None else code
