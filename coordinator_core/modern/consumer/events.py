"""What the fold of a Kafka 4 consumer group (KIP-848) tells: its events.

Rules (shared with ``coordinator_core.events``):
- Every event is a frozen, slotted dataclass with ``group_id`` and an ``event_key`` that is the
  position of the record that told it (``<partition>:<offset>``), so re-delivered input gives the
  same keys and a later event with the same key supersedes the earlier one (MERGE in event
  order). A rebalance is told up to three times under one key: at the group-epoch bump, when
  the target assignment of that epoch is installed, when the group is Stable at that epoch.
- Times are epoch milliseconds (the records' timestamps); ``None`` means unknown.
- Topics in assignments are Kafka topic ids (``Uuid.toString()``); ``topic`` columns carry the
  topic name when a ConsumerGroupPartitionMetadata record (Kafka 4.0) named it, else the id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from coordinator_core.events import MemberPartition


@dataclass(frozen=True, slots=True)
class ConsumerStateChange:
    """The derived group state changed (``ConsumerGroup.maybeUpdateGroupState`` runs on every
    replayed record, so batch-internal states are told too: a join goes Reconciling ->
    Assigning -> Reconciling -> Stable within one batch; coalesce by timestamp to hide them)."""

    kind: ClassVar[str] = "consumer_state_change"

    group_id: str
    event_key: str
    from_state: str | None
    to_state: str
    group_epoch: int
    target_assignment_epoch: int
    timestamp_ms: int
    cause: str  # the Kafka record type that changed it, e.g. ConsumerGroupCurrentMemberAssignment


@dataclass(frozen=True, slots=True)
class ConsumerRebalance:
    """One group-epoch bump (``ConsumerGroupMetadata`` with a new epoch) and, once installed, the
    target assignment Kafka computed for that epoch.

    ``joined``/``left`` compare the members at this bump with those at the previous one, matched
    by instance id when set (a static member back with a new member id is in neither, its
    instance id is in ``static_rejoined``). ``assignor`` is the group's preferred server assignor
    at the bump (``ConsumerGroup.preferredServerAssignor``, else the broker default).
    ``partitions_moved`` counts partitions in both the previous and the new target assignment
    with a different owner; gained/lost are per member. They are known only when
    ``assignment_epoch`` is set; a bump superseded by the next one before any target assignment
    keeps them unknown. ``reconciled_ms`` is when the group became Stable at this epoch (every
    member STABLE at the target epoch): the rebalance's end, told a third time under the same
    key; None while members reconcile, or when the next bump came first.
    """

    kind: ClassVar[str] = "consumer_rebalance"

    group_id: str
    event_key: str
    group_epoch: int
    previous_group_epoch: int | None
    timestamp_ms: int
    members_before: int
    members_after: int
    joined: tuple[str, ...]
    left: tuple[str, ...]
    static_rejoined: tuple[str, ...]
    assignor: str
    cause: str  # group_created | converted_from_classic | members_joined | members_left | members_changed | subscription_or_metadata
    previous_assignor: str | None = None
    since_previous_ms: int | None = None
    assignment_epoch: int | None = None
    assigned_ms: int | None = None
    partitions_moved: int | None = None
    partitions_gained: tuple[MemberPartition, ...] = ()
    partitions_lost: tuple[MemberPartition, ...] = ()
    reconciled_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ProtocolConversion:
    """An online upgrade (classic -> consumer, ``GroupMetadataManager.convertToConsumerGroup``)
    or downgrade (consumer -> classic, ``convertToClassicGroup``) seen in the records: the old
    group's tombstones and the new group's records in one batch (same timestamp), or a record of
    the other type replacing the group directly. ``generation`` is the classic generation, which
    Kafka carries over as the consumer group epoch (upgrade) and back (downgrade)."""

    kind: ClassVar[str] = "protocol_conversion"

    group_id: str
    event_key: str
    from_type: str
    to_type: str
    generation: int | None
    members: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerAnomaly:
    """A record Kafka's loader refuses (``IllegalStateException`` in ``GroupMetadataManager.replay``
    or ``ConsumerGroup.addPartitionEpochs``): the fold applies it anyway, as the records intend,
    and says so. ``reason`` is a stable code, ``detail`` Kafka's message."""

    kind: ClassVar[str] = "consumer_anomaly"

    group_id: str
    event_key: str
    reason: str
    detail: str
    timestamp_ms: int


ConsumerEvent = ConsumerStateChange | ConsumerRebalance | ProtocolConversion | ConsumerAnomaly
