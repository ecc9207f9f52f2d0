"""The fold of one Kafka 4 streams group (KIP-1071): its records (types 17, 19-23), in log
order, into a ``ModernGroupSnapshot`` whose members are ``StreamsMember``s, telling what
happened.

Facts from apache/kafka's group-coordinator module (4.2-4.4): ``GroupMetadataManager.replay``
for StreamsGroupMetadata (17), StreamsGroupMemberMetadata (19), StreamsGroupTargetAssignment-
Metadata (20), StreamsGroupTargetAssignmentMember (21), StreamsGroupCurrentMemberAssignment
(22), StreamsGroupTopology (23).

Rules (the shared ones: ``coordinator_core.modern.group_epochs``; the group's own:
``coordinator_core.streams.model``):
- One handler per record type (``HANDLERS``). StreamsGroupMetadata sets the group epoch (a
  bump is a rebalance), the metadata hash, the validated topology epoch (-1 when absent) and
  the last assignment configs. A MemberMetadata value updates (or creates, uninitialized) the
  member; its tombstone removes it (Kafka refuses it unless the member's epoch is -1 and it has
  no target assignment: told as an anomaly). The CurrentMemberAssignment tombstone sets both
  epochs to -1 and empties its tasks (the member stays). The Topology value replaces the
  topology, its tombstone clears it.
- A rebalance's moves count active tasks (subtopology, partition): gained/lost rows carry the
  subtopology id in ``topic``. It is settled when the group is Stable at its epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final

from coordinator_core.codec.modern_records import (
    STREAMS_MEMBER_STATES,
    GroupMemberKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTopologyValue,
)
from coordinator_core.codec.records import LogRecord
from coordinator_core.modern.group_epochs import ModernGroupFold, Unit
from coordinator_core.streams.model import (
    DEFAULT_STREAMS_ASSIGNOR,
    NO_TASKS,
    StreamsDetails,
    StreamsMember,
    Tasks,
    derive_state,
    task_set,
    topology_from_record,
)

LEAVE_GROUP_MEMBER_EPOCH: Final = -1


def _member(f: StreamsGroupFold, r: LogRecord) -> tuple[str, StreamsMember | None]:
    key = r.key
    assert isinstance(key, GroupMemberKey)
    return key.member_id, f.members.get(key.member_id)


def _on_group_epoch(f: StreamsGroupFold, r: LogRecord) -> None:
    value = r.value
    if value is None:
        if not f.group(r, create=False):
            return
        if f.members or f.target_epoch != -1:
            f.anomaly(
                "group_tombstone_not_empty",
                (
                    f"Received a tombstone record to delete group {f.group_id} but the group still has "
                    f"{len(f.members)} members, assignment epoch {f.target_epoch}"
                ),
            )
        f.remove(r)
        return
    assert isinstance(value, StreamsGroupMetadataValue)
    f.group(r, create=True)
    f.metadata_hash = value.metadata_hash
    d: StreamsDetails = f.details
    vte = value.validated_topology_epoch
    configs = tuple(sorted((kv.key, kv.value) for kv in value.last_assignment_configs or ()))
    f.details = dataclasses.replace(
        d, validated_topology_epoch=-1 if vte is None else vte, last_assignment_configs=configs
    )
    f.bump(r, value.epoch)


def _on_member_metadata(f: StreamsGroupFold, r: LogRecord) -> None:
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
                (
                    f"Received a tombstone record to delete member {mid} but did not receive "
                    "StreamsGroupCurrentMemberAssignmentValue tombstone."
                ),
            )
        if mid in f.target:
            f.anomaly(
                "member_tombstone_before_target_tombstone",
                (
                    f"Received a tombstone record to delete member {mid} but did not receive "
                    "StreamsGroupTargetAssignmentMetadataValue tombstone."
                ),
            )
        f.put_member(old, None)
        return
    assert isinstance(value, StreamsGroupMemberMetadataValue)
    ep = value.user_endpoint
    new = dataclasses.replace(
        old if old is not None else StreamsMember(mid),
        instance_id=value.instance_id,
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        topology_epoch=value.topology_epoch,
        process_id=value.process_id,
        user_endpoint=None if ep is None else f"{ep.host}:{ep.port}",
        client_tags=tuple(sorted((kv.key, kv.value) for kv in value.client_tags)),
    )
    f.put_member(old, new)


def _on_target_member(f: StreamsGroupFold, r: LogRecord) -> None:
    value = r.value
    if not f.group(r, create=value is not None):
        return
    mid, _ = _member(f, r)
    if value is None:
        f.target.pop(mid, None)
        return
    assert isinstance(value, StreamsGroupTargetAssignmentMemberValue)
    f.target[mid] = Tasks(task_set(value.active_tasks), task_set(value.standby_tasks), task_set(value.warmup_tasks))


def _on_current_assignment(f: StreamsGroupFold, r: LogRecord) -> None:
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
                    assigned_tasks=NO_TASKS,
                    tasks_pending_revocation=NO_TASKS,
                ),
            )
        return
    assert isinstance(value, StreamsGroupCurrentMemberAssignmentValue)
    v = value
    f.put_member(
        old,
        dataclasses.replace(
            old if old is not None else StreamsMember(mid),
            member_epoch=v.member_epoch,
            previous_member_epoch=v.previous_member_epoch,
            state=STREAMS_MEMBER_STATES.get(v.state, "UNKNOWN"),
            assigned_tasks=Tasks(task_set(v.active_tasks), task_set(v.standby_tasks), task_set(v.warmup_tasks)),
            tasks_pending_revocation=Tasks(
                task_set(v.active_tasks_pending_revocation),
                task_set(v.standby_tasks_pending_revocation),
                task_set(v.warmup_tasks_pending_revocation),
            ),
        ),
    )


def _on_topology(f: StreamsGroupFold, r: LogRecord) -> None:
    value = r.value
    if not f.group(r, create=value is not None):
        return
    d: StreamsDetails = f.details
    if value is None:
        f.details = dataclasses.replace(d, topology=None)
        return
    assert isinstance(value, StreamsGroupTopologyValue)
    f.details = dataclasses.replace(d, topology=topology_from_record(value))


class StreamsGroupFold(ModernGroupFold):
    """A streams group's fold (``ModernGroupFold`` with the streams rules)."""

    kind: ClassVar[str] = "streams"
    default_assignor: ClassVar[str] = DEFAULT_STREAMS_ASSIGNOR
    handlers: ClassVar[Mapping[int, Callable[[Any, LogRecord], None]]] = MappingProxyType(
        {
            17: _on_group_epoch,
            19: _on_member_metadata,
            20: ModernGroupFold.apply_target_metadata,
            21: _on_target_member,
            22: _on_current_assignment,
            23: _on_topology,
        }
    )

    def new_details(self) -> StreamsDetails:
        return StreamsDetails()

    def derive_state(self) -> str:
        return derive_state(self.members, self.details, self.group_epoch, self.target_epoch)

    def settled(self) -> bool:
        return self.derive_state() == "Stable"

    def units(self, a: Tasks) -> Iterable[Unit]:
        for sub, ps in a.active:
            for p in ps:
                yield (sub, p)
