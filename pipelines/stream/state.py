"""The stateful function of the streaming replay: one state bucket's packed records (or its
timer) → its groups' new states and their changed gold rows (``applyInPandasWithState``,
event-time timeouts).

Rules:
- Keyed by state bucket, not by group: ``bucket = pmod(xxhash64(group_id), STATE_BUCKETS)``.
  ``applyInPandasWithState`` pays ~0.6 ms per key and micro-batch for its pandas conversion
  (input, state, output), more than a group's replay on a log of many small groups; a bucket
  call replays its groups together (one commit-run reduction over all their rows, one Arrow
  conversion of their gold rows) and touches only the groups with new records or a due timer.
- State: one row per bucket = (``STATE_LAYOUT_VERSION``, the bucket's groups pickled as
  ``{group_id: (snapshot format, serialize_snapshot bytes, timer ms or None)}``)
  (``STATE_DDL``). The snapshot bytes never change when the core evolves;
  ``deserialize_snapshot`` reads older formats. ``STATE_DDL``, ``STATE_LAYOUT_VERSION`` and
  ``STATE_BUCKETS`` are registered (``check_state_layout``): a checkpoint resumes only with the
  layout it was created with; any other is refused with one line.
- Replay: ``pipelines.records.replay.replay_onto``, the batch job's replay of many groups (commit
  runs reduced with numpy for all the bucket's groups at once, each group's items applied onto
  its snapshot by the core's ``replay_runs``): exactly the core's ``replay``; duplicates and
  overlaps are skipped by the snapshot's last applied position; the groups whose timer is due
  and that have no rows are replayed to the watermark alone (``also``). Never a
  re-implementation.
- Time: ``withWatermark(log_timestamp, stream.watermark_delay_ms)`` and
  ``GroupStateTimeout.EventTimeTimeout`` only (processing-time timeouts never end under
  ``trigger(availableNow)``). A group is replayed when it has new records or when its timer is
  due (watermark > its timer), exactly when a per-group key would have been called; each
  replay states the present at ``as_of = watermark + delay`` (``log_clock.stream_as_of``: the
  newest record time of the batches before) and judges forecasts against the log up to the
  watermark (the evidence horizon); a group's timer is the earlier of its next judgment − 1 and
  its next change of the view − delay − 1 (``coordinator_core.next_times_of``; Spark fires when
  watermark > timer), the bucket's is its groups' earliest. Predicted events carry the computed
  due time, so the result does not depend on when the timer fired. Spark drops records older
  than the previous batch's watermark (the delay must cover the time skew between
  ``__consumer_offsets`` partitions in the input order); the progress counts such drops
  (``pipelines.stream.progress``).
- Equality with the batch job: after ``--available-now`` ends, the final watermark is the newest
  record time − delay, so the stream states the present as of the newest record, as the batch
  job does, and both judge forecasts against the same evidence horizon
  (``log_clock.evidence_horizon``): the gold tables are equal, current state included.
- Output: per call that changed something, its groups' changed gold rows as Arrow tables
  (``gold_tables``: the group's state row, its changed offsets, its events, and
  ``DELETED_OFFSETS``), IPC bytes pickled into one binary row (``OUTPUT_DDL``); the sink
  concatenates each table's parts (``output_tables``).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator_core import ReplaySettings
from pipelines.records import replay_input
from schemas.shapes import STREAM_OUTPUT, STREAM_STATE

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.state import GroupState

    from coordinator_core import GroupSnapshot
    from pipelines.stream.settings import StreamSettings


#: Layout version of the state rows (1: one row per group; 2: one row per state bucket).
STATE_LAYOUT_VERSION = 2
STATE_DDL = STREAM_STATE.ddl()
#: State buckets (the stateful operator's keys); a checkpoint keeps the number it started with.
STATE_BUCKETS = 256

#: Key of the offsets a group no longer holds in the output.
DELETED_OFFSETS = "offsets_current(deleted)"

#: The stateful function's output: one row per call that changed something: its groups'
#: changed gold rows as Arrow IPC bytes per table, pickled (``output_tables`` reads them).
OUTPUT_DDL = STREAM_OUTPUT.ddl()

#: A group's entry in its bucket's state: (snapshot format, snapshot bytes, timer ms or None).
GroupEntry = tuple[int, bytes, "int | None"]


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


def gold_tables(rows: dict[str, list[dict[str, Any]]]) -> dict[str, pa.Table]:
    """Changed gold rows (``BucketReplayer.replay_bucket``) → one Arrow table per gold table
    (``schemas.gold`` columns, ``rows_to_tables`` as the batch job) + ``DELETED_OFFSETS``
    (offsets_current keys)."""
    import pyarrow as pa

    from pipelines.records.gold import GOLD_SPECS, rows_to_tables

    out = rows_to_tables({name: rs for name, rs in rows.items() if name != DELETED_OFFSETS})
    deleted = rows.get(DELETED_OFFSETS)
    if deleted:
        key = GOLD_SPECS["offsets_current"].arrow_schema()
        out[DELETED_OFFSETS] = pa.Table.from_pylist(
            deleted, schema=pa.schema([key.field(c) for c in ("group_id", "topic", "partition")])
        )
    return out


def output_tables(blobs: Sequence[bytes]) -> dict[str, pa.Table]:
    """The stateful function's output rows (``OUTPUT_DDL``) → one Arrow table per gold table
    (+ ``DELETED_OFFSETS``). Buckets hold different groups: their keys never overlap."""
    import pyarrow as pa

    from pipelines.tableio.uri import table_from_ipc

    parts: dict[str, list[pa.Table]] = {}
    for blob in blobs:
        for name, ipc in pickle.loads(blob).items():
            parts.setdefault(name, []).append(table_from_ipc(ipc))
    return {name: ts[0] if len(ts) == 1 else pa.concat_tables(ts) for name, ts in parts.items()}


def encode_bucket(groups: dict[str, GroupEntry]) -> bytes:
    """A bucket's groups as its state row's bytes (``decode_bucket``)."""
    return pickle.dumps(groups, protocol=pickle.HIGHEST_PROTOCOL)


def decode_bucket(blob: bytes) -> dict[str, GroupEntry]:
    """The inverse of ``encode_bucket`` (the state store holds only what this module wrote)."""
    groups: dict[str, GroupEntry] = pickle.loads(blob)
    return groups


@dataclass(frozen=True)
class BucketReplayer:
    """The ``applyInPandasWithState`` function: one bucket's new records (or its timer) →
    state update + its groups' changed gold rows (``OUTPUT_DDL``). Picklable (a frozen
    dataclass)."""

    settings: ReplaySettings
    tables: tuple[str, ...]
    num_partitions: int
    #: ``stream.watermark_delay_ms``: ``as_of`` = watermark + delay (``log_clock.stream_as_of``)
    delay_ms: int = 0

    def replay_bucket(
        self, groups: dict[str, GroupEntry], records_table: pa.Table | None, watermark_ms: int
    ) -> tuple[dict[str, GroupEntry], dict[str, list[dict[str, Any]]], int | None]:
        """The pure part: (the bucket's groups, its new replay-input rows or None, watermark) →
        (its groups after, their changed gold rows per table (core rows, last row per key;
        ``DELETED_OFFSETS``: offsets a group no longer holds; a ``withdrawn`` event row: its key
        is deleted), the bucket's timer ms or None).

        Replayed: the groups with rows, and those whose timer is due (watermark > timer). The
        watermark is "now" and the end of the log (no record of the group older than it is
        still to come): forecasts are made at it, and one whose cleanup it has passed with no
        tombstone is withdrawn — the same rows as the batch job with ``as_of`` = the final
        watermark."""
        from coordinator_core import SNAPSHOT_FORMAT_VERSION, deserialize_snapshot, new_snapshot, serialize_snapshot
        from pipelines.records.replay import event_kinds_for, replay_onto

        def snapshot_of(gid: str) -> GroupSnapshot:
            entry = groups.get(gid)
            return deserialize_snapshot(entry[1]) if entry is not None else new_snapshot(gid)

        from pipelines.log_clock import stream_as_of

        # the present as of the newest record time of the batches before (the batch's as_of at the
        # end); forecasts judged against the log up to the watermark (its evidence horizon)
        as_of = stream_as_of(watermark_ms, self.delay_ms) if self.settings.retention_ms is not None else None
        log_end = watermark_ms if as_of is not None else None
        due = [gid for gid, (_f, _b, timer) in groups.items() if timer is not None and watermark_ms > timer]
        replayed = replay_onto(
            records_table if records_table is not None else replay_input.schema().empty_table(),
            snapshot_of,
            also=due,
            settings=self.settings,
            as_of_ms=as_of,
            event_kinds=event_kinds_for(self.tables),
            log_end_ms=log_end,
        )
        after_groups = dict(groups)
        out: dict[str, list[dict[str, Any]]] = {}
        for before, result in replayed:
            for name, rows in self._changed_rows(before, result).items():
                out.setdefault(name, []).extend(rows)
            timer = self._timer(result.snapshot, watermark_ms)
            after_groups[before.group_id] = (SNAPSHOT_FORMAT_VERSION, serialize_snapshot(result.snapshot), timer)
        timers = [t for _f, _b, t in after_groups.values() if t is not None]
        return after_groups, out, (min(timers) if timers else None)

    def _timer(self, snap: GroupSnapshot, watermark_ms: int) -> int | None:
        """Spark fires when watermark > timer: a judgment ``j`` is due when the watermark (the
        evidence horizon) reaches it, a change of the view ``v`` when ``as_of`` (watermark +
        delay) does."""
        from coordinator_core import next_times_of

        judgment, view = next_times_of(snap, self.settings)
        times = [t - 1 for t in (judgment,) if t is not None] + [
            v - self.delay_ms - 1 for v in (view,) if v is not None
        ]
        return max(min(times), watermark_ms, 1) if times else None

    def _changed_rows(self, before: GroupSnapshot, result: Any) -> dict[str, list[dict[str, Any]]]:
        """One group's replay → its changed gold rows (``replay_bucket``)."""
        import dataclasses

        from pipelines.records.gold import GOLD_SPECS
        from pipelines.records.replay import gold_rows

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
            out[DELETED_OFFSETS] = [{"group_id": after.group_id, "topic": t, "partition": p} for t, p in removed]
        return out

    def __call__(self, key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        from pipelines.runtime.worker_gc import freeze_worker_heap
        from pipelines.tableio.uri import table_to_ipc

        freeze_worker_heap()  # the worker's collection after the task walks only what it allocated
        groups: dict[str, GroupEntry] = {}
        if state.exists:
            layout, raw = state.get
            if int(layout) != STATE_LAYOUT_VERSION:
                raise RuntimeError(f"state bucket {key[0]}: layout {layout}, expected {STATE_LAYOUT_VERSION}")
            groups = decode_bucket(bytes(raw))
        watermark = int(state.getCurrentWatermarkMs())
        table: pa.Table | None = None
        if not state.hasTimedOut:
            packs = [b for pdf in pdfs for b in pdf["records"]]
            if packs:
                table = replay_input.unpack_group(packs)
        after, rows, timer = self.replay_bucket(groups, table, watermark)
        state.update((STATE_LAYOUT_VERSION, encode_bucket(after)))
        if timer is not None:
            state.setTimeoutTimestamp(timer)
        if rows:
            import pandas as pd

            blob = {name: table_to_ipc(t) for name, t in gold_tables(rows).items()}
            yield pd.DataFrame({"records": [pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)]})


#: The file in the replay checkpoint naming its state layout (``check_state_layout``).
LAYOUT_FILE = "offsetlake_state_layout.json"


def check_state_layout(checkpoint: str) -> None:
    """Refuse (one line, exit 2) a replay checkpoint whose state another layout wrote; name a new
    one's layout (``LAYOUT_FILE``) before its query first starts.

    A checkpoint with progress but no layout file was written by layout 1 (one state row per
    group), which Spark cannot read as buckets."""
    import json

    from pyarrow import fs as pafs

    from pipelines.errors import UsageError
    from pipelines.tableio.uri import filesystem

    want = {"layout": STATE_LAYOUT_VERSION, "buckets": STATE_BUCKETS}
    fs, root = filesystem(checkpoint)
    marker, offsets = f"{root}/{LAYOUT_FILE}", f"{root}/offsets"
    found, progress = fs.get_file_info([marker, offsets])
    if found.type == pafs.FileType.File:
        with fs.open_input_stream(marker) as fh:
            have = json.loads(fh.read())
    elif progress.type != pafs.FileType.NotFound:
        have = {"layout": 1}
    else:
        fs.create_dir(root, recursive=True)
        with fs.open_output_stream(marker) as fh:
            fh.write(json.dumps(want).encode())
        return
    if have != want:

        def said(layout: dict[str, Any]) -> str:
            if layout.get("layout") == 1:
                return "layout 1 (one state row per group)"
            return f"layout {layout.get('layout')} ({layout.get('buckets')} state buckets)"

        raise UsageError(
            f"stream: the checkpoint {checkpoint} holds state {said(have)} and this version keeps {said(want)}; "
            "move the checkpoint aside to replay the log into a new one (the gold tables are rewritten "
            "by key), or run the version that wrote it"
        )


def stateful_replay(packed: DataFrame, settings: StreamSettings) -> DataFrame:
    """Packed replay input (``packed_replay_input``) → ``withWatermark`` +
    ``groupBy(state bucket).applyInPandasWithState`` → packed gold rows (``OUTPUT_DDL``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    fn = BucketReplayer(settings.replay, settings.tables, settings.num_partitions, settings.watermark_delay_ms)
    return (
        packed.withWatermark("log_timestamp", f"{settings.watermark_delay_ms} milliseconds")
        .withColumn("state_bucket", F.pmod(F.xxhash64("group_id"), F.lit(STATE_BUCKETS)))
        .groupBy("state_bucket")
        .applyInPandasWithState(fn, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.EventTimeTimeout)
    )
