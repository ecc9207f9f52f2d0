"""Building segments: record batches v2 (any codec, transactional, control) and v0/v1 message sets."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from coordinator_core.segments.checksums import crc32c
from coordinator_core.segments.format import (
    _ATTR_CONTROL,
    _ATTR_DELETE_HORIZON,
    _ATTR_TIMESTAMP_TYPE,
    _ATTR_TRANSACTIONAL,
    _I32,
    _I64,
    _U32,
    CODEC_NONE,
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Compress,
    ControlMarker,
    Record,
    _write_varint,
)
from coordinator_core.segments.framing import frame


# ---------------------------------------------------------------------------------------------
# encoding
def encode_batch_v2(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    codec: int = CODEC_NONE,
    compress: Compress | None = None,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = 0,
    delete_horizon_ms: int | None = None,
    last_offset: int | None = None,
) -> bytes:
    """One v2 record batch holding ``records`` (their ``offset`` and ``timestamp_ms`` are
    absolute; ``base_offset`` defaults to the first one, ``last_offset`` to the last)."""
    if not records and (base_offset is None or last_offset is None):
        raise ValueError("an empty batch needs base_offset and last_offset")
    base = records[0].offset if base_offset is None else base_offset
    last = records[-1].offset if last_offset is None else last_offset
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = records[0].timestamp_ms if records else NO_TIMESTAMP
    max_ts = max((r.timestamp_ms for r in records), default=NO_TIMESTAMP)
    if timestamp_type == LOG_APPEND_TIME:
        max_ts = log_append_time if log_append_time is not None else max_ts
    body = bytearray()
    for r in records:
        rec = bytearray(b"\x00")
        _write_varint(rec, r.timestamp_ms - base_ts)
        _write_varint(rec, r.offset - base)
        for part in (r.key, r.value):
            if part is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(part))
                rec += part
        _write_varint(rec, len(r.headers))
        for hk, hv in r.headers:
            hkb = hk.encode("utf-8")
            _write_varint(rec, len(hkb))
            rec += hkb
            if hv is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(hv))
                rec += hv
        _write_varint(body, len(rec))
        body += rec
    payload = frame(codec, bytes(body), compress) if codec else bytes(body)
    attrs = (
        codec
        | (_ATTR_TIMESTAMP_TYPE if timestamp_type == LOG_APPEND_TIME else 0)
        | (_ATTR_TRANSACTIONAL if transactional else 0)
        | (_ATTR_CONTROL if control else 0)
        | (_ATTR_DELETE_HORIZON if delete_horizon_ms is not None else 0)
    )
    after_crc = (
        struct.pack(
            ">hiqqqhii", attrs, last - base, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(records)
        )
        + payload
    )
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base, length, partition_leader_epoch, 2, crc32c(after_crc)) + after_crc


def control_record(control_type: int, offset: int, timestamp_ms: int, coordinator_epoch: int = 0) -> Record:
    """The control record Kafka writes to end a transaction (``EndTransactionMarker`` v0)."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return Record(offset, timestamp_ms, key, value, (), ControlMarker(control_type, 0, 0, coordinator_epoch))


def encode_control_batch(
    control_type: int,
    *,
    offset: int,
    timestamp_ms: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A COMMIT or ABORT marker batch: one control record, transactional + control flags,
    the transaction's producer id/epoch and base sequence -1 (the marker is outside the
    producer's sequence)."""
    rec = control_record(control_type, offset, timestamp_ms, coordinator_epoch)
    return encode_batch_v2(
        [rec],
        transactional=True,
        control=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
    )


def _legacy_message_bytes(
    offset: int, magic: int, attrs: int, timestamp_ms: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += _I64.pack(timestamp_ms)
    for part in (key, value):
        body += _I32.pack(-1) if part is None else _I32.pack(len(part)) + part
    msg = _U32.pack(zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def encode_legacy(
    records: Sequence[Record],
    *,
    magic: int,
    codec: int = CODEC_NONE,
    compress: Compress | None = None,
    timestamp_type: int = CREATE_TIME,
    wrapper_timestamp: int | None = None,
) -> bytes:
    """A v0/v1 message set: one message per record, or (``codec``) one wrapper message whose
    value is the compressed inner set (v1: relative inner offsets, wrapper offset = last)."""
    if magic not in (0, 1):
        raise ValueError("legacy magic is 0 or 1")
    ts_bit = _ATTR_TIMESTAMP_TYPE if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0
    if codec == CODEC_NONE:
        return b"".join(_legacy_message_bytes(r.offset, magic, ts_bit, r.timestamp_ms, r.key, r.value) for r in records)
    if not records:
        raise ValueError("a compressed wrapper needs at least one record")
    first = records[0].offset
    inner = b"".join(
        _legacy_message_bytes(r.offset - first if magic == 1 else r.offset, magic, 0, r.timestamp_ms, r.key, r.value)
        for r in records
    )
    wrapped = frame(codec, inner, compress, magic)
    ts = wrapper_timestamp if wrapper_timestamp is not None else max(r.timestamp_ms for r in records)
    return _legacy_message_bytes(records[-1].offset, magic, codec | ts_bit, ts, None, wrapped)
