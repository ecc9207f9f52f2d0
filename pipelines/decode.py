"""Decode raw ``__consumer_offsets`` records into the decoded (silver) tables.

Rules:
- Offset commits (key version 0/1: the bulk of any real log) are decoded vectorised with
  numpy over whole Arrow batches: fixed-width big-endian integers are gathered from the
  flattened binary buffers, strings are cut out by offset arithmetic. This is the one place
  outside ``coordinator_core`` that reads record bytes (DESIGN §2) and it must agree with the
  core codec on every record (``tests/pipelines/test_decode_vectorised.py`` proves it).
- The fast path only accepts rows it can prove well-formed under the exact layouts of spec
  §3.2/§4.1 (known versions, exact lengths, no trailing bytes, single-byte compact lengths,
  no tagged fields, ASCII-or-valid UTF-8). Every other row goes to the core codec
  (``coordinator_core.codec.decode_record``), which decides: decoded, unsupported (unknown
  record type / value version) or quarantine (``CoordinatorError`` and friends).
- Group metadata (key version 2) is always decoded by the core codec.
- Nothing is dropped: raw = offset_commits + group_metadata + unsupported + quarantine
  (``reconcile_counts``). Every row keeps its log position.
- One ``mapInArrow`` pass emits a union-shaped batch (``kind`` column + the columns of every
  output); ``decode_raw`` splits it with filters/projections. Only the raw columns the decoder
  needs enter ``mapInArrow`` (DESIGN §7).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.decoded import GROUP_METADATA, OFFSET_COMMITS, QUARANTINE, UNSUPPORTED_RECORDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from coordinator_core.records import Record

# kind codes of the union output
KIND_OFFSET_COMMIT = 0
KIND_GROUP_METADATA = 1
KIND_UNSUPPORTED = 2
KIND_QUARANTINE = 3
KIND_NAMES = {
    KIND_OFFSET_COMMIT: "offset_commits",
    KIND_GROUP_METADATA: "group_metadata",
    KIND_UNSUPPORTED: "unsupported_records",
    KIND_QUARANTINE: "quarantine",
}

# |ms| above this overflows int64 microseconds (Spark/Delta TIMESTAMP): such rows are quarantined.
MAX_ABS_MS = (2**63 - 1) // 1000

# Raw columns the decoder reads (DESIGN §7: only these enter mapInArrow).
INPUT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")

# Fields the fast path produces (ms ints, exactly the core's values; -1 sentinels as null).
FAST_SCHEMA = pa.schema(
    [
        pa.field("key_version", pa.int32(), False),
        pa.field("group_id", pa.string(), False),
        pa.field("topic", pa.string(), False),
        pa.field("partition", pa.int32(), False),
        pa.field("is_tombstone", pa.bool_(), False),
        pa.field("value_version", pa.int32()),
        pa.field("committed_offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp_ms", pa.int64()),
        pa.field("expire_timestamp_ms", pa.int64()),
    ]
)

_TS = pa.timestamp("us", tz="UTC")
_MEMBER_ARROW = GROUP_METADATA.arrow_schema().field("members").type

# The union batch emitted by the mapInArrow pass.
UNION_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.int8(), False),
        pa.field("coordinator_partition", pa.int32()),
        pa.field("log_offset", pa.int64()),
        pa.field("log_timestamp", _TS),
        pa.field("group_id", pa.string()),
        pa.field("key_version", pa.int32()),
        pa.field("is_tombstone", pa.bool_()),
        pa.field("value_version", pa.int32()),
        # offset commit
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("committed_offset", pa.int64()),
        pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp", _TS),
        pa.field("expire_timestamp", _TS),
        # group metadata
        pa.field("protocol_type", pa.string()),
        pa.field("generation", pa.int32()),
        pa.field("protocol", pa.string()),
        pa.field("leader", pa.string()),
        pa.field("current_state_timestamp", _TS),
        pa.field("member_count", pa.int32()),
        pa.field("members", _MEMBER_ARROW),
        # unsupported / quarantine: the raw record and what went wrong
        pa.field("raw_key", pa.binary()),
        pa.field("raw_value", pa.binary()),
        pa.field("raw_topic", pa.string()),
        pa.field("record_type", pa.int32()),
        pa.field("record_type_name", pa.string()),
        pa.field("version", pa.int32()),
        pa.field("error_class", pa.string()),
        pa.field("error_message", pa.string()),
        pa.field("part", pa.string()),
        pa.field("byte_position", pa.int32()),
    ]
)


# =============================================================================================
# Vectorised offset-commit decoder (pure numpy/pyarrow)
# =============================================================================================
def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, pa.Array]:
    """(data bytes, starts, lengths, valid, the binary array) of a binary-like array, zero-copy.

    ``data`` is the array's data buffer (at least 32 bytes: reads of masked-out rows happen at
    position 0); starts are absolute positions in it.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        arr = arr.cast(pa.binary())
    n = len(arr)
    odt: Any = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=odt, count=n + 1, offset=arr.offset * np.dtype(odt).itemsize)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    if len(data) < 32:
        data = np.concatenate([data, np.zeros(32, np.uint8)])
    if arr.null_count:
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    else:
        valid = np.ones(n, dtype=bool)
    starts = offs[:-1].astype(np.int64)
    return data, starts, offs[1:] - offs[:-1], valid, arr


_BE = {2: ">i2", 4: ">i4", 8: ">i8"}
_HIGH_BITS = np.uint64(0x8080808080808080)


def _is_ascii(buf: pa.Buffer | None) -> bool:
    """No byte >= 0x80 in ``buf`` (one OR-reduction over 8-byte words)."""
    if buf is None or buf.size == 0:
        return True
    data = np.frombuffer(buf, dtype=np.uint8)
    words = len(data) // 8
    acc = np.bitwise_or.reduce(data[: words * 8].view(np.uint64)) if words else np.uint64(0)
    return not (int(acc & _HIGH_BITS) or bool((data[words * 8 :] >= 0x80).any()))


def _cut_strings(
    arr: pa.Array, bounds: tuple[np.ndarray, ...], pick: int, rows: np.ndarray
) -> pa.Array:
    """Strings cut out of ``arr``'s data buffer without a Python loop.

    ``bounds`` are per-row byte positions (same length as ``arr``, each row's run non-decreasing
    and inside the row). They split the data buffer into ``len(bounds)`` contiguous segments per
    row; a BinaryArray over those segments (a new offsets buffer on the same data buffer) is
    gathered with Arrow's ``take``: row ``i`` of the result is segment ``pick`` of row
    ``rows[i]``. Not UTF-8 validated.
    """
    n = len(arr)
    k = len(bounds)
    bufs = arr.buffers()
    data = bufs[2] if bufs[2] is not None else pa.py_buffer(b"")
    large = pa.types.is_large_binary(arr.type)
    cuts = np.empty((n, k), dtype=np.int64 if large else np.int32)
    for j, b in enumerate(bounds):
        cuts[:, j] = b
    offsets = np.empty(n * k + 1, dtype=cuts.dtype)
    offsets[:-1] = cuts.reshape(-1)
    offsets[-1] = cuts[-1, -1] if n else 0
    segments = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), n * k, [None, pa.py_buffer(offsets), data]
    )
    taken = segments.take(pa.array(rows * k + pick))
    out = taken.view(pa.large_string() if large else pa.string())
    return out.cast(pa.string()) if large else out


def _valid_utf8(arr: pa.Array) -> bool:
    """``arr`` (a StringArray) holds valid UTF-8 (ASCII is checked first, cheaply)."""
    if _is_ascii(arr.buffers()[2]):
        return True
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _non_ascii_rows(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Rows whose byte range holds any byte >= 0x80."""
    hi = np.concatenate([[0], np.cumsum(data >= 0x80, dtype=np.int64)])
    return (hi[starts + lengths] - hi[starts]) > 0


#: Rows per vectorised pass: the temporaries of a chunk stay in the CPU caches (on a busy
#: machine 100k-row passes were several times slower per row).
CHUNK_ROWS = 32_768


def decode_offset_commits_arrow(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, np.ndarray]:
    """Decode the offset-commit rows of a raw batch, vectorised.

    Args:
        batch: raw records with at least ``key`` and ``value`` (binary) columns.

    Returns:
        ``(decoded, ok)``: ``ok[i]`` is True when the fast path proved row i a well-formed
        OffsetCommit record (key v0/v1, value v0-v4 or tombstone); ``decoded`` holds those rows
        only, in input order, with ``FAST_SCHEMA`` columns (times in epoch ms). Rows with
        ``ok[i] == False`` must be decoded by the core codec.
    """
    n = batch.num_rows
    if n <= CHUNK_ROWS:
        return _decode_chunk(batch.column("key"), batch.column("value"))
    parts = [
        _decode_chunk(batch.column("key").slice(s, CHUNK_ROWS), batch.column("value").slice(s, CHUNK_ROWS))
        for s in range(0, n, CHUNK_ROWS)
    ]
    merged = pa.concat_batches([p[0] for p in parts])
    return merged, np.concatenate([p[1] for p in parts])


def _be_view(data: np.ndarray, width: int) -> np.ndarray:
    """Every ``width``-byte big-endian signed int of ``data``, one per byte position (a view).

    ``view[pos]`` gathers one int per row: ~2x faster than a sliding-window row copy.
    """
    return np.ndarray((len(data) - width + 1,), dtype=_BE[width], buffer=data, strides=(1,))


def _decode_chunk(keys: pa.Array, values: pa.Array) -> tuple[pa.RecordBatch, np.ndarray]:
    """``decode_offset_commits_arrow`` on one chunk of at most ``CHUNK_ROWS`` rows.

    Every row is read in place: fixed-width fields are gathered from the binary buffers at
    positions computed from the length fields; strings are cut out of the buffers by Arrow's
    ``take`` over a segment view (``_cut_strings``); UTF-8 is validated only when a string
    column holds a byte >= 0x80. Rare shapes (v1/v4 values, tombstones, short rows) cost extra
    passes only in chunks that hold them.
    """
    # ---- key (spec §3.2): i16 version | STRING group | STRING topic | i32 partition, exact
    kdata, kstart, klen, kvalid, karr = _binary_parts(keys)
    k16, k32 = _be_view(kdata, 2), _be_view(kdata, 4)
    kend = kstart + klen
    ok = kvalid & (klen >= 10)  # 2 + 2 + 0 + 2 + 0 + 4
    every = bool(ok.all())
    head = k32[kstart if every else np.where(ok, kstart, 0)].astype(np.int64)
    kver = head >> 16
    glen = head & 0xFFFF  # as unsigned: a negative length (>= 0x8000) is refused below
    ok &= ((kver == 0) | (kver == 1)) & (glen <= 0x7FFF) & (klen >= 10 + glen)
    every = every and bool(ok.all())
    tpos = kstart + 4 + glen
    tlen = k16[tpos if every else np.where(ok, tpos, 0)].astype(np.int64)
    ok &= (tlen >= 0) & (klen == 10 + glen + tlen)  # exact: trailing bytes -> core
    partition = k32[np.maximum(kend - 4, 0)]

    # ---- value (spec §4.1): null = tombstone; else i16 version | ...
    vdata, vstart, vlen, vvalid, varr = _binary_parts(values)
    v16, v32, v64 = _be_view(vdata, 2), _be_view(vdata, 4), _be_view(vdata, 8)
    # the shortest value (v0/v2, empty metadata) has 20 bytes; tombstones are read at 0
    live = vvalid & (vlen >= 20)
    ok &= live | ~vvalid
    all_live = bool(live.all())
    vpos = vstart if all_live else np.where(live, vstart, 0)
    vver = v16[vpos].astype(np.int64)
    w10 = v32[vpos + 10].astype(np.int64)  # v3/v4: leader_epoch; v0-v2: metadata length << 16
    mlen = v16[vpos + 14].astype(np.int64)  # v3: metadata length (v4: its varint byte << 8)
    new_layout = vver >= 3  # v3/v4 carry leader_epoch before metadata
    if not (vver == 3).all():
        mlen = np.where(new_layout, mlen, w10 >> 16)
    v1 = live & (vver == 1)
    v4 = live & (vver == 4)
    has_v1, has_v4 = bool(v1.any()), bool(v4.any())
    expected = np.where(new_layout, 24, 20) + mlen
    if has_v1:
        expected += np.where(v1, 8, 0)
    if has_v4:  # COMPACT_STRING: one varint byte 1..127 (0 = null), i.e. length + 1
        mbyte = (mlen >> 8) & 0xFF
        mlen = np.where(v4, mbyte - 1, mlen)
        expected = np.where(v4, 23 + mbyte, expected)
        live &= ~v4 | ((mbyte >= 1) & (mbyte <= 127))
    # a non-flexible STRING length is >= 0; nothing after the last field (else -> core)
    live &= (vver >= 0) & (vver <= 4) & (mlen >= 0) & (vlen == expected)
    ok &= live | ~vvalid
    vend = vstart + vlen
    tspos = vend - 8
    if has_v1:
        tspos -= np.where(v1, 8, 0)
    if has_v4:
        tspos -= np.where(v4, 1, 0)
    commit_ts = v64[np.where(live, tspos, 0)]
    ok &= ~live | ((commit_ts >= -MAX_ABS_MS) & (commit_ts <= MAX_ABS_MS))
    expire_ts = np.full(len(ok), -1, np.int64)
    if has_v1:
        sel = np.flatnonzero(v1 & ok)
        expire_ts[sel] = v64[vend[sel] - 8]
        ok &= (expire_ts == -1) | ((expire_ts >= -MAX_ABS_MS) & (expire_ts <= MAX_ABS_MS))
    if has_v4:
        sel = np.flatnonzero(v4 & ok)
        ok[sel] &= vdata[vend[sel] - 1] == 0  # tagged fields present -> core
    live &= ok
    mstart = vstart + np.where(new_layout, 16, 12)
    if has_v4:
        mstart -= np.where(v4, 1, 0)

    # ---- strings: group, topic (key) and metadata (value), cut for the accepted rows
    idx = np.flatnonzero(ok)
    strings = _strings(karr, kstart, glen, tpos, tlen, varr, vstart, mstart, mlen, ok, live, idx)
    if strings is None:  # invalid UTF-8 somewhere: the rows with non-ASCII strings go to the core
        bad = _non_ascii_rows(kdata, np.where(ok, kstart + 4, 0), np.where(ok, glen, 0))
        bad |= _non_ascii_rows(kdata, np.where(ok, tpos + 2, 0), np.where(ok, tlen, 0))
        bad |= _non_ascii_rows(vdata, np.where(live, mstart, 0), np.where(live, mlen, 0))
        ok &= ~bad
        live &= ok
        idx = np.flatnonzero(ok)
        strings = _strings(karr, kstart, glen, tpos, tlen, varr, vstart, mstart, mlen, ok, live, idx)
        assert strings is not None
    group, topic, meta = strings

    # ---- columns of the accepted rows (masks only where a row can be null)
    every = len(idx) == len(ok)
    pick: Any = slice(None) if every else idx
    lv = live[pick]
    dead = None if lv.all() else ~lv
    epoch = w10[pick]
    no_epoch = ~new_layout[pick] | (epoch == -1)
    if dead is not None:
        no_epoch |= dead
    v1e = (v1 & (expire_ts != -1))[pick]
    cols = [
        pa.array(kver[pick].astype(np.int32)),
        group,
        topic,
        pa.array(partition[pick].astype(np.int32)),
        pa.array(~lv),
        pa.array(vver[pick].astype(np.int32), mask=dead),
        pa.array(v64[vpos + 2][pick].astype(np.int64), mask=dead),
        pa.array(epoch.astype(np.int32), mask=no_epoch if no_epoch.any() else None),
        meta if dead is None else _with_validity(meta, lv),
        pa.array(commit_ts[pick].astype(np.int64), mask=dead),
        pa.array(expire_ts[pick], mask=~v1e),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=FAST_SCHEMA), ok


def _with_validity(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """``arr`` (no nulls, offset 0) with the rows where ``valid`` is False set to null."""
    bitmap = pa.array(valid, pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]], offset=arr.offset)


def _strings(
    karr: pa.Array, kstart: np.ndarray, glen: np.ndarray, tpos: np.ndarray, tlen: np.ndarray,
    varr: pa.Array, vstart: np.ndarray, mstart: np.ndarray, mlen: np.ndarray,
    ok: np.ndarray, live: np.ndarray, idx: np.ndarray,
) -> tuple[pa.Array, pa.Array, pa.Array] | None:
    """(group, topic, metadata) of the rows ``idx``; None if any of them is invalid UTF-8.

    Rows outside ``ok`` (``live`` for metadata) get empty segments at their start."""
    if len(idx) == len(ok):
        g0 = kstart + 4
        t0 = tpos + 2
        g1, t1 = g0 + glen, t0 + tlen
    else:
        g0 = np.where(ok, kstart + 4, kstart)
        g1 = g0 + np.where(ok, glen, 0)
        t0 = np.where(ok, tpos + 2, g1)
        t1 = t0 + np.where(ok, tlen, 0)
    group = _cut_strings(karr, (g0, g1, t0, t1), 0, idx)
    topic = _cut_strings(karr, (g0, g1, t0, t1), 2, idx)
    mlen_live = np.where(live, mlen, 0)
    if not mlen_live.any():  # usually: every metadata is empty
        zeros = pa.py_buffer(np.zeros(len(idx) + 1, np.int32))
        meta = pa.Array.from_buffers(pa.string(), len(idx), [None, zeros, pa.py_buffer(b"")])
    else:
        m0 = np.where(live, mstart, vstart)
        meta = _cut_strings(varr, (m0, m0 + mlen_live), 0, idx)
    if not (_valid_utf8(group) and _valid_utf8(topic) and _valid_utf8(meta)):
        return None
    return group, topic, meta


# =============================================================================================
# The core codec: reference rows (used by the fallback and by the property test)
# =============================================================================================
def offset_commit_fields(record: Record) -> dict[str, Any]:
    """The ``FAST_SCHEMA`` row of an offset-commit ``Record`` decoded by the core codec."""
    from coordinator_core.records import OffsetCommitValue

    key = record.key
    value = record.value
    row: dict[str, Any] = {
        "key_version": key.version,
        "group_id": key.group,
        "topic": key.topic,  # type: ignore[union-attr]
        "partition": key.partition,  # type: ignore[union-attr]
        "is_tombstone": value is None,
        "value_version": None,
        "committed_offset": None,
        "leader_epoch": None,
        "metadata": None,
        "commit_timestamp_ms": None,
        "expire_timestamp_ms": None,
    }
    if isinstance(value, OffsetCommitValue):
        row.update(
            value_version=value.version,
            committed_offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=value.expire_timestamp,
        )
    return row


def _ts(ms: int | None) -> int | None:
    """Epoch ms -> epoch µs for a TIMESTAMP column."""
    return None if ms is None else ms * 1000


def _members_rows(value: Any) -> list[dict[str, Any]]:
    """Member structs of a GroupMetadataValue; blobs parsed by the core's per-member view
    (``consumer_protocol.parse_member_blobs``: consumer protocol only, never raises)."""
    from coordinator_core.consumer_protocol import parse_member_blobs

    rows = []
    for m in value.members:
        parsed = parse_member_blobs(value.protocol_type, m)
        sub, asg = parsed.subscription, parsed.assignment
        rows.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout,
                "subscription": m.subscription,
                "assignment": m.assignment,
                "subscribed_topics": None if sub is None else list(sub.topics),
                "assigned_partitions": None
                if asg is None
                else [{"topic": tp.topic, "partition": p} for tp in asg.assigned_partitions for p in tp.partitions],
            }
        )
    return rows


class _OutOfRangeError(ValueError):
    """A time value that does not fit a TIMESTAMP column (|ms| > MAX_ABS_MS)."""


def _check_ms(name: str, ms: int | None) -> int | None:
    if ms is not None and abs(ms) > MAX_ABS_MS:
        raise _OutOfRangeError(f"{name} {ms} ms does not fit a TIMESTAMP (int64 microseconds)")
    return ms


def slow_row(
    key: bytes | None,
    value: bytes | None,
    *,
    lenient: bool = False,
) -> dict[str, Any]:
    """Decode one record with the core codec into a union row (without position columns)."""
    from coordinator_core.codec import decode_record
    from coordinator_core.errors import CorruptRecordError
    from coordinator_core.records import (
        GroupMetadataKey,
        GroupMetadataValue,
        OffsetCommitKey,
        OffsetCommitValue,
        UnknownKey,
        UnknownValue,
        record_type_name,
    )

    row: dict[str, Any]
    if key is None:
        return _quarantine_row(
            key, value, "CorruptRecordError", "record key is null (keys are never null in __consumer_offsets)",
            part="key", position=0,
        )
    try:
        rec = decode_record(key, value, lenient=lenient)
        k, v = rec.key, rec.value
        if isinstance(k, OffsetCommitKey) and (v is None or isinstance(v, OffsetCommitValue)):
            f = offset_commit_fields(rec)
            _check_ms("commit_timestamp", f["commit_timestamp_ms"])
            _check_ms("expire_timestamp", f["expire_timestamp_ms"])
            row = {
                "kind": KIND_OFFSET_COMMIT,
                **{n: f[n] for n in f if not n.endswith("_ms")},
                "commit_timestamp": _ts(f["commit_timestamp_ms"]),
                "expire_timestamp": _ts(f["expire_timestamp_ms"]),
            }
            return row
        if isinstance(k, GroupMetadataKey) and (v is None or isinstance(v, GroupMetadataValue)):
            row = {
                "kind": KIND_GROUP_METADATA,
                "group_id": k.group,
                "key_version": k.version,
                "is_tombstone": v is None,
            }
            if v is not None:
                members = _members_rows(v)
                row.update(
                    value_version=v.version,
                    protocol_type=v.protocol_type,
                    generation=v.generation,
                    protocol=v.protocol,
                    leader=v.leader,
                    current_state_timestamp=_ts(_check_ms("current_state_timestamp", v.current_state_timestamp)),
                    member_count=len(members),
                    members=members,
                )
            return row
        # recognised but not materialised: unknown record type or unknown value version
        rtype = k.version
        vversion = v.version if isinstance(v, UnknownValue | OffsetCommitValue | GroupMetadataValue) else None
        if isinstance(k, UnknownKey):
            reason = f"unknown record type {rtype} ({record_type_name(rtype)})"
        else:
            reason = f"unknown value version {vversion} for record type {rtype}"
        return {
            "kind": KIND_UNSUPPORTED,
            "group_id": k.group,
            "raw_key": key,
            "raw_value": value,
            "record_type": rtype,
            "record_type_name": record_type_name(rtype),
            "version": vversion,
            "error_message": reason,
        }
    except CorruptRecordError as exc:
        return _quarantine_row(
            key, value, "CorruptRecordError", str(exc),
            part=exc.part, position=exc.position, record_type=exc.record_type, version=exc.version,
        )
    except _OutOfRangeError as exc:
        return _quarantine_row(key, value, "ValueOutOfRange", str(exc), part="value")
    except Exception as exc:  # the core raised something unexpected: quarantine, never drop
        return _quarantine_row(key, value, type(exc).__name__, str(exc))


def _quarantine_row(
    key: bytes | None,
    value: bytes | None,
    error_class: str,
    message: str,
    *,
    part: str | None = None,
    position: int | None = None,
    record_type: int | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    if record_type is None and key is not None and len(key) >= 2:
        record_type = int.from_bytes(key[:2], "big", signed=True)
    return {
        "kind": KIND_QUARANTINE,
        "raw_key": key,
        "raw_value": value,
        "error_class": error_class,
        "error_message": message,
        "part": part,
        "byte_position": position,
        "record_type": record_type,
        "version": version,
    }


# =============================================================================================
# One raw Arrow batch -> union batches
# =============================================================================================
def _position_arrays(batch: pa.RecordBatch, idx: np.ndarray | None) -> dict[str, pa.Array]:
    names = batch.schema.names
    n = batch.num_rows if idx is None else len(idx)

    def col(name: str, typ: pa.DataType) -> pa.Array:
        if name not in names:
            return pa.nulls(n, typ)
        arr = batch.column(name)
        if idx is not None:
            arr = arr.take(pa.array(idx, type=pa.int64()))
        return arr.cast(typ)

    return {
        "coordinator_partition": col("partition", pa.int32()),
        "log_offset": col("offset", pa.int64()),
        "log_timestamp": col("timestamp", _TS),
    }


def decode_batch(batch: pa.RecordBatch, *, lenient: bool = False) -> list[pa.RecordBatch]:
    """Decode one raw batch into union-schema batches (fast path + core fallback)."""
    out: list[pa.RecordBatch] = []
    n = batch.num_rows
    if n == 0:
        return out
    fast, ok = decode_offset_commits_arrow(batch)
    if fast.num_rows:
        idx = np.flatnonzero(ok)
        m = fast.num_rows
        pos = _position_arrays(batch, None if m == n else idx)
        ms_to_ts = lambda a: pc.multiply(a, 1000).cast(_TS)  # noqa: E731
        cols: dict[str, pa.Array] = {
            "kind": pa.array(np.full(m, KIND_OFFSET_COMMIT, dtype=np.int8)),
            **pos,
            "group_id": fast.column("group_id"),
            "key_version": fast.column("key_version"),
            "is_tombstone": fast.column("is_tombstone"),
            "value_version": fast.column("value_version"),
            "topic": fast.column("topic"),
            "partition": fast.column("partition"),
            "committed_offset": fast.column("committed_offset"),
            "leader_epoch": fast.column("leader_epoch"),
            "metadata": fast.column("metadata"),
            "commit_timestamp": ms_to_ts(fast.column("commit_timestamp_ms")),
            "expire_timestamp": ms_to_ts(fast.column("expire_timestamp_ms")),
        }
        out.append(
            pa.RecordBatch.from_arrays(
                [cols[f.name] if f.name in cols else pa.nulls(m, f.type) for f in UNION_SCHEMA],
                schema=UNION_SCHEMA,
            )
        )
    if not ok.all():
        rest_idx = np.flatnonzero(~ok)
        rest = batch.take(pa.array(rest_idx, type=pa.int64()))
        keys = rest.column("key").to_pylist()
        values = rest.column("value").to_pylist()
        topics = rest.column("topic").to_pylist() if "topic" in rest.schema.names else [None] * len(keys)
        rows = []
        for k, v, t in zip(keys, values, topics):
            row = slow_row(k, v, lenient=lenient)
            if row["kind"] in (KIND_UNSUPPORTED, KIND_QUARANTINE):
                row["raw_topic"] = t
            rows.append(row)
        slow = pa.RecordBatch.from_pylist(rows, schema=UNION_SCHEMA)
        pos = _position_arrays(rest, None)
        slow = pa.RecordBatch.from_arrays(
            [pos[f.name] if f.name in pos else slow.column(f.name) for f in UNION_SCHEMA], schema=UNION_SCHEMA
        )
        out.append(slow)
    return out


def decode_batches(
    batches: Iterator[pa.RecordBatch], *, lenient: bool = False
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: raw batches in, union batches out."""
    for batch in batches:
        yield from decode_batch(batch, lenient=lenient)


# =============================================================================================
# Spark
# =============================================================================================
@dataclass(frozen=True)
class DecodeResult:
    """The four decoded DataFrames plus the union they are projected from."""

    offset_commits: DataFrame
    group_metadata: DataFrame
    unsupported: DataFrame
    quarantine: DataFrame
    union: DataFrame

    def tables(self) -> dict[str, DataFrame]:
        """The decoded tables by their ``schemas.decoded`` name."""
        return {
            OFFSET_COMMITS.name: self.offset_commits,
            GROUP_METADATA.name: self.group_metadata,
            UNSUPPORTED_RECORDS.name: self.unsupported,
            QUARANTINE.name: self.quarantine,
        }


def union_spark_schema() -> Any:
    """The Spark schema of the union output of the decode pass."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(UNION_SCHEMA)


def decode_union(raw_df: DataFrame, *, lenient: bool = False) -> DataFrame:
    """raw records (Spark's Kafka source schema) -> the union DataFrame (one mapInArrow pass)."""
    cols = [c for c in INPUT_COLUMNS if c in raw_df.columns]
    for needed in ("key", "value"):
        if needed not in cols:
            raise ValueError(f"raw records need a {needed!r} column; got {raw_df.columns}")

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return decode_batches(batches, lenient=lenient)

    return raw_df.select(*cols).mapInArrow(fn, union_spark_schema())


def split_union(union: DataFrame) -> DecodeResult:
    """Project the union DataFrame into the four decoded tables (``schemas.decoded``)."""
    from pyspark.sql import functions as F

    def project(kind: int, spec: Any, renames: dict[str, str]) -> DataFrame:
        sel = []
        for f in spec.spark_schema().fields:
            src = renames.get(f.name, f.name)
            sel.append(F.col(src).cast(f.dataType).alias(f.name))
        return union.where(F.col("kind") == kind).select(*sel)

    raw_names = {
        "key": "raw_key", "value": "raw_value", "topic": "raw_topic", "partition": "coordinator_partition",
        "offset": "log_offset", "timestamp": "log_timestamp",
    }
    return DecodeResult(
        offset_commits=project(KIND_OFFSET_COMMIT, OFFSET_COMMITS, {}),
        group_metadata=project(KIND_GROUP_METADATA, GROUP_METADATA, {}),
        unsupported=project(KIND_UNSUPPORTED, UNSUPPORTED_RECORDS, {**raw_names, "reason": "error_message"}),
        quarantine=project(KIND_QUARANTINE, QUARANTINE, raw_names),
        union=union,
    )


def decode_raw(raw_df: DataFrame, *, lenient: bool = False, persist: bool = False) -> DecodeResult:
    """Decode raw records into ``offset_commits``, ``group_metadata``, ``unsupported_records``
    and ``quarantine`` DataFrames.

    Args:
        raw_df: raw records with at least key and value (Spark's Kafka source schema).
        lenient: read value versions above 4 with the v4 layout (core codec ``lenient``).
        persist: persist the union (MEMORY_AND_DISK) so writing the four tables and the
            count reconciliation decode each record once. Caller unpersists ``result.union``.
    """
    union = decode_union(raw_df, lenient=lenient)
    if persist:
        from pyspark import StorageLevel

        union = union.persist(StorageLevel.MEMORY_AND_DISK)
    return split_union(union)


@dataclass(frozen=True)
class Reconciliation:
    """raw = offset_commits + group_metadata + unsupported + quarantine, checked."""

    raw: int
    offset_commits: int
    group_metadata: int
    unsupported: int
    quarantine: int

    @property
    def decoded(self) -> int:
        return self.offset_commits + self.group_metadata

    @property
    def ok(self) -> bool:
        return self.raw == self.decoded + self.unsupported + self.quarantine

    def as_dict(self) -> dict[str, int | bool]:
        return {
            "raw": self.raw, "offset_commits": self.offset_commits, "group_metadata": self.group_metadata,
            "decoded": self.decoded, "unsupported": self.unsupported, "quarantine": self.quarantine,
            "ok": self.ok,
        }

    def message(self) -> str:
        verdict = "OK" if self.ok else "MISMATCH"
        return (
            f"decode reconciliation {verdict}: raw {self.raw} = offset_commits {self.offset_commits} "
            f"+ group_metadata {self.group_metadata} + unsupported {self.unsupported} "
            f"+ quarantine {self.quarantine} (sum {self.decoded + self.unsupported + self.quarantine})"
        )


def kind_counts(union: DataFrame) -> dict[str, int]:
    """Rows per decoded table, counted in one aggregation over the union."""
    rows = union.groupBy("kind").count().collect()
    counts = {name: 0 for name in KIND_NAMES.values()}
    for r in rows:
        counts[KIND_NAMES[int(r["kind"])]] = int(r["count"])
    return counts


def reconcile_counts(
    raw_count: int, counts: dict[str, int] | DecodeResult, *, strict: bool = False
) -> Reconciliation:
    """Check raw = offset_commits + group_metadata + unsupported + quarantine.

    Args:
        raw_count: number of raw records decoded.
        counts: per-table counts (``kind_counts``) or a ``DecodeResult`` (counted here).
        strict: raise ``RuntimeError`` with the reconciliation message on a mismatch.
    """
    if isinstance(counts, DecodeResult):
        counts = kind_counts(counts.union)
    rec = Reconciliation(
        raw=int(raw_count),
        offset_commits=int(counts.get("offset_commits", 0)),
        group_metadata=int(counts.get("group_metadata", 0)),
        unsupported=int(counts.get("unsupported_records", 0)),
        quarantine=int(counts.get("quarantine", 0)),
    )
    if strict and not rec.ok:
        raise RuntimeError(rec.message())
    return rec
