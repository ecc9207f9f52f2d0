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
  That write (``LandingAppend``) may run inside a larger pass over the same files: the batch
  job's decode pass reads each landing file once, copies and decodes it, and commits
  raw_records first (``pipelines.batch.decode``). Anything else (JSON lines, object stores,
  Kafka, a Delta source, odd column types) goes through Spark's readers.
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
- Broker log segments in a landing (``ingest_sources.segment_input``) are read on the driver:
  their data records join the other rows (Spark's readers), their transactional records and
  COMMIT/ABORT markers are appended to ``raw_transactions`` and their unreadable batches to
  ``ingest_quarantine`` (``write_segment_side``), both idempotent. Counts: records in the
  segments = data records (read = new + duplicates + refused) + control records; each bad batch
  is one quarantine row.
- A landing Parquet file whose columns have the wrong types fails before anything is read,
  with one line naming the file and the column (``check_landing_schemas``).
- Sources (``input.source``):
    landing  Parquet files (Spark's file source, executors read in parallel) and/or JSON-lines
             captures (read with ``pipelines.inputs.raw_files`` on the driver: a debugging/interchange
             format, small by nature). ``input.format: auto`` picks by file extension.
    delta    an existing ``raw_records`` Delta table (``input.path``); when it *is* the
             warehouse's own ``raw_records`` there is nothing to ingest.
    kafka    ``format("kafka")`` (batch read, earliest→latest) when the spark-sql-kafka jar is on
             the classpath, else ``format("offsetlake_kafka")`` (confluent-kafka, ``kafka.engine``);
             options from ``kafka.*`` and ``input.kafka_options``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.batch import replay
from pipelines.batch.file_tasks import BATCH_ROWS, parquet_batches, spread
from pipelines.batch.ingest_sources import (
    check_landing_schemas,
    landing_files,
    landing_segments,
    read_source,
    segment_input,
    source_is_raw_records,
    write_segment_side,
)
from pipelines.batch.positions import (
    PositionRange,
    position_ranges,
    ranges_disjoint,
    ranges_in_bounds,
    table_ranges,
    validate_positions,
    write_refused,
)
from pipelines.errors import UsageError
from pipelines.inputs.log_shape import STATS_KIND
from pipelines.records.positions import POSITION, table_ranges_arrow
from pipelines.tableio import COMMIT_REFUSED, SIDE_KEY, ParquetFileCopy, file_matches
from schemas.raw import RAW_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.tableio import TableIO

log = logging.getLogger(__name__)

RAW_TABLE = RAW_RECORDS.name
OVERLAPPING_SEGMENT = "overlapping_segment"  # ingest_quarantine's reason for a later copy's record
FILES_KEY = "offsetlake.landing_files"  # commit metadata: the landing files an ingest appended


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
    control_records: int = 0  # broker segments' control records (COMMIT/ABORT markers: raw_transactions)
    transactional_new: int = 0  # rows appended to raw_transactions, this run
    bad_batches: int = 0  # broker segments' unreadable batches (ingest_quarantine, reason bad_batch)
    bad_batch_offsets: int = 0  # the offsets those batches held (their spans: log_shape accounts them)

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


# --------------------------------------------------------------------------------------------
# Parquet landing files, read by the tasks themselves


def _landing_caster(schema: pa.Schema) -> Callable[[pa.RecordBatch], pa.RecordBatch] | None:
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

    def cast(batch: pa.RecordBatch) -> pa.RecordBatch:
        n = batch.num_rows
        cols = []
        for f in target:
            if f.name in batch.schema.names:
                cols.append(batch.column(f.name).cast(f.type))
            elif f.name == "topic":
                cols.append(pa.array(["__consumer_offsets"] * n, f.type))
            else:  # timestampType
                cols.append(pa.array([0] * n, f.type))
        return pa.RecordBatch.from_arrays(cols, schema=target)

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
    parquet, jsonl = landing_files(path)
    if jsonl and cfg.input.format != "parquet":
        return None
    if not parquet or cfg.input.format == "segments" or landing_segments(path, cfg.kafka.topic):
        return None
    for f in parquet:
        if known and file_stamp(f) in known:
            continue
        try:
            schema = pq.read_schema(f)
        except (OSError, ValueError) as exc:  # stop before anything is written, naming the file
            raise UsageError(
                f"input: {f} is not a readable Parquet file ({exc}); "
                "move it out of the landing directory or re-capture it"
            ) from exc
        if _landing_caster(schema) is None:
            return None
    return parquet


#: the kind of the side entries a landing file's route reports: its position ranges per log
#: partition (``check_disjoint`` reads them; a decode pass's other side entries have other kinds)
POSITIONS_KIND = "positions"


def landing_file(
    path: str, options: dict[str, Any], side: list[dict[str, Any]] | None, batch_size: int = BATCH_ROWS
) -> Iterator[tuple[dict[str, Any], pa.RecordBatch | None]]:
    """One landing file's way into raw_records, batch by batch: pairs of (what to write to
    raw_records, the batch's rows in ``RAW_RECORDS``' schema or ``None``).

    A file already in ``RAW_RECORDS``' exact schema with at least ``options["min_copy_rows"]``
    rows is copied byte for byte (``ParquetFileCopy``, in the last pair, after every page was
    read: a damaged file fails here, naming itself, instead of entering raw_records); smaller
    ones are rewritten with their batches, so a landing of many small captures does not become a
    table of many small files. The file's position ranges go to ``side`` (``POSITIONS_KIND``).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = RAW_RECORDS.arrow_schema()
    min_copy = options.get("min_copy_rows")
    pf = pq.ParquetFile(path)
    schema, rows = pf.schema_arrow, pf.metadata.num_rows
    pf.close()
    positions: list[pa.Table] = []
    copy = min_copy is not None and rows >= int(min_copy) and file_matches(schema, target)
    cast = None if copy else _landing_caster(schema)
    if not copy and cast is None:
        raise ValueError(f"{path}: not a raw-record Parquet file")
    for raw in _checked_batches(path, batch_size):
        out = raw if cast is None else cast(raw)
        positions.append(pa.Table.from_batches([out]).select(list(POSITION)))
        yield ({} if copy else {RAW_TABLE: pa.Table.from_batches([out])}), out
    if copy:
        yield {RAW_TABLE: ParquetFileCopy(path, rows)}, None
    if side is not None and positions:
        ranges = table_ranges_arrow(pa.concat_tables(positions)).to_pylist()
        side.extend({"kind": POSITIONS_KIND, **r} for r in ranges)


def route_copy_files(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, Any], int]]:
    """``RoutedWriter`` route (``pipelines.tableio.rust_sink``) over landing file paths: each
    file's rows, cast to ``RAW_RECORDS``, in file order (``landing_file``)."""

    side = options.get(SIDE_KEY)
    for batch in batches:
        for path in batch.column("path").to_pylist():
            for out, rows in landing_file(path, options, side):
                yield out, 0 if rows is None else rows.num_rows


def _checked_batches(path: str, batch_size: int) -> Iterator[pa.RecordBatch]:
    """A landing file's batches; a file that cannot be read fails with its name."""
    import pyarrow as pa

    try:
        yield from parquet_batches(path, batch_size=batch_size)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path}: unreadable landing Parquet file ({exc})") from exc


def check_disjoint(side: list[dict[str, Any]], options: dict[str, Any]) -> str | None:
    """``commit_check`` of the copy: refuse when the files' position ranges (the routes' side
    outputs) repeat a position or overlap each other or raw_records' (``options["existing"]``)."""
    ours = [{k: v for k, v in e.items() if k != "kind"} for e in side if e.get("kind") == POSITIONS_KIND]
    ranges = [PositionRange(**r) for r in [*ours, *options.get("existing", [])]]
    if ranges_disjoint(ranges) and ranges_in_bounds(ours, options.get("num_partitions")):
        return None
    return "the input overlaps itself or raw_records, or has positions outside the configured partitions"


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


# --------------------------------------------------------------------------------------------
# validation: landing file types, positions


# --------------------------------------------------------------------------------------------
# sources


# --------------------------------------------------------------------------------------------
# the ingest step


def ingest(
    spark: SparkSession,
    cfg: Config,
    io: TableIO,
    source: DataFrame | None = None,
    *,
    routed_write: Callable[[LandingAppend], None] | None = None,
) -> IngestResult:
    """Append the new records of ``source`` (default: the configured input) to ``raw_records``.

    Which way the rows go depends on the input's shape only (never on what started the job): a
    local Parquet landing is appended by tasks that copy its files (``_append_routed``; its
    ``LandingAppend`` is written by ``routed_write`` when given, e.g. the batch job's decode
    pass); other sources through Spark's readers (``_append_checked``); either falls back to the
    exact validation (``_append_exact``) when positions repeat, overlap or need checking.
    """
    io.ensure(RAW_TABLE)
    seg = None
    if source is None and source_is_raw_records(cfg):
        total = io.count(RAW_TABLE)
        return IngestResult("raw_records", total, 0, total, io.data_version(RAW_TABLE) or 0)
    if source is None:
        seg = segment_input(cfg)
    given = source
    # Spark's reader is set up only when a path needs it (listing a landing costs ~0.7 s)
    plan = _Plan(lambda: given if given is not None else _must(read_source(spark, cfg, io, segments=seg)))
    before = io.count(RAW_TABLE)
    known = ingested_files(io) if before and io.engine == "rust" else {}
    landing = cfg.input.path or cfg.paths.landing
    if cfg.input.source == "landing" and cfg.input.format != "json" and "://" not in landing:
        # wrong column types fail here, naming file and column, before anything is read
        check_landing_schemas([f for f in landing_files(landing)[0] if not (known and file_stamp(f) in known)])
    files = landing_files_readable_by_tasks(cfg, known) if io.engine == "rust" else None
    if files is not None and not _skip_ingested(spark, plan, files, known):
        return IngestResult(cfg.input.source, plan.skipped_rows, 0, before, io.data_version(RAW_TABLE) or 0)
    existing = existing_ranges(io, before) if before else []
    if plan.files is not None:
        appended = _append_routed(cfg, io, plan, existing, before, routed_write)
    else:
        appended = _append_checked(cfg, io, plan, existing)
    refused: int = 0
    reasons: tuple[tuple[str, int], ...] = ()
    if not appended:
        refused, reasons = _append_exact(cfg, io, plan, has_rows=bool(before))
    after = io.count(RAW_TABLE)
    if after != before + plan.n_new:
        raise RuntimeError(f"raw_records: expected {before} + {plan.n_new} rows after ingest, found {after}")
    if plan.read < plan.n_new + refused:
        raise RuntimeError(f"ingest: {plan.read} records read < {plan.n_new} new + {refused} refused")
    txn_new, side = write_segment_side(spark, io, seg) if seg is not None else (0, {})
    # a later copy's records of an overlapping segment are records read and refused (the
    # stream counts them so too): read = new + duplicates + refused holds with them
    over = side.get(OVERLAPPING_SEGMENT, 0)
    if over:
        reasons = tuple(
            sorted({**dict(reasons), OVERLAPPING_SEGMENT: dict(reasons).get(OVERLAPPING_SEGMENT, 0) + over}.items())
        )
    return IngestResult(
        cfg.input.source,
        plan.read + over,
        plan.n_new,
        after,
        io.data_version(RAW_TABLE) or 0,  # the rows' version: maintenance since the last run passed over
        refused + over,
        reasons,
        seg.control_records if seg is not None else 0,
        txn_new,
        side.get("bad_batch", 0),
        seg.bad_batch_offsets if seg is not None else 0,
    )


def existing_ranges(io: TableIO, rows: int) -> list[PositionRange]:
    """raw_records' range per log partition (``rows`` rows): from the figures the decode pass
    counted over every raw record of its current version (the replay input's, ``log_shape``),
    else one Spark aggregate over the table (an incremental run must not read what it holds)."""

    version = io.data_version(RAW_TABLE)  # maintenance since the replay input's decode passed over
    manifest = replay.current_replay_input(io, version) if version is not None else None
    if manifest is not None:
        by: dict[tuple[str, int], list[int]] = {}
        for e in replay.read_manifest(manifest, STATS_KIND):
            n, first, last = (int(x) for x in e["v"][:3])
            key = (str(e["topic"]), int(e["partition"]))
            cur = by.setdefault(key, [0, first, last])
            cur[0], cur[1], cur[2] = cur[0] + n, min(cur[1], first), max(cur[2], last)
        if sum(v[0] for v in by.values()) == rows:
            return [PositionRange(t, p, first, last, n, False) for (t, p), (n, first, last) in sorted(by.items())]
    return table_ranges(io.read(RAW_TABLE))


def _must(source: DataFrame | None) -> DataFrame:
    assert source is not None, "read_source returns None only for raw_records itself"
    return source


@dataclass
class _Plan:
    """What one ingest reads and how much of it is new (filled in as the steps learn it)."""

    make_source: Callable[[], DataFrame]  # the input through Spark's readers, made when first used
    files: list[str] | None = None  # landing files the tasks copy (None: Spark's readers)
    file_rows: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    skipped_rows: int = 0  # rows of files an earlier ingest committed
    read: int = 0
    n_new: int = 0
    _source: DataFrame | None = None

    @property
    def source(self) -> DataFrame:
        if self._source is None:
            self._source = self.make_source()
        return self._source


def _skip_ingested(spark: SparkSession, plan: _Plan, files: list[str], known: dict[str, int]) -> bool:
    """Leave out the files an earlier ingest committed; False when none is left."""
    stamps = {f: file_stamp(f) for f in files}
    fresh = [f for f in files if stamps[f] not in known]
    plan.skipped_rows = sum(known[stamps[f]] for f in files if stamps[f] in known)
    if len(fresh) < len(files):
        log.info(
            "ingest: %d of %d landing files already ingested (same path, size, mtime): skipped",
            len(files) - len(fresh),
            len(files),
        )
    if not fresh:
        return False
    if len(fresh) < len(files):
        plan.make_source = lambda: spark.read.schema(RAW_RECORDS.spark_schema()).parquet(*fresh)
    plan.files = fresh
    plan.file_rows = {f: _file_rows(f) for f in fresh}  # footers, read once
    plan.metadata = {FILES_KEY: json.dumps({stamps[f]: plan.file_rows[f] for f in fresh}, separators=(",", ":"))}
    return True


@dataclass(frozen=True)
class LandingAppend:
    """The routed ingest's write: landing files copied into raw_records by tasks that read every
    page and report the files' position ranges, committed only when ``CHECK`` finds nothing
    repeated or overlapping (else ``COMMIT_REFUSED``: nothing is committed).

    ``write`` runs it as a pass of its own; the batch job gives it to the decode's pass instead,
    which reads the same files (``pipelines.batch.decode``): then one pass copies, checks and
    decodes them, and raw_records is committed first, at version ``table_version + 1``.
    """

    files: list[str]
    options: dict[str, Any]  # route options of landing_file and CHECK
    rows: int  # rows the files hold: all appended
    metadata: dict[str, Any]  # raw_records' commit metadata (FILES_KEY: the files' stamps)
    table_rows: int  # rows raw_records holds before
    table_version: int  # raw_records' version before

    def write(self, io: TableIO) -> None:
        assert io.spark is not None
        io.write_routed(
            [RAW_TABLE],
            spread(io.spark, [(f,) for f in self.files], "path string"),
            "pipelines.batch.ingest:route_copy_files",
            mode="append",
            route_options=self.options,
            rows_equal_input=True,
            expected_rows=self.rows,
            metadata=self.metadata,
            commit_check=CHECK,
        )


CHECK = "pipelines.batch.ingest:check_disjoint"


def _append_routed(
    cfg: Config,
    io: TableIO,
    plan: _Plan,
    existing: list[PositionRange],
    before: int,
    write: Callable[[LandingAppend], None] | None,
) -> bool:
    """One pass: the tasks copy their files and report each file's position ranges; the commit
    goes through only when nothing repeats or overlaps. False: refused (take the exact path)."""
    assert plan.files is not None
    plan.read = sum(plan.file_rows.values()) + plan.skipped_rows
    plan.n_new = plan.read - plan.skipped_rows
    options = {
        "min_copy_rows": max(1, cfg.delta.target_file_rows // 4),
        "existing": [asdict(r) for r in existing],
        "num_partitions": cfg.offsets_topic.num_partitions,
    }
    append = LandingAppend(plan.files, options, plan.n_new, plan.metadata, before, io.version(RAW_TABLE) or 0)
    try:
        if write is None:
            append.write(io)
        else:
            write(append)
    except RuntimeError as exc:  # the commit check refused (raised by the driver-side commit)
        if COMMIT_REFUSED not in str(exc):
            raise
        return False
    return True


def _append_checked(cfg: Config, io: TableIO, plan: _Plan, existing: list[PositionRange]) -> bool:
    """Through Spark's readers: one column-pruned pass proves the input holds no duplicate and
    nothing already ingested, then it is appended as read (log order kept). False: take the
    exact path."""
    incoming = normalize(plan.source, dedupe=False)
    incoming_ranges = position_ranges(incoming)
    plan.read = sum(r.rows for r in incoming_ranges) + plan.skipped_rows
    if not (
        ranges_disjoint([*incoming_ranges, *existing])
        and ranges_in_bounds(incoming_ranges, cfg.offsets_topic.num_partitions)
    ):
        return False
    plan.n_new = plan.read - plan.skipped_rows
    if plan.n_new:
        io.append(RAW_TABLE, incoming)
    return True


def _append_exact(cfg: Config, io: TableIO, plan: _Plan, *, has_rows: bool) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Validate every position, refuse the bad ones into ``ingest_quarantine``, de-duplicate and
    append the rest sorted by position. Returns (refused rows, reasons)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    log.info(
        "ingest: input overlaps itself or raw_records (or has positions to check); "
        "validating and de-duplicating by position"
    )
    tagged = normalize(plan.source, dedupe=False).withColumn("source_file", F.nullif(F.input_file_name(), F.lit("")))
    split = validate_positions(tagged, io.read(RAW_TABLE) if has_rows else None, cfg.offsets_topic.num_partitions)
    # refused rows first: a crash between the two writes repeats neither (both idempotent)
    refused, reasons = write_refused(io, split.refused, io.run_id)
    fresh = split.new.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        plan.n_new = fresh.count()
        if plan.n_new:
            # the shuffle scrambled the order: put files back in log-position order
            io.append(RAW_TABLE, fresh.sortWithinPartitions(*POSITION), metadata=plan.metadata)
    finally:
        fresh.unpersist()
    return refused, reasons
