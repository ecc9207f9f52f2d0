"""The streaming replay: raw records → decode → per-group state (applyInPandasWithState) → Delta.

Run it either way (same code path):
    offsetlake run stream --conf conf/local.yaml [--available-now]
    spark-submit pipelines/jobs/stream.py --conf conf/local.yaml [--available-now]

Rules:
- Source: the landing directory (Parquet raw-record files; the packed Python reader takes them
  in the order of what they hold — oldest record time, then name — whatever their modification
  times; Spark's file source, ``stream.landing_reader: spark``, takes modification-time order,
  which ``pipelines.raw_files.RawRecordWriter`` makes equal to log order;
  ``stream.max_files_per_trigger`` / ``max_bytes_per_trigger`` cap a micro-batch), or Kafka
  (``format("kafka")`` with the connector, else the jar-free ``offsetlake_kafka`` source).
- Decode and pack before the shuffle: the batch job's vectorised decoder
  (``pipelines.decode.decode_batch``), the replay-input projection in Arrow
  (``replay_input_arrow``, equal to the batch's ``replay_input``), then ONE row per group and
  raw Arrow batch holding that group's rows as an Arrow IPC message (``pack_replay_input``):
  ``applyInPandasWithState`` converts its input to pandas row by row, so the per-record
  columns must not cross it. With ``stream.landing_reader: python`` (default, local landing
  directories) the tasks of a Python data source (``LandingPackedReader``) read the files with
  pyarrow and emit the packs directly — the raw records never become JVM rows; otherwise
  Spark's file/Kafka source feeds one ``mapInArrow`` doing the same (``packed_replay_input``).
  Two queries read the source: ``replay`` (offset commits, group metadata and unsupported
  records of a known group → the gold tables) and ``quarantine`` (quarantined and unsupported
  records → their tables, Spark's file source). Each has its own checkpoint.
- State: one row per group = (snapshot format version, ``serialize_snapshot`` bytes). The state
  schema never changes when the core evolves; ``deserialize_snapshot`` reads older formats.
  Replay is ``pipelines.replay_job.replay_table`` (rows sorted by (partition, offset), runs of
  offset commits reduced with numpy, exactly the core's ``replay``; duplicates and overlaps are
  skipped by the snapshot's last applied position), never a re-implementation.
- Time: ``withWatermark(log_timestamp, stream.watermark_delay_ms)`` and
  ``GroupStateTimeout.EventTimeTimeout`` only (processing-time timeouts never end under
  ``trigger(availableNow)``). Every call replays the new records, then runs the expiry decider at
  ``as_of = watermark``; the timer is set so that it fires once the watermark reaches the core's
  ``next_expiry_ms``. Predicted events carry the computed due time, so the result does not
  depend on when the timer fired. Spark drops records older than the previous batch's
  watermark (the delay must cover the time skew between ``__consumer_offsets`` partitions in
  the input order); such drops are counted from the progress (``numRowsDroppedByWatermark``
  counts packs — a pack's event time is its newest record's, so it is dropped only when all of
  its records are late —; the packed landing source's dropped records are counted exactly)
  and FAIL the run (``DataLossError``, exit 2) unless ``stream.allow_late_drops`` is true.
- Equality with the batch job: after ``--available-now`` ends, the gold tables equal the batch
  job's on the same input with ``replay.as_of_ms`` = the stream's final watermark (max record
  timestamp − delay): every group was replayed to its last record and every expiry due at or
  before the watermark was applied; nothing due later was.
- Output of the stateful function: per call, the changed gold rows as core rows per table
  (``GroupReplayer.replay_rows``: the group's state row, its changed offsets, its events, and
  ``DELETED_OFFSETS``), pickled into one binary row; the driver turns each table's rows into
  Arrow once per micro-batch (``gold_tables``).
- Sink: ``foreachBatch`` collects the micro-batch output once (on the driver: only what
  changed, small) and MERGEs each gold table on its key from Arrow (``TableIO.merge``; no Spark
  job per table), tables side by side; offsets a group no longer holds are deleted through
  ``TableIO.delete_keys`` after that table's MERGE. Every gold table is MERGEd, event tables
  included: the core re-tells an event under the
  same key when it learns more (a predicted expiry confirmed by a tombstone, offset tombstones
  re-told as ``group_deleted``), so the last row per key wins. Every write carries the Delta txn
  (app id ``offsetlake-stream-<query>``, version = batch id): a micro-batch re-run after a crash
  writes nothing twice (MERGEs of identical rows commit nothing, deletes of absent rows delete
  nothing, the quarantine query's appends are skipped by the txn).
- Progress: one log line and one ``stream_progress`` row per micro-batch (raw records — the
  packed source counts them in its offsets —, rates, state rows/memory, watermark, duration).
  Rows of batches committed just before a kill are rebuilt from the checkpoint's offset log on
  the next start (``reconstruct_progress``).
  SIGTERM/SIGINT stop the queries cleanly (exit 0).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator_core.events import WITHDRAWN
from coordinator_core.settings import ReplaySettings
from pipelines.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.state import GroupState

    from pipelines.config import Config
    from pipelines.tableio import TableIO

log = logging.getLogger("offsetlake.stream")

REPLAY_QUERY = "offsetlake_stream_replay"
QUARANTINE_QUERY = "offsetlake_stream_quarantine"
APP_ID_PREFIX = "offsetlake-stream-"

#: Layout version of the state row (not of the snapshot bytes, which the core versions itself).
STATE_LAYOUT_VERSION = 1
STATE_DDL = "snapshot_format int, snapshot binary"

#: ``gold_table`` code of an ``offsets_current`` deletion row (only the key columns are set).
OFFSETS_DELETE = -1
#: Key of the offsets a group no longer holds in ``GroupReplayer.replay_rows``' output.
DELETED_OFFSETS = "offsets_current(deleted)"

#: Tables appended instead of MERGEd. Empty: every gold table is MERGEd on its key (events may be
#: re-emitted with a new status, e.g. a predicted expiry confirmed by the log's tombstone), and
#: a driver-side delta-rs MERGE of a small micro-batch is cheaper than an executor append job.
APPEND_TABLES: tuple[str, ...] = ()


# =============================================================================================
# Settings
# =============================================================================================
@dataclass(frozen=True)
class StreamSettings:
    """What the streaming job needs from the config, resolved once."""

    source: str
    landing: str
    replay_checkpoint: str
    quarantine_checkpoint: str
    max_files_per_trigger: int
    max_bytes_per_trigger: int | None
    watermark_delay_ms: int
    trigger_interval: str
    replay: ReplaySettings
    num_partitions: int
    tables: tuple[str, ...]
    query_name: str = REPLAY_QUERY
    quarantine_query_name: str = QUARANTINE_QUERY
    extra: dict[str, Any] = field(default_factory=dict)
    landing_reader: str = "python"
    state_partitions: int | None = None
    allow_late_drops: bool = False

    @property
    def app_id(self) -> str:
        return APP_ID_PREFIX + self.query_name


def settings_from_config(cfg: Config) -> StreamSettings:
    """Validate and resolve the ``stream`` section (and what it uses of the others)."""
    from pipelines.gold import DEFAULT_TABLES

    if cfg.stream.timeout_mode != "event_time":
        raise UsageError(
            "stream.timeout_mode: processing_time is not supported by the streaming replay (offset "
            "expiry is event time, and processing-time timeouts never end under --available-now); "
            "use event_time"
        )
    if cfg.input.source == "landing" and cfg.input.format == "json":
        raise UsageError("input.format: json landing files are not supported by the streaming job; use parquet")
    if cfg.input.source == "delta":
        raise UsageError("input.source: delta is not supported by the streaming job; use landing or kafka")
    return StreamSettings(
        source=cfg.input.source,
        landing=cfg.input.path or cfg.paths.landing,
        replay_checkpoint=cfg.checkpoint_path("stream_replay"),
        quarantine_checkpoint=cfg.checkpoint_path("stream_quarantine"),
        max_files_per_trigger=cfg.stream.max_files_per_trigger,
        max_bytes_per_trigger=cfg.stream.max_bytes_per_trigger,
        watermark_delay_ms=cfg.stream.watermark_delay_ms,
        trigger_interval=cfg.stream.trigger_interval,
        replay=cfg.replay.settings(),
        num_partitions=cfg.offsets_topic.num_partitions,
        tables=tuple(DEFAULT_TABLES),
        landing_reader=cfg.stream.landing_reader,
        state_partitions=cfg.stream.state_partitions,
        allow_late_drops=cfg.stream.allow_late_drops,
    )


# =============================================================================================
# Source and decode
# =============================================================================================
def read_raw_stream(spark: SparkSession, cfg: Config, settings: StreamSettings) -> DataFrame:
    """The raw-record stream (Spark's Kafka source schema) from the landing directory or Kafka."""
    if settings.source == "kafka":
        from pipelines.kafka.source import read_kafka_stream

        return read_kafka_stream(spark, cfg)
    from schemas.raw import RAW_RECORDS

    reader = spark.readStream.schema(RAW_RECORDS.spark_schema())
    if settings.max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(settings.max_bytes_per_trigger))
    else:
        reader = reader.option("maxFilesPerTrigger", str(settings.max_files_per_trigger))
    # Hidden temp files (.name.tmp) are ignored by the file source; only complete files count.
    return reader.option("pathGlobFilter", "*.parquet").parquet(settings.landing)


#: The packed replay input: one row per (group, input Arrow batch) — see ``pack_batches``.
PACK_DDL = "group_id string, log_timestamp timestamp, records binary"
#: The stateful function's output: one row per call that changed something: its changed gold
#: rows (``GroupReplayer.replay_rows``) pickled — no per-call Arrow conversion of a few rows into
#: ~60 union columns; the driver builds each table's Arrow once per micro-batch.
OUTPUT_DDL = "records binary"


def replay_input_arrow(union: pa.RecordBatch | pa.Table) -> pa.Table:
    """Decode-union rows → replay-input rows (``pipelines.replay_job.REPLAY_INPUT_DDL``), in Arrow.

    The same projection as the batch job's ``replay_input`` (Spark SQL over the split decoded
    tables; ``tests/pipelines/test_stream_job.py`` proves both agree): offset commits, group
    metadata and unsupported records of a known group; each kind's columns, the others null;
    timestamps as epoch ms (the decoder builds them from ms, so ``us // 1000`` is exact).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipelines.decode import KIND_GROUP_METADATA, KIND_OFFSET_COMMIT, KIND_UNSUPPORTED
    from pipelines.replay_job import REC_GROUP_METADATA, REC_OFFSET_COMMIT, REC_UNSUPPORTED

    table = union if isinstance(union, pa.Table) else pa.Table.from_batches([union])
    kind = table.column("kind")
    is_oc = pc.equal(kind, KIND_OFFSET_COMMIT)
    is_gm = pc.equal(kind, KIND_GROUP_METADATA)
    is_un = pc.equal(kind, KIND_UNSUPPORTED)
    keep = pc.and_(pc.or_(pc.or_(is_oc, is_gm), is_un), pc.is_valid(table.column("group_id")))
    table = table.filter(keep)
    schema = _input_arrow_schema()
    if table.num_rows == 0:
        return schema.empty_table()
    kind = table.column("kind")
    is_oc = pc.equal(kind, KIND_OFFSET_COMMIT)
    is_gm = pc.equal(kind, KIND_GROUP_METADATA)
    is_un = pc.equal(kind, KIND_UNSUPPORTED)
    not_un = pc.invert(is_un)

    n = table.num_rows

    def masked(cond: Any, col: Any) -> Any:
        # The decoder leaves other kinds' columns null: mask only when a stray value exists
        # (if_else over ~20 columns, nested ones among them, cost 10x the decode itself).
        if col.null_count == n or not pc.any(pc.and_(pc.invert(cond), pc.is_valid(col))).as_py():
            return col
        return pc.if_else(cond, col, pa.scalar(None, col.type))

    def when(cond: Any, name: str) -> Any:
        col = table.column(name)
        typ = schema.field(name).type
        if col.null_count == n:
            return pa.nulls(n, typ)
        return masked(cond, col.cast(typ))

    def ms(cond: Any, name: str) -> Any:
        col = table.column(name)
        if col.null_count == n:
            return pa.nulls(n, pa.int64())
        return masked(cond, pc.divide(col.cast(pa.int64()), 1000))

    rec_kind = pc.if_else(is_oc, REC_OFFSET_COMMIT, pc.if_else(is_gm, REC_GROUP_METADATA, REC_UNSUPPORTED))
    cols: dict[str, Any] = {
        "group_id": table.column("group_id"),
        "coordinator_partition": table.column("coordinator_partition"),
        "log_offset": table.column("log_offset"),
        "log_timestamp_ms": pc.divide(table.column("log_timestamp").cast(pa.int64()), 1000),
        "rec_kind": rec_kind,
        "key_version": (pc.if_else(is_un, table.column("record_type"), table.column("key_version"))
                        if pc.any(is_un).as_py() else table.column("key_version")),
        "is_tombstone": when(not_un, "is_tombstone"),
        "value_version": when(not_un, "value_version"),
        "commit_timestamp_ms": ms(is_oc, "commit_timestamp"),
        "expire_timestamp_ms": ms(is_oc, "expire_timestamp"),
        "current_state_timestamp_ms": ms(is_gm, "current_state_timestamp"),
    }
    for name in ("topic", "partition", "committed_offset", "leader_epoch", "metadata"):
        cols[name] = when(is_oc, name)
    for name in ("protocol_type", "generation", "protocol", "leader", "members"):
        cols[name] = when(is_gm, name)  # members: the struct cast keeps the replay's 8 fields
    for name in ("raw_key", "raw_value"):
        cols[name] = when(is_un, name)
    return pa.Table.from_arrays([pc.cast(cols[f.name], f.type) for f in schema], schema=schema)


def pack_replay_input(table: pa.Table) -> pa.RecordBatch:
    """Replay-input rows → one packed row per group: (group_id, max record time, the group's rows
    as one Arrow IPC record-batch message, sorted by (coordinator_partition, log_offset))."""
    import numpy as np
    import pyarrow as pa

    from pipelines.replay_job import replay_order

    schema = pa.schema([("group_id", pa.string()), ("log_timestamp", pa.timestamp("us", tz="UTC")),
                        ("records", pa.binary())])
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    order = pa.array(replay_order(table), pa.int64())
    batch = table.take(order).combine_chunks().to_batches()[0]
    ids = batch.column("group_id").dictionary_encode().indices.to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
    ends = np.append(starts[1:], batch.num_rows)
    ts = batch.column("log_timestamp_ms").to_numpy(zero_copy_only=False)
    blobs = [batch.slice(int(s), int(e - s)).serialize().to_pybytes() for s, e in zip(starts, ends)]
    return pa.RecordBatch.from_arrays(
        [batch.column("group_id").take(pa.array(starts)),
         pa.array(np.maximum.reduceat(ts, starts) * 1000, pa.int64()).cast(schema.field("log_timestamp").type),
         pa.array(blobs, pa.binary())],
        schema=schema,
    )


def gold_tables(rows: dict[str, list[dict[str, Any]]]) -> dict[str, pa.Table]:
    """Changed gold rows (``GroupReplayer.replay_rows``, any number of calls merged) → one Arrow
    table per gold table (``schemas.gold`` columns) + ``DELETED_OFFSETS`` (offsets_current keys)."""
    import pyarrow as pa

    from pipelines.gold import GOLD_SPECS, rows_to_arrow

    out: dict[str, pa.Table] = {}
    for name, table_rows in rows.items():
        if not table_rows:
            continue
        if name == DELETED_OFFSETS:
            key = GOLD_SPECS["offsets_current"].arrow_schema()
            out[name] = pa.Table.from_pylist(
                table_rows, schema=pa.schema([key.field(c) for c in ("group_id", "topic", "partition")])
            )
            continue
        spec = GOLD_SPECS[name]
        by_keys: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in table_rows:  # rows_to_arrow wants one key set (the same event class) per call
            by_keys.setdefault(tuple(row), []).append(row)
        parts = [rows_to_arrow(spec, rs) for rs in by_keys.values()]
        out[name] = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    return out


def gold_rows_to_union(rows: dict[str, list[dict[str, Any]]]) -> pa.Table:
    """Changed gold rows → the long format (``pipelines.gold.GOLD_UNION_SCHEMA``; deletions of
    offsets as code ``OFFSETS_DELETE`` with only the key columns set)."""
    import pyarrow as pa

    from pipelines.gold import GOLD_UNION_SCHEMA, to_union

    parts = []
    for name, table in gold_tables(rows).items():
        if name != DELETED_OFFSETS:
            parts.append(to_union(name, table))
            continue
        n = table.num_rows
        cols = {"gold_table": pa.array([OFFSETS_DELETE] * n, pa.int8()),
                **{c: table.column(c) for c in table.column_names}}
        parts.append(pa.Table.from_arrays(
            [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in GOLD_UNION_SCHEMA],
            schema=GOLD_UNION_SCHEMA,
        ))
    return pa.concat_tables(parts) if parts else GOLD_UNION_SCHEMA.empty_table()


def unpack_replay_input(blobs: Sequence[bytes]) -> pa.Table:
    """The inverse of ``pack_replay_input`` for one group's packed rows (any order)."""
    import pyarrow as pa

    schema = _input_arrow_schema()
    return pa.Table.from_batches(
        [pa.ipc.read_record_batch(pa.py_buffer(b), schema) for b in blobs], schema=schema
    )


def pack_batches(batches: Iterator[pa.RecordBatch], *, lenient: bool = False) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function of the replay query: raw batches → decode → replay input → packed
    rows (one per group and raw batch)."""
    import pyarrow as pa

    from pipelines.decode import UNION_SCHEMA, decode_batch

    for batch in batches:
        parts = decode_batch(batch, lenient=lenient)
        if not parts:
            continue
        packed = pack_replay_input(replay_input_arrow(pa.Table.from_batches(parts, schema=UNION_SCHEMA)))
        if packed.num_rows:
            yield packed


def packed_replay_input(raw_df: DataFrame, *, lenient: bool = False) -> DataFrame:
    """Raw records → packed replay input (``PACK_DDL``), in ONE ``mapInArrow`` pass.

    Why packed: ``applyInPandasWithState`` hands its input to Python as pandas; converting ~25
    decoded columns (a nested ``members`` array among them) to pandas and back to Arrow per
    record cost more than the replay itself. Packed, a group's records of one raw batch cross
    as one Arrow IPC message (one bytes object), and a micro-batch of N records gives at most
    groups × raw batches rows to shuffle, sort and convert. ``log_timestamp`` is the pack's
    newest record time: the watermark (max event time − delay) is unchanged; a pack is dropped
    as late only when all of its records are (Spark drops whole rows).
    """
    from pipelines.decode import INPUT_COLUMNS

    # ``topic`` only fills the quarantine's raw_topic (the other query's business): not converted.
    cols = [c for c in INPUT_COLUMNS if c in raw_df.columns and c != "topic"]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return pack_batches(batches, lenient=lenient)

    return raw_df.select(*cols).mapInArrow(fn, PACK_DDL)


# =============================================================================================
# The packed landing source (Python data source): files → decode → packed rows, in one task
# =============================================================================================
LANDING_SOURCE_NAME = "offsetlake_landing_packed"


def _local_dir(path: str) -> str | None:
    """The local directory behind ``path`` (plain or ``file:`` URI), else None."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif path.startswith("file:"):
        path = path[len("file:"):]
    elif "://" in path:
        return None
    return path


def list_landing(path: str) -> list[tuple[int, str, int]]:
    """Complete raw-record files of the landing directory as (mtime ns, name, bytes), in the
    order Spark's file source takes them (modification time, then name); hidden/temp files
    (``.name.tmp``, ``_SUCCESS``) are not data."""
    out = []
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return []
    for e in entries:
        if e.name.startswith((".", "_")) or not e.name.endswith(".parquet") or not e.is_file():
            continue
        st = e.stat()
        out.append((st.st_mtime_ns, e.name, st.st_size))
    out.sort()
    return out


def content_key(path: str) -> int:
    """What a landing file holds, as an order key: its oldest record time (µs; from the
    Parquet statistics of ``timestamp``, else the column itself). Files taken in this order
    feed the watermark in log-time order whatever their modification times say."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    names = [md.schema.column(i).name for i in range(md.num_columns)]
    if "timestamp" not in names or md.num_rows == 0:
        return -(2**63)
    idx = names.index("timestamp")
    lows = []
    for rg in range(md.num_row_groups):
        st = md.row_group(rg).column(idx).statistics
        if st is None or not st.has_min_max or md.row_group(rg).column(idx).physical_type != "INT64":
            lows = []
            break
        lows.append(int(st.min_raw))
    if lows:
        return min(lows)
    col = pq.read_table(path, columns=["timestamp"]).column(0)
    low = pc.min(col.cast("int64") if col.type != "int64" else col).as_py()
    return -(2**63) if low is None else int(low)


class LandingPartition:
    """One task's files (picklable; the Python data source's InputPartition protocol)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths


class LandingPackedReader:
    """``DataSourceStreamReader`` over the landing directory whose rows are the packed replay
    input (``PACK_DDL``): each task reads its files with pyarrow, decodes and packs them
    (``pack_batches``) — the raw records never become JVM rows.

    Order: files are taken by what they hold (``content_key``: oldest record time, then name),
    not by modification time, so landing files whose mtimes do not follow the log (copied,
    restored, re-captured) do not push the watermark past records still to come.

    Offsets: ``{"files", "records", "key", "name", "seen_ns"}`` — files and raw records consumed
    so far, the (content key, name) of the last file taken, and the newest modification time
    of the files listed then. A file is taken when its (key, name) is above the last one's; a
    file below it that appeared after that listing (mtime > ``seen_ns``) arrived late: it is
    taken with the next batch (its records, older than the watermark, are then dropped by the
    stateful operator — counted in records and failing the run unless
    ``stream.allow_late_drops``, ``ProgressRecorder``). Offsets of older checkpoints
    (``mtime_ns``/``name``) are read as before. ``records`` gives the progress its raw input count.
    """

    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark passes option names lowercased
        self.path = options["path"]
        self.max_files = int(options.get("maxfilespertrigger") or 0) or None
        self.max_bytes = int(options.get("maxbytespertrigger") or 0) or None
        self.tasks = max(1, int(options.get("tasks") or 2))
        self.lenient = options.get("lenient", "false") == "true"
        self._target: tuple[int, str] | None = None
        self._keys: dict[tuple[str, int, int], int] = {}

    # -- listing ---------------------------------------------------------------------------
    def _listing(self) -> list[tuple[int, str, int, int]]:
        """(content key, name, bytes, mtime ns) of the complete files, in content order."""
        out = []
        for mtime, name, size in list_landing(self.path):
            ident = (name, size, mtime)
            key = self._keys.get(ident)
            if key is None:
                key = self._keys[ident] = content_key(os.path.join(self.path, name))
            out.append((key, name, size, mtime))
        out.sort()
        return out

    @staticmethod
    def _taken(start: dict[str, Any]) -> Callable[[tuple[int, str, int, int]], bool]:
        if "key" not in start:  # a checkpoint of the mtime-ordered reader
            last_m = (int(start.get("mtime_ns", -1)), str(start.get("name", "")))
            return lambda f: (f[3], f[1]) <= last_m
        last = (int(start["key"]), str(start["name"]))
        seen = int(start.get("seen_ns", -1))
        return lambda f: (f[0], f[1]) <= last and f[3] <= seen

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        return {"files": 0, "records": 0, "key": -(2**63), "name": "", "seen_ns": -1}

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles

        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        files = self._listing()
        self._target = (max(f[0] for f in files), max(f[3] for f in files)) if files else (-(2**63), -1)

    def _after(self, start: dict[str, Any]) -> list[tuple[int, str, int, int]]:
        taken = self._taken(start)
        new = [f for f in self._listing() if not taken(f)]
        if self._target is not None:  # available-now: only what was there when it started
            new = [f for f in new if f[3] <= self._target[1]]
        return new

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        import pyarrow.parquet as pq
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

        new = self._after(start)
        if "key" in start:
            last = (int(start["key"]), str(start["name"]))
            late = [f for f in new if (f[0], f[1]) <= last]  # arrived after newer data was taken
            new = [f for f in new if (f[0], f[1]) > last]
        else:
            late = []
        if isinstance(limit, ReadMaxFiles):
            new = new[: max(1, limit.max_files)]
        elif isinstance(limit, ReadMaxBytes):
            taken, size = [], 0
            for f in new:
                if taken and size + f[2] > limit.max_bytes:
                    break
                taken.append(f)
                size += f[2]
            new = taken
        batch = late + new
        if not batch:
            return dict(start)
        if late:
            log.warning("landing: %d file(s) arrived after newer files were processed: %s", len(late),
                        ", ".join(f[1] for f in late[:5]))
        rows = sum(pq.read_metadata(os.path.join(self.path, f[1])).num_rows for f in batch)
        last_key = (int(start.get("key", -(2**63))), str(start.get("name", ""))) if "key" in start else None
        top = max([(f[0], f[1]) for f in new] + ([last_key] if last_key else []))
        # taken afterwards = (key, name) <= top and mtime <= seen: exactly the files taken before
        # plus this batch (``new`` is a prefix of the pending files in content order; a file
        # left out by the available-now target is newer than every file taken)
        seen = max([int(start.get("seen_ns", -1)), *(f[3] for f in batch)])
        return {"files": int(start["files"]) + len(batch), "records": int(start["records"]) + rows,
                "key": top[0], "name": top[1], "seen_ns": seen}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[LandingPartition]:
        before = self._taken(start)
        upto = self._taken(end)
        files = [f for f in self._listing() if upto(f) and not before(f)]
        n = min(self.tasks, len(files))
        if n == 0:
            return []
        # balance bytes over the tasks (largest first onto the lightest task), keep log order inside
        loads = [[0, i, []] for i in range(n)]
        for idx, f in sorted(enumerate(files), key=lambda x: -x[1][2]):
            slot = min(loads, key=lambda s: (s[0], s[1]))
            slot[0] += f[2]
            slot[2].append(idx)
        return [LandingPartition([os.path.join(self.path, files[i][1]) for i in sorted(s[2])]) for s in loads]

    def read(self, partition: LandingPartition) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        from pipelines.decode import INPUT_COLUMNS

        for path in partition.paths:
            pf = pq.ParquetFile(path)
            cols = [c for c in INPUT_COLUMNS if c in pf.schema_arrow.names and c != "topic"]
            yield from pack_batches(pf.iter_batches(batch_size=100_000, columns=cols), lenient=self.lenient)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint journals the offsets."""

    def stop(self) -> None:
        """Nothing to release."""


def _landing_source_classes() -> tuple[type, type]:
    """(DataSource, DataSourceStreamReader) classes, built on first use (pyspark imported late)."""
    global _LANDING_CLASSES
    if _LANDING_CLASSES is None:
        from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

        class _Partition(LandingPartition, InputPartition):
            pass

        class _Reader(LandingPackedReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
            def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
                return [_Partition(p.paths) for p in LandingPackedReader.partitions(self, start, end)]

        class _Source(DataSource):
            @classmethod
            def name(cls) -> str:
                return LANDING_SOURCE_NAME

            def schema(self) -> str:
                return PACK_DDL

            def streamReader(self, schema: Any) -> Any:
                return _Reader(dict(self.options))

        _LANDING_CLASSES = (_Source, _Reader)
    return _LANDING_CLASSES


_LANDING_CLASSES: tuple[type, type] | None = None


def read_packed_landing(spark: SparkSession, settings: StreamSettings) -> DataFrame:
    """The packed replay input straight from the landing directory (``LandingPackedReader``)."""
    source, _ = _landing_source_classes()
    spark.dataSource.register(source)
    path = _local_dir(settings.landing)
    assert path is not None
    reader = spark.readStream.format(LANDING_SOURCE_NAME).option("path", os.path.abspath(path))
    if settings.max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(settings.max_bytes_per_trigger))
    else:
        reader = reader.option("maxFilesPerTrigger", str(settings.max_files_per_trigger))
    return reader.load()


# =============================================================================================
# The stateful function (runs in Python workers; pure apart from GroupState)
# =============================================================================================
def _input_arrow_schema() -> pa.Schema:
    from pipelines.replay_job import replay_input_arrow_schema

    return replay_input_arrow_schema()


def _dedupe_last(rows: list[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    """Keep the last row per key (a predicted event later confirmed in the same call), in order."""
    if len(rows) < 2:
        return rows
    seen: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    for row in reversed(rows):
        k = tuple(row[c] for c in key)
        if k not in seen:
            seen.add(k)
            out.append(row)
    out.reverse()
    return out


@dataclass(frozen=True)
class GroupReplayer:
    """The ``applyInPandasWithState`` function: one group's new records (or its timer) → state
    update + changed gold rows (``pipelines.gold`` long format). Picklable (a frozen dataclass).
    """

    settings: ReplaySettings
    tables: tuple[str, ...]
    num_partitions: int

    def replay_rows(
        self,
        group_id: str,
        snapshot_blob: bytes | None,
        records_table: pa.Table | None,
        watermark_ms: int,
    ) -> tuple[bytes, dict[str, list[dict[str, Any]]], int | None]:
        """The pure part: (state bytes, input rows, watermark) → (new state bytes, changed gold
        rows per table (core rows, last row per key; ``DELETED_OFFSETS``: offsets the group no
        longer holds; a ``withdrawn`` event row: its key is deleted), next timer ms).
        ``records_table`` is None when the timer fired.

        The watermark is "now" and the end of the log (no record of the group older than it is
        still to come): forecasts are made at it, and one whose cleanup it has passed with no
        tombstone is withdrawn — the same rows as the batch job with ``as_of`` = the final
        watermark."""
        import dataclasses

        from coordinator_core.replay import deserialize_snapshot, new_snapshot, serialize_snapshot
        from pipelines.gold import GOLD_SPECS
        from pipelines.replay_job import event_kinds_for, gold_rows, replay_table

        before = deserialize_snapshot(snapshot_blob) if snapshot_blob is not None else new_snapshot(group_id)
        if records_table is None:
            records_table = _input_arrow_schema().empty_table()
        as_of = watermark_ms if (self.settings.retention_ms is not None and watermark_ms > 0) else None
        # The bulk replay: sorts by (partition, offset), reduces offset-commit runs with numpy
        # and gives exactly the core ``replay`` of every record (pipelines.replay_job).
        result = replay_table(
            before,
            records_table,
            settings=self.settings,
            as_of_ms=as_of,
            event_kinds=event_kinds_for(self.tables),
            log_end_ms=as_of,
        )
        after = result.snapshot
        # Only what changed: the offsets this call replaced or added, and deletions.
        changed = {tp: e for tp, e in after.offsets.items() if before.offsets.get(tp) != e}
        removed = [tp for tp in before.offsets if tp not in after.offsets]
        view = dataclasses.replace(result, snapshot=dataclasses.replace(after, offsets=changed))
        by_table = gold_rows(
            view, tables=self.tables, settings=self.settings,
            num_partitions=self.num_partitions, keep_withdrawn=True,
        )
        if "group_state" in by_table:  # the state row must describe the whole snapshot
            by_table["group_state"] = [
                after.to_state_row(settings=self.settings,
                                   num_partitions=self.num_partitions)
            ]
        out: dict[str, list[dict[str, Any]]] = {}
        for name, rows in by_table.items():
            if rows:
                key = [c for c in GOLD_SPECS[name].primary_key if c in rows[0]]
                out[name] = _dedupe_last(rows, key)
        if removed and "offsets_current" in self.tables:
            out[DELETED_OFFSETS] = [{"group_id": group_id, "topic": t, "partition": p} for t, p in removed]
        nxt = after.next_judgment_ms(self.settings)
        return serialize_snapshot(after), out, nxt

    def replay_call(
        self,
        group_id: str,
        snapshot_blob: bytes | None,
        records_table: pa.Table | None,
        watermark_ms: int,
    ) -> tuple[bytes, pa.Table, int | None]:
        """``replay_rows`` with the rows in the long format (``gold_rows_to_union``)."""
        blob, rows, nxt = self.replay_rows(group_id, snapshot_blob, records_table, watermark_ms)
        return blob, gold_rows_to_union(rows), nxt

    def __call__(
        self, key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        from coordinator_core.replay import SNAPSHOT_FORMAT_VERSION

        (group_id,) = key
        blob: bytes | None = None
        if state.exists:
            _fmt, raw = state.get
            blob = bytes(raw)
        watermark = int(state.getCurrentWatermarkMs())
        table: pa.Table | None = None
        if not state.hasTimedOut:
            packs = [b for pdf in pdfs for b in pdf["records"]]
            if packs:
                table = unpack_replay_input(packs)
        new_blob, rows, nxt = self.replay_rows(group_id, blob, table, watermark)
        state.update((SNAPSHOT_FORMAT_VERSION, new_blob))
        if nxt is not None:
            # Spark fires when watermark > timeout; the core acts at a time <= as_of: nxt - 1.
            state.setTimeoutTimestamp(max(nxt - 1, watermark, 1))
        if rows:
            import pickle

            import pandas as pd

            yield pd.DataFrame({"records": [pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)]})


def stateful_replay(packed: DataFrame, settings: StreamSettings) -> DataFrame:
    """Packed replay input (``packed_replay_input``) → ``withWatermark`` +
    ``groupBy(group_id).applyInPandasWithState`` → packed gold rows (``OUTPUT_DDL``)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    fn = GroupReplayer(settings.replay, settings.tables, settings.num_partitions)
    return (
        packed.withWatermark("log_timestamp", f"{settings.watermark_delay_ms} milliseconds")
        .groupBy("group_id")
        .applyInPandasWithState(
            fn, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.EventTimeTimeout
        )
    )


# =============================================================================================
# Sinks (foreachBatch)
# =============================================================================================
class GoldBatchWriter:
    """``foreachBatch``: the changed gold rows → the gold tables, idempotently per batch id.

    The micro-batch output (changed rows only: small) is collected once, turned into one Arrow
    table per gold table on the driver and MERGEd table by table (``pipelines.tableio``) with the
    txn (app id, batch id).
    """

    def __init__(self, io: TableIO, settings: StreamSettings) -> None:
        self.io = io
        self.settings = settings
        self.app_id = settings.app_id
        self.last_batch_rows: dict[str, int] = {}
        self.last_timings: dict[str, float] = {}
        self.write_threads = 4

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        import pickle

        t0 = time.perf_counter()
        # Runs the decode + stateful replay (one Spark job); one row per group call that changed
        # something: its rows, pickled by the stateful function (our own workers' output).
        merged: dict[str, list[dict[str, Any]]] = {}
        for blob in batch_df.toArrow().column("records").to_pylist():
            for name, rows in pickle.loads(blob).items():
                merged.setdefault(name, []).extend(rows)
        tables = gold_tables(merged)
        timings: dict[str, float] = {"replay": time.perf_counter() - t0}
        written = {name: t.num_rows for name, t in tables.items()}

        def write(name: str) -> float:
            t1 = time.perf_counter()
            if name == DELETED_OFFSETS:
                # after the upserts of offsets_current (same table: commits in order)
                self.io.delete_keys("offsets_current", tables[name], txn_app_id=self.app_id,
                                    txn_version=batch_id)
            elif name in APPEND_TABLES:
                spark = self.io.spark
                assert spark is not None
                from pipelines.gold import GOLD_SPECS

                part = spark.createDataFrame(tables[name], GOLD_SPECS[name].spark_schema())
                self.io.append(name, part, txn_app_id=self.app_id, txn_version=batch_id)
            else:
                table = tables[name]
                gone = None
                if "status" in table.column_names:
                    # forecasts a later replay call withdrew: their keys go (after the upserts,
                    # same table: commits in order)
                    import pyarrow.compute as pc

                    mask = pc.fill_null(pc.equal(table.column("status"), WITHDRAWN), False)
                    if pc.any(mask).as_py():
                        gone = table.filter(mask).select(["group_id", "event_key"])
                        table = table.filter(pc.invert(mask))
                if table.num_rows:
                    self.io.merge(name, table, txn_app_id=self.app_id, txn_version=batch_id)
                if gone is not None:
                    self.io.delete_keys(name, gone, txn_app_id=self.app_id, txn_version=batch_id)
            return time.perf_counter() - t1

        def write_chain(names: list[str]) -> list[tuple[str, float]]:
            return [(n, write(n)) for n in names]

        chains = [[n] for n in self.settings.tables if n in tables and n != "offsets_current"]
        offsets = [n for n in ("offsets_current", DELETED_OFFSETS) if n in tables]
        if offsets:
            chains.insert(0, offsets)
        # Different tables, independent commits: side by side (delta-rs releases the GIL). The
        # driver-side Arrow source skips a Spark job per table.
        with ThreadPoolExecutor(max_workers=self.write_threads) as pool:
            for done in pool.map(write_chain, chains):
                timings.update(done)
        self.last_batch_rows = written
        self.last_timings = timings
        log.debug("batch %d rows %s seconds %s", batch_id, written, {k: round(v, 2) for k, v in timings.items()})


class QuarantineBatchWriter:
    """``foreachBatch`` of the quarantine query: quarantined and unsupported records, appended
    with the txn (app id, batch id). Usually empty: collected first, written only when not."""

    def __init__(self, io: TableIO, settings: StreamSettings) -> None:
        self.io = io
        self.app_id = APP_ID_PREFIX + settings.quarantine_query_name

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        from pipelines.decode import split_union, union_spark_schema

        spark = self.io.spark
        assert spark is not None
        arrow = batch_df.toArrow()
        if not arrow.num_rows:
            return
        split = split_union(spark.createDataFrame(arrow, union_spark_schema()))
        for name, df in (("quarantine", split.quarantine), ("unsupported_records", split.unsupported)):
            self.io.append(name, df, txn_app_id=self.app_id, txn_version=batch_id)


# =============================================================================================
# Progress
# =============================================================================================
def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _input_records(progress: dict[str, Any]) -> int:
    """Raw records of the micro-batch: the packed landing source counts them in its offsets
    (its rows are packs); other sources' rows are records."""
    total = 0
    for src in progress.get("sources") or []:
        start, end = src.get("startOffset"), src.get("endOffset")
        start = json.loads(start) if isinstance(start, str) else start
        end = json.loads(end) if isinstance(end, str) else end
        if isinstance(end, dict) and "records" in end:
            total += int(end["records"]) - int((start or {}).get("records") or 0)
        else:
            total += int(src.get("numInputRows") or 0)
    return total if progress.get("sources") else int(progress.get("numInputRows") or 0)


def progress_row(progress: dict[str, Any], query_name: str) -> dict[str, Any]:
    """A ``stream_progress`` row from a ``StreamingQueryProgress`` (its JSON as a dict)."""
    ops = progress.get("stateOperators") or []
    event_time = progress.get("eventTime") or {}
    records = _input_records(progress)
    rows = int(progress.get("numInputRows") or 0)
    scale = records / rows if rows else 1.0  # rates in records, not packs
    wm = _parse_time(event_time.get("watermark"))
    if wm is not None and wm.timestamp() <= 0:
        wm = None
    return {
        "query_name": query_name,
        "batch_id": int(progress["batchId"]),
        "timestamp": _parse_time(progress.get("timestamp")),
        "input_rows": records,
        "input_rows_per_second": float(progress.get("inputRowsPerSecond") or 0.0) * scale,
        "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0) * scale,
        "batch_duration_ms": int((progress.get("durationMs") or {}).get("triggerExecution") or 0),
        "state_rows": sum(int(o.get("numRowsTotal") or 0) for o in ops) if ops else None,
        "state_memory_bytes": sum(int(o.get("memoryUsedBytes") or 0) for o in ops) if ops else None,
        "watermark": wm,
        "sources": json.dumps(progress.get("sources") or []),
    }


def progress_line(row: dict[str, Any], dropped_late: int = 0) -> str:
    """The one log line per micro-batch."""
    wm = row["watermark"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z" if row["watermark"] else "-"
    line = (
        f"{row['query_name']} batch={row['batch_id']} input_rows={row['input_rows']} "
        f"rows/s={row['processed_rows_per_second']:.0f} state_rows={row['state_rows']} "
        f"state_bytes={row['state_memory_bytes']} watermark={wm} duration_ms={row['batch_duration_ms']}"
    )
    if dropped_late:
        line += f" DROPPED_LATE={dropped_late}"
    return line


def late_records(landing: str, start: dict[str, Any], end: dict[str, Any], watermark_ms: int) -> tuple[int, int]:
    """(records, packs) of a micro-batch of the packed landing source that the stateful
    operator drops as late: the batch's files packed again exactly as its tasks did, packs
    whose event time is at or before the batch's watermark (Spark keeps ``eventTime >
    watermark``)."""
    import pyarrow.parquet as pq

    from pipelines.decode import INPUT_COLUMNS

    reader = LandingPackedReader({"path": landing})
    before, upto = reader._taken(start), reader._taken(end)
    limit_us = watermark_ms * 1000
    records = packs = 0
    for f in reader._listing():
        if not upto(f) or before(f):
            continue
        pf = pq.ParquetFile(os.path.join(landing, f[1]))
        cols = [c for c in INPUT_COLUMNS if c in pf.schema_arrow.names and c != "topic"]
        for packed in pack_batches(pf.iter_batches(batch_size=100_000, columns=cols)):
            ts = packed.column("log_timestamp").cast("int64").to_pylist()
            for i, t in enumerate(ts):
                if t is not None and t <= limit_us:
                    packs += 1
                    records += unpack_replay_input([packed.column("records")[i].as_py()]).num_rows
    return records, packs


class ProgressRecorder:
    """Polls each query's ``recentProgress``; logs one line per new micro-batch and MERGEs the
    rows into ``stream_progress`` (key (query_name, batch_id); txn version = newest batch id).

    Late data: Spark's ``numRowsDroppedByWatermark`` counts packs (one per group and raw batch);
    for the packed landing source the dropped records are counted exactly (``late_records``)
    and logged as ``DROPPED_LATE=<records>``; otherwise the line says ``DROPPED_LATE_PACKS``.
    ``dropped`` accumulates them: the job fails on it unless ``stream.allow_late_drops``.
    """

    def __init__(self, io: TableIO | None, *, echo: Callable[[str], None] | None = None,
                 landing: str | None = None) -> None:
        self.io = io
        self.echo = echo
        self.landing = landing  # the packed landing source's directory (exact late counts)
        self.seen: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []
        self.dropped: list[tuple[str, int, int, int | None]] = []  # (query, batch, packs, records)

    def poll(self, query: StreamingQuery, name: str) -> None:
        try:
            recent = query.recentProgress
        except Exception:  # the query is shutting down
            return
        last = self.seen.get(name, -1)
        new: list[dict[str, Any]] = []
        for p in recent:
            data = p if isinstance(p, dict) else json.loads(p.json)
            if int(data["batchId"]) <= last:
                continue
            row = progress_row(data, name)
            dropped = sum(int(o.get("numRowsDroppedByWatermark") or 0) for o in data.get("stateOperators") or [])
            msg = progress_line(row, 0)
            if dropped:
                records = self._late_records(data)
                self.dropped.append((name, int(data["batchId"]), dropped, records))
                msg += (f" DROPPED_LATE={records} records ({dropped} packs)" if records is not None
                        else f" DROPPED_LATE_PACKS={dropped} (records not counted for this source)")
            (log.warning if dropped else log.info)(msg)
            if self.echo is not None:
                self.echo(msg)
            new.append(row)
            last = int(data["batchId"])
        self.seen[name] = last
        if new:
            self.rows.extend(new)
            self._write(name, new)

    def _late_records(self, progress: dict[str, Any]) -> int | None:
        wm = _parse_time((progress.get("eventTime") or {}).get("watermark"))
        sources = progress.get("sources") or []
        if self.landing is None or wm is None or len(sources) != 1:
            return None
        try:
            start, end = (json.loads(sources[0][k]) if isinstance(sources[0][k], str) else sources[0][k]
                          for k in ("startOffset", "endOffset"))
            if not isinstance(start, dict):  # the first batch starts at the initial offset
                start = LandingPackedReader({"path": self.landing}).initialOffset()
            if not isinstance(end, dict):
                return None
            return late_records(self.landing, start, end, int(wm.timestamp() * 1000))[0]
        except Exception as exc:  # counting is best effort; the packs are still reported
            log.warning("could not count the late records: %s", exc)
            return None

    def late_failure(self) -> str | None:
        """The one-line refusal when records were dropped as late, else ``None``."""
        if not self.dropped:
            return None
        packs = sum(d[2] for d in self.dropped)
        known = [d[3] for d in self.dropped]
        what = (f"{sum(k for k in known if k is not None)} records ({packs} packs)" if None not in known
                else f"{packs} packs (at least {packs} records)")
        batches = ", ".join(f"{q} batch {b}" for q, b, *_ in self.dropped[:3])
        return (f"stream: {what} arrived later than the watermark and were dropped ({batches}); "
                "raise stream.watermark_delay_ms, or set stream.allow_late_drops: true to accept the loss")

    def _write(self, name: str, rows: list[dict[str, Any]]) -> None:
        if self.io is None or self.io.spark is None:
            return
        from schemas.stream import STREAM_PROGRESS

        try:
            df = self.io.spark.createDataFrame(rows, STREAM_PROGRESS.spark_schema())
            # MERGE on (query_name, batch_id): driver-side (no executor job next to the running
            # micro-batch) and idempotent by key, whatever a restart re-reports.
            self.io.merge(STREAM_PROGRESS.name, df, txn_app_id=APP_ID_PREFIX + "progress-" + name,
                          txn_version=max(r["batch_id"] for r in rows))
        except Exception as exc:  # progress is observational: never fail the job for it
            log.warning("stream_progress write failed: %s", exc)


def _checkpoint_offsets(checkpoint: str, batch_id: int) -> tuple[dict[str, Any], list[Any]] | None:
    """(metadata, source offsets) of a micro-batch from the checkpoint's offset log."""
    try:
        lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
        return json.loads(lines[1]), [json.loads(x) if x.strip() not in ("", "-") else None for x in lines[2:]]
    except (OSError, ValueError, IndexError):
        return None


def reconstruct_progress(io: TableIO, query_name: str, checkpoint: str) -> int:
    """Add the ``stream_progress`` rows of micro-batches the checkpoint committed but the table
    misses (the job was killed between a batch's commit and its progress poll). Rebuilt from the
    offset log: trigger time, watermark, sources and — for the packed landing source — the raw
    records read; rates, duration and state sizes are unknown (null). Returns the rows added."""
    from schemas.stream import STREAM_PROGRESS

    local = _local_dir(checkpoint)
    commits = Path(local) / "commits" if local else None
    if commits is None or not commits.is_dir() or io.spark is None:
        return 0
    done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    if not done or not io.exists(STREAM_PROGRESS.name):
        return 0
    have = {int(r["batch_id"]) for r in io.read(STREAM_PROGRESS.name).where(
        f"query_name = '{query_name}'").select("batch_id").collect()}
    rows = []
    for bid in done:
        if bid in have:
            continue
        cur = _checkpoint_offsets(str(local), bid)
        if cur is None:
            continue
        meta, offsets = cur
        prev = _checkpoint_offsets(str(local), bid - 1) if bid > 0 else None
        end = offsets[0] if offsets else None
        start = prev[1][0] if prev and prev[1] else None
        records = None
        if isinstance(end, dict) and "records" in end:
            records = int(end["records"]) - (int(start["records"]) if isinstance(start, dict) else 0)
        wm = int(meta.get("batchWatermarkMs") or 0)
        rows.append({
            "query_name": query_name, "batch_id": bid,
            "timestamp": datetime.fromtimestamp(int(meta.get("batchTimestampMs") or 0) / 1000, UTC),
            "input_rows": records, "input_rows_per_second": None, "processed_rows_per_second": None,
            "batch_duration_ms": None, "state_rows": None, "state_memory_bytes": None,
            "watermark": datetime.fromtimestamp(wm / 1000, UTC) if wm > 0 else None,
            "sources": json.dumps([{"description": "reconstructed from the checkpoint", "startOffset": start,
                                    "endOffset": end}]),
        })
    if rows:
        io.merge(STREAM_PROGRESS.name, io.spark.createDataFrame(rows, STREAM_PROGRESS.spark_schema()))
        log.info("stream_progress: %d micro-batch row(s) of %s rebuilt from the checkpoint", len(rows), query_name)
    return len(rows)


# =============================================================================================
# Running
# =============================================================================================
class _Stopper:
    """SIGTERM/SIGINT → stop the queries at the next poll, exit 0."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.signal: int | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal = signum
        self.requested.set()


def _trigger(writer: Any, settings: StreamSettings, available_now: bool) -> Any:
    if available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=settings.trigger_interval)


def start_replay_query(
    spark: SparkSession, cfg: Config, io: TableIO, settings: StreamSettings, *, available_now: bool
) -> StreamingQuery:
    """Source → decode → stateful replay → ``foreachBatch`` gold writes."""
    if settings.source == "landing" and settings.landing_reader == "python" and _local_dir(settings.landing):
        packed = read_packed_landing(spark, settings)
    else:
        packed = packed_replay_input(read_raw_stream(spark, cfg, settings))
    gold = stateful_replay(packed, settings)
    writer = (
        gold.writeStream.queryName(settings.query_name)
        .outputMode("update")
        .option("checkpointLocation", settings.replay_checkpoint)
        .foreachBatch(GoldBatchWriter(io, settings))
    )
    # The query runs on a clone of the session's conf taken at start(): set these for it only.
    user = set(cfg.spark.conf) - {"spark.sql.shuffle.partitions"}
    saved = {}
    for key, value in state_conf(spark, settings.state_partitions).items():
        if key not in user:
            saved[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
    try:
        return _trigger(writer, settings, available_now).start()
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def state_conf(spark: SparkSession, partitions: int | None = None) -> dict[str, str]:
    """Settings of the stateful query (the second one unless ``spark.conf`` sets it):

    - state partitions = ``stream.state_partitions``, default the cores Spark has
      (``defaultParallelism``): one state-store partition per core, each committing once per
      micro-batch (not ``spark.sql.shuffle.partitions``, sized for the batch job's shuffles).
      Spark keeps the number a checkpoint was created with: only a new checkpoint uses it.
    - RocksDB changelog checkpointing: a commit writes the batch's changes instead of uploading a
      snapshot of the store (snapshots are made in the background); either way a restart reads
      the checkpoint (Spark converts between the two formats).
    """
    cores = partitions or max(1, int(spark.sparkContext.defaultParallelism))
    return {
        "spark.sql.shuffle.partitions": str(cores),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }


def start_quarantine_query(
    spark: SparkSession, cfg: Config, io: TableIO, settings: StreamSettings, *, available_now: bool
) -> StreamingQuery:
    """Source → decode → quarantined/unsupported records → ``foreachBatch`` appends."""
    from pyspark.sql import functions as F

    from pipelines.decode import KIND_QUARANTINE, KIND_UNSUPPORTED, decode_union

    side = decode_union(read_raw_stream(spark, cfg, settings)).where(
        F.col("kind").isin(KIND_QUARANTINE, KIND_UNSUPPORTED)
    )
    writer = (
        side.writeStream.queryName(settings.quarantine_query_name)
        .option("checkpointLocation", settings.quarantine_checkpoint)
        .foreachBatch(QuarantineBatchWriter(io, settings))
    )
    return _trigger(writer, settings, available_now).start()


def run(
    spark: SparkSession,
    cfg: Config,
    *,
    available_now: bool,
    poll_seconds: float = 1.0,
    echo: Callable[[str], None] | None = None,
    with_quarantine: bool = True,
    stopper: Any | None = None,
) -> ProgressRecorder:
    """Run the streaming job on ``spark`` until it ends (available-now) or is stopped.

    Available-now runs the replay query, then the quarantine query (two cores are better spent
    on one at a time); continuous mode runs both side by side.
    """
    from pipelines.warehouse_lock import warehouse_lock

    # one writer per warehouse: a batch (or a second stream) is refused while this runs
    with warehouse_lock(cfg.paths.warehouse, "offsetlake stream") as lock:
        cleaned = lock.cleanup.line()
        if cleaned:
            log.info("%s", cleaned)
        return _run(spark, cfg, available_now=available_now, poll_seconds=poll_seconds, echo=echo,
                    with_quarantine=with_quarantine, stopper=stopper)


def _run(
    spark: SparkSession,
    cfg: Config,
    *,
    available_now: bool,
    poll_seconds: float,
    echo: Callable[[str], None] | None,
    with_quarantine: bool,
    stopper: Any | None,
) -> ProgressRecorder:
    from pipelines.tableio import TableIO

    settings = settings_from_config(cfg)
    io = TableIO(cfg, spark)
    for name in (*settings.tables, "quarantine", "unsupported_records", "stream_progress"):
        io.ensure(name)
    # micro-batches committed just before a kill, whose progress was never polled
    for query, checkpoint in ((settings.query_name, settings.replay_checkpoint),
                              (settings.quarantine_query_name, settings.quarantine_checkpoint)):
        reconstruct_progress(io, query, checkpoint)
    packed_landing = settings.source == "landing" and settings.landing_reader == "python" and _local_dir(
        settings.landing) is not None
    recorder = ProgressRecorder(io, echo=echo,
                                landing=os.path.abspath(_local_dir(settings.landing) or "") if packed_landing else None)
    stop = stopper if stopper is not None else _Stopper()
    starters: list[tuple[str, Callable[[], StreamingQuery]]] = [
        (settings.query_name,
         lambda: start_replay_query(spark, cfg, io, settings, available_now=available_now)),
    ]
    if with_quarantine:
        starters.append((settings.quarantine_query_name,
                         lambda: start_quarantine_query(spark, cfg, io, settings, available_now=available_now)))
    stages = [[s] for s in starters] if available_now else [starters]
    for stage in stages:
        if stop.requested.is_set():
            break
        queries = [(name, start()) for name, start in stage]
        _watch(queries, recorder, stop, poll_seconds, None if settings.allow_late_drops else recorder.late_failure)
    return recorder


def _watch(queries: list[tuple[str, StreamingQuery]], recorder: ProgressRecorder, stop: Any,
           poll_seconds: float, refuse: Callable[[], str | None] | None = None) -> None:
    """Poll progress until every query ended or a stop is requested; re-raise a query failure.

    A signal sent to the whole process group also reaches Spark's JVM, which then shuts down on
    its own: Py4J errors after a stop request are an orderly exit, not a failure.
    """
    try:
        while True:
            active = [(n, q) for n, q in queries if q.isActive]
            for n, q in queries:
                recorder.poll(q, n)
            if refuse is not None and (reason := refuse()):
                from pipelines.errors import DataLossError

                raise DataLossError(reason)
            if not active:
                break
            if stop.requested.is_set():
                log.info("stop requested (signal %s): stopping the queries", getattr(stop, "signal", None))
                for _n, q in active:
                    q.stop()
                break
            active[0][1].awaitTermination(poll_seconds)
        for n, q in queries:
            recorder.poll(q, n)
            if refuse is not None and (reason := refuse()):
                from pipelines.errors import DataLossError

                raise DataLossError(reason)
            exc = q.exception()
            if exc is not None and not stop.requested.is_set():
                raise RuntimeError(f"streaming query {n} failed: {exc}") from None
    except Exception as exc:
        if not stop.requested.is_set() or isinstance(exc, (RuntimeError, UsageError)):
            raise
        log.warning("Spark went away while stopping (%s); exiting", type(exc).__name__)
    finally:
        for _n, q in queries:
            try:
                if q.isActive:
                    q.stop()
            except Exception:
                if not stop.requested.is_set():
                    raise


def main(conf: Config, available_now: bool = False) -> int:
    """Entry point of ``offsetlake run stream`` and ``spark-submit pipelines/jobs/stream.py``."""
    from pipelines.spark_session import build_spark_from_config

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    settings_from_config(conf)  # validate before starting Spark
    # pandas' FutureWarning from inside pyspark's applyInPandasWithState serializer, once per
    # group and batch in the Python workers (they inherit this environment): noise, not ours.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    from pipelines.warehouse_lock import warehouse_lock

    stopper = _Stopper()
    stopper.install()
    # the lock first: a refused stream starts no JVM (``run`` takes it again, re-entrantly)
    with warehouse_lock(conf.paths.warehouse, "offsetlake stream"):
        spark = build_spark_from_config(conf, app_suffix="stream")
        started = time.time()
        recorder = run(spark, conf, available_now=available_now, stopper=stopper)
    batches = [r for r in recorder.rows if r["query_name"] == REPLAY_QUERY]
    total = sum(r["input_rows"] for r in batches)
    log.info("stream finished: %d micro-batches, %d input rows, %.1fs%s", len(batches), total,
             time.time() - started, " (stopped by signal)" if stopper.requested.is_set() else "")
    return 0
