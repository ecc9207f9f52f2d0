"""Ingest: raw records from a landing directory, a Delta table or Kafka into ``raw_records``.

Rules:
- Every source is normalised to ``schemas.raw.RAW_RECORDS`` (Spark's Kafka source schema) —
  ``normalize`` is a pure ``DataFrame -> DataFrame`` function.
- Ingest is idempotent on (topic, partition, offset): duplicates inside the input are dropped,
  and records already in ``raw_records`` are removed with an anti-join before the append. A rerun
  over the same input appends nothing and makes no commit (the table version stays).
- A local landing of raw-record Parquet files is read by the tasks themselves (rust engine):
  one Spark task per group of files, the same multi-table writer as the decode stage appends
  them (no row crosses the JVM): a file already in ``RAW_RECORDS``' schema and big enough is
  copied byte for byte, the others are read and cast with pyarrow. The same pass reports each
  file's position ranges and the commit goes through only if they are disjoint
  (``check_disjoint``); a refused commit deletes the copies and the exact path below runs.
  Anything else (JSON lines, object stores, Kafka, a Delta source, odd column types) goes
  through Spark's readers.
- Files an earlier ingest committed (same absolute path, size and mtime; recorded in the
  commit's metadata) are not read again: a rerun over an unchanged landing directory costs a
  directory listing. Their rows still count as read (and as duplicates).
- Through Spark's readers the common case costs one column-pruned pass, not a shuffle:
  ``position_ranges`` reads only
  (topic, partition, offset) and returns, per task and log partition, the offset range, the row
  count and whether the task saw a position twice. When no task saw a duplicate and no two
  ranges of one log partition overlap (each other's or ``raw_records``'), the input holds no
  duplicate and nothing already ingested: it is appended as it is, in the source's order. Any
  overlap takes the exact path (``dropDuplicates`` + anti-join, then sorted by position).
  Overlapping ranges are only a reason to check, never a reason to drop.
- Positions are validated (the exact path below): a row with a null or missing
  topic/partition/offset, a partition outside 0..``offsets_topic.num_partitions``-1, or a
  position held by a copy with other bytes (key, value, timestamp or timestamp type) — one
  already in ``raw_records``, or another copy in the same input — goes to ``ingest_quarantine``
  with the reason (and the other copy's bytes for a conflict), never into ``raw_records``. A
  copy already in ``raw_records`` stays, and input copies equal to it are duplicates; at a
  position new to ``raw_records`` that the input disagrees about, every copy is refused
  (which one is right is not knowable). ``ingest_quarantine`` is keyed by a hash of the row, so
  a rerun adds nothing. Counts reconcile: read = new + identical duplicates + refused. The fast
  paths take a position range outside the configured partitions, a null position or any
  repeat as a reason to run the exact path, so they never admit such a row.
- A landing Parquet file whose columns have the wrong types fails before anything is read,
  with one line naming the file and the column (``check_landing_schemas``).
- Sources (``input.source``):
    landing  Parquet files (Spark's file source, executors read in parallel) and/or JSON-lines
             captures (read with ``pipelines.raw_files`` on the driver: a debugging/interchange
             format, small by nature). ``input.format: auto`` picks by file extension.
    delta    an existing ``raw_records`` Delta table (``input.path``); when it *is* the
             warehouse's own ``raw_records`` there is nothing to ingest.
    kafka    ``format("kafka")`` (batch read, earliest→latest) when the spark-sql-kafka jar is on
             the classpath, else ``format("offsetlake_kafka")`` (confluent-kafka, ``kafka.engine``);
             options from ``kafka.*`` and ``input.kafka_options``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.errors import UsageError
from pipelines.file_tasks import parquet_batches, spread
from schemas.raw import RAW_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.tableio import TableIO

log = logging.getLogger(__name__)

POSITION = ("topic", "partition", "offset")
RAW_TABLE = RAW_RECORDS.name
FILES_KEY = "offsetlake.landing_files"  # commit metadata: the landing files an ingest appended
_JSON_SUFFIXES = {".json", ".jsonl", ".ndjson"}


@dataclass(frozen=True)
class IngestResult:
    """Counts of one ingest run."""

    source: str
    records_read: int  # rows the source delivered (before de-duplication)
    records_new: int  # rows appended to raw_records
    raw_total: int  # rows in raw_records afterwards
    raw_version: int  # raw_records' Delta version afterwards
    quarantined: int = 0  # rows of the input refused (ingest_quarantine), this run
    quarantine_reasons: tuple[tuple[str, int], ...] = ()  # (reason, rows)

    @property
    def duplicates(self) -> int:
        """Rows identical to a copy already ingested (or repeated identically in the input)."""
        return self.records_read - self.records_new - self.quarantined


def normalize(df: DataFrame, *, dedupe: bool = True) -> DataFrame:
    """Conform a Kafka-source-shaped DataFrame to ``RAW_RECORDS``; drop in-batch duplicates
    (unless ``dedupe`` is False: the caller proved there are none).

    Extra columns (``headers`` from ``format("kafka")``) are dropped; missing ``topic`` defaults
    to ``__consumer_offsets`` and missing ``timestampType`` to 0 (CREATE_TIME).
    """
    from pyspark.sql import functions as F

    schema = RAW_RECORDS.spark_schema()
    cols = []
    for f in schema.fields:
        if f.name in df.columns:
            cols.append(F.col(f.name).cast(f.dataType).alias(f.name))
        elif f.name == "topic":
            cols.append(F.lit("__consumer_offsets").alias("topic"))
        elif f.name == "timestampType":
            cols.append(F.lit(0).cast("int").alias("timestampType"))
        else:
            raise UsageError(f"raw input has no '{f.name}' column (columns: {', '.join(df.columns)})")
    out = df.select(*cols)
    return out.dropDuplicates(list(POSITION)) if dedupe else out


def new_records(incoming: DataFrame, existing: DataFrame) -> DataFrame:
    """Rows of ``incoming`` whose (topic, partition, offset) is not in ``existing``."""
    keys = existing.select(*POSITION)
    return incoming.join(keys, on=list(POSITION), how="left_anti")


@dataclass(frozen=True)
class PositionRange:
    """The positions one task of a scan saw in one log partition."""

    topic: str
    partition: int
    first: int  # smallest offset
    last: int  # largest offset
    rows: int
    repeats: bool  # some offset occurs twice within this task


_RANGE_DDL = "topic string, partition int, first bigint, last bigint, rows bigint, repeats boolean"


def _task_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: one row per log partition seen by this task (numpy over the positions)."""
    import pyarrow as pa

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if tables:
        yield _table_ranges(pa.concat_tables(tables))


def _table_ranges(t: pa.Table) -> pa.RecordBatch:
    """Per log partition of ``t`` (topic, partition, offset columns): range, rows, repeats."""
    import numpy as np
    import pyarrow as pa

    if any(t.column(c).null_count for c in POSITION):  # no position to compare: take the exact path
        return pa.RecordBatch.from_pydict(
            {"topic": [""], "partition": pa.array([-1], pa.int32()), "first": pa.array([0], pa.int64()),
             "last": pa.array([0], pa.int64()), "rows": pa.array([t.num_rows], pa.int64()), "repeats": [True]})
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
    return pa.RecordBatch.from_pydict({
        "topic": topic.dictionary.take(pa.array(codes[first_rows])),
        "partition": pa.array(part[first_rows], pa.int32()),
        "first": pa.array(firsts, pa.int64()),
        "last": pa.array(lasts, pa.int64()),
        "rows": pa.array(ends - starts, pa.int64()),
        "repeats": pa.array(rep),
    })


def position_ranges(df: DataFrame) -> list[PositionRange]:
    """Per task and log partition: the offset range, row count and in-task repeats of ``df``.

    Reads only the three position columns (a column-pruned scan for Parquet sources).
    """
    rows = df.select(*POSITION).mapInArrow(_task_ranges, _RANGE_DDL).collect()
    return [PositionRange(r["topic"], r["partition"], r["first"], r["last"], r["rows"], r["repeats"]) for r in rows]


# --------------------------------------------------------------------------------------------
# Parquet landing files, read by the tasks themselves


def _landing_caster(schema: pa.Schema) -> Callable[[pa.RecordBatch], pa.Table] | None:
    """How to turn one landing file's batches into ``RAW_RECORDS`` rows, or ``None`` when the
    file is not plainly castable (then the whole landing goes through Spark's reader)."""
    import pyarrow as pa

    target = RAW_RECORDS.arrow_schema()
    names = set(schema.names)
    for need in ("key", "value", "partition", "offset", "timestamp"):
        if need not in names:
            return None
    checks = {
        "key": lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
        "value": lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t),
        "topic": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        "partition": pa.types.is_integer,
        "offset": pa.types.is_integer,
        "timestamp": lambda t: pa.types.is_timestamp(t) and t.tz in ("UTC", "+00:00", "Etc/UTC"),
        "timestampType": pa.types.is_integer,
    }
    for name, ok in checks.items():
        if name in names and not ok(schema.field(name).type):
            return None

    def cast(batch: pa.RecordBatch) -> pa.Table:
        n = batch.num_rows
        cols = []
        for f in target:
            if f.name in batch.schema.names:
                cols.append(batch.column(f.name).cast(f.type))
            elif f.name == "topic":
                cols.append(pa.array(["__consumer_offsets"] * n, f.type))
            else:  # timestampType
                cols.append(pa.array([0] * n, f.type))
        return pa.Table.from_arrays(cols, schema=target)

    return cast


def landing_files_readable_by_tasks(cfg: Config, known: Collection[str] = ()) -> list[str] | None:
    """The landing's Parquet files when the tasks can read and cast them themselves (a local
    landing of Parquet files only, every file with the raw columns); otherwise ``None``.
    Files whose ``file_stamp`` is in ``known`` (already ingested) are listed but not opened.

    Raises:
        UsageError: a landing file is not readable Parquet (nothing has been written yet).
    """
    import pyarrow.parquet as pq

    if cfg.input.source != "landing" or cfg.input.format == "json":
        return None
    path = cfg.input.path or cfg.paths.landing
    if "://" in path:
        return None
    parquet, jsonl = _landing_files(path)
    if jsonl and cfg.input.format != "parquet":
        return None
    if not parquet:
        return None
    for f in parquet:
        if known and file_stamp(f) in known:
            continue
        try:
            schema = pq.read_schema(f)
        except (OSError, ValueError) as exc:  # stop before anything is written, naming the file
            raise UsageError(f"input: {f} is not a readable Parquet file ({exc}); "
                             "move it out of the landing directory or re-capture it") from exc
        if _landing_caster(schema) is None:
            return None
    return parquet


def route_copy_files(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``offsetlake_delta_rs_multi`` route over landing file paths: each file's rows, cast to
    ``RAW_RECORDS``, in file order.

    A file already in ``RAW_RECORDS``' exact schema with at least ``options["min_copy_rows"]``
    rows is copied byte for byte (no decode and re-encode); smaller ones are rewritten so a
    landing of many small captures does not become a table of many small files.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.tableio import SIDE_KEY, ParquetFileCopy, file_matches

    target = RAW_RECORDS.arrow_schema()
    min_copy = options.get("min_copy_rows")
    side = options.get(SIDE_KEY)
    for batch in batches:
        for path in batch.column("path").to_pylist():
            pf = pq.ParquetFile(path)
            schema, rows = pf.schema_arrow, pf.metadata.num_rows
            pf.close()
            positions: list[pa.Table] = []
            if min_copy is not None and rows >= int(min_copy) and file_matches(schema, target):
                # every page is read (and so checked) before the bytes are adopted: a damaged
                # file fails here, naming itself, instead of entering raw_records
                for raw in _checked_batches(path):
                    positions.append(pa.Table.from_batches([raw]).select(list(POSITION)))
                yield {RAW_TABLE: ParquetFileCopy(path, rows)}, rows
            else:
                cast = _landing_caster(schema)
                if cast is None:
                    raise ValueError(f"{path}: not a raw-record Parquet file")
                for raw in _checked_batches(path):
                    rows_out = cast(raw)
                    positions.append(rows_out.select(list(POSITION)))
                    yield {RAW_TABLE: rows_out}, raw.num_rows
            if side is not None and positions:
                t = pa.concat_tables(positions)
                if "topic" not in t.column_names:
                    t = t.append_column("topic", pa.array(["__consumer_offsets"] * t.num_rows, pa.string()))
                side.extend(_table_ranges(t.select(list(POSITION))).to_pylist())


def _checked_batches(path: str) -> Iterator[pa.RecordBatch]:
    """A landing file's batches; a file that cannot be read fails with its name."""
    import pyarrow as pa

    try:
        yield from parquet_batches(path)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path}: unreadable landing Parquet file ({exc})") from exc


def check_disjoint(side: list[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """``commit_check`` of the copy: refuse when the files' position ranges (the routes' side
    outputs) repeat a position or overlap each other or raw_records' (``options["existing"]``)."""
    ranges = [PositionRange(**r) for r in [*side, *options.get("existing", [])]]
    if ranges_disjoint(ranges) and ranges_in_bounds(side, options.get("num_partitions")):
        return None
    return "the input overlaps itself or raw_records, or has positions outside the configured partitions"


def ranges_in_bounds(ranges: Iterable[PositionRange | dict[str, Any]], num_partitions: int | None) -> bool:
    """True when every range's log partition is in 0..num_partitions-1 (and its offsets >= 0)."""
    for r in ranges:
        part = r["partition"] if isinstance(r, dict) else r.partition
        first = r["first"] if isinstance(r, dict) else r.first
        if part is None or part < 0 or (num_partitions is not None and part >= num_partitions) or first < 0:
            return False
    return True


def file_stamp(path: str) -> str:
    """A landing file's identity for "already ingested": absolute path, size, mtime (ns)."""
    st = os.stat(path)
    return f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"


def _file_rows(path: str) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_metadata(path).num_rows)


def ingested_files(io: TableIO) -> dict[str, int]:
    """Landing files recorded by earlier ingest commits of raw_records (stamp → rows).

    A file appears there once its rows were committed (by either path); a file changed since
    (size or mtime) has another stamp and is read again (and de-duplicated by position).
    Commits older than the Delta log's retention are forgotten: their files are read again and
    found to be duplicates.
    """
    out: dict[str, int] = {}
    for info in io.history(RAW_TABLE):
        text = info.get(FILES_KEY)
        if isinstance(text, str):
            with contextlib.suppress(ValueError):
                out.update({str(k): int(v) for k, v in json.loads(text).items()})
    return out


def table_ranges(df: DataFrame) -> list[PositionRange]:
    """One range per log partition of an existing table (an aggregate over two columns)."""
    from pyspark.sql import functions as F

    rows = df.groupBy("topic", "partition").agg(
        F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("rows")
    ).collect()
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


# --------------------------------------------------------------------------------------------
# validation: landing file types, positions


#: column → (accepts, expected) for a landing Parquet file's present columns (what Spark's
#: reader with ``RAW_RECORDS``' schema, or the tasks' pyarrow cast, can take)
def _type_rules() -> dict[str, tuple[Callable[[Any], bool], str]]:
    import pyarrow as pa

    def binary(t: Any) -> bool:
        return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))

    return {
        "key": (binary, "binary"),
        "value": (binary, "binary"),
        "topic": (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
        "partition": (pa.types.is_integer, "an integer"),
        "offset": (pa.types.is_integer, "an integer"),
        "timestamp": (pa.types.is_timestamp, "a timestamp"),
        "timestampType": (pa.types.is_integer, "an integer"),
    }


def check_landing_schemas(files: Iterable[str]) -> None:
    """Raise ``UsageError`` naming the file and column when a landing Parquet file has a raw
    column of the wrong type or no ``key`` column (footers only: nothing is read or written)."""
    import pyarrow.parquet as pq

    rules = _type_rules()
    for f in files:
        try:
            schema = pq.read_schema(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"input: {f} is not a readable Parquet file ({exc}); "
                             "move it out of the landing directory or re-capture it") from exc
        if "key" not in schema.names:
            raise UsageError(f"input: {f}: no 'key' column (columns: {', '.join(schema.names)})")
        for name, (ok, expected) in rules.items():
            if name in schema.names and not ok(schema.field(name).type):
                raise UsageError(f"input: {f}: column '{name}' has type {schema.field(name).type}, expected {expected}")


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
    refused_cols = [*_RAW_COLS, "reason", "detail", "other_key", "other_value", "other_in_raw_records",
                    "source_file"]
    no_other = [F.lit(None).cast("binary").alias("other_key"), F.lit(None).cast("binary").alias("other_value"),
                F.lit(None).cast("boolean").alias("other_in_raw_records")]
    bad = incoming.where(null_pos | out_of_range | negative).select(
        *_RAW_COLS,
        F.when(null_pos, F.lit("null_position")).when(out_of_range, F.lit("partition_out_of_range"))
        .otherwise(F.lit("negative_offset")).alias("reason"),
        F.when(null_pos, null_detail).when(
            out_of_range, F.format_string(f"partition %d outside 0..{num_partitions - 1} "
                                          "(offsets_topic.num_partitions)", F.col("partition")))
        .otherwise(F.format_string("offset %d is negative", F.col("offset"))).alias("detail"),
        *no_other, "source_file",
    )
    valid = incoming.where(~(null_pos | out_of_range | negative))
    vs_raw = None
    if existing is not None:
        # a position raw_records holds: each input copy is a duplicate (same bytes) or refused
        # with the committed copy as the other one (which stays)
        ex = existing.select(*POSITION, *[F.col(c).alias(f"x_{c}") for c in _SAME_COLS], F.lit(True).alias("_x"))
        joined = valid.join(ex, list(POSITION), "left")
        vs_raw = joined.where(F.col("_x") & _differs("", "x_").isNotNull()).select(
            *_RAW_COLS, F.lit("conflicting_duplicate").alias("reason"),
            F.format_string("the copy already in raw_records has a different %s",
                            _differs("", "x_")).alias("detail"),
            F.col("x_key").alias("other_key"), F.col("x_value").alias("other_value"),
            F.lit(True).alias("other_in_raw_records"), "source_file",
        )
        valid = joined.where(F.col("_x").isNull()).select(*incoming.columns)
    # positions new to raw_records: one copy, or every copy refused when the input disagrees
    copies = valid.select(*_RAW_COLS).distinct()
    conflict_pos = copies.groupBy(*POSITION).count().where(F.col("count") > 1).select(*POSITION)
    mine = valid.join(conflict_pos, list(POSITION), "left_semi").withColumn("_rid", F.monotonically_increasing_id())
    other = copies.join(conflict_pos, list(POSITION), "left_semi").select(
        *POSITION, *[F.col(c).alias(f"o_{c}") for c in _SAME_COLS])
    paired = mine.join(other, list(POSITION)).where(_differs("", "o_").isNotNull())
    in_input = paired.groupBy("_rid", *_RAW_COLS, "source_file").agg(
        F.min(F.struct(*[F.col(f"o_{c}") for c in _SAME_COLS])).alias("o"),
        F.first(_differs("", "o_")).alias("part"),
    ).select(
        *_RAW_COLS, F.lit("conflicting_duplicate").alias("reason"),
        F.format_string("another copy in the input has a different %s", F.col("part")).alias("detail"),
        F.col("o.o_key").alias("other_key"), F.col("o.o_value").alias("other_value"),
        F.lit(False).alias("other_in_raw_records"), "source_file",
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

    parts = [F.coalesce(F.hex(F.col(c)) if c in ("key", "value", "other_key", "other_value")
                        else F.col(c).cast("string"), F.lit("\\N"))
             for c in (*_RAW_COLS, "reason", "other_key", "other_value", "source_file")]
    return refused.withColumn("record_id", F.sha2(F.concat_ws("|", *parts), 256)).withColumn(
        "run_id", F.lit(run_id))


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
            log.warning("ingest: %d records refused into %s (%s)", total, QUARANTINE_TABLE,
                        ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        return total, tuple(sorted(counts.items()))
    finally:
        refused.unpersist()


# --------------------------------------------------------------------------------------------
# sources


def _landing_files(path: str) -> tuple[list[str], list[str]]:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"input: landing path {path} does not exist (generate data first: offsetlake generate)")
    files = [p] if p.is_file() else sorted(
        f for f in p.iterdir() if f.is_file() and not f.name.startswith((".", "_"))
    )
    parquet = [str(f) for f in files if f.suffix == ".parquet"]
    jsonl = [str(f) for f in files if f.suffix in _JSON_SUFFIXES]
    return parquet, jsonl


def read_landing(spark: SparkSession, path: str, fmt: str = "auto", *, positions: str = "required") -> DataFrame:
    """Raw records from a landing directory (or one file) of Parquet and/or JSON-lines captures
    (``positions``: JSON lines without partition/offset, ``pipelines.raw_files``)."""
    import pyarrow as pa

    from pipelines.raw_files import RAW_ARROW_SCHEMA, iter_raw_batches

    schema = RAW_RECORDS.spark_schema()
    if "://" in path:  # object store: Spark lists it; only Parquet is supported there
        return spark.read.schema(schema).option("pathGlobFilter", "*.parquet").parquet(path)
    parquet, jsonl = _landing_files(path)
    if fmt == "parquet":
        jsonl = []
    elif fmt == "json":
        parquet = []
    parts: list[DataFrame] = []
    if parquet:
        parts.append(spark.read.schema(schema).parquet(*parquet))
    if jsonl:
        batches = [b for f in jsonl for b in iter_raw_batches(f, positions=positions)]
        table = pa.Table.from_batches(batches, schema=RAW_ARROW_SCHEMA)
        parts.append(spark.createDataFrame(table, schema=schema))
    if not parts:
        log.warning("input: no %s files in %s", "raw-record" if fmt == "auto" else fmt, path)
        return spark.createDataFrame([], schema)
    out = parts[0]
    for extra in parts[1:]:
        out = out.unionByName(extra)
    return out


def read_delta_raw(spark: SparkSession, path: str) -> DataFrame:
    """An existing raw_records Delta table at ``path`` (delta-rs snapshot → Spark Parquet read)."""
    from pipelines.tableio import file_uris_at, is_table_at

    if not is_table_at(path):
        raise UsageError(f"input: {path} is not a Delta table")
    files = file_uris_at(path)
    schema = RAW_RECORDS.spark_schema()
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def read_kafka(spark: SparkSession, cfg: Config) -> DataFrame:
    """A batch read of ``__consumer_offsets`` with Spark's Kafka source (earliest → latest)."""
    from pipelines.config import spark_kafka_options
    from pipelines.kafka.source import choose_engine, read_kafka_batch

    if not cfg.kafka.bootstrap_servers:
        raise UsageError("kafka.bootstrap_servers: required when input.source is kafka")
    if choose_engine(spark, cfg.kafka.engine) == "python":  # no connector jar: confluent-kafka source
        return read_kafka_batch(spark, cfg)
    opts = spark_kafka_options(cfg)  # holds secrets: never log it
    opts.setdefault("endingOffsets", "latest")
    df = spark.read.format("kafka").options(**opts).load()
    if cfg.kafka.partitions is not None:
        df = df.where(df["partition"].isin(list(cfg.kafka.partitions)))
    return df


def read_source(spark: SparkSession, cfg: Config, io: TableIO | None = None) -> DataFrame | None:
    """The configured source as raw records, or ``None`` when the source IS ``raw_records``."""
    src = cfg.input.source
    if src == "landing":
        return read_landing(spark, cfg.input.path or cfg.paths.landing, cfg.input.format,
                            positions="synthesize" if cfg.input.synthesize_positions else "required")
    if src == "delta":
        path = cfg.input.path or cfg.table_path(RAW_TABLE)
        if os.path.normpath(path) == os.path.normpath(cfg.table_path(RAW_TABLE)):
            return None
        return read_delta_raw(spark, path)
    return read_kafka(spark, cfg)


# --------------------------------------------------------------------------------------------
# the ingest step


def ingest(spark: SparkSession, cfg: Config, io: TableIO, source: DataFrame | None = None) -> IngestResult:
    """Append the new records of ``source`` (default: the configured input) to ``raw_records``."""
    from pyspark import StorageLevel

    io.ensure(RAW_TABLE)
    if source is None:
        source = read_source(spark, cfg, io)
    if source is None:
        total = io.count(RAW_TABLE)
        return IngestResult("raw_records", total, 0, total, io.version(RAW_TABLE) or 0)
    before = io.count(RAW_TABLE)
    known = ingested_files(io) if before and io.engine == "rust" else {}
    landing = cfg.input.path or cfg.paths.landing
    if cfg.input.source == "landing" and cfg.input.format != "json" and "://" not in landing:
        # wrong column types fail here, naming file and column, before anything is read
        check_landing_schemas([f for f in _landing_files(landing)[0] if not (known and file_stamp(f) in known)])
    files = landing_files_readable_by_tasks(cfg, known) if io.engine == "rust" else None
    metadata: dict[str, Any] = {}
    skipped_rows = 0
    if files is not None:
        stamps = {f: file_stamp(f) for f in files}
        fresh_files = [f for f in files if stamps[f] not in known]
        skipped_rows = sum(known[stamps[f]] for f in files if stamps[f] in known)
        if len(fresh_files) < len(files):
            log.info("ingest: %d of %d landing files already ingested (same path, size, mtime): skipped",
                     len(files) - len(fresh_files), len(files))
        if not fresh_files:
            return IngestResult(cfg.input.source, skipped_rows, 0, before, io.version(RAW_TABLE) or 0)
        if len(fresh_files) < len(files):
            source = spark.read.schema(RAW_RECORDS.spark_schema()).parquet(*fresh_files)
        files = fresh_files
        file_rows = {f: _file_rows(f) for f in files}  # footers, read once
        metadata = {FILES_KEY: json.dumps({stamps[f]: file_rows[f] for f in files}, separators=(",", ":"))}
    incoming = normalize(source, dedupe=False)
    existing = table_ranges(io.read(RAW_TABLE)) if before else []
    appended = False
    if files is not None:
        # one pass: the tasks copy their files and report each file's position ranges; the
        # commit goes through only when nothing repeats or overlaps (else: the exact path)
        read = sum(file_rows.values()) + skipped_rows
        n_new = read - skipped_rows
        options = {"min_copy_rows": max(1, cfg.delta.target_file_rows // 4),
                   "existing": [asdict(r) for r in existing],
                   "num_partitions": cfg.offsets_topic.num_partitions}
        try:
            io.write_routed([RAW_TABLE], spread(spark, [(f,) for f in files], "path string"),
                            "pipelines.ingest:route_copy_files", mode="append", route_options=options,
                            rows_equal_input=True, expected_rows=n_new, metadata=metadata,
                            commit_check="pipelines.ingest:check_disjoint")
            appended = True
        except Exception as exc:  # the check's refusal comes back wrapped by Spark
            from pipelines.tableio import COMMIT_REFUSED

            if COMMIT_REFUSED not in str(exc):
                raise
    else:
        incoming_ranges = position_ranges(incoming)
        read = sum(r.rows for r in incoming_ranges) + skipped_rows
        if ranges_disjoint([*incoming_ranges, *existing]) and ranges_in_bounds(
                incoming_ranges, cfg.offsets_topic.num_partitions):
            # no duplicate inside the input, nothing already ingested: append as read (log order kept)
            n_new = read - skipped_rows
            if n_new:
                io.append(RAW_TABLE, incoming)
            appended = True
    refused, reasons = 0, ()
    if not appended:
        log.info("ingest: input overlaps itself or raw_records (or has positions to check); "
                 "validating and de-duplicating by position")
        from pyspark.sql import functions as F

        tagged = normalize(source, dedupe=False).withColumn(
            "source_file", F.nullif(F.input_file_name(), F.lit("")))
        split = validate_positions(tagged, io.read(RAW_TABLE) if before else None,
                                   cfg.offsets_topic.num_partitions)
        # refused rows first: a crash between the two writes repeats neither (both idempotent)
        refused, reasons = write_refused(io, split.refused, io.run_id)
        fresh = split.new.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            n_new = fresh.count()
            if n_new:
                # the shuffle scrambled the order: put files back in log-position order
                io.append(RAW_TABLE, fresh.sortWithinPartitions(*POSITION), metadata=metadata)
        finally:
            fresh.unpersist()
    after = io.count(RAW_TABLE)
    if after != before + n_new:
        raise RuntimeError(f"raw_records: expected {before} + {n_new} rows after ingest, found {after}")
    if read < n_new + refused:
        raise RuntimeError(f"ingest: {read} records read < {n_new} new + {refused} refused")
    return IngestResult(cfg.input.source, read, n_new, after, io.version(RAW_TABLE) or 0, refused, reasons)
