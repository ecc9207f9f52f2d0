"""Ingest's position checks: per-task offset ranges, disjointness, and the exact validation that
refuses bad or conflicting positions into ``ingest_quarantine``.

Rules:
- ``position_ranges`` reads only (topic, partition, offset) in one column-pruned pass and returns,
  per task and log partition, the offset range, the row count and whether the task saw a
  position twice; disjoint ranges prove the input holds no duplicate and nothing already ingested.
- ``validate_positions`` (the exact path): a row with a null or missing topic/partition/offset, a
  partition outside 0..``offsets_topic.num_partitions``-1, or a position held by a copy with other
  bytes goes to ``ingest_quarantine`` with the reason (and the other copy's bytes for a
  conflict), never into ``raw_records``. ``ingest_quarantine`` is keyed by a hash of the row.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.raw import RAW_RECORDS
from schemas.shapes import POSITION_RANGES

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO

POSITION = ("topic", "partition", "offset")
log = logging.getLogger("pipelines.batch.ingest")


@dataclass(frozen=True)
class PositionRange:
    """The positions one task of a scan saw in one log partition."""

    topic: str
    partition: int
    first: int  # smallest offset
    last: int  # largest offset
    rows: int
    repeats: bool  # some offset occurs twice within this task


def _task_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: one row per log partition seen by this task (numpy over the positions)."""
    import pyarrow as pa

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if tables:
        yield table_ranges_arrow(pa.concat_tables(tables))


def table_ranges_arrow(t: pa.Table) -> pa.RecordBatch:
    """Per log partition of ``t`` (topic, partition, offset columns): range, rows, repeats."""
    import numpy as np
    import pyarrow as pa

    if any(t.column(c).null_count for c in POSITION):  # no position to compare: take the exact path
        return pa.RecordBatch.from_pydict(
            {
                "topic": [""],
                "partition": pa.array([-1], pa.int32()),
                "first": pa.array([0], pa.int64()),
                "last": pa.array([0], pa.int64()),
                "rows": pa.array([t.num_rows], pa.int64()),
                "repeats": [True],
            }
        )
    topic = t.column("topic").combine_chunks().dictionary_encode()
    codes = topic.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    part = t.column("partition").to_numpy().astype(np.int64)
    off = t.column("offset").to_numpy().astype(np.int64)
    seg = codes * (1 << 32) + (part & 0xFFFFFFFF)
    # a stable sort by log partition keeps each partition's rows in file order; when every
    # partition's offsets already increase there is no repeat and no second sort is needed
    order = np.argsort(seg, kind="stable")
    seg_s, off_s = seg[order], off[order]
    starts = np.flatnonzero(np.r_[True, seg_s[1:] != seg_s[:-1]])
    ends = np.r_[starts[1:], len(seg_s)]
    inside = np.r_[False, seg_s[1:] == seg_s[:-1]]
    if (off_s[1:][inside[1:]] <= off_s[:-1][inside[1:]]).any():
        order = np.lexsort((off, seg))
        seg_s, off_s = seg[order], off[order]
    same = inside & np.r_[False, off_s[1:] == off_s[:-1]]
    rep = np.add.reduceat(same.astype(np.int64), starts) > 0
    firsts = np.minimum.reduceat(off_s, starts)
    lasts = np.maximum.reduceat(off_s, starts)
    first_rows = order[starts]
    return pa.RecordBatch.from_pydict(
        {
            "topic": topic.dictionary.take(pa.array(codes[first_rows])),
            "partition": pa.array(part[first_rows], pa.int32()),
            "first": pa.array(firsts, pa.int64()),
            "last": pa.array(lasts, pa.int64()),
            "rows": pa.array(ends - starts, pa.int64()),
            "repeats": pa.array(rep),
        }
    )


def position_ranges(df: DataFrame) -> list[PositionRange]:
    """Per task and log partition: the offset range, row count and in-task repeats of ``df``.

    Reads only the three position columns (a column-pruned scan for Parquet sources).
    """
    rows = df.select(*POSITION).mapInArrow(_task_ranges, POSITION_RANGES.ddl()).collect()
    return [PositionRange(r["topic"], r["partition"], r["first"], r["last"], r["rows"], r["repeats"]) for r in rows]


def ranges_in_bounds(ranges: Iterable[PositionRange | dict[str, Any]], num_partitions: int | None) -> bool:
    """True when every range's log partition is in 0..num_partitions-1 (and its offsets >= 0)."""
    for r in ranges:
        part = r["partition"] if isinstance(r, dict) else r.partition
        first = r["first"] if isinstance(r, dict) else r.first
        if part is None or part < 0 or (num_partitions is not None and part >= num_partitions) or first < 0:
            return False
    return True


def table_ranges(df: DataFrame) -> list[PositionRange]:
    """One range per log partition of an existing table (an aggregate over two columns)."""
    from pyspark.sql import functions as F

    rows = (
        df.groupBy("topic", "partition")
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("rows"))
        .collect()
    )
    return [PositionRange(r["topic"], r["partition"], r["first"], r["last"], r["rows"], False) for r in rows]


def ranges_disjoint(ranges: Iterable[PositionRange]) -> bool:
    """True when no range repeats a position and no two ranges of one log partition overlap."""
    by_part: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in ranges:
        if r.repeats:
            return False
        by_part.setdefault((r.topic, r.partition), []).append((r.first, r.last))
    for spans in by_part.values():
        spans.sort()
        for (_, prev_last), (first, _) in itertools.pairwise(spans):
            if first <= prev_last:
                return False
    return True


@dataclass
class Validated:
    """The exact path's split of an input: rows for ``raw_records`` (one per position, not yet
    there) and refused rows (``ingest_quarantine`` shape without ``record_id``/``run_id``)."""

    new: DataFrame
    refused: DataFrame


_RAW_COLS = RAW_RECORDS.column_names


_SAME_COLS = ("key", "value", "timestamp", "timestampType")


def _differs(a: str, b: str) -> Any:
    """Column: the copies ``a`` and ``b`` differ in bytes (null-safe), as the first differing part."""
    from pyspark.sql import functions as F

    expr = F.lit(None).cast("string")
    for c in reversed(_SAME_COLS):
        expr = F.when(~F.col(f"{a}{c}").eqNullSafe(F.col(f"{b}{c}")), F.lit(c)).otherwise(expr)
    return expr


def validate_positions(incoming: DataFrame, existing: DataFrame | None, num_partitions: int) -> Validated:
    """Split ``incoming`` (``RAW_RECORDS`` columns + ``source_file``) into new rows and refused
    rows (see the module rules); ``existing`` is ``raw_records`` (or ``None`` when empty)."""
    from pyspark.sql import functions as F

    null_pos = F.col("topic").isNull() | F.col("partition").isNull() | F.col("offset").isNull()
    out_of_range = (F.col("partition") < 0) | (F.col("partition") >= num_partitions)
    negative = F.col("offset") < 0
    null_detail = F.concat_ws(", ", *[F.when(F.col(c).isNull(), F.lit(f"{c} is null")) for c in POSITION])
    refused_cols = [*_RAW_COLS, "reason", "detail", "other_key", "other_value", "other_in_raw_records", "source_file"]
    no_other = [
        F.lit(None).cast("binary").alias("other_key"),
        F.lit(None).cast("binary").alias("other_value"),
        F.lit(None).cast("boolean").alias("other_in_raw_records"),
    ]
    bad = incoming.where(null_pos | out_of_range | negative).select(
        *_RAW_COLS,
        F.when(null_pos, F.lit("null_position"))
        .when(out_of_range, F.lit("partition_out_of_range"))
        .otherwise(F.lit("negative_offset"))
        .alias("reason"),
        F.when(null_pos, null_detail)
        .when(
            out_of_range,
            F.format_string(
                f"partition %d outside 0..{num_partitions - 1} (offsets_topic.num_partitions)", F.col("partition")
            ),
        )
        .otherwise(F.format_string("offset %d is negative", F.col("offset")))
        .alias("detail"),
        *no_other,
        "source_file",
    )
    valid = incoming.where(~(null_pos | out_of_range | negative))
    vs_raw = None
    if existing is not None:
        # a position raw_records holds: each input copy is a duplicate (same bytes) or refused
        # with the committed copy as the other one (which stays)
        ex = existing.select(*POSITION, *[F.col(c).alias(f"x_{c}") for c in _SAME_COLS], F.lit(True).alias("_x"))
        joined = valid.join(ex, list(POSITION), "left")
        vs_raw = joined.where(F.col("_x") & _differs("", "x_").isNotNull()).select(
            *_RAW_COLS,
            F.lit("conflicting_duplicate").alias("reason"),
            F.format_string("the copy already in raw_records has a different %s", _differs("", "x_")).alias("detail"),
            F.col("x_key").alias("other_key"),
            F.col("x_value").alias("other_value"),
            F.lit(True).alias("other_in_raw_records"),
            "source_file",
        )
        valid = joined.where(F.col("_x").isNull()).select(*incoming.columns)
    # positions new to raw_records: one copy, or every copy refused when the input disagrees
    copies = valid.select(*_RAW_COLS).distinct()
    conflict_pos = copies.groupBy(*POSITION).count().where(F.col("count") > 1).select(*POSITION)
    mine = valid.join(conflict_pos, list(POSITION), "left_semi").withColumn("_rid", F.monotonically_increasing_id())
    other = copies.join(conflict_pos, list(POSITION), "left_semi").select(
        *POSITION, *[F.col(c).alias(f"o_{c}") for c in _SAME_COLS]
    )
    paired = mine.join(other, list(POSITION)).where(_differs("", "o_").isNotNull())
    in_input = (
        paired.groupBy("_rid", *_RAW_COLS, "source_file")
        .agg(
            F.min(F.struct(*[F.col(f"o_{c}") for c in _SAME_COLS])).alias("o"),
            F.first(_differs("", "o_")).alias("part"),
        )
        .select(
            *_RAW_COLS,
            F.lit("conflicting_duplicate").alias("reason"),
            F.format_string("another copy in the input has a different %s", F.col("part")).alias("detail"),
            F.col("o.o_key").alias("other_key"),
            F.col("o.o_value").alias("other_value"),
            F.lit(False).alias("other_in_raw_records"),
            "source_file",
        )
    )
    new = copies.join(conflict_pos, list(POSITION), "left_anti")
    refused = bad.unionByName(in_input)
    if vs_raw is not None:
        refused = refused.unionByName(vs_raw)
    return Validated(new, refused.select(*refused_cols))


QUARANTINE_TABLE = "ingest_quarantine"


def _with_ids(refused: DataFrame, run_id: str) -> DataFrame:
    """``ingest_quarantine`` rows: identical refused rows of one file collapse into one (its
    ``record_id`` is a hash of every column and the reason)."""
    from pyspark.sql import functions as F

    parts = [
        F.coalesce(
            F.hex(F.col(c)) if c in ("key", "value", "other_key", "other_value") else F.col(c).cast("string"),
            F.lit("\\N"),
        )
        for c in (*_RAW_COLS, "reason", "other_key", "other_value", "source_file")
    ]
    return refused.withColumn("record_id", F.sha2(F.concat_ws("|", *parts), 256)).withColumn("run_id", F.lit(run_id))


def write_refused(io: TableIO, refused: DataFrame, run_id: str) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Append the refused rows not already in ``ingest_quarantine``; returns (refused rows of
    this input, per-reason counts). Idempotent: a rerun over the same input appends nothing."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    refused = refused.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = {r["reason"]: int(r["n"]) for r in refused.groupBy("reason").agg(F.count("*").alias("n")).collect()}
        total = sum(counts.values())
        if total:
            io.ensure(QUARANTINE_TABLE)
            rows = _with_ids(refused, run_id).dropDuplicates(["record_id"])
            if io.count(QUARANTINE_TABLE):
                rows = rows.join(io.read(QUARANTINE_TABLE).select("record_id"), "record_id", "left_anti")
            rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                if rows.limit(1).count():
                    io.append(QUARANTINE_TABLE, rows)
            finally:
                rows.unpersist()
            log.warning(
                "ingest: %d records refused into %s (%s)",
                total,
                QUARANTINE_TABLE,
                ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            )
        return total, tuple(sorted(counts.items()))
    finally:
        refused.unpersist()
