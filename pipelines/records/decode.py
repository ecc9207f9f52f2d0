"""Decode raw ``__consumer_offsets`` records into the decoded (silver) tables.

Rules:
- Parts: ``decode_commits`` (the vectorised offset-commit decoder), ``decode_rows`` (rows the
  core codec decodes: group metadata, unsupported, quarantine), ``decode_common`` (kinds, schemas).
- Offset commits (key version 0/1: the bulk of any real log) are decoded vectorised with
  numpy over whole Arrow batches, in place: fixed-width big-endian integers are gathered from
  the binary buffers (one gather per field group: a gather costs per row, not per byte),
  group/topic/metadata strings are cut by Arrow ``take`` over a segment view of the buffers,
  UTF-8 is validated only when a string column holds a byte >= 0x80. This is the one place
  outside ``coordinator_core`` that reads record bytes (ARCHITECTURE.md, "Where each rule lives")
  and it must agree with the core codec on every record
  (``tests/pipelines/test_decode_vectorised.py`` proves it).
- The fast path only accepts rows it can prove well-formed under the exact layouts of spec
  §3.2/§4.1 (known versions, exact lengths, no trailing bytes, single-byte compact lengths,
  no tagged fields, ASCII-or-valid UTF-8). Every other row goes to the core codec
  (``coordinator_core.codec.record_codec.decode_record``), which decides: decoded, unsupported (unknown
  record type / value version) or quarantine (``CoordinatorError`` and friends).
- Group metadata (key version 2) is always decoded by the core codec; its rows are collected
  column-wise, and each distinct member subscription/assignment blob is parsed once (bounded
  cache; plain assignments by a struct reader that defers anything unusual to the core), so
  the rows equal ``slow_row``'s (``_members_rows``: every member parsed alone by the core).
- Kafka 4's group records (KIP-848 consumer 3-8/16, KIP-932 share, KIP-1071 streams) are
  decoded by the core codec with ``modern=True`` into ``group_records`` (raw bytes kept); a
  modern key or value that does not parse is quarantined like any corrupt record.
- Nothing is dropped: raw = offset_commits + group_metadata + group_records + unsupported +
  quarantine (the batch job checks it at its commit). Every row keeps its log position.
- A decoded batch is union-shaped (``kind`` column + the columns of every output);
  ``split_union_arrow`` cuts it into the decoded tables. Only the raw columns the decoder
  needs enter ``mapInArrow`` (``decode_common.INPUT_COLUMNS``): every column of its input is
  shipped from the JVM to the Python worker as Arrow, read or not.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pipelines.records import decode_commits
from pipelines.records.decode_commits import CommitColumns, decode_offset_commits_arrow, np_array
from pipelines.records.decode_common import (
    INPUT_COLUMNS,
    KIND_GROUP_METADATA,
    KIND_GROUP_RECORD,
    KIND_NAMES,
    KIND_OFFSET_COMMIT,
    KIND_QUARANTINE,
    KIND_UNSUPPORTED,
    MAX_ABS_MS,
    UNION_SCHEMA,
)
from pipelines.records.decode_common import TS as _TS
from pipelines.records.decode_rows import GroupMetadataColumns, core_row, slow_row
from schemas.decoded import GROUP_METADATA, GROUP_RECORDS, OFFSET_COMMITS, QUARANTINE, UNSUPPORTED_RECORDS

__all__ = [
    "INPUT_COLUMNS",
    "KIND_GROUP_METADATA",
    "KIND_GROUP_RECORD",
    "KIND_NAMES",
    "KIND_OFFSET_COMMIT",
    "KIND_QUARANTINE",
    "KIND_UNSUPPORTED",
    "MAX_ABS_MS",
    "TABLES",
    "UNION_SCHEMA",
    "decode_batch",
    "decode_batches",
    "decode_offset_commits_arrow",
    "decode_tables",
    "slow_row",
    "split_union_arrow",
]


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
    if n > decode_commits.CHUNK_ROWS:  # one pass per chunk (CPU caches)
        return [
            u
            for lo in range(0, n, decode_commits.CHUNK_ROWS)
            for u in decode_batch(batch.slice(lo, decode_commits.CHUNK_ROWS), lenient=lenient)
        ]
    commits = CommitColumns(batch.column("key"), batch.column("value"))
    ok = commits.ok
    m = len(commits.idx)
    if m:
        pos = _position_arrays(batch, None if m == n else commits.idx)
        cols: dict[str, pa.Array] = {
            "kind": np_array(np.full(m, KIND_OFFSET_COMMIT, dtype=np.int8), pa.int8()),
            **pos,
            **commits.arrays(1000),
        }
        out.append(
            pa.RecordBatch.from_arrays(
                [cols[f.name] if f.name in cols else _nulls(m, f.type) for f in UNION_SCHEMA], schema=UNION_SCHEMA
            )
        )
    if not ok.all():
        rest = batch.take(pa.array(np.flatnonzero(~ok), type=pa.int64()))
        keys = rest.column("key").to_pylist()
        values = rest.column("value").to_pylist()
        topics = rest.column("topic").to_pylist() if "topic" in rest.schema.names else [None] * len(keys)
        gm = GroupMetadataColumns()
        rows: list[dict[str, Any]] = []
        row_pos: list[int] = []
        for i, (k, v, t) in enumerate(zip(keys, values, topics)):
            row = core_row(k, v, lenient, gm, i)
            if row is None:
                continue
            if row["kind"] in (KIND_UNSUPPORTED, KIND_QUARANTINE, KIND_GROUP_RECORD):
                row["raw_topic"] = t
            rows.append(row)
            row_pos.append(i)
        if len(gm):
            g = len(gm)
            gm_cols = {
                "kind": np_array(np.full(g, KIND_GROUP_METADATA, dtype=np.int8), pa.int8()),
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


def decode_batches(batches: Iterator[pa.RecordBatch], *, lenient: bool = False) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: raw batches in, union batches out."""
    for batch in batches:
        yield from decode_batch(batch, lenient=lenient)


# =============================================================================================
# The union -> the decoded tables (Arrow)
# =============================================================================================
_KINDS = {
    "KIND_OFFSET_COMMIT": KIND_OFFSET_COMMIT,
    "KIND_GROUP_METADATA": KIND_GROUP_METADATA,
    "KIND_UNSUPPORTED": KIND_UNSUPPORTED,
    "KIND_QUARANTINE": KIND_QUARANTINE,
    "KIND_GROUP_RECORD": KIND_GROUP_RECORD,
}
_RAW_NAMES = {
    "key": "raw_key",
    "value": "raw_value",
    "topic": "raw_topic",
    "partition": "coordinator_partition",
    "offset": "log_offset",
    "timestamp": "log_timestamp",
}


# table -> (union kind, {table column: union column})
_PROJECTIONS: dict[str, tuple[str, dict[str, str]]] = {
    OFFSET_COMMITS.name: ("KIND_OFFSET_COMMIT", {}),
    GROUP_METADATA.name: ("KIND_GROUP_METADATA", {}),
    UNSUPPORTED_RECORDS.name: ("KIND_UNSUPPORTED", {**_RAW_NAMES, "reason": "error_message"}),
    QUARANTINE.name: ("KIND_QUARANTINE", _RAW_NAMES),
    GROUP_RECORDS.name: ("KIND_GROUP_RECORD", _RAW_NAMES),
}


TABLES = tuple(_PROJECTIONS)


_SPECS = {s.name: s for s in (OFFSET_COMMITS, GROUP_METADATA, UNSUPPORTED_RECORDS, QUARANTINE, GROUP_RECORDS)}


def split_union_arrow(union: pa.RecordBatch | pa.Table | Sequence[pa.RecordBatch]) -> dict[str, pa.Table]:
    """The decoded tables' rows of union batches (Arrow, declared schemas; empty tables left
    out), in the batches' order. Split batch by batch: ``decode_batch`` makes each kind's rows
    their own batch, so a batch of one kind is projected as it is and only a mixed one gathers
    (a gather of the whole union, ~40 mostly-null columns, cost more than the decode's cut)."""
    import numpy as np
    import pyarrow as pa

    if isinstance(union, pa.RecordBatch):
        batches: Sequence[pa.RecordBatch] = [union]
    elif isinstance(union, pa.Table):
        batches = union.to_batches()
    else:
        batches = union
    parts: dict[str, list[pa.Table]] = {}
    for batch in batches:
        kinds = batch.column("kind").to_numpy(zero_copy_only=False)
        for name, (kind_attr, renames) in _PROJECTIONS.items():
            idx = np.flatnonzero(kinds == _KINDS[kind_attr])
            if not len(idx):
                continue
            part = batch if len(idx) == batch.num_rows else batch.take(pa.array(idx, pa.int64()))
            schema = _SPECS[name].arrow_schema()
            cols = [part.column(renames.get(f.name, f.name)).cast(f.type) for f in schema]
            parts.setdefault(name, []).append(pa.Table.from_arrays(cols, schema=schema))
    return {name: pa.concat_tables(ts) if len(ts) > 1 else ts[0] for name, ts in parts.items()}


def decode_tables(batch: pa.RecordBatch, *, lenient: bool = False) -> dict[str, pa.Table]:
    """One raw batch → the decoded tables' rows."""
    return split_union_arrow(decode_batch(batch, lenient=lenient))
