"""Immutable values for every record in ``__consumer_offsets`` (spec §3-§5).

Rules:
- Records are frozen, slotted dataclasses. A record value of ``None`` is a tombstone.
- The key version is the record type: 0/1 offset commit, 2 group metadata, 3-24 newer group
  types (``UnknownKey``: recognised, reported, never fatal). Decoded with ``modern=True``, the
  KIP-848/932/1071 types become the keys and values of ``coordinator_core.codec.modern_records``.
- Wire sentinels become ``None`` at the codec boundary: leader_epoch -1, expire_timestamp -1,
  current_state_timestamp -1, rebalance_timeout -1, null strings/bytes. Fields absent in the
  value's version are ``None`` too (so ``decode(encode(x)) == x`` holds per version).
- Each value remembers the version it was (or will be) encoded with; unknown tagged fields of
  flexible versions are kept as ``(tag, bytes)`` pairs so re-encoding is byte-exact.
- Positions (partition, offset, timestamp) belong to the log, not to the codec: ``LogRecord``
  pairs a decoded record with where it was found, and with the producer id of its batch when
  that batch was transactional (KIP-98; ``None``: a plain record, Kafka's ``NO_PRODUCER_ID``).
- ``TxnMarker`` is a COMMIT/ABORT control record of a ``__consumer_offsets`` partition
  (``ControlRecordType``, ``EndTransactionMarker``): it belongs to no group and applies to every
  group of its partition holding pending offsets of its producer (``coordinator_core.loader.replay``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from coordinator_core.codec.modern_records import ModernKey, ModernValue

TaggedFields: TypeAlias = tuple[tuple[int, bytes], ...]

# ---------------------------------------------------------------------------------------------
# Record types (key versions). Names follow Kafka's *Key.json files (spec §3.1).
# ---------------------------------------------------------------------------------------------
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2

RECORD_TYPE_NAMES: dict[int, str] = {
    0: "OffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
    24: "StreamsGroupTargetAssignmentResolvedTopicIds",
}


def record_type_name(key_version: int) -> str:
    """Kafka's name for a record type (key version), or ``Unknown(N)``."""
    return RECORD_TYPE_NAMES.get(key_version, f"Unknown({key_version})")


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Key versions 0 and 1 (identical layouts): group, topic, partition."""

    group: str
    topic: str
    partition: int
    version: int = 1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key version 2: the group id."""

    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A record type this classic decoder does not materialise (3-24, or anything else).

    ``group`` and ``fields`` hold the key's leading plain-string fields when they parse (all
    KIP-848/share/streams keys start with GroupId); ``raw`` is the whole key as read.
    """

    version: int
    raw: bytes
    group: str | None = None
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def type_name(self) -> str:
        return record_type_name(self.version)


RecordKey: TypeAlias = OffsetCommitKey | GroupMetadataKey | UnknownKey | ModernKey


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """OffsetCommitValue v0-v4 (spec §4.1).

    ``leader_epoch`` is None when absent (v0-v2) or -1 on the wire; ``expire_timestamp`` is
    None unless a v1 record carries an explicit value (-1 on the wire = None).
    """

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int | None = None
    expire_timestamp: int | None = None
    version: int = 3
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member inside GroupMetadataValue (struct version = value version, spec §4.2).

    ``rebalance_timeout`` is None when absent (v0) or -1 on the wire; Kafka then uses the
    session timeout (see ``effective_rebalance_timeout``). ``subscription`` and ``assignment``
    are the opaque embedded-protocol blobs exactly as stored.
    """

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int | None = None
    group_instance_id: str | None = None
    tagged_fields: TaggedFields = ()

    @property
    def effective_rebalance_timeout(self) -> int:
        """Kafka's rule: rebalance timeout -1/absent means the session timeout."""
        return self.session_timeout if self.rebalance_timeout is None else self.rebalance_timeout


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """GroupMetadataValue v0-v4 (spec §4.2).

    ``protocol_type`` is never null on the wire; ``""`` means "no protocol type" (a simple
    group). ``current_state_timestamp`` is None when absent (v0/v1) or -1.
    """

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp: int | None = None
    version: int = 3
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class UnknownValue:
    """A value whose version is outside the known range (strict mode), or the value of an
    unknown record type. Kept as raw bytes; never fatal."""

    version: int | None
    raw: bytes


RecordValue: TypeAlias = OffsetCommitValue | GroupMetadataValue | UnknownValue | ModernValue


# ---------------------------------------------------------------------------------------------
# Embedded consumer protocol (spec §5)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    """ConsumerProtocolSubscription v0-v3. Fields absent in ``version`` hold their defaults."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int | None = None
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True, slots=True)
class Assignment:
    """ConsumerProtocolAssignment v0-v3 (same layout in every version)."""

    assigned_partitions: tuple[TopicPartitions, ...]
    user_data: bytes | None = None
    version: int = 0


# ---------------------------------------------------------------------------------------------
# A decoded record and where it sits in the log
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Record:
    """A decoded key/value pair. ``value is None`` means tombstone."""

    key: RecordKey
    value: RecordValue | None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def group(self) -> str | None:
        return self.key.group


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A decoded record at its log position: ``(partition, offset)`` orders a group's records
    totally (all of a group's records live in one ``__consumer_offsets`` partition).
    ``timestamp_ms`` is the record's (CREATE_TIME) timestamp. ``producer_id`` is the producer
    id of the record's batch when the batch is transactional (a TxnOffsetCommit's records,
    KIP-98), else ``None`` (plain records carry Kafka's ``NO_PRODUCER_ID``)."""

    partition: int
    offset: int
    timestamp_ms: int
    key: RecordKey
    value: RecordValue | None
    producer_id: int | None = None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def group(self) -> str | None:
        return self.key.group

    @property
    def position(self) -> tuple[int, int]:
        return (self.partition, self.offset)


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A transaction marker (control record COMMIT or ABORT, KIP-98) at its log position.

    ``committed`` is True for COMMIT. It belongs to no group: the replay hands it to every group
    of its ``__consumer_offsets`` partition that holds pending transactional offsets of
    ``producer_id`` (Kafka 4's ``OffsetMetadataManager.replayEndTransactionMarker``, Kafka 3's
    loader on a control batch); a group with nothing pending ignores it."""

    partition: int
    offset: int
    timestamp_ms: int
    producer_id: int
    committed: bool

    @property
    def position(self) -> tuple[int, int]:
        return (self.partition, self.offset)


#: what a group's replay consumes: its records and the transaction markers of its partition
ReplayItem: TypeAlias = LogRecord | TxnMarker
