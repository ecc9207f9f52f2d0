"""Walking a segment's batch headers without reading its records (what a log tail needs).

Rules (the same facts as ``coordinator_core.segments``' parser, from Kafka's ``DefaultRecordBatch``
and ``LegacyRecord``):
- ``walk_headers(data, start)`` steps from batch to batch by the length field only: per batch its
  byte position and size, base and last offset, newest timestamp, record count (``records``), attributes and
  magic (``BatchHeader``). No CRC is checked and nothing is decompressed: the tail reader decides
  where a micro-batch ends from these, the parser (``iter_batches``) reads and checks the bytes.
- v2: last offset = baseOffset + lastOffsetDelta, newest timestamp = maxTimestamp, count = the
  header's record count. Legacy (magic 0/1): a message's offset field is its last offset (a
  compressed wrapper carries its last inner message's offset); its first offset and count are
  not in the header (``records`` -1 for a compressed wrapper, 1 otherwise; ``base_offset`` = the
  last offset); v1's timestamp is the newest, v0 has none (-1).
- The walk ends (``HeaderWalk.stop``) at the end of the data (``"end"``), at a batch whose bytes
  are not all there yet (``"partial"``: a segment still being written, or truncated), or at a
  header that is not plausible (``"implausible"``: its length cannot be trusted, so nothing
  after it can be located without the parser's resynchronisation).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from coordinator_core.segments.format import _ATTR_CODEC, _LEGACY_MIN_SIZE, _V2_MIN_LENGTH, LOG_OVERHEAD

_HEAD = struct.Struct(">qi")  # baseOffset, length
_V2_TAIL = struct.Struct(">hiqqqhii")  # attributes .. records count, from byte 21
_V1_TS = struct.Struct(">q")


class BatchHeader(NamedTuple):
    """One batch as its header tells it."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    records: int
    attributes: int
    magic: int


class HeaderWalk(NamedTuple):
    """The headers walked, where the walk stopped (byte position) and why."""

    headers: list[BatchHeader]
    end: int
    stop: str  # "end" | "partial" | "implausible"


def walk_headers(data: bytes | memoryview, start: int = 0) -> HeaderWalk:
    """Every whole batch of ``data`` from byte ``start`` on (see the module rules)."""
    out: list[BatchHeader] = []
    n = len(data)
    pos = start
    head = _HEAD.unpack_from
    while pos < n:
        if n - pos < LOG_OVERHEAD + 5:
            return HeaderWalk(out, pos, "partial")
        base, length = head(data, pos)
        magic = data[pos + 16]
        minimum = _V2_MIN_LENGTH if magic == 2 else _LEGACY_MIN_SIZE.get(magic)
        if minimum is None or length < minimum:
            return HeaderWalk(out, pos, "implausible")
        size = LOG_OVERHEAD + length
        if pos + size > n:
            return HeaderWalk(out, pos, "partial")
        if magic == 2:
            attrs, last_delta, _first_ts, max_ts, _pid, _epoch, _seq, count = _V2_TAIL.unpack_from(data, pos + 21)
            out.append(BatchHeader(pos, size, base, base + last_delta, max_ts, count, attrs & 0xFFFF, 2))
        else:
            attrs = data[pos + 17]
            ts = _V1_TS.unpack_from(data, pos + 18)[0] if magic == 1 else -1
            out.append(BatchHeader(pos, size, base, base, ts, -1 if attrs & _ATTR_CODEC else 1, attrs, magic))
        pos += size
    return HeaderWalk(out, pos, "end")


__all__ = ["BatchHeader", "HeaderWalk", "walk_headers"]
