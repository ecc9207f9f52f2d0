"""A consumer group's life (KIP-848) written as Kafka 4's coordinator writes it, for generators
and tests: the caller decides who joins, heartbeats and leaves; each method returns the records
of one coordinator write (one batch, one timestamp), in Kafka's order.

Facts from apache/kafka's group-coordinator module (4.0): ``GroupMetadataManager.
consumerGroupHeartbeat`` / ``consumerGroupLeave`` / ``removeMember``, ``TargetAssignmentBuilder``
(changed members' targets, then the target epoch), ``CurrentAssignmentBuilder`` (reconciliation),
``convertToConsumerGroup`` / ``convertToClassicGroup``, ``GroupMetadataManagerTest``'s expected
record lists.

Rules:
- ``join``: MemberMetadata, the subscription metadata (Kafka 4.0's PartitionMetadata) when the
  group's subscribed topics changed, ConsumerGroupMetadata (epoch + 1), then what the member's
  heartbeat writes (``heartbeat``). ``leave``: the member's CurrentMemberAssignment,
  TargetAssignmentMember and MemberMetadata tombstones, the subscription metadata when it
  changed, ConsumerGroupMetadata (epoch + 1); the next heartbeat installs the new target.
- ``heartbeat(member)``: when the target assignment is behind the group epoch, the members
  whose target changed (TargetAssignmentMember) then TargetAssignmentMetadata; then one
  reconciliation step of the member, written (CurrentMemberAssignment) only when it changes:
  partitions it owns but no longer targets are revoked first (UNREVOKED_PARTITIONS, epoch
  kept); once revoked (its next heartbeat acknowledges) it moves to the target epoch with the
  target partitions nobody else holds, UNRELEASED_PARTITIONS while some are still held, else
  STABLE.
- The target assignment is a range assignment over the members ordered by instance id, then
  member id (``assignors.range_assign``), standing in for the broker's server-side assignor.
- ``delete`` (an Empty group, or DeleteGroups) writes ``consumer_group_model.deletion_records``;
  ``upgrade_from_classic`` / ``downgrade_to_classic`` write the conversions (old group's
  tombstones, then the new group's records) with generation = group epoch carried across.
- Topic ids are derived from the topic names (``topic_id_for``) unless given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from coordinator_core.assignors import MemberSubscription, range_assign
from coordinator_core.consumer_group_model import ConsumerGroupSnapshot, ConsumerMember, deletion_records
from coordinator_core.consumer_protocol import encode_assignment, encode_subscription
from coordinator_core.modern_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupKey,
    GroupMemberKey,
    PartitionMetadata,
    TopicIdPartitions,
    TopicMetadata,
)
from coordinator_core.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    Record,
    Subscription,
    TopicPartitions,
)
from coordinator_core.wire import uuid_to_str

STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2
Partitions = frozenset[tuple[str, int]]  # (topic name, partition)


def topic_id_for(name: str) -> str:
    """A stable Kafka topic id (``Uuid.toString()``) derived from a topic name."""
    return uuid_to_str(hashlib.sha256(name.encode()).digest()[:16])


@dataclass
class _Member:
    member_id: str
    topics: tuple[str, ...]
    instance_id: str | None
    assignor: str | None
    classic_protocols: tuple[str, ...] | None
    epoch: int = 0
    previous_epoch: int = 0
    state: int = STABLE
    assigned: Partitions = frozenset()
    revoking: Partitions = frozenset()


@dataclass
class ConsumerGroupWriter:
    """One consumer group's coordinator: its state, and the records each event writes."""

    group_id: str
    partitions_per_topic: Mapping[str, int]
    subscription_metadata: bool = True  # Kafka 4.0 writes PartitionMetadata; 4.1+ a metadata hash
    topic_ids: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    group_epoch: int = 0
    target_epoch: int = 0
    members: dict[str, _Member] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    _subscribed: frozenset[str] = frozenset()

    # -- events ----------------------------------------------------------------------------
    def join(
        self, member_id: str, topics: Sequence[str], *, instance_id: str | None = None, assignor: str | None = "uniform"
    ) -> list[Record]:
        """A new member's first heartbeat (member epoch 0)."""
        if member_id in self.members:
            raise ValueError(f"member {member_id!r} is already in group {self.group_id!r}")
        m = _Member(member_id, tuple(sorted(topics)), instance_id, assignor, None)
        self.members[member_id] = m
        out = [self._member_record(m)]
        out += self._bump()
        return out + self.heartbeat(member_id)

    def leave(self, member_id: str) -> list[Record]:
        """A member leaving (epoch -1 heartbeat, or fenced: session/rebalance timeout)."""
        self.members.pop(member_id)
        self.target.pop(member_id, None)
        out = [Record(GroupMemberKey(self.group_id, member_id, k), None) for k in (8, 7, 5)]
        return out + self._bump()

    def heartbeat(self, member_id: str) -> list[Record]:
        """A member's heartbeat: the new target assignment if due, then one reconciliation step."""
        out: list[Record] = []
        if self.group_epoch > self.target_epoch:
            out += self._new_target()
        m = self.members[member_id]
        before = (m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking)
        self._reconcile(m)
        if (m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking) != before:
            out.append(self._current_record(m))
        return out

    def reconcile(self, max_rounds: int = 10) -> list[list[Record]]:
        """Heartbeats of every member, in member-id order, until the group is Stable; one write
        per heartbeat that wrote something."""
        batches: list[list[Record]] = []
        for _ in range(max_rounds):
            wrote = [b for b in (self.heartbeat(mid) for mid in sorted(self.members)) if b]
            if not wrote:
                return batches
            batches += wrote
        raise RuntimeError(f"group {self.group_id!r} did not reconcile in {max_rounds} rounds")

    def delete(self) -> list[Record]:
        """The group's tombstones (``createGroupTombstoneRecords``)."""
        snap = ConsumerGroupSnapshot(
            self.group_id, members=MappingProxyType({mid: ConsumerMember(mid) for mid in self.members})
        )
        self.members.clear()
        self.target.clear()
        self.group_epoch, self.target_epoch, self._subscribed = 0, -1, frozenset()
        return deletion_records(snap)

    def upgrade_from_classic(
        self, generation: int, members: Mapping[str, tuple[Sequence[str], Partitions]], protocol: str = "range"
    ) -> list[Record]:
        """``convertToConsumerGroup``: the classic group's tombstone, then each member (classic
        protocol, epoch = generation, STABLE with its classic assignment), the group epoch, the
        targets and target epoch (= the assignments), the current assignments."""
        out = [Record(GroupMetadataKey(self.group_id), None)]
        for mid, (topics, assigned) in sorted(members.items()):
            m = _Member(
                mid, tuple(sorted(topics)), None, None, (protocol,), generation, generation, STABLE, frozenset(assigned)
            )
            self.members[mid] = m
            self.target[mid] = m.assigned
            out.append(self._member_record(m))
        self.group_epoch = self.target_epoch = generation
        out.append(Record(GroupKey(self.group_id, 3), ConsumerGroupMetadataValue(generation)))
        out += [self._target_record(mid) for mid in sorted(members)]
        out.append(Record(GroupKey(self.group_id, 6), ConsumerGroupTargetAssignmentMetadataValue(generation)))
        out += [self._current_record(self.members[mid]) for mid in sorted(members)]
        return out

    def downgrade_to_classic(self, protocol: str = "range") -> list[Record]:
        """``convertToClassicGroup``: the group's tombstones, then a Stable classic group at
        generation = group epoch whose members keep their target assignments."""
        generation = self.group_epoch
        assignments = {mid: self.target.get(mid, frozenset()) for mid in self.members}
        topics = {mid: m.topics for mid, m in self.members.items()}
        out = self.delete()
        ms = tuple(
            MemberMetadata(
                mid,
                f"client-{mid}",
                "/127.0.0.1",
                45_000,
                encode_subscription(Subscription(topics[mid])),
                encode_assignment(
                    Assignment(
                        tuple(
                            TopicPartitions(t, tuple(sorted(p for tt, p in assignments[mid] if tt == t)))
                            for t in sorted({t for t, _ in assignments[mid]})
                        )
                    )
                ),
                rebalance_timeout=45_000,
            )
            for mid in sorted(assignments)
        )
        leader = ms[0].member_id if ms else None
        out.append(
            Record(
                GroupMetadataKey(self.group_id),
                GroupMetadataValue("consumer", generation, protocol if ms else None, leader, ms, None),
            )
        )
        return out

    # -- internals -------------------------------------------------------------------------
    def _tid(self, topic: str) -> str:
        return self.topic_ids.get(topic) or topic_id_for(topic)

    def _tps(self, parts: Partitions) -> tuple[TopicIdPartitions, ...]:
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(self._tid(t), []).append(p)
        return tuple(TopicIdPartitions(tid, tuple(sorted(ps))) for tid, ps in sorted(by_topic.items()))

    def _member_record(self, m: _Member) -> Record:
        classic = None
        if m.classic_protocols is not None:
            sub = encode_subscription(Subscription(m.topics))
            classic = ClassicMemberMetadata(45_000, tuple(ClassicProtocol(p, sub) for p in m.classic_protocols))
        return Record(
            GroupMemberKey(self.group_id, m.member_id, 5),
            ConsumerGroupMemberMetadataValue(
                instance_id=m.instance_id,
                rack_id=None,
                client_id=f"client-{m.member_id}",
                client_host="/127.0.0.1",
                subscribed_topic_names=m.topics,
                subscribed_topic_regex=None,
                server_assignor=m.assignor,
                rebalance_timeout_ms=45_000,
                classic_member_metadata=classic,
            ),
        )

    def _target_record(self, member_id: str) -> Record:
        return Record(
            GroupMemberKey(self.group_id, member_id, 7),
            ConsumerGroupTargetAssignmentMemberValue(self._tps(self.target.get(member_id, frozenset()))),
        )

    def _current_record(self, m: _Member) -> Record:
        return Record(
            GroupMemberKey(self.group_id, m.member_id, 8),
            ConsumerGroupCurrentMemberAssignmentValue(
                m.epoch, m.previous_epoch, m.state, self._tps(m.assigned), self._tps(m.revoking)
            ),
        )

    def _bump(self) -> list[Record]:
        out: list[Record] = []
        subscribed = frozenset(t for m in self.members.values() for t in m.topics if t in self.partitions_per_topic)
        if subscribed != self._subscribed and self.subscription_metadata:
            out.append(
                Record(
                    GroupKey(self.group_id, 4),
                    ConsumerGroupPartitionMetadataValue(
                        tuple(
                            TopicMetadata(
                                self._tid(t),
                                t,
                                self.partitions_per_topic[t],
                                tuple(PartitionMetadata(p, ()) for p in range(self.partitions_per_topic[t])),
                            )
                            for t in sorted(subscribed)
                        )
                    ),
                )
            )
        self._subscribed = subscribed
        self.group_epoch += 1
        out.append(Record(GroupKey(self.group_id, 3), ConsumerGroupMetadataValue(self.group_epoch)))
        return out

    def _new_target(self) -> list[Record]:
        subs = {mid: MemberSubscription(m.topics, group_instance_id=m.instance_id) for mid, m in self.members.items()}
        new = {mid: frozenset(tps) for mid, tps in range_assign(self.partitions_per_topic, subs).items()}
        changed = sorted(mid for mid in new if new[mid] != self.target.get(mid))
        self.target = new
        self.target_epoch = self.group_epoch
        out = [self._target_record(mid) for mid in changed]
        out.append(Record(GroupKey(self.group_id, 6), ConsumerGroupTargetAssignmentMetadataValue(self.target_epoch)))
        return out

    def _reconcile(self, m: _Member) -> None:
        """One ``CurrentAssignmentBuilder`` step (the heartbeat acknowledges any revocation)."""
        target = self.target.get(m.member_id, frozenset())
        if m.state == STABLE and m.epoch == self.target_epoch:
            return
        base = m.epoch
        if m.state == UNREVOKED_PARTITIONS:
            m.revoking = frozenset()  # revoked: this heartbeat acknowledges it
            base = m.epoch + 1  # CurrentAssignmentBuilder: computeNextAssignment(memberEpoch + 1)
        retained = m.assigned & target
        revoke = m.assigned - target
        if revoke:  # updateMemberEpoch(base): previous = current epoch
            m.previous_epoch, m.epoch = m.epoch, base
            m.state, m.assigned, m.revoking = UNREVOKED_PARTITIONS, retained, revoke
            return
        held = {tp for o in self.members.values() if o is not m for tp in (*o.assigned, *o.revoking)}
        free = {tp for tp in target - retained if tp not in held}
        m.assigned = frozenset(retained | free)
        m.previous_epoch, m.epoch = m.epoch, self.target_epoch
        m.state = UNRELEASED_PARTITIONS if (target - m.assigned) else STABLE
