"""replay_node: republishes a trial bag on its original schedule (rate, loop, start offset, topic filters).

Raw CDR bytes go straight to publishers of the recorded types (no decode); ``/tf_static``,
``/robot_description`` and recorded parameters are published latched (transient local) and sent first
even with a start offset, so consumers (RViz, tf2) can place the cameras and the robot; ``/tf`` follows
in recorded order. Topics whose type this environment cannot import are skipped and named in the log. Topics
go out under the node's namespace (``/left/cameras/...`` with ``-r __ns:=/left``). Run::

    ros2 run robopin_ros replay_node --ros-args -p bag:=trials/bags/task-1234 -p rate:=0.5 -p loop:=true
"""

from __future__ import annotations

import math
import threading
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from robopin.bags import ReplayOptions, TrialBag, replay
from robopin.bags.recorder import is_latched_topic
from robopin_ros.logs import LoggedNode
from robopin_ros.parameters import declare
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
        declare(self, "bag", "", "path of the bag to replay")
        declare(self, "rate", 1.0, "playback speed factor (0: as fast as possible)", min=0.0)
        declare(self, "loop", False, "replay again from the start when the bag ends")
        declare(self, "start_offset_s", 0.0, "seconds into the bag to start from", min=0.0)
        declare(self, "topics", [""], "topics to replay (empty: all)")
        declare(self, "exclude", [""], "topics not to replay")
        rate = float(self.get_parameter("rate").value)
        self.options = ReplayOptions(
            rate=math.inf if rate == 0 else rate, loop=bool(self.get_parameter("loop").value),
            start_offset_s=float(self.get_parameter("start_offset_s").value),
            topics=tuple(t for t in self.get_parameter("topics").value if t),
            exclude=tuple(t for t in self.get_parameter("exclude").value if t))
        self.bag = TrialBag(str(self.get_parameter("bag").value))
        self.publishers_by_topic: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}
        for info in self.bag.topics.values():
            try:
                cls = message_class(info.msgtype)
            except (ImportError, AttributeError, ValueError):
                self.skipped[info.topic] = info.msgtype
                continue
            qos = _LATCHED_QOS if is_latched_topic(info.topic) else _QOS
            # A bag holds root-namespace names (TrialRecorder): relative here, they land in this node's namespace.
            self.publishers_by_topic[info.topic] = self.create_publisher(cls, info.topic.lstrip("/"), qos)
        if self.skipped:
            self.get_logger().warning(f"not replaying topics of types this environment lacks: {self.skipped}")
        self.stop = threading.Event()
        self.stats = None
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
            self.get_logger().error(f"replay of {self.bag.path} failed: {error}")
        finally:
            self.done.set()

    def destroy_node(self) -> None:
        self.stop.set()
        self._worker.join(timeout=5)
        self.bag.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    return run_node(ReplayNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
