"""Consumer groups (KIP-848) in the gold tables that exist for classic groups: the rows of
``rebalances``, ``group_transitions`` and ``group_members`` (``coordinator_core.events``
columns) for what the fold of a consumer group tells and holds.

Rules:
- A rebalance row is a group-epoch bump: generation = group epoch, protocol = the server
  assignor, no leader; it starts at the bump and ends when the group is Stable at that epoch
  (else when the target assignment was installed, else at the bump); ``join_completed_ms`` is
  when the target assignment was installed.
- A transition row is a derived state change, observed (the record made it), keyed
  ``<partition>:<offset>:0``, generation = group epoch.
- A member row's generation is the member epoch (also ``member_epoch``), its protocol the
  member's server assignor, its subscribed topics its names or the topics its resolved regex
  matched; ``member_state`` and ``pending_revocation_partitions`` are its MemberState and the
  partitions it still has to revoke (null for a classic group's members).
"""

from __future__ import annotations

from typing import Any, Final

from coordinator_core.events import GroupMember, Rebalance, StateTransition
from coordinator_core.modern.consumer.events import ConsumerRebalance, ConsumerStateChange
from coordinator_core.modern.consumer.model import ConsumerGroupSnapshot, pairs

#: ``group.consumer.session.timeout.ms`` default: a consumer-protocol member's session timeout is
#: the group's (a config, not in the records); a classic-protocol member's is in its metadata.
DEFAULT_SESSION_TIMEOUT_MS: Final = 45_000


def _position(event_key: str) -> tuple[int, int]:
    part, off = event_key.split(":")[:2]
    return int(part), int(off)


def as_rebalance(r: ConsumerRebalance) -> Rebalance:
    """The ``rebalances`` row of a consumer-group rebalance (columns of ``events.Rebalance``):
    generation = group epoch, protocol = the server assignor, no leader; it starts at the bump
    and ends when the group is Stable at the epoch (else at the target assignment, else at the
    bump); ``join_completed_ms`` is when the target assignment was installed."""
    part, off = _position(r.event_key)
    end = r.reconciled_ms if r.reconciled_ms is not None else r.assigned_ms
    return Rebalance(
        group_id=r.group_id,
        event_key=r.event_key,
        generation=r.group_epoch,
        previous_generation=r.previous_group_epoch,
        skipped_generations=None if r.previous_group_epoch is None else r.group_epoch - r.previous_group_epoch - 1,
        start_ms=r.timestamp_ms,
        end_ms=end if end is not None else r.timestamp_ms,
        join_completed_ms=r.assigned_ms,
        since_previous_ms=r.since_previous_ms,
        members_before=r.members_before,
        members_after=r.members_after,
        joined=r.joined,
        left=r.left,
        static_rejoined=r.static_rejoined,
        leader=None,
        previous_leader=None,
        protocol_type="consumer",
        protocol=r.assignor,
        previous_protocol=r.previous_assignor,
        assignment_known=r.assignment_epoch is not None,
        partitions_moved=r.partitions_moved,
        partitions_gained=r.partitions_gained,
        partitions_lost=r.partitions_lost,
        ended_empty=r.members_after == 0,
        cause=r.cause,
        log_partition=part,
        log_offset=off,
    )


def as_transition(c: ConsumerStateChange) -> StateTransition:
    """The ``group_transitions`` row of a consumer-group state change: observed (the record
    made it), generation = group epoch, key ``<partition>:<offset>:0``."""
    part, off = _position(c.event_key)
    return StateTransition(
        group_id=c.group_id,
        event_key=f"{c.event_key}:0",
        from_state=c.from_state,
        to_state=c.to_state,
        generation=c.group_epoch,
        timestamp_ms=c.timestamp_ms,
        timestamp_source="record",
        observed=True,
        cause=c.cause,
        log_partition=part,
        log_offset=off,
    )


def member_events(
    group: ConsumerGroupSnapshot, log_partition: int, log_offset: int, timestamp_ms: int
) -> list[GroupMember]:
    """The ``group_members`` rows of a consumer group as it stands (columns of
    ``events.GroupMember``): generation = the member epoch, protocol = its server assignor,
    subscribed topics = its names, or the topics its resolved regex matched; assigned partitions
    by topic name when known (else topic id); key ``<partition>:<offset>:<member id>``."""
    out = []
    for mid, m in group.members.items():
        classic = m.classic_member_metadata
        topics = m.subscribed_topic_names
        if m.subscribed_topic_regex is not None:
            rx = group.resolved_regexes.get(m.subscribed_topic_regex)
            topics = tuple(sorted({*topics, *(rx.topics if rx is not None else ())}))
        out.append(
            GroupMember(
                group_id=group.group_id,
                event_key=f"{log_partition}:{log_offset}:{mid}",
                generation=m.member_epoch,
                member_id=mid,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=classic.session_timeout_ms if classic is not None else DEFAULT_SESSION_TIMEOUT_MS,
                rebalance_timeout=m.rebalance_timeout_ms if m.rebalance_timeout_ms is not None else -1,
                is_leader=False,
                protocol=m.server_assignor,
                subscribed_topics=topics,
                assigned_partitions=tuple((group.topic_label(t), p) for t, p in pairs(m.assigned_partitions)),
                timestamp_ms=timestamp_ms,
                log_partition=log_partition,
                log_offset=log_offset,
                member_epoch=m.member_epoch,
                member_state=m.state,
                pending_revocation_partitions=tuple(
                    (group.topic_label(t), p) for t, p in pairs(m.partitions_pending_revocation)
                ),
            )
        )
    return out


def member_structs(group: ConsumerGroupSnapshot) -> list[dict[str, Any]]:
    """The ``members`` column of a consumer group's ``group_state`` row: the same struct as a
    classic member's (``snapshot._member_struct``), from ``member_events``."""
    return [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "session_timeout": m.session_timeout,
            "rebalance_timeout": m.rebalance_timeout,
            "is_leader": False,
            "subscribed_topics": None if m.subscribed_topics is None else sorted(m.subscribed_topics),
            "assigned_partitions": None
            if m.assigned_partitions is None
            else [{"topic": t, "partition": p} for t, p in sorted(m.assigned_partitions)],
        }
        for m in member_events(group, 0, 0, 0)
    ]
