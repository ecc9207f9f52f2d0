"""Decode raw ``__consumer_offsets`` records into the decoded (silver) tables.

Rules:
- Parts: ``decode_commits`` (the vectorised offset-commit decoder), ``decode_rows`` (rows the
  core codec decodes: group metadata, unsupported, quarantine), ``decode_common`` (kinds, schemas).
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
  (the batch job checks it at its commit). Every row keeps its log position.
- One ``mapInArrow`` pass emits a union-shaped batch (``kind`` column + the columns of every
  output); ``split_union`` splits it with filters/projections. Only the raw columns the decoder
  needs enter ``mapInArrow`` (DESIGN §7).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from pipelines.records import decode_commits
from pipelines.records.decode_commits import CommitColumns, np_array
from pipelines.records.decode_common import TS as _TS
from pipelines.records.decode_common import (
    INPUT_COLUMNS,
    KIND_GROUP_METADATA,
    KIND_NAMES,
    KIND_OFFSET_COMMIT,
    KIND_QUARANTINE,
    KIND_UNSUPPORTED,
    MAX_ABS_MS,
    UNION_SCHEMA,
)
from pipelines.records.decode_commits import decode_offset_commits_arrow
from pipelines.records.decode_rows import GroupMetadataColumns, core_row, slow_row
from schemas.decoded import GROUP_METADATA, OFFSET_COMMITS, QUARANTINE, UNSUPPORTED_RECORDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "INPUT_COLUMNS", "KIND_GROUP_METADATA", "KIND_NAMES", "KIND_OFFSET_COMMIT", "KIND_QUARANTINE",
    "KIND_UNSUPPORTED", "MAX_ABS_MS", "UNION_SCHEMA", "DecodeResult", "decode_batch", "decode_batches",
    "decode_offset_commits_arrow", "decode_union", "slow_row", "split_union", "union_spark_schema",
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
        return [u for lo in range(0, n, decode_commits.CHUNK_ROWS) for u in decode_batch(batch.slice(lo, decode_commits.CHUNK_ROWS), lenient=lenient)]
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
                [cols[f.name] if f.name in cols else _nulls(m, f.type) for f in UNION_SCHEMA],
                schema=UNION_SCHEMA,
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
            if row["kind"] in (KIND_UNSUPPORTED, KIND_QUARANTINE):
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








