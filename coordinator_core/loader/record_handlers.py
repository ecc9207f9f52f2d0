"""One handler per record type: how each record changes the fold (spec §7, §8).

Rules (Kafka's loader, ``GroupMetadataManager.doLoadGroupsAndOffsets`` and the new
``GroupMetadataManager``/``OffsetMetadataManager.replay``):
- Offset commit: replaces the (topic, partition)'s offset, with no comparison; offsets for a
  group with no live group create a simple group (Empty, no protocol type, generation 0).
- Offset tombstone: deletes it; a removal the rules had due is the broker's cleanup
  (``confirmed``), any other is ``observed``. Kafka 3 (``cleanupGroupMetadata``) deletes an Empty
  generation-0 group with its last offset, without a group tombstone.
- Group tombstone: the group is Dead and loses its metadata, NOT its offsets; Kafka 3's loader
  puts offsets that outlive it into a new Empty generation-0 group.
- Group metadata: the group's state, protocol and members are exactly the record's (members:
  Stable, none: Empty); the transitions between (PreparingRebalance, CompletingRebalance, skipped
  generations) are inferred and told ``observed=False``; a compacted log's first record is
  taken as it is, with no invented history.
- Consumer-group records (Kafka 4, KIP-848): the group's ``consumer_group`` fold applies them
  (one handler per type there); a live consumer group is mirrored into the classic fields
  (Empty or Stable, generation = group epoch, protocol = assignor, subscribed topics, no
  classic members) so the expiry decider and the rows read one group; its deletion (its
  tombstones) takes the group tombstone's path; its events become the gold rows
  (``modern.consumer.rows``).
- Transactional offset commits and markers: ``coordinator_core.loader.transactions``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import NamedTuple

from coordinator_core import expiry as _expiry
from coordinator_core.codec.record_codec import offset_commit_topic_id
from coordinator_core.codec.records import GroupMetadataValue, LogRecord, OffsetCommitValue
from coordinator_core.events import OffsetCommitted, OffsetExpiration
from coordinator_core.loader.group_fold import STATE_VALUE, GroupFold, new_transition
from coordinator_core.loader.rebalance import Before, StartWindow, rebalance_event, tell_members, window_of
from coordinator_core.loader.snapshot import TopicPartition, group_subscribed_topics
from coordinator_core.modern.consumer.events import ConsumerRebalance, ConsumerStateChange
from coordinator_core.modern.consumer.fold import ConsumerGroupFold
from coordinator_core.modern.consumer.model import DEFAULT_CONSUMER_ASSIGNOR, ConsumerGroupState
from coordinator_core.modern.consumer.rows import as_rebalance, as_transition, member_events
from coordinator_core.settings import Coordinator
from coordinator_core.state import GroupState

_E = GroupState.EMPTY
_PR = GroupState.PREPARING_REBALANCE
_CR = GroupState.COMPLETING_REBALANCE
_S = GroupState.STABLE
_D = GroupState.DEAD

#: skipped generations told one by one (two inferred transitions each); a larger jump is told as
#: its last generation, so a record's cost does not depend on its generation number
MAX_TOLD_SKIPPED_GENERATIONS = 64


def apply_offset_commit(
    w: GroupFold, tp: TopicPartition, value: OffsetCommitValue, ts: int, part: int, off: int
) -> None:
    """An offset commit: the hot path (a dict store plus, optionally, one event)."""
    if not w.exists or w.state is _D:
        offset_created_group(w, ts, (part, off))
        w.invalidate_expiry()
    offsets = w.offsets
    if w.commit_events:
        prev = offsets.get(tp)
        w.events.append(
            OffsetCommitted(w.group_id, tp[0], tp[1], value, None if prev is None else prev[0], ts, part, off)
        )
    offsets[tp] = (value, part, off, ts)
    txn = w.txn_offsets
    if txn and tp in txn:
        del txn[tp]  # a plain commit replaced the transaction's offset
    settled = w.settled
    if settled and tp in settled:
        del settled[tp]
    if w.next_check is not None:
        w.lower_next_check(value, tp[0])
    if value.tagged_fields and w.consumer is not None:
        learn_topic_name(w.consumer, tp[0], value)


def learn_topic_name(f: ConsumerGroupFold, topic: str, value: OffsetCommitValue) -> None:
    """A Kafka 4.1+ offset commit names its topic's id (OffsetCommitValue v4 tag 0, TopicId)
    next to the key's topic name: the consumer group's assignments, which name topics by id only
    since Kafka 4.1 wrote no ConsumerGroupPartitionMetadata, are shown by name (an id names one
    topic forever)."""
    topic_id = offset_commit_topic_id(value)
    if topic_id is not None and topic_id not in f.topic_names:
        f.topic_names[topic_id] = topic
        f.name_by_elimination()  # one id fewer unnamed: the last may now be known


def apply_offset_tombstone(w: GroupFold, tp: TopicPartition, *, ts: int, pos: tuple[int, int]) -> None:
    """Apply a logged offset tombstone. A removal the rules had due by ``ts`` (and the log
    had not contradicted) is the broker's cleanup: ``confirmed``, cause retention. Any other
    is ``observed``, cause tombstone (DeleteOffsets, DeleteGroups, a deleted topic)."""
    w.stats.offset_tombstones += 1
    if w.txn_offsets:
        w.txn_offsets.pop(tp, None)
    entry = w.offsets.pop(tp, None)
    if entry is None:
        return  # a tombstone for an offset we never saw (compacted away): nothing to tell
    v = entry[0]
    off, cts = v.offset, v.commit_timestamp
    due = w.offset_due(tp, entry)
    confirmed = due is not None and due <= ts and w.settled.get(tp) != due
    w.settled.pop(tp, None)
    emitted = w.emitted_exp.get(tp)
    if emitted is not None and emitted[:2] == (off, cts):
        del w.emitted_exp[tp]  # this call's row has the same key and replaces it
    # from when the group may die of having no offsets: the same cleanup for a retention
    # removal, strictly after an explicit one (its batch may hold the group tombstone)
    removed_at = w.effective_due(due, entry) if confirmed and due is not None else ts
    if w.last_offset_removal_ms is None or removed_at > w.last_offset_removal_ms:
        w.last_offset_removal_ms = removed_at
    if confirmed:
        assert due is not None
        w.expiration(tp, off, cts, "retention", "confirmed", w.effective_due(due, entry), ts, pos)
    else:
        run = w.tombstone_run
        if run and run[-1][5] != ts:
            run.clear()
        run.append((tp[0], tp[1], off, cts, pos[1], ts))
        w.expiration(tp, off, cts, "tombstone", "observed", None, ts, pos)
    if (
        w.coordinator is Coordinator.OLD
        and w.exists
        and w.state is _E
        and not w.offsets
        and w.generation == 0
        and not w.has_metadata
    ):
        _simple_group_gone(w, ts, pos, confirmed)
    w.invalidate_expiry()


def _simple_group_gone(w: GroupFold, ts: int, pos: tuple[int, int], by_retention: bool) -> None:
    """Kafka 3 (``GroupMetadataManager.cleanupGroupMetadata``, used by expiry, DeleteOffsets
    and topic deletion alike) deletes an Empty group left without offsets in the same step,
    and writes a group tombstone only for generation > 0: a simple group (generation 0)
    whose last offset is tombstoned is gone, with no record of its own."""
    base = _expiry.death_base(w)
    death = base if by_retention and base is not None else ts
    key = f"expiry:{death}" if by_retention else f"{pos[0]}:{pos[1]}:gone"
    if by_retention and w.emitted_death == death:
        w.emitted_death = None
    w.transition(
        _D,
        key=key + ":0",
        ts=ts,
        source="record",
        observed=False,
        cause="offsets_expired" if by_retention else "offsets_deleted",
        pos=pos,
    )
    w.deleted(
        key,
        "confirmed" if by_retention else "observed",
        "offsets_expired" if by_retention else "offsets_deleted",
        generation=w.generation,
        at=ts,
        predicted_ms=death if by_retention else None,
        observed_ms=ts,
        pos=pos,
    )
    w.drop_metadata()
    w.exists = False
    w.state_timestamp_ms = ts
    w.situation_since_ms = ts


def offset_created_group(w: GroupFold, ts: int, pos: tuple[int, int]) -> None:
    w.create(ts, "offset_commit", pos, f"{pos[0]}:{pos[1]}:0")
    if w.metadata_timestamp_ms is None:
        w.created_by_commit = pos


def history_compacted(w: GroupFold, pos: tuple[int, int], g_new: int) -> None:
    """The first group record after offsets only, at a generation that cannot start a group:
    a compacted capture (or one that began late) lost the group's earlier records. The group
    the commits made is re-told (same keys) as what it is: a group that existed, its creation
    and its state before this record unknown; nothing is invented in between."""
    created = w.created_by_commit
    w.created_by_commit = None
    if created is None:
        return
    key = f"{created[0]}:{created[1]}:0"
    if "state_transition" in w.kinds:
        w.events.append(
            new_transition(
                (
                    w.group_id,
                    key,
                    None,
                    STATE_VALUE[_E],
                    None,
                    None,
                    "unknown",
                    False,
                    "history_compacted",
                    created[0],
                    created[1],
                    None,
                    None,
                    None,
                )
            )
        )
    w.lifecycle(
        "group_created",
        event_key=key,
        generation=None,
        timestamp_ms=None,
        observed=False,
        status="unknown",
        cause="history_compacted",
        offsets_remaining=None,
        log_partition=created[0],
        log_offset=created[1],
    )


def apply_group_tombstone(w: GroupFold, ts: int, pos: tuple[int, int]) -> None:
    """A logged group tombstone: the broker deleted the group. Its death is ``confirmed``
    when the rules had it due (an Empty group left without offsets by its cleanup), else
    ``observed`` (DeleteGroups, or a death the rules did not foresee)."""
    w.stats.group_tombstones += 1
    key = f"{pos[0]}:{pos[1]}"
    run = [r for r in w.tombstone_run if r[5] == ts]
    gen = w.generation
    p_ms: int | None = None
    if w.retention_ms is not None and w.exists and w.state is _E and not w.offsets:
        plan = _expiry.plan_expiry(w, ts, w.retention_ms, w.rules, w.coordinator, w.settled, w.settled_death_ms)
        if plan.group_dies:
            p_ms = plan.death_ms
    if w.exists and w.state is not _D:
        w.transition(_D, key=key + ":0", ts=ts, source="record", observed=True, cause="group_tombstone", pos=pos)
    status = "observed" if p_ms is None else "confirmed"
    if p_ms is not None and w.emitted_death == p_ms:
        w.emitted_death = None  # this call's row has the same key and replaces it
    w.drop_metadata()
    w.exists = False
    w.state_timestamp_ms = ts
    w.situation_since_ms = ts
    w.settled_death_ms = None
    w.current_state_timestamp = None
    w.metadata_timestamp_ms = ts
    w.deleted(
        f"expiry:{p_ms}" if p_ms is not None else key,
        status,
        "group_tombstone",
        generation=gen,
        at=ts if p_ms is None else p_ms,
        predicted_ms=p_ms,
        observed_ms=ts,
        group_tombstone=True,
        offsets_remaining=len(w.offsets),
        pos=pos,
    )
    # offsets tombstoned in the same batch (same timestamp) went with the group (DeleteGroups
    # or expiry cleanup): re-tell them with cause group_deleted unless predicted (same key)
    if "offset_expiration" in w.kinds:
        for topic, part, off, cts, lo, _ in run:
            w.events.append(
                OffsetExpiration(
                    w.group_id,
                    f"{topic}:{part}:{off}:{cts}",
                    topic,
                    part,
                    off,
                    cts,
                    "group_deleted",
                    "observed",
                    None,
                    ts,
                    None,
                    pos[0],
                    lo,
                )
            )
    w.tombstone_run.clear()
    if w.offsets and w.coordinator is Coordinator.OLD:
        # Kafka 3's loader: offsets that outlive their group's tombstone load into a new
        # Empty generation-0 group (``doLoadGroupsAndOffsets``: offsets without a group)
        w.create(ts, "offsets_outlived_group", pos, key + ":1")
    w.invalidate_expiry()


# ---------------------------------------------------------------------------------------------
# Group metadata: (1) the generation before the record, (2) the transitions the record implies
# (a reload, the same generation rewritten, or a rebalance to a new generation), (3) the record
# materialised (Kafka's ``loadGroup``), (4) the rebalance and member rows
# ---------------------------------------------------------------------------------------------
class _Record(NamedTuple):
    """One group-metadata record and what every step reads of it."""

    v: GroupMetadataValue
    ts: int
    pos: tuple[int, int]
    base: str
    has_members: bool
    target: GroupState
    end_join: int  # when the join phase ended: the record's current_state_timestamp, else its time
    keys: Iterator[str]  # the record's event keys, "<partition>:<offset>:<n>" in order


def apply_group_metadata(w: GroupFold, v: GroupMetadataValue, ts: int, pos: tuple[int, int]) -> None:
    """A group-metadata record: the group's state, protocol and members are exactly the
    record's; the transitions the log does not store are inferred (``observed=False``)."""
    w.stats.group_records += 1
    base = f"{pos[0]}:{pos[1]}"
    cst = v.current_state_timestamp
    has_members = bool(v.members)
    r = _Record(
        v, ts, pos, base, has_members, _S if has_members else _E, cst if cst is not None else ts,
        map(f"{base}:{{}}".format, itertools.count()),  # lazy and infinite (mypyc builds genexprs eagerly)
    )  # fmt: skip
    prev = Before(w.members, w.leader, w.protocol, w.protocol_type, w.metadata_timestamp_ms)
    first_record = not w.exists and w.metadata_timestamp_ms is None and w.state_timestamp_ms is None and not w.offsets
    history_known = v.generation <= 1 or w.log_start
    prev_gen = _generation_before(w, v.generation, first_record, history_known)
    compacted_prefix = not first_record and w.metadata_timestamp_ms is None and not history_known and w.exists
    if compacted_prefix:
        history_compacted(w, pos, v.generation)
        w.exists = False  # the commits' group was this one, its state unknown until now
    rb_cause: str | None
    window: StartWindow | None = None
    if ((first_record or compacted_prefix) and v.generation > 1 and not w.log_start) or (
        prev_gen is not None and v.generation < prev_gen
    ):
        rb_cause = _reload(w, r)
        prev_gen = None
    elif w.exists and w.state is r.target and prev_gen == v.generation:
        # the same generation rewritten: a static member rejoined with a new member id
        # (updateStaticMemberAndRebalance) or an Empty group rewritten
        rb_cause = "static_member_rejoined" if has_members else None
    else:
        window = window_of(w, v, prev, prev_gen, r.end_join)
        rb_cause = _new_generation(w, r, prev_gen, window)
    _materialise(w, r)
    if rb_cause is not None and "rebalance" in w.kinds:
        w.events.append(rebalance_event(w, v, base, ts, pos, prev_gen, prev, rb_cause, window))
    if has_members and "group_member" in w.kinds:
        tell_members(w, v, base, ts, pos)


def _generation_before(w: GroupFold, g_new: int, first_record: bool, history_known: bool) -> int | None:
    """The generation before this record, as far as the log tells (None: unknown)."""
    if first_record:
        # a new group starts at generation 0 (unless this is a compacted log's first record)
        return 0 if history_known else None
    if w.metadata_timestamp_ms is None and not history_known:
        # the first group record after offsets only (a compacted log keeps older commits
        # before the latest group record): the generations before it are unknown
        return None
    if not w.exists or w.state is _D:
        # deleted: a continuation if the generation goes on, else a new incarnation (gen 0)
        return w.generation if g_new > w.generation else 0
    return w.generation


def _reload(w: GroupFold, r: _Record) -> str | None:
    """No history (a partial/compacted log) or a generation reset: load as Kafka does."""
    if w.exists and w.state is not _D:
        w.transition(
            _D, key=next(r.keys), ts=r.ts, source="record", observed=False, cause="generation_reset", pos=r.pos
        )
    w.exists = False
    observed_source = "current_state_timestamp" if r.v.current_state_timestamp is not None else "record"
    w.transition(
        r.target, key=next(r.keys), ts=r.end_join, source=observed_source, observed=True, cause="first_record",
        pos=r.pos, generation=r.v.generation,
    )  # fmt: skip
    w.state_timestamp_ms = r.end_join
    return "first_record" if r.has_members else None


def _new_generation(w: GroupFold, r: _Record, prev_gen: int | None, window: StartWindow) -> str | None:
    """From the previous generation to the record's: created if need be, PreparingRebalance
    (at the window's estimate, told with the window), each skipped generation, then the join's
    end (Stable with members, else Empty)."""
    g_new = r.v.generation
    g_from = prev_gen if prev_gen is not None else 0
    start_est = window.estimate
    if not w.exists or w.state is _D:
        # Kafka creates the group object (Empty) at the first JoinGroup
        w.create(
            r.end_join if not r.has_members and g_new == g_from else start_est, "group_metadata", r.pos, next(r.keys)
        )
    if not r.has_members and g_new == g_from:
        return None  # the new coordinator's "empty group" record at creation
    w.transition(
        _PR, key=next(r.keys), ts=start_est, source="estimate", observed=False, cause="rebalance_started",
        pos=r.pos, generation=g_from, window=window,
    )  # fmt: skip
    skipped = range(g_from + 1, g_new if prev_gen is not None else g_from + 1)
    if len(skipped) > MAX_TOLD_SKIPPED_GENERATIONS:
        # a jump no real group makes one by one (a corrupt or hostile record): tell the last
        # generation only; the rebalance row still counts them all
        skipped = range(g_new - 1, g_new)
    for g in skipped:
        # a generation whose join completed but whose SyncGroup never did
        for target, cause in ((_CR, "join_completed"), (_PR, "sync_not_completed")):
            w.transition(
                target,
                key=next(r.keys),
                ts=None,
                source="unknown",
                observed=False,
                cause=cause,
                pos=r.pos,
                generation=g,
            )
    return _join_ended(w, r)


def _join_ended(w: GroupFold, r: _Record) -> str:
    """The record's own transitions: CompletingRebalance then Stable (SyncGroup completed), or
    Empty (every member left)."""
    cst = r.v.current_state_timestamp
    g_new = r.v.generation
    if r.has_members:
        w.transition(
            _CR, key=next(r.keys), ts=r.end_join, source="current_state_timestamp" if cst is not None else "estimate",
            observed=cst is not None, cause="join_completed", pos=r.pos, generation=g_new,
        )  # fmt: skip
        w.transition(
            _S,
            key=next(r.keys),
            ts=r.ts,
            source="record",
            observed=True,
            cause="sync_completed",
            pos=r.pos,
            generation=g_new,
        )
        w.state_timestamp_ms = r.ts
        return "new_generation"
    w.transition(
        _E, key=next(r.keys), ts=r.end_join, source="current_state_timestamp" if cst is not None else "record",
        observed=True, cause="all_members_left", pos=r.pos, generation=g_new,
    )  # fmt: skip
    w.state_timestamp_ms = r.end_join
    w.lifecycle(
        "group_emptied", event_key=r.base, generation=g_new, timestamp_ms=r.end_join, observed=True,
        status="observed", cause="all_members_left", offsets_remaining=len(w.offsets),
        log_partition=r.pos[0], log_offset=r.pos[1],
    )  # fmt: skip
    return "ended_empty"


def _materialise(w: GroupFold, r: _Record) -> None:
    """The record becomes the group (Kafka's ``loadGroup``)."""
    v = r.v
    g_new = v.generation
    if w.pending_contradictions:
        # the offsets-only phase was real only if this first group record starts the group's
        # history; a later generation shows compaction removed what came before
        if g_new <= 1 or w.log_start:
            w.predictions_contradicted += w.pending_contradictions
            w.stats.predictions_contradicted += w.pending_contradictions
        w.pending_contradictions = 0
    w.created_by_commit = None
    w.exists = True
    w.situation_since_ms = r.ts
    w.settled_death_ms = None
    if g_new == 0 and not w.new_coordinator_seen:
        # only the new group coordinator writes a generation-0 record (its empty-group record
        # at a classic group's creation): this group's log was written by Kafka 4's
        w.new_coordinator_seen = True
        if w.coordinator_setting == Coordinator.AUTO:
            w.coordinator = Coordinator.NEW
    ptype = v.protocol_type or None
    w.generation = g_new
    w.protocol_type = ptype
    w.protocol = v.protocol
    w.leader = v.leader
    w.members = v.members
    w.current_state_timestamp = v.current_state_timestamp
    w.has_metadata = True
    w.metadata_timestamp_ms = r.ts
    if w.state_timestamp_ms is None:
        w.state_timestamp_ms = r.end_join
    w.subscribed_topics = group_subscribed_topics(ptype, v.members, v.protocol)
    w.invalidate_expiry()


# ---------------------------------------------------------------------------------------------
# Kafka 4 consumer groups (KIP-848): their records go to the group's consumer fold
# ---------------------------------------------------------------------------------------------
def apply_consumer_record(w: GroupFold, rec: LogRecord) -> None:
    """A consumer-group record (types 3-8, 16; ``coordinator_core.modern.consumer.fold`` has one
    handler per type), or a GroupMetadata record of a group that has been a consumer group (an
    online upgrade/downgrade: the fold follows the group across). The classic fields mirror a
    live consumer group (``mirror_consumer``); its deletion is the group tombstone's path."""
    f = w.consumer
    if f is None:
        f = w.consumer = _consumer_fold_from_classic(w, rec.timestamp_ms)
    was_live = f.group_type == "consumer"
    told = f.apply(rec)
    ts, pos = rec.timestamp_ms, (rec.partition, rec.offset)
    if rec.key.version != 2:
        w.stats.group_records += 1
        w.new_coordinator_seen = True  # only Kafka 4's group coordinator writes these
        if w.coordinator_setting is Coordinator.AUTO:
            w.coordinator = Coordinator.NEW
    if f.group_type == "consumer":
        mirror_consumer(w, f, ts)
    elif was_live and rec.key.version != 2:
        apply_group_tombstone(w, ts, pos)  # the consumer group's tombstones removed it
    kinds = w.kinds
    for e in told:
        if isinstance(e, ConsumerStateChange):
            if "state_transition" in kinds and e.to_state != "Dead":  # Dead: the tombstone's row
                w.events.append(as_transition(e))
        elif isinstance(e, ConsumerRebalance):
            if "rebalance" in kinds:
                w.events.append(as_rebalance(e))
            if "group_member" in kinds and e.reconciled_ms is not None:
                w.events.extend(member_events(f.snapshot(), pos[0], pos[1], ts))


def mirror_consumer(w: GroupFold, f: ConsumerGroupFold, ts: int) -> None:
    """The classic fields of a live consumer group, which the expiry decider and the state row
    read: Empty or Stable (any other consumer state is a live, non-empty group), generation =
    group epoch, protocol = the preferred assignor, the subscribed topics; no classic members."""
    state = _E if f.state is ConsumerGroupState.EMPTY else _S
    if not w.exists or w.state is not state:
        w.situation_since_ms = ts
    w.exists = True
    w.state = state
    w.generation = f.group_epoch
    w.protocol_type = _expiry.CONSUMER_PROTOCOL_TYPE
    w.protocol = f.preferred_assignor() or DEFAULT_CONSUMER_ASSIGNOR
    w.leader = None
    w.members = ()
    w.has_metadata = True
    w.subscribed_topics = frozenset(f.subscribed_topics)
    w.current_state_timestamp = None
    w.state_timestamp_ms = f.state_timestamp_ms
    w.metadata_timestamp_ms = ts
    w.invalidate_expiry()


def _consumer_fold_from_classic(w: GroupFold, ts: int) -> ConsumerGroupFold:
    """The consumer fold of a group first seen as classic: it knows the classic group (live, or
    removed by a tombstone in this very write), so the upgrade's records are told as one
    group's conversion. (The removed group's generation is the new group's first epoch.)"""
    f = ConsumerGroupFold(w.group_id)
    for (topic, _), entry in w.offsets.items():
        learn_topic_name(f, topic, entry[0])
    if w.exists and w.state is not _D and w.has_metadata:
        f.group_type = "classic"
        f.classic_generation, f.classic_protocol_type = w.generation, w.protocol_type or ""
        f.classic_members = len(w.members)
    elif not w.has_metadata and w.metadata_timestamp_ms == ts:
        f.removed_type, f.removed_ms = "classic", ts
    return f
