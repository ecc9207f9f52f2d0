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
- The target assignment: with ``server_side_assignors`` (what the simulator uses), the group's
  preferred server assignor (``ConsumerGroup.preferredServerAssignor``: the one most members
  chose, else ``uniform``) from ``assignors.SERVER_ASSIGNORS``, sticky on the current target;
  without it (the tests' fixed stand-in) a range assignment over the members ordered by
  instance id, then member id (``assignors.range_assign``).
- Static members (KIP-848): ``static_leave`` (heartbeat with epoch -2,
  ``consumerGroupStaticMemberGroupLeave``) writes the member's CurrentMemberAssignment at epoch
  -2 with nothing pending revocation, the member keeps its target; ``replace_static`` (the
  instance id back under a new member id, ``replaceMember``) writes the old member's 8, 7, 5
  tombstones, the new member's subscription, its target (the old member's) and its current
  assignment (the old one's, epoch 0), then its reconciliation - no epoch bump.
- ``refresh_subscription`` (a subscribed topic deleted or created: Kafka 4.0 refreshes the
  subscription metadata on the next heartbeat) bumps the epoch when the subscribed topics that
  exist changed.
- ``delete`` (an Empty group, or DeleteGroups) writes ``modern.consumer.model.deletion_records``;
  ``upgrade_from_classic`` / ``downgrade_to_classic`` write the conversions (old group's
  tombstones, then the new group's records) with generation = group epoch carried across.
- Topic ids are derived from the topic names (``topic_id_for``) unless given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from coordinator_core.codec.consumer_protocol import encode_assignment, encode_subscription
from coordinator_core.codec.modern_records import (
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
from coordinator_core.codec.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    Record,
    Subscription,
    TopicPartitions,
)
from coordinator_core.codec.wire import uuid_to_str
from coordinator_core.modern.consumer.model import (
    DEFAULT_CONSUMER_ASSIGNOR,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupSnapshot,
    ConsumerMember,
    deletion_records,
    preferred_assignor,
)
from coordinator_core.simulator.assignors import SERVER_ASSIGNORS, MemberSubscription, range_assign

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
    client_id: str | None = None
    client_host: str = "/127.0.0.1"
    rebalance_timeout_ms: int = 45_000
    session_timeout_ms: int = 45_000  # a classic-protocol member's JoinGroup session timeout


@dataclass
class ConsumerGroupWriter:
    """One consumer group's coordinator: its state, and the records each event writes."""

    group_id: str
    partitions_per_topic: Mapping[str, int]
    subscription_metadata: bool = True  # Kafka 4.0 writes PartitionMetadata; 4.1+ a metadata hash
    server_side_assignors: bool = False  # the preferred server assignor, sticky (see the rules)
    topic_ids: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    group_epoch: int = 0
    target_epoch: int = 0
    members: dict[str, _Member] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    _subscribed: frozenset[str] = frozenset()

    # -- events ----------------------------------------------------------------------------
    def join(
        self,
        member_id: str,
        topics: Sequence[str],
        *,
        instance_id: str | None = None,
        assignor: str | None = "uniform",
        client_id: str | None = None,
        client_host: str = "/127.0.0.1",
        rebalance_timeout_ms: int = 45_000,
        classic_protocols: Sequence[str] | None = None,
        session_timeout_ms: int = 45_000,
    ) -> list[Record]:
        """A new member's first heartbeat (member epoch 0); with ``classic_protocols``, a
        classic-protocol member's JoinGroup into the consumer group (no server assignor)."""
        if member_id in self.members:
            raise ValueError(f"member {member_id!r} is already in group {self.group_id!r}")
        m = _Member(
            member_id,
            tuple(sorted(topics)),
            instance_id,
            assignor if classic_protocols is None else None,
            None if classic_protocols is None else tuple(classic_protocols),
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
        )
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

    def static_leave(self, member_id: str) -> list[Record]:
        """A static member leaving for a while (epoch -2): it keeps its assignment and target."""
        m = self.members[member_id]
        if m.instance_id is None:
            raise ValueError(f"member {member_id!r} of group {self.group_id!r} is not static")
        m.epoch, m.revoking = LEAVE_GROUP_STATIC_MEMBER_EPOCH, frozenset()
        return [self._current_record(m)]

    def replace_static(self, old_id: str, new_id: str, *, client_id: str | None = None) -> list[Record]:
        """The instance id of ``old_id`` rejoins as ``new_id`` (``replaceMember``), then the new
        member's first reconciliation; no epoch bump."""
        old = self.members.pop(old_id)
        if new_id in self.members:
            raise ValueError(f"member {new_id!r} is already in group {self.group_id!r}")
        target = self.target.pop(old_id, frozenset())
        out = [Record(GroupMemberKey(self.group_id, old_id, k), None) for k in (8, 7, 5)]
        m = _Member(
            new_id,
            old.topics,
            old.instance_id,
            old.assignor,
            old.classic_protocols,
            epoch=0,
            previous_epoch=0,
            state=old.state,
            assigned=old.assigned,
            revoking=frozenset(),
            client_id=client_id or old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
        )
        self.members[new_id] = m
        self.target[new_id] = target
        out += [self._member_record(m), self._target_record(new_id), self._current_record(m)]
        return out + self.heartbeat(new_id)

    def refresh_subscription(self) -> list[Record]:
        """The subscribed topics that exist changed (a topic deleted or created): an epoch bump."""
        if not self.members or self._subscribed_now() == self._subscribed:
            return []
        return self._bump()

    @property
    def assignor(self) -> str:
        """``preferredServerAssignor``: the server assignor most members chose, else uniform."""
        chosen = preferred_assignor(ConsumerMember(mid, server_assignor=m.assignor) for mid, m in self.members.items())
        return chosen or DEFAULT_CONSUMER_ASSIGNOR

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
        self,
        generation: int,
        members: Mapping[str, tuple[Sequence[str], Partitions]],
        protocol: str = "range",
        clients: Mapping[str, tuple[str, str, int, int]] | None = None,
    ) -> list[Record]:
        """``convertToConsumerGroup``: the classic group's tombstone, then each member (classic
        protocol, epoch = generation, STABLE with its classic assignment), the group epoch, the
        targets and target epoch (= the assignments), the current assignments. ``clients``:
        member id -> (client id, client host, session timeout, rebalance timeout) as the classic
        group knew them."""
        out = [Record(GroupMetadataKey(self.group_id), None)]
        for mid, (topics, assigned) in sorted(members.items()):
            client_id, host, session, rebalance = (clients or {}).get(mid, (None, "/127.0.0.1", 45_000, 45_000))
            m = _Member(
                mid,
                tuple(sorted(topics)),
                None,
                None,
                (protocol,),
                generation,
                generation,
                STABLE,
                frozenset(assigned),
                client_id=client_id,
                client_host=host,
                session_timeout_ms=session,
                rebalance_timeout_ms=rebalance,
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
            classic = ClassicMemberMetadata(
                m.session_timeout_ms, tuple(ClassicProtocol(p, sub) for p in m.classic_protocols)
            )
        return Record(
            GroupMemberKey(self.group_id, m.member_id, 5),
            ConsumerGroupMemberMetadataValue(
                instance_id=m.instance_id,
                rack_id=None,
                client_id=m.client_id or f"client-{m.member_id}",
                client_host=m.client_host,
                subscribed_topic_names=m.topics,
                subscribed_topic_regex=None,
                server_assignor=m.assignor,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
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

    def _subscribed_now(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.topics if t in self.partitions_per_topic)

    def _bump(self) -> list[Record]:
        out: list[Record] = []
        subscribed = self._subscribed_now()
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
        if self.server_side_assignors:
            subs = {
                mid: MemberSubscription(m.topics, tuple(sorted(self.target.get(mid, ()))), m.instance_id)
                for mid, m in self.members.items()
            }
            fn = SERVER_ASSIGNORS[self.assignor]
            new = {mid: frozenset(tps) for mid, tps in fn(self.partitions_per_topic, subs).items()}
        else:
            subs = {
                mid: MemberSubscription(m.topics, group_instance_id=m.instance_id) for mid, m in self.members.items()
            }
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
        if (m.state == STABLE and m.epoch == self.target_epoch) or m.epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
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
