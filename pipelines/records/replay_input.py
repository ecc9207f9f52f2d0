"""The replay input: one projection, one order, one packing, for the batch job and the stream.

Rules:
- Shape: ``schemas.shapes.REPLAY_INPUT``, one row per record of a group of any kind (offset
  commit, group metadata, unsupported and Kafka 4 group records with their raw bytes); the
  other kinds' columns are null.
- Projection (``project``): rows of a decoded table (``schemas.decoded``) -> replay-input rows.
  The batch job's decode pass projects the tables it writes; the stream projects the decoded
  union of its raw batches (``project_union``: the same split into tables, then ``project``).
- Order (``replay_order``): (group_id, coordinator_partition, log_offset). All records of a group
  live in one ``__consumer_offsets`` partition, so this is the log order the core replays.
- Buckets (``bucket_of``): ``string_hash64(group_id) mod B`` (stable across processes and runs),
  so a group lives in exactly one bucket; ``cut`` splits rows by bucket.
- Packing (``pack_buckets``/``unpack_packs``): one row per stream state bucket
  (``state_bucket_of``: Spark's ``pmod(xxhash64(group_id), B)``, computed in numpy) holding the
  bucket's rows, in replay order, as one Arrow IPC record-batch message: what crosses the
  stream's shuffle into ``applyInPandasWithState`` (per-record columns would be converted to
  pandas row by row). The
  batch job's bucket files are Arrow IPC streams of the same rows (``pipelines.batch.replay``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.records.decode import split_union_arrow
from schemas.shapes import REPLAY_INPUT, STREAM_PACK

# record kinds in the replay input (``rec_kind``)
REC_OFFSET_COMMIT = 0
REC_GROUP_METADATA = 1
REC_UNSUPPORTED = 2
REC_GROUP_RECORD = 3  # a Kafka 4 group record (``group_records``): raw bytes, decoded by the core
#: a COMMIT/ABORT marker of the group's partition (``pipelines.records.transactions``)
REC_TXN_MARKER = 4
#: the decoded tables the replay reads, in the order their rows are projected
SOURCES = ("offset_commits", "group_metadata", "unsupported_records", "group_records")
#: the sources whose rows the replay rebuilds from their raw bytes (``log_records``)
RAW_SOURCES = {"unsupported_records": REC_UNSUPPORTED, "group_records": REC_GROUP_RECORD}
_MEMBER_FIELDS = (
    "member_id",
    "group_instance_id",
    "client_id",
    "client_host",
    "rebalance_timeout",
    "session_timeout",
    "subscription",
    "assignment",
)


def schema() -> pa.Schema:
    """The replay input in Arrow (``schemas.shapes.REPLAY_INPUT``)."""
    return REPLAY_INPUT.arrow_schema()


def _ms(arr: Any) -> Any:
    """timestamp[us] → epoch ms (decoded timestamps come from ms: the division is exact)."""

    return pc.divide(arr.cast(pa.int64()), 1000)


def _members(arr: Any, target: pa.DataType) -> Any:
    """The decoded members list keeps only the replay's 8 fields (Spark's ``transform`` twin)."""

    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    values = arr.values
    struct = pa.StructArray.from_arrays(
        [values.field(f) for f in _MEMBER_FIELDS],
        fields=list(target.value_type),
        mask=values.is_null() if values.null_count else None,
    )
    offsets = arr.offsets
    if arr.offset:  # a sliced list: rebase
        offsets = pc.subtract(offsets, offsets[0])
        struct = struct.slice(arr.offsets[0].as_py(), len(struct))
    return pa.ListArray.from_arrays(offsets, struct, type=target, mask=arr.is_null() if arr.null_count else None)


def project(source: str, batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """Rows of decoded table ``source`` (``schemas.decoded``) → replay-input rows."""

    t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    shape = schema()
    n = t.num_rows
    if source in RAW_SOURCES:
        t = t.filter(pc.is_valid(t.column("group_id")))
        n = t.num_rows
        cols: dict[str, Any] = {
            "group_id": t.column("group_id"),
            "coordinator_partition": t.column("partition"),
            "log_offset": t.column("offset"),
            "log_timestamp_ms": _ms(t.column("timestamp")),
            "rec_kind": pa.array([RAW_SOURCES[source]] * n, pa.int8()),
            "key_version": t.column("record_type"),
            "raw_key": t.column("key"),
            "raw_value": t.column("value"),
        }
        if source == "group_records":
            cols["is_tombstone"] = t.column("is_tombstone")
            cols["value_version"] = t.column("version")
    else:
        cols = {
            name: t.column(name)
            for name in (
                "group_id",
                "coordinator_partition",
                "log_offset",
                "key_version",
                "is_tombstone",
                "value_version",
            )
        }
        cols["log_timestamp_ms"] = _ms(t.column("log_timestamp"))
        if source == "offset_commits":
            cols["rec_kind"] = pa.array([REC_OFFSET_COMMIT] * n, pa.int8())
            for name in ("topic", "partition", "committed_offset", "leader_epoch", "metadata"):
                cols[name] = t.column(name)
            cols["commit_timestamp_ms"] = _ms(t.column("commit_timestamp"))
            cols["expire_timestamp_ms"] = _ms(t.column("expire_timestamp"))
        else:
            cols["rec_kind"] = pa.array([REC_GROUP_METADATA] * n, pa.int8())
            for name in ("protocol_type", "generation", "protocol", "leader"):
                cols[name] = t.column(name)
            cols["current_state_timestamp_ms"] = _ms(t.column("current_state_timestamp"))
            cols["members"] = _members(t.column("members"), shape.field("members").type)
    arrays = [cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type) for f in shape]
    return pa.Table.from_arrays(arrays, schema=shape)


#: the replay-input columns each decoded table fills (the others are null for its rows)
_BASE_COLUMNS = (
    "group_id",
    "coordinator_partition",
    "log_offset",
    "log_timestamp_ms",
    "rec_kind",
    "key_version",
    "is_tombstone",
    "value_version",
)


SOURCE_COLUMNS = {
    "offset_commits": (
        *_BASE_COLUMNS,
        "topic",
        "partition",
        "committed_offset",
        "leader_epoch",
        "metadata",
        "commit_timestamp_ms",
        "expire_timestamp_ms",
    ),
    "group_metadata": (
        *_BASE_COLUMNS,
        "protocol_type",
        "generation",
        "protocol",
        "leader",
        "current_state_timestamp_ms",
        "members",
    ),
    "unsupported_records": (*_BASE_COLUMNS, "raw_key", "raw_value"),
    "group_records": (*_BASE_COLUMNS, "raw_key", "raw_value"),
}


_FNV_PRIME = 0x100000001B3


_POWERS: list[Any] = []


def _powers(n: int) -> Any:
    """``_FNV_PRIME ** i`` mod 2^64 for i < n (uint64; cached, grown by doubling)."""

    if not _POWERS or len(_POWERS[0]) < n:
        m = max(n, 2 * len(_POWERS[0]) if _POWERS else 256)
        p = np.full(m, _FNV_PRIME, np.uint64)
        p[0] = 1
        with np.errstate(over="ignore"):
            _POWERS[:] = [np.cumprod(p, dtype=np.uint64)]
    return _POWERS[0]


def string_hash64(strings: Any) -> Any:
    """A 64-bit hash of each string's UTF-8 bytes, vectorised (numpy over the Arrow buffers).

    A polynomial hash (``sum(byte_i * P^i)`` mod 2^64, plus the length) passed through
    MurmurHash3's finaliser: the same value in every process and run (no Python ``hash``
    randomisation). Nulls hash as the empty string.
    """

    arr = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    arr = arr.cast(pa.large_string())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    lengths = np.diff(offsets).astype(np.int64)
    h = lengths.astype(np.uint64)
    first, last = int(offsets[0]), int(offsets[-1])
    if last > first:
        data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[first:last].astype(np.uint64)
        starts = offsets[:-1] - first
        pos = np.arange(last - first, dtype=np.int64) - np.repeat(starts, lengths)
        with np.errstate(over="ignore"):
            prod = data * _powers(int(lengths.max()))[pos]
            nonempty = lengths > 0
            h[nonempty] += np.add.reduceat(prod, starts[nonempty])
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
    return h


def bucket_of(group_ids: Any, buckets: int) -> Any:
    """``string_hash64(group id) mod buckets`` per row (hashed once per distinct group)."""

    enc = _distinct(group_ids)
    per_group = (string_hash64(enc.dictionary) % np.uint64(buckets)).astype(np.int32)
    return per_group[enc.indices.to_numpy(zero_copy_only=False)]


def _distinct(group_ids: Any) -> Any:
    """The group ids dictionary-encoded (a bucket is computed once per distinct group)."""
    arr = group_ids.combine_chunks() if isinstance(group_ids, pa.ChunkedArray) else group_ids
    return arr.dictionary_encode()


_XXH_P1 = np.uint64(0x9E3779B185EBCA87)
_XXH_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_XXH_P3 = np.uint64(0x165667B19E3779F9)
_XXH_P4 = np.uint64(0x85EBCA77C2B2AE63)
_XXH_P5 = np.uint64(0x27D4EB2F165667C5)
#: Spark's seed of ``xxhash64`` (``XxHash64Function.seed``), also its value of a null
SPARK_XXHASH64_SEED = 42
#: strings longer than this are hashed one by one (the vectorised form pads every string to the longest)
_XXH_ROW_BYTES = 256


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _xxh64_round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _XXH_P2, 31) * _XXH_P1


def spark_xxhash64(strings: Any) -> np.ndarray:
    """Spark's ``xxhash64(s)`` of each string (XXH64 of its UTF-8 bytes, seed 42; a null: 42) as
    int64, vectorised: numpy over the Arrow buffers, each string padded to the longest of the
    call. The same value as Spark's expression, so a bucket computed here equals
    ``pmod(xxhash64(group_id), B)`` computed by Spark (``state_bucket_of``)."""
    arr = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    arr = (pc.fill_null(arr, "") if arr.null_count else arr).cast(pa.large_string())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    lengths = np.diff(offsets)
    out = np.empty(n, np.uint64)
    long = lengths > _XXH_ROW_BYTES
    for i in np.flatnonzero(long).tolist():  # rare: padded alone
        out[i] = _xxh64_padded(arr.slice(i, 1), offsets[i : i + 2], lengths[i : i + 1])[0]
    short = np.flatnonzero(~long)
    if len(short) == n:
        out = _xxh64_padded(arr, offsets, lengths)
    elif len(short):
        part = arr.take(pa.array(short))
        part_offsets = np.frombuffer(part.buffers()[1], dtype=np.int64)[: len(short) + 1]
        out[short] = _xxh64_padded(part, part_offsets, lengths[short])
    signed = out.view(np.int64)
    if nulls is not None:
        signed[nulls] = SPARK_XXHASH64_SEED
    return signed


def _xxh64_padded(arr: pa.Array, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """XXH64 (seed 42) of each of ``arr``'s strings (a large_string array and its offsets), all
    padded with zeros to one row width (a multiple of 8, plus 8 so every read stays inside)."""
    n = len(lengths)
    width = (int(lengths.max()) if n else 0) // 8 * 8 + 16
    mat = np.zeros((n, width), np.uint8)
    first, last = int(offsets[0]), int(offsets[-1])
    if last > first:
        data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[first:last]
        rows = np.repeat(np.arange(n), lengths)
        cols = np.arange(last - first, dtype=np.int64) - np.repeat(offsets[:-1] - first, lengths)
        mat[rows, cols] = data
    words = mat.view("<u8")
    halves = mat.view("<u4")
    row = np.arange(n)
    seed = np.uint64(SPARK_XXHASH64_SEED)
    ulen = lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(n, seed + _XXH_P5, np.uint64)
        stripes = lengths // 32
        if stripes.max(initial=0):
            acc = [
                np.full(n, seed + _XXH_P1 + _XXH_P2, np.uint64),
                np.full(n, seed + _XXH_P2, np.uint64),
                np.full(n, seed, np.uint64),
                np.full(n, seed - _XXH_P1, np.uint64),
            ]
            for s in range(int(stripes.max())):
                live = stripes > s
                for j in range(4):
                    acc[j] = np.where(live, _xxh64_round(acc[j], words[:, 4 * s + j]), acc[j])
            merged = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
            for v in acc:
                merged = (merged ^ _xxh64_round(np.zeros(n, np.uint64), v)) * _XXH_P1 + _XXH_P4
            h = np.where(stripes > 0, merged, h)
        h = h + ulen
        first_word = stripes * 4
        n_words = (lengths - stripes * 32) // 8
        for j in range(int(n_words.max(initial=0))):
            k1 = words[row, np.minimum(first_word + j, words.shape[1] - 1)]
            h = np.where(n_words > j, _rotl(h ^ _xxh64_round(np.zeros(n, np.uint64), k1), 27) * _XXH_P1 + _XXH_P4, h)
        at = lengths & ~7
        four = lengths - at >= 4
        k = halves[row, at // 4].astype(np.uint64)
        h = np.where(four, _rotl(h ^ (k * _XXH_P1), 23) * _XXH_P2 + _XXH_P3, h)
        at = at + 4 * four
        for j in range(3):
            b = mat[row, np.minimum(at + j, width - 1)].astype(np.uint64)
            h = np.where(lengths - at > j, _rotl(h ^ (b * _XXH_P5), 11) * _XXH_P1, h)
        h ^= h >> np.uint64(33)
        h *= _XXH_P2
        h ^= h >> np.uint64(29)
        h *= _XXH_P3
        h ^= h >> np.uint64(32)
    return h


def state_bucket_of(group_ids: Any, buckets: int) -> np.ndarray:
    """Spark's ``pmod(xxhash64(group_id), buckets)`` per row (int64; hashed once per distinct
    group): the stream's state bucket of a group, the same in the source's tasks as it was
    when Spark computed it (checkpoints written before the packs carried it)."""
    enc = _distinct(group_ids)
    per_group = np.mod(spark_xxhash64(enc.dictionary), buckets)
    codes = enc.indices.to_numpy(zero_copy_only=False)
    if enc.indices.null_count:  # a null group id: Spark's xxhash64 of null is its seed
        codes = np.where(enc.indices.is_null().to_numpy(zero_copy_only=False), len(per_group), codes).astype(np.int64)
        per_group = np.append(per_group, SPARK_XXHASH64_SEED % buckets)
    out: np.ndarray = per_group[codes]
    return out


def cut(table: pa.Table, buckets: int) -> Iterator[tuple[int, pa.Table, int]]:
    """Replay-input rows → (bucket, its rows in input order, newest record ms) per bucket present."""

    if table.num_rows == 0:
        return
    per_row = bucket_of(table.column("group_id"), buckets)
    # a 16-bit key sorts stably by radix sort (one pass; ~10x a 32-bit key's merge sort)
    order = np.argsort(per_row.astype(np.uint16) if buckets <= 1 << 16 else per_row, kind="stable")
    b_sorted = per_row[order]
    starts = np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]])
    ends = np.r_[starts[1:], len(order)]
    ts = table.column("log_timestamp_ms").to_numpy(zero_copy_only=False)[order]
    newest = np.maximum.reduceat(ts, starts).tolist()
    # one gather for all buckets, then zero-copy slices (a take per bucket costs per call)
    by_bucket = table.take(pa.array(order, pa.int64()))
    for s, e, m in zip(starts.tolist(), ends.tolist(), newest, strict=True):
        yield int(b_sorted[s]), by_bucket.slice(s, e - s), int(m)


def as_numpy(col: Any, fill: Any) -> Any:
    """A (chunked) Arrow column as a numpy array, nulls replaced by ``fill``."""

    arr = col.fill_null(fill) if col.null_count else col
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return np.asarray(arr.to_numpy(zero_copy_only=False))


def replay_order(table: pa.Table) -> Any:
    """Row indices ordering ``table`` by (group_id, coordinator_partition, log_offset), stably.

    The same order as Arrow's ``sort_indices`` on the three columns (nulls last), about 10x
    cheaper: the group ids are ranked once per distinct value and the three keys packed into
    one int64 when their ranges fit (a replay input always does), else ``numpy.lexsort``.
    """
    return replay_order_and_groups(table)[0]


def sort_packed(keys: Sequence[Any]) -> Any:
    """Row indices ordering non-negative int64 ``keys`` (most significant first) stably, or None
    when they do not fit in one int64 together with the row number.

    Each row's keys and its row number are packed into one int64 (row number in the low bits:
    equal keys keep their input order) and the VALUES sorted (numpy's sort of int64 values is
    several times cheaper than ``argsort``, and ``lexsort`` several times dearer still); the row
    numbers are the low bits of the result.
    """
    n = len(keys[0])
    row_bits = max(1, n.bit_length())
    bits = [int(k.max()).bit_length() if n else 0 for k in keys]
    if sum(bits) + row_bits > 63:
        return None
    packed = np.zeros(n, np.int64)
    for k, b in zip(keys, bits, strict=True):
        packed <<= b
        packed |= k
    packed <<= row_bits
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    return packed & ((1 << row_bits) - 1)


def replay_order_and_groups(table: pa.Table) -> tuple[Any, Any]:
    """``replay_order`` and where each group begins in it (indices into the order, ascending;
    rows of a null group id form one group, last).

    The keys are packed into one int64 with the row number in the low bits (``sort_packed``).
    """

    n = table.num_rows
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    groups = table.column("group_id")
    groups = groups.combine_chunks() if isinstance(groups, pa.ChunkedArray) else groups
    enc = groups.dictionary_encode()
    distinct = len(enc.dictionary)
    rank = np.empty(distinct + 1, np.int64)
    rank[np.asarray(pc.sort_indices(enc.dictionary).to_numpy(zero_copy_only=False))] = np.arange(distinct)
    rank[distinct] = distinct  # a null group sorts last
    codes = rank[as_numpy(enc.indices, distinct).astype(np.int64)]
    part = as_numpy(table.column("coordinator_partition"), 0).astype(np.int64)
    off = as_numpy(table.column("log_offset"), 0).astype(np.int64)
    order = sort_packed((codes, part - part.min(), off - off.min()))
    if order is None:
        order = np.lexsort((off, part, codes))
    grouped = codes[order]
    starts = np.concatenate(([0], np.flatnonzero(grouped[1:] != grouped[:-1]) + 1)).astype(np.int64)
    return order, starts


def sorted_by_position(table: pa.Table) -> pa.Table:
    part = as_numpy(table.column("coordinator_partition"), 0).astype(np.int64)
    off = as_numpy(table.column("log_offset"), 0).astype(np.int64)
    if len(part) < 2 or bool(np.all((part[1:] > part[:-1]) | ((part[1:] == part[:-1]) & (off[1:] >= off[:-1])))):
        return table
    order = pc.sort_indices(table, [("coordinator_partition", "ascending"), ("log_offset", "ascending")])
    return table.take(order)


def project_union(union: pa.RecordBatch | pa.Table) -> pa.Table:
    """Decoded-union rows (``schemas.shapes.DECODE_UNION``) -> replay-input rows: the union split
    into the decoded tables (``pipelines.records.decode.split_union_arrow``), each projected."""

    return project_tables(split_union_arrow(union))


def project_tables(tables: Mapping[str, pa.Table]) -> pa.Table:
    """The decoded tables' rows (``split_union_arrow``) -> replay-input rows (``project_union``
    once the union is split: the stream's source also writes those tables)."""
    parts = [project(name, tables[name]) for name in SOURCES if name in tables]
    return pa.concat_tables(parts) if parts else schema().empty_table()


def pack_buckets(table: pa.Table, buckets: int, event_ms: np.ndarray | None = None) -> pa.RecordBatch:
    """Replay-input rows -> one packed row per state bucket (``schemas.shapes.STREAM_PACK``): the
    bucket (``state_bucket_of``), its newest record time, its rows in replay order
    (``replay_order``) as one Arrow IPC record-batch message.

    ``event_ms`` (one per row of ``table``) replaces the record times in the pack's event time
    only (the stream: a record far ahead of its log partition must not move the watermark); the
    packed rows keep their own times."""
    shape = STREAM_PACK.arrow_schema()
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=shape)
    order = replay_order(table)
    bucket = state_bucket_of(table.column("group_id"), buckets)[order]
    by_bucket = np.argsort(bucket, kind="stable")  # each bucket's rows keep the replay order
    order, bucket = order[by_bucket], bucket[by_bucket]
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], len(order)]
    ts = (
        table.column("log_timestamp_ms").to_numpy(zero_copy_only=False)
        if event_ms is None
        else np.asarray(event_ms, dtype=np.int64)
    )[order]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(bucket[starts], pa.int64()),
            pa.array(np.maximum.reduceat(ts, starts) * 1000, pa.int64()).cast(shape.field("log_timestamp").type),
            _pack_messages(table, order, starts, ends),
        ],
        schema=shape,
    )


def _pack_messages(table: pa.Table, order: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The rows ``order[starts[i]:ends[i]]`` of ``table``, for each i, as one IPC record-batch
    message, as a binary array.

    Each part is taken (a compact copy), not sliced: Arrow's IPC writer (pyarrow 26) copies a
    large part of the member structs' buffers into the message of a ``members`` slice whose
    lists hold no member (commits only): ~280 kB for one commit row on the Kafka bench's log.
    The messages are written one after the other by ONE stream writer and the array is cut from
    its output at the writer's positions: a message there is byte for byte
    ``RecordBatch.serialize()``'s, without a Python bytes object and a copy per part.
    """
    # a dictionary column would put dictionary messages between the record batches
    assert not any(pa.types.is_dictionary(f.type) for f in table.schema), table.schema
    sink = pa.BufferOutputStream()
    writer = pa.ipc.new_stream(sink, table.schema)
    writer.write_batch(pa.RecordBatch.from_pylist([], schema=table.schema))  # the schema goes first
    positions = [sink.tell()]
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        rows = table.take(pa.array(order[start:end], pa.int64())).combine_chunks()
        writer.write_batch(rows.to_batches()[0])
        positions.append(sink.tell())
    writer.close()
    offsets = np.asarray(positions, np.int64) - positions[0]
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"a pack of {table.num_rows} rows is {offsets[-1]} bytes: more than a binary array holds")
    data = sink.getvalue().slice(positions[0], positions[-1] - positions[0])
    return pa.Array.from_buffers(pa.binary(), len(positions) - 1, [None, pa.py_buffer(offsets.astype(np.int32)), data])


def unpack_packs(blobs: Sequence[bytes]) -> pa.Table:
    """The inverse of ``pack_buckets``: the rows of any packs (any order), concatenated."""
    shape = schema()
    return pa.Table.from_batches([pa.ipc.read_record_batch(pa.py_buffer(b), shape) for b in blobs], schema=shape)
