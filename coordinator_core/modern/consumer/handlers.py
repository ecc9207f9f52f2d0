"""One handler per consumer-group record type: how Kafka 4's loader applies each record
(``GroupMetadataManager.replay`` overloads for ConsumerGroupMetadata, PartitionMetadata,
MemberMetadata, TargetAssignmentMetadata, TargetAssignmentMember, CurrentMemberAssignment,
RegularExpression, and the classic GroupMetadata) to a ``ConsumerGroupFold``.

Rules: see ``coordinator_core.modern.consumer.fold`` (the fold owns the state and the events; a
handler decides what one record does to it, through the fold's handler API: ``consumer_group``,
``update_member``, ``bump``, ``install_target``, ``remove``, ``count``, ``anomaly``, ``tell``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Final, Protocol

from coordinator_core.codec.modern_records import (
    MODERN_MEMBER_STATES,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMemberKey,
    RegularExpressionKey,
    TopicIdPartitions,
)
from coordinator_core.codec.records import GroupMetadataValue, LogRecord
from coordinator_core.modern.consumer.events import ConsumerEvent, ProtocolConversion
from coordinator_core.modern.consumer.model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Assignment,
    ConsumerMember,
    GroupType,
    ResolvedRegex,
)


class Fold(Protocol):
    """What a handler reads and changes of the group's fold (``fold.ConsumerGroupFold`` is the
    one): the fold imports its handlers, so they know it by this interface, not by its module."""

    group_id: str
    group_type: GroupType | None
    target_epoch: int
    metadata_hash: int
    members: dict[str, ConsumerMember]
    target: dict[str, Assignment]
    regexes: dict[str, ResolvedRegex]
    topic_names: dict[str, str]
    has_subscription_metadata: bool
    classic_generation: int | None
    classic_protocol_type: str | None
    classic_members: int
    removed_type: GroupType | None
    removed_ms: int | None

    def tell(self, event: ConsumerEvent) -> None: ...
    def anomaly(self, reason: str, detail: str) -> None: ...
    def count(self, topics: Iterable[str], delta: int) -> None: ...
    def consumer_group(self, record: LogRecord, create: bool) -> bool: ...
    def remove(self, record: LogRecord, kind: GroupType) -> None: ...
    def update_member(self, old: ConsumerMember | None, new: ConsumerMember | None) -> None: ...
    def bump(self, record: LogRecord, epoch: int) -> None: ...
    def install_target(self, record: LogRecord, epoch: int) -> None: ...


def record_position(r: LogRecord) -> str:
    """``<partition>:<offset>``: the event key of what a record tells."""
    return f"{r.partition}:{r.offset}"


def _assignment(tps: Iterable[TopicIdPartitions]) -> Assignment:
    merged: dict[str, set[int]] = {}
    for tp in tps:
        merged.setdefault(tp.topic_id, set()).update(tp.partitions)
    return tuple((tid, tuple(sorted(ps))) for tid, ps in sorted(merged.items()) if ps)


def _on_group_metadata(f: Fold, r: LogRecord) -> None:
    """GroupMetadata (2): a value puts a classic group in place of any group; a tombstone
    removes any group (``removeGroup``)."""
    value = r.value
    if value is None:
        if f.group_type == "consumer":
            f.anomaly(
                "group_metadata_tombstone_removed_consumer_group",
                f"A GroupMetadata tombstone removed consumer group {f.group_id}",
            )
        if f.group_type is not None:
            f.remove(r, f.group_type)
        return
    assert isinstance(value, GroupMetadataValue)
    converted = f.group_type == "consumer" or (f.removed_type == "consumer" and f.removed_ms == r.timestamp_ms)
    if f.group_type == "consumer":
        f.remove(r, "consumer")
    if converted:
        f.tell(
            ProtocolConversion(
                f.group_id,
                record_position(r),
                "consumer",
                "classic",
                value.generation,
                len(value.members),
                r.timestamp_ms,
            )
        )
    f.group_type = "classic"
    f.classic_generation, f.classic_protocol_type = value.generation, value.protocol_type
    f.classic_members = len(value.members)


def _on_group_epoch(f: Fold, r: LogRecord) -> None:
    value = r.value
    if value is None:
        if not f.consumer_group(r, create=False):
            return
        if f.members or f.target or f.target_epoch != -1:
            f.anomaly(
                "group_tombstone_not_empty",
                (
                    f"Received a tombstone record to delete group {f.group_id} but the group still has "
                    f"{len(f.members)} members, {len(f.target)} target assignments, assignment epoch {f.target_epoch}"
                ),
            )
        f.remove(r, "consumer")
        return
    assert isinstance(value, ConsumerGroupMetadataValue)
    f.consumer_group(r, create=True)
    f.metadata_hash = value.metadata_hash
    f.bump(r, value.epoch)


def _on_partition_metadata(f: Fold, r: LogRecord) -> None:
    value = r.value
    if not f.consumer_group(r, create=value is not None):
        return
    f.has_subscription_metadata = value is not None
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        for t in value.topics:  # a topic id names one topic forever: keep what was learned
            f.topic_names[t.topic_id] = t.topic_name


def _on_member_metadata(f: Fold, r: LogRecord) -> None:
    key, value = r.key, r.value
    assert isinstance(key, GroupMemberKey)
    if not f.consumer_group(r, create=value is not None):
        return
    old = f.members.get(key.member_id)
    if value is None:
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            f.anomaly(
                "member_tombstone_before_assignment_tombstone",
                (
                    f"Received a tombstone record to delete member {key.member_id} but did not receive "
                    "ConsumerGroupCurrentMemberAssignmentValue tombstone."
                ),
            )
        if key.member_id in f.target:
            f.anomaly(
                "member_tombstone_before_target_tombstone",
                (
                    f"Received a tombstone record to delete member {key.member_id} but did not receive "
                    "ConsumerGroupTargetAssignmentMetadataValue tombstone."
                ),
            )
        f.update_member(old, None)
        return
    assert isinstance(value, ConsumerGroupMemberMetadataValue)
    new = dataclasses.replace(
        old if old is not None else ConsumerMember(key.member_id),
        instance_id=value.instance_id,
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        subscribed_topic_names=tuple(sorted(value.subscribed_topic_names)),
        subscribed_topic_regex=value.subscribed_topic_regex or None,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        server_assignor=value.server_assignor,
        classic_member_metadata=value.classic_member_metadata,
    )
    f.update_member(old, new)


def _on_target_metadata(f: Fold, r: LogRecord) -> None:
    value = r.value
    if not f.consumer_group(r, create=value is not None):
        return
    if value is None:
        if f.target:
            f.anomaly(
                "target_epoch_tombstone_not_empty",
                (
                    f"Received a tombstone record to delete target assignment of {f.group_id} but the "
                    f"assignment still has {len(f.target)} members."
                ),
            )
        f.target_epoch = -1
        return
    assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
    f.target_epoch = value.assignment_epoch
    f.install_target(r, value.assignment_epoch)


def _on_target_member(f: Fold, r: LogRecord) -> None:
    key, value = r.key, r.value
    assert isinstance(key, GroupMemberKey)
    if not f.consumer_group(r, create=value is not None):
        return
    if value is None:
        f.target.pop(key.member_id, None)
        return
    assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
    f.target[key.member_id] = _assignment(value.topic_partitions)


def _on_current_assignment(f: Fold, r: LogRecord) -> None:
    key, value = r.key, r.value
    assert isinstance(key, GroupMemberKey)
    if not f.consumer_group(r, create=value is not None):
        return
    old = f.members.get(key.member_id)
    if value is None:
        if old is not None:
            f.update_member(
                old,
                dataclasses.replace(
                    old,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned_partitions=(),
                    partitions_pending_revocation=(),
                ),
            )
        return
    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
    f.update_member(
        old,
        dataclasses.replace(
            old if old is not None else ConsumerMember(key.member_id),
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MODERN_MEMBER_STATES.get(value.state, "UNKNOWN"),
            assigned_partitions=_assignment(value.assigned_partitions),
            partitions_pending_revocation=_assignment(value.partitions_pending_revocation),
        ),
    )


def _on_regular_expression(f: Fold, r: LogRecord) -> None:
    key, value = r.key, r.value
    assert isinstance(key, RegularExpressionKey)
    if not f.consumer_group(r, create=value is not None):
        return
    old = f.regexes.pop(key.regular_expression, None)
    if old is not None:
        f.count(old.topics, -1)
    if value is not None:
        assert isinstance(value, ConsumerGroupRegularExpressionValue)
        new = ResolvedRegex(tuple(sorted(set(value.topics))), value.image_version, value.timestamp)
        f.regexes[key.regular_expression] = new
        f.count(new.topics, 1)


HANDLERS: Final[Mapping[int, Callable[[Fold, LogRecord], None]]] = MappingProxyType(
    {
        2: _on_group_metadata,
        3: _on_group_epoch,
        4: _on_partition_metadata,
        5: _on_member_metadata,
        6: _on_target_metadata,
        7: _on_target_member,
        8: _on_current_assignment,
        16: _on_regular_expression,
    }
)
