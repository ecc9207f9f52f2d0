"""Replay a group's records into an immutable snapshot, telling what happened (spec §7, §8, §10).

Rules (Kafka's loader, ``GroupMetadataManager.doLoadGroupsAndOffsets`` and the new
``GroupMetadataManager``/``OffsetMetadataManager.replay``):
- One call replays the records of ONE group, in (partition, offset) order.
- A later offset commit for the same (topic, partition) replaces the earlier one, with no
  comparison; an offset tombstone deletes it.
- A group-metadata record with members makes the group Stable, one without members Empty; the
  group's state, protocol and members are exactly the record's.
- A group tombstone makes the group Dead and removes its metadata, NOT its offsets (see below
  for what Kafka 3 then loads).
- Offsets for a group with no metadata record create a simple group: Empty, no protocol type,
  generation 0 (``OffsetMetadataManager.replay`` auto-creates it; the old loader at the end).
- Kafka 4 consumer groups (KIP-848, record types 3-8 and 16 decoded with ``modern=True``) are
  folded by the group's ``coordinator_core.modern.consumer.fold`` fold, one handler per record type;
  the classic fields mirror the live consumer group (``record_handlers.mirror_consumer``), its
  offsets follow the consumer rule (``expiry``), and a group converted between the protocols is
  one group across the change. Share groups (KIP-932, types 10-15) and streams groups
  (KIP-1071, types 17 and 19-23) are folded by their own folds (``coordinator_core.loader.
  modern_groups``: ``modern/share/``, ``streams/``), mirrored into the classic fields the same
  way. Other record types (undecoded modern types, the never-final 9/18/24, key versions
  beyond) and offset values of unknown versions are counted (``unsupported_records``) and
  skipped, never fatal (KIP-915).
- Idempotent: the snapshot remembers the last applied (partition, offset); a record at or below
  it is a duplicate and skipped. Replaying the same input twice, or overlapping inputs, changes
  nothing, and one pass over a log equals any split of it into consecutive chunks.
- Facts and predictions (``settings.retention_ms`` given). The state is the loader fold: only records
  change it. The broker removes offsets and deletes groups only in its periodic cleanup
  (``settings.cleanup_interval_ms``) and writes tombstones for what it removed, so the expiry decider
  (``coordinator_core.expiry``) never applies anything by itself:
  - a logged tombstone of something the rules had due is ``confirmed`` (cause retention);
  - a record of the group arriving after the cleanup window (``due + interval + slack``) that
    is not that tombstone shows the broker did not do it: the prediction is settled as
    contradicted (``settled``, counted in ``predictions_contradicted``), never told, and the rules
    do not predict it again until the group's state gives it another due time; ``log_end_ms``
    (how far the log reaches) contradicts in the same way;
  - at the end (``as_of_ms``) what the rules have due is told as a forecast (status
    ``predicted``, with its cleanup window); due is not dead (``group_fold._finish_view``):
    the returned snapshot, the view *as of* ``as_of_ms``, keeps it until the window has passed,
    then drops it; the fold behind it is kept (``predicted_removed``,
    ``predicted_death_restore``) and restored by the next call, which withdraws (status
    ``withdrawn``, same key) the forecasts it no longer makes. Streaming calls
    ``replay(snapshot, [], as_of_ms=watermark, log_end_ms=watermark)`` on a timer set at
    ``as_of_view.next_judgment_ms``; the watermark must not pass the timestamp of a record of
    the group not yet replayed.
- Kafka 3 or 4 (``settings.coordinator``): ``auto`` takes Kafka 4's rules once the group's records show
  Kafka 4 wrote them (a generation-0 group record). Kafka 3 deletes a simple group with its last
  offset (no group tombstone at generation 0) and loads offsets that outlive their group's
  tombstone into an Empty generation-0 group.
- State changes go through ``coordinator_core.state.transition`` (Kafka's table). Transitions
  that the log does not store (PreparingRebalance, CompletingRebalance) are inferred and
  flagged ``observed=False``.

API: ``replay`` (one group) / ``replay_runs`` (one group, runs of offset commits given as
``CommitRun``: their survivors plus a summary, applied from the survivors when that is exact —
same result as ``replay``; ``coordinator_core.loader.commit_runs``) / ``replay_groups`` (a mixed log) /
``snapshot_as_of`` (the group at time T or log offset O). The broker settings a replay assumes
are one ``ReplaySettings`` value (``coordinator_core.settings``; default ``FACTS_ONLY``: no
retention, so no prediction).

Modules (Kafka's own split: the loader's fold, one handler per record type, the expiry decider):
``snapshot`` (``GroupSnapshot``, gold row shaping), ``snapshot_codec`` (its bytes, on ``wire``),
``group_fold`` (the working state, lifecycle and expiry bookkeeping), ``record_handlers`` (one
handler per record type), ``rebalance`` (the rebalance and member rows), ``commit_runs`` (the
bulk path, behind ``expiry.BulkFold``). This module is the loop and the entry points; the
names of the modules it is carved into are imported from them (or from ``coordinator_core``).

Transactions (KIP-98; ``transactions`` has the rules): a record of a transactional batch
carries its producer id (``LogRecord.producer_id``) and the COMMIT/ABORT control records of the
group's ``__consumer_offsets`` partition come in as ``TxnMarker``s, in log order with the
records. A transactional commit is pending until its producer's COMMIT, dropped on ABORT, and
while pending it is invisible and keeps the group from dying (and, under Kafka 4, its
partition's offset from expiring). A marker applies to every group holding pending offsets of
its producer in its partition: ``replay_groups`` hands each marker to the groups of its partition
that saw the producer; a per-group caller passes the markers of the group's partition (a marker
for a producer with nothing pending changes nothing). Markers are no records of the group: they
advance ``last_position`` (so a repeated marker is a duplicate) but are not counted as applied.
An input without producer ids (Spark's Kafka source schema, which carries no batch attributes)
replays every commit as a plain one.

Performance: the replay mutates a private working state (``GroupFold``) and freezes it once per
call; the commit path is a dict store plus (optionally) one event.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from coordinator_core.codec.modern_records import GroupKey, GroupMemberKey, RegularExpressionKey, group_type
from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    ReplayItem,
    TxnMarker,
    UnknownValue,
)
from coordinator_core.events import Event, ReplayStats
from coordinator_core.loader import as_of_view as _as_of_view
from coordinator_core.loader.commit_runs import CommitRun, RunCounters, unroll
from coordinator_core.loader.group_fold import ALL_EVENT_KINDS, GroupFold
from coordinator_core.loader.modern_groups import MODERN_FOLDED_TYPES, apply_modern_record
from coordinator_core.loader.record_handlers import (
    apply_consumer_record,
    apply_group_metadata,
    apply_group_tombstone,
    apply_offset_commit,
    apply_offset_tombstone,
)
from coordinator_core.loader.snapshot import GroupSnapshot, new_snapshot
from coordinator_core.loader.transactions import apply_txn_marker, apply_txn_offset_commit, drop_pending
from coordinator_core.modern.share.model import SHARE_RECORD_TYPES
from coordinator_core.settings import FACTS_ONLY, Coordinator, ReplaySettings

_NEW = Coordinator.NEW
#: keys of the consumer-group records (``decode_record(..., modern=True)``): folded by the group's
#: ``coordinator_core.modern.consumer.fold`` fold; decoded without ``modern`` they stay unsupported
CONSUMER_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
_CONSUMER_KEYS = (GroupKey, GroupMemberKey, RegularExpressionKey)
_MODERN_KEYS = (GroupKey, GroupMemberKey)

__all__ = ["CONSUMER_RECORD_TYPES", "ReplayResult", "replay", "replay_groups", "replay_runs", "snapshot_as_of"]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What ``replay`` returns: the new snapshot, the events in order, and counters.

    ``group_type_marks``: ``(event index, group type)`` pairs, ascending: events from that index
    on are about a group of that type (``event_group_types``), until the next mark."""

    snapshot: GroupSnapshot
    events: list[Event]
    stats: ReplayStats
    group_type_marks: tuple[tuple[int, str], ...] = ()

    def event_group_types(self) -> list[str]:
        """The kind of group (classic, consumer, share, streams) each event is about, in event
        order: the type of the group record that told it (GroupMetadata: classic; records 3-8/16:
        consumer; share, streams), else (offset records, judged and forecast expiries) the
        type of the group as it stood when the event was told."""
        marks = self.group_type_marks or ((0, self.snapshot.group_type),)
        out: list[str] = []
        for i, (start, kind) in enumerate(marks):
            end = marks[i + 1][0] if i + 1 < len(marks) else len(self.events)
            out.extend([kind] * (end - start))
        return out


def replay(
    snapshot: GroupSnapshot,
    records: Iterable[ReplayItem],
    *,
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    assume_log_start: bool = False,
    log_end_ms: int | None = None,
) -> ReplayResult:
    """Apply one group's records (in (partition, offset) order) to ``snapshot``.

    Args:
        snapshot: where to start (``new_snapshot(group_id)`` for a full rebuild).
        records: the group's records (and the transaction markers of its partition); those at
            or below ``snapshot.last_position`` are skipped.
        settings: the broker settings assumed (``ReplaySettings``): with a ``retention_ms``,
            offset expiry and group death are predicted under ``rules``; ``coordinator`` says
            whose deletion rules (``old``: Kafka 3's, group tombstone only when generation > 0,
            a simple group goes with its last offset; ``new``: Kafka 4's, always a tombstone;
            ``auto``: ``new`` once the group's records show the new coordinator wrote them);
            ``cleanup_interval_ms``: the broker removes what is due at its next cleanup, so a
            prediction is judged only once that has passed. Default ``FACTS_ONLY``: no prediction.
        as_of_ms: after the records, run the expiry decider at this time (needs a retention).
        event_kinds: which event kinds to produce (default all; ``()`` for none, fastest).
        assume_log_start: the input starts where the group was created (an uncompacted log, a
            simulator's output), so a first group record at generation g > 1 means g - 1
            generations that never completed a SyncGroup. Default False: a compacted log's first
            record is taken as it is (``cause = first_record``, no invented history).
        log_end_ms: how far the log reaches (its newest record time): a prediction whose
            cleanup lies before it and that no tombstone confirmed is contradicted. None: only
            the group's own records judge predictions.

    Returns:
        ``ReplayResult(snapshot, events, stats)``.

    Raises:
        ValueError: a record of another group.
        IllegalStateTransitionError: never for a consistent log (a bug guard).
    """
    kinds = ALL_EVENT_KINDS if event_kinds is None else frozenset(event_kinds)
    w = GroupFold(snapshot, settings, kinds, assume_log_start)
    return _finish(w, _fold(w, records), as_of_ms, log_end_ms)


def replay_runs(
    snapshot: GroupSnapshot,
    items: Iterable[ReplayItem | CommitRun],
    *,
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    assume_log_start: bool = False,
    counters: RunCounters | None = None,
    log_end_ms: int | None = None,
) -> ReplayResult:
    """``replay`` over records and ``CommitRun``s: the same result as replaying every record.

    A run is applied from its survivors when that is exact (see ``coordinator_core.loader.commit_runs``),
    else from ``run.expand()``. Build the items with ``compress_commit_runs`` or a vectorised
    equivalent (``pipelines.records.replay``). ``counters`` (optional) tells how many runs were
    compressed or expanded, and why.
    """
    kinds = ALL_EVENT_KINDS if event_kinds is None else frozenset(event_kinds)
    w = GroupFold(snapshot, settings, kinds, assume_log_start)
    records = unroll(items, w, counters if counters is not None else RunCounters())
    return _finish(w, _fold(w, records), as_of_ms, log_end_ms)


def _fold(w: GroupFold, records: Iterable[ReplayItem]) -> ReplayStats:  # long: the hot loop, one piece
    """The loop: each record not yet applied goes to its record type's handler (hot: locals)."""
    gid = w.group_id
    stats = w.stats
    last = w.last_position
    seen = dups = commits = applied = markers = 0
    for rec in records:
        seen += 1
        part = rec.partition
        off = rec.offset
        if last is not None and (part < last[0] or (part == last[0] and off <= last[1])):
            dups += 1
            continue
        if isinstance(rec, TxnMarker):
            markers += 1
            apply_txn_marker(w, rec)
            last = (part, off)
            continue
        key = rec.key
        if key.group != gid:
            raise ValueError(f"record of group {key.group!r} given to the replay of group {gid!r}")
        ts = rec.timestamp_ms
        value = rec.value
        next_check = w.next_check
        if next_check is not None and (next_check < 0 or ts >= next_check):
            # any record, tombstones included: the tombstones of the cleanup a prediction
            # describes lie inside its window, so only what was due before the window is judged
            w.judge(ts)
        if w.first_position is None:
            w.first_position = (part, off)
        if isinstance(key, OffsetCommitKey):
            pid = rec.producer_id
            if value is None:
                if pid is None or w.coordinator is _NEW:
                    if w.pending_txn and w.coordinator is _NEW:
                        drop_pending(w, (key.topic, key.partition))  # Kafka 4: open transactions too
                    apply_offset_tombstone(w, (key.topic, key.partition), ts=ts, pos=(part, off))
                else:
                    drop_pending(w, (key.topic, key.partition), pid)  # Kafka 3's loader
            elif type(value) is OffsetCommitValue:
                commits += 1
                if pid is None:
                    apply_offset_commit(w, (key.topic, key.partition), value, ts, part, off)
                else:
                    apply_txn_offset_commit(w, (key.topic, key.partition), value, ts, part, off, pid)
            else:
                w.unsupported_records += 1
                stats.unsupported_skipped += 1
        elif isinstance(key, GroupMetadataKey):
            _mark_type(w, "classic")
            if value is None:
                apply_group_tombstone(w, ts, (part, off))
            elif type(value) is GroupMetadataValue:
                apply_group_metadata(w, value, ts, (part, off))
            else:
                w.unsupported_records += 1
                stats.unsupported_skipped += 1
            if w.consumer is not None and (value is None or type(value) is GroupMetadataValue):
                apply_consumer_record(w, rec)  # the group has been a consumer group: one group across
            _mark_type(w, w.group_type)
        elif (
            key.version in CONSUMER_RECORD_TYPES
            and isinstance(key, _CONSUMER_KEYS)
            and type(value) is not UnknownValue  # a value version Kafka 4 cannot read: unsupported
        ):
            _mark_type(w, "consumer")
            apply_consumer_record(w, rec)
            _mark_type(w, w.group_type)
        elif key.version in MODERN_FOLDED_TYPES and isinstance(key, _MODERN_KEYS) and type(value) is not UnknownValue:
            _mark_type(w, "share" if key.version in SHARE_RECORD_TYPES else "streams")
            apply_modern_record(w, rec)
            _mark_type(w, w.group_type)
        else:
            kind = group_type(key.version)
            if kind == "share" or kind == "streams":
                w.other_type = kind  # counted, not folded
                _mark_type(w, w.group_type)
            w.unsupported_records += 1
            stats.unsupported_skipped += 1
        if w.tombstone_run and (value is not None or type(key) is not OffsetCommitKey):
            w.tombstone_run.clear()  # a run of offset tombstones ends with any other record
        last = (part, off)
        applied += 1
        w.last_timestamp_ms = ts
    # a compressed run's dropped commits: applied (all above ``last``), then replaced
    skipped = w.skipped_commits
    w.last_position = last
    w.records_applied += applied + skipped
    stats.txn_markers = markers
    stats.records_seen = seen - markers + skipped
    stats.applied = applied + skipped
    stats.duplicates_skipped = dups
    stats.offset_commits = commits + skipped
    return stats


def _mark_type(w: GroupFold, kind: str) -> None:
    """The events told from now on are about a group of type ``kind`` (``ReplayResult.
    event_group_types``). Group records only: offset records keep the current type, so the
    commit path never calls this."""
    marks = w.type_marks
    if marks[-1][1] != kind:
        at = len(w.events)
        if marks[-1][0] == at:
            marks[-1] = (at, kind)
        else:
            marks.append((at, kind))


def _finish(w: GroupFold, stats: ReplayStats, as_of_ms: int | None, log_end_ms: int | None) -> ReplayResult:
    if w.retention_ms is not None:
        at = as_of_ms
        if at is None and (w.emitted_exp or w.emitted_death is not None):
            at = w.last_timestamp_ms  # forecasts an earlier call told are judged at the group's newest record
        if at is not None:
            _as_of_view.finish(w, at, log_end_ms)
    return ReplayResult(w.freeze(), w.events, stats, tuple(w.type_marks))


def replay_groups(
    records: Iterable[ReplayItem],
    *,
    snapshots: Mapping[str, GroupSnapshot] | None = None,
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    assume_log_start: bool = False,
    log_end_ms: int | None = None,
) -> dict[str, ReplayResult]:
    """Replay a log holding many groups: split by group (order kept), replay each.

    Records without a group (an unknown key whose group could not be read) are ignored. A
    transaction marker goes to every group of its partition that has a transactional record of
    its producer in ``records`` or pending offsets of it in its snapshot (Kafka applies it to
    all of them: ``replayEndTransactionMarker``).
    """
    by_group: dict[str, list[ReplayItem]] = {}
    markers: list[TxnMarker] = []
    txn_groups: dict[tuple[int, int], set[str]] = {}  # (partition, producer id) -> groups
    for rec in records:
        if isinstance(rec, TxnMarker):
            markers.append(rec)
            continue
        g = rec.key.group
        if g is None:
            continue
        lst = by_group.get(g)
        if lst is None:
            by_group[g] = [rec]
        else:
            lst.append(rec)
        if rec.producer_id is not None:
            txn_groups.setdefault((rec.partition, rec.producer_id), set()).add(g)
    out: dict[str, ReplayResult] = {}
    base = snapshots or {}
    if markers:
        for g, snap in base.items():
            if snap.pending_txn and snap.last_position is not None:
                for pid in snap.pending_txn:
                    txn_groups.setdefault((snap.last_position[0], pid), set()).add(g)
        for m in markers:
            for g in txn_groups.get((m.partition, m.producer_id), ()):
                by_group.setdefault(g, []).append(m)
    groups = set(by_group) | (set(base) if as_of_ms is not None else set())
    for g in sorted(groups):
        recs = by_group.get(g, [])
        recs.sort(key=lambda r: (r.partition, r.offset))
        out[g] = replay(
            base.get(g) or new_snapshot(g),
            recs,
            settings=settings,
            as_of_ms=as_of_ms,
            event_kinds=event_kinds,
            assume_log_start=assume_log_start,
            log_end_ms=log_end_ms,
        )
    return out


def snapshot_as_of(
    records: Iterable[ReplayItem],
    *,
    group_id: str | None = None,
    as_of_ms: int | None = None,
    as_of_offset: int | None = None,
    settings: ReplaySettings = FACTS_ONLY,
    log_end_ms: int | None = None,
) -> GroupSnapshot:
    """The group as it was at time ``as_of_ms`` and/or log offset ``as_of_offset`` (inclusive).

    Records after the cut are ignored: the loader fold of the rest, then (with
    ``settings.retention_ms``) the view as of ``as_of_ms`` (due is not dead: forecasts whose
    cleanup window has not passed are still held). What happened after the cut is not used as
    evidence: this is what one could have known at that moment (``log_end_ms``: how far the log
    was known to reach, judging forecasts as the batch does). ``group_id`` defaults to the
    first record's group.
    """
    kept: list[ReplayItem] = []
    for rec in records:
        if group_id is None and isinstance(rec, LogRecord):
            group_id = rec.key.group
        if as_of_ms is not None and rec.timestamp_ms > as_of_ms:
            continue
        if as_of_offset is not None and rec.offset > as_of_offset:
            continue
        kept.append(rec)
    if group_id is None:
        raise ValueError("snapshot_as_of needs a group_id when there are no records")
    return replay(
        new_snapshot(group_id), kept, settings=settings, as_of_ms=as_of_ms, event_kinds=(), log_end_ms=log_end_ms
    ).snapshot
