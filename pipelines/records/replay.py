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
  is exact (else it asks for all the run's rows). ``replay_table`` is the one-group entry point
  (the stream's state function); ``replay_sorted_batches`` replays many groups per batch (the
  batch job's bucket tasks).
- Unsupported records (newer record types of the group, unknown value versions) are replayed
  from their raw bytes so the snapshot counts them exactly like the pure core does.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from coordinator_core.events import TABLE_BY_KIND, WITHDRAWN
from coordinator_core.settings import FACTS_ONLY, ReplaySettings
from pipelines.records.gold import DEFAULT_TABLES, GOLD_SPECS, GOLD_UNION_SCHEMA, rows_to_arrow, to_union
from pipelines.records.replay_input import (
    REC_GROUP_METADATA,
    REC_OFFSET_COMMIT,
    REC_UNSUPPORTED,
    as_numpy,
    sorted_by_position,
)

if TYPE_CHECKING:
    from coordinator_core.records import LogRecord
    from coordinator_core.replay import GroupSnapshot, ReplayResult, RunCounters


# Tables that come from the snapshot rather than from events.
SNAPSHOT_TABLES = ("group_state", "offsets_current")
KINDS_BY_TABLE: dict[str, str] = {table: kind for kind, table in TABLE_BY_KIND.items()}






# =============================================================================================
# Pure part (no Spark): Arrow rows of one group -> LogRecords -> core replay -> gold rows
# =============================================================================================
@functools.cache
def _fast(cls: type) -> Callable[[Sequence[Any]], Any]:
    """The core's slot-filling constructor for ``cls`` (generated once per class)."""
    from coordinator_core.wire import fast_constructor

    return fast_constructor(cls)


def records_from_arrow(table: pa.Table, rows: Any = None) -> list[LogRecord]:
    """Rebuild the core's ``LogRecord``s from replay-input rows, in the table's row order.

    Offset commits and group metadata are rebuilt from their decoded columns (the decode
    proved them equal to the core codec's values); unsupported records are decoded by the core
    codec from their raw bytes. ``rows`` (optional, a numpy index array): only these rows, in
    this order. Each kind reads only its own columns; members come from the flattened struct
    columns (no per-member dicts).
    """
    import numpy as np

    from coordinator_core.codec import decode_record
    from coordinator_core.records import (
        GroupMetadataKey,
        GroupMetadataValue,
        LogRecord,
        MemberMetadata,
        OffsetCommitKey,
        OffsetCommitValue,
    )
    if rows is None:
        rows = np.arange(table.num_rows)
    n = len(rows)
    if n == 0:
        return []
    # the whole table: every column read once, no ``take`` (small tables: the stream's calls)
    whole = n == table.num_rows and bool(rows[0] == 0 and np.all(np.diff(rows) == 1))
    take_all = None if whole else pa.array(rows)

    def col(name: str, at: Any = None) -> list[Any]:
        c = table.column(name)
        if at is not None:
            c = c.take(at)
        elif take_all is not None:
            c = c.take(take_all)
        return list(c.to_pylist())

    def of_kind(pos: Any) -> tuple[Any, list[int], Any]:
        """(take indices or None, per-kind column index per row, output index per row)."""
        out_idx = pos.tolist()
        if whole:
            return None, out_idx, out_idx
        return pa.array(rows[pos]), list(range(len(out_idx))), out_idx

    kinds_np = as_numpy(table.column("rec_kind"), REC_UNSUPPORTED)[rows]
    group = col("group_id")
    part = col("coordinator_partition")
    off = col("log_offset")
    ts = col("log_timestamp_ms")
    kver = col("key_version")
    tomb = col("is_tombstone")
    vver = col("value_version")
    out: list[Any] = [None] * n
    # slot-filling constructors of the core (``coordinator_core.wire.fast_constructor``): the same
    # frozen dataclasses, about half the construction cost of their ``__init__``
    new_log = _fast(LogRecord)

    oc_pos = np.flatnonzero(kinds_np == REC_OFFSET_COMMIT)
    if len(oc_pos):
        at, src, dst = of_kind(oc_pos)
        topic, partition, coff, epoch, meta, cts, ets = (
            col(name, at) for name in ("topic", "partition", "committed_offset", "leader_epoch", "metadata",
                                       "commit_timestamp_ms", "expire_timestamp_ms")
        )
        keys: dict[tuple[Any, ...], OffsetCommitKey] = {}
        new_value = _fast(OffsetCommitValue)
        for j, i in zip(src, dst, strict=True):
            kk = (group[i], topic[j], partition[j], kver[i])
            key = keys.get(kk)
            if key is None:
                key = keys[kk] = OffsetCommitKey(group[i], topic[j], partition[j], kver[i])
            value: Any = None
            if not tomb[i]:
                value = new_value((coff[j], meta[j], cts[j], epoch[j], ets[j], vver[i], ()))
            out[i] = new_log((part[i], off[i], ts[i], key, value))

    gm_pos = np.flatnonzero(kinds_np == REC_GROUP_METADATA)
    if len(gm_pos):
        at, src, dst = of_kind(gm_pos)
        ptype, gen, proto, leader, csts = (
            col(name, at) for name in ("protocol_type", "generation", "protocol", "leader",
                                       "current_state_timestamp_ms")
        )
        lists = table.column("members") if at is None else table.column("members").take(at)
        lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
        counts = as_numpy(pc.list_value_length(lists), 0).astype(np.int64)
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        flat = lists.flatten()
        new_member = _fast(MemberMetadata)
        fields = [flat.field(name).to_pylist() for name in (
            "member_id", "client_id", "client_host", "session_timeout", "subscription", "assignment",
            "rebalance_timeout", "group_instance_id")] if len(flat) else []
        # fast_constructor fills every slot: the (empty) tagged fields come last
        members_all = [new_member((*f, ())) for f in zip(*fields, strict=True)] if fields else []
        gkeys: dict[tuple[Any, ...], GroupMetadataKey] = {}
        for j, i in zip(src, dst, strict=True):
            kk = (group[i], kver[i])
            gkey = gkeys.get(kk)
            if gkey is None:
                gkey = gkeys[kk] = GroupMetadataKey(group[i], kver[i])
            gvalue = None
            if not tomb[i]:
                gvalue = GroupMetadataValue(
                    ptype[j], gen[j], proto[j], leader[j], tuple(members_all[bounds[j]:bounds[j + 1]]), csts[j],
                    vver[i],
                )
            out[i] = LogRecord(part[i], off[i], ts[i], gkey, gvalue)

    un_pos = np.flatnonzero((kinds_np != REC_OFFSET_COMMIT) & (kinds_np != REC_GROUP_METADATA))
    if len(un_pos):
        at, src, dst = of_kind(un_pos)
        rkey, rval = col("raw_key", at), col("raw_value", at)
        for j, i in zip(src, dst, strict=True):
            rec = decode_record(rkey[j], rval[j])
            out[i] = LogRecord(part[i], off[i], ts[i], rec.key, rec.value)
    return out


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


#: ``replay_table`` reduces commit runs with numpy from this many rows on (fewer: plain records)
MIN_ROWS_TO_COMPRESS = 64


def default_max_span_ms(retention_ms: int | None) -> int | None:
    """How long (in record time) a compressed run may last: a quarter of the retention, so a run's
    own commits (due about a retention after they were made) never fall due inside it."""
    return None if retention_ms is None else max(1, retention_ms // 4)






def _group_starts(table: pa.Table) -> Any:
    """Row indices where a new group begins (rows sorted by group)."""
    import numpy as np

    n = table.num_rows
    if n == 0:
        return np.zeros(0, np.int64)
    g = table.column("group_id")
    diff = as_numpy(pc.not_equal(g.slice(1), g.slice(0, n - 1)), True)
    return np.concatenate(([0], np.flatnonzero(diff) + 1)).astype(np.int64)


def _commit_runs(table: pa.Table, starts: Any, max_span_ms: int | None) -> dict[str, Any]:
    """The vectorised twin of ``coordinator_core.replay.compress_commit_runs`` for many groups.

    Returns numpy arrays: ``need`` (rows that become ``LogRecord``s: rows outside compressed
    runs and survivors), and per compressed run its first/end row, count and summary.
    """
    import numpy as np

    n = table.num_rows
    kind = as_numpy(table.column("rec_kind"), REC_UNSUPPORTED)
    tomb = as_numpy(table.column("is_tombstone"), True).astype(bool)
    part = as_numpy(table.column("coordinator_partition"), 0).astype(np.int64)
    off = as_numpy(table.column("log_offset"), 0).astype(np.int64)
    ts = as_numpy(table.column("log_timestamp_ms"), 0).astype(np.int64)
    commit = (kind == REC_OFFSET_COMMIT) & ~tomb
    # row i continues the run of row i - 1: both commits of the same group, position increasing,
    # same time bucket
    cont = np.zeros(n, bool)
    if n > 1:
        inc = (part[1:] > part[:-1]) | ((part[1:] == part[:-1]) & (off[1:] > off[:-1]))
        cont[1:] = commit[1:] & commit[:-1] & inc
        if max_span_ms is not None:
            cont[1:] &= (ts[1:] // max_span_ms) == (ts[:-1] // max_span_ms)
        cont[starts] = False
    run_start = commit & ~cont
    rs = np.flatnonzero(run_start)
    # a run ends where the next row does not continue it
    nxt = np.ones(n, bool)
    nxt[:-1] = ~cont[1:]
    re = np.flatnonzero(commit & nxt) + 1
    length = re - rs
    multi = length >= 2
    rs, re, length = rs[multi], re[multi], length[multi]
    need = np.ones(n, bool)
    empty = np.zeros(0, np.int64)
    out: dict[str, Any] = {"need": need, "first": empty, "end": empty}
    if len(rs) == 0:
        return out
    # rows of multi-record runs, with their run number
    run_of = np.repeat(np.arange(len(rs)), length)
    rows = np.repeat(rs - np.cumsum(np.concatenate(([0], length[:-1]))), length) + np.arange(length.sum())
    topic = table.column("topic").take(pa.array(rows))
    tidx = as_numpy(pc.dictionary_encode(topic.combine_chunks() if isinstance(topic, pa.ChunkedArray) else topic)
               .indices, -1).astype(np.int64)
    tpart = as_numpy(table.column("partition").take(pa.array(rows)), 0).astype(np.int64)
    order = np.lexsort((rows, tpart, tidx, run_of))
    last = np.ones(len(order), bool)
    same = (run_of[order][1:] == run_of[order][:-1]) & (tidx[order][1:] == tidx[order][:-1]) & (
        tpart[order][1:] == tpart[order][:-1])
    last[:-1] = ~same
    kept = np.zeros(n, bool)
    kept[rows[order[last]]] = True
    kept[rs] = True
    run_pos = np.concatenate(([0], np.cumsum(length)[:-1]))
    nkept = np.add.reduceat(kept[rows].astype(np.int64), run_pos)
    drop = nkept < length  # runs where something is dropped: compressed
    if not drop.any():
        return out
    cts = as_numpy(table.column("commit_timestamp_ms").take(pa.array(rows)), 0).astype(np.int64)
    exp_col = table.column("expire_timestamp_ms").take(pa.array(rows))
    has_exp = as_numpy(exp_col.is_valid(), False).astype(bool)
    exp = as_numpy(exp_col, 0).astype(np.int64)
    big = np.iinfo(np.int64).max
    min_cts = np.minimum.reduceat(np.where(has_exp, big, cts), run_pos)
    min_exp = np.minimum.reduceat(np.where(has_exp, exp, big), run_pos)
    max_ts = np.maximum.reduceat(ts[rows], run_pos)
    in_run = np.zeros(n, bool)
    in_run[rows[np.repeat(drop, length)]] = True
    need &= ~in_run | kept
    out.update(first=rs[drop], end=re[drop], count=length[drop], max_ts=max_ts[drop], min_cts=min_cts[drop],
               min_exp=min_exp[drop], big=big)
    return out


def _items_by_group(
    table: pa.Table, *, compress: bool, max_span_ms: int | None
) -> Iterator[tuple[str, list[Any]]]:
    """(group id, replay items) for each group of ``table`` (rows sorted by group, then position):
    ``LogRecord``s and ``CommitRun``s (the survivors and summaries of ``_commit_runs``)."""
    import numpy as np

    from coordinator_core.replay import CommitRun

    n = table.num_rows
    if n == 0:
        return
    starts = _group_starts(table)
    gids = table.column("group_id").take(pa.array(starts)).to_pylist()
    if not compress:
        records = records_from_arrow(table)
        bounds = [*starts.tolist(), n]
        for i, gid in enumerate(gids):
            yield gid, records[bounds[i]:bounds[i + 1]]
        return
    red = _commit_runs(table, starts, max_span_ms)
    need = red["need"]
    need_rows = np.flatnonzero(need)
    records = records_from_arrow(table, need_rows)
    first, end = red["first"], red["end"]
    if len(first) == 0:
        bounds = np.searchsorted(need_rows, [*starts.tolist(), n]).tolist()
        for i, gid in enumerate(gids):
            yield gid, records[bounds[i]:bounds[i + 1]]
        return
    # where each run's survivors sit in ``records`` (the first and last row of a run survive)
    k0 = np.searchsorted(need_rows, first).tolist()
    k1 = (np.searchsorted(need_rows, end - 1) + 1).tolist()
    big = red["big"]
    runs_by_group = np.searchsorted(starts, first, side="right") - 1
    group_need = np.searchsorted(need_rows, [*starts.tolist(), n]).tolist()
    count, max_ts = red["count"].tolist(), red["max_ts"].tolist()
    min_cts = [None if x == big else x for x in red["min_cts"].tolist()]
    min_exp = [None if x == big else x for x in red["min_exp"].tolist()]
    first_l, end_l = first.tolist(), end.tolist()
    r = 0
    nruns = len(first_l)
    rg = runs_by_group.tolist()

    def expander(s: int, e: int) -> Callable[[], list[LogRecord]]:
        return lambda: records_from_arrow(table.slice(s, e - s))

    for g, gid in enumerate(gids):
        pos = group_need[g]
        stop = group_need[g + 1]
        items: list[Any] = []
        while r < nruns and rg[r] == g:
            a, b = k0[r], k1[r]
            items.extend(records[pos:a])
            kept = records[a:b]
            items.append(CommitRun(kept, count[r], kept[0].position, max_ts[r], min_cts[r], min_exp[r],
                                   expander(first_l[r], end_l[r])))
            pos = b
            r += 1
        items.extend(records[pos:stop])
        yield gid, items


def replay_table(
    snapshot: GroupSnapshot,
    table: pa.Table | None,
    *,
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    log_end_ms: int | None = None,
    assume_log_start: bool = False,
    max_span_ms: int | None = -1,
    counters: RunCounters | None = None,
    min_rows_to_compress: int = MIN_ROWS_TO_COMPRESS,
) -> ReplayResult:
    """Replay one group's replay-input rows (``REPLAY_INPUT_DDL`` columns) onto ``snapshot``.

    The same result as ``replay(snapshot, records_from_arrow(sorted rows), ...)``: the rows are
    put in (coordinator_partition, log_offset) order if they are not, runs of offset commits are
    reduced with numpy to their survivors plus a summary, and ``replay_runs`` applies each run
    from its survivors when that is exact (else from all its rows). With ``event_kinds``
    including ``offset_commit`` every record is replayed one by one.

    Args:
        snapshot: the group's state before these rows (``new_snapshot(group_id)`` to rebuild).
        table: the group's rows, any order; rows at or below ``snapshot.last_position`` are
            duplicates and skipped. None or no rows: only the expiry at ``as_of_ms`` (a timer).
        settings, as_of_ms, event_kinds, assume_log_start: as
            ``coordinator_core.replay.replay``.
        max_span_ms: longest record-time span of a compressed run (-1: ``default_max_span_ms``,
            None: no limit).
        counters: accumulates how many runs were compressed or expanded.
        min_rows_to_compress: fewer rows are replayed as plain records (the reduction's fixed
            numpy cost is ~1 ms; same result either way).

    The streaming job's call: ``replay_table(state, rows_of_the_micro_batch, settings=...,
    as_of_ms=watermark, event_kinds=event_kinds_for(tables))`` in
    place of ``replay(state, records_from_arrow(sorted rows), ...)``; ``table=None`` for a timer.

    Raises:
        ValueError: rows of another group than ``snapshot.group_id``.
    """
    from coordinator_core.replay import ALL_EVENT_KINDS, replay_runs

    kinds = ALL_EVENT_KINDS if event_kinds is None else frozenset(event_kinds)
    items: list[Any] = []
    if table is not None and table.num_rows:
        table = sorted_by_position(table)
        span = default_max_span_ms(settings.retention_ms) if max_span_ms == -1 else max_span_ms
        # a few rows (a stream's micro-batch): the numpy reduction would cost more than it saves
        compress = "offset_commit" not in kinds and table.num_rows >= min_rows_to_compress
        for gid, group_items in _items_by_group(table, compress=compress, max_span_ms=span):
            if gid != snapshot.group_id:
                raise ValueError(f"rows of group {gid!r} given to the replay of group {snapshot.group_id!r}")
            items = group_items
    return replay_runs(
        snapshot, items, settings=settings, as_of_ms=as_of_ms, event_kinds=kinds,
        assume_log_start=assume_log_start, log_end_ms=log_end_ms, counters=counters,
    )




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
) -> dict[str, list[dict[str, Any]]]:
    """The core's rows of one replayed group, by gold table.

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
        rows["group_state"].append(
            snap.to_state_row(settings=settings, num_partitions=num_partitions)
        )
    if "offsets_current" in rows:
        rows["offsets_current"].extend(snap.offset_rows())
    keyed: dict[str, dict[str, dict[str, Any]]] = {}
    for event in result.events:
        if event.table not in rows:
            continue
        row = event.to_row()
        bucket = keyed.setdefault(event.table, {})
        bucket.pop(row["event_key"], None)  # re-insert: the later row wins and keeps log order
        bucket[row["event_key"]] = row
    for table, by_key in keyed.items():
        rows[table].extend(
            r for r in by_key.values() if keep_withdrawn or r.get("status") != WITHDRAWN
        )
    return rows




def _union_table(rows: dict[str, list[dict[str, Any]]]) -> pa.Table:
    parts = [to_union(name, rows_to_arrow(GOLD_SPECS[name], rs)) for name, rs in rows.items() if rs]
    return pa.concat_tables(parts) if parts else GOLD_UNION_SCHEMA.empty_table()




def replay_sorted_batches(
    batches: Iterable[pa.RecordBatch],
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
) -> Iterator[Any]:
    """Replay rows sorted by (group_id, coordinator_partition, log_offset), many groups per batch.

    The ``mapInArrow`` twin of ``replay_group_arrow``: a group's rows are contiguous (they may
    span batches; the tail group of a batch is carried, as Arrow rows, into the next), each
    group is replayed once, and the gold rows of all groups completed in a batch are converted
    together (per-group Arrow conversion would cost more than the replay).

    ``bulk`` (default): complete groups are collected until ``rows_per_replay`` input rows,
    then the runs of offset commits of all of them are reduced with numpy at once, each group is
    replayed with ``replay_runs`` (see ``replay_table``) and their gold rows are converted in one
    go (fewer, larger conversions: the per-conversion cost is fixed); the rows equal
    ``bulk=False`` (every row a ``LogRecord``, ``replay`` per group, one output per batch).

    Yields union-schema tables (``GOLD_UNION_SCHEMA``), or with ``as_tables`` (bulk only)
    ``{gold table: its rows}`` dicts (no round trip through the union for a writer that writes
    each table itself).
    """
    from coordinator_core.replay import new_snapshot, replay_runs

    kinds = event_kinds_for(tables)
    compress = "offset_commit" not in kinds
    span = default_max_span_ms(settings.retention_ms) if max_span_ms == -1 else max_span_ms

    def replay_complete(parts: list[pa.Table]) -> Any:
        work = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        out: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
        # the replay builds ~100k short-lived acyclic objects per batch (freed by reference
        # counting): the cyclic collector's passes over them cost ~15 %, so it pauses for the
        # batch (never across a ``yield``); anything cyclic is collected once it resumes
        with _gc_paused():
            for gid, items in _items_by_group(work, compress=compress, max_span_ms=span):
                result = replay_runs(
                    new_snapshot(gid), items, settings=settings, as_of_ms=as_of_ms,
                    event_kinds=kinds, log_end_ms=log_end_ms, counters=counters,
                )
                for name, rows in gold_rows(
                    result, tables=tables, settings=settings, num_partitions=num_partitions
                ).items():
                    out[name].extend(rows)
            if not any(out.values()):
                return None
            if as_tables:
                return {name: rows_to_arrow(GOLD_SPECS[name], rs) for name, rs in out.items() if rs}
            return _union_table(out)

    import numpy as np

    pending: list[pa.Table] = []  # the last group seen, maybe not complete yet
    pending_gid: str | None = None
    ready: list[pa.Table] = []  # complete groups not replayed yet
    ready_rows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        gcol = table.column("group_id")
        tail_gid = gcol[-1].as_py()
        other = np.flatnonzero(~as_numpy(pc.equal(gcol, tail_gid), False).astype(bool))
        cut = int(other[-1]) + 1 if len(other) else 0  # where the batch's last group begins
        if cut == 0 and tail_gid == pending_gid:
            pending.append(table)  # the carried group goes on through this whole batch
            continue
        done = pending + ([table.slice(0, cut)] if cut else [])
        pending, pending_gid = [table.slice(cut)], tail_gid
        ready.extend(done)
        ready_rows += sum(t.num_rows for t in done)
        if ready_rows >= rows_per_replay:
            out = replay_complete(ready)
            ready, ready_rows = [], 0
            if out is not None:
                yield out
    ready.extend(pending)
    if ready:
        out = replay_complete(ready)
        if out is not None:
            yield out




# =============================================================================================
# Spark
# =============================================================================================




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








