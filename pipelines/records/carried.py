"""A replay carried across calls: groups' snapshots kept between calls, each call replaying only
the groups with new records or a due timer and telling only what changed. The streaming job's
state buckets (``pipelines.stream.state``) and the batch job's incremental runs
(``pipelines.batch.carried``) share it.

Rules:
- A group's entry is (snapshot format, snapshot, timer ms or None) (``GroupEntry``); a
  bucket's entries are pickled together (``encode_bucket``). The snapshot is written as the
  core's plain values (``snapshot_values``, format ``VALUES_FORMAT_VERSION``): every active
  group's snapshot is read and written on every call, and pickle reads those in C, where the
  byte codec reads varints in Python. Entries a release before this one wrote (formats 1 and 2,
  ``serialize_snapshot`` bytes) still read (``snapshot_of_entry``); neither form's layout
  changes when the core evolves, they only gain fields.
- ``BucketReplayer.replay_bucket`` is the one carried replay: ``pipelines.records.replay.replay_onto``
  onto the groups' snapshots (new groups from ``new_snapshot``), the groups whose timer is due
  (watermark > timer) replayed to the watermark alone. The watermark is the evidence horizon and
  ``as_of`` = watermark + delay (``log_clock.stream_as_of``): the same present as the batch
  job's one replay over the whole log (``ARCHITECTURE.md``, the present tense).
- A call tells only what changed (``changed_rows``): the replayed groups' state rows, the offsets
  they replaced or added, their events (last row per key), ``DELETED_OFFSETS`` (offsets a group
  no longer holds), and a forecast withdrawn by a later call as its row with status
  ``withdrawn`` (its key is to be deleted). ``change_writes`` orders what a writer does with them.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator_core import (
    VALUES_FORMAT_VERSION,
    WITHDRAWN,
    ReplaySettings,
    deserialize_snapshot,
    new_snapshot,
    next_times_of,
    snapshot_from_values,
    snapshot_values,
)
from pipelines.errors import KEPT_STATE
from pipelines.log_clock import stream_as_of
from pipelines.records import replay_input
from pipelines.records.gold import GOLD_SPECS, rows_to_tables
from pipelines.records.replay import event_kinds_for, gold_rows, replay_onto
from pipelines.uri import table_from_ipc

if TYPE_CHECKING:
    import pyarrow as pa

    from coordinator_core import GroupSnapshot

#: Key of the offsets a group no longer holds in the output.
DELETED_OFFSETS = "offsets_current(deleted)"


#: A group's entry in its bucket's state: (snapshot format, snapshot, timer ms or None); the
#: snapshot is ``snapshot_values``'s tuple (format ``VALUES_FORMAT_VERSION``) or, written by an
#: earlier release, ``serialize_snapshot``'s bytes (formats 1 and 2).
GroupEntry = tuple[int, Any, "int | None"]


def snapshot_of_entry(entry: GroupEntry) -> GroupSnapshot:
    """The snapshot a group's entry holds, in whichever form it was written.

    Raises:
        ValueError: an entry this release cannot read, its message starting with ``KEPT_STATE``
            (``pipelines.errors.kept_state_refusal`` finds it in a Spark task's trace): a format
            it does not know (a newer release wrote the state), or a snapshot that does not read.
    """
    form, payload, _timer = entry
    try:
        if form == VALUES_FORMAT_VERSION:
            return snapshot_from_values(payload)
        if form in (1, 2) and isinstance(payload, bytes):
            return deserialize_snapshot(payload)
    except ValueError as exc:
        raise ValueError(f"{KEPT_STATE} has format {form} and does not read: {exc}") from exc
    if form in (1, 2):
        raise ValueError(f"{KEPT_STATE} has format {form} and does not read: a {type(payload).__name__}, not bytes")
    if isinstance(form, int) and form > VALUES_FORMAT_VERSION:
        raise ValueError(
            f"{KEPT_STATE} has format {form}, which this release does not read "
            f"(it reads 1, 2 and {VALUES_FORMAT_VERSION}): a newer release wrote this state"
        )
    raise ValueError(f"{KEPT_STATE} has format {form} and does not read: no release writes that format")


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

    out = rows_to_tables({name: rs for name, rs in rows.items() if name != DELETED_OFFSETS})
    deleted = rows.get(DELETED_OFFSETS)
    if deleted:
        key = GOLD_SPECS["offsets_current"].arrow_schema()
        out[DELETED_OFFSETS] = pa.Table.from_pylist(
            deleted, schema=pa.schema([key.field(c) for c in ("group_id", "topic", "partition")])
        )
    return out


def output_tables(blobs: Sequence[bytes]) -> dict[str, pa.Table]:
    """Pickled ``{table: Arrow IPC bytes}`` blobs (the stream's stateful function's output rows, the batch job's incremental tasks') → one Arrow table per gold table
    (+ ``DELETED_OFFSETS``). Buckets hold different groups: their keys never overlap."""
    import pyarrow as pa

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
    """One carried replay's settings: a bucket's groups and new records (or only its due timers)
    → the groups after and their changed gold rows. Picklable (a frozen dataclass): the stream's
    stateful function (``pipelines.stream.state.StatefulReplayer``) and the batch job's
    incremental tasks carry it to the workers."""

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

        def snapshot_of(gid: str) -> GroupSnapshot:
            entry = groups.get(gid)
            return snapshot_of_entry(entry) if entry is not None else new_snapshot(gid)

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
            after_groups[before.group_id] = (VALUES_FORMAT_VERSION, snapshot_values(result.snapshot), timer)
        timers = [t for _f, _b, t in after_groups.values() if t is not None]
        return after_groups, out, (min(timers) if timers else None)

    def entry_of(self, snap: GroupSnapshot, watermark_ms: int) -> GroupEntry:
        """A group's entry after a replay whose evidence horizon was ``watermark_ms`` (the batch
        job's whole-log replay, which keeps its groups for the next incremental run)."""

        return (VALUES_FORMAT_VERSION, snapshot_values(snap), self._timer(snap, watermark_ms))

    def _timer(self, snap: GroupSnapshot, watermark_ms: int) -> int | None:
        """Spark fires when watermark > timer: a judgment ``j`` is due when the watermark (the
        evidence horizon) reaches it, a change of the view ``v`` when ``as_of`` (watermark +
        delay) does."""

        judgment, view = next_times_of(snap, self.settings)
        times = [t - 1 for t in (judgment,) if t is not None] + [
            v - self.delay_ms - 1 for v in (view,) if v is not None
        ]
        return max(min(times), watermark_ms, 1) if times else None

    def _changed_rows(self, before: GroupSnapshot, result: Any) -> dict[str, list[dict[str, Any]]]:
        """One group's replay → its changed gold rows (``replay_bucket``)."""

        after = result.snapshot
        # Only what changed: the offsets this call replaced or added, and deletions.
        changed = {tp for tp, e in after.offsets.items() if before.offsets.get(tp) != e}
        removed = sorted(tp for tp in before.offsets if tp not in after.offsets)  # deterministic rows
        others = tuple(t for t in self.tables if t != "group_state")
        by_table = gold_rows(
            result,
            tables=others,
            settings=self.settings,
            num_partitions=self.num_partitions,
            keep_withdrawn=True,
            only_offsets=changed,
        )
        if "group_state" in self.tables:  # the state row describes the whole snapshot, not the view
            by_table["group_state"] = [after.to_state_row(settings=self.settings, num_partitions=self.num_partitions)]
        out: dict[str, list[dict[str, Any]]] = {}
        for name, rows in by_table.items():
            if rows:
                key = [c for c in GOLD_SPECS[name].primary_key if c in rows[0]]
                out[name] = _dedupe_last(rows, key)
        if removed and "offsets_current" in self.tables:
            out[DELETED_OFFSETS] = [{"group_id": after.group_id, "topic": t, "partition": p} for t, p in removed]
        return out


def change_writes(tables: dict[str, pa.Table], order: Sequence[str]) -> list[list[tuple[str, str, pa.Table]]]:
    """What a writer does with a call's changed rows (``gold_tables``): chains of
    ``(op, table, rows)`` (op ``merge``: upsert on the table's key; ``delete``: delete these keys),
    each chain one table's writes in order, the chains independent (tables side by side).
    ``offsets_current``'s chain deletes ``DELETED_OFFSETS`` after its upserts; an event table's
    forecasts withdrawn by a later call have their keys deleted after its upserts. ``order``: the
    gold tables in the order to write them."""
    import pyarrow.compute as pc

    chains: list[list[tuple[str, str, pa.Table]]] = []
    for name in order:
        chain: list[tuple[str, str, pa.Table]] = []
        table = tables.get(name)
        if table is not None:
            gone = None
            if "status" in table.column_names:
                mask = pc.fill_null(pc.equal(table.column("status"), WITHDRAWN), False)
                if pc.any(mask).as_py():
                    gone = table.filter(mask).select(["group_id", "event_key"])
                    table = table.filter(pc.invert(mask))
            if table.num_rows:
                chain.append(("merge", name, table))
            if gone is not None:
                chain.append(("delete", name, gone))
        if name == "offsets_current" and DELETED_OFFSETS in tables:
            chain.append(("delete", name, tables[DELETED_OFFSETS]))
        if chain:
            chains.append(chain)
    return chains
