"""Runs of offset commits reduced with numpy, many groups at once (the bulk replay's input).

Rules:
- A run is the offset commits of a group between two of its other records. Most of a run's
  commits are superseded within it: only its first commit and the last per (topic, partition)
  become ``LogRecord``s, with a summary the core's ``replay_runs`` uses to decide whether applying
  the survivors is exact (else it asks for all the run's rows).
- A compressed run spans at most ``default_max_span_ms`` of record time (a quarter of the
  retention), so none of its own commits falls due inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from coordinator_core import CommitRun
from pipelines.records.log_records import records_from_arrow
from pipelines.records.replay_input import REC_OFFSET_COMMIT, REC_UNSUPPORTED, as_numpy, sort_packed

if TYPE_CHECKING:
    from coordinator_core import ReplayItem


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


def run_columns(table: pa.Table) -> dict[str, Any]:
    """The columns the reduction reads, as numpy arrays over all of ``table``'s rows (nulls
    filled; ``topic`` as dictionary codes, -1 for null): extracted once per table, then gathered
    by the rows a reduction looks at (no Arrow ``take`` of the rows themselves)."""
    import numpy as np

    topic = table.column("topic")
    topic = topic.combine_chunks() if isinstance(topic, pa.ChunkedArray) else topic
    kind = as_numpy(table.column("rec_kind"), REC_UNSUPPORTED)
    tomb = as_numpy(table.column("is_tombstone"), True).astype(bool)
    txn = as_numpy(table.column("producer_id").is_valid(), False).astype(bool)
    return {
        # a plain commit: a transactional one (pending until its marker) and a marker end a run
        "commit": (kind == REC_OFFSET_COMMIT) & ~tomb & ~txn,
        "part": as_numpy(table.column("coordinator_partition"), 0).astype(np.int64),
        "off": as_numpy(table.column("log_offset"), 0).astype(np.int64),
        "ts": as_numpy(table.column("log_timestamp_ms"), 0).astype(np.int64),
        "topic": as_numpy(pc.dictionary_encode(topic).indices, -1).astype(np.int64),
        "tpart": as_numpy(table.column("partition"), 0).astype(np.int64),
        "cts": as_numpy(table.column("commit_timestamp_ms"), 0).astype(np.int64),
        "has_exp": as_numpy(table.column("expire_timestamp_ms").is_valid(), False).astype(bool),
        "exp": as_numpy(table.column("expire_timestamp_ms"), 0).astype(np.int64),
    }


def _by_run_topic_partition(run_of: Any, tidx: Any, tpart: Any) -> Any:
    """Indices ordering run rows by (run, topic, partition), rows in their order within equal
    keys: ``numpy.lexsort((rows, tpart, tidx, run_of))``, ~10x cheaper as one sort of packed
    int64 values (``replay_input.sort_packed``)."""
    import numpy as np

    tidx = tidx + 1  # -1 (no topic) -> 0
    lo = int(tpart.min())
    order = sort_packed((run_of, tidx, tpart - lo))
    return np.lexsort((np.arange(len(run_of)), tpart, tidx, run_of)) if order is None else order


# long: one vectorised pass over a batch's runs; pieces would materialise the masks twice
def _commit_runs(cols: dict[str, Any], starts: Any, max_span_ms: int | None, rows: Any = None) -> dict[str, Any]:
    """The vectorised twin of ``coordinator_core.loader.commit_runs.compress_commit_runs`` for many groups.

    ``cols``: ``run_columns`` of the table; ``rows`` (optional): the table's rows in replay
    order (default: the table's own order); ``starts``: where each group begins in that order.
    Returns numpy arrays, positions in that order: ``need`` (rows that become ``LogRecord``s:
    rows outside compressed runs and survivors), and per compressed run its first/end row,
    count and summary.
    """
    import numpy as np

    def at(name: str) -> Any:
        return cols[name] if rows is None else cols[name][rows]

    commit, part, off, ts = at("commit"), at("part"), at("off"), at("ts")
    n = len(commit)
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
    # rows of multi-record runs, with their run number; ``src``: the same rows in ``cols``
    run_of = np.repeat(np.arange(len(rs)), length)
    run_rows = np.repeat(rs - np.cumsum(np.concatenate(([0], length[:-1]))), length) + np.arange(length.sum())
    src = run_rows if rows is None else rows[run_rows]
    tidx = cols["topic"][src]
    tpart = cols["tpart"][src]
    order = _by_run_topic_partition(run_of, tidx, tpart)
    last = np.ones(len(order), bool)
    same = (
        (run_of[order][1:] == run_of[order][:-1])
        & (tidx[order][1:] == tidx[order][:-1])
        & (tpart[order][1:] == tpart[order][:-1])
    )
    last[:-1] = ~same
    kept = np.zeros(n, bool)
    kept[run_rows[order[last]]] = True
    kept[rs] = True
    run_pos = np.concatenate(([0], np.cumsum(length)[:-1]))
    nkept = np.add.reduceat(kept[run_rows].astype(np.int64), run_pos)
    drop = nkept < length  # runs where something is dropped: compressed
    if not drop.any():
        return out
    cts = cols["cts"][src]
    has_exp = cols["has_exp"][src]
    exp = cols["exp"][src]
    big = np.iinfo(np.int64).max
    min_cts = np.minimum.reduceat(np.where(has_exp, big, cts), run_pos)
    min_exp = np.minimum.reduceat(np.where(has_exp, exp, big), run_pos)
    max_ts = np.maximum.reduceat(ts[run_rows], run_pos)
    in_run = np.zeros(n, bool)
    in_run[run_rows[np.repeat(drop, length)]] = True
    need &= ~in_run | kept
    out.update(
        first=rs[drop],
        end=re[drop],
        count=length[drop],
        max_ts=max_ts[drop],
        min_cts=min_cts[drop],
        min_exp=min_exp[drop],
        big=big,
    )
    return out


# long: one walk over the groups and their runs, the survivors' records built at once
def items_by_group(
    table: pa.Table,
    *,
    compress: bool,
    max_span_ms: int | None,
    rows: Any = None,
    starts: Any = None,
    cols: dict[str, Any] | None = None,
) -> Iterator[tuple[str, list[Any]]]:
    """(group id, replay items) for each group of ``table``: ``LogRecord``s and ``CommitRun``s
    (the survivors and summaries of ``_commit_runs``).

    The rows are ``table``'s in its own order (sorted by group, then position), or with ``rows``
    (numpy indices, ``replay_input.replay_order_and_groups``) ``table``'s rows in that order:
    only the rows that become records are gathered, never the whole table. ``starts``: where
    each group begins in that order (default: found from the group ids); ``cols``: the table's
    ``run_columns`` when the caller already has them."""
    import numpy as np

    n = table.num_rows if rows is None else len(rows)
    if n == 0:
        return
    if starts is None:
        starts = _group_starts(table if rows is None else table.take(pa.array(rows)).select(["group_id"]))
    first_rows = starts if rows is None else rows[starts]
    gids = table.column("group_id").take(pa.array(first_rows)).to_pylist()

    def source(view_rows: Any) -> Any:
        """View positions -> the table's row indices."""
        return view_rows if rows is None else rows[view_rows]

    if not compress:
        records = records_from_arrow(table, rows)
        bounds = [*starts.tolist(), n]
        for i, gid in enumerate(gids):
            yield gid, records[bounds[i] : bounds[i + 1]]
        return
    red = _commit_runs(cols if cols is not None else run_columns(table), starts, max_span_ms, rows)
    need = red["need"]
    need_rows = np.flatnonzero(need)
    records = records_from_arrow(table, source(need_rows))
    first, end = red["first"], red["end"]
    if len(first) == 0:
        bounds = np.searchsorted(need_rows, [*starts.tolist(), n]).tolist()
        for i, gid in enumerate(gids):
            yield gid, records[bounds[i] : bounds[i + 1]]
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

    def expander(s: int, e: int) -> Callable[[], list[ReplayItem]]:
        if rows is None:
            return lambda: records_from_arrow(table.slice(s, e - s))
        return lambda: records_from_arrow(table, rows[s:e])

    for g, gid in enumerate(gids):
        pos = group_need[g]
        stop = group_need[g + 1]
        items: list[Any] = []
        while r < nruns and rg[r] == g:
            a, b = k0[r], k1[r]
            items.extend(records[pos:a])
            kept = records[a:b]
            items.append(
                CommitRun(
                    kept, count[r], kept[0].position, max_ts[r], min_cts[r], min_exp[r], expander(first_l[r], end_l[r])
                )
            )
            pos = b
            r += 1
        items.extend(records[pos:stop])
        yield gid, items
