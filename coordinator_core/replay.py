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
- Unsupported record types (key versions 3-24 and beyond) and offset values of unknown
  versions are counted (``unsupported_records``) and skipped, never fatal (KIP-915).
- Idempotent: the snapshot remembers the last applied (partition, offset); a record at or below
  it is a duplicate and skipped. Replaying the same input twice, or overlapping inputs, changes
  nothing, and one pass over a log equals any split of it into consecutive chunks.
- Facts and predictions (``retention_ms`` given). The state is the loader fold: only records
  change it. The broker removes offsets and deletes groups only in its periodic cleanup
  (``cleanup_interval_ms``) and writes tombstones for what it removed, so the expiry decider
  (``coordinator_core.expiry``) never applies anything by itself:
  - a logged tombstone of something the rules had due is ``confirmed`` (cause retention);
  - a record of the group arriving after the cleanup window (``due + interval + slack``) that
    is not that tombstone shows the broker did not do it: the prediction is settled as
    contradicted (``settled``, counted in ``predictions_contradicted``), never told, and the rules
    do not predict it again until the group's state gives it another due time; ``log_end_ms``
    (how far the log reaches) contradicts in the same way;
  - at the end (``as_of_ms``) one cleanup runs on the fold: what it removes is told as a
    forecast (status ``predicted``) and taken out of the returned snapshot, which is the view
    *as of* ``as_of_ms``; the fold behind it is kept (``predicted_removed``,
    ``predicted_death_restore``) and restored by the next call, which withdraws (status
    ``withdrawn``, same key) the forecasts it no longer makes. Streaming calls
    ``replay(snapshot, [], as_of_ms=watermark, log_end_ms=watermark)`` on a timer set at
    ``GroupSnapshot.next_judgment_ms``; the watermark must not pass the timestamp of a record of
    the group not yet replayed.
- Kafka 3 or 4 (``coordinator``): ``auto`` takes Kafka 4's rules once the group's records show
  Kafka 4 wrote them (a generation-0 group record). Kafka 3 deletes a simple group with its last
  offset (no group tombstone at generation 0) and loads offsets that outlive their group's
  tombstone into an Empty generation-0 group.
- State changes go through ``coordinator_core.state.transition`` (Kafka's table). Transitions
  that the log does not store (PreparingRebalance, CompletingRebalance) are inferred and
  flagged ``observed=False``.

API: ``new_snapshot`` / ``replay`` (one group) / ``replay_runs`` (one group, runs of offset
commits given as ``CommitRun``: their survivors plus a summary, applied from the survivors when
that is exact — same result as ``replay``; ``compress_commit_runs`` builds them) /
``replay_groups`` (a mixed log) /
``snapshot_as_of`` (the group at time T or log offset O) / ``serialize_snapshot`` and
``deserialize_snapshot`` (compact, a leading format-version byte; format v1 is frozen, see the
golden test). ``GroupSnapshot.to_state_row()`` / ``offset_rows()`` and each event's ``to_row()``
are the gold rows (``coordinator_core.events``).

Limitation (spec §9): the input (Spark's Kafka source schema) carries no batch attributes —
no producer id, no transactional flag, no control markers. Every offset commit is treated as a
plain, committed, non-transactional commit: a transactional commit that was later aborted
still replaces the offset here, and pending transactional offsets are not modelled.

Performance: the replay mutates a private working state and freezes it once per call; the
commit path is a dict store plus (optionally) one event.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from coordinator_core import expiry as _expiry
from coordinator_core.events import (
    WITHDRAWN,
    Event,
    GroupLifecycle,
    GroupMember,
    OffsetCommitted,
    OffsetExpiration,
    Rebalance,
    StateTransition,
)
from coordinator_core.partitioner import partition_for
from coordinator_core.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from coordinator_core.state import GroupState, transition
from coordinator_core.wire import fast_constructor

OffsetState = _expiry.OffsetState
# slot-filling constructors of the frozen event classes (``wire.fast_constructor``): the same
# objects at a fraction of a dataclass ``__init__`` (events are built by the hundred thousand)
_new_transition = fast_constructor(StateTransition)
_new_rebalance = fast_constructor(Rebalance)
_new_member_event = fast_constructor(GroupMember)
TopicPartition = tuple[str, int]
#: a predicted-but-not-yet-observed expiry: (offset, commit_timestamp, predicted_ms)
PredictedExpiry = tuple[int, int, int]

SNAPSHOT_FORMAT_VERSION = 2

_E = GroupState.EMPTY
_PR = GroupState.PREPARING_REBALANCE
_CR = GroupState.COMPLETING_REBALANCE
_S = GroupState.STABLE
_D = GroupState.DEAD

_STATE_VALUE: dict[GroupState, str] = {s: s.value for s in GroupState}

_SIT_NONE = _expiry.SIT_NONE
_SIT_UNSUBSCRIBED = _expiry.SIT_UNSUBSCRIBED
_FAR = 1 << 62
_DEFAULT_INTERVAL = _expiry.DEFAULT_CLEANUP_INTERVAL_MS
#: skipped generations told one by one (two inferred transitions each); a larger jump is told as
#: its last generation, so a record's cost does not depend on its generation number
MAX_TOLD_SKIPPED_GENERATIONS = 64
#: ``group.initial.rebalance.delay.ms`` default (KIP-134, Kafka 0.11+)
GROUP_INITIAL_REBALANCE_DELAY_MS = 3_000  # "nothing can be due" for the expiry check

_EMPTY_OFFSETS: Mapping[TopicPartition, OffsetState] = MappingProxyType({})
_EMPTY_PREDICTED: Mapping[TopicPartition, PredictedExpiry] = MappingProxyType({})
_EMPTY_SETTLED: Mapping[TopicPartition, int] = MappingProxyType({})


# ---------------------------------------------------------------------------------------------
# The snapshot
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A group as the replay left it: an immutable value.

    ``state`` is ``Dead`` for a group that does not exist (never seen, like Kafka's
    DescribeGroups answer for an unknown group) or was deleted; ``exists`` tells them apart from
    a live group. ``offsets`` maps (topic, partition) to (value, log_partition, log_offset,
    record_timestamp_ms). Members keep their subscription/assignment blobs.

    The snapshot is the group *as of* the ``as_of_ms`` of the call that made it: the loader fold,
    then one cleanup. What that cleanup removed is kept aside so the next call restores the fold:
    ``predicted_removed`` (the offsets, whole) and ``predicted_death_restore`` (what the group
    held before its forecast death); ``predicted_expired`` / ``predicted_death_ms`` are the
    forecasts told (withdrawn by a later call that no longer makes them). ``settled`` /
    ``settled_death_ms`` are predictions the log contradicted (the broker kept them).
    """

    group_id: str
    state: GroupState = GroupState.DEAD
    exists: bool = False
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int | None = None
    members: tuple[MemberMetadata, ...] = ()
    has_metadata: bool = False
    metadata_timestamp_ms: int | None = None
    state_timestamp_ms: int | None = None
    subscribed_topics: frozenset[str] | None = None
    offsets: Mapping[TopicPartition, OffsetState] = field(default_factory=lambda: _EMPTY_OFFSETS)
    last_position: tuple[int, int] | None = None
    last_timestamp_ms: int | None = None
    records_applied: int = 0
    unsupported_records: int = 0
    last_offset_removal_ms: int | None = None
    predicted_expired: Mapping[TopicPartition, PredictedExpiry] = field(
        default_factory=lambda: _EMPTY_PREDICTED
    )
    predicted_death_ms: int | None = None
    tombstone_run: tuple[tuple[str, int, int, int, int, int], ...] = ()
    # format v2: the loader fold behind the as-of view, and the judged predictions
    predicted_removed: Mapping[TopicPartition, OffsetState] = field(default_factory=lambda: _EMPTY_OFFSETS)
    #: what the view's predicted death dropped: (state_timestamp_ms, protocol_type, protocol, leader,
    #: has_metadata)
    predicted_death_restore: tuple[int | None, str | None, str | None, str | None, bool] | None = None
    settled: Mapping[TopicPartition, int] = field(default_factory=lambda: _EMPTY_SETTLED)
    settled_death_ms: int | None = None
    situation_since_ms: int | None = None
    first_position: tuple[int, int] | None = None
    new_coordinator_seen: bool = False
    predictions_contradicted: int = 0
    #: contradicted while the group had only offsets (never a group record): counted once its
    #: first group record shows that phase was real (generation <= 1), dropped when it shows a
    #: compacted history (the "simple group" was a state compaction made, not the broker's)
    pending_contradictions: int = 0
    #: the commit that created the group while it has had no group record (its creation events'
    #: key): re-told as unknown when the first group record shows compaction removed its history
    created_by_commit: tuple[int, int] | None = None

    # -- derived -----------------------------------------------------------------------------
    @property
    def member_count(self) -> int:
        return len(self.members)

    @property
    def offset_count(self) -> int:
        return len(self.offsets)

    def offset(self, topic: str, partition: int) -> OffsetCommitValue | None:
        """The committed value for (topic, partition), or None."""
        entry = self.offsets.get((topic, partition))
        return None if entry is None else entry[0]

    def next_expiry_ms(self, retention_ms: int | None, rules: str = "current") -> int | None:
        """When the rules next remove something from the group as it stands (as of its
        ``as_of``), leaving out what the log showed the broker kept."""
        return _expiry.next_expiry_ms(self, retention_ms, rules, self.settled, self.settled_death_ms)

    def next_judgment_ms(
        self, retention_ms: int | None, rules: str = "current", cleanup_interval_ms: int = _DEFAULT_INTERVAL
    ) -> int | None:
        """The next time a replay with no new record changes what it says of the group: a
        prediction falls due (the as-of view changes) or one is overdue with no tombstone and
        gets contradicted. Streaming arms its event-time timer here (None: nothing to wait for)."""
        if retention_ms is None:
            return None
        w = _Work(self, retention_ms, rules, frozenset(), False, "auto", cleanup_interval_ms)
        return w.next_timer(self)

    def to_state_row(
        self,
        *,
        retention_ms: int | None = None,
        rules: str = "current",
        num_partitions: int = 50,
    ) -> dict[str, Any]:
        """The ``group_state`` row (see ``coordinator_core.events`` for the columns)."""
        last = self.last_position
        return {
            "group_id": self.group_id,
            "coordinator_partition": partition_for(self.group_id, num_partitions),
            "state": self.state.value,
            "exists": self.exists,
            "generation": self.generation,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "leader": self.leader,
            "current_state_timestamp": self.current_state_timestamp,
            "state_timestamp_ms": self.state_timestamp_ms,
            "members": [_member_struct(m, self.leader, self.protocol_type) for m in self.members],
            "member_count": len(self.members),
            "offset_count": len(self.offsets),
            "subscribed_topics": None if self.subscribed_topics is None else sorted(self.subscribed_topics),
            "last_log_partition": None if last is None else last[0],
            "last_log_offset": None if last is None else last[1],
            "last_timestamp_ms": self.last_timestamp_ms,
            "next_expiry_ms": _expiry.next_expiry_ms(self, retention_ms, rules),
            "records_applied": self.records_applied,
            "unsupported_records": self.unsupported_records,
            "first_log_offset": None if self.first_position is None else self.first_position[1],
            "predictions_contradicted": self.predictions_contradicted + self.pending_contradictions,
            "format_version": SNAPSHOT_FORMAT_VERSION,
        }

    def offset_rows(self) -> list[dict[str, Any]]:
        """``offsets_current`` rows, sorted by (topic, partition)."""
        rows = []
        for (topic, partition), (v, lp, lo, ts) in sorted(self.offsets.items()):
            rows.append(
                {
                    "group_id": self.group_id,
                    "topic": topic,
                    "partition": partition,
                    "offset": v.offset,
                    "leader_epoch": v.leader_epoch,
                    "metadata": v.metadata,
                    "commit_timestamp": v.commit_timestamp,
                    "expire_timestamp": v.expire_timestamp,
                    "value_version": v.version,
                    "log_partition": lp,
                    "log_offset": lo,
                    "timestamp_ms": ts,
                }
            )
        return rows


_SNAPSHOT_FIELDS = (
    "group_id", "state", "exists", "generation", "protocol_type", "protocol", "leader",
    "current_state_timestamp", "members", "has_metadata", "metadata_timestamp_ms", "state_timestamp_ms",
    "subscribed_topics", "offsets", "last_position", "last_timestamp_ms", "records_applied",
    "unsupported_records", "last_offset_removal_ms", "predicted_expired", "predicted_death_ms", "tombstone_run",
    "predicted_removed", "predicted_death_restore", "settled", "settled_death_ms", "situation_since_ms",
    "first_position", "new_coordinator_seen", "predictions_contradicted", "pending_contradictions",
    "created_by_commit",
)  # fmt: skip
if tuple(f.name for f in dataclasses.fields(GroupSnapshot)) != _SNAPSHOT_FIELDS:  # pragma: no cover
    raise RuntimeError("GroupSnapshot's fields changed: update _SNAPSHOT_FIELDS, _Work.freeze and new_snapshot")
# a snapshot is built once per group and replay call: the slot-filling constructor (wire)
_new_group_snapshot = fast_constructor(GroupSnapshot)


def new_snapshot(group_id: str) -> GroupSnapshot:
    """The snapshot of a group before any record (it does not exist yet)."""
    return _new_group_snapshot(  # type: ignore[no-any-return]
        (group_id, _D, False, 0, None, None, None, None, (), False, None, None, None, _EMPTY_OFFSETS, None, None,
         0, 0, None, _EMPTY_PREDICTED, None, (), _EMPTY_OFFSETS, None, _EMPTY_SETTLED, None, None, None, False, 0, 0, None)
    )


# ---------------------------------------------------------------------------------------------
# Embedded consumer protocol (lazy: another module owns the parsers). Pure functions of the
# blob's bytes, cached: a group's blobs recur in record after record (and across groups).
# ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8192)
def _subscribed_topics(blob: bytes) -> frozenset[str] | None:
    from coordinator_core import consumer_protocol

    try:
        return consumer_protocol.subscribed_topics_v0(blob)
    except Exception:  # the broker catches every parse error (computeSubscribedTopics)
        return None


@functools.lru_cache(maxsize=8192)
def _assigned(blob: bytes) -> frozenset[TopicPartition] | None:
    from coordinator_core import consumer_protocol

    if not blob:
        return frozenset()  # Kafka fills missing assignments with an empty array
    try:
        a = consumer_protocol.decode_assignment(blob)
    except Exception:
        return None
    return frozenset((tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions)


@functools.lru_cache(maxsize=8192)
def _sorted_topics(blob: bytes) -> tuple[str, ...] | None:
    topics = _subscribed_topics(blob)
    return None if topics is None else tuple(sorted(topics))


@functools.lru_cache(maxsize=8192)
def _sorted_assigned(blob: bytes) -> tuple[TopicPartition, ...] | None:
    assigned = _assigned(blob)
    return None if assigned is None else tuple(sorted(assigned))


def group_subscribed_topics(
    protocol_type: str | None, members: Sequence[MemberMetadata], protocol: str | None
) -> frozenset[str] | None:
    """Kafka's ``computeSubscribedTopics``: the union of members' v0-parsed topics for a consumer
    group; None if the group is not a consumer group, has no members or no selected protocol
    (``protocolName``), or any parse fails."""
    if protocol_type != _expiry.CONSUMER_PROTOCOL_TYPE or not members or protocol is None:
        return None
    out: set[str] = set()
    for m in members:
        topics = _subscribed_topics(m.subscription)
        if topics is None:
            return None
        out |= topics
    return frozenset(out)


def _member_struct(m: MemberMetadata, leader: str | None, protocol_type: str | None) -> dict[str, Any]:
    # the blobs follow ConsumerProtocol only for protocol type "consumer" (spec §5)
    consumer = protocol_type == _expiry.CONSUMER_PROTOCOL_TYPE
    topics = _subscribed_topics(m.subscription) if consumer else None
    assigned = _assigned(m.assignment) if consumer else None
    return {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "session_timeout": m.session_timeout,
        "rebalance_timeout": m.effective_rebalance_timeout,
        "is_leader": m.member_id == leader,
        "subscribed_topics": None if topics is None else sorted(topics),
        "assigned_partitions": None
        if assigned is None
        else [{"topic": t, "partition": p} for t, p in sorted(assigned)],
    }


def _identity(m: MemberMetadata) -> str:
    # a static member keeps its identity across member ids (KIP-345)
    return "i:" + m.group_instance_id if m.group_instance_id is not None else "m:" + m.member_id


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ReplayStats:
    """Counters of one ``replay`` call."""

    records_seen: int = 0
    applied: int = 0
    duplicates_skipped: int = 0
    unsupported_skipped: int = 0
    offset_commits: int = 0
    offset_tombstones: int = 0
    group_records: int = 0
    group_tombstones: int = 0
    predicted_expirations: int = 0
    predicted_deaths: int = 0
    predictions_contradicted: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """What ``replay`` returns: the new snapshot, the events in order, and counters."""

    snapshot: GroupSnapshot
    events: list[Event]
    stats: ReplayStats


ALL_EVENT_KINDS: frozenset[str] = frozenset(
    {"state_transition", "rebalance", "group_member", "offset_commit", "offset_expiration", "group_lifecycle"}
)


# ---------------------------------------------------------------------------------------------
# Working state
# ---------------------------------------------------------------------------------------------
class _Work:
    """Mutable working copy of a snapshot, private to one ``replay`` call."""

    __slots__ = (
        "commit_events",
        "confirmed_death",
        "coordinator",
        "coordinator_setting",
        "created_by_commit",
        "current_state_timestamp",
        "emitted_death",
        "emitted_exp",
        "events",
        "exists",
        "first_position",
        "generation",
        "grace",
        "group_id",
        "has_metadata",
        "kinds",
        "last_offset_removal_ms",
        "last_position",
        "last_timestamp_ms",
        "leader",
        "log_start",
        "members",
        "metadata_timestamp_ms",
        "new_coordinator_seen",
        "next_check",
        "offsets",
        "pending_contradictions",
        "predicted_death_ms",
        "predicted_death_restore",
        "predicted_expired",
        "predicted_removed",
        "predictions_contradicted",
        "protocol",
        "protocol_type",
        "rb_cache",
        "records_applied",
        "retention_ms",
        "rules",
        "settled",
        "settled_death_ms",
        "sit",
        "situation_since_ms",
        "state",
        "state_timestamp_ms",
        "stats",
        "subscribed_topics",
        "tombstone_run",
        "unsupported_records",
    )

    def __init__(
        self,
        s: GroupSnapshot,
        retention_ms: int | None,
        rules: str,
        kinds: frozenset[str],
        log_start: bool = False,
        coordinator: str = "old",
        cleanup_interval_ms: int = _DEFAULT_INTERVAL,
    ) -> None:
        self.log_start = log_start
        self.coordinator_setting = coordinator
        self.new_coordinator_seen = s.new_coordinator_seen
        self.coordinator = (
            coordinator if coordinator != "auto" else ("new" if s.new_coordinator_seen else "old")
        )
        self.grace = _expiry.judgment_delay_ms(cleanup_interval_ms)
        self.group_id = s.group_id
        self.state = s.state
        self.exists = s.exists
        self.generation = s.generation
        self.protocol_type = s.protocol_type
        self.protocol = s.protocol
        self.leader = s.leader
        self.current_state_timestamp = s.current_state_timestamp
        self.members = s.members
        self.has_metadata = s.has_metadata
        self.metadata_timestamp_ms = s.metadata_timestamp_ms
        self.state_timestamp_ms = s.state_timestamp_ms
        self.subscribed_topics = s.subscribed_topics
        self.offsets: dict[TopicPartition, OffsetState] = dict(s.offsets)
        self.last_position = s.last_position
        self.last_timestamp_ms = s.last_timestamp_ms
        self.records_applied = s.records_applied
        self.unsupported_records = s.unsupported_records
        self.last_offset_removal_ms = s.last_offset_removal_ms
        # the snapshot is the as-of view: restore the loader fold behind it (what its final
        # cleanup removed), and remember which forecasts it told, to confirm or withdraw them
        self.offsets.update(s.predicted_removed)
        if s.predicted_death_ms is not None and s.predicted_death_restore is not None:
            self.state = _E
            self.exists = True
            (self.state_timestamp_ms, self.protocol_type, self.protocol, self.leader, self.has_metadata) = (
                s.predicted_death_restore
            )
        self.emitted_exp: dict[TopicPartition, PredictedExpiry] = dict(s.predicted_expired)
        self.emitted_death: int | None = s.predicted_death_ms
        self.predicted_expired: dict[TopicPartition, PredictedExpiry] = {}
        self.predicted_removed: dict[TopicPartition, OffsetState] = {}
        self.predicted_death_ms: int | None = None
        self.predicted_death_restore: tuple[int | None, str | None, str | None, str | None, bool] | None = None
        self.confirmed_death: int | None = None
        self.settled: dict[TopicPartition, int] = dict(s.settled)
        self.settled_death_ms = s.settled_death_ms
        self.situation_since_ms = s.situation_since_ms
        self.first_position = s.first_position
        self.predictions_contradicted = s.predictions_contradicted
        self.pending_contradictions = s.pending_contradictions
        self.created_by_commit = s.created_by_commit
        self.tombstone_run: list[tuple[str, int, int, int, int, int]] = list(s.tombstone_run)
        self.retention_ms = retention_ms
        self.rules = rules
        self.kinds = kinds
        self.commit_events = "offset_commit" in kinds
        self.events: list[Event] = []
        self.stats = ReplayStats()
        # a lower bound of the next time a record can contradict a prediction (due + grace);
        # -1 = unknown (judge at the next record that is not a tombstone)
        self.next_check: int | None = -1 if retention_ms is not None else None
        self.sit: int | None = None
        # the last rebalance's member maps, keyed by the members tuple they describe: the next
        # record's "before" is this record's "after" (``_rebalance``)
        self.rb_cache: tuple[
            tuple[MemberMetadata, ...], dict[str, MemberMetadata], dict[str, frozenset[TopicPartition] | None] | None
        ] | None = None

    def freeze(self) -> GroupSnapshot:
        # positional, in GroupSnapshot's field order (checked at import: _SNAPSHOT_FIELDS)
        return _new_group_snapshot(  # type: ignore[no-any-return]
            (
                self.group_id,
                self.state,
                self.exists,
                self.generation,
                self.protocol_type,
                self.protocol,
                self.leader,
                self.current_state_timestamp,
                self.members,
                self.has_metadata,
                self.metadata_timestamp_ms,
                self.state_timestamp_ms,
                self.subscribed_topics,
                MappingProxyType(self.offsets) if self.offsets else _EMPTY_OFFSETS,
                self.last_position,
                self.last_timestamp_ms,
                self.records_applied,
                self.unsupported_records,
                self.last_offset_removal_ms,
                MappingProxyType(self.predicted_expired) if self.predicted_expired else _EMPTY_PREDICTED,
                self.predicted_death_ms,
                tuple(self.tombstone_run),
                MappingProxyType(self.predicted_removed) if self.predicted_removed else _EMPTY_OFFSETS,
                self.predicted_death_restore,
                MappingProxyType(self.settled) if self.settled else _EMPTY_SETTLED,
                self.settled_death_ms,
                self.situation_since_ms,
                self.first_position,
                self.new_coordinator_seen,
                self.predictions_contradicted,
                self.pending_contradictions,
                self.created_by_commit,
            )
        )

    # -- events ------------------------------------------------------------------------------
    def _transition(
        self,
        target: GroupState,
        *,
        key: str,
        ts: int | None,
        source: str,
        observed: bool,
        cause: str,
        pos: tuple[int, int] | None,
        generation: int | None = None,
    ) -> None:
        frm: GroupState | None = self.state if self.exists else None
        if frm is not None:
            self.state = transition(self.group_id, frm, target)
        else:
            self.state = target
            self.exists = True
        if "state_transition" in self.kinds:
            self.events.append(
                _new_transition(
                    (
                        self.group_id,
                        key,
                        None if frm is None else _STATE_VALUE[frm],
                        _STATE_VALUE[target],
                        self.generation if generation is None else generation,
                        ts,
                        source,
                        observed,
                        cause,
                        None if pos is None else pos[0],
                        None if pos is None else pos[1],
                    )
                )
            )

    def _lifecycle(self, event: str, **kw: Any) -> None:
        if "group_lifecycle" in self.kinds:
            self.events.append(GroupLifecycle(self.group_id, event=event, **kw))

    def _deleted(
        self,
        key: str,
        status: str,
        cause: str,
        *,
        generation: int | None,
        at: int | None,
        predicted_ms: int | None = None,
        observed_ms: int | None = None,
        group_tombstone: bool = False,
        offsets_remaining: int = 0,
        pos: tuple[int, int] | None = None,
    ) -> None:
        """Tell the group's deletion: observed, confirmed, predicted (a forecast) or withdrawn."""
        self._lifecycle(
            "group_deleted",
            event_key=key,
            generation=generation,
            timestamp_ms=at,
            observed=status in ("observed", "confirmed"),
            status=status,
            cause=cause,
            predicted_ms=predicted_ms,
            observed_ms=observed_ms,
            group_tombstone=group_tombstone,
            offsets_remaining=offsets_remaining,
            log_partition=None if pos is None else pos[0],
            log_offset=None if pos is None else pos[1],
        )

    def _create(self, ts: int, cause: str, pos: tuple[int, int] | None, key: str) -> None:
        """A new group object (Kafka: ``new GroupMetadata(groupId, Empty, time)``)."""
        self.exists = False
        self.state = _E
        self.generation = 0
        self.protocol_type = None
        self.protocol = None
        self.leader = None
        self.members = ()
        self.has_metadata = False
        self.subscribed_topics = None
        self.current_state_timestamp = ts
        self.state_timestamp_ms = ts
        self.situation_since_ms = ts
        self.settled_death_ms = None
        self._transition(_E, key=key, ts=ts, source="record", observed=False, cause=cause, pos=pos)
        self._lifecycle(
            "group_created",
            event_key=key,
            generation=0,
            timestamp_ms=ts,
            observed=False,
            status="observed",
            cause=cause,
            offsets_remaining=len(self.offsets),
            log_partition=None if pos is None else pos[0],
            log_offset=None if pos is None else pos[1],
        )

    # -- offsets -----------------------------------------------------------------------------
    def _effective_due(self, due: int, entry: OffsetState) -> int:
        """When the broker could first act on ``due``: not before the group entered its current
        situation (a cleanup judges the state of its moment). A newer value of the same key does
        not move it: an Empty group's offsets stay due (base: current_state_timestamp) however
        often they are re-committed. Known limit: a key first committed to a group already past
        its due time is taken as due since the situation began, not since that commit."""
        since = self.situation_since_ms
        return due if since is None or since <= due else since

    def _offset_due(self, tp: TopicPartition, entry: OffsetState) -> int | None:
        retention = self.retention_ms
        if retention is None:
            return None
        sit = _expiry.situation(self, self.rules)
        return _expiry.due_ms(entry[0], tp[0], sit, retention, self)

    def _expiration(
        self, tp: TopicPartition, off: int, cts: int, cause: str, status: str,
        predicted_ms: int | None, observed_ms: int | None, pos: tuple[int, int] | None,
    ) -> None:
        if "offset_expiration" in self.kinds:
            self.events.append(
                OffsetExpiration(
                    self.group_id,
                    f"{tp[0]}:{tp[1]}:{off}:{cts}",
                    tp[0],
                    tp[1],
                    off,
                    cts,
                    cause,
                    status,
                    predicted_ms,
                    observed_ms,
                    self.rules if predicted_ms is not None else None,
                    None if pos is None else pos[0],
                    None if pos is None else pos[1],
                )
            )

    def remove_offset(self, tp: TopicPartition, *, ts: int, pos: tuple[int, int]) -> None:
        """Apply a logged offset tombstone. A removal the rules had due by ``ts`` (and the log
        had not contradicted) is the broker's cleanup: ``confirmed``, cause retention. Any other
        is ``observed``, cause tombstone (DeleteOffsets, DeleteGroups, a deleted topic)."""
        self.stats.offset_tombstones += 1
        entry = self.offsets.pop(tp, None)
        if entry is None:
            return  # a tombstone for an offset we never saw (compacted away): nothing to tell
        v = entry[0]
        off, cts = v.offset, v.commit_timestamp
        due = self._offset_due(tp, entry)
        confirmed = due is not None and due <= ts and self.settled.get(tp) != due
        self.settled.pop(tp, None)
        emitted = self.emitted_exp.get(tp)
        if emitted is not None and emitted[:2] == (off, cts):
            del self.emitted_exp[tp]  # this call's row has the same key and replaces it
        # from when the group may die of having no offsets: the same cleanup for a retention
        # removal, strictly after an explicit one (its batch may hold the group tombstone)
        removed_at = self._effective_due(due, entry) if confirmed and due is not None else ts
        if self.last_offset_removal_ms is None or removed_at > self.last_offset_removal_ms:
            self.last_offset_removal_ms = removed_at
        if confirmed:
            assert due is not None
            self._expiration(tp, off, cts, "retention", "confirmed", self._effective_due(due, entry), ts, pos)
        else:
            run = self.tombstone_run
            if run and run[-1][5] != ts:
                run.clear()
            run.append((tp[0], tp[1], off, cts, pos[1], ts))
            self._expiration(tp, off, cts, "tombstone", "observed", None, ts, pos)
        if (
            self.coordinator == "old"
            and self.exists
            and self.state is _E
            and not self.offsets
            and self.generation == 0
            and not self.has_metadata
        ):
            self._simple_group_gone(ts, pos, confirmed)

    def _simple_group_gone(self, ts: int, pos: tuple[int, int], by_retention: bool) -> None:
        """Kafka 3 (``GroupMetadataManager.cleanupGroupMetadata``, used by expiry, DeleteOffsets
        and topic deletion alike) deletes an Empty group left without offsets in the same step,
        and writes a group tombstone only for generation > 0: a simple group (generation 0)
        whose last offset is tombstoned is gone, with no record of its own."""
        base = _expiry._death_base(self)
        death = base if by_retention and base is not None else ts
        key = f"expiry:{death}" if by_retention else f"{pos[0]}:{pos[1]}:gone"
        if by_retention and self.emitted_death == death:
            self.emitted_death = None
        self._transition(
            _D, key=key + ":0", ts=ts, source="record", observed=False,
            cause="offsets_expired" if by_retention else "offsets_deleted", pos=pos,
        )
        self._deleted(
            key, "confirmed" if by_retention else "observed", "offsets_expired" if by_retention else "offsets_deleted",
            generation=self.generation, at=ts, predicted_ms=death if by_retention else None, observed_ms=ts, pos=pos,
        )
        self._drop_metadata()
        self.exists = False
        self.state_timestamp_ms = ts
        self.situation_since_ms = ts

    def offset_created_group(self, ts: int, pos: tuple[int, int]) -> None:
        self._create(ts, "offset_commit", pos, f"{pos[0]}:{pos[1]}:0")
        if self.metadata_timestamp_ms is None:
            self.created_by_commit = pos

    def _history_compacted(self, pos: tuple[int, int], g_new: int) -> None:
        """The first group record after offsets only, at a generation that cannot start a group:
        a compacted capture (or one that began late) lost the group's earlier records. The group
        the commits made is re-told (same keys) as what it is: a group that existed, its creation
        and its state before this record unknown; nothing is invented in between."""
        created = self.created_by_commit
        self.created_by_commit = None
        if created is None:
            return
        key = f"{created[0]}:{created[1]}:0"
        if "state_transition" in self.kinds:
            self.events.append(
                _new_transition(
                    (self.group_id, key, None, _STATE_VALUE[_E], None, None, "unknown", False,
                     "history_compacted", created[0], created[1])
                )
            )
        self._lifecycle(
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

    # -- expiry: the rules' predictions judged against the log --------------------------------
    def judge(self, ts: int) -> None:
        """Before a record at ``ts``: whatever the rules had due so long ago that the broker's
        cleanup has certainly run since (``due + grace < ts``), and that no tombstone confirmed,
        the broker did not remove. Settle it as contradicted: a tombstone that comes later still
        is another removal (DeleteOffsets, DeleteGroups), not that cleanup's."""
        self._contradict_by(ts - self.grace - 1)
        self.next_check = self._next_judgment()
        self.sit = None

    def _contradict_by(self, horizon: int) -> None:
        retention = self.retention_ms
        assert retention is not None
        plan = _expiry.plan_expiry(
            self, horizon, retention, self.rules, self.coordinator, self.settled, self.settled_death_ms
        )
        all_overdue = True
        offsets_only = self.metadata_timestamp_ms is None  # no group record seen yet
        for tp, due in plan.expired:
            if self._effective_due(due, self.offsets[tp]) <= horizon:
                self.settled[tp] = due
                if offsets_only:
                    self.pending_contradictions += 1
                else:
                    self.predictions_contradicted += 1
                    self.stats.predictions_contradicted += 1
            else:
                all_overdue = False
        if plan.group_dies and all_overdue and plan.death_ms is not None:
            since = self.situation_since_ms
            if since is None or since <= horizon:
                self.settled_death_ms = plan.death_ms  # not counted: the counter is of offsets

    def _next_judgment(self) -> int:
        """The earliest time a record could contradict an outstanding prediction (exact)."""
        retention = self.retention_ms
        assert retention is not None
        grace = self.grace
        best = _FAR
        if self.exists and self.state is _E and not self.offsets:
            base = _expiry._death_base(self)
            death = base if base is not None else -1
            if death != self.settled_death_ms:
                since = self.situation_since_ms
                best = max(death + 1, since if since is not None else death) + grace + 1
            return best
        sit = _expiry.situation(self, self.rules)
        if sit == _SIT_NONE:
            return best
        settled = self.settled
        for tp, entry in self.offsets.items():
            due = _expiry.due_ms(entry[0], tp[0], sit, retention, self)
            if due is not None and settled.get(tp) != due:
                t = self._effective_due(due, entry) + grace + 1
                if t < best:
                    best = t
        return best

    def next_timer(self, view: GroupSnapshot) -> int | None:
        """``GroupSnapshot.next_judgment_ms`` on the fold restored from ``view``."""
        retention = self.retention_ms
        assert retention is not None
        times: list[int] = []
        nj = self._next_judgment()
        if nj < _FAR:
            times.append(nj)
        # a fold prediction not yet in the view falls due: the view changes then
        sit = _expiry.situation(self, self.rules)
        if self.exists and self.state is _E and not self.offsets:
            if view.predicted_death_ms is None:
                base = _expiry._death_base(self)
                if base is not None and base != self.settled_death_ms:
                    times.append(base + 1)
        elif sit != _SIT_NONE:
            for tp, entry in self.offsets.items():
                if tp in view.predicted_removed:
                    continue
                due = _expiry.due_ms(entry[0], tp[0], sit, retention, self)
                if due is not None and self.settled.get(tp) != due:
                    times.append(self._effective_due(due, entry))
        return min(times) if times else None

    def finish(self, as_of: int, log_end: int | None) -> None:
        """The group as of ``as_of``: the loader fold followed by one cleanup at ``as_of``.

        What the end of the log already contradicts (``log_end``: the log reaches past the
        cleanup that had to remove it, and holds no tombstone) is settled first. What the cleanup
        at ``as_of`` removes is a forecast: told with status ``predicted``, taken out of the
        view (``offsets``, ``state``) and kept aside (``predicted_removed``) so that a later call
        restores the fold. Forecasts an earlier call told that this one neither confirmed nor
        tells again are withdrawn (a ``withdrawn`` row with the same key)."""
        retention = self.retention_ms
        assert retention is not None
        if log_end is not None:
            self._contradict_by(log_end - self.grace - 1)
        plan = _expiry.plan_expiry(
            self, as_of, retention, self.rules, self.coordinator, self.settled, self.settled_death_ms
        )
        for tp, due in plan.expired:
            entry = self.offsets.pop(tp)
            v = entry[0]
            e = self._effective_due(due, entry)
            self.predicted_removed[tp] = entry
            self.predicted_expired[tp] = (v.offset, v.commit_timestamp, e)
            self.stats.predicted_expirations += 1
            self._expiration(tp, v.offset, v.commit_timestamp, "retention", "predicted", e, None, None)
        if plan.group_dies and plan.death_ms is not None and self.exists and self.state is not _D:
            since = self.situation_since_ms
            death = plan.death_ms if since is None or since <= plan.death_ms else since
            self.stats.predicted_deaths += 1
            self._deleted(
                f"expiry:{plan.death_ms}", "predicted", "offsets_expired", generation=self.generation, at=death,
                predicted_ms=death, group_tombstone=plan.group_tombstone,
            )
            self.predicted_death_ms = plan.death_ms
            self.predicted_death_restore = (
                self.state_timestamp_ms, self.protocol_type, self.protocol, self.leader, self.has_metadata
            )
            self._drop_metadata()
            self.state = _D
            self.exists = False
            self.state_timestamp_ms = death
        for tp, (off, cts, _pms) in self.emitted_exp.items():
            now = self.predicted_expired.get(tp)
            if now is None or now[:2] != (off, cts):
                self._expiration(tp, off, cts, "retention", WITHDRAWN, None, None, None)
        if self.emitted_death is not None and self.emitted_death != self.predicted_death_ms:
            self._deleted(
                f"expiry:{self.emitted_death}", WITHDRAWN, "offsets_expired", generation=self.generation, at=None,
                offsets_remaining=len(self.offsets),
            )

    def invalidate_expiry(self) -> None:
        if self.retention_ms is not None:
            self.next_check = -1
            self.sit = None

    def lower_next_check(self, v: OffsetCommitValue, topic: str) -> None:
        """Keep ``next_check`` a lower bound of every judgment time after a commit (cheap: the
        group situation is cached until the next state change)."""
        retention = self.retention_ms
        if retention is None:
            return
        sit = self.sit
        if sit is None:
            sit = self.sit = _expiry.situation(self, self.rules)
        if sit == _SIT_NONE:
            return
        if sit == _SIT_UNSUBSCRIBED and v.expire_timestamp is None:
            subs = self.subscribed_topics
            if subs is not None and topic in subs:
                return  # a subscribed topic never expires while the group is Stable
        due = _expiry.due_ms(v, topic, sit, retention, self)
        if due is not None and self.next_check is not None:
            since = self.situation_since_ms
            e = (due if since is None or since <= due else since) + self.grace + 1  # _effective_due
            if e < self.next_check:
                self.next_check = e

    def _drop_metadata(self) -> None:
        self.protocol_type = None
        self.protocol = None
        self.leader = None
        self.members = ()
        self.has_metadata = False
        self.subscribed_topics = None

    # -- group metadata ----------------------------------------------------------------------
    def group_tombstone(self, ts: int, pos: tuple[int, int]) -> None:
        """A logged group tombstone: the broker deleted the group. Its death is ``confirmed``
        when the rules had it due (an Empty group left without offsets by its cleanup), else
        ``observed`` (DeleteGroups, or a death the rules did not foresee)."""
        self.stats.group_tombstones += 1
        key = f"{pos[0]}:{pos[1]}"
        run = [r for r in self.tombstone_run if r[5] == ts]
        gen = self.generation
        p_ms: int | None = None
        if self.retention_ms is not None and self.exists and self.state is _E and not self.offsets:
            plan = _expiry.plan_expiry(
                self, ts, self.retention_ms, self.rules, self.coordinator, self.settled, self.settled_death_ms
            )
            if plan.group_dies:
                p_ms = plan.death_ms
        if self.exists and self.state is not _D:
            self._transition(
                _D, key=key + ":0", ts=ts, source="record", observed=True, cause="group_tombstone", pos=pos
            )
        status = "observed" if p_ms is None else "confirmed"
        if p_ms is not None and self.emitted_death == p_ms:
            self.emitted_death = None  # this call's row has the same key and replaces it
        self._drop_metadata()
        self.exists = False
        self.state_timestamp_ms = ts
        self.situation_since_ms = ts
        self.settled_death_ms = None
        self.current_state_timestamp = None
        self.metadata_timestamp_ms = ts
        self._deleted(
            f"expiry:{p_ms}" if p_ms is not None else key, status, "group_tombstone", generation=gen,
            at=ts if p_ms is None else p_ms, predicted_ms=p_ms, observed_ms=ts, group_tombstone=True,
            offsets_remaining=len(self.offsets), pos=pos,
        )
        # offsets tombstoned in the same batch (same timestamp) went with the group (DeleteGroups
        # or expiry cleanup): re-tell them with cause group_deleted unless predicted (same key)
        if "offset_expiration" in self.kinds:
            for topic, part, off, cts, lo, _ in run:
                self.events.append(
                    OffsetExpiration(
                        self.group_id,
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
        self.tombstone_run.clear()
        if self.offsets and self.coordinator == "old":
            # Kafka 3's loader: offsets that outlive their group's tombstone load into a new
            # Empty generation-0 group (``doLoadGroupsAndOffsets``: offsets without a group)
            self._create(ts, "offsets_outlived_group", pos, key + ":1")
        self.invalidate_expiry()

    def group_metadata(self, v: GroupMetadataValue, ts: int, pos: tuple[int, int]) -> None:
        self.stats.group_records += 1
        base = f"{pos[0]}:{pos[1]}"
        seq = 0

        def k() -> str:
            nonlocal seq
            seq += 1
            return f"{base}:{seq - 1}"

        first_record = (
            not self.exists
            and self.metadata_timestamp_ms is None
            and self.state_timestamp_ms is None
            and not self.offsets
        )
        prev_members = self.members
        prev_leader = self.leader
        prev_protocol = self.protocol
        prev_ptype = self.protocol_type
        prev_meta_ts = self.metadata_timestamp_ms
        g_new = v.generation
        ptype = v.protocol_type or None
        cst = v.current_state_timestamp
        has_members = bool(v.members)
        target = _S if has_members else _E
        end_join = cst if cst is not None else ts

        # the generation before this record, as far as the log tells
        prev_gen: int | None
        history_known = g_new <= 1 or self.log_start
        if first_record:
            # a new group starts at generation 0 (unless this is a compacted log's first record)
            prev_gen = 0 if history_known else None
        elif self.metadata_timestamp_ms is None and not history_known:
            # the first group record after offsets only (a compacted log keeps older commits
            # before the latest group record): the generations before it are unknown
            prev_gen = None
        elif not self.exists or self.state is _D:
            # deleted: a continuation if the generation goes on, else a new incarnation (gen 0)
            prev_gen = self.generation if g_new > self.generation else 0
        else:
            prev_gen = self.generation

        rb_cause: str | None = None
        compacted_prefix = (
            not first_record and self.metadata_timestamp_ms is None and not history_known and self.exists
        )
        if compacted_prefix:
            self._history_compacted(pos, g_new)
            self.exists = False  # the commits' group was this one, its state unknown until now
        if (
            ((first_record or compacted_prefix) and g_new > 1 and not self.log_start)
            or (prev_gen is not None and g_new < prev_gen)
        ):
            # no history (a partial/compacted log) or a generation reset: load as Kafka does
            if self.exists and self.state is not _D:
                self._transition(
                    _D, key=k(), ts=ts, source="record", observed=False, cause="generation_reset", pos=pos
                )
            self.exists = False
            self._transition(
                target,
                key=k(),
                ts=end_join,
                source="current_state_timestamp" if cst is not None else "record",
                observed=True,
                cause="first_record",
                pos=pos,
                generation=g_new,
            )
            rb_cause = "first_record" if has_members else None
            prev_gen = None
            self.state_timestamp_ms = end_join
        elif self.exists and self.state is target and prev_gen == g_new:
            # the same generation rewritten: a static member rejoined with a new member id
            # (updateStaticMemberAndRebalance) or an Empty group rewritten
            if has_members:
                rb_cause = "static_member_rejoined"
        else:
            g_from = prev_gen if prev_gen is not None else 0
            start_est = _start_estimate(v.members or prev_members, end_join, prev_meta_ts, not prev_members)
            if not self.exists or self.state is _D:
                # Kafka creates the group object (Empty) at the first JoinGroup
                self._create(
                    end_join if not has_members and g_new == g_from else start_est, "group_metadata", pos, k()
                )
            if not has_members and g_new == g_from:
                pass  # the new coordinator's "empty group" record at creation
            else:
                self._transition(
                    _PR,
                    key=k(),
                    ts=start_est,
                    source="estimate",
                    observed=False,
                    cause="rebalance_started",
                    pos=pos,
                    generation=g_from,
                )
                skipped = range(g_from + 1, g_new if prev_gen is not None else g_from + 1)
                if len(skipped) > MAX_TOLD_SKIPPED_GENERATIONS:
                    # a jump no real group makes one by one (a corrupt or hostile record): tell
                    # the last generation only; the rebalance row still counts them all
                    skipped = range(g_new - 1, g_new)
                for g in skipped:
                    # a generation whose join completed but whose SyncGroup never did
                    self._transition(
                        _CR,
                        key=k(),
                        ts=None,
                        source="unknown",
                        observed=False,
                        cause="join_completed",
                        pos=pos,
                        generation=g,
                    )
                    self._transition(
                        _PR,
                        key=k(),
                        ts=None,
                        source="unknown",
                        observed=False,
                        cause="sync_not_completed",
                        pos=pos,
                        generation=g,
                    )
                if has_members:
                    self._transition(
                        _CR,
                        key=k(),
                        ts=end_join,
                        source="current_state_timestamp" if cst is not None else "estimate",
                        observed=cst is not None,
                        cause="join_completed",
                        pos=pos,
                        generation=g_new,
                    )
                    self._transition(
                        _S,
                        key=k(),
                        ts=ts,
                        source="record",
                        observed=True,
                        cause="sync_completed",
                        pos=pos,
                        generation=g_new,
                    )
                    rb_cause = "new_generation"
                    self.state_timestamp_ms = ts
                else:
                    self._transition(
                        _E,
                        key=k(),
                        ts=end_join,
                        source="current_state_timestamp" if cst is not None else "record",
                        observed=True,
                        cause="all_members_left",
                        pos=pos,
                        generation=g_new,
                    )
                    rb_cause = "ended_empty"
                    self.state_timestamp_ms = end_join
                    self._lifecycle(
                        "group_emptied",
                        event_key=base,
                        generation=g_new,
                        timestamp_ms=end_join,
                        observed=True,
                        status="observed",
                        cause="all_members_left",
                        offsets_remaining=len(self.offsets),
                        log_partition=pos[0],
                        log_offset=pos[1],
                    )

        if self.pending_contradictions:
            # the offsets-only phase was real only if this first group record starts the group's
            # history; a later generation shows compaction removed what came before
            if g_new <= 1 or self.log_start:
                self.predictions_contradicted += self.pending_contradictions
                self.stats.predictions_contradicted += self.pending_contradictions
            self.pending_contradictions = 0
        self.created_by_commit = None
        # materialise the record (Kafka's loadGroup)
        self.exists = True
        self.situation_since_ms = ts
        self.settled_death_ms = None
        if g_new == 0 and not self.new_coordinator_seen:
            # only the new group coordinator writes a generation-0 record (its empty-group record
            # at a classic group's creation): this group's log was written by Kafka 4's
            self.new_coordinator_seen = True
            if self.coordinator_setting == "auto":
                self.coordinator = "new"
        self.generation = g_new
        self.protocol_type = ptype
        self.protocol = v.protocol
        self.leader = v.leader
        self.members = v.members
        self.current_state_timestamp = cst
        self.has_metadata = True
        self.metadata_timestamp_ms = ts
        if self.state_timestamp_ms is None:
            self.state_timestamp_ms = end_join
        self.subscribed_topics = group_subscribed_topics(ptype, v.members, v.protocol)
        self.invalidate_expiry()

        if rb_cause is not None and "rebalance" in self.kinds:
            self.events.append(
                self._rebalance(
                    v,
                    base,
                    ts,
                    pos,
                    prev_gen,
                    prev_members,
                    prev_leader,
                    prev_protocol,
                    prev_ptype,
                    prev_meta_ts,
                    rb_cause,
                )
            )
        if has_members and "group_member" in self.kinds:
            consumer = ptype == _expiry.CONSUMER_PROTOCOL_TYPE
            for m in v.members:
                self.events.append(
                    _new_member_event(
                        (
                            self.group_id,
                            f"{base}:{m.member_id}",
                            g_new,
                            m.member_id,
                            m.group_instance_id,
                            m.client_id,
                            m.client_host,
                            m.session_timeout,
                            m.effective_rebalance_timeout,
                            m.member_id == v.leader,
                            v.protocol,
                            _sorted_topics(m.subscription) if consumer else None,
                            _sorted_assigned(m.assignment) if consumer else None,
                            ts,
                            pos[0],
                            pos[1],
                        )
                    )
                )

    def _rebalance(
        self,
        v: GroupMetadataValue,
        base: str,
        ts: int,
        pos: tuple[int, int],
        prev_gen: int | None,
        prev_members: tuple[MemberMetadata, ...],
        prev_leader: str | None,
        prev_protocol: str | None,
        prev_ptype: str | None,
        prev_meta_ts: int | None,
        cause: str,
    ) -> Rebalance:
        cache = self.rb_cache
        a_before: dict[str, frozenset[TopicPartition] | None] | None = None
        if cache is not None and cache[0] is prev_members:
            before, a_before = cache[1], cache[2]
        else:
            before = {_identity(m): m for m in prev_members}
        after = {_identity(m): m for m in v.members}
        joined = tuple(sorted(after[i].member_id for i in after.keys() - before.keys()))
        left = tuple(sorted(before[i].member_id for i in before.keys() - after.keys()))
        static = tuple(
            sorted(
                after[i].group_instance_id or ""
                for i in after.keys() & before.keys()
                if i.startswith("i:") and after[i].member_id != before[i].member_id
            )
        )
        ptype = v.protocol_type or None
        consumer = ptype == _expiry.CONSUMER_PROTOCOL_TYPE or (
            not v.members and prev_ptype == _expiry.CONSUMER_PROTOCOL_TYPE
        )
        gained: list[tuple[str, str, int]] = []
        lost: list[tuple[str, str, int]] = []
        moved: int | None = None
        known = False
        a_after: dict[str, frozenset[TopicPartition] | None] | None = None
        if consumer:
            if a_before is None:
                a_before = {i: _assigned(m.assignment) for i, m in before.items()}
            a_after = {i: _assigned(m.assignment) for i, m in after.items()}
            known = all(x is not None for x in a_before.values()) and all(
                x is not None for x in a_after.values()
            )
            if known:
                owner_before: dict[TopicPartition, str] = {}
                for i, parts in a_before.items():
                    for tp in parts or ():
                        owner_before[tp] = i
                moved = 0
                for i, parts in a_after.items():
                    new = parts or frozenset()
                    old = a_before.get(i) or frozenset()
                    mid = after[i].member_id
                    gained.extend((mid, t, p) for t, p in sorted(new - old))
                    for tp in new:
                        ob = owner_before.get(tp)
                        if ob is not None and ob != i:
                            moved += 1
                for i, parts in a_before.items():
                    old = parts or frozenset()
                    new = a_after.get(i) or frozenset()
                    mid = before[i].member_id
                    lost.extend((mid, t, p) for t, p in sorted(old - new))
        self.rb_cache = (v.members, after, a_after)
        cst = v.current_state_timestamp
        end_join = cst if cst is not None else ts
        start: int | None
        if cause == "first_record":
            start = None
        elif cause == "static_member_rejoined":
            start = ts
        else:
            start = _start_estimate(v.members or prev_members, end_join, prev_meta_ts, not prev_members)
        skipped: int | None = None
        if prev_gen is not None and v.generation >= prev_gen:
            skipped = max(0, v.generation - prev_gen - 1)
        return _new_rebalance(  # type: ignore[no-any-return]
            (
                self.group_id,
                base,
                v.generation,
                prev_gen,
                skipped,
                start,
                ts,
                cst if v.members else None,
                None if prev_meta_ts is None else ts - prev_meta_ts,
                len(prev_members),
                len(v.members),
                joined,
                left,
                static,
                v.leader,
                prev_leader,
                ptype,
                v.protocol,
                prev_protocol,
                known,
                moved,
                tuple(gained),
                tuple(lost),
                not v.members,
                cause,
                pos[0],
                pos[1],
            )
        )


def _start_estimate(
    members: Sequence[MemberMetadata], end_join: int, prev_meta_ts: int | None, from_empty: bool
) -> int:
    """Earliest possible start of a rebalance: the join phase lasts at most the largest
    rebalance timeout (DelayedJoin). From Empty, ``InitialDelayedJoin`` waits
    ``group.initial.rebalance.delay.ms`` and re-arms (by at most that delay) only while new members
    keep arriving, each re-arm for a member that joined during the previous delay: with n members
    the join phase lasts at most n delays, and never more than max(delay, rebalance timeout). It
    began after the previous group record."""
    longest = max((m.effective_rebalance_timeout for m in members), default=0)
    if from_empty:
        delay = GROUP_INITIAL_REBALANCE_DELAY_MS
        longest = min(max(longest, delay), delay * max(len(members), 1))
    start = end_join - longest
    if prev_meta_ts is not None and prev_meta_ts > start:
        start = prev_meta_ts
    return min(start, end_join)


# ---------------------------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------------------------
def replay(
    snapshot: GroupSnapshot,
    records: Iterable[LogRecord],
    *,
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    assume_log_start: bool = False,
    coordinator: str = _expiry.DEFAULT_COORDINATOR,
    cleanup_interval_ms: int = _DEFAULT_INTERVAL,
    log_end_ms: int | None = None,
) -> ReplayResult:
    """Apply one group's records (in (partition, offset) order) to ``snapshot``.

    Args:
        snapshot: where to start (``new_snapshot(group_id)`` for a full rebuild).
        records: the group's records; those at or below ``snapshot.last_position`` are skipped.
        retention_ms: predict offset expiry and group death with this retention (None: only what
            the log says).
        rules: expiry rule set, one of ``coordinator_core.expiry.RULE_SETS``.
        as_of_ms: after the records, run the expiry decider at this time (needs ``retention_ms``).
        event_kinds: which event kinds to produce (default all; ``()`` for none, fastest).
        assume_log_start: the input starts where the group was created (an uncompacted log, a
            simulator's output), so a first group record at generation g > 1 means g - 1
            generations that never completed a SyncGroup. Default False: a compacted log's first
            record is taken as it is (``cause = first_record``, no invented history).
        coordinator: whose rules: ``old`` (Kafka 3's GroupCoordinator: group tombstone only when
            generation > 0, a simple group goes with its last offset), ``new`` (Kafka 4's
            group-coordinator: always a tombstone) or ``auto`` (``new`` once the group's records
            show the new coordinator wrote them, else ``old``).
        cleanup_interval_ms: ``offsets.retention.check.interval.ms``: the broker removes what is
            due at its next cleanup, so a prediction is judged only once that has passed.
        log_end_ms: how far the log reaches (its newest record time): a prediction whose
            cleanup lies before it and that no tombstone confirmed is contradicted. None: only
            the group's own records judge predictions.

    Returns:
        ``ReplayResult(snapshot, events, stats)``.

    Raises:
        ValueError: a record of another group, or an unknown rule set.
        IllegalStateTransitionError: never for a consistent log (a bug guard).
    """
    return _replay(
        snapshot, records, retention_ms, rules, as_of_ms, event_kinds, assume_log_start, coordinator, None,
        cleanup_interval_ms, log_end_ms,
    )


def _replay(
    snapshot: GroupSnapshot,
    items: Iterable[LogRecord] | Iterable[LogRecord | CommitRun],
    retention_ms: int | None,
    rules: str,
    as_of_ms: int | None,
    event_kinds: Collection[str] | None,
    assume_log_start: bool,
    coordinator: str,
    counters: RunCounters | None,
    cleanup_interval_ms: int = _DEFAULT_INTERVAL,
    log_end_ms: int | None = None,
) -> ReplayResult:
    """``replay`` (``counters`` None: plain records) and ``replay_runs`` (runs unrolled here)."""
    _expiry.check_rules(rules)
    _expiry.check_coordinator(coordinator, allow_auto=True)
    if cleanup_interval_ms <= 0:
        raise ValueError(f"cleanup_interval_ms must be positive, got {cleanup_interval_ms}")
    kinds = ALL_EVENT_KINDS if event_kinds is None else frozenset(event_kinds)
    w = _Work(snapshot, retention_ms, rules, kinds, assume_log_start, coordinator, cleanup_interval_ms)
    skipped = [0]  # commits of compressed runs this call did not see one by one
    records: Iterable[LogRecord]
    if counters is None:
        records = items  # type: ignore[assignment]
    else:
        records = _unroll(items, w, counters, skipped)
    gid = snapshot.group_id
    offsets = w.offsets
    stats = w.stats
    events = w.events
    commit_events = w.commit_events
    settled = w.settled
    last = w.last_position
    seen = 0
    dups = 0
    commits = 0
    applied = 0
    for rec in records:
        seen += 1
        part = rec.partition
        off = rec.offset
        if last is not None and (part < last[0] or (part == last[0] and off <= last[1])):
            dups += 1
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
            tp = (key.topic, key.partition)
            if value is None:
                w.remove_offset(tp, ts=ts, pos=(part, off))
                w.invalidate_expiry()
            elif type(value) is OffsetCommitValue:
                commits += 1
                if not w.exists or w.state is _D:
                    w.offset_created_group(ts, (part, off))
                    w.invalidate_expiry()
                prev = offsets.get(tp)
                offsets[tp] = (value, part, off, ts)
                if settled and tp in settled:
                    del settled[tp]
                if commit_events:
                    events.append(
                        OffsetCommitted(
                            gid, tp[0], tp[1], value, None if prev is None else prev[0], ts, part, off
                        )
                    )
                if w.next_check is not None:
                    w.lower_next_check(value, tp[0])
            else:
                w.unsupported_records += 1
                stats.unsupported_skipped += 1
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                w.group_tombstone(ts, (part, off))
            elif type(value) is GroupMetadataValue:
                w.group_metadata(value, ts, (part, off))
            else:
                w.unsupported_records += 1
                stats.unsupported_skipped += 1
        else:
            w.unsupported_records += 1
            stats.unsupported_skipped += 1
        if w.tombstone_run and (value is not None or type(key) is not OffsetCommitKey):
            w.tombstone_run.clear()  # a run of offset tombstones ends with any other record
        last = (part, off)
        applied += 1
        w.last_timestamp_ms = ts
    if skipped[0]:
        # a compressed run's dropped commits: applied (all above ``last``), then replaced
        seen += skipped[0]
        applied += skipped[0]
        commits += skipped[0]
    w.last_position = last
    w.records_applied += applied
    stats.records_seen = seen
    stats.applied = applied
    stats.duplicates_skipped = dups
    stats.offset_commits = commits
    if retention_ms is not None:
        at = as_of_ms
        if at is None and (w.emitted_exp or w.emitted_death is not None):
            at = w.last_timestamp_ms  # forecasts an earlier call told are judged at the group's newest record
        if at is not None:
            w.finish(at, log_end_ms)
    return ReplayResult(w.freeze(), events, stats)


# ---------------------------------------------------------------------------------------------
# The bulk path: runs of offset commits given as their survivors plus a summary
# ---------------------------------------------------------------------------------------------
# Within a group, the offset commits between two other records (group metadata, tombstones,
# unsupported records) form a run; of a run only the last commit per (topic, partition) stays
# in the state. The others matter only for (a) ``offset_commit`` events, (b) the counters and
# (c) expiry, which runs before a record at time t when t >= next_check. ``replay_runs`` applies
# a run from its survivors when that is exact, and from all its records otherwise:
# - No commit event is asked for, and every record of the run lies above the last applied
#   position (so none is a duplicate): then the dropped commits are applied-then-replaced and
#   only add to ``records_seen``/``applied``/``offset_commits``. The run's last record is a
#   survivor (the last commit of its key), so last_position/last_timestamp_ms come out the same.
# - Nothing can be due inside the run: the group's next expiry (``next_expiry_ms``, exact; the
#   lower bound ``next_check`` when that already proves it) and a lower bound of the due time of
#   every commit of the run (``expiry.min_due_ms``; for a group the run creates, the new group's
#   situation: no protocol type) are all later than the run's largest timestamp. Then, in the
#   full replay, every expiry check inside the run finds nothing (the state then holds the
#   earlier offsets and commits of the run only); the same holds for the survivors. A check
#   that finds nothing only recomputes ``next_check``.
# - ``next_check`` differs afterwards (the dropped commits never lowered it) but stays a lower
#   bound of the next due time in both replays: a check fires at least at the first record at
#   or past the true due time, and a check before it finds nothing, so the first check that
#   expires something happens at the same record with the same state, and from there on the
#   two replays are the same.
# - The run's first commit is a survivor: a commit that finds no live group creates one
#   (``offset_created_group``, with its time and position), and from then on the group holds
#   an offset, so it cannot die of being Empty without offsets inside the run.
# - The dropped commits cannot have removed a predicted expiry that a survivor does not remove
#   again (the same key comes later in the run, and nothing is predicted inside a safe run), and
#   the run of offset tombstones (``tombstone_run``) is cleared by the first commit either way.
# The offsets mapping may hold its keys in another insertion order; snapshots compare equal,
# serialise to the same bytes, and every row producer sorts.


@dataclass(frozen=True, slots=True)
class CommitRun:
    """Consecutive offset commits of one group, given by their survivors and a summary.

    The run's records are offset commits (``OffsetCommitKey`` with an ``OffsetCommitValue``) in
    strictly increasing log position with no other record of the group between them.

    Attributes:
        kept: the survivors in log order: the run's first record and the last commit of every
            (topic, partition) of the run (so also its last record), and possibly others.
        count: commits in the run, survivors included.
        first_position: (partition, offset) of the run's first record.
        max_timestamp_ms: the largest record timestamp in the run.
        min_commit_timestamp_ms: least commit timestamp of the run's commits without an
            explicit expire timestamp (None: there are none).
        min_expire_timestamp_ms: least explicit (v1) expire timestamp in the run (None: none).
        expand: returns all ``count`` records in log order (used when the run is not safe to
            apply from its survivors).
    """

    kept: Sequence[LogRecord]
    count: int
    first_position: tuple[int, int]
    max_timestamp_ms: int
    min_commit_timestamp_ms: int | None
    min_expire_timestamp_ms: int | None
    expand: Callable[[], Iterable[LogRecord]] = field(compare=False, repr=False)


@dataclass(slots=True)
class RunCounters:
    """What ``replay_runs`` did with the runs it was given (accumulates across calls)."""

    runs: int = 0
    compressed: int = 0
    expanded: int = 0
    commits_skipped: int = 0
    expanded_by_reason: dict[str, int] = field(default_factory=dict)


def _run_unsafe(w: _Work, run: CommitRun, last: tuple[int, int] | None) -> str | None:
    """Why ``run`` cannot be applied from its survivors now (None: it can)."""
    kept = run.kept
    if w.commit_events:
        return "offset_commit_events"
    if not kept or run.count <= len(kept) or kept[0].position != run.first_position:
        return "shape"
    if last is not None and run.first_position <= last:
        return "duplicates"
    retention = w.retention_ms
    if retention is None:
        return None
    t_max = run.max_timestamp_ms
    nc = w.next_check
    assert nc is not None
    if nc < 0 or nc <= t_max:
        nc = w._next_judgment()
        w.next_check = nc  # exact, so a valid lower bound (as ``judge`` leaves it)
        if nc <= t_max:
            return "expiry"
    if not w.exists or w.state is _D:
        # the run's first commit creates a group without protocol type (base: commit time);
        # the least of every rule set's due times (pre-2.1 only adds 1)
        sit = _expiry.SIT_ALL_BASE_COMMIT
    else:
        sit = w.sit if w.sit is not None else _expiry.situation(w, w.rules)
    bound = _expiry.min_due_ms(sit, w, retention, run.min_commit_timestamp_ms, run.min_expire_timestamp_ms)
    if bound is not None and bound + w.grace < t_max:
        return "expiry"  # a commit of the run could be judged inside it
    return None


def _unroll(
    items: Iterable[LogRecord | CommitRun], w: _Work, counters: RunCounters, skipped: list[int]
) -> Iterator[LogRecord]:
    """The records ``_replay`` applies one by one: a safe run's survivors, an unsafe run's
    records. Lazy: a run is judged after every record before it has been applied."""
    last = w.last_position  # the running maximum of positions (= the replay loop's ``last``)
    for item in items:
        if type(item) is CommitRun:
            counters.runs += 1
            reason = _run_unsafe(w, item, last)
            if reason is None:
                counters.compressed += 1
                n = item.count - len(item.kept)
                counters.commits_skipped += n
                skipped[0] += n
                kept = item.kept
                yield from kept
                pos = kept[-1].position
                if last is None or pos > last:
                    last = pos
            else:
                counters.expanded += 1
                counters.expanded_by_reason[reason] = counters.expanded_by_reason.get(reason, 0) + 1
                for rec in item.expand():
                    yield rec
                    pos = (rec.partition, rec.offset)
                    if last is None or pos > last:
                        last = pos
        else:
            rec = item  # type: ignore[assignment]
            yield rec
            pos = (rec.partition, rec.offset)
            if last is None or pos > last:
                last = pos


def replay_runs(
    snapshot: GroupSnapshot,
    items: Iterable[LogRecord | CommitRun],
    *,
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    assume_log_start: bool = False,
    coordinator: str = _expiry.DEFAULT_COORDINATOR,
    counters: RunCounters | None = None,
    cleanup_interval_ms: int = _DEFAULT_INTERVAL,
    log_end_ms: int | None = None,
) -> ReplayResult:
    """``replay`` over records and ``CommitRun``s: the same result as replaying every record.

    A run is applied from its survivors when that is exact (see the comment above
    ``CommitRun``), else from ``run.expand()``. Build the items with ``compress_commit_runs`` or
    a vectorised equivalent (``pipelines.records.replay``). ``counters`` (optional) tells how many
    runs were compressed or expanded, and why.
    """
    return _replay(
        snapshot,
        items,
        retention_ms,
        rules,
        as_of_ms,
        event_kinds,
        assume_log_start,
        coordinator,
        counters if counters is not None else RunCounters(),
        cleanup_interval_ms,
        log_end_ms,
    )


def _is_commit(rec: LogRecord) -> bool:
    return type(rec.key) is OffsetCommitKey and type(rec.value) is OffsetCommitValue


def compress_commit_runs(
    records: Iterable[LogRecord], *, max_span_ms: int | None = None
) -> list[LogRecord | CommitRun]:
    """Group a group's records into plain records and ``CommitRun``s (the reference reducer).

    A run is a maximal stretch of offset commits in strictly increasing position; it is also
    cut where ``timestamp_ms // max_span_ms`` changes (short runs stay safe under a short
    retention). Survivors: the run's first record and the last commit per (topic, partition).
    A run of one record, or one where every record survives, is given as plain records.
    """
    out: list[LogRecord | CommitRun] = []
    run: list[LogRecord] = []

    def flush() -> None:
        if len(run) < 2:
            out.extend(run)
            return
        last_of: dict[TopicPartition, int] = {}
        for i, r in enumerate(run):
            k = r.key
            assert isinstance(k, OffsetCommitKey)
            last_of[(k.topic, k.partition)] = i
        keep = sorted({0, *last_of.values()})
        if len(keep) == len(run):
            out.extend(run)
            return
        min_cts: int | None = None
        min_exp: int | None = None
        for r in run:
            v = r.value
            assert isinstance(v, OffsetCommitValue)
            if v.expire_timestamp is None:
                if min_cts is None or v.commit_timestamp < min_cts:
                    min_cts = v.commit_timestamp
            elif min_exp is None or v.expire_timestamp < min_exp:
                min_exp = v.expire_timestamp
        full = tuple(run)
        out.append(
            CommitRun(
                kept=[run[i] for i in keep],
                count=len(run),
                first_position=run[0].position,
                max_timestamp_ms=max(r.timestamp_ms for r in run),
                min_commit_timestamp_ms=min_cts,
                min_expire_timestamp_ms=min_exp,
                expand=lambda: full,
            )
        )

    prev: tuple[int, int] | None = None
    for rec in records:
        pos = rec.position
        if _is_commit(rec):
            if run and (
                prev is None
                or pos <= prev
                or (
                    max_span_ms is not None
                    and rec.timestamp_ms // max_span_ms != run[-1].timestamp_ms // max_span_ms
                )
            ):
                flush()
                run = []
            run.append(rec)
        else:
            flush()
            run = []
            out.append(rec)
        prev = pos
    flush()
    return out


def replay_groups(
    records: Iterable[LogRecord],
    *,
    snapshots: Mapping[str, GroupSnapshot] | None = None,
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    event_kinds: Collection[str] | None = None,
    assume_log_start: bool = False,
    coordinator: str = _expiry.DEFAULT_COORDINATOR,
    cleanup_interval_ms: int = _DEFAULT_INTERVAL,
    log_end_ms: int | None = None,
) -> dict[str, ReplayResult]:
    """Replay a log holding many groups: split by group (order kept), replay each.

    Records without a group (an unknown key whose group could not be read) are ignored.
    """
    by_group: dict[str, list[LogRecord]] = {}
    for rec in records:
        g = rec.key.group
        if g is None:
            continue
        lst = by_group.get(g)
        if lst is None:
            by_group[g] = [rec]
        else:
            lst.append(rec)
    out: dict[str, ReplayResult] = {}
    base = snapshots or {}
    groups = set(by_group) | (set(base) if as_of_ms is not None else set())
    for g in sorted(groups):
        recs = by_group.get(g, [])
        recs.sort(key=lambda r: (r.partition, r.offset))
        out[g] = replay(
            base.get(g) or new_snapshot(g),
            recs,
            retention_ms=retention_ms,
            rules=rules,
            as_of_ms=as_of_ms,
            event_kinds=event_kinds,
            assume_log_start=assume_log_start,
            coordinator=coordinator,
            cleanup_interval_ms=cleanup_interval_ms,
            log_end_ms=log_end_ms,
        )
    return out


def snapshot_as_of(
    records: Iterable[LogRecord],
    *,
    group_id: str | None = None,
    as_of_ms: int | None = None,
    as_of_offset: int | None = None,
    retention_ms: int | None = None,
    rules: str = "current",
    coordinator: str = _expiry.DEFAULT_COORDINATOR,
    cleanup_interval_ms: int = _DEFAULT_INTERVAL,
) -> GroupSnapshot:
    """The group as it was at time ``as_of_ms`` and/or log offset ``as_of_offset`` (inclusive).

    Records after the cut are ignored: the loader fold of the rest, then (with
    ``retention_ms``) one cleanup at ``as_of_ms``. What happened after the cut is not used as
    evidence: this is what one could have known at that moment. ``group_id`` defaults to the
    first record's group.
    """
    kept: list[LogRecord] = []
    for rec in records:
        if group_id is None:
            group_id = rec.key.group
        if as_of_ms is not None and rec.timestamp_ms > as_of_ms:
            continue
        if as_of_offset is not None and rec.offset > as_of_offset:
            continue
        kept.append(rec)
    if group_id is None:
        raise ValueError("snapshot_as_of needs a group_id when there are no records")
    return replay(
        new_snapshot(group_id),
        kept,
        retention_ms=retention_ms,
        rules=rules,
        as_of_ms=as_of_ms,
        event_kinds=(),
        coordinator=coordinator,
        cleanup_interval_ms=cleanup_interval_ms,
    ).snapshot


def iter_event_rows(results: Iterable[ReplayResult]) -> Iterator[dict[str, Any]]:
    """Every event of ``results`` as a row with its ``kind`` (CLI output)."""
    for r in results:
        for e in r.events:
            row = e.to_row()
            row["kind"] = e.kind
            yield row


# ---------------------------------------------------------------------------------------------
# Serialisation: compact, versioned (the streaming state store holds these bytes)
# ---------------------------------------------------------------------------------------------
# Layout v1: one format-version byte, then the fields of GroupSnapshot in declaration order.
# Integers are zigzag varints; optional values add 1 (0 = None); strings/bytes are
# uvarint(len + 1) + data (0 = None); offsets use a topic table. A reader reads every format
# version up to SNAPSHOT_FORMAT_VERSION; new versions may only append fields.
_STATES: tuple[GroupState, ...] = (_E, _PR, _CR, _S, _D)
_STATE_INDEX = {s: i for i, s in enumerate(_STATES)}


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def u(self, n: int) -> None:
        buf = self.buf
        while n >= 0x80:
            buf.append((n & 0x7F) | 0x80)
            n >>= 7
        buf.append(n)

    def i(self, n: int) -> None:
        self.u((n << 1) if n >= 0 else ((-n) << 1) - 1)

    def oi(self, n: int | None) -> None:
        if n is None:
            self.u(0)
        else:
            self.u(((n << 1) if n >= 0 else ((-n) << 1) - 1) + 1)

    def b(self, data: bytes | None) -> None:
        if data is None:
            self.u(0)
        else:
            self.u(len(data) + 1)
            self.buf += data

    def s(self, text: str | None) -> None:
        self.b(None if text is None else text.encode("utf-8"))

    def opt_pos(self, p: tuple[int, int] | None) -> None:
        """An optional (partition, offset): 0, or 1 and the two integers."""
        if p is None:
            self.u(0)
        else:
            self.u(1)
            self.i(p[0])
            self.i(p[1])

    def tagged(self, fields: tuple[tuple[int, bytes], ...]) -> None:
        self.u(len(fields))
        for tag, data in fields:
            self.u(tag)
            self.b(data)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def u(self) -> int:
        data = self.data
        shift = 0
        out = 0
        while True:
            byte = data[self.pos]
            self.pos += 1
            out |= (byte & 0x7F) << shift
            if byte < 0x80:
                return out
            shift += 7

    def i(self) -> int:
        n = self.u()
        return (n >> 1) if not n & 1 else -((n + 1) >> 1)

    def oi(self) -> int | None:
        n = self.u()
        if n == 0:
            return None
        n -= 1
        return (n >> 1) if not n & 1 else -((n + 1) >> 1)

    def b(self) -> bytes | None:
        n = self.u()
        if n == 0:
            return None
        start = self.pos
        self.pos = start + n - 1
        if self.pos > len(self.data):
            raise ValueError("truncated snapshot")
        return bytes(self.data[start : self.pos])

    def rb(self) -> bytes:
        out = self.b()
        if out is None:
            raise ValueError("corrupt snapshot: null where bytes were expected")
        return out

    def s(self) -> str | None:
        raw = self.b()
        return None if raw is None else raw.decode("utf-8")

    def rs(self) -> str:
        return self.rb().decode("utf-8")

    def opt_pos(self) -> tuple[int, int] | None:
        return (self.i(), self.i()) if self.u() else None

    def tagged(self) -> tuple[tuple[int, bytes], ...]:
        return tuple((self.u(), self.rb()) for _ in range(self.u()))


def serialize_snapshot(s: GroupSnapshot) -> bytes:
    """Encode a snapshot (format ``SNAPSHOT_FORMAT_VERSION``); ``deserialize_snapshot`` inverts it."""
    w = _Writer()
    w.buf.append(SNAPSHOT_FORMAT_VERSION)
    w.s(s.group_id)
    w.u(_STATE_INDEX[s.state] | (s.exists << 3) | (s.has_metadata << 4))
    w.i(s.generation)
    w.s(s.protocol_type)
    w.s(s.protocol)
    w.s(s.leader)
    w.oi(s.current_state_timestamp)
    w.u(len(s.members))
    for m in s.members:
        w.s(m.member_id)
        w.s(m.group_instance_id)
        w.s(m.client_id)
        w.s(m.client_host)
        w.i(m.session_timeout)
        w.oi(m.rebalance_timeout)
        w.b(m.subscription)
        w.b(m.assignment)
        w.tagged(m.tagged_fields)
    w.oi(s.metadata_timestamp_ms)
    w.oi(s.state_timestamp_ms)
    if s.subscribed_topics is None:
        w.u(0)
    else:
        w.u(len(s.subscribed_topics) + 1)
        for t in sorted(s.subscribed_topics):
            w.s(t)
    _write_offsets(w, s.offsets, s.last_timestamp_ms or 0)
    w.opt_pos(s.last_position)
    w.oi(s.last_timestamp_ms)
    w.u(s.records_applied)
    w.u(s.unsupported_records)
    w.oi(s.last_offset_removal_ms)
    w.u(len(s.predicted_expired))
    for (topic, partition), (off, cts, pms) in sorted(s.predicted_expired.items()):
        w.s(topic)
        w.i(partition)
        w.i(off)
        w.i(cts)
        w.i(pms)
    w.oi(s.predicted_death_ms)
    w.u(len(s.tombstone_run))
    for topic, partition, off, cts, lo, ts in s.tombstone_run:
        w.s(topic)
        w.i(partition)
        w.i(off)
        w.i(cts)
        w.i(lo)
        w.i(ts)
    # v2
    _write_offsets(w, s.predicted_removed, s.last_timestamp_ms or 0)
    if s.predicted_death_restore is None:
        w.u(0)
    else:
        w.u(1)
        st_ms, r_ptype, r_protocol, r_leader, r_meta = s.predicted_death_restore
        w.oi(st_ms)
        w.s(r_ptype)
        w.s(r_protocol)
        w.s(r_leader)
        w.u(int(r_meta))
    w.u(len(s.settled))
    for (topic, partition), due in sorted(s.settled.items()):
        w.s(topic)
        w.i(partition)
        w.i(due)
    w.oi(s.settled_death_ms)
    w.oi(s.situation_since_ms)
    w.opt_pos(s.first_position)
    w.u(int(s.new_coordinator_seen))
    w.u(s.predictions_contradicted)
    w.u(s.pending_contradictions)
    w.opt_pos(s.created_by_commit)
    return bytes(w.buf)


def _write_offsets(w: _Writer, offsets: Mapping[TopicPartition, OffsetState], base: int) -> None:
    items = sorted(offsets.items())
    topics = sorted({tp[0] for tp, _ in items})
    tindex = {t: i for i, t in enumerate(topics)}
    w.u(len(topics))
    for t in topics:
        w.s(t)
    # timestamps as deltas: commit vs a base, record time vs commit (usually 0)
    w.i(base)
    w.u(len(items))
    for (topic, partition), (v, lp, lo, ts) in items:
        w.u(tindex[topic])
        w.i(partition)
        w.i(v.offset)
        w.oi(v.leader_epoch)
        w.s(v.metadata)
        w.i(base - v.commit_timestamp)
        w.oi(v.expire_timestamp)
        w.u(v.version)
        w.tagged(v.tagged_fields)
        w.i(lp)
        w.i(lo)
        w.i(ts - v.commit_timestamp)


def _read_offsets(r: _Reader) -> dict[TopicPartition, OffsetState]:
    topics = [r.rs() for _ in range(r.u())]
    offsets: dict[TopicPartition, OffsetState] = {}
    base = r.i()
    for _ in range(r.u()):
        topic = topics[r.u()]
        partition = r.i()
        off = r.i()
        epoch = r.oi()
        metadata = r.rs()
        cts = base - r.i()
        exp = r.oi()
        vver = r.u()
        tagged = r.tagged()
        value = OffsetCommitValue(off, metadata, cts, epoch, exp, vver, tagged)
        offsets[(topic, partition)] = (value, r.i(), r.i(), cts + r.i())
    return offsets


def deserialize_snapshot(data: bytes) -> GroupSnapshot:
    """Decode bytes from ``serialize_snapshot`` (any format version up to the current one).

    Raises:
        ValueError: unknown (newer) format version or corrupt bytes.
    """
    if not data:
        raise ValueError("empty snapshot bytes")
    version = data[0]
    if version < 1 or version > SNAPSHOT_FORMAT_VERSION:
        raise ValueError(
            f"snapshot format version {version} is not supported (max {SNAPSHOT_FORMAT_VERSION})"
        )
    r = _Reader(data, 1)
    try:
        group_id = r.rs()
        flags = r.u()
        state = _STATES[flags & 0x7]
        generation = r.i()
        protocol_type = r.s()
        protocol = r.s()
        leader = r.s()
        cst = r.oi()
        members = []
        for _ in range(r.u()):
            member_id = r.rs()
            iid = r.s()
            client_id = r.rs()
            client_host = r.rs()
            session = r.i()
            rebalance = r.oi()
            sub = r.rb()
            asg = r.rb()
            members.append(
                MemberMetadata(
                    member_id, client_id, client_host, session, sub, asg, rebalance, iid, r.tagged()
                )
            )
        meta_ts = r.oi()
        state_ts = r.oi()
        n_subs = r.u()
        subs = None if n_subs == 0 else frozenset(r.rs() for _ in range(n_subs - 1))
        offsets = _read_offsets(r)
        last_position = r.opt_pos()
        last_ts = r.oi()
        applied = r.u()
        unsupported = r.u()
        removal = r.oi()
        predicted: dict[TopicPartition, PredictedExpiry] = {}
        for _ in range(r.u()):
            tp = (r.rs(), r.i())
            predicted[tp] = (r.i(), r.i(), r.i())
        death = r.oi()
        run = tuple((r.rs(), r.i(), r.i(), r.i(), r.i(), r.i()) for _ in range(r.u()))
        removed: dict[TopicPartition, OffsetState] = {}
        restore: tuple[int | None, str | None, str | None, str | None, bool] | None = None
        settled: dict[TopicPartition, int] = {}
        settled_death: int | None = None
        since: int | None = None
        first: tuple[int, int] | None = None
        new_seen = False
        contradicted = 0
        pending = 0
        created: tuple[int, int] | None = None
        if version >= 2:
            removed = _read_offsets(r)
            if r.u():
                restore = (r.oi(), r.s(), r.s(), r.s(), bool(r.u()))
            for _ in range(r.u()):
                tp = (r.rs(), r.i())
                settled[tp] = r.i()
            settled_death = r.oi()
            since = r.oi()
            first = r.opt_pos()
            new_seen = bool(r.u())
            contradicted = r.u()
            pending = r.u()
            created = r.opt_pos()
        elif predicted or death is not None:
            # a v1 snapshot's view had already removed its predictions (and their values are
            # gone): keep it as the fold, with nothing outstanding to confirm or withdraw
            predicted, death = {}, None
    except (IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"corrupt snapshot bytes: {exc}") from exc
    return GroupSnapshot(
        group_id=group_id,
        state=state,
        exists=bool(flags & 0x8),
        generation=generation,
        protocol_type=protocol_type,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=cst,
        members=tuple(members),
        has_metadata=bool(flags & 0x10),
        metadata_timestamp_ms=meta_ts,
        state_timestamp_ms=state_ts,
        subscribed_topics=subs,
        offsets=MappingProxyType(offsets) if offsets else _EMPTY_OFFSETS,
        last_position=last_position,
        last_timestamp_ms=last_ts,
        records_applied=applied,
        unsupported_records=unsupported,
        last_offset_removal_ms=removal,
        predicted_expired=MappingProxyType(predicted) if predicted else _EMPTY_PREDICTED,
        predicted_death_ms=death,
        tombstone_run=run,
        predicted_removed=MappingProxyType(removed) if removed else _EMPTY_OFFSETS,
        predicted_death_restore=restore,
        settled=MappingProxyType(settled) if settled else _EMPTY_SETTLED,
        settled_death_ms=settled_death,
        situation_since_ms=since,
        first_position=first,
        new_coordinator_seen=new_seen,
        predictions_contradicted=contradicted,
        pending_contradictions=pending,
        created_by_commit=created,
    )
