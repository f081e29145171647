"""Republish a bag on its original schedule: rate factor, loop, start offset, topic filters, stepping.

The core decides *when* each message is due and measures how late it actually went out; the caller
supplies the ``publish(message)`` function (an rclpy publisher in ``replay_node``, a list in tests).
Static transforms and the other latched topics (``/robot_description``, recorded parameters) are sent
first, before any timed message and even when the start offset skips past them, because a replay
without ``/tf_static`` cannot place its cameras; ``/tf`` and everything else follow in recorded order.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from robopin.bags.reader import BagMessage, TrialBag
from robopin.bags.recorder import is_latched_topic
from robopin.stats import summarize

__all__ = ["ReplayError", "ReplayOptions", "ReplayStats", "frames", "replay", "select_topics"]


class ReplayError(ValueError):
    """Replay options that cannot work (rate ≤ 0, offset past the end, a filter matching nothing)."""


@dataclasses.dataclass(frozen=True)
class ReplayOptions:
    """How to replay.

    Attributes:
        rate: playback speed factor (2.0 = twice as fast); ``math.inf`` publishes as fast as possible.
        loop: start again at the end until stopped (or ``max_loops`` passes).
        start_offset_s: skip this much of the bag's beginning (static transforms are still sent).
        topics: shell patterns of topics to include (empty = all).
        exclude: shell patterns of topics to leave out.
        max_loops: with ``loop``, stop after this many passes (0 = forever).
    """

    rate: float = 1.0
    loop: bool = False
    start_offset_s: float = 0.0
    topics: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_loops: int = 0

    def __post_init__(self) -> None:
        if not (self.rate > 0):
            raise ReplayError(f"rate must be > 0 (math.inf for as fast as possible), got {self.rate!r}")
        if not (math.isfinite(self.start_offset_s) and self.start_offset_s >= 0):
            raise ReplayError(f"start_offset_s must be a finite number of seconds >= 0, got {self.start_offset_s!r}")
        if self.max_loops < 0:
            raise ReplayError(f"max_loops must be >= 0, got {self.max_loops}")
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "exclude", tuple(self.exclude))


@dataclasses.dataclass
class ReplayStats:
    """What a replay published and how far each message was from its due time (positive = late)."""

    published: dict[str, int] = dataclasses.field(default_factory=dict)
    lateness_s: list[float] = dataclasses.field(default_factory=list)
    loops: int = 0

    @property
    def total(self) -> int:
        return sum(self.published.values())

    def lateness_summary_ms(self) -> dict[str, float]:
        """Median, 95th percentile and maximum lateness in milliseconds (NaN when nothing was timed)."""
        summary = summarize(self.lateness_s).scaled(1e3)
        return {"p50": summary.median, "p95": summary.p95, "max": summary.max}


def select_topics(available: Sequence[str], options: ReplayOptions) -> list[str]:
    """The bag's topics that the include/exclude patterns keep."""
    kept = [t for t in available if not options.topics or any(fnmatch.fnmatchcase(t, p) for p in options.topics)]
    kept = [t for t in kept if not any(fnmatch.fnmatchcase(t, p) for p in options.exclude)]
    if options.topics and not kept:
        raise ReplayError(f"topic filters {list(options.topics)} match none of the bag's topics {sorted(available)}")
    return kept


_END = object()


def _prefetched(messages: Iterator[BagMessage], depth: int, stop: threading.Event) -> Iterator[BagMessage]:
    """Read ahead on a thread so reading a large message never delays sending the one before it is due."""
    buffer: queue.Queue[Any] = queue.Queue(maxsize=depth)

    def read() -> None:
        try:
            for message in messages:
                while not stop.is_set():
                    try:
                        buffer.put(message, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            buffer.put(_END)
        except BaseException as error:  # handed to the consumer below
            buffer.put(error)

    reader = threading.Thread(target=read, name="bag-prefetch", daemon=True)
    reader.start()
    while True:
        item = buffer.get()
        if item is _END:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def replay(
    bag: TrialBag,
    publish: Callable[[BagMessage], None],
    options: ReplayOptions | None = None,
    *,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    prefetch: int = 32,
) -> ReplayStats:
    """Publish the bag's messages, each ``(recorded offset) / rate`` after the start; return the statistics."""
    options = options or ReplayOptions()
    topics = select_topics(list(bag.topics), options)
    start_ns = bag.start_ns + round(options.start_offset_s * 1e9)
    if start_ns > bag.end_ns:
        raise ReplayError(f"start offset {options.start_offset_s} s is past the end of the "
                          f"{bag.duration_s:.3f} s bag {str(bag.path)!r}")
    stats = ReplayStats()
    stop = stop or threading.Event()

    def send(message: BagMessage) -> None:
        publish(message)
        stats.published[message.topic] = stats.published.get(message.topic, 0) + 1

    # Latched topics (static transforms, the robot description, recorded parameters) go out first, before
    # any timed message, as a live transient-local publisher hands them to a late subscriber.
    latched = [t for t in topics if is_latched_topic(t)]
    if latched:
        for message in bag.messages(latched, stop_ns=start_ns + 1):
            send(message)
    while not stop.is_set():
        origin_wall: float | None = None
        messages = bag.messages(topics, start_ns=start_ns)
        done = threading.Event()
        for message in _prefetched(messages, prefetch, done) if prefetch > 0 else messages:
            if stop.is_set():
                break
            if stats.loops == 0 and message.stamp_ns <= start_ns and message.topic in latched:
                continue  # already sent first
            if origin_wall is None:
                origin_wall = clock()
            if math.isfinite(options.rate):
                due = origin_wall + (message.stamp_ns - start_ns) * 1e-9 / options.rate
                wait = due - clock()
                while wait > 0 and not stop.is_set():
                    sleep(min(wait, 0.05))
                    wait = due - clock()
                send(message)
                stats.lateness_s.append(clock() - due)
            else:
                send(message)
        done.set()
        stats.loops += 1
        if not options.loop or (options.max_loops and stats.loops >= options.max_loops):
            break
    return stats


def frames(bag: TrialBag, topic: str) -> Iterator[tuple[BagMessage, list[BagMessage]]]:
    """Step through a bag one message of ``topic`` at a time (e.g. a color image).

    Yields each message of ``topic`` with the messages of every other topic received since the
    previous one, so a frame-by-frame viewer can show what else happened in between.
    """
    if topic not in bag.topics:
        raise ReplayError(f"bag {str(bag.path)!r} has no topic {topic!r}; it has {sorted(bag.topics)}")
    between: list[BagMessage] = []
    for message in bag.messages():
        if message.topic == topic:
            yield message, between
            between = []
        else:
            between.append(message)
