"""Streams groups (KIP-1071) in the gold tables: the ``group_members`` rows and the
``group_state`` members of a streams group (``coordinator_core.events`` columns).

Rules:
- A member row's generation is its member epoch (also ``member_epoch``; null while the member
  is uninitialized), its protocol the broker's streams assignor, its subscribed topics the
  topology's source topics (what the group reads), ``process_id`` its process, its tasks as
  (role, subtopology id, partition) in ``assigned_tasks`` / ``pending_revocation_tasks``; the
  partition columns (``assigned_partitions``, ``pending_revocation_partitions``) are null:
  streams members own tasks, not partitions. Session timeout: the broker default (not in the
  records); rebalance timeout: the record's (-1 when absent).
- Rebalance and transition rows are the consumer-group ones (``modern.consumer.rows``) with
  protocol type ``streams``; a rebalance's gained/lost entries are active tasks, the
  subtopology id in ``topic``.
"""

from __future__ import annotations

from typing import Any

from coordinator_core.events import GroupMember
from coordinator_core.modern.group_epochs import ModernGroupSnapshot
from coordinator_core.streams.model import (
    DEFAULT_STREAMS_ASSIGNOR,
    DEFAULT_STREAMS_SESSION_TIMEOUT_MS,
    StreamsDetails,
    StreamsMember,
)


def member_events(
    group: ModernGroupSnapshot, log_partition: int, log_offset: int, timestamp_ms: int
) -> list[GroupMember]:
    """The ``group_members`` rows of a streams group as it stands; key ``<partition>:<offset>:<member id>``."""
    d: StreamsDetails = group.details
    topics = tuple(sorted(d.topology.source_topics)) if d.topology is not None else ()
    out = []
    for mid, m in group.members.items():
        assert isinstance(m, StreamsMember)
        out.append(
            GroupMember(
                group_id=group.group_id,
                event_key=f"{log_partition}:{log_offset}:{mid}",
                generation=m.member_epoch if m.member_epoch is not None else -1,
                member_id=mid,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=DEFAULT_STREAMS_SESSION_TIMEOUT_MS,
                rebalance_timeout=m.rebalance_timeout_ms if m.rebalance_timeout_ms is not None else -1,
                is_leader=False,
                protocol=DEFAULT_STREAMS_ASSIGNOR,
                subscribed_topics=topics,
                assigned_partitions=None,
                timestamp_ms=timestamp_ms,
                log_partition=log_partition,
                log_offset=log_offset,
                member_epoch=m.member_epoch,
                member_state=m.state,
                process_id=m.process_id,
                assigned_tasks=tuple(m.assigned_tasks.by_role()),
                pending_revocation_tasks=tuple(m.tasks_pending_revocation.by_role()),
            )
        )
    return out


def member_structs(group: ModernGroupSnapshot) -> list[dict[str, Any]]:
    """The ``members`` column of a streams group's ``group_state`` row (the classic member
    struct: no partitions, tasks are in ``group_members``)."""
    return [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "session_timeout": m.session_timeout,
            "rebalance_timeout": m.rebalance_timeout,
            "is_leader": False,
            "subscribed_topics": sorted(m.subscribed_topics or ()),
            "assigned_partitions": None,
        }
        for m in member_events(group, 0, 0, 0)
    ]
