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
- The rules themselves are ``pipelines.records.positions`` (the stream applies the same code):
  the per-row refusal runs in the tasks (``refusal_columns`` in ``mapInArrow``); the copy rules
  are its joins here (the whole input against ``raw_records``), with its columns and wording.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.records.positions import (
    COMPARED,
    CONFLICTING_DUPLICATE,
    DETAIL_IN_INPUT,
    DETAIL_VS_TAKEN,
    POSITION,
    position_in_bounds,
    refusal_columns,
    table_ranges_arrow,
)
from schemas.raw import RAW_RECORDS
from schemas.shapes import POSITION_RANGES

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO

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
        if not position_in_bounds(part, first, num_partitions):
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


_SAME_COLS = COMPARED


def _differs(a: str, b: str) -> Any:
    """Column: the copies ``a`` and ``b`` differ in bytes (null-safe), as the first differing part."""
    from pyspark.sql import functions as F

    expr = F.lit(None).cast("string")
    for c in reversed(_SAME_COLS):
        expr = F.when(~F.col(f"{a}{c}").eqNullSafe(F.col(f"{b}{c}")), F.lit(c)).otherwise(expr)
    return expr


def _with_refusals(incoming: DataFrame, num_partitions: int) -> DataFrame:
    """``incoming`` + ``_reason``/``_detail`` (null for a trusted position): ``refusal_columns``
    in one ``mapInArrow`` pass."""
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType(
        [*incoming.schema.fields, StructField("_reason", StringType()), StructField("_detail", StringType())]
    )

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for b in batches:
            reason, detail = refusal_columns(pa.Table.from_batches([b]), num_partitions)
            yield pa.RecordBatch.from_arrays(
                [*b.columns, reason, detail], names=[*b.schema.names, "_reason", "_detail"]
            )

    return incoming.mapInArrow(fn, schema)


def validate_positions(incoming: DataFrame, existing: DataFrame | None, num_partitions: int) -> Validated:
    """Split ``incoming`` (``RAW_RECORDS`` columns + ``source_file``) into new rows and refused
    rows (see the module rules); ``existing`` is ``raw_records`` (or ``None`` when empty)."""
    from pyspark.sql import functions as F

    refused_cols = [*_RAW_COLS, "reason", "detail", "other_key", "other_value", "other_in_raw_records", "source_file"]
    no_other = [
        F.lit(None).cast("binary").alias("other_key"),
        F.lit(None).cast("binary").alias("other_value"),
        F.lit(None).cast("boolean").alias("other_in_raw_records"),
    ]
    # the position rules (pipelines.records.positions), the same code the stream runs, in the tasks
    classified = _with_refusals(incoming, num_partitions)
    bad = classified.where(F.col("_reason").isNotNull()).select(
        *_RAW_COLS, F.col("_reason").alias("reason"), F.col("_detail").alias("detail"), *no_other, "source_file"
    )
    valid = classified.where(F.col("_reason").isNull()).select(*incoming.columns)
    vs_raw = None
    if existing is not None:
        # a position raw_records holds: each input copy is a duplicate (same bytes) or refused
        # with the committed copy as the other one (which stays)
        ex = existing.select(*POSITION, *[F.col(c).alias(f"x_{c}") for c in _SAME_COLS], F.lit(True).alias("_x"))
        joined = valid.join(ex, list(POSITION), "left")
        vs_raw = joined.where(F.col("_x") & _differs("", "x_").isNotNull()).select(
            *_RAW_COLS,
            F.lit(CONFLICTING_DUPLICATE).alias("reason"),
            F.format_string(DETAIL_VS_TAKEN.format(where="raw_records", part="%s"), _differs("", "x_")).alias("detail"),
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
            F.lit(CONFLICTING_DUPLICATE).alias("reason"),
            F.format_string(DETAIL_IN_INPUT.format(part="%s"), F.col("part")).alias("detail"),
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
