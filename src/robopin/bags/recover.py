"""Recover a bag whose recorder was killed: rebuild the MCAP summary, footer and metadata.yaml from its chunks.

A killed recorder leaves ``<bag>/<bag>.mcap`` without summary and footer and no ``metadata.yaml``
(rosbags writes both on close), so neither ``ros2 bag`` nor rosbags opens it. Everything up to the last
complete record is still on disk: robopin's recorder closes its MCAP chunk at least every
``flush_interval_s`` (see :class:`robopin.bags.recorder.BagWriter`), and schema and channel records sit
inside the chunks (rosbags' writer puts them there), so each complete chunk can be read on its own.
:func:`recover_bag` scans the records in file order as the MCAP specification lays them out (magic,
then ``opcode u8 | length u64 | body``), stops at the first truncated record, and writes the messages
it found into a fresh bag at the original path — the same job ``ros2 bag reindex`` does for a bag whose
metadata is missing. The damaged folder is kept next to it as ``<bag>.damaged``.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any

__all__ = ["BagRecoveryError", "RecoveryReport", "recover_bag", "scan_mcap"]

# MCAP specification (foxglove/mcap, specification/README.md): magic and record opcodes.
MCAP_MAGIC = b"\x89MCAP0\r\n"
_SCHEMA, _CHANNEL, _MESSAGE, _CHUNK, _DATA_END, _FOOTER = 0x03, 0x04, 0x05, 0x06, 0x0F, 0x02


class BagRecoveryError(RuntimeError):
    """The path holds nothing a bag can be rebuilt from (no MCAP file, not MCAP, no complete chunk)."""


@dataclasses.dataclass(frozen=True)
class _Schema:
    name: str
    encoding: str
    data: str


@dataclasses.dataclass(frozen=True)
class _Channel:
    topic: str
    schema_id: int
    message_encoding: str
    metadata: dict[str, str]


@dataclasses.dataclass
class McapScan:
    """What a scan of a possibly truncated MCAP file found."""

    schemas: dict[int, _Schema] = dataclasses.field(default_factory=dict)
    channels: dict[int, _Channel] = dataclasses.field(default_factory=dict)
    messages: list[tuple[int, int, bytes]] = dataclasses.field(default_factory=list)  # (channel, log_time, data)
    complete: bool = False  # the footer was reached
    truncated_at: int | None = None  # byte offset of the first incomplete record


@dataclasses.dataclass(frozen=True)
class RecoveryReport:
    path: Path
    damaged_path: Path | None
    messages: int
    topics: dict[str, int]
    duration_s: float
    was_complete: bool


class _Cursor:
    def __init__(self, data: bytes | memoryview) -> None:
        self.data, self.offset = memoryview(data), 0

    def take(self, size: int) -> memoryview:
        if self.offset + size > len(self.data):
            raise EOFError
        part = self.data[self.offset:self.offset + size]
        self.offset += size
        return part

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> str:
        return bytes(self.take(self.u32())).decode("utf-8")

    def string_map(self) -> dict[str, str]:
        end = self.u32() + self.offset
        items = {}
        while self.offset < end:
            key = self.string()
            items[key] = self.string()
        return items


def _decompress(data: bytes, compression: str, size: int) -> bytes:
    if compression == "":
        return data
    if compression == "zstd":
        try:
            from compression import zstd  # Python 3.14
        except ImportError:
            from backports import zstd  # rosbags' own dependency
        return zstd.decompress(data)
    if compression == "lz4":
        from lz4.frame import decompress

        return decompress(data)
    raise BagRecoveryError(f"chunk compression {compression!r} is not one MCAP defines (zstd, lz4, none)")


def _read_records(cursor: _Cursor, scan: McapScan, *, top_level: bool) -> None:
    while cursor.offset < len(cursor.data):
        start = cursor.offset
        try:
            opcode = cursor.take(1)[0]
            body = _Cursor(cursor.take(cursor.u64()))
        except EOFError:
            if top_level:
                scan.truncated_at = start
            return
        if opcode == _SCHEMA:
            schema_id = body.u16()
            name, encoding = body.string(), body.string()
            scan.schemas[schema_id] = _Schema(name, encoding, bytes(body.take(body.u32())).decode("utf-8"))
        elif opcode == _CHANNEL:
            channel_id, schema_id = body.u16(), body.u16()
            topic, encoding = body.string(), body.string()
            scan.channels[channel_id] = _Channel(topic, schema_id, encoding, body.string_map())
        elif opcode == _MESSAGE:
            channel_id = body.u16()
            body.u32()  # sequence
            log_time = body.u64()
            body.u64()  # publish time
            scan.messages.append((channel_id, log_time, bytes(body.data[body.offset:])))
        elif opcode == _CHUNK and top_level:
            body.u64(), body.u64()  # message start / end time
            uncompressed_size = body.u64()
            body.u32()  # crc of the uncompressed records (0: not computed, as rosbags writes)
            compression = body.string()
            records = bytes(body.take(body.u64()))
            _read_records(_Cursor(_decompress(records, compression, uncompressed_size)), scan, top_level=False)
        elif opcode == _FOOTER and top_level:
            scan.complete = True
            return
        # Everything else (indexes, statistics, metadata, attachments, summary) is rebuilt, not read.


def scan_mcap(path: str | Path) -> McapScan:
    """Schemas, channels and messages of every complete record of an MCAP file, in file order."""
    data = Path(path).read_bytes()
    if not data.startswith(MCAP_MAGIC):
        raise BagRecoveryError(f"{str(path)!r} is not an MCAP file (no MCAP magic at its start)")
    scan = McapScan()
    _read_records(_Cursor(memoryview(data)[len(MCAP_MAGIC):]), scan, top_level=True)
    return scan


def _mcap_file(bag: Path) -> Path:
    if bag.is_file():
        return bag
    files = sorted(bag.glob("*.mcap"))
    if len(files) != 1:
        raise BagRecoveryError(f"bag folder {str(bag)!r} holds {len(files)} .mcap files; expected exactly one")
    return files[0]


def _typestore_for(schemas: Any) -> Any:
    """robopin's typestore, or a copy of it extended by the schemas of types it does not know."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from robopin.bags.typestore import robopin_typestore

    typestore = robopin_typestore()
    unknown = [s for s in schemas if s.name not in typestore.fielddefs]
    if not unknown:
        return typestore
    extended = get_typestore(Stores.ROS2_JAZZY)  # the shared one stays read-only
    extended.register(dict(typestore.fielddefs))
    for schema in unknown:  # a type robopin does not know: its definition travels in the schema record
        extended.register(get_types_from_msg(schema.data, schema.name))
    return extended


def _connection_args(channel: _Channel, schema: _Schema, typestore: Any) -> dict[str, Any]:
    from rosbags.rosbag2.metadata import parse_qos

    qos = channel.metadata.get("offered_qos_profiles", "")
    return {"msgdef": schema.data, "rihs01": typestore.hash_rihs01(schema.name),
            "serialization_format": channel.message_encoding, "offered_qos_profiles": parse_qos(qos) if qos else ()}


def recover_bag(path: str | Path) -> RecoveryReport:
    """Rebuild the bag at ``path`` (folder or its .mcap) from its complete records; see the module docstring.

    A bag that already has its footer and metadata.yaml is left as it is (``was_complete``).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer

    path = Path(path)
    if not path.exists():
        raise BagRecoveryError(f"bag {str(path)!r} does not exist")
    mcap = _mcap_file(path)
    folder = mcap.parent
    scan = scan_mcap(mcap)
    counts: dict[str, int] = {}
    for channel_id, _, _ in scan.messages:
        topic = scan.channels[channel_id].topic if channel_id in scan.channels else f"<channel {channel_id}>"
        counts[topic] = counts.get(topic, 0) + 1
    times = [t for _, t, _ in scan.messages]
    duration_s = (max(times) - min(times)) * 1e-9 if times else 0.0
    if scan.complete and (folder / "metadata.yaml").is_file():
        return RecoveryReport(folder, None, len(scan.messages), counts, duration_s, True)
    if not scan.messages:
        raise BagRecoveryError(f"{str(mcap)!r} holds no complete message record (truncated at byte "
                               f"{scan.truncated_at}); nothing to recover")
    orphans = sorted({c for c, _, _ in scan.messages if c not in scan.channels or
                      scan.channels[c].schema_id not in scan.schemas})
    if orphans:
        raise BagRecoveryError(f"{str(mcap)!r}: messages of channels {orphans} whose channel or schema record "
                               "was lost; the file was not written by rosbags' or rosbag2's MCAP writer")
    damaged = folder.with_name(folder.name + ".damaged")
    if damaged.exists():
        raise BagRecoveryError(f"{str(damaged)!r} exists (an earlier recovery?); move it away first")
    folder.rename(damaged)
    typestore = _typestore_for(scan.schemas.values())
    writer = Writer(folder, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    try:
        connections = {}
        for channel_id, channel in sorted(scan.channels.items()):
            schema = scan.schemas[channel.schema_id]
            connections[channel_id] = writer.add_connection(channel.topic, schema.name,
                                                            **_connection_args(channel, schema, typestore))
        for channel_id, log_time, data in sorted(scan.messages, key=lambda m: m[1]):
            writer.write(connections[channel_id], log_time, data)
    finally:
        writer.close()
    return RecoveryReport(folder, damaged, len(scan.messages), counts, duration_s, False)
