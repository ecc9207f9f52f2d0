"""The fold of one Kafka 4 consumer group (KIP-848): its records, in log order, into a
``ConsumerGroupSnapshot`` (``coordinator_core.modern.consumer.model``), telling what happened
(``coordinator_core.modern.consumer.events``).

Facts from apache/kafka's group-coordinator module (4.0-4.x): ``GroupMetadataManager.replay``
for ConsumerGroupMetadata (3), PartitionMetadata (4), MemberMetadata (5), TargetAssignment-
Metadata (6), TargetAssignmentMember (7), CurrentMemberAssignment (8), RegularExpression (16)
and the classic GroupMetadata (2); ``getOrMaybeCreatePersistedConsumerGroup``,
``ConsumerGroup.updateMember``/``removeMember``, ``ConsumerGroupMember.Builder.updateWith``,
``convertToConsumerGroup``/``convertToClassicGroup``.

Rules:
- One fold per group id, fed each record once, in log order (the replay loop owns positions
  and duplicates); one handler per record type (``HANDLERS``,
  ``coordinator_core.modern.consumer.handlers``); gold rows in ``modern.consumer.rows``. Keys/values are
  ``coordinator_core.codec.modern_records`` objects (``decode_record(..., modern=True)``); ``None``
  is a tombstone.
- A value record creates the consumer group when none exists, or when the group is a *simple*
  classic group (no protocol type, Empty), which it replaces. A tombstone never creates one: a
  tombstone for a missing group or member is ignored. (Kafka also replaces a simple classic
  group on a consumer *tombstone*, leaving an empty consumer group; no writer produces that
  sequence, and the fold ignores such a tombstone.)
- Members: a MemberMetadata value sets the subscription part (instance id, rack, client id/host,
  subscribed names - sorted, as Kafka sorts them -, regex, rebalance timeout, server assignor,
  classic member metadata); a CurrentMemberAssignment value sets member epoch, previous epoch,
  member state and the assigned/pending-revocation partitions. A member first seen through
  either record starts from Kafka's defaults (epoch 0, previous epoch -1, STABLE, nothing
  subscribed). A CurrentMemberAssignment tombstone sets both epochs to -1 and empties the
  partitions (the member stays); the MemberMetadata tombstone removes it.
- Group epoch and target assignment epoch start at 0; a TargetAssignmentMetadata tombstone sets
  the latter to -1; the ConsumerGroupMetadata tombstone removes the group (state Dead).
  PartitionMetadata (Kafka 4.0 subscription metadata) only names topic ids (kept: an id names
  one topic forever).
- Rebalances: each new group epoch is a ``ConsumerRebalance`` (members in/out since the last
  bump, the preferred assignor), told again under the same key when the target assignment of
  that epoch is installed (TargetAssignmentMetadata with that epoch: the partitions moved
  between the previous and the new target assignment), and when the group is Stable at that
  epoch (``reconciled_ms``).
- Classic <-> consumer (online upgrade/downgrade): Kafka writes the old group's tombstones and
  the new group's records in one batch (``convertToConsumerGroup``: GroupMetadata tombstone,
  then MemberMetadata*, ConsumerGroupMetadata(epoch = classic generation), TargetAssignment-
  Member*, TargetAssignmentMetadata, CurrentMemberAssignment*; ``convertToClassicGroup``:
  ``deletion_records`` then a GroupMetadata value with generation = group epoch). The fold
  follows the group id across: a GroupMetadata value replaces the consumer group (type
  ``classic``), a GroupMetadata tombstone removes whatever group exists (Kafka's
  ``removeGroup``), and the change is told as a ``ProtocolConversion`` when the removal and
  the creation share a timestamp (one write). The offsets are not the fold's: Kafka keeps them
  across (``OffsetMetadataManager`` stores them by group id, whatever the group's type).
- Records Kafka's loader refuses (``IllegalStateException``: a member tombstone before its
  assignment tombstones, a group tombstone with members, a consumer record for a non-simple
  classic group, a partition owned twice) are applied as the records intend and told as a
  ``ConsumerAnomaly``; nothing raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from types import MappingProxyType
from typing import TypeVar

from coordinator_core.codec.records import LogRecord, record_type_name
from coordinator_core.events import MemberPartition
from coordinator_core.modern.consumer.events import (
    ConsumerAnomaly,
    ConsumerEvent,
    ConsumerRebalance,
    ConsumerStateChange,
    ProtocolConversion,
)
from coordinator_core.modern.consumer.handlers import HANDLERS, record_position
from coordinator_core.modern.consumer.model import (
    DEFAULT_CONSUMER_ASSIGNOR,
    Assignment,
    ConsumerGroupSnapshot,
    ConsumerGroupState,
    ConsumerMember,
    GroupType,
    ResolvedRegex,
    TopicIdPartition,
    names_by_elimination,
    pairs,
)

_K = TypeVar("_K")

__all__ = ["ConsumerGroupFold", "fold"]


class ConsumerGroupFold:
    """The mutable working state of one group id; ``apply`` one record at a time, ``snapshot``
    freezes it. ``ConsumerGroupFold(group_id, snapshot)`` resumes from a snapshot."""

    def __init__(self, group_id: str, snapshot: ConsumerGroupSnapshot | None = None) -> None:
        s = snapshot if snapshot is not None else ConsumerGroupSnapshot(group_id)
        self.group_id = group_id
        self.group_type: GroupType | None = s.group_type
        self.deleted = s.deleted
        self.group_epoch = s.group_epoch
        self.target_epoch = s.target_assignment_epoch
        self.metadata_hash = s.metadata_hash
        self.members: dict[str, ConsumerMember] = dict(s.members)
        self.target: dict[str, Assignment] = dict(s.target_assignment)
        self.regexes: dict[str, ResolvedRegex] = dict(s.resolved_regexes)
        self.topic_names: dict[str, str] = dict(s.topic_names)
        self.has_subscription_metadata = s.has_subscription_metadata
        self.created_ms = s.created_ms
        self.state_timestamp_ms = s.state_timestamp_ms
        self.classic_generation = s.classic_generation
        self.classic_protocol_type = s.classic_protocol_type
        self.classic_members = s.classic_members
        self.last_timestamp_ms = s.last_timestamp_ms
        self.epoch_known = s.epoch_known
        self.converted_from_classic = s.converted_from_classic
        self.epoch_members: dict[str, str | None] = dict(s.epoch_members)
        self.last_bump_ms, self.last_assignor = s.last_bump_ms, s.last_assignor
        self.installed_target: dict[str, Assignment] = dict(s.installed_target)
        self.pending: ConsumerRebalance | None = s.pending_rebalance
        self.removed_type: GroupType | None = s.removed_type
        self.removed_ms = s.removed_ms
        self.removed_generation = s.removed_generation
        # derived indexes, rebuilt rather than stored: topic -> subscription count
        # (ModernGroup.subscribedTopicNames) and partition -> owner (ConsumerGroup.currentPartitionEpoch)
        self._counts: dict[str, int] = {}
        self._owners: dict[TopicIdPartition, str] = {}
        # member counts kept as members change, so that no record costs a pass over the members
        # (a group of 40k members): members reconciled (Stable) per member epoch, and members per
        # server assignor (``preferred_assignor``)
        self._reconciled: dict[int, int] = {}
        self._assignors: dict[str, int] = {}
        for m in self.members.values():
            self.count(m.subscribed_topic_names, 1)
            self._tally(m, 1)
            for tp in (*pairs(m.assigned_partitions), *pairs(m.partitions_pending_revocation)):
                self._owners[tp] = m.member_id
        for rx in self.regexes.values():
            self.count(rx.topics, 1)
        self._events: list[ConsumerEvent] = []
        self._record: LogRecord | None = None
        self._state = self.state  # as of the last record: one derivation per record

    # -- freezing --------------------------------------------------------------------------
    def snapshot(self) -> ConsumerGroupSnapshot:
        return ConsumerGroupSnapshot(
            group_id=self.group_id,
            group_type=self.group_type,
            deleted=self.deleted,
            group_epoch=self.group_epoch,
            target_assignment_epoch=self.target_epoch,
            metadata_hash=self.metadata_hash,
            members=MappingProxyType(dict(sorted(self.members.items()))),
            target_assignment=MappingProxyType(dict(sorted(self.target.items()))),
            resolved_regexes=MappingProxyType(dict(sorted(self.regexes.items()))),
            topic_names=MappingProxyType(dict(sorted(self.topic_names.items()))),
            subscribed_topics=frozenset(self._counts),
            has_subscription_metadata=self.has_subscription_metadata,
            created_ms=self.created_ms,
            state_timestamp_ms=self.state_timestamp_ms,
            classic_generation=self.classic_generation,
            classic_protocol_type=self.classic_protocol_type,
            classic_members=self.classic_members,
            last_timestamp_ms=self.last_timestamp_ms,
            epoch_known=self.epoch_known,
            converted_from_classic=self.converted_from_classic,
            epoch_members=MappingProxyType(dict(sorted(self.epoch_members.items()))),
            last_bump_ms=self.last_bump_ms,
            last_assignor=self.last_assignor,
            installed_target=MappingProxyType(dict(sorted(self.installed_target.items()))),
            pending_rebalance=self.pending,
            removed_type=self.removed_type,
            removed_ms=self.removed_ms,
            removed_generation=self.removed_generation,
        )

    @property
    def subscribed_topics(self) -> Iterable[str]:
        """The topics the group subscribes to (``ModernGroup.subscribedTopicNames``)."""
        return self._counts.keys()

    @property
    def state(self) -> ConsumerGroupState:
        """``derive_state`` from the counts kept (no pass over the members)."""
        if self.group_type != "consumer":
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_epoch:
            return ConsumerGroupState.ASSIGNING
        if self._reconciled.get(self.target_epoch, 0) == len(self.members):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def preferred_assignor(self) -> str | None:
        """``modern.consumer.model.preferred_assignor`` of the members, from the counts kept."""
        counts = self._assignors
        return min(counts, key=lambda name: (-counts[name], name)) if counts else None

    def _tally(self, m: ConsumerMember, sign: int) -> None:
        if m.state == "STABLE":
            _add(self._reconciled, m.member_epoch, sign)
        if m.server_assignor is not None:
            _add(self._assignors, m.server_assignor, sign)

    # -- the loop --------------------------------------------------------------------------
    def apply(self, record: LogRecord) -> list[ConsumerEvent]:
        """Apply one record of this group (types 2, 3-8, 16); returns the events it tells.

        Raises:
            ValueError: a record of another group or of a type the fold does not handle.
        """
        handler = HANDLERS.get(record.key.version)
        if handler is None or record.group != self.group_id:
            raise ValueError(
                f"consumer-group fold of {self.group_id!r} cannot apply "
                f"{record_type_name(record.key.version)} of group {record.group!r}"
            )
        self._events = []
        self._record = record
        before_type, before = self.group_type, self._state
        handler(self, record)
        after = self._state = self.state
        pending = self.pending
        if (
            after is ConsumerGroupState.STABLE
            and pending is not None
            and pending.assignment_epoch == self.target_epoch == pending.group_epoch
        ):
            self.tell(dataclasses.replace(pending, reconciled_ms=record.timestamp_ms))
            self.pending = None
        if after is not before or (before_type != "consumer" and self.group_type == "consumer"):
            if before_type == "consumer" or self.group_type == "consumer":
                self.tell(
                    ConsumerStateChange(
                        self.group_id,
                        record_position(record),
                        None if before_type != "consumer" else before.value,
                        after.value,
                        self.group_epoch,
                        self.target_epoch,
                        record.timestamp_ms,
                        record_type_name(record.key.version),
                    )
                )
            self.state_timestamp_ms = record.timestamp_ms
        self.last_timestamp_ms = record.timestamp_ms
        return self._events

    # -- the handlers' API (coordinator_core.modern.consumer.handlers) -------------------------
    def tell(self, event: ConsumerEvent) -> None:
        """Add an event to what the current record tells."""
        self._events.append(event)

    def anomaly(self, reason: str, detail: str) -> None:
        r = self._record
        assert r is not None
        self.tell(ConsumerAnomaly(self.group_id, record_position(r), reason, detail, r.timestamp_ms))

    def count(self, topics: Iterable[str], delta: int) -> None:
        counts = self._counts
        for t in topics:
            n = counts.get(t, 0) + delta
            if n > 0:
                counts[t] = n
            else:
                counts.pop(t, None)

    def consumer_group(self, record: LogRecord, create: bool) -> bool:
        """``getOrMaybeCreatePersistedConsumerGroup``: True when the record applies to a
        consumer group (created if ``create``)."""
        if self.group_type == "consumer":
            return True
        if self.group_type == "classic":
            simple = not self.classic_protocol_type and self.classic_members == 0
            if not simple:
                self.anomaly("not_a_consumer_group", f"Group {self.group_id} is not a consumer group")
            if not create:
                return False
            if simple:  # replaced, not converted: a simple group only holds offsets
                self.group_type = None
            else:
                self.remove(record, "classic")
        elif not create:
            return False
        self.create(record)
        return True

    def create(self, record: LogRecord) -> None:
        ts = record.timestamp_ms
        converted = self.removed_type == "classic" and self.removed_ms == ts
        self.group_type, self.deleted = "consumer", False
        self.group_epoch = self.target_epoch = self.metadata_hash = 0
        self.members, self.target, self.regexes = {}, {}, {}
        self._counts, self._owners, self._reconciled, self._assignors = {}, {}, {}, {}
        self.has_subscription_metadata = False
        self.created_ms, self.epoch_known, self.converted_from_classic = ts, False, converted
        self.epoch_members, self.installed_target, self.pending = {}, {}, None
        self.last_bump_ms, self.last_assignor = None, None
        self.classic_generation, self.classic_protocol_type, self.classic_members = None, None, 0
        if converted:
            self.tell(
                ProtocolConversion(
                    self.group_id, record_position(record), "classic", "consumer", self.removed_generation, 0, ts
                )
            )

    def remove(self, record: LogRecord, kind: GroupType) -> None:
        self.removed_type, self.removed_ms = kind, record.timestamp_ms
        self.removed_generation = self.group_epoch if kind == "consumer" else self.classic_generation
        if kind == "consumer":
            self.deleted = True
            self.members, self.target, self.regexes = {}, {}, {}
            self._counts, self._owners, self._reconciled, self._assignors = {}, {}, {}, {}
            self.epoch_members, self.installed_target, self.pending = {}, {}, None
        else:
            self.classic_generation, self.classic_protocol_type, self.classic_members = None, None, 0
        self.group_type = None

    # -- members ---------------------------------------------------------------------------
    def update_member(self, old: ConsumerMember | None, new: ConsumerMember | None) -> None:
        """``ConsumerGroup.updateMember`` / ``removeMember``: subscription counts and partition
        ownership (``maybeUpdatePartitionEpoch``, whose conflicts Kafka refuses). A record that
        leaves the subscription (or the partitions) unchanged skips that part."""
        owners = self._owners
        same_topics = old is not None and new is not None and old.subscribed_topic_names == new.subscribed_topic_names
        same_parts = (
            old is not None
            and new is not None
            and old.assigned_partitions == new.assigned_partitions
            and old.partitions_pending_revocation == new.partitions_pending_revocation
        )
        if old is not None:
            if not same_topics:
                self.count(old.subscribed_topic_names, -1)
            if not same_parts:
                for tp in (*pairs(old.assigned_partitions), *pairs(old.partitions_pending_revocation)):
                    if owners.get(tp) == old.member_id:
                        del owners[tp]
            self._tally(old, -1)
            del self.members[old.member_id]
        if new is not None:
            if not same_topics:
                self.count(new.subscribed_topic_names, 1)
            if not same_parts:
                for tp in (*pairs(new.assigned_partitions), *pairs(new.partitions_pending_revocation)):
                    owner = owners.get(tp)
                    if owner is not None and owner != new.member_id:
                        self.anomaly(
                            "partition_owned_twice",
                            (
                                f"Cannot set the epoch of {tp[0]}-{tp[1]} to {new.member_epoch} because the "
                                f"partition is still owned by member {owner}"
                            ),
                        )
                    owners[tp] = new.member_id
            self._tally(new, 1)
            self.members[new.member_id] = new

    # -- rebalances ------------------------------------------------------------------------
    def bump(self, record: LogRecord, epoch: int) -> None:
        previous = self.group_epoch if self.epoch_known else None
        self.group_epoch, self.epoch_known = epoch, True
        if previous is not None and epoch == previous:
            return
        before = self.epoch_members
        after = {m.member_id: m.instance_id for m in self.members.values()}
        old_ids = {i or mid for mid, i in before.items()}
        new_ids = {i or mid for mid, i in after.items()}
        back = sorted(i for mid, i in after.items() if i is not None and i in old_ids and mid not in before)
        joined = tuple(sorted(mid for mid, i in after.items() if (i or mid) not in old_ids))
        left = tuple(sorted(mid for mid, i in before.items() if (i or mid) not in new_ids))
        if previous is None:
            cause = "converted_from_classic" if self.converted_from_classic else "group_created"
        elif joined and left:
            cause = "members_changed"
        else:
            cause = "members_joined" if joined else "members_left" if left else "subscription_or_metadata"
        assignor = self.preferred_assignor() or DEFAULT_CONSUMER_ASSIGNOR
        ts = record.timestamp_ms
        self.pending = ConsumerRebalance(
            self.group_id,
            record_position(record),
            epoch,
            previous,
            ts,
            len(before),
            len(after),
            joined,
            left,
            tuple(back),
            assignor,
            cause,
            self.last_assignor,
            None if self.last_bump_ms is None else ts - self.last_bump_ms,
        )
        self.epoch_members, self.last_bump_ms, self.last_assignor = after, ts, assignor
        self.tell(self.pending)

    def install_target(self, record: LogRecord, epoch: int) -> None:
        self.name_by_elimination()  # first: the rebalance's partitions gained and lost by name
        pending = self.pending
        if pending is not None and pending.group_epoch == epoch and pending.assignment_epoch is None:
            before = {tp: mid for mid, a in self.installed_target.items() for tp in pairs(a)}
            after = {tp: mid for mid, a in self.target.items() for tp in pairs(a)}
            label = self.topic_names.get
            gained: list[MemberPartition] = sorted(
                (mid, label(tp[0], tp[0]), tp[1]) for tp, mid in after.items() if before.get(tp) != mid
            )
            lost: list[MemberPartition] = sorted(
                (mid, label(tp[0], tp[0]), tp[1]) for tp, mid in before.items() if after.get(tp) != mid
            )
            moved = sum(1 for tp, mid in after.items() if tp in before and before[tp] != mid)
            self.pending = dataclasses.replace(
                pending,
                assignment_epoch=epoch,
                assigned_ms=record.timestamp_ms,
                partitions_moved=moved,
                partitions_gained=tuple(gained),
                partitions_lost=tuple(lost),
            )
            self.tell(self.pending)
        self.installed_target = dict(self.target)

    def name_by_elimination(self) -> None:
        """Name the one topic id of the current epoch's target assignment no record named
        (``model.names_by_elimination``; an id names one topic forever, so the name is kept).
        Asked when a target assignment is installed and when a commit names an id, in log
        order; the names are kept in the snapshot, so a replay resumed from one names what one
        run names."""
        if self.target_epoch == self.group_epoch and self.target:
            self.topic_names.update(names_by_elimination(self.target, self.topic_names, self._counts))


def _add(counts: dict[_K, int], key: _K, n: int) -> None:
    total = counts.get(key, 0) + n
    if total:
        counts[key] = total
    else:
        counts.pop(key, None)


def fold(
    group_id: str, records: Iterable[LogRecord], snapshot: ConsumerGroupSnapshot | None = None
) -> tuple[ConsumerGroupSnapshot, list[ConsumerEvent]]:
    """Fold ``records`` (one group, log order) from ``snapshot``; the snapshot and the events."""
    f = ConsumerGroupFold(group_id, snapshot)
    events: list[ConsumerEvent] = []
    for r in records:
        events.extend(f.apply(r))
    return f.snapshot(), events
