"""A Kafka 4 consumer group (KIP-848) as a value: members, epochs, the derived state, and the
rules Kafka applies to it (offset expiry, deletion). ``coordinator_core.modern.consumer.fold`` folds
records into it.

Facts from apache/kafka's group-coordinator module (4.0-4.x): ``ConsumerGroup``,
``ModernGroup``, ``ConsumerGroupMember``, ``OffsetMetadataManager``, ``OffsetExpirationConditionImpl``,
``GroupCoordinatorShard.cleanupGroupMetadata``, ``GroupMetadataManager.maybeDeleteGroup``.

Rules:
- State (``ConsumerGroup.maybeUpdateGroupState``): Empty without members; Assigning when the
  group epoch is ahead of the target assignment epoch; Reconciling while a member is not
  STABLE at the target assignment epoch (``isReconciledTo``); else Stable. Dead when the group
  is not (or no longer) a consumer group.
- Subscribed topics (``ModernGroup.subscribedTopicNames``, ``isSubscribedToTopic``): the union
  of the members' subscribed names and of the topics of the resolved regular expressions (a
  resolved regex counts until its tombstone, whoever subscribes to it).
- Offset expiry (``OffsetMetadataManager.cleanupExpiredOffsets``, ``ConsumerGroup.
  offsetExpirationCondition``): in every state, an offset of a subscribed topic never expires;
  any other expires at ``commit_timestamp + retention`` (an explicit v1 expire timestamp
  instead) - never the Empty-state ``current_state_timestamp`` base of classic groups. The
  cleanup deletes an Empty group once it holds no offsets (``maybeDeleteGroup``) writing
  ``deletion_records``: current assignments, target assignments, the target assignment epoch,
  member subscriptions, resolved regexes, subscription metadata, group epoch - in that order
  (``ConsumerGroup.createGroupTombstoneRecords``); DeleteGroups writes the offset tombstones
  first, then the same; a downgrade writes the same, then the classic GroupMetadata value.
- Topic names: Kafka 4.1+ writes no ConsumerGroupPartitionMetadata, and its assignments carry
  topic ids only; the broker names them from its metadata image. From the log, an id is named
  by a record that carries both (a PartitionMetadata record, an offset commit's TopicId) or by
  elimination (``names_by_elimination``): once the target assignment is the group epoch's
  (``target_assignment_epoch == group_epoch``) its topics are exactly the subscribed topics that
  exist (the server assignors assign every partition of each), so one id no record names and
  one subscribed name no named id of the assignment carries are the same topic (seen on a real
  Kafka 4.4 broker: a regex subscription matching a new topic no member has committed on yet).
- The preferred server assignor is the one most members chose (``preferredServerAssignor``);
  with none chosen the broker's default (``group.consumer.assignors``: uniform).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from coordinator_core import expiry as _expiry
from coordinator_core.codec.modern_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    GroupKey,
    GroupMemberKey,
    RegularExpressionKey,
)
from coordinator_core.codec.records import OffsetCommitKey, OffsetCommitValue, Record
from coordinator_core.modern.consumer.events import ConsumerRebalance
from coordinator_core.state import GroupState

#: ``group.consumer.assignors`` default: uniform first (Kafka 4.0 ``GroupCoordinatorConfig``).
DEFAULT_CONSUMER_ASSIGNOR: Final = "uniform"
#: ``ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH`` (also what a tombstone sets).
LEAVE_GROUP_MEMBER_EPOCH: Final = -1
#: a static member leaving temporarily (``LEAVE_GROUP_STATIC_MEMBER_EPOCH``): no epoch bump.
LEAVE_GROUP_STATIC_MEMBER_EPOCH: Final = -2
CONSUMER_RECORD_TYPES: Final = frozenset({3, 4, 5, 6, 7, 8, 16})

GroupType: TypeAlias = Literal["classic", "consumer"]
#: ``((topic_id, (partition, ...)), ...)``, sorted: a member's partitions (Kafka's Map<Uuid, Set<Integer>>).
Assignment: TypeAlias = tuple[tuple[str, tuple[int, ...]], ...]
TopicIdPartition: TypeAlias = tuple[str, int]


class ConsumerGroupState(StrEnum):
    """``ConsumerGroup.ConsumerGroupState``; the value is Kafka's name."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """``ConsumerGroupMember``: ``state`` is the MemberState name (STABLE, UNREVOKED_PARTITIONS,
    UNRELEASED_PARTITIONS, UNKNOWN); ``subscribed_topic_regex`` is None when absent or empty."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int | None = None
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = "STABLE"
    assigned_partitions: Assignment = ()
    partitions_pending_revocation: Assignment = ()

    @property
    def uses_classic_protocol(self) -> bool:
        """A member of a consumer group still speaking JoinGroup/SyncGroup (KIP-848 upgrade)."""
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state == "STABLE" and self.member_epoch == target_assignment_epoch


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """A ConsumerGroupRegularExpression value: the topics the regex matched, at which metadata
    image version, when (``ResolvedRegularExpression``)."""

    topics: tuple[str, ...]
    image_version: int
    timestamp_ms: int


def _frozen_map() -> Mapping[Any, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ConsumerGroupSnapshot:
    """One group id as the fold left it: an immutable value (``ConsumerGroupFold.snapshot``).

    ``group_type`` is ``consumer`` for a live consumer group, ``classic`` when a GroupMetadata
    value replaced it (or came first), None when no group record exists (never, or removed;
    ``deleted`` tells a removed consumer group). The fields after ``last_timestamp_ms`` are
    the fold's bookkeeping (rebalance and conversion tracking), kept so a fold resumed from a
    snapshot continues exactly as one pass would.
    """

    group_id: str
    group_type: GroupType | None = None
    deleted: bool = False
    group_epoch: int = 0
    target_assignment_epoch: int = 0
    metadata_hash: int = 0
    members: Mapping[str, ConsumerMember] = field(default_factory=_frozen_map)
    target_assignment: Mapping[str, Assignment] = field(default_factory=_frozen_map)
    resolved_regexes: Mapping[str, ResolvedRegex] = field(default_factory=_frozen_map)
    topic_names: Mapping[str, str] = field(default_factory=_frozen_map)
    subscribed_topics: frozenset[str] = frozenset()
    has_subscription_metadata: bool = False
    created_ms: int | None = None
    state_timestamp_ms: int | None = None
    classic_generation: int | None = None
    classic_protocol_type: str | None = None
    classic_members: int = 0
    last_timestamp_ms: int | None = None
    epoch_known: bool = False
    converted_from_classic: bool = False
    epoch_members: Mapping[str, str | None] = field(default_factory=_frozen_map)
    last_bump_ms: int | None = None
    last_assignor: str | None = None
    installed_target: Mapping[str, Assignment] = field(default_factory=_frozen_map)
    pending_rebalance: ConsumerRebalance | None = None
    removed_type: GroupType | None = None
    removed_ms: int | None = None
    removed_generation: int | None = None

    @property
    def exists(self) -> bool:
        return self.group_type == "consumer"

    @property
    def state(self) -> ConsumerGroupState:
        """Kafka's state; Dead when this is not (or no longer) a consumer group."""
        if self.group_type != "consumer":
            return ConsumerGroupState.DEAD
        return derive_state(self.members.values(), self.group_epoch, self.target_assignment_epoch)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topics

    @property
    def static_members(self) -> Mapping[str, str]:
        """instance id -> member id (``ConsumerGroup.staticMembers``)."""
        return {m.instance_id: m.member_id for m in self.members.values() if m.instance_id is not None}

    @property
    def preferred_server_assignor(self) -> str | None:
        """The server assignor most members chose (``preferredServerAssignor``); ties: the first
        by name (Kafka's pick then depends on hash-map order)."""
        return preferred_assignor(self.members.values())

    @property
    def assignor(self) -> str:
        return self.preferred_server_assignor or DEFAULT_CONSUMER_ASSIGNOR

    @property
    def num_classic_protocol_members(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    def topic_label(self, topic_id: str) -> str:
        """The topic's name when a record named it (ConsumerGroupPartitionMetadata), else its id."""
        return self.topic_names.get(topic_id, topic_id)


def names_by_elimination(
    target: Mapping[str, Any], names: Mapping[str, str], subscribed: Iterable[str]
) -> dict[str, str]:
    """``{topic id: name}`` for the one topic of a target assignment that ``names`` does not
    name, when exactly one ``subscribed`` name is carried by no named id of that assignment;
    else empty. Valid only for the target assignment of the current group epoch (a stale one may
    hold a topic the subscriptions since dropped): the fold asks only then. See the module's rules."""
    ids = {tid for a in target.values() for tid, _ in pairs(a)}
    unknown = [tid for tid in ids if tid not in names]
    if len(unknown) != 1:
        return {}
    left = set(subscribed) - {names[tid] for tid in ids if tid in names}
    return {unknown[0]: next(iter(left))} if len(left) == 1 else {}


def derive_state(
    members: Iterable[ConsumerMember], group_epoch: int, target_assignment_epoch: int
) -> ConsumerGroupState:
    """``ConsumerGroup.maybeUpdateGroupState``."""
    ms = list(members)
    if not ms:
        return ConsumerGroupState.EMPTY
    if group_epoch > target_assignment_epoch:
        return ConsumerGroupState.ASSIGNING
    if all(m.is_reconciled_to(target_assignment_epoch) for m in ms):
        return ConsumerGroupState.STABLE
    return ConsumerGroupState.RECONCILING


def preferred_assignor(members: Iterable[ConsumerMember]) -> str | None:
    counts: dict[str, int] = {}
    for m in members:
        if m.server_assignor is not None:
            counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda name: (-counts[name], name))


def pairs(a: Assignment) -> Iterable[TopicIdPartition]:
    """Each (topic id, partition) of an assignment."""
    for tid, ps in a:
        for p in ps:
            yield (tid, p)


# ---------------------------------------------------------------------------------------------
# What Kafka writes: deletion, and the offset expiry rule
# ---------------------------------------------------------------------------------------------
def deletion_records(group: ConsumerGroupSnapshot) -> list[Record]:
    """``ConsumerGroup.createGroupTombstoneRecords``: the tombstones deleting this consumer group
    (DeleteGroups after its offset tombstones, the cleanup of an Empty group without offsets,
    a downgrade before the classic GroupMetadata value)."""
    gid = group.group_id
    members = list(group.members)
    out = [Record(GroupMemberKey(gid, m, 8), None) for m in members]
    out += [Record(GroupMemberKey(gid, m, 7), None) for m in members]
    out.append(Record(GroupKey(gid, 6), None))
    out += [Record(GroupMemberKey(gid, m, 5), None) for m in members]
    out += [Record(RegularExpressionKey(gid, rx), None) for rx in group.resolved_regexes]
    out += [Record(GroupKey(gid, 4), None), Record(GroupKey(gid, 3), None)]
    return out


@dataclass(frozen=True, slots=True)
class _ExpiryView:
    """The slice of ``expiry.GroupView`` the unsubscribed-topics rule reads."""

    group_id: str
    subscribed_topics: frozenset[str]
    state: GroupState = GroupState.STABLE
    generation: int = 0
    protocol_type: str | None = _expiry.CONSUMER_PROTOCOL_TYPE
    current_state_timestamp: int | None = None
    state_timestamp_ms: int | None = None
    offsets: Mapping[tuple[str, int], _expiry.OffsetState] = field(default_factory=_frozen_map)
    last_offset_removal_ms: int | None = None
    group_type: str = "consumer"
    pending_txn: Mapping[int, Mapping[tuple[str, int], _expiry.OffsetState]] = field(default_factory=_frozen_map)


def offset_due_ms(group: ConsumerGroupSnapshot, value: OffsetCommitValue, topic: str, retention_ms: int) -> int | None:
    """When Kafka's cleanup removes this offset of a consumer group (None: never, as things
    stand): the unsubscribed-topics rule of ``coordinator_core.expiry`` in every state."""
    if group.group_type != "consumer":
        raise ValueError(f"group {group.group_id!r} is not a consumer group")
    view = _ExpiryView(group.group_id, group.subscribed_topics)
    return _expiry.due_ms(value, topic, _expiry.SIT_UNSUBSCRIBED, retention_ms, view)


@dataclass(frozen=True, slots=True)
class CleanupPlan:
    """What ``GroupCoordinatorShard.cleanupGroupMetadata`` writes for one consumer group at
    ``now_ms``: offset tombstones (key order), then the group's ``deletion_records`` when it is
    Empty and no offset is left (``maybeDeleteGroup``)."""

    expired: tuple[tuple[tuple[str, int], int], ...]
    records: tuple[Record, ...]
    group_deleted: bool


def plan_cleanup(
    group: ConsumerGroupSnapshot, offsets: Mapping[tuple[str, int], OffsetCommitValue], now_ms: int, retention_ms: int
) -> CleanupPlan:
    expired = []
    for tp in sorted(offsets):
        due = offset_due_ms(group, offsets[tp], tp[0], retention_ms)
        if due is not None and due <= now_ms:
            expired.append((tp, due))
    out = [Record(OffsetCommitKey(group.group_id, t, p), None) for (t, p), _ in expired]
    dies = len(expired) == len(offsets) and group.state is ConsumerGroupState.EMPTY
    if dies:
        out += deletion_records(group)
    return CleanupPlan(tuple(expired), tuple(out), dies)


# ---------------------------------------------------------------------------------------------
# Serialized form (for the replay's snapshot codec and streaming state)
# ---------------------------------------------------------------------------------------------
#: Leading byte of ``dump_snapshot``'s output; a change of layout gets a new number.
SNAPSHOT_DUMP_VERSION: Final = 1


def _member_to_list(m: ConsumerMember) -> list[Any]:
    c = m.classic_member_metadata
    classic = None if c is None else [c.session_timeout_ms, [[p.name, p.metadata.hex()] for p in c.supported_protocols]]
    return [
        m.member_id,
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        list(m.subscribed_topic_names),
        m.subscribed_topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
        classic,
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        _assignment_to_list(m.assigned_partitions),
        _assignment_to_list(m.partitions_pending_revocation),
    ]


def _member_from_list(v: list[Any]) -> ConsumerMember:
    classic = None
    if v[9] is not None:
        classic = ClassicMemberMetadata(v[9][0], tuple(ClassicProtocol(n, bytes.fromhex(b)) for n, b in v[9][1]))
    return ConsumerMember(
        v[0],
        v[1],
        v[2],
        v[3],
        v[4],
        tuple(v[5]),
        v[6],
        v[7],
        v[8],
        classic,
        v[10],
        v[11],
        v[12],
        _assignment_from_list(v[13]),
        _assignment_from_list(v[14]),
    )


def _assignment_to_list(a: Assignment) -> list[Any]:
    return [[t, list(ps)] for t, ps in a]


def _assignment_from_list(v: list[Any]) -> Assignment:
    return tuple((t, tuple(ps)) for t, ps in v)


def _rebalance_to_list(r: ConsumerRebalance | None) -> list[Any] | None:
    if r is None:
        return None
    return [
        [
            f.name,
            list(map(list, v))
            if f.name in ("partitions_gained", "partitions_lost")
            else list(v)
            if isinstance(v, tuple)
            else v,
        ]
        for f in dataclasses.fields(r)
        for v in (getattr(r, f.name),)
    ]


def _rebalance_from_list(v: list[Any] | None) -> ConsumerRebalance | None:
    if v is None:
        return None
    kw: dict[str, Any] = {}
    for name, x in v:
        if name in ("partitions_gained", "partitions_lost"):
            x = tuple(tuple(p) for p in x)
        elif isinstance(x, list):
            x = tuple(x)
        kw[name] = x
    return ConsumerRebalance(**kw)


def dump_snapshot(s: ConsumerGroupSnapshot) -> bytes:
    """``s`` as bytes (a version byte, then compact JSON); ``load_snapshot`` inverts it exactly."""
    doc = [
        s.group_id,
        s.group_type,
        s.deleted,
        s.group_epoch,
        s.target_assignment_epoch,
        s.metadata_hash,
        [_member_to_list(m) for m in s.members.values()],
        [[mid, _assignment_to_list(a)] for mid, a in s.target_assignment.items()],
        [[rx, list(r.topics), r.image_version, r.timestamp_ms] for rx, r in s.resolved_regexes.items()],
        [[t, n] for t, n in s.topic_names.items()],
        sorted(s.subscribed_topics),
        s.has_subscription_metadata,
        s.created_ms,
        s.state_timestamp_ms,
        s.classic_generation,
        s.classic_protocol_type,
        s.classic_members,
        s.last_timestamp_ms,
        s.epoch_known,
        s.converted_from_classic,
        [[k, v] for k, v in s.epoch_members.items()],
        s.last_bump_ms,
        s.last_assignor,
        [[mid, _assignment_to_list(a)] for mid, a in s.installed_target.items()],
        _rebalance_to_list(s.pending_rebalance),
        s.removed_type,
        s.removed_ms,
        s.removed_generation,
    ]
    return bytes([SNAPSHOT_DUMP_VERSION]) + json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def load_snapshot(data: bytes) -> ConsumerGroupSnapshot:
    """Inverse of ``dump_snapshot``.

    Raises:
        ValueError: not a dump of a known version.
    """
    if not data or data[0] != SNAPSHOT_DUMP_VERSION:
        raise ValueError(f"not a consumer-group snapshot dump of version {SNAPSHOT_DUMP_VERSION}")
    d = json.loads(data[1:].decode())
    members = {m.member_id: m for m in map(_member_from_list, d[6])}
    return ConsumerGroupSnapshot(
        group_id=d[0],
        group_type=d[1],
        deleted=d[2],
        group_epoch=d[3],
        target_assignment_epoch=d[4],
        metadata_hash=d[5],
        members=MappingProxyType(members),
        target_assignment=MappingProxyType({mid: _assignment_from_list(a) for mid, a in d[7]}),
        resolved_regexes=MappingProxyType({rx: ResolvedRegex(tuple(t), v, ts) for rx, t, v, ts in d[8]}),
        topic_names=MappingProxyType(dict(d[9])),
        subscribed_topics=frozenset(d[10]),
        has_subscription_metadata=d[11],
        created_ms=d[12],
        state_timestamp_ms=d[13],
        classic_generation=d[14],
        classic_protocol_type=d[15],
        classic_members=d[16],
        last_timestamp_ms=d[17],
        epoch_known=d[18],
        converted_from_classic=d[19],
        epoch_members=MappingProxyType(dict(d[20])),
        last_bump_ms=d[21],
        last_assignor=d[22],
        installed_target=MappingProxyType({mid: _assignment_from_list(a) for mid, a in d[23]}),
        pending_rebalance=_rebalance_from_list(d[24]),
        removed_type=d[25],
        removed_ms=d[26],
        removed_generation=d[27],
    )
