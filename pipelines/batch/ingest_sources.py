"""Ingest's sources: landing files (Parquet, JSON lines, broker segments), a Delta table, Kafka -> raw-record rows.

Rules (``input.source``):
- landing: Parquet files (Spark's file source, executors read in parallel) and/or JSON-lines
  captures (read with ``pipelines.inputs.raw_files`` on the driver: a debugging/interchange format,
  small by nature) and/or broker log segments (``__consumer_offsets-N/`` partition directories
  of ``%020d.log`` files in the landing, or the landing itself one such directory or a copy of a
  broker's log dir; read on the driver by ``pipelines.inputs.segment_input.landing_tables``): their data
  records are raw records, their transactional records and COMMIT/ABORT markers go to
  ``raw_transactions`` and their unreadable batches to ``ingest_quarantine`` (reason
  ``bad_batch``) — ``write_segment_side``. ``input.format: auto`` picks by file extension
  (``segments``: only the segments). A Parquet file whose columns have the wrong types fails
  before anything is read, with one line naming the file and the column (``check_landing_schemas``).
- delta: an existing ``raw_records`` Delta table (``input.path``).
- kafka: ``format("kafka")`` when the spark-sql-kafka jar is on the classpath, else
  ``format("offsetlake_kafka")`` (confluent-kafka, ``kafka.engine``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.batch.positions import write_refused
from pipelines.errors import UsageError
from pipelines.inputs.raw_files import JSON_SUFFIXES, RAW_ARROW_SCHEMA, iter_raw_batches
from pipelines.inputs.segment_files import SEGMENT_SUFFIX, segment_files
from pipelines.inputs.segment_input import landing_tables
from pipelines.tableio import file_uris_at, is_table_at
from schemas.raw import RAW_RECORDS, RAW_TRANSACTIONS

log = logging.getLogger("pipelines.batch.ingest")
RAW_TABLE = RAW_RECORDS.name


if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.inputs.segment_input import LandingTables
    from pipelines.tableio import TableIO


def check_input(cfg: Config) -> None:
    """Refuse a local landing path that does not exist (``landing_files``' error) before a job
    starts Spark or takes the warehouse lock; object stores are listed by Spark later."""
    path = cfg.input.path or cfg.paths.landing
    if cfg.input.source == "landing" and "://" not in path:
        landing_files(path)


def landing_files(path: str) -> tuple[list[str], list[str]]:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"input: landing path {path} does not exist (generate data first: offsetlake generate)")
    files = [p] if p.is_file() else sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith((".", "_")))
    parquet = [str(f) for f in files if f.suffix == ".parquet"]
    jsonl = [str(f) for f in files if f.suffix in JSON_SUFFIXES]
    return parquet, jsonl


def landing_segments(path: str, topic: str) -> list[Path]:
    """The broker segment files of ``topic`` (``kafka.topic``) in a local landing (see the
    module rules; none for an object store)."""

    p = Path(path)
    if "://" in path or not p.exists() or (p.is_file() and p.suffix != SEGMENT_SUFFIX):
        return []
    return segment_files(p, topic)


def segment_input(cfg: Config) -> LandingTables | None:
    """The landing's broker segments read whole (``None``: none, or not a landing input)."""

    if cfg.input.source != "landing" or cfg.input.format not in ("auto", "segments"):
        return None
    files = landing_segments(cfg.input.path or cfg.paths.landing, cfg.kafka.topic)
    return landing_tables(files) if files else None


def write_segment_side(spark: SparkSession, io: TableIO, seg: LandingTables) -> tuple[int, dict[str, int]]:
    """Append the segments' ``raw_transactions`` rows not yet there and quarantine their unreadable
    batches and overlapping copies (idempotent: a rerun appends nothing). Returns (new
    raw_transactions rows, quarantine rows of the input per reason: ``bad_batch`` one per
    unreadable batch, ``overlapping_segment`` one per record of a later copy)."""

    name = RAW_TRANSACTIONS.name
    io.ensure(name)
    key = list(RAW_TRANSACTIONS.primary_key)
    new = 0
    if seg.transactions.num_rows:
        rows = spark.createDataFrame(seg.transactions, schema=RAW_TRANSACTIONS.spark_schema()).dropDuplicates(key)
        if io.count(name):
            rows = rows.join(io.read(name).select(*key), key, "left_anti")
        new = rows.count()
        if new:
            io.append(name, rows.sortWithinPartitions(*key))
    reasons: dict[str, int] = {}
    if seg.problems.num_rows:
        _total, counts = write_refused(io, spark.createDataFrame(seg.problems), io.run_id)
        reasons = dict(counts)
    return new, reasons


def read_landing(
    spark: SparkSession,
    path: str,
    fmt: str = "auto",
    *,
    positions: str = "required",
    segments: LandingTables | None = None,
) -> DataFrame:
    """Raw records from a landing directory (or one file) of Parquet and/or JSON-lines captures
    (``positions``: JSON lines without partition/offset, ``pipelines.inputs.raw_files``) and/or broker
    segments (``segments``: read by ``segment_input``)."""
    import pyarrow as pa

    schema = RAW_RECORDS.spark_schema()
    if "://" in path:  # object store: Spark lists it; only Parquet is supported there
        return spark.read.schema(schema).option("pathGlobFilter", "*.parquet").parquet(path)
    parquet, jsonl = landing_files(path)
    if fmt == "parquet":
        jsonl = []
    elif fmt == "json":
        parquet = []
    elif fmt == "segments":
        parquet, jsonl = [], []
    parts: list[DataFrame] = []
    if segments is not None:
        parts.append(spark.createDataFrame(segments.raw, schema=schema))
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

    if not is_table_at(path):
        raise UsageError(f"input: {path} is not a Delta table")
    files = file_uris_at(path)
    schema = RAW_RECORDS.spark_schema()
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def read_kafka(spark: SparkSession, cfg: Config) -> DataFrame:
    """A batch read of ``__consumer_offsets`` (earliest → latest): Spark's Kafka source when its
    jar is on the classpath, else the confluent-kafka source (``pipelines.kafka.source``, one
    path for both engines: the JVM source's offset fetching and partition assignment included)."""
    # lazy: pipelines.kafka.source loads py4j/pyspark when imported (measured: heavy_probe)
    from pipelines.kafka.source import read_kafka_batch

    if not cfg.kafka.bootstrap_servers:
        raise UsageError("kafka.bootstrap_servers: required when input.source is kafka")
    return read_kafka_batch(spark, cfg)


def read_source(
    spark: SparkSession, cfg: Config, io: TableIO | None = None, segments: LandingTables | None = None
) -> DataFrame | None:
    """The configured source as raw records, or ``None`` when the source IS ``raw_records``
    (``segments``: the landing's broker segments, ``segment_input``)."""
    src = cfg.input.source
    if source_is_raw_records(cfg):
        return None
    if src == "landing":
        return read_landing(
            spark,
            cfg.input.path or cfg.paths.landing,
            cfg.input.format,
            positions="synthesize" if cfg.input.synthesize_positions else "required",
            segments=segments,
        )
    if src == "delta":
        return read_delta_raw(spark, cfg.input.path or cfg.table_path(RAW_TABLE))
    return read_kafka(spark, cfg)


def source_is_raw_records(cfg: Config) -> bool:
    """True when the configured input is the warehouse's own ``raw_records`` (nothing to ingest)."""
    if cfg.input.source != "delta":
        return False
    path = cfg.input.path or cfg.table_path(RAW_TABLE)
    return os.path.normpath(path) == os.path.normpath(cfg.table_path(RAW_TABLE))


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
            raise UsageError(
                f"input: {f} is not a readable Parquet file ({exc}); "
                "move it out of the landing directory or re-capture it"
            ) from exc
        if "key" not in schema.names:
            raise UsageError(f"input: {f}: no 'key' column (columns: {', '.join(schema.names)})")
        for name, (ok, expected) in rules.items():
            if name in schema.names and not ok(schema.field(name).type):
                raise UsageError(f"input: {f}: column '{name}' has type {schema.field(name).type}, expected {expected}")
