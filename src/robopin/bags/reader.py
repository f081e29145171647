"""Read a trial bag — ours or one from ``ros2 bag record`` — topic by topic, raw or decoded.

:class:`TrialBag` wraps ``rosbags``' reader with robopin's types as the fallback typestore (so a
SQLite3 bag without embedded definitions still decodes our messages), and answers the questions
replay, stepping and reports ask: which topics, how many messages, in what time span.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from robopin.bags.typestore import robopin_typestore

__all__ = ["BagMessage", "BagNotFoundError", "TopicInfo", "TrialBag"]


class BagNotFoundError(FileNotFoundError):
    """The path is not a readable rosbag2 bag."""


@dataclasses.dataclass(frozen=True)
class BagMessage:
    """One recorded message: where, what type, when it was received (ns), and its CDR bytes."""

    topic: str
    msgtype: str
    stamp_ns: int
    data: bytes


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    topic: str
    msgtype: str
    count: int


class TrialBag:
    """A rosbag2 bag opened for reading (MCAP or SQLite3); use as a context manager."""

    def __init__(self, path: str | Path) -> None:
        from rosbags.highlevel import AnyReader

        self.path = Path(path)
        if not self.path.exists():
            raise BagNotFoundError(f"bag {str(self.path)!r} does not exist")
        if self.path.is_dir() and not (self.path / "metadata.yaml").exists() and any(self.path.glob("*.mcap")):
            raise BagNotFoundError(f"bag {str(self.path)!r} has no metadata.yaml: its recorder did not close it "
                                   f"(killed?); `robopin bag recover {self.path}` rebuilds it from its chunks")
        try:  # rosbags refuses a file that is no bag already here (unknown storage format)
            self._reader = AnyReader([self.path], default_typestore=robopin_typestore())
            self._reader.open()
        except Exception as error:
            raise BagNotFoundError(f"cannot open {str(self.path)!r} as a rosbag2 bag: {error}") from error

    def close(self) -> None:
        self._reader.close()

    def __enter__(self) -> TrialBag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Topic name → type and message count."""
        counts: dict[str, TopicInfo] = {}
        for connection in self._reader.connections:
            previous = counts.get(connection.topic)
            total = connection.msgcount + (previous.count if previous else 0)
            counts[connection.topic] = TopicInfo(connection.topic, connection.msgtype, total)
        return counts

    @property
    def start_ns(self) -> int:
        return int(self._reader.start_time)

    @property
    def end_ns(self) -> int:
        return int(self._reader.end_time)

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) * 1e-9

    def messages(self, topics: Collection[str] | None = None, *, start_ns: int | None = None,
                 stop_ns: int | None = None) -> Iterator[BagMessage]:
        """Recorded messages in receive-time order, optionally only ``topics`` and only in [start, stop)."""
        connections = [c for c in self._reader.connections if topics is None or c.topic in topics]
        if not connections:
            return
        for connection, stamp_ns, data in self._reader.messages(connections=connections, start=start_ns,
                                                                 stop=stop_ns):
            yield BagMessage(connection.topic, connection.msgtype, int(stamp_ns), bytes(data))

    def decode(self, message: BagMessage) -> Any:
        """The message as a ``rosbags`` object (fields named as in the .msg)."""
        return self._reader.deserialize(message.data, message.msgtype)

    def decoded(self, topics: Collection[str] | None = None) -> Iterator[tuple[BagMessage, Any]]:
        for message in self.messages(topics):
            yield message, self.decode(message)

    def types_differing_from(self, typestore: Any) -> dict[str, str]:
        """Topics whose recorded type has other fields than ``typestore``'s type of that name (topic -> type name),
        compared by their RIHS01 hashes (REP-2011: fields and nested types, not comments). A type ``typestore``
        lacks is not judged; a bag without definitions is read with robopin's own and never differs."""
        recorded = self._reader.typestore
        differing = {}
        for connection in self._reader.connections:
            name = connection.msgtype
            if name not in typestore.fielddefs or name not in recorded.fielddefs:
                continue
            if recorded.hash_rihs01(name) != typestore.hash_rihs01(name):
                differing[connection.topic] = name
        return differing

    def message_definition(self, topic: str) -> tuple[str, str]:
        """(type, embedded definition text) of a topic, as written in the bag."""
        for connection in self._reader.connections:
            if connection.topic == topic:
                return connection.msgtype, connection.msgdef.data
        raise KeyError(f"bag {str(self.path)!r} has no topic {topic!r}")
