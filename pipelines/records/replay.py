"""Replay-input rows -> the core's replay -> gold rows, for the batch job and the stream.

Rules:
- The input is ``pipelines.records.replay_input`` rows; a group's rows in log order
  (``replay_order``). The Python side rebuilds ``LogRecord``s from the columns, calls the
  core's replay once per group and converts the snapshot and events with
  ``pipelines.records.gold``: it never re-implements a core rule.
- ``as_of_ms`` defaults to the largest record timestamp of the input (deterministic: the same
  input gives the same gold rows whenever it runs). Expiry runs only with ``settings.retention_ms``.
- Most offset commits are superseded within their run (the commits between two other records
  of a group): the runs of a whole Arrow batch are reduced with numpy to their survivors (the
  run's first commit and the last per (topic, partition)) plus a summary, only those rows become
  ``LogRecord``s, and the core's ``replay_runs`` decides per run whether applying the survivors
  is exact (else it asks for all the run's rows). ``replay_onto`` is that replay for many groups
  onto their snapshots: the stream's state buckets call it directly, ``replay_table`` for one
  group; ``replay_ordered`` (the batch job's bucket tasks: a table in a given row order, never
  gathered) and ``replay_sorted_batches`` (batches) call it through ``_Replay``, which converts
  chunks of complete groups' gold rows.
- The gold rows are converted to Arrow column by column (``pipelines.records.gold``) while the
  cyclic garbage collector is paused, and dropped before it resumes.
- Unsupported records (newer record types of the group, unknown value versions) are replayed
  from their raw bytes so the snapshot counts them exactly like the pure core does.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from coordinator_core import (
    ALL_EVENT_KINDS,
    FACTS_ONLY,
    TABLE_BY_KIND,
    WITHDRAWN,
    ReplaySettings,
    new_snapshot,
    replay_runs,
)
from pipelines.records.commit_runs import MIN_ROWS_TO_COMPRESS, default_max_span_ms, items_by_group, run_columns
from pipelines.records.gold import DEFAULT_TABLES, GOLD_UNION_SCHEMA, rows_to_tables, to_union
from pipelines.records.replay_input import replay_order_and_groups, schema

if TYPE_CHECKING:
    from coordinator_core import GroupSnapshot, ReplayResult, RunCounters


KINDS_BY_TABLE: dict[str, str] = {table: kind for kind, table in TABLE_BY_KIND.items()}


# =============================================================================================
# Pure part (no Spark): Arrow rows of one group -> LogRecords -> core replay -> gold rows
# =============================================================================================


# =============================================================================================
# Bulk path: runs of offset commits reduced with numpy, replayed with ``replay_runs``
# =============================================================================================
@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (restored to its previous state on exit)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def replay_onto(
    table: pa.Table,
    snapshot_of: Callable[[str], GroupSnapshot],
    *,
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    log_end_ms: int | None = None,
    assume_log_start: bool = False,
    max_span_ms: int | None = -1,
    counters: RunCounters | None = None,
    min_rows_to_compress: int = MIN_ROWS_TO_COMPRESS,
    order: Any = None,
    starts: Any = None,
    cols: dict[str, Any] | None = None,
    also: Iterable[str] = (),
) -> Iterator[tuple[GroupSnapshot, ReplayResult]]:
    """Each group of ``table``'s replay-input rows replayed onto ``snapshot_of(group_id)``:
    (snapshot before, result) per group, in group order. The one replay of many groups that the
    batch job's bucket tasks (from new snapshots), the stream's state buckets (from their
    groups' snapshots) and ``replay_table`` (one group) run.

    The same result per group as ``replay(snapshot, records_from_arrow(its rows in log order))``:
    the rows are put in (group_id, coordinator_partition, log_offset) order (``order``/``starts``:
    ``replay_order_and_groups`` already computed; ``cols``: the table's ``run_columns``), runs
    of offset commits are reduced with numpy for all groups at once (``items_by_group``) and
    ``replay_runs`` applies each run from its survivors when that is exact (else from all its
    rows). With ``event_kinds`` including ``offset_commit`` every record is replayed one by one.

    Args:
        also: groups replayed too when ``table`` has no row of theirs: only the expiry at
            ``as_of_ms`` (a due timer), after the groups with rows.
        max_span_ms: longest record-time span of a compressed run (-1: ``default_max_span_ms``,
            None: no limit).
        min_rows_to_compress: fewer rows are replayed as plain records (the reduction's fixed
            numpy cost is ~1 ms; same result either way).
        settings, as_of_ms, event_kinds, log_end_ms, assume_log_start, counters: as
            ``coordinator_core.loader.replay.replay_runs``.
    """

    kinds = ALL_EVENT_KINDS if event_kinds is None else frozenset(event_kinds)
    options: dict[str, Any] = {
        "settings": settings,
        "as_of_ms": as_of_ms,
        "event_kinds": kinds,
        "assume_log_start": assume_log_start,
        "log_end_ms": log_end_ms,
        "counters": counters,
    }
    if order is None or starts is None:
        order, starts = replay_order_and_groups(table)
    seen = set()
    if len(order):
        span = default_max_span_ms(settings.retention_ms) if max_span_ms == -1 else max_span_ms
        compress = "offset_commit" not in kinds and len(order) >= min_rows_to_compress
        for gid, items in items_by_group(
            table, compress=compress, max_span_ms=span, rows=order, starts=starts, cols=cols
        ):
            seen.add(gid)
            before = snapshot_of(gid)
            yield before, replay_runs(before, items, **options)
    for gid in also:
        if gid not in seen:
            before = snapshot_of(gid)
            yield before, replay_runs(before, [], **options)


def replay_table(snapshot: GroupSnapshot, table: pa.Table | None, **options: Any) -> ReplayResult:
    """Replay one group's replay-input rows (any order) onto ``snapshot``: ``replay_onto`` for
    one group (``options``: its keywords). ``table`` None or without rows: only the expiry at
    ``as_of_ms`` (a timer).

    Raises:
        ValueError: rows of another group than ``snapshot.group_id``.
    """

    def own(gid: str) -> GroupSnapshot:
        if gid != snapshot.group_id:
            raise ValueError(f"rows of group {gid!r} given to the replay of group {snapshot.group_id!r}")
        return snapshot

    rows = table if table is not None else schema().empty_table()
    return next(result for _before, result in replay_onto(rows, own, also=(snapshot.group_id,), **options))


def event_kinds_for(tables: Iterable[str]) -> tuple[str, ...]:
    """The core event kinds needed to produce ``tables`` (fewer kinds = faster replay)."""
    return tuple(sorted(KINDS_BY_TABLE[t] for t in tables if t in KINDS_BY_TABLE))


def gold_rows(
    result: ReplayResult,
    *,
    tables: Sequence[str] = DEFAULT_TABLES,
    settings: ReplaySettings = FACTS_ONLY,
    num_partitions: int = 50,
    keep_withdrawn: bool = False,
    only_offsets: Collection[tuple[str, int]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The core's rows of one replayed group, by gold table (``only_offsets``: the
    ``offsets_current`` rows of these (topic, partition)s only: a carried replay's changes).

    Event rows are keyed by ``(group_id, event_key)`` and the core's contract is that a later
    event with the same key replaces the earlier one (a predicted expiry later confirmed by the
    log's tombstone, an offset tombstone re-emitted as ``group_deleted``). The streaming job gets
    that from its MERGE; here the last row per key is kept, so batch and stream write the same
    rows and the tables never hold two rows for one key. A forecast an earlier replay call told
    and this one withdrew (status ``withdrawn``) is no row at all; ``keep_withdrawn`` keeps it so
    that the streaming sink deletes its key.
    """
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    snap = result.snapshot
    if "group_state" in rows:
        rows["group_state"].append(snap.to_state_row(settings=settings, num_partitions=num_partitions))
    if "offsets_current" in rows:
        kind = snap.group_type
        offsets = snap.offset_rows()  # fresh dicts: completed in place
        if only_offsets is not None:
            offsets = [r for r in offsets if (r["topic"], r["partition"]) in only_offsets]
        for r in offsets:
            r["group_type"] = kind
        rows["offsets_current"].extend(offsets)
    keyed: dict[str, dict[str, dict[str, Any]]] = {}
    # the kind of group each event is about: the core's (``ReplayResult.event_group_types``)
    for event, kind in zip(result.events, result.event_group_types(), strict=True):
        if event.table not in rows:
            continue
        row = event.to_row()
        row["group_type"] = kind
        bucket = keyed.setdefault(event.table, {})
        bucket.pop(row["event_key"], None)  # re-insert: the later row wins and keeps log order
        bucket[row["event_key"]] = row
    for table, by_key in keyed.items():
        rows[table].extend(r for r in by_key.values() if keep_withdrawn or r.get("status") != WITHDRAWN)
    return rows


def _union_table(rows: dict[str, list[dict[str, Any]]]) -> pa.Table:
    parts = [to_union(name, t) for name, t in rows_to_tables(rows).items()]
    return pa.concat_tables(parts) if parts else GOLD_UNION_SCHEMA.empty_table()


def replay_sorted_batches(batches: Iterable[pa.RecordBatch], **options: Any) -> Iterator[Any]:
    """Replay rows in batches (a group's rows may span batches) through the batch job's path:
    the batches are concatenated, ordered by (group_id, coordinator_partition, log_offset)
    (``replay_order_and_groups``: already sorted input keeps its order) and handed to
    ``replay_ordered``, which collects complete groups until ``rows_per_replay`` input rows,
    reduces their offset-commit runs with numpy at once, replays each group with
    ``replay_runs`` (``replay_onto``) and converts their gold rows in one go. The rows equal the
    core's ``replay`` of every record, one group at a time (the tests compare them).

    ``options``: ``replay_ordered``'s keywords. Yields union-schema tables (``GOLD_UNION_SCHEMA``),
    or with ``as_tables`` ``{gold table: its rows}`` dicts (no round trip through the union for a
    writer that writes each table itself).
    """
    parts = [pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b for b in batches if b.num_rows]
    if not parts:
        return
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    order, starts = replay_order_and_groups(table)
    yield from replay_ordered(table, order, starts, **options)


def replay_ordered(
    table: pa.Table,
    order: Any,
    starts: Any,
    *,
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    tables: Sequence[str] = DEFAULT_TABLES,
    num_partitions: int = 50,
    log_end_ms: int | None = None,
    max_span_ms: int | None = -1,
    counters: RunCounters | None = None,
    rows_per_replay: int = 100_000,
    as_tables: bool = False,
    keep: Callable[[GroupSnapshot], None] | None = None,
) -> Iterator[Any]:
    """``replay_sorted_batches`` over ``table``'s rows in ``order`` (numpy row indices, sorted by
    (group_id, coordinator_partition, log_offset)), ``starts`` where each group begins in it
    (``replay_input.replay_order_and_groups``): the batch job's bucket tasks.

    The table is never gathered into that order: the commit-run reduction reads its numeric
    columns gathered with numpy and only the rows that become records (a few percent) are taken.
    The same groups, the same rows (one group's rows never split across conversions).
    ``keep``: called with each group's snapshot after its replay (the batch job keeps them for its
    next incremental run: ``pipelines.batch.carried``).
    """

    n = len(order)
    if n == 0:
        return
    run = _Replay(settings, as_of_ms, tables, num_partitions, log_end_ms, max_span_ms, counters, as_tables, keep)
    cols = run_columns(table) if "offset_commit" not in run.kinds else None
    bounds = [0]
    for s in starts.tolist()[1:]:
        if s - bounds[-1] >= rows_per_replay:
            bounds.append(s)
    bounds.append(n)
    g = 0
    for lo, hi in itertools.pairwise(bounds):
        g_hi = g + int(np.searchsorted(starts[g:], hi))
        yield from run(table, order[lo:hi], starts[g:g_hi] - lo, cols)
        g = g_hi


class _Replay:
    """One replay's options: complete groups' rows -> gold outputs (``replay_sorted_batches``,
    ``replay_ordered``)."""

    def __init__(
        self,
        settings: ReplaySettings,
        as_of_ms: int | None,
        tables: Sequence[str],
        num_partitions: int,
        log_end_ms: int | None,
        max_span_ms: int | None,
        counters: RunCounters | None,
        as_tables: bool,
        keep: Callable[[GroupSnapshot], None] | None = None,
    ) -> None:
        self.settings, self.as_of_ms, self.tables = settings, as_of_ms, tables
        self.num_partitions, self.log_end_ms, self.counters = num_partitions, log_end_ms, counters
        self.kinds = event_kinds_for(tables)
        self.span = default_max_span_ms(settings.retention_ms) if max_span_ms == -1 else max_span_ms
        self.as_tables = as_tables
        self.keep = keep

    def __call__(self, work: pa.Table, rows: Any, starts: Any, cols: dict[str, Any] | None) -> Iterator[Any]:
        # the replay builds ~100k short-lived acyclic objects per chunk (freed by reference
        # counting): the cyclic collector's passes over them cost ~15 %, so it pauses for the
        # chunk (never across a ``yield``). The rows are converted to Arrow and dropped before it
        # resumes: its first pass then walks none of them; anything cyclic is collected then.
        converted = None
        with _gc_paused():
            out = _replay_complete(
                work,
                rows,
                starts,
                cols,
                settings=self.settings,
                as_of_ms=self.as_of_ms,
                tables=self.tables,
                kinds=self.kinds,
                span=self.span,
                num_partitions=self.num_partitions,
                log_end_ms=self.log_end_ms,
                counters=self.counters,
                keep=self.keep,
            )
            if any(out.values()):
                converted = rows_to_tables(out) if self.as_tables else _union_table(out)
            del out
        if converted is not None:
            yield converted


def _replay_complete(
    work: pa.Table,
    rows: Any,
    starts: Any,
    cols: dict[str, Any] | None,
    *,
    settings: ReplaySettings,
    as_of_ms: int | None,
    tables: Sequence[str],
    kinds: tuple[str, ...],
    span: int | None,
    num_partitions: int,
    log_end_ms: int | None,
    counters: RunCounters | None,
    keep: Callable[[GroupSnapshot], None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Complete groups' rows (``work``'s, or its ``rows`` in that order) -> their gold rows, by
    table (the caller pauses the cyclic collector: ``_Replay``)."""

    out: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    for _before, result in replay_onto(
        work,
        new_snapshot,
        settings=settings,
        as_of_ms=as_of_ms,
        event_kinds=kinds,
        log_end_ms=log_end_ms,
        max_span_ms=span,
        counters=counters,
        min_rows_to_compress=0,
        order=rows if rows is not None else np.arange(work.num_rows, dtype=np.int64),
        starts=starts,
        cols=cols,
    ):
        if keep is not None:
            keep(result.snapshot)
        for name, rows_of in gold_rows(result, tables=tables, settings=settings, num_partitions=num_partitions).items():
            out[name].extend(rows_of)
    return out


def as_of_and_log_end(
    as_of_ms: int | None, log_end_ms: int | None, newest_ms: int | None
) -> tuple[int | None, int | None]:
    """The batch replay's "now" and evidence horizon: ``as_of`` defaults to the newest record;
    the end of the log judges predictions up to ``min(as_of, newest record)`` (a forecast at a
    later ``as_of`` is not contradicted by a log that does not reach it; the stream's watermark
    plays both parts)."""
    if as_of_ms is None:
        as_of_ms = newest_ms
    if log_end_ms is None and newest_ms is not None:
        log_end_ms = newest_ms if as_of_ms is None else min(as_of_ms, newest_ms)
    return as_of_ms, log_end_ms
