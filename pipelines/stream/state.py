"""The stateful function of the streaming replay: one group's packed records (or its timer) →
its new state and its changed gold rows (``applyInPandasWithState``, event-time timeouts).

Rules:
- State: one row per group = (snapshot format version, ``serialize_snapshot`` bytes)
  (``STATE_DDL``). The state schema never changes when the core evolves;
  ``deserialize_snapshot`` reads older formats. ``STATE_DDL`` and ``STATE_LAYOUT_VERSION`` are
  registered: existing checkpoints resume only while they stay as they are.
- Replay is ``pipelines.records.replay.replay_table`` (rows sorted by (partition, offset), runs of
  offset commits reduced with numpy, exactly the core's ``replay``; duplicates and overlaps are
  skipped by the snapshot's last applied position), never a re-implementation.
- Time: ``withWatermark(log_timestamp, stream.watermark_delay_ms)`` and
  ``GroupStateTimeout.EventTimeTimeout`` only (processing-time timeouts never end under
  ``trigger(availableNow)``). Every call replays the new records, then runs the expiry decider at
  ``as_of = watermark``; the timer is set so that it fires once the watermark reaches the core's
  ``next_expiry_ms``. Predicted events carry the computed due time, so the result does not
  depend on when the timer fired. Spark drops records older than the previous batch's
  watermark (the delay must cover the time skew between ``__consumer_offsets`` partitions in
  the input order); the progress counts such drops (``pipelines.stream.progress``).
- Equality with the batch job: after ``--available-now`` ends, the gold tables equal the batch
  job's on the same input with ``replay.as_of_ms`` = the stream's final watermark (max record
  timestamp − delay): every group was replayed to its last record and every expiry due at or
  before the watermark was applied; nothing due later was.
- Output: per call that changed something, the changed gold rows as core rows per table
  (``GroupReplayer.replay_rows``: the group's state row, its changed offsets, its events, and
  ``DELETED_OFFSETS``), pickled into one binary row (``OUTPUT_DDL``); the driver turns each
  table's rows into Arrow once per micro-batch (``pipelines.stream.sinks.gold_tables``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator_core.settings import ReplaySettings
from pipelines.records import replay_input
from schemas.shapes import STREAM_OUTPUT, STREAM_STATE

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.state import GroupState

    from pipelines.stream.settings import StreamSettings


#: Layout version of the state row (not of the snapshot bytes, which the core versions itself).
STATE_LAYOUT_VERSION = 1
STATE_DDL = STREAM_STATE.ddl()

#: Key of the offsets a group no longer holds in ``GroupReplayer.replay_rows``' output.
DELETED_OFFSETS = "offsets_current(deleted)"

#: The stateful function's output: one row per call that changed something: its changed gold
#: rows (``GroupReplayer.replay_rows``) pickled — no per-call Arrow conversion of a few rows into
#: ~60 union columns; the driver builds each table's Arrow once per micro-batch.
OUTPUT_DDL = STREAM_OUTPUT.ddl()


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
    update + changed gold rows (core rows per table, pickled: ``OUTPUT_DDL``). Picklable (a
    frozen dataclass).
    """

    settings: ReplaySettings
    tables: tuple[str, ...]
    num_partitions: int

    def replay_rows(
        self, group_id: str, snapshot_blob: bytes | None, records_table: pa.Table | None, watermark_ms: int
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
        from pipelines.records.gold import GOLD_SPECS
        from pipelines.records.replay import event_kinds_for, gold_rows, replay_table

        before = deserialize_snapshot(snapshot_blob) if snapshot_blob is not None else new_snapshot(group_id)
        if records_table is None:
            records_table = replay_input.schema().empty_table()
        as_of = watermark_ms if (self.settings.retention_ms is not None and watermark_ms > 0) else None
        # The bulk replay: sorts by (partition, offset), reduces offset-commit runs with numpy
        # and gives exactly the core ``replay`` of every record (pipelines.records.replay).
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
            view, tables=self.tables, settings=self.settings, num_partitions=self.num_partitions, keep_withdrawn=True
        )
        if "group_state" in by_table:  # the state row must describe the whole snapshot
            by_table["group_state"] = [after.to_state_row(settings=self.settings, num_partitions=self.num_partitions)]
        out: dict[str, list[dict[str, Any]]] = {}
        for name, rows in by_table.items():
            if rows:
                key = [c for c in GOLD_SPECS[name].primary_key if c in rows[0]]
                out[name] = _dedupe_last(rows, key)
        if removed and "offsets_current" in self.tables:
            out[DELETED_OFFSETS] = [{"group_id": group_id, "topic": t, "partition": p} for t, p in removed]
        nxt = after.next_judgment_ms(self.settings)
        return serialize_snapshot(after), out, nxt

    def __call__(self, key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        from coordinator_core.replay import SNAPSHOT_FORMAT_VERSION
        from pipelines.worker_gc import freeze_worker_heap

        freeze_worker_heap()  # the worker's collection after the task walks only what it allocated
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
                table = replay_input.unpack_group(packs)
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
        .applyInPandasWithState(fn, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.EventTimeTimeout)
    )
