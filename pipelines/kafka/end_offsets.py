"""The end-offsets feed: sample log-end offsets into the ``partition_end_offsets`` Delta table.

Rules:
- Offsets come from the cluster (ListOffsets via ``get_watermark_offsets``): log start and high
  watermark per topic-partition. Which topic-partitions: ``--topics``, or every (group, topic,
  partition) in ``offsets_current`` (then the group's committed offset and lag are added).
- "Where cheap": the timestamp of the record at each distinct committed offset is fetched with
  ONE consumer assigned to all those positions, reading one record each, bounded by a timeout;
  whatever did not arrive stays null. A caught-up group (committed == end) has no such record.
- Samples are appended from the driver (``pipelines.tableio.append_arrow_at``, delta-rs): no
  Spark, no jars; the schema is
  ``schemas.end_offsets.PARTITION_END_OFFSETS``. Time is read once per sample (``sampled_at``).
- A topic-partition asked for that the cluster does not have (deleted, recreated smaller) gets
  no row, and is REPORTED (``missing_line``: one bounded line on the sampler's log each time,
  totals and the first topics by name), never skipped
  silently: its groups' lag is unknown, not zero.
- The scheduled paths sample when ``kafka.bootstrap_servers`` is configured
  (``scheduled_sample``): the batch job once after its replay (whatever starts it: the CLI, the
  Airflow DAG's one submit), the streaming job every ``STREAM_INTERVAL_S`` while it runs and
  once when an available-now run ends. An unreachable cluster is reported, never fatal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

from pipelines.errors import UsageError
from pipelines.kafka.client import (
    KafkaSettings,
    KafkaUnavailableError,
    require_confluent_kafka,
    settings_from_config,
    watermarks,
)
from pipelines.tableio import append_arrow_at, column_names_at, is_table_at, read_arrow_at
from schemas.end_offsets import PARTITION_END_OFFSETS

Committed = tuple[str, str, int, int]  # (group_id, topic, partition, committed offset)


def read_committed(table_path: str) -> list[Committed]:
    """(group_id, topic, partition, offset) rows of an ``offsets_current`` Delta table."""

    if not is_table_at(table_path):
        raise UsageError(f"{table_path}: no Delta table there (run the batch job first)")
    names = set(column_names_at(table_path))
    need = {"group_id", "topic", "partition", "offset"}
    if not need <= names:
        raise UsageError(f"{table_path}: expected columns {sorted(need)}, found {sorted(names)}")
    table = read_arrow_at(table_path, columns=["group_id", "topic", "partition", "offset"])
    rows = table.to_pylist()
    return [
        (r["group_id"], r["topic"], int(r["partition"]), int(r["offset"]))
        for r in rows
        if r["offset"] is not None and r["topic"] is not None
    ]


def _partitions_of(consumer: Any, topics: Iterable[str], timeout_s: float, bootstrap: str) -> dict[str, list[int]]:
    ck = require_confluent_kafka()
    out: dict[str, list[int]] = {}
    try:
        md = consumer.list_topics(timeout=timeout_s)
    except ck.KafkaException as exc:
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {bootstrap} within {timeout_s:g}s ({exc.args[0].str()})"
        ) from None
    for t in topics:
        meta = md.topics.get(t)
        out[t] = sorted(meta.partitions) if meta is not None and meta.error is None else []
    return out


def record_timestamps(
    consumer: Any, positions: Sequence[tuple[str, int, int]], timeout_s: float
) -> dict[tuple[str, int, int], int]:
    """Timestamp (ms) of the record at each (topic, partition, offset), as far as ``timeout_s`` allows."""
    ck = require_confluent_kafka()
    wanted: dict[tuple[str, int], set[int]] = {}
    for t, p, o in positions:
        wanted.setdefault((t, p), set()).add(o)
    out: dict[tuple[str, int, int], int] = {}
    if not wanted:
        return out
    # Several groups may sit at different offsets of one partition: one pass per distinct offset
    # rank keeps the assignment simple (usually one pass).
    rounds = max(len(v) for v in wanted.values())
    ordered = {tp: sorted(v) for tp, v in wanted.items()}
    deadline = time.monotonic() + timeout_s
    for i in range(rounds):
        todo = {tp: offs[i] for tp, offs in ordered.items() if i < len(offs)}
        consumer.assign([ck.TopicPartition(t, p, o) for (t, p), o in todo.items()])
        pending = set(todo)
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=len(pending) * 4, timeout=0.2):
                tp = (m.topic(), m.partition())
                if tp not in pending:
                    continue
                if m.error() is not None:
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        pending.discard(tp)
                    continue
                ttype, ts = m.timestamp()
                if ttype:
                    # the first record at or after the committed offset (compaction may skip it)
                    out[(tp[0], tp[1], todo[tp])] = ts
                pending.discard(tp)
        consumer.unassign()
    return out


def sample_end_offsets(
    settings: KafkaSettings,
    *,
    topics: Sequence[str] | None = None,
    committed: Sequence[Committed] | None = None,
    timeout_s: float = 15.0,
    fetch_timestamps: bool = True,
    now_ms: int | None = None,
    missing: list[tuple[str, int, str | None]] | None = None,
) -> pa.Table:
    """One sample as an Arrow table in the ``partition_end_offsets`` schema.

    Args:
        settings: the cluster.
        topics: topics to sample at partition level (group columns null).
        committed: (group, topic, partition, offset) rows; one output row each.
        timeout_s: metadata/ListOffsets timeout; also bounds the timestamp fetch.
        fetch_timestamps: fetch the timestamp of the record at each committed offset.
        now_ms: the sample time (default: the wall clock now).
        missing: when given, receives (topic, partition, group or None) of every asked
            topic-partition the cluster does not have (a deleted topic, fewer partitions): no row
            can say their lag, and the caller reports them instead of skipping them silently.
    """
    ck = require_confluent_kafka()
    sampled_at = int(time.time() * 1000) if now_ms is None else now_ms
    # the log end as kafka-consumer-groups reports it (the high watermark, not the stable offset)
    consumer = ck.Consumer(settings.consumer_conf(**{"isolation.level": "read_uncommitted"}))
    try:
        all_topics = sorted(set(topics or []) | {c[1] for c in committed or []})
        parts = _partitions_of(consumer, all_topics, timeout_s, settings.bootstrap_servers)
        marks: dict[tuple[str, int], tuple[int, int]] = {}
        for t, ps in parts.items():
            for p, lohi in watermarks(consumer, t, ps, timeout_s).items():
                marks[(t, p)] = lohi
        ts: dict[tuple[str, int, int], int] = {}
        if committed and fetch_timestamps:
            positions = sorted({(t, p, o) for _, t, p, o in committed if (t, p) in marks and o < marks[(t, p)][1]})
            ts = record_timestamps(consumer, positions, min(timeout_s, 10.0))
    finally:
        consumer.close()
    rows: list[dict[str, Any]] = []
    for t in sorted(set(topics or [])):
        if not parts.get(t) and missing is not None:
            missing.append((t, -1, None))
        for p in parts.get(t, []):
            lo, hi = marks[(t, p)]
            rows.append(_row(sampled_at, t, p, lo, hi, None, None, None, settings.bootstrap_servers))
    for g, t, p, o in sorted(committed or []):
        if (t, p) not in marks:
            if missing is not None:  # the topic or partition no longer exists: reported by the caller
                missing.append((t, p, g))
            continue
        lo, hi = marks[(t, p)]
        rows.append(_row(sampled_at, t, p, lo, hi, g, o, ts.get((t, p, o)), settings.bootstrap_servers))
    schema = PARTITION_END_OFFSETS.arrow_schema()
    if not rows:
        return schema.empty_table()
    cols = {name: [r[name] for r in rows] for name in schema.names}
    return pa.Table.from_pydict(
        {
            **cols,
            "sampled_at": pa.array([v * 1000 for v in cols["sampled_at"]], pa.int64()).cast(
                schema.field("sampled_at").type
            ),
            "committed_record_timestamp": pa.array(
                [None if v is None else v * 1000 for v in cols["committed_record_timestamp"]], pa.int64()
            ).cast(schema.field("committed_record_timestamp").type),
        },
        schema=schema,
    )


def _row(
    sampled_at: int,
    topic: str,
    partition: int,
    lo: int,
    hi: int,
    group: str | None,
    committed: int | None,
    rec_ts: int | None,
    bootstrap: str,
) -> dict[str, Any]:
    return {
        "sampled_at": sampled_at,
        "topic": topic,
        "partition": partition,
        "log_start_offset": lo,
        "log_end_offset": hi,
        "group_id": group,
        "committed_offset": committed,
        "lag_offsets": None if committed is None else max(0, hi - committed),
        "committed_record_timestamp": rec_ts,
        "bootstrap_servers": bootstrap,
    }


#: topics ``missing_line`` names one by one; the rest are counted (a compacted log of a long-lived
#: cluster may hold offsets of thousands of deleted topics' partitions)
MISSING_TOPICS_NAMED = 10
#: groups named per topic in ``missing_line``
MISSING_GROUPS_NAMED = 3


def _ranges(parts: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``0-2,5,7-8``."""
    runs: list[list[int]] = []
    for p in sorted(parts):
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def missing_line(missing: Sequence[tuple[str, int, str | None]]) -> str:
    """One bounded line naming the topic-partitions the cluster does not have (and groups that
    committed offsets on them): their lag cannot be sampled. Totals always; the first
    ``MISSING_TOPICS_NAMED`` topics by name with their partitions as ranges."""
    by_topic: dict[str, tuple[set[int], set[str]]] = {}
    for t, p, g in missing:
        parts, groups = by_topic.setdefault(t, (set(), set()))
        if p >= 0:
            parts.add(p)
        if g is not None:
            groups.add(g)
    n_parts = sum(len(parts) for parts, _ in by_topic.values())
    n_groups = len(set().union(*(groups for _, groups in by_topic.values())))
    described = []
    for t, (parts, groups) in sorted(by_topic.items())[:MISSING_TOPICS_NAMED]:
        what = f"{t}[{_ranges(sorted(parts))}]" if parts else t
        if groups:
            named = sorted(groups)[:MISSING_GROUPS_NAMED]
            more = len(groups) - len(named)
            what += f" (groups {', '.join(named)}{f' and {more} more' if more else ''})"
        described.append(what)
    rest = len(by_topic) - len(described)
    listed = "; ".join(described) + (f"; and {rest} more topics" if rest else "")
    return (
        f"not on the cluster, no lag sampled for {n_parts} partitions of {len(by_topic)} topics "
        f"({n_groups} groups): {listed} (topic deleted, recreated or shrunk?)"
    )


def append_samples(table_path: str, table: pa.Table) -> None:
    """Append a sample to the Delta table (created on first use) with delta-rs."""

    append_arrow_at(table_path, table)


def run_sampler(
    settings: KafkaSettings,
    table_path: str,
    *,
    topics: Sequence[str] | None = None,
    groups_table: str | None = None,
    interval_s: float = 0.0,
    iterations: int = 1,
    timeout_s: float = 15.0,
    log: Callable[[str], None] | None = None,
) -> int:
    """Sample ``iterations`` times (0 = until interrupted), ``interval_s`` apart; returns rows written."""
    if not topics and not groups_table:
        raise UsageError("nothing to sample: pass --topics T1,T2 or --groups-from-table offsets_current")
    note = log or (lambda msg: None)
    total = 0
    i = 0
    try:
        while iterations <= 0 or i < iterations:
            started = time.monotonic()
            committed = read_committed(groups_table) if groups_table else None
            missing: list[tuple[str, int, str | None]] = []
            sample = sample_end_offsets(
                settings, topics=topics, committed=committed, timeout_s=timeout_s, missing=missing
            )
            if missing:
                note(missing_line(missing))
            if sample.num_rows:
                append_samples(table_path, sample)
            total += sample.num_rows
            i += 1
            note(f"sample {i}: {sample.num_rows} rows")
            if iterations > 0 and i >= iterations:
                break
            time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    except KeyboardInterrupt:
        note("interrupted")
    return total


#: the streaming job samples at most this often while it runs (and once when an available-now run ends)
STREAM_INTERVAL_S = 60.0


def scheduled_sample(cfg: Any, note: Callable[[str], None] | None = None) -> str | None:
    """The scheduled paths' sample (the batch job after its replay, the streaming job on an
    interval): every committed (group, topic, partition) of the warehouse's ``offsets_current``,
    when ``kafka.bootstrap_servers`` is configured (``None`` otherwise: nothing to do).

    Returns a one-line detail. A cluster that cannot be reached, or a warehouse without
    ``offsets_current`` yet, is reported in that line and through ``note``, never fatal: the
    tables are already written, and lag stays what the last sample said.
    """

    if not cfg.kafka.bootstrap_servers:
        return None
    say = note or (lambda msg: None)
    settings = settings_from_config(cfg)
    try:
        rows = run_sampler(
            settings,
            cfg.table_path("partition_end_offsets"),
            groups_table=cfg.table_path("offsets_current"),
            timeout_s=10.0,
            log=say,
        )
    except UsageError as exc:  # KafkaUnavailableError included
        say(f"end offsets not sampled: {exc}")
        return f"not sampled: {exc}"
    return f"{rows} rows sampled from {settings.bootstrap_servers} into partition_end_offsets"


class IntervalSampler:
    """``scheduled_sample`` at most every ``interval_s`` (the streaming job's driver loop)."""

    def __init__(self, cfg: Any, interval_s: float = STREAM_INTERVAL_S, note: Callable[[str], None] | None = None):
        self.cfg = cfg
        self.interval_s = interval_s
        self.note = note
        self.last: float | None = None
        self.details: list[str] = []

    @property
    def enabled(self) -> bool:
        return bool(self.cfg.kafka.bootstrap_servers)

    def tick(self, *, force: bool = False) -> None:
        """Sample if enabled and the interval has passed since the last sample (or ``force``)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and self.last is not None and now - self.last < self.interval_s:
            return
        self.last = now
        detail = scheduled_sample(self.cfg, self.note)
        if detail is not None:
            self.details.append(detail)
