"""The group snapshot: an immutable value, the replay's output and input (spec §7, §10).

Rules:
- ``GroupSnapshot`` is the group *as of* the ``as_of_ms`` of the replay call that made it (the
  loader fold, then one cleanup); what that cleanup removed is kept aside so the next call
  restores the fold (see ``coordinator_core.loader.replay``).
- ``to_state_row()`` / ``offset_rows()`` shape the gold rows (``group_state``,
  ``offsets_current``; columns in ``coordinator_core.events``).
- Members' subscription/assignment blobs are parsed only for protocol type ``consumer``
  (spec §5), as Kafka's ``computeSubscribedTopics`` does (v0 parse; any error: unknown), and
  cached: a group's blobs recur in record after record.
- The byte form is ``coordinator_core.loader.snapshot_codec``'s.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from coordinator_core import expiry as _expiry
from coordinator_core.codec import consumer_protocol
from coordinator_core.codec.records import MemberMetadata, OffsetCommitValue
from coordinator_core.codec.wire import fast_constructor
from coordinator_core.modern.consumer.model import ConsumerGroupSnapshot
from coordinator_core.modern.consumer.rows import member_structs as consumer_member_structs
from coordinator_core.modern.group_epochs import ModernGroupSnapshot
from coordinator_core.modern.share.model import OFFSETS_KEPT_IN as SHARE_OFFSETS_KEPT_IN
from coordinator_core.modern.share.rows import member_structs as share_member_structs
from coordinator_core.partitioner import partition_for
from coordinator_core.settings import FACTS_ONLY, ReplaySettings
from coordinator_core.state import GroupState
from coordinator_core.streams.rows import member_structs as streams_member_structs

OffsetState = _expiry.OffsetState
TopicPartition = tuple[str, int]
#: a predicted-but-not-yet-observed expiry: (offset, commit_timestamp, predicted_ms)
PredictedExpiry = tuple[int, int, int]
#: what a forecast death dropped: (state_timestamp_ms, protocol_type, protocol, leader, has_metadata)
DeathRestore = tuple[int | None, str | None, str | None, str | None, bool]

#: the byte format ``coordinator_core.loader.snapshot_codec`` writes (format v1 stays readable);
#: the numbers are shared with ``snapshot_values``' layouts (3), which a carried group's entry
#: names: a new byte format or layout takes the next free number
SNAPSHOT_FORMAT_VERSION = 2

_D = GroupState.DEAD

EMPTY_OFFSETS: Mapping[TopicPartition, OffsetState] = MappingProxyType({})
EMPTY_PREDICTED: Mapping[TopicPartition, PredictedExpiry] = MappingProxyType({})
EMPTY_SETTLED: Mapping[TopicPartition, int] = MappingProxyType({})
#: pending transactional offsets: producer id -> (topic, partition) -> the pending offset
PendingTxn = Mapping[int, Mapping[TopicPartition, OffsetState]]
EMPTY_PENDING: PendingTxn = MappingProxyType({})
EMPTY_TXN_OFFSETS: Mapping[TopicPartition, int] = MappingProxyType({})


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
    then the forecasts whose cleanup window has passed taken out (``group_fold._finish_view``; due is not
    dead). What they removed is kept aside so the next call restores the fold:
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
    offsets: Mapping[TopicPartition, OffsetState] = field(default_factory=lambda: EMPTY_OFFSETS)
    last_position: tuple[int, int] | None = None
    last_timestamp_ms: int | None = None
    records_applied: int = 0
    unsupported_records: int = 0
    last_offset_removal_ms: int | None = None
    predicted_expired: Mapping[TopicPartition, PredictedExpiry] = field(default_factory=lambda: EMPTY_PREDICTED)
    predicted_death_ms: int | None = None
    tombstone_run: tuple[tuple[str, int, int, int, int, int], ...] = ()
    # format v2: the loader fold behind the as-of view, and the judged predictions
    predicted_removed: Mapping[TopicPartition, OffsetState] = field(default_factory=lambda: EMPTY_OFFSETS)
    #: what the view's predicted death dropped: (state_timestamp_ms, protocol_type, protocol, leader,
    #: has_metadata)
    predicted_death_restore: DeathRestore | None = None
    settled: Mapping[TopicPartition, int] = field(default_factory=lambda: EMPTY_SETTLED)
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
    # format v3: Kafka 4 group types. ``group_type``: classic, consumer (KIP-848, then the classic
    # fields above mirror ``consumer``: state Empty/Stable, generation = group epoch, protocol =
    # assignor, subscribed topics), share or streams (their records are counted, not folded)
    group_type: str = "classic"
    consumer: ConsumerGroupSnapshot | None = None
    # the transactional tail (KIP-98): offsets of open transactions, by producer id (Kafka 4's
    # ``OffsetMetadataManager.pendingTransactionalOffsets``, Kafka 3's ``pendingOffsets`` of the
    # loader), not visible until their COMMIT marker; and, for each held offset that a COMMIT
    # made, the producer id of its transaction
    pending_txn: PendingTxn = field(default_factory=lambda: EMPTY_PENDING)
    txn_offsets: Mapping[TopicPartition, int] = field(default_factory=lambda: EMPTY_TXN_OFFSETS)
    # a share group (KIP-932) or streams group (KIP-1071): its fold (``coordinator_core.loader.
    # modern_groups``; the classic fields above mirror it as for ``consumer``); kept once deleted
    modern: ModernGroupSnapshot | None = None

    # -- derived -----------------------------------------------------------------------------
    @property
    def member_count(self) -> int:
        return len(self.members)

    @property
    def offset_count(self) -> int:
        return len(self.offsets)

    @property
    def pending_transactional_offsets(self) -> int:
        """Offsets of open transactions (not visible until their COMMIT marker)."""
        return sum(len(p) for p in self.pending_txn.values())

    def offset(self, topic: str, partition: int) -> OffsetCommitValue | None:
        """The committed value for (topic, partition), or None."""
        entry = self.offsets.get((topic, partition))
        return None if entry is None else entry[0]

    def next_expiry_ms(self, settings: ReplaySettings) -> int | None:
        """When the rules next remove something from the group as it stands (as of its
        ``as_of``), leaving out what the log showed the broker kept (None: no retention set)."""
        return _expiry.next_expiry_ms(self, settings.retention_ms, settings.rules, self.settled, self.settled_death_ms)

    def to_state_row(self, *, settings: ReplaySettings = FACTS_ONLY, num_partitions: int = 50) -> dict[str, Any]:
        """The ``group_state`` row (see ``coordinator_core.events`` for the columns); a live
        consumer group's state is Kafka's consumer-group state (Empty, Assigning, Reconciling,
        Stable) and its members are its consumer members."""
        last = self.last_position
        c = self.consumer
        m = self.modern
        if c is not None and c.group_type == "consumer":
            state, members = c.state.value, consumer_member_structs(c)
        elif m is not None and m.exists:
            state = m.state
            members = (share_member_structs if m.group_type == "share" else streams_member_structs)(m)
        else:
            state = self.state.value
            members = [_member_struct(m, self.leader, self.protocol_type) for m in self.members]
        return {
            "group_id": self.group_id,
            "coordinator_partition": partition_for(self.group_id, num_partitions),
            "state": state,
            "exists": self.exists,
            "generation": self.generation,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "leader": self.leader,
            "current_state_timestamp": self.current_state_timestamp,
            "state_timestamp_ms": self.state_timestamp_ms,
            "members": members,
            "member_count": len(members),
            "offset_count": len(self.offsets),
            "subscribed_topics": None if self.subscribed_topics is None else sorted(self.subscribed_topics),
            "last_log_partition": None if last is None else last[0],
            "last_log_offset": None if last is None else last[1],
            "last_timestamp_ms": self.last_timestamp_ms,
            "next_expiry_ms": _expiry.next_expiry_ms(self, settings.retention_ms, settings.rules),
            "records_applied": self.records_applied,
            "unsupported_records": self.unsupported_records,
            "first_log_offset": None if self.first_position is None else self.first_position[1],
            "predictions_contradicted": self.predictions_contradicted + self.pending_contradictions,
            "format_version": SNAPSHOT_FORMAT_VERSION,
            "group_type": self.kind_told(),
            **self.forecast_columns(settings),
            "offsets_kept_in": self.offsets_kept_in(),
        }

    def forecast_columns(self, settings: ReplaySettings) -> dict[str, Any]:
        """What the view holds that is already due (due is not dead: ``expiry.cleanup_window``):
        ``offsets_due``, the held offsets whose removal is forecast, and the window of a forecast
        deletion of a group that still exists (``death_forecast_from_ms``/``_to_ms``)."""
        offsets, told = self.offsets, self.predicted_expired
        due = sum(
            1
            for tp, (off, cts, _e) in told.items()
            if tp in offsets and (offsets[tp][0].offset, offsets[tp][0].commit_timestamp) == (off, cts)
        )
        lo = hi = None
        death = self.predicted_death_ms
        if death is not None and self.predicted_death_restore is None and self.exists:
            strict = not offsets and not self.predicted_removed
            lo, hi = _expiry.death_window(death, self.situation_since_ms, settings.cleanup_interval_ms, strict=strict)
        return {"offsets_due": due, "death_forecast_from_ms": lo, "death_forecast_to_ms": hi}

    def kind_told(self) -> str:
        """The kind of group the state row tells: ``group_type``, except that a consumer group
        its tombstones removed (Dead, its fold's ``removed_type``) stays a consumer group there;
        ``group_type`` itself (what the rules read) is the classic default of a group gone."""
        c = self.consumer
        if not self.exists and c is not None and c.group_type != "consumer" and c.removed_type == "consumer":
            return "consumer"
        m = self.modern
        if not self.exists and m is not None and m.deleted:
            return m.group_type
        return self.group_type

    def offsets_kept_in(self) -> str:
        """Where the group's consumption positions live: ``__consumer_offsets`` (its committed
        offsets, ``offsets_current``), or ``__share_group_state`` for a share group (KIP-932:
        share-partition start offsets and in-flight records; nothing in ``__consumer_offsets``,
        so no offset, expiry or lag rows)."""
        return SHARE_OFFSETS_KEPT_IN if self.kind_told() == "share" else "__consumer_offsets"

    def offset_rows(self) -> list[dict[str, Any]]:
        """``offsets_current`` rows, sorted by (topic, partition); ``transactional_producer_id``
        is the producer whose transaction's COMMIT made the offset (None: a plain commit)."""
        rows = []
        txn = self.txn_offsets
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
                    "transactional_producer_id": txn.get((topic, partition)) if txn else None,
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
    "created_by_commit", "group_type", "consumer", "pending_txn", "txn_offsets", "modern",
)  # fmt: skip
if tuple(f.name for f in dataclasses.fields(GroupSnapshot)) != _SNAPSHOT_FIELDS:  # pragma: no cover
    raise RuntimeError("GroupSnapshot's fields changed: update _SNAPSHOT_FIELDS, GroupFold.freeze and new_snapshot")
# a snapshot is built once per group and replay call: the slot-filling constructor (wire)
new_group_snapshot = fast_constructor(GroupSnapshot)


def new_snapshot(group_id: str) -> GroupSnapshot:
    """The snapshot of a group before any record (it does not exist yet)."""
    return new_group_snapshot(  # type: ignore[no-any-return]
        (
            group_id,
            _D,
            False,
            0,
            None,
            None,
            None,
            None,
            (),
            False,
            None,
            None,
            None,
            EMPTY_OFFSETS,
            None,
            None,
            0,
            0,
            None,
            EMPTY_PREDICTED,
            None,
            (),
            EMPTY_OFFSETS,
            None,
            EMPTY_SETTLED,
            None,
            None,
            None,
            False,
            0,
            0,
            None,
            "classic",
            None,
            EMPTY_PENDING,
            EMPTY_TXN_OFFSETS,
            None,
        )
    )


# ---------------------------------------------------------------------------------------------
# Embedded consumer protocol (``codec.consumer_protocol`` owns the parsers). Pure functions of the


# blob's bytes, cached: a group's blobs recur in record after record (and across groups).
# ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8192)
def subscribed_topics_of(blob: bytes) -> frozenset[str] | None:
    try:
        return consumer_protocol.subscribed_topics_v0(blob)
    except Exception:  # the broker catches every parse error (computeSubscribedTopics)
        return None


@functools.lru_cache(maxsize=8192)
def assigned_of(blob: bytes) -> frozenset[TopicPartition] | None:
    if not blob:
        return frozenset()  # Kafka fills missing assignments with an empty array
    try:
        a = consumer_protocol.decode_assignment(blob)
    except Exception:
        return None
    return frozenset((tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions)


@functools.lru_cache(maxsize=8192)
def sorted_topics_of(blob: bytes) -> tuple[str, ...] | None:
    topics = subscribed_topics_of(blob)
    return None if topics is None else tuple(sorted(topics))


@functools.lru_cache(maxsize=8192)
def sorted_assigned_of(blob: bytes) -> tuple[TopicPartition, ...] | None:
    assigned = assigned_of(blob)
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
        topics = subscribed_topics_of(m.subscription)
        if topics is None:
            return None
        out |= topics
    return frozenset(out)


def _member_struct(m: MemberMetadata, leader: str | None, protocol_type: str | None) -> dict[str, Any]:
    # the blobs follow ConsumerProtocol only for protocol type "consumer" (spec §5)
    consumer = protocol_type == _expiry.CONSUMER_PROTOCOL_TYPE
    topics = subscribed_topics_of(m.subscription) if consumer else None
    assigned = assigned_of(m.assignment) if consumer else None
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


def member_identity(m: MemberMetadata) -> str:
    # a static member keeps its identity across member ids (KIP-345)
    return "i:" + m.group_instance_id if m.group_instance_id is not None else "m:" + m.member_id
