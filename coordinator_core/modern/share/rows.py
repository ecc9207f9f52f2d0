"""Share groups (KIP-932) in the gold tables: the ``group_members`` rows and the ``group_state``
members of a share group (``coordinator_core.events`` columns).

Rules:
- A member row's generation is its member epoch (also ``member_epoch``), its protocol the
  broker's share assignor, its subscribed topics its names, its assigned partitions by topic
  name when a ShareGroupStatePartitionMetadata record named the topic (else the topic id);
  session timeout the broker default (not in the records), no rebalance timeout (-1), no
  leader; ``pending_revocation_partitions`` is null (a share member revokes nothing).
- Rebalance and transition rows are the consumer-group ones (``modern.consumer.rows``) with
  protocol type ``share``.
"""

from __future__ import annotations

from typing import Any

from coordinator_core.events import GroupMember
from coordinator_core.modern.group_epochs import ModernGroupSnapshot
from coordinator_core.modern.share.model import (
    DEFAULT_SHARE_ASSIGNOR,
    DEFAULT_SHARE_SESSION_TIMEOUT_MS,
    ShareDetails,
    ShareMember,
    pairs,
)


def member_events(
    group: ModernGroupSnapshot, log_partition: int, log_offset: int, timestamp_ms: int
) -> list[GroupMember]:
    """The ``group_members`` rows of a share group as it stands; key ``<partition>:<offset>:<member id>``."""
    d: ShareDetails = group.details
    label = d.topic_names.get
    out = []
    for mid, m in group.members.items():
        assert isinstance(m, ShareMember)
        out.append(
            GroupMember(
                group_id=group.group_id,
                event_key=f"{log_partition}:{log_offset}:{mid}",
                generation=m.member_epoch,
                member_id=mid,
                group_instance_id=None,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=DEFAULT_SHARE_SESSION_TIMEOUT_MS,
                rebalance_timeout=-1,
                is_leader=False,
                protocol=DEFAULT_SHARE_ASSIGNOR,
                subscribed_topics=m.subscribed_topic_names,
                assigned_partitions=tuple((label(t, t), p) for t, p in pairs(m.assigned_partitions)),
                timestamp_ms=timestamp_ms,
                log_partition=log_partition,
                log_offset=log_offset,
                member_epoch=m.member_epoch,
                member_state=m.state,
            )
        )
    return out


def member_structs(group: ModernGroupSnapshot) -> list[dict[str, Any]]:
    """The ``members`` column of a share group's ``group_state`` row (the classic member struct)."""
    return [
        {
            "member_id": m.member_id,
            "group_instance_id": None,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "session_timeout": m.session_timeout,
            "rebalance_timeout": m.rebalance_timeout,
            "is_leader": False,
            "subscribed_topics": sorted(m.subscribed_topics or ()),
            "assigned_partitions": [{"topic": t, "partition": p} for t, p in sorted(m.assigned_partitions or ())],
        }
        for m in member_events(group, 0, 0, 0)
    ]
