"""The fold of one Kafka 4 share group (KIP-932): its records (types 10-15), in log order, into
a ``ModernGroupSnapshot`` whose members are ``ShareMember``s, telling what happened.

Facts from apache/kafka's group-coordinator module (4.2-4.4): ``GroupMetadataManager.replay``
for ShareGroupMemberMetadata (10), ShareGroupMetadata (11), ShareGroupTargetAssignmentMetadata
(12), ShareGroupTargetAssignmentMember (13), ShareGroupCurrentMemberAssignment (14),
ShareGroupStatePartitionMetadata (15); ``ShareGroup.getOrMaybeCreateMember``.

Rules (the shared ones: ``coordinator_core.modern.group_epochs``; the group's own:
``coordinator_core.modern.share.model``):
- One handler per record type (``HANDLERS``). A MemberMetadata or CurrentMemberAssignment
  value for an unknown member creates it with the defaults (``getOrMaybeCreateMember``); a
  tombstone for an unknown member is ignored. The CurrentMemberAssignment tombstone sets both
  epochs to -1 and empties its partitions (the member stays); the MemberMetadata tombstone
  removes it - Kafka refuses it unless the member's epoch is -1 and it has no target
  assignment (told as an anomaly).
- A rebalance is settled when every member is STABLE at the target assignment epoch (share
  groups have no Reconciling state: this is when each member has heartbeated its new
  assignment).
- The state-partition metadata names topics by id and name; assignments are by topic id and
  the rows label them by name once a record named them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final

from coordinator_core.codec.modern_records import (
    MODERN_MEMBER_STATES,
    GroupMemberKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
)
from coordinator_core.codec.records import LogRecord
from coordinator_core.modern.group_epochs import ModernGroupFold, Unit
from coordinator_core.modern.share.model import (
    DEFAULT_SHARE_ASSIGNOR,
    Assignment,
    ShareDetails,
    ShareMember,
    ShareStateTopics,
    assignment,
    derive_state,
    pairs,
)

LEAVE_GROUP_MEMBER_EPOCH: Final = -1


def _member(f: ShareGroupFold, r: LogRecord) -> tuple[str, ShareMember | None]:
    key = r.key
    assert isinstance(key, GroupMemberKey)
    return key.member_id, f.members.get(key.member_id)


def _on_member_metadata(f: ShareGroupFold, r: LogRecord) -> None:
    value = r.value
    if not f.group(r, create=value is not None):
        return
    mid, old = _member(f, r)
    if value is None:
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
            f.anomaly(
                "member_tombstone_before_assignment_tombstone",
                f"Received a tombstone record to delete member {mid} with invalid leave group epoch.",
            )
        if mid in f.target:
            f.anomaly(
                "member_tombstone_before_target_tombstone",
                f"Received a tombstone record to delete member {mid} but member exists in target assignment.",
            )
        f.put_member(old, None)
        return
    assert isinstance(value, ShareGroupMemberMetadataValue)
    new = dataclasses.replace(
        old if old is not None else ShareMember(mid),
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        subscribed_topic_names=tuple(sorted(set(value.subscribed_topic_names))),
    )
    f.put_member(old, new)


def _on_group_epoch(f: ShareGroupFold, r: LogRecord) -> None:
    value = r.value
    if value is None:
        if not f.group(r, create=False):
            return
        if f.members or f.target or f.target_epoch != -1:
            f.anomaly(
                "group_tombstone_not_empty",
                (
                    f"Received a tombstone record to delete group {f.group_id} but the group still has "
                    f"{len(f.members)} members, {len(f.target)} target assignments, assignment epoch {f.target_epoch}"
                ),
            )
        f.remove(r)
        return
    assert isinstance(value, ShareGroupMetadataValue)
    f.group(r, create=True)
    f.metadata_hash = value.metadata_hash
    f.bump(r, value.epoch)


def _on_target_member(f: ShareGroupFold, r: LogRecord) -> None:
    value = r.value
    if not f.group(r, create=value is not None):
        return
    mid, _ = _member(f, r)
    if value is None:
        f.target.pop(mid, None)
        return
    assert isinstance(value, ShareGroupTargetAssignmentMemberValue)
    f.target[mid] = assignment(value.topic_partitions)


def _on_current_assignment(f: ShareGroupFold, r: LogRecord) -> None:
    value = r.value
    if not f.group(r, create=value is not None):
        return
    mid, old = _member(f, r)
    if value is None:
        if old is not None:
            f.put_member(
                old,
                dataclasses.replace(
                    old,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned_partitions=(),
                ),
            )
        return
    assert isinstance(value, ShareGroupCurrentMemberAssignmentValue)
    f.put_member(
        old,
        dataclasses.replace(
            old if old is not None else ShareMember(mid),
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MODERN_MEMBER_STATES.get(value.state, "UNKNOWN"),
            assigned_partitions=assignment(value.assigned_partitions),
        ),
    )


def _on_state_partition_metadata(f: ShareGroupFold, r: LogRecord) -> None:
    value = r.value
    if not f.group(r, create=value is not None):
        return
    d: ShareDetails = f.details
    if value is None:
        f.details = dataclasses.replace(d, state_topics=None)
        return
    assert isinstance(value, ShareGroupStatePartitionMetadataValue)
    names = dict(d.topic_names)
    for t in (*value.initializing_topics, *value.initialized_topics):
        names[t.topic_id] = t.topic_name
    for d_ in value.deleting_topics:
        names[d_.topic_id] = d_.topic_name
    st = ShareStateTopics(
        tuple(sorted((t.topic_id, t.topic_name, tuple(sorted(set(t.partitions)))) for t in value.initializing_topics)),
        tuple(sorted((t.topic_id, t.topic_name, tuple(sorted(set(t.partitions)))) for t in value.initialized_topics)),
        tuple(sorted((t.topic_id, t.topic_name) for t in value.deleting_topics)),
    )
    f.details = ShareDetails(st, MappingProxyType(dict(sorted(names.items()))))


class ShareGroupFold(ModernGroupFold):
    """A share group's fold (``ModernGroupFold`` with the share rules)."""

    kind: ClassVar[str] = "share"
    default_assignor: ClassVar[str] = DEFAULT_SHARE_ASSIGNOR
    handlers: ClassVar[Mapping[int, Callable[[Any, LogRecord], None]]] = MappingProxyType(
        {
            10: _on_member_metadata,
            11: _on_group_epoch,
            12: ModernGroupFold.apply_target_metadata,
            13: _on_target_member,
            14: _on_current_assignment,
            15: _on_state_partition_metadata,
        }
    )

    def new_details(self) -> ShareDetails:
        keep = getattr(self, "details", None)  # topic names outlive a group's incarnation
        return ShareDetails(None, keep.topic_names if isinstance(keep, ShareDetails) else MappingProxyType({}))

    def derive_state(self) -> str:
        return derive_state(self.members)

    def settled(self) -> bool:
        t = self.target_epoch
        return all(m.state == "STABLE" and m.member_epoch == t for m in self.members.values())

    def units(self, a: Assignment) -> Iterable[Unit]:
        return pairs(a)

    def unit_label(self, unit_id: str) -> str:
        d: ShareDetails = self.details
        return d.topic_names.get(unit_id, unit_id)

    def identity(self, member: Any) -> str | None:
        return None  # share groups have no static membership
