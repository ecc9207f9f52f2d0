"""The streaming job's sinks (``foreachBatch``): the changed gold rows MERGEd into the gold tables,
the decoded tables (each MERGEd on its log position, as an append when all are new) — from what the packed landing source's
tasks decoded, else by the side query —, each write idempotent per micro-batch.

Rules:
- The decoded tables are keyed on the log position and nearly append-only: a micro-batch's rows
  are appended when the table holds none of their positions, MERGEd otherwise (a transaction's
  fate learned by a later micro-batch updates its commits) (``merge_decoded``): delta-rs's
  MERGE reads the whole table whatever the source, so every micro-batch of a long stream would
  cost more than the last.
- ``foreachBatch`` collects the micro-batch output once (on the driver: only what changed,
  small) and MERGEs each gold table on its key from Arrow (``TableIO.merge``; no Spark job per
  table), tables side by side; offsets a group no longer holds are deleted through
  ``TableIO.delete_keys`` after that table's MERGE. Every gold table is MERGEd, event tables
  included: the core re-tells an event under the same key when it learns more (a predicted
  expiry confirmed by a tombstone, offset tombstones re-told as ``group_deleted``), so the last
  row per key wins; a forecast withdrawn by a later call has its key deleted.
- The packed landing source plans and decodes each micro-batch once: its plan (refused records,
  counts) and, when the replay query writes the decoded tables, its tasks' decoded rows are
  files of the batch's plan directory, taken by the sink once the batch's job ran and removed
  once everything is written (``LandingPackedReader.batch_output``/``release``); a task whose
  output is missing fails the batch (never a silent loss).
- Every write carries the Delta txn (app id ``offsetlake-stream-<query>``, version = batch id):
  a micro-batch re-run after a crash writes nothing twice (MERGEs of identical rows commit
  nothing, deletes of absent rows delete nothing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pipelines.records.carried import change_writes, output_tables
from pipelines.records.decode import split_union_arrow
from pipelines.records.replay_input import sort_packed
from pipelines.stream.ledger import quarantine_rows
from pipelines.stream.settings import APP_ID_PREFIX
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.stream.ledger import BatchPlan
    from pipelines.stream.settings import StreamSettings
    from pipelines.stream.source_output import SourceOutput
    from pipelines.tableio import TableIO

log = logging.getLogger("offsetlake.stream")


class GoldBatchWriter:
    """``foreachBatch``: the changed gold rows → the gold tables, idempotently per batch id.

    The micro-batch output (changed rows only: small) is collected once, turned into one Arrow
    table per gold table on the driver and MERGEd table by table (``pipelines.tableio``) with the
    txn (app id, batch id).
    """

    def __init__(
        self, io: TableIO, settings: StreamSettings, source: SourceOutput, plans: dict[int, BatchPlan] | None = None
    ) -> None:
        self.io = io
        self.settings = settings
        self.app_id = settings.app_id
        self.write_threads = 4
        self.plans = plans if plans is not None else {}
        self.source = source  # what the source left of each micro-batch beside its rows

    def _landing(self, batch_id: int) -> tuple[dict[str, pa.Table], Callable[[], None]]:
        """What the source left of this batch besides the packs (``source_output``: made once,
        by the source and its tasks): its plan (``pipelines.stream.ledger``), whose refused
        records are added to ``ingest_quarantine`` (``merge_log_rows`` on ``record_id`` with the
        txn: written once, appended unless a record was refused before) and whose counts are
        kept for the progress line, and the decoded tables its tasks wrote. Returns (those
        tables, what removes the batch's files once written)."""
        plan, decoded, release = self.source.take(batch_id)
        if plan is None:
            return decoded, release
        if plan.refused:
            rows = quarantine_rows(plan, f"{self.app_id}/{batch_id}")
            self.io.merge_log_rows("ingest_quarantine", rows, txn_app_id=self.app_id, txn_version=batch_id)
            log.warning(
                "batch %d: %d records refused into ingest_quarantine (%s)",
                batch_id,
                len(plan.refused),
                ", ".join(f"{k} {v}" for k, v in sorted(plan.reasons().items())),
            )
        self.plans[batch_id] = plan
        return decoded, release

    # long: the batch's collect, then its table writes side by side
    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        t0 = time.perf_counter()
        # Runs the decode + stateful replay (one Spark job); one row per bucket call that changed
        # something: its Arrow tables, pickled by the stateful function (our own workers' output).
        output = batch_df.toArrow()
        # what the source left besides (it planned the batch and decoded its files for that job;
        # a crash between the writes repeats none: each is idempotent)
        decoded, release = self._landing(batch_id)
        tables = output_tables(output.column("records").to_pylist())
        timings: dict[str, float] = {"replay": time.perf_counter() - t0}
        written = {name: t.num_rows for name, t in tables.items()}

        def write_chain(chain: list[tuple[str, str, pa.Table]]) -> list[tuple[str, float]]:
            # one table's writes in order (upserts, then the keys to delete: same table, commits in order)
            out = []
            for op, name, rows in chain:
                t1 = time.perf_counter()
                if op == "merge":
                    self.io.merge(name, rows, txn_app_id=self.app_id, txn_version=batch_id)
                else:
                    self.io.delete_keys(name, rows, txn_app_id=self.app_id, txn_version=batch_id)
                out.append((f"{op} {name}", time.perf_counter() - t1))
            return out

        def write_decoded(names: list[str]) -> list[tuple[str, float]]:
            t1 = time.perf_counter()
            merge_decoded(self.io, {n: decoded[n] for n in names}, self.app_id, batch_id)
            return [(n, time.perf_counter() - t1) for n in names]

        chains = change_writes(tables, self.settings.tables)
        # Different tables, independent commits: side by side (delta-rs releases the GIL). The
        # driver-side Arrow source skips a Spark job per table.
        with ThreadPoolExecutor(max_workers=self.write_threads) as pool:
            jobs = [pool.submit(write_chain, c) for c in chains]
            jobs += [pool.submit(write_decoded, [n]) for n in sorted(decoded)]
            for job in jobs:
                timings.update(job.result())
        release()
        log.debug("batch %d rows %s seconds %s", batch_id, written, {k: round(v, 2) for k, v in timings.items()})


class QuarantineBatchWriter:
    """``foreachBatch`` of the side query (registered name ``offsetlake_stream_quarantine``; run
    only when the replay query cannot write them itself: ``job.replay_writes_decoded``): the
    decoded tables the batch's decode stage writes, so every analytics view answers on a
    streaming-only warehouse as on a batch one (``commit_cadence``, ``consumer_lag``,
    ``partition_status_now`` read ``offset_commits``; ``coordinator_load`` also
    ``group_metadata``).

    - Every decoded table (``offset_commits``, ``group_metadata``, ``group_records``,
      ``unsupported_records``, ``quarantine``) is MERGEd on its key (its log position; an
      append when all are new: ``merge_decoded``), the first
      copy of a position in the micro-batch taken: a file landed twice or an overlapping capture
      adds nothing, as the batch's ingest (idempotent on topic/partition/offset) guarantees for
      its decode. (This query reads the landing with Spark's file source, which does not check
      positions: the replay query's plan does, ``pipelines.stream.ledger``.)
    Every write carries the txn (app id, batch id); an empty micro-batch writes nothing.
    """

    def __init__(self, io: TableIO, settings: StreamSettings) -> None:
        self.io = io
        self.app_id = APP_ID_PREFIX + settings.quarantine_query_name

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        arrow = batch_df.toArrow()
        if not arrow.num_rows:
            return
        merge_decoded(self.io, split_union_arrow(arrow), self.app_id, batch_id)


def merge_decoded(io: TableIO, tables: dict[str, pa.Table], app_id: str, batch_id: int) -> None:
    """A micro-batch's rows of the decoded tables, each MERGEd on its key (its log position) — as
    an append when the table holds none of the positions (``TableIO.merge_log_rows``: the cost
    of the new rows, not of the table's size) —, the first copy of a position in the batch
    taken, with the txn (``app_id``, ``batch_id``)."""

    for name, rows in tables.items():
        if rows.num_rows:
            rows = first_per_key(rows, get_spec(name).primary_key)
            io.merge_log_rows(name, rows, txn_app_id=app_id, txn_version=batch_id)


def first_per_key(table: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """``table`` with only the first row of each ``keys`` value, in the table's order (a MERGE
    source must not hold one key twice)."""
    import numpy as np
    import pyarrow as pa

    if _keys_unique(table, keys):
        return table
    index = pa.array(np.arange(table.num_rows, dtype=np.int64))
    first = table.select(list(keys)).append_column("_row", index).group_by(list(keys)).aggregate([("_row", "min")])
    rows = np.sort(first.column("_row_min").to_numpy())
    return table if len(rows) == table.num_rows else table.take(pa.array(rows))


def _keys_unique(table: pa.Table, keys: tuple[str, ...]) -> bool:
    """True when no ``keys`` value repeats, proved by one sort of the packed keys
    (``replay_input.sort_packed``: non-null, non-negative integer keys whose ranges fit, as a log
    position's always do); False when a value repeats or the keys cannot be packed
    (``first_per_key`` then groups). ~50 ms for 2M positions against ~0.3 s for the grouping."""
    import numpy as np
    import pyarrow as pa

    if table.num_rows < 2:
        return True
    cols = [table.column(k) for k in keys]
    if not all(pa.types.is_integer(c.type) and c.null_count == 0 for c in cols):
        return False
    arrays = [c.to_numpy().astype(np.int64, copy=False) for c in cols]
    if any(int(a.min()) < 0 for a in arrays):
        return False
    order = sort_packed(arrays)
    if order is None:
        return False
    same = np.ones(table.num_rows - 1, bool)
    for a in arrays:
        ordered = a[order]
        same &= ordered[1:] == ordered[:-1]
    return not bool(same.any())
