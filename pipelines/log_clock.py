"""The one owner of "now": the log's clock (the gold tables' ``as_of``, robust to a record with
an absurd timestamp), the evidence horizon both wings judge forecasts against, and the "now" every
status and countdown is evaluated at (views, ``inspect``, ``metrics``/``serve``, the report).

Rules of "now" (ARCHITECTURE.md, "where each rule lives"):
- The gold tables state the present *as of* the log clock (``replay.as_of_ms`` when set): the
  batch's ``as_of``; the stream's is its watermark plus ``stream.watermark_delay_ms``
  (``stream_as_of``: the newest record time of the batches before), so after
  ``--available-now`` both state the same present for the same input.
- Forecasts are judged against the log only up to ``evidence_horizon``: the newest record minus
  the stream's watermark delay (the stream cannot know a partition's last minute is in; the batch
  takes the same horizon so both say the same), never past ``as_of``.
- Statuses and countdowns (Burrow's STOP, "expires in", at-risk) are evaluated at ``now_sql``,
  chosen by ``replay.now``: ``evidence`` (default) the newest evidence — the newest record in
  ``group_state`` or end-offset sample in ``partition_end_offsets``, whichever is later: a new
  sample moves it without a new batch run; ``log`` the newest record only; ``wall`` the wall
  clock (a live deployment). ``replay.as_of_ms`` fixes it. Every output prints the now it used.

Rules of the log clock:
- The coordinator stamps its records (CREATE_TIME) with its own clock as it appends them, so
  within one ``__consumer_offsets`` partition timestamps follow offsets, give or take clock
  steps. A record whose timestamp is more than ``tolerance`` ahead of every later (non-outlier)
  record of its partition is an *outlier*: the clock that wrote it was wrong, not the records
  after it. The last record of a partition has no later record; it is an outlier when it is
  more than ``tolerance`` ahead of the wall clock (a log cannot hold the future).
- A record more than ``tolerance`` *behind* the newest earlier record that is not itself a
  jump ahead (a clock reset to 0, a negative time) is not an outlier — it cannot move "now" forward — but it is not used as the
  later reference of the records before it either: one record dated 1970 at the end of a
  partition must not make the partition's real records look ahead of their time.
- "Now" is the newest timestamp of the records that are not outliers. One record dated 9999
  therefore cannot move it; the outliers are reported (position and timestamp) so the run says
  what it ignored. Nothing is dropped: the records themselves are replayed as they are.
- Cost: on clean data none of its own: ``clock_from_stats`` decides from the per-partition
  aggregate the batch job computes anyway (``pipelines.inputs.log_shape.partition_stats``). Otherwise
  one column-pruned scan. Each task keeps only its *staircase* per partition — the rows
  whose timestamp is at least every later row's of the same partition in the task (in ordered
  data: the last row) — because a row with a later, newer row in its own task can be neither an
  outlier nor the newest; rows more than ``tolerance`` ahead of their predecessor are kept too
  (an outlier behind a later outlier is then still reported). The driver merges the rows by
  offset and decides, walking from the end of each partition backwards, against the newest
  later non-outlier. A row hidden behind an outlier in its task can make "now" early by at
  most ``tolerance``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas.shapes import CLOCK_STAIRS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Outlier:
    """A record ignored by the log clock."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class LogClock:
    """The robust newest timestamp (ms; ``None`` for an empty log) and what it ignored."""

    now_ms: int | None
    newest_ms: int | None  # the plain maximum, outliers included
    outliers: tuple[Outlier, ...]

    def describe(self, limit: int = 3) -> str:
        from datetime import UTC, datetime

        def at(ms: int) -> str:
            try:
                return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
            except (OverflowError, OSError, ValueError):
                return f"{ms} ms"

        shown = ", ".join(f"{o.topic}/{o.partition}@{o.offset} at {at(o.timestamp_ms)}" for o in self.outliers[:limit])
        more = f" and {len(self.outliers) - limit} more" if len(self.outliers) > limit else ""
        return (
            f"{len(self.outliers)} record(s) timestamped far ahead of their log partition ignored for "
            f"the log clock ({shown}{more}); as_of_ms={self.now_ms}"
        )


def staircase(table: pa.Table, tolerance_ms: int | None = None) -> pa.RecordBatch:
    """Per log partition of ``table`` (topic, partition, offset, timestamp[us] or ts ms): the
    rows whose timestamp is >= every later row's (by offset) and, with ``tolerance_ms``, the
    rows more than that ahead of the row before them (so an outlier hidden behind a later one
    is still reported). Each with its *level* (``prev_ts``): the newest earlier row of the task
    that is not such a jump — what "far behind" is measured against. Rows with a null position or
    timestamp are skipped."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if "ts" in table.column_names:
        ts_col = table.column("ts").cast(pa.int64())
    else:
        ts_col = pc.divide(table.column("timestamp").cast(pa.timestamp("us")).cast(pa.int64()), 1000)
    keep = pc.and_(
        pc.and_(pc.is_valid(table.column("partition")), pc.is_valid(table.column("offset"))),
        pc.and_(pc.is_valid(ts_col), pc.is_valid(table.column("topic"))),
    )
    topic = pc.filter(table.column("topic"), keep).combine_chunks().dictionary_encode()
    codes = topic.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    part = pc.filter(table.column("partition"), keep).to_numpy().astype(np.int64)
    off = pc.filter(table.column("offset"), keep).to_numpy().astype(np.int64)
    ts = pc.filter(ts_col, keep).to_numpy().astype(np.int64)
    out: dict[str, list[Any]] = {"topic": [], "partition": [], "offset": [], "ts": [], "prev_ts": [], "jump": []}
    if len(off):
        seg = codes * (1 << 32) + (part & 0xFFFFFFFF)
        order = np.lexsort((off, seg))
        seg, off, ts, codes, part = seg[order], off[order], ts[order], codes[order], part[order]
        starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        ends = np.r_[starts[1:], len(seg)]
        names = topic.dictionary.to_pylist()
        for s, e in zip(starts, ends, strict=True):
            rev = ts[s:e][::-1]
            later = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(rev)[:-1]]
            keep = rev >= later
            fwd = ts[s:e]
            # a jump: more than the tolerance ahead of the row before (a candidate outlier)
            tol = tolerance_ms if tolerance_ms is not None else np.iinfo(np.int64).max // 4
            jump = np.r_[False, fwd[1:] > fwd[:-1] + tol]
            keep = keep | jump[::-1]
            # the level before each row: the newest earlier row that is not a jump
            lowest = np.iinfo(np.int64).min
            level = np.r_[lowest, np.maximum.accumulate(np.where(jump, lowest, fwd))[:-1]]
            idx = np.flatnonzero(keep)[::-1]
            rows = (e - 1) - idx  # back to forward positions, in offset order
            out["topic"].extend([names[codes[s]]] * len(rows))
            out["partition"].extend(part[rows].tolist())
            out["offset"].extend(off[rows].tolist())
            out["ts"].extend(ts[rows].tolist())
            out["prev_ts"].extend(None if level[r - s] == lowest else int(level[r - s]) for r in rows.tolist())
            out["jump"].extend(bool(jump[r - s]) for r in rows.tolist())
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(out["topic"], pa.string()),
            "partition": pa.array(out["partition"], pa.int32()),
            "offset": pa.array(out["offset"], pa.int64()),
            "ts": pa.array(out["ts"], pa.int64()),
            "prev_ts": pa.array(out["prev_ts"], pa.int64()),
            "jump": pa.array(out["jump"], pa.bool_()),
        }
    )


def _task_staircase(batches: Iterator[pa.RecordBatch], tolerance_ms: int) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: this task's staircase rows."""
    import pyarrow as pa

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if tables:
        yield staircase(pa.concat_tables(tables), tolerance_ms)


def decide(
    rows: Iterable[tuple[str, int, int, int, int | None, bool]], tolerance_ms: int, wall_ms: int | None = None
) -> LogClock:
    """The clock from staircase rows (topic, partition, offset, ts ms, task-local level ms or
    None, jump) of every task."""
    wall = int(time.time() * 1000) if wall_ms is None else wall_ms
    by_part: dict[tuple[str, int], list[tuple[int, int, int | None, bool]]] = {}
    newest: int | None = None
    for topic, part, off, ts, prev, jump in rows:
        by_part.setdefault((topic, part), []).append((off, ts, prev, bool(jump)))
        newest = ts if newest is None else max(newest, ts)
    now: int | None = None
    outliers: list[Outlier] = []
    for (topic, part), raw_items in by_part.items():
        # by position (a position held by two copies, as the stream's landing files may hold
        # before their plan skips one, gives two rows: same order, no comparison of a None level)
        raw_items.sort(key=lambda item: (item[0], item[1]))
        # the level before each row across tasks: its task's, and the earlier rows of other
        # tasks (a task's first row of a partition has no predecessor in the task)
        items: list[tuple[int, int, int | None]] = []
        running: int | None = None
        for off, ts, prev, jump in raw_items:
            levels = [v for v in (prev, running) if v is not None]
            items.append((off, ts, max(levels) if levels else None))
            if not jump:
                running = ts if running is None else max(running, ts)
        later: int | None = None  # newest later non-outlier (not far behind) of this partition
        for off, ts, prev in reversed(items):
            bound = (later if later is not None else wall) + tolerance_ms
            if ts > bound:
                outliers.append(Outlier(topic, part, off, ts))
                continue
            now = ts if now is None else max(now, ts)
            if prev is not None and ts < prev - tolerance_ms:
                continue  # far behind its predecessor: not a reference for the records before it
            later = ts if later is None else max(later, ts)
    outliers.sort(key=lambda o: (o.topic, o.partition, o.offset))
    return LogClock(now, newest, tuple(outliers))


def clock_from_stats(stats: Iterable[dict[str, Any]], tolerance_ms: int, wall_ms: int | None = None) -> LogClock | None:
    """The clock from per-partition figures (``pipelines.inputs.log_shape.partition_stats``) when they
    prove there is no outlier, else None (run ``log_clock``). Exact: when a partition's newest
    timestamp is within ``tolerance`` of its last record's (a later record, or that record itself)
    and the last record is not ahead of the wall clock, no record of it can be an outlier (none is
    more than ``tolerance`` ahead of every later record), and "now" is the plain maximum."""
    wall = int(time.time() * 1000) if wall_ms is None else wall_ms
    now: int | None = None
    for r in stats:
        newest, last = int(r["newest_ms"]), int(r["last_record_ms"])
        if last > wall + tolerance_ms or newest > last + tolerance_ms:
            return None
        now = newest if now is None else max(now, newest)
    return LogClock(now, now, ())


def log_clock(raw: DataFrame, tolerance_ms: int, wall_ms: int | None = None) -> LogClock:
    """The robust clock of a raw-records DataFrame (one column-pruned Spark pass)."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _task_staircase(batches, tolerance_ms)

    rows = raw.select("topic", "partition", "offset", "timestamp").mapInArrow(fn, CLOCK_STAIRS.ddl()).collect()
    return decide(
        ((r["topic"], r["partition"], r["offset"], r["ts"], r["prev_ts"], r["jump"]) for r in rows),
        tolerance_ms,
        wall_ms,
    )


def records_clock(records: Iterable[Any], tolerance_ms: int, wall_ms: int | None = None) -> LogClock:
    """The same clock over ``RawRecord``-like objects (pure Python: the ``replay`` command)."""
    import pyarrow as pa

    recs = list(records)
    table = pa.table(
        {
            "topic": pa.array([r.topic for r in recs], pa.string()),
            "partition": pa.array([r.partition for r in recs], pa.int32()),
            "offset": pa.array([r.offset for r in recs], pa.int64()),
            "ts": pa.array([r.timestamp_ms for r in recs], pa.int64()),
        }
    )
    st = staircase(table, tolerance_ms).to_pydict()
    return decide(
        zip(st["topic"], st["partition"], st["offset"], st["ts"], st["prev_ts"], st["jump"], strict=True),
        tolerance_ms,
        wall_ms,
    )


#: ``replay.now``: how the "now" of statuses and countdowns is chosen (module rules).
NOW_MODES: tuple[str, ...] = ("evidence", "log", "wall")


def stream_as_of(watermark_ms: int, delay_ms: int) -> int | None:
    """The stream's ``as_of`` in a micro-batch: its watermark plus the delay (the newest record
    time of the batches before); None before the first watermark."""
    return watermark_ms + delay_ms if watermark_ms > 0 else None


def evidence_horizon(as_of_ms: int | None, newest_ms: int | None, delay_ms: int) -> int | None:
    """How far the log is taken as complete when judging forecasts: the newest record minus the
    stream's watermark delay, never past ``as_of`` (a forecast at a later as-of is not
    contradicted by a log that does not reach it)."""
    if newest_ms is None:
        return as_of_ms
    horizon = newest_ms - delay_ms
    return horizon if as_of_ms is None else min(as_of_ms, horizon)


def now_sql(as_of_ms: int | None, mode: str = "evidence") -> str:
    """One-row SQL (column ``as_of``, a timestamp) of "now" for statuses and countdowns (Spark SQL
    that DuckDB runs after transpiling; reads ``group_state`` and, for ``evidence``,
    ``partition_end_offsets``)."""
    if as_of_ms is not None:
        return f"SELECT timestamp_millis({int(as_of_ms)}) AS as_of"
    if mode == "wall":
        return "SELECT current_timestamp() AS as_of"
    log = "(SELECT max(last_timestamp) FROM group_state)"
    if mode == "log":
        return f"SELECT {log} AS as_of"
    if mode != "evidence":
        raise ValueError(f"unknown replay.now {mode!r}; choose one of {', '.join(NOW_MODES)}")
    sample = "(SELECT max(sampled_at) FROM partition_end_offsets)"
    return f"SELECT CASE WHEN {sample} IS NULL OR {log} >= {sample} THEN {log} ELSE {sample} END AS as_of"


def now_of(cfg: Any) -> str:
    """``now_sql`` for a configuration (``replay.as_of_ms``, ``replay.now``)."""
    return now_sql(cfg.replay.as_of_ms, cfg.replay.now)


def newest_ms(read_arrow: Any, table: str, column: str) -> int | None:
    """The newest time in a timestamp column of a table (``read_arrow(table, columns)``: an Arrow
    table or None when the table does not exist)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = read_arrow(table, [column])
    if t is None or t.num_rows == 0:
        return None
    v = pc.max(pc.cast(pc.cast(t.column(column), pa.timestamp("ms", "UTC")), pa.int64())).as_py()
    return None if v is None else int(v)


def now_ms(cfg: Any, read_arrow: Any, wall_ms: int | None = None) -> tuple[int | None, str]:
    """``now_sql`` computed on the driver (``inspect``, the report). Returns (epoch ms, or None
    for an empty warehouse; what it is)."""
    if cfg.replay.as_of_ms is not None:
        return int(cfg.replay.as_of_ms), "replay.as_of_ms"
    if cfg.replay.now == "wall":
        return (int(time.time() * 1000) if wall_ms is None else wall_ms), "the wall clock (replay.now: wall)"
    log = newest_ms(read_arrow, "group_state", "last_timestamp")
    sample = newest_ms(read_arrow, "partition_end_offsets", "sampled_at") if cfg.replay.now == "evidence" else None
    if sample is not None and (log is None or sample > log):
        return sample, "the newest end-offset sample"
    return log, "the newest record replayed"
