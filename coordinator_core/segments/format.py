"""Segment constants, the parser's result types and varints (see ``coordinator_core.segments``)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

# ---------------------------------------------------------------------------------------------
# constants (Kafka's CompressionType ids, TimestampType ids, ControlRecordType ids)
CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}

LOG_OVERHEAD = 12  # baseOffset int64 + length int32 (Kafka's Records.LOG_OVERHEAD)
V2_HEADER_SIZE = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
_V2_MIN_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD
_LEGACY_MIN_SIZE = {0: 14, 1: 22}  # LegacyRecord.RECORD_OVERHEAD_V0 / _V1

_ATTR_CODEC = 0x07
_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTR_DELETE_HORIZON = 0x40

_V2 = struct.Struct(">qiibIhiqqqhii")  # the 61-byte DefaultRecordBatch header
_LEGACY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


class Decompress(Protocol):
    """``decompress(codec, data, max_size)``: one codec primitive (see the module rules)."""

    def __call__(self, codec: int, data: bytes, max_size: int) -> bytes: ...


Compress = Callable[[int, bytes], bytes]


# ---------------------------------------------------------------------------------------------
# what the parser yields
class ControlMarker(NamedTuple):
    """A control record's key (and, for ABORT/COMMIT, its ``EndTransactionMarker`` value)."""

    type: int
    key_version: int
    value_version: int | None = None
    coordinator_epoch: int | None = None

    @property
    def name(self) -> str:
        return CONTROL_TYPE_NAMES.get(self.type, "UNKNOWN")


class Record(NamedTuple):
    """One record. ``headers`` is ``((key, value-or-None), ...)``; ``control`` is set for the
    records of a control batch."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    control: ControlMarker | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A batch as found in the data: a v2 record batch, or a legacy (v0/v1) message —
    a compressed wrapper with its inner messages, or one plain message."""

    position: int
    size: int  # bytes in the data, log overhead included
    magic: int
    base_offset: int
    last_offset: int
    codec: int
    timestamp_type: int
    records: tuple[Record, ...]
    crc: int
    partition_leader_epoch: int = -1
    is_transactional: bool = False
    is_control: bool = False
    base_timestamp: int = NO_TIMESTAMP
    max_timestamp: int = NO_TIMESTAMP
    delete_horizon_ms: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(frozen=True, slots=True)
class BadBatch:
    """Bytes that could not be read as a batch. ``stopped``: parsing ended here (the length
    could not be trusted); ``data`` is then everything from ``position`` to the end."""

    position: int
    length: int
    reason: str
    data: bytes
    magic: int | None = None
    base_offset: int | None = None
    stopped: bool = False


class _Bad(Exception):
    """Internal: why the batch being read is bad (never escapes this module)."""


# ---------------------------------------------------------------------------------------------
# varints (DefaultRecord: zigzag varint / varlong, Kafka's ByteUtils)
def _varint(buf: bytes, pos: int, end: int, limit_bits: int = 32) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Bad("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift >= limit_bits + 3:  # 5 bytes for a varint, 10 for a varlong
            raise _Bad("varint too long")


def _write_varint(out: bytearray, n: int) -> None:
    z = (n << 1) ^ (n >> 63)
    z &= 0xFFFFFFFFFFFFFFFF
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
