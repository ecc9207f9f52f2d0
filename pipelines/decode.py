"""Decode raw ``__consumer_offsets`` records into the decoded (silver) tables.

Rules:
- Offset commits (key version 0/1: the bulk of any real log) are decoded vectorised with
  numpy over whole Arrow batches, in place: fixed-width big-endian integers are gathered from
  the binary buffers (one gather per field group: a gather costs per row, not per byte),
  group/topic/metadata strings are cut by Arrow ``take`` over a segment view of the buffers,
  UTF-8 is validated only when a string column holds a byte >= 0x80. This is the one place
  outside ``coordinator_core`` that reads record bytes (DESIGN §2) and it must agree with the
  core codec on every record (``tests/pipelines/test_decode_vectorised.py`` proves it).
- The fast path only accepts rows it can prove well-formed under the exact layouts of spec
  §3.2/§4.1 (known versions, exact lengths, no trailing bytes, single-byte compact lengths,
  no tagged fields, ASCII-or-valid UTF-8). Every other row goes to the core codec
  (``coordinator_core.codec.decode_record``), which decides: decoded, unsupported (unknown
  record type / value version) or quarantine (``CoordinatorError`` and friends).
- Group metadata (key version 2) is always decoded by the core codec; its rows are collected
  column-wise, and each distinct member subscription/assignment blob is parsed once (bounded
  cache; plain assignments by a struct reader that defers anything unusual to the core), so
  the rows equal ``slow_row``'s (``_members_rows``: every member parsed alone by the core).
- Nothing is dropped: raw = offset_commits + group_metadata + unsupported + quarantine
  (``reconcile_counts``). Every row keeps its log position.
- One ``mapInArrow`` pass emits a union-shaped batch (``kind`` column + the columns of every
  output); ``decode_raw`` splits it with filters/projections. Only the raw columns the decoder
  needs enter ``mapInArrow`` (DESIGN §7).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from coordinator_core.codec import decode_record
from coordinator_core.consumer_protocol import CONSUMER_PROTOCOL_TYPE, parse_member_blobs
from coordinator_core.errors import CorruptRecordError
from coordinator_core.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    UnknownValue,
    record_type_name,
)
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


def _cut_strings(arr: pa.Array, bounds: tuple[np.ndarray, ...], picks: tuple[int, ...], rows: np.ndarray) -> list[pa.Array]:
    """Strings cut out of ``arr``'s data buffer without a Python loop.

    ``bounds`` are per-row byte positions (same length as ``arr``, each row's run non-decreasing
    and inside the row). They split the data buffer into ``len(bounds)`` contiguous segments per
    row; a BinaryArray over those segments (a new offsets buffer on the same data buffer, no
    copy) is gathered with Arrow's ``take``: for each ``pick``, row ``i`` of the result is
    segment ``pick`` of row ``rows[i]``. Not UTF-8 validated.
    """
    n = len(arr)
    k = len(bounds)
    bufs = arr.buffers()
    data = bufs[2] if bufs[2] is not None else pa.py_buffer(b"")
    large = pa.types.is_large_binary(arr.type)
    offsets = np.empty(n * k + 1, dtype=np.int64 if large else np.int32)
    for j, b in enumerate(bounds):
        offsets[j : n * k : k] = b
    offsets[-1] = offsets[-2] if n else 0
    segments = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(), n * k, [None, pa.py_buffer(offsets), data]
    )
    first = rows * k
    out = []
    for pick in picks:
        taken = segments.take(pa.array(first + pick if pick else first))
        out.append(taken.view(pa.string()) if not large else taken.view(pa.large_string()).cast(pa.string()))
    return out


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


#: Rows per vectorised pass over the record bytes: the temporaries of a chunk stay in the CPU
#: caches (on a busy machine 100k-row passes were several times slower per row).
CHUNK_ROWS = 32_768

_COLUMN_FIELDS = (
    "live", "key_version", "partition", "value_version", "offset", "epoch", "no_epoch", "commit", "expire",
    "no_expire",
)


# The head of an offset-commit value (spec §4.1): version, offset, then leader_epoch (v3/v4) or
# the metadata length (v0-v2, upper half of w10), then the v3 metadata length / v4 varint byte.
# c16: the commit timestamp of a v3 value without metadata.
_VALUE_HEAD = np.dtype(
    {"names": ["ver", "offset", "w10", "mlen", "c16"], "formats": [">i2", ">i8", ">i4", ">i2", ">i8"],
     "offsets": [0, 2, 10, 14, 16], "itemsize": 24}
)
_VALUE_HEAD16 = np.dtype(
    {"names": ["ver", "offset", "w10", "mlen"], "formats": [">i2", ">i8", ">i4", ">i2"],
     "offsets": [0, 2, 10, 14], "itemsize": 16}
)


def _be_view(data: np.ndarray, width: int) -> np.ndarray:
    """Every ``width``-byte big-endian signed int of ``data``, one per byte position (a view).

    ``view[pos]`` gathers one int per row: ~2x faster than a sliding-window row copy.
    """
    return np.ndarray((len(data) - width + 1,), dtype=_BE[width], buffer=data, strides=(1,))


def _scan_chunk(
    kdata: np.ndarray, kstart: np.ndarray, klen: np.ndarray, kvalid: np.ndarray,
    vdata: np.ndarray, vstart: np.ndarray, vlen: np.ndarray, vvalid: np.ndarray,
) -> dict[str, np.ndarray]:
    """The byte pass over one chunk of rows: every field of an offset commit, read in place.

    Fixed-width fields are gathered from the binary buffers at positions computed from the
    length fields (spec §3.2, §4.1); only exact layouts are accepted (``ok``): known versions,
    exact lengths, no trailing bytes, single-byte compact lengths, no tagged fields, times that
    fit a TIMESTAMP. Rare shapes (v1/v4 values, tombstones, short rows) cost extra passes only
    in chunks that hold them.
    """
    # ---- key: i16 version | STRING group | STRING topic | i32 partition, nothing after
    k16, k32 = _be_view(kdata, 2), _be_view(kdata, 4)
    kend = kstart + klen
    kok = kvalid & (klen >= 10)  # 2 + 2 + 0 + 2 + 0 + 4
    every = bool(kok.all())
    head = k32[kstart if every else np.where(kok, kstart, 0)].astype(np.int64)
    kver = head >> 16
    glen = head & 0xFFFF  # as unsigned: a negative length (>= 0x8000) is refused below
    kok &= ((kver == 0) | (kver == 1)) & (glen <= 0x7FFF) & (klen >= 10 + glen)
    every = every and bool(kok.all())
    g0 = kstart + 4
    tpos = g0 + glen
    tlen = k16[tpos if every else np.where(kok, tpos, 0)].astype(np.int64)
    kok &= (tlen >= 0) & (klen == 10 + glen + tlen)  # exact: trailing bytes -> core
    t0 = tpos + 2
    if not (every and kok.all()):  # empty ranges at the row's start for the rest
        g0 = np.where(kok, g0, kstart)
        glen = np.where(kok, glen, 0)
        t0 = np.where(kok, t0, kstart)
        tlen = np.where(kok, tlen, 0)
    partition = k32[kend - 4 if every else np.maximum(kend - 4, 0)]

    # ---- value: null = tombstone; else i16 version | ...; the shortest value (v0/v2, empty
    # metadata) has 20 bytes; rows that are not read are read at position 0
    v64 = _be_view(vdata, 8)
    live = vvalid & (vlen >= 20)
    # the head of every value in one gather (a gather costs per row, not per byte): 24 bytes
    # (a v3 value without metadata whole) unless the last rows sit too close to the buffer end
    vpos = vstart if live.all() else np.where(live, vstart, 0)
    width = 24 if len(vpos) and len(vdata) >= int(vpos.max()) + 24 else 16
    vhead = np.ndarray((len(vdata) - width + 1,), dtype=f"V{width}", buffer=vdata, strides=(1,))
    vhead = vhead[vpos].view(_VALUE_HEAD if width == 24 else _VALUE_HEAD16)
    vver = vhead["ver"].astype(np.int64)
    w10 = vhead["w10"].astype(np.int64)  # v3/v4: leader_epoch; v0-v2: metadata length << 16
    mlen = vhead["mlen"].astype(np.int64)  # v3: metadata length (v4: its varint byte << 8)
    new_layout = vver >= 3  # v3/v4 carry leader_epoch before metadata
    only_v3 = bool(((vver == 3) | ~live).all())  # the usual chunk: v3 values and tombstones
    if only_v3:
        has_v1 = has_v4 = False
        expected = mlen + 24
    else:
        mlen = np.where(new_layout, mlen, w10 >> 16)
        v1 = live & (vver == 1)
        v4 = live & (vver == 4)
        has_v1, has_v4 = bool(v1.any()), bool(v4.any())
        expected = np.where(new_layout, 24, 20) + mlen
    tail = 8  # bytes after the commit timestamp (v1: expire timestamp; v4: tagged fields)
    if has_v1:
        expected += np.where(v1, 8, 0)
    if has_v4:  # COMPACT_STRING: one varint byte 1..127 (0 = null), i.e. length + 1
        mbyte = (mlen >> 8) & 0xFF
        mlen = np.where(v4, mbyte - 1, mlen)
        expected = np.where(v4, 23 + mbyte, expected)
        live &= ~v4 | ((mbyte >= 1) & (mbyte <= 127))
    if has_v1 or has_v4:
        tail = 8 + np.where(v1, 8, 0) + np.where(v4, 1, 0)
    # a non-flexible STRING length is >= 0; nothing after the last field (else -> core)
    live &= (vver >= 0) & (vver <= 4) & (mlen >= 0) & (vlen == expected)
    vend = vstart + vlen
    if width == 24 and only_v3 and bool(((mlen == 0) | ~live).all()):
        commit = vhead["c16"]  # v3, no metadata: the commit timestamp is in the head
    else:
        commit = v64[np.where(live, vend - tail, 0)]
    live &= (commit >= -MAX_ABS_MS) & (commit <= MAX_ABS_MS)
    expire = np.full(len(live), -1, np.int64)
    if has_v1:
        sel = np.flatnonzero(v1 & live)
        expire[sel] = v64[vend[sel] - 8]
        live &= (expire == -1) | ((expire >= -MAX_ABS_MS) & (expire <= MAX_ABS_MS))
    if has_v4:
        sel = np.flatnonzero(v4 & live)
        live[sel] &= vdata[vend[sel] - 1] == 0  # tagged fields present -> core
    m0 = vstart + (16 if only_v3 else np.where(new_layout, 16, 12))
    if has_v4:
        m0 -= np.where(v4, 1, 0)
    m0 = np.where(live, m0, vstart)
    return {
        "ok": kok & (live | ~vvalid),
        "live": live,
        "key_version": kver,
        "partition": partition,
        "g0": g0,
        "g1": g0 + glen,
        "t0": t0,
        "t1": t0 + tlen,
        "m0": m0,
        "m1": m0 + np.where(live, mlen, 0),
        "value_version": vver,
        "offset": vhead["offset"],
        "epoch": w10,
        "no_epoch": ~(live & new_layout & (w10 != -1)),
        "commit": commit,
        "expire": expire,
        "no_expire": expire == -1,
    }


class _Commits:
    """The accepted offset commits of one batch: numpy columns + cut strings (rows ``idx``)."""

    def __init__(self, keys: pa.Array, values: pa.Array) -> None:
        kdata, kstart, klen, kvalid, karr = _binary_parts(keys)
        vdata, vstart, vlen, vvalid, varr = _binary_parts(values)
        n = len(kstart)
        scan = _scan_chunk(kdata, kstart, klen, kvalid, vdata, vstart, vlen, vvalid)
        ok = scan["ok"]
        idx = np.flatnonzero(ok)
        strings = self._strings(karr, varr, scan, idx)
        if strings is None:  # invalid UTF-8 somewhere: rows with non-ASCII strings go to the core
            bad = _non_ascii_rows(kdata, scan["g0"], scan["g1"] - scan["g0"])
            bad |= _non_ascii_rows(kdata, scan["t0"], scan["t1"] - scan["t0"])
            bad |= _non_ascii_rows(vdata, scan["m0"], scan["m1"] - scan["m0"])
            ok &= ~bad
            idx = np.flatnonzero(ok)
            strings = self._strings(karr, varr, scan, idx)
            assert strings is not None
        self.ok = ok
        self.idx = idx
        self.group, self.topic, self.metadata = strings
        pick: Any = slice(None) if len(idx) == n else idx
        self.cols = {name: scan[name][pick] for name in _COLUMN_FIELDS}

    @staticmethod
    def _strings(
        karr: pa.Array, varr: pa.Array, scan: dict[str, np.ndarray], idx: np.ndarray
    ) -> tuple[pa.Array, pa.Array, pa.Array] | None:
        """(group, topic, metadata) of the rows ``idx``; None if any is invalid UTF-8."""
        group, topic = _cut_strings(karr, (scan["g0"], scan["g1"], scan["t0"], scan["t1"]), (0, 2), idx)
        m0, m1 = scan["m0"], scan["m1"]
        if not (m1 - m0).any():  # usually: every metadata is empty
            zeros = pa.py_buffer(np.zeros(len(idx) + 1, np.int32))
            meta = pa.Array.from_buffers(pa.string(), len(idx), [None, zeros, pa.py_buffer(b"")])
        else:
            (meta,) = _cut_strings(varr, (m0, m1), (0,), idx)
        if not (_valid_utf8(group) and _valid_utf8(topic) and _valid_utf8(meta)):
            return None
        return group, topic, meta

    def arrays(self, ts_scale: int) -> dict[str, pa.Array]:
        """The decoded columns (times in ms * ``ts_scale``; -1 sentinels and absent fields null)."""
        c = self.cols
        live = c["live"]
        dead = None if live.all() else ~live
        ts = pa.int64() if ts_scale == 1 else _TS
        commit = c["commit"] if ts_scale == 1 else c["commit"] * ts_scale
        expire = c["expire"] if ts_scale == 1 else c["expire"] * ts_scale
        return {
            "key_version": _np_array(c["key_version"], pa.int32()),
            "group_id": self.group,
            "topic": self.topic,
            "partition": _np_array(c["partition"], pa.int32()),
            "is_tombstone": pa.array(~live),
            "value_version": _np_array(c["value_version"], pa.int32(), dead),
            "committed_offset": _np_array(c["offset"], pa.int64(), dead),
            "leader_epoch": _np_array(c["epoch"], pa.int32(), c["no_epoch"]),
            "metadata": self.metadata if dead is None else _with_validity(self.metadata, live),
            "commit_timestamp": _np_array(commit, ts, dead),
            "expire_timestamp": _np_array(expire, ts, c["no_expire"]),
        }


_NP_TYPES: dict[pa.DataType, Any] = {pa.int8(): np.int8, pa.int32(): np.int32, pa.int64(): np.int64, _TS: np.int64}


def _np_array(values: np.ndarray, typ: pa.DataType, null: np.ndarray | None = None) -> pa.Array:
    """An Arrow array over ``values`` (cast to ``typ``'s width), null where ``null`` is True."""
    data = values.astype(_NP_TYPES[typ], copy=False)
    validity = None
    if null is not None and null.any():
        validity = pa.array(~null, pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(typ, len(data), [validity, pa.py_buffer(np.ascontiguousarray(data))])


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
    keys, values = batch.column("key"), batch.column("value")
    n = batch.num_rows
    if n <= CHUNK_ROWS:
        commits = _Commits(keys, values)
        return _fast_batch(commits.arrays(1)), commits.ok
    # Chunk by chunk into whole-batch arrays: a chunk's temporaries are freed before the next
    # chunk (retaining every chunk's output until a final concat cost ~25% in page faults).
    ok = np.empty(n, dtype=bool)
    merged: dict[str, np.ndarray] = {}
    strings: list[tuple[pa.Array, pa.Array, pa.Array]] = []
    m = 0
    for lo in range(0, n, CHUNK_ROWS):
        commits = _Commits(keys.slice(lo, CHUNK_ROWS), values.slice(lo, CHUNK_ROWS))
        ok[lo : lo + CHUNK_ROWS] = commits.ok
        k = len(commits.idx)
        for name, col in commits.cols.items():
            if name not in merged:
                merged[name] = np.empty(n, dtype=_MERGE_DTYPES.get(name, col.dtype.newbyteorder("=")))
            merged[name][m : m + k] = col
        strings.append((commits.group, commits.topic, commits.metadata))
        m += k
        del commits
    whole = _Commits.__new__(_Commits)
    whole.ok = ok
    whole.cols = {name: arr[:m] for name, arr in merged.items()}
    whole.group, whole.topic, whole.metadata = (pa.concat_arrays([s[i] for s in strings]) for i in range(3))
    return _fast_batch(whole.arrays(1)), ok


# int32 columns merged at their output width (the chunk arrays are int64 or big-endian)
_MERGE_DTYPES = {"key_version": np.int32, "partition": np.int32, "value_version": np.int32, "epoch": np.int32}


def _fast_batch(arrays: dict[str, pa.Array]) -> pa.RecordBatch:
    """``FAST_SCHEMA`` batch of ``_Commits.arrays(1)``."""
    arrays["commit_timestamp_ms"] = arrays.pop("commit_timestamp")
    arrays["expire_timestamp_ms"] = arrays.pop("expire_timestamp")
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in FAST_SCHEMA], schema=FAST_SCHEMA)


def _with_validity(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """``arr`` (no nulls, offset 0) with the rows where ``valid`` is False set to null."""
    bitmap = pa.array(valid, pa.bool_()).buffers()[1]
    assert arr.offset == 0 and arr.null_count == 0
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]])


# =============================================================================================
# The core codec: reference rows (used by the fallback and by the property test)
# =============================================================================================
def offset_commit_fields(record: Record) -> dict[str, Any]:
    """The ``FAST_SCHEMA`` row of an offset-commit ``Record`` decoded by the core codec."""
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


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FALLBACK = object()


def _fast_assigned_partitions(blob: bytes) -> Any:
    """``assigned_partitions`` rows of a ConsumerProtocolAssignment blob (spec §5: i16 version
    >= 0 | i32 count | count x (STRING topic | i32 count | count x i32 partition) | nullable
    BYTES user_data | ignored trailing bytes; the same layout in every version), or
    ``_FALLBACK`` for anything else (negative lengths, short data, bad UTF-8): the core decides."""
    end = len(blob)
    try:
        if _I16.unpack_from(blob, 0)[0] < 0:
            return _FALLBACK
        (count,) = _I32.unpack_from(blob, 2)
        pos = 6
        if count < 0 or count > end:
            return _FALLBACK
        rows: list[dict[str, Any]] = []
        for _ in range(count):
            (tlen,) = _I16.unpack_from(blob, pos)
            if tlen < 0 or pos + 2 + tlen > end:
                return _FALLBACK
            topic = blob[pos + 2 : pos + 2 + tlen].decode("utf-8")
            (pcount,) = _I32.unpack_from(blob, pos + 2 + tlen)
            pos += 6 + tlen
            if pcount < 0 or pos + 4 * pcount > end:
                return _FALLBACK
            rows.extend({"topic": topic, "partition": p} for p in struct.unpack_from(f">{pcount}i", blob, pos))
            pos += 4 * pcount
        (ulen,) = _I32.unpack_from(blob, pos)
        if ulen < -1 or pos + 4 + max(ulen, 0) > end:
            return _FALLBACK
    except (struct.error, UnicodeDecodeError):
        return _FALLBACK
    return rows


# Parsed consumer-protocol blobs, by (protocol_type == "consumer", kind, blob bytes): the same
# subscription/assignment bytes recur across members and records of a group (bounded cache).
# Bounded by the blob bytes it holds (a parsed assignment is ~50x its blob in Python objects).
_BLOB_CACHE: dict[tuple[bool, str, bytes], Any] = {}
_BLOB_CACHE_BYTES = 1 << 20
_blob_cache_used = 0
_EMPTY_MEMBER = MemberMetadata(
    member_id="", client_id="", client_host="", session_timeout=0, subscription=b"", assignment=b""
)


def _parsed_blob(consumer: bool, kind: str, blob: bytes) -> Any:
    """``subscribed_topics`` (kind "s") or ``assigned_partitions`` (kind "a") of one member
    blob, exactly as ``_members_rows`` derives it (``consumer_protocol.parse_member_blobs`` on
    a member holding just that blob: the two blobs are parsed independently). Assignments of
    the plain layout are read by ``_fast_assigned_partitions`` (the property test holds it to
    the core)."""
    key = (consumer, kind, blob)
    try:
        return _BLOB_CACHE[key]
    except KeyError:
        pass
    ptype = CONSUMER_PROTOCOL_TYPE if consumer else None
    if kind == "s":
        sub = parse_member_blobs(ptype, replace(_EMPTY_MEMBER, subscription=blob)).subscription
        out: Any = None if sub is None else list(sub.topics)
    elif consumer and blob and (fast := _fast_assigned_partitions(blob)) is not _FALLBACK:
        out = fast
    else:
        asg = parse_member_blobs(ptype, replace(_EMPTY_MEMBER, assignment=blob)).assignment
        out = None if asg is None else [
            {"topic": tp.topic, "partition": p} for tp in asg.assigned_partitions for p in tp.partitions
        ]
    global _blob_cache_used
    _blob_cache_used += len(blob) + 64
    if _blob_cache_used > _BLOB_CACHE_BYTES:
        _BLOB_CACHE.clear()
        _blob_cache_used = len(blob) + 64
    _BLOB_CACHE[key] = out
    return out


class _GroupMetadataColumns:
    """Group-metadata rows decoded by the core codec, collected column-wise.

    The union columns are built with one Arrow conversion per column; each distinct
    subscription / assignment blob of a batch is parsed (and converted) once and spread to the
    members by ``take`` — the values equal ``slow_row``'s (``_members_rows``) row by row.
    """

    _SCALARS = (
        "group_id", "key_version", "is_tombstone", "value_version", "protocol_type", "generation",
        "protocol", "leader", "current_state_timestamp", "member_count",
    )
    _MEMBER_FIELDS = (
        "member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout", "session_timeout",
        "subscription", "assignment",
    )

    _member_getter = operator.attrgetter(*_MEMBER_FIELDS)

    def __init__(self) -> None:
        self.rows: list[int] = []  # positions (in the caller's row order) of the collected rows
        self.scalar_rows: list[tuple[Any, ...]] = []
        self.member_offsets: list[int] = [0]
        self.member_null: list[bool] = []
        self.members: list[Any] = []  # MemberMetadata, flattened
        self.sub_idx: list[int] = []
        self.asg_idx: list[int] = []
        # blob -> index into sub_values / asg_values, per "protocol_type is consumer"
        self.sub_blobs: dict[bool, dict[bytes, int]] = {True: {}, False: {}}
        self.asg_blobs: dict[bool, dict[bytes, int]] = {True: {}, False: {}}
        self.sub_values: list[Any] = []
        self.asg_values: list[Any] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: int, key: Any, value: Any) -> None:
        """Collect one record (``value`` None = tombstone); raises ``_OutOfRangeError`` before
        collecting anything when the state timestamp does not fit a TIMESTAMP."""
        if value is None:
            vals: tuple[Any, ...] = (key.group, key.version, True, None, None, None, None, None, None, None)
            self.member_null.append(True)
        else:
            cst = _ts(_check_ms("current_state_timestamp", value.current_state_timestamp))
            members = value.members
            vals = (
                key.group, key.version, False, value.version, value.protocol_type, value.generation,
                value.protocol, value.leader, cst, len(members),
            )
            consumer = value.protocol_type == "consumer"
            subs, asgs = self.sub_blobs[consumer], self.asg_blobs[consumer]
            for m in members:
                i = subs.get(m.subscription)
                if i is None:
                    i = subs[m.subscription] = len(self.sub_values)
                    self.sub_values.append(_parsed_blob(consumer, "s", m.subscription))
                self.sub_idx.append(i)
                i = asgs.get(m.assignment)
                if i is None:
                    i = asgs[m.assignment] = len(self.asg_values)
                    self.asg_values.append(_parsed_blob(consumer, "a", m.assignment))
                self.asg_idx.append(i)
            self.members.extend(members)
            self.member_null.append(False)
        self.scalar_rows.append(vals)
        self.member_offsets.append(len(self.members))
        self.rows.append(row)

    def arrays(self) -> dict[str, pa.Array]:
        """The union columns of the collected rows (``kind`` and positions excluded)."""
        fields = {f.name: f.type for f in UNION_SCHEMA}
        columns = list(zip(*self.scalar_rows)) or [() for _ in self._SCALARS]
        out = {name: pa.array(vals, fields[name]) for name, vals in zip(self._SCALARS, columns)}
        mtype = _MEMBER_ARROW.value_type
        per_field = list(zip(*map(self._member_getter, self.members))) or [() for _ in self._MEMBER_FIELDS]
        member_cols = [pa.array(v, mtype.field(name).type) for name, v in zip(self._MEMBER_FIELDS, per_field)]
        subs = pa.array(self.sub_values, mtype.field("subscribed_topics").type)
        asgs = pa.array(self.asg_values, mtype.field("assigned_partitions").type)
        member_cols.append(subs.take(pa.array(self.sub_idx, pa.int32())))
        member_cols.append(asgs.take(pa.array(self.asg_idx, pa.int32())))
        struct = pa.StructArray.from_arrays(member_cols, fields=list(mtype))
        out["members"] = pa.ListArray.from_arrays(
            pa.array(self.member_offsets, pa.int32()), struct, type=_MEMBER_ARROW,
            mask=pa.array(self.member_null, pa.bool_()),
        )
        return out


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
    row = _slow_row(key, value, lenient, None, 0)
    assert row is not None
    return row


def _slow_row(
    key: bytes | None, value: bytes | None, lenient: bool, gm: _GroupMetadataColumns | None, position: int
) -> dict[str, Any] | None:
    """``slow_row``; with ``gm``, a group-metadata record is collected there (at ``position``)
    instead and None is returned."""

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
            if gm is not None:
                gm.add(position, k, v)
                return None
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


def _nulls(n: int, typ: pa.DataType) -> pa.Array:
    """An all-null array; cached per (length, type): Spark's batches mostly share one length."""
    key = (n, typ)
    arr = _NULLS.get(key)
    if arr is None:
        if len(_NULLS) > 256:
            _NULLS.clear()
        arr = _NULLS[key] = pa.nulls(n, typ)
    return arr


_NULLS: dict[tuple[int, pa.DataType], pa.Array] = {}


def decode_batch(batch: pa.RecordBatch, *, lenient: bool = False) -> list[pa.RecordBatch]:
    """Decode one raw batch into union-schema batches (fast path + core fallback)."""
    out: list[pa.RecordBatch] = []
    n = batch.num_rows
    if n == 0:
        return out
    if n > CHUNK_ROWS:  # one pass per chunk (CPU caches)
        return [u for lo in range(0, n, CHUNK_ROWS) for u in decode_batch(batch.slice(lo, CHUNK_ROWS), lenient=lenient)]
    commits = _Commits(batch.column("key"), batch.column("value"))
    ok = commits.ok
    m = len(commits.idx)
    if m:
        pos = _position_arrays(batch, None if m == n else commits.idx)
        cols: dict[str, pa.Array] = {
            "kind": _np_array(np.full(m, KIND_OFFSET_COMMIT, dtype=np.int8), pa.int8()),
            **pos,
            **commits.arrays(1000),
        }
        out.append(
            pa.RecordBatch.from_arrays(
                [cols[f.name] if f.name in cols else _nulls(m, f.type) for f in UNION_SCHEMA],
                schema=UNION_SCHEMA,
            )
        )
    if not ok.all():
        rest = batch.take(pa.array(np.flatnonzero(~ok), type=pa.int64()))
        keys = rest.column("key").to_pylist()
        values = rest.column("value").to_pylist()
        topics = rest.column("topic").to_pylist() if "topic" in rest.schema.names else [None] * len(keys)
        gm = _GroupMetadataColumns()
        rows: list[dict[str, Any]] = []
        row_pos: list[int] = []
        for i, (k, v, t) in enumerate(zip(keys, values, topics)):
            row = _slow_row(k, v, lenient, gm, i)
            if row is None:
                continue
            if row["kind"] in (KIND_UNSUPPORTED, KIND_QUARANTINE):
                row["raw_topic"] = t
            rows.append(row)
            row_pos.append(i)
        if len(gm):
            g = len(gm)
            gm_cols = {
                "kind": _np_array(np.full(g, KIND_GROUP_METADATA, dtype=np.int8), pa.int8()),
                **_position_arrays(rest, np.asarray(gm.rows, dtype=np.int64)),
                **gm.arrays(),
            }
            out.append(
                pa.RecordBatch.from_arrays(
                    [gm_cols[f.name] if f.name in gm_cols else _nulls(g, f.type) for f in UNION_SCHEMA],
                    schema=UNION_SCHEMA,
                )
            )
        if rows:
            slow = pa.RecordBatch.from_pylist(rows, schema=UNION_SCHEMA)
            pos = _position_arrays(rest, None if len(rows) == rest.num_rows else np.asarray(row_pos, np.int64))
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
