"""The streaming replay: raw records → decode → per-group state (applyInPandasWithState) → Delta.

Run it either way (same code path):
    offsetlake run stream --conf conf/local.yaml [--available-now]
    spark-submit pipelines/jobs/stream.py --conf conf/local.yaml [--available-now]

Rules:
- Source: the landing directory (Parquet raw-record files; Spark's file source takes them in
  modification-time order, which ``pipelines.raw_files.RawRecordWriter`` makes equal to name =
  log order; ``stream.max_files_per_trigger`` / ``max_bytes_per_trigger`` cap a micro-batch), or
  Kafka (``format("kafka")`` with the connector, else the jar-free ``offsetlake_kafka`` source).
- Decode in the stream with the batch job's vectorised decoder (``pipelines.decode.decode_union``,
  one ``mapInArrow`` pass). Two queries read the source: ``replay`` (offset commits, group
  metadata and unsupported records of a known group → the gold tables) and ``quarantine``
  (quarantined and unsupported records → their tables). Each has its own checkpoint.
- State: one row per group = (snapshot format version, ``serialize_snapshot`` bytes). The state
  schema never changes when the core evolves; ``deserialize_snapshot`` reads older formats.
  Replay is the core's ``replay`` (records sorted by (partition, offset); duplicates and
  overlaps are skipped by the snapshot's last applied position), never a re-implementation.
- Time: ``withWatermark(log_timestamp, stream.watermark_delay_ms)`` and
  ``GroupStateTimeout.EventTimeTimeout`` only (processing-time timeouts never end under
  ``trigger(availableNow)``). Every call replays the new records, then runs the expiry decider at
  ``as_of = watermark``; the timer is set so that it fires once the watermark reaches the core's
  ``next_expiry_ms``. Predicted events carry the computed due time, so the result does not
  depend on when the timer fired. Spark drops records older than the previous batch's
  watermark (the delay must cover the time skew between ``__consumer_offsets`` partitions in
  the input order); such drops are logged from the progress (``numRowsDroppedByWatermark``).
- Equality with the batch job: after ``--available-now`` ends, the gold tables equal the batch
  job's on the same input with ``replay.as_of_ms`` = the stream's final watermark (max record
  timestamp − delay): every group was replayed to its last record and every expiry due at or
  before the watermark was applied; nothing due later was.
- Output of the stateful function: the long format of ``pipelines.gold`` (``gold_table`` code +
  the union of the gold columns, built by ``pipelines.replay_job.gold_rows``), restricted to what
  changed in the call: the group's state row, its changed offsets, its events, and deletions of
  offsets it no longer holds (code ``OFFSETS_DELETE``).
- Sink: ``foreachBatch`` collects the micro-batch output once (Arrow, on the driver: only what
  changed, small) and MERGEs each gold table on its key (``pipelines.tableio``, 4 tables at a
  time). Every gold table is MERGEd, event tables included: the core re-tells an event under the
  same key when it learns more (a predicted expiry confirmed by a tombstone, offset tombstones
  re-told as ``group_deleted``), so the last row per key wins. Every write carries the Delta txn
  (app id ``offsetlake-stream-<query>``, version = batch id): a micro-batch re-run after a crash
  writes nothing twice (MERGEs of identical rows commit nothing, deletes of absent rows delete
  nothing, the quarantine query's appends are skipped by the txn).
- Progress: one log line and one ``stream_progress`` row per micro-batch (rows, rates, state
  rows/memory, watermark, duration). SIGTERM/SIGINT stop the queries cleanly (exit 0).
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
from typing import TYPE_CHECKING, Any

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
    retention_ms: int | None
    rules: str
    num_partitions: int
    tables: tuple[str, ...]
    query_name: str = REPLAY_QUERY
    quarantine_query_name: str = QUARANTINE_QUERY
    extra: dict[str, Any] = field(default_factory=dict)
    coordinator: str = "old"

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
        retention_ms=cfg.replay.retention_ms,
        rules=cfg.replay.rules,
        num_partitions=cfg.offsets_topic.num_partitions,
        tables=tuple(DEFAULT_TABLES),
        coordinator=cfg.replay.coordinator,
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


def replay_input_from_union(union: DataFrame) -> DataFrame:
    """The decode union → the replay input (``pipelines.replay_job.REPLAY_INPUT_DDL`` columns +
    ``log_timestamp`` for the watermark), in ONE projection.

    ``replay_job.replay_input`` unions three projections of the decoded tables; in a stream that
    would run the decoder three times (nothing is cached), so the same columns are projected
    here from the union directly (``tests/pipelines/test_stream_job.py`` proves both agree).
    """
    from pyspark.sql import functions as F

    from pipelines.decode import KIND_GROUP_METADATA, KIND_OFFSET_COMMIT, KIND_UNSUPPORTED
    from pipelines.replay_job import (
        REC_GROUP_METADATA,
        REC_OFFSET_COMMIT,
        REC_UNSUPPORTED,
        REPLAY_INPUT_DDL,
    )

    kind = F.col("kind")
    is_oc = kind == F.lit(KIND_OFFSET_COMMIT)
    is_gm = kind == F.lit(KIND_GROUP_METADATA)
    is_un = kind == F.lit(KIND_UNSUPPORTED)
    member_fields = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout",
                     "session_timeout", "subscription", "assignment")

    def when(cond: Any, value: Any) -> Any:
        return F.when(cond, value)

    def ms(col: str) -> Any:
        return F.unix_millis(F.col(col))

    exprs: dict[str, Any] = {
        "group_id": F.col("group_id"),
        "coordinator_partition": F.col("coordinator_partition"),
        "log_offset": F.col("log_offset"),
        "log_timestamp_ms": ms("log_timestamp"),
        "rec_kind": F.when(is_oc, F.lit(REC_OFFSET_COMMIT))
        .when(is_gm, F.lit(REC_GROUP_METADATA))
        .otherwise(F.lit(REC_UNSUPPORTED)),
        "key_version": F.when(is_un, F.col("record_type")).otherwise(F.col("key_version")),
        "is_tombstone": when(~is_un, F.col("is_tombstone")),
        "value_version": when(~is_un, F.col("value_version")),
        "topic": when(is_oc, F.col("topic")),
        "partition": when(is_oc, F.col("partition")),
        "committed_offset": when(is_oc, F.col("committed_offset")),
        "leader_epoch": when(is_oc, F.col("leader_epoch")),
        "metadata": when(is_oc, F.col("metadata")),
        "commit_timestamp_ms": when(is_oc, ms("commit_timestamp")),
        "expire_timestamp_ms": when(is_oc, ms("expire_timestamp")),
        "protocol_type": when(is_gm, F.col("protocol_type")),
        "generation": when(is_gm, F.col("generation")),
        "protocol": when(is_gm, F.col("protocol")),
        "leader": when(is_gm, F.col("leader")),
        "current_state_timestamp_ms": when(is_gm, ms("current_state_timestamp")),
        "members": when(
            is_gm, F.transform("members", lambda m: F.struct(*[m[f].alias(f) for f in member_fields]))
        ),
        "raw_key": when(is_un, F.col("raw_key")),
        "raw_value": when(is_un, F.col("raw_value")),
    }
    cols = [exprs[name].cast(ddl).alias(name) for name, ddl in REPLAY_INPUT_DDL]
    return (
        union.where((is_oc | is_gm | is_un) & F.col("group_id").isNotNull())
        .select(*cols, F.col("log_timestamp"))
    )


# =============================================================================================
# The stateful function (runs in Python workers; pure apart from GroupState)
# =============================================================================================
def _input_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    from pipelines.replay_job import REPLAY_INPUT_DDL
    from schemas.base import parse_type, to_arrow_type

    return pa.schema([pa.field(n, to_arrow_type(parse_type(t))) for n, t in REPLAY_INPUT_DDL])


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

    retention_ms: int | None
    rules: str
    tables: tuple[str, ...]
    num_partitions: int
    coordinator: str = "old"

    def replay_call(
        self,
        group_id: str,
        snapshot_blob: bytes | None,
        records_table: pa.Table | None,
        watermark_ms: int,
    ) -> tuple[bytes, pa.Table, int | None]:
        """The pure part: (state bytes, input rows, watermark) → (new state bytes, output rows,
        next expiry ms). ``records_table`` is None when the timer fired."""
        import dataclasses

        import pyarrow as pa
        import pyarrow.compute as pc

        from coordinator_core.expiry import next_expiry_ms
        from coordinator_core.replay import deserialize_snapshot, new_snapshot, replay, serialize_snapshot
        from pipelines.gold import GOLD_SPECS, GOLD_UNION_SCHEMA, rows_to_arrow, to_union
        from pipelines.replay_job import event_kinds_for, gold_rows, records_from_arrow

        before = deserialize_snapshot(snapshot_blob) if snapshot_blob is not None else new_snapshot(group_id)
        records = []
        if records_table is not None and records_table.num_rows:
            order = pc.sort_indices(
                records_table, [("coordinator_partition", "ascending"), ("log_offset", "ascending")]
            )
            records = records_from_arrow(records_table.take(order))
        as_of = watermark_ms if (self.retention_ms is not None and watermark_ms > 0) else None
        result = replay(
            before,
            records,
            retention_ms=self.retention_ms,
            rules=self.rules,
            as_of_ms=as_of,
            event_kinds=event_kinds_for(self.tables),
            coordinator=self.coordinator,
        )
        after = result.snapshot
        # Only what changed: the offsets this call replaced or added, and deletions.
        changed = {tp: e for tp, e in after.offsets.items() if before.offsets.get(tp) != e}
        removed = [tp for tp in before.offsets if tp not in after.offsets]
        view = dataclasses.replace(result, snapshot=dataclasses.replace(after, offsets=changed))
        by_table = gold_rows(
            view, tables=self.tables, retention_ms=self.retention_ms, rules=self.rules,
            num_partitions=self.num_partitions,
        )
        if "group_state" in by_table:  # the state row must describe the whole snapshot
            by_table["group_state"] = [
                after.to_state_row(retention_ms=self.retention_ms, rules=self.rules,
                                   num_partitions=self.num_partitions)
            ]
        parts = []
        for name, rows in by_table.items():
            if not rows:
                continue
            spec = GOLD_SPECS[name]
            rows = _dedupe_last(rows, [c for c in spec.primary_key if c in rows[0]])
            parts.append(to_union(name, rows_to_arrow(spec, rows)))
        if removed and "offsets_current" in self.tables:
            n = len(removed)
            cols = {
                "gold_table": pa.array([OFFSETS_DELETE] * n, pa.int8()),
                "group_id": pa.array([group_id] * n, pa.string()),
                "topic": pa.array([t for t, _ in removed], pa.string()),
                "partition": pa.array([p for _, p in removed], pa.int32()),
            }
            parts.append(
                pa.Table.from_arrays(
                    [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in GOLD_UNION_SCHEMA],
                    schema=GOLD_UNION_SCHEMA,
                )
            )
        out = pa.concat_tables(parts) if parts else GOLD_UNION_SCHEMA.empty_table()
        nxt = next_expiry_ms(after, self.retention_ms, self.rules)
        return serialize_snapshot(after), out, nxt

    def __call__(
        self, key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd
        import pyarrow as pa

        from coordinator_core.replay import SNAPSHOT_FORMAT_VERSION

        (group_id,) = key
        blob: bytes | None = None
        if state.exists:
            _fmt, raw = state.get
            blob = bytes(raw)
        watermark = int(state.getCurrentWatermarkMs())
        table: pa.Table | None = None
        if not state.hasTimedOut:
            frames = [p for p in pdfs if len(p)]
            if frames:
                pdf = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
                schema = _input_arrow_schema()
                table = pa.Table.from_pandas(pdf[schema.names], schema=schema, preserve_index=False)
        new_blob, out, nxt = self.replay_call(group_id, blob, table, watermark)
        state.update((SNAPSHOT_FORMAT_VERSION, new_blob))
        if nxt is not None:
            # Spark fires when watermark > timeout; the core expires at due <= as_of: nxt - 1.
            state.setTimeoutTimestamp(max(nxt - 1, watermark, 1))
        if out.num_rows:
            yield out.to_pandas()


def stateful_replay(replay_input: DataFrame, settings: StreamSettings) -> DataFrame:
    """``withWatermark`` + ``groupBy(group_id).applyInPandasWithState`` → gold long format."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from pipelines.replay_job import gold_union_spark_schema

    fn = GroupReplayer(
        settings.retention_ms, settings.rules, settings.tables, settings.num_partitions, settings.coordinator
    )
    return (
        replay_input.withWatermark("log_timestamp", f"{settings.watermark_delay_ms} milliseconds")
        .groupBy("group_id")
        .applyInPandasWithState(
            fn, gold_union_spark_schema(), STATE_DDL, "update", GroupStateTimeout.EventTimeTimeout
        )
    )


# =============================================================================================
# Sinks (foreachBatch)
# =============================================================================================
def delete_keys(io: TableIO, name: str, keys: pa.Table, key_cols: Sequence[str], *,
                app_id: str, version: int) -> int:
    """Delete the rows of ``name`` whose key is in ``keys_df`` (a MERGE with only a delete
    clause; deleting absent rows deletes nothing, so a re-run is harmless). Returns rows deleted
    when known."""
    import pyarrow as pa

    from schemas import get as get_spec

    spec = get_spec(name)
    io.ensure(name)
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key_cols)
    target = spec.arrow_schema()
    source = keys.select(list(key_cols)).cast(pa.schema([target.field(k) for k in key_cols]))
    if io.engine == "spark":
        from delta.tables import DeltaTable as SparkDeltaTable

        assert io.spark is not None
        SparkDeltaTable.forPath(io.spark, io.path(name)).alias("t").merge(
            io.spark.createDataFrame(source).alias("s"), on).whenMatchedDelete().execute()
        return -1
    from deltalake import CommitProperties, DeltaTable, Transaction

    dt = DeltaTable(io.path(name))
    metrics = (
        dt.merge(source, predicate=on, source_alias="s", target_alias="t",
                 commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]))
        .when_matched_delete()
        .execute()
    )
    return int(metrics.get("num_target_rows_deleted", 0))


class GoldBatchWriter:
    """``foreachBatch``: split the long format into the gold tables, idempotently per batch id.

    The micro-batch output (changed rows only: small) is collected once as Arrow, split on the
    driver and MERGEd table by table (``pipelines.tableio``) with the txn (app id, batch id).
    """

    def __init__(self, io: TableIO, settings: StreamSettings) -> None:
        self.io = io
        self.settings = settings
        self.app_id = settings.app_id
        self.last_batch_rows: dict[str, int] = {}
        self.last_timings: dict[str, float] = {}
        self.write_threads = 4

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        import pyarrow.compute as pc

        from pipelines.gold import GOLD_SPECS, UNION_CODES

        spark = self.io.spark
        assert spark is not None
        t0 = time.perf_counter()
        arrow = batch_df.toArrow()  # runs the decode + stateful replay: one Spark job
        timings: dict[str, float] = {"replay": time.perf_counter() - t0}
        codes = arrow.column("gold_table")
        written: dict[str, int] = {}

        def write(name: str, sub: pa.Table) -> float:
            t1 = time.perf_counter()
            spec = GOLD_SPECS[name]
            part = spark.createDataFrame(sub.select(list(spec.column_names)), spec.spark_schema())
            if name in APPEND_TABLES:
                self.io.append(name, part, txn_app_id=self.app_id, txn_version=batch_id)
            else:
                self.io.merge(name, part, txn_app_id=self.app_id, txn_version=batch_id)
            return time.perf_counter() - t1

        work = []
        for name in self.settings.tables:
            sub = arrow.filter(pc.equal(codes, UNION_CODES[name]))
            if sub.num_rows:
                work.append((name, sub))
                written[name] = sub.num_rows
        # Different tables, independent commits: write them side by side (delta-rs releases the GIL).
        with ThreadPoolExecutor(max_workers=self.write_threads) as pool:
            for name, seconds in zip([n for n, _ in work], pool.map(lambda w: write(*w), work)):
                timings[name] = seconds
        deletes = arrow.filter(pc.equal(codes, OFFSETS_DELETE))
        if deletes.num_rows:
            t1 = time.perf_counter()
            key = GOLD_SPECS["offsets_current"].primary_key
            delete_keys(self.io, "offsets_current", deletes.select(list(key)), key,
                        app_id=self.app_id, version=batch_id)
            written["offsets_current(deleted)"] = deletes.num_rows
            timings["offsets_current(deleted)"] = time.perf_counter() - t1
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


def progress_row(progress: dict[str, Any], query_name: str) -> dict[str, Any]:
    """A ``stream_progress`` row from a ``StreamingQueryProgress`` (its JSON as a dict)."""
    ops = progress.get("stateOperators") or []
    event_time = progress.get("eventTime") or {}
    wm = _parse_time(event_time.get("watermark"))
    if wm is not None and wm.timestamp() <= 0:
        wm = None
    return {
        "query_name": query_name,
        "batch_id": int(progress["batchId"]),
        "timestamp": _parse_time(progress.get("timestamp")),
        "input_rows": int(progress.get("numInputRows") or 0),
        "input_rows_per_second": float(progress.get("inputRowsPerSecond") or 0.0),
        "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0),
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


class ProgressRecorder:
    """Polls each query's ``recentProgress``; logs one line per new micro-batch and MERGEs the
    rows into ``stream_progress`` (key (query_name, batch_id); txn version = newest batch id)."""

    def __init__(self, io: TableIO | None, *, echo: Callable[[str], None] | None = None) -> None:
        self.io = io
        self.echo = echo
        self.seen: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []

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
            msg = progress_line(row, dropped)
            (log.warning if dropped else log.info)(msg)
            if self.echo is not None:
                self.echo(msg)
            new.append(row)
            last = int(data["batchId"])
        self.seen[name] = last
        if new:
            self.rows.extend(new)
            self._write(name, new)

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
    from pipelines.decode import decode_union

    union = decode_union(read_raw_stream(spark, cfg, settings))
    gold = stateful_replay(replay_input_from_union(union), settings)
    writer = (
        gold.writeStream.queryName(settings.query_name)
        .outputMode("update")
        .option("checkpointLocation", settings.replay_checkpoint)
        .foreachBatch(GoldBatchWriter(io, settings))
    )
    return _trigger(writer, settings, available_now).start()


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
    from pipelines.tableio import TableIO

    settings = settings_from_config(cfg)
    io = TableIO(cfg, spark)
    for name in (*settings.tables, "quarantine", "unsupported_records", "stream_progress"):
        io.ensure(name)
    recorder = ProgressRecorder(io, echo=echo)
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
        _watch(queries, recorder, stop, poll_seconds)
    return recorder


def _watch(queries: list[tuple[str, StreamingQuery]], recorder: ProgressRecorder, stop: Any,
           poll_seconds: float) -> None:
    """Poll progress until every query ended or a stop is requested; re-raise a query failure.

    A signal sent to the whole process group also reaches Spark's JVM, which then shuts down on
    its own: Py4J errors after a stop request are an orderly exit, not a failure.
    """
    try:
        while True:
            active = [(n, q) for n, q in queries if q.isActive]
            for n, q in queries:
                recorder.poll(q, n)
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
            exc = q.exception()
            if exc is not None and not stop.requested.is_set():
                raise RuntimeError(f"streaming query {n} failed: {exc}") from None
    except Exception as exc:
        if not stop.requested.is_set() or isinstance(exc, RuntimeError):
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
    stopper = _Stopper()
    stopper.install()
    spark = build_spark_from_config(conf, app_suffix="stream")
    started = time.time()
    recorder = run(spark, conf, available_now=available_now, stopper=stopper)
    batches = [r for r in recorder.rows if r["query_name"] == REPLAY_QUERY]
    total = sum(r["input_rows"] for r in batches)
    log.info("stream finished: %d micro-batches, %d input rows, %.1fs%s", len(batches), total,
             time.time() - started, " (stopped by signal)" if stopper.requested.is_set() else "")
    return 0
