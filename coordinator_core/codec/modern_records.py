"""Records of Kafka 4's "modern" groups in ``__consumer_offsets``: consumer groups (KIP-848,
record types 3-8 and 16), share groups (KIP-932, 10-15) and streams groups (KIP-1071, 17 and
19-23) — their values, keys and declarative layouts.

The layouts mirror apache/kafka ``group-coordinator/src/main/resources/common/message/*.json``
as of Kafka 4.4 (identical to trunk; checked against the 4.0-4.4 release branches):

- Keys: ``int16 record type`` (the JSON's ``apiKey``; Kafka 4.0 wrote it as the key version,
  4.1+ as ``CoordinatorRecordType`` — same bytes) + a non-flexible struct of plain STRINGs:
  GroupId, then MemberId (member records) or RegularExpression (16). Decoded strictly:
  trailing bytes after a key are corrupt.
- Values: ``int16 version`` + the struct. Every value here has ``validVersions: "0"`` and
  ``flexibleVersions: "0+"`` (compact strings/arrays, a tagged-field section after every
  struct). A ``None`` value is a tombstone (the record was deleted).
- Tagged fields added by later releases are optional by construction: ConsumerGroupMetadata
  MetadataHash (4.1, KIP-1101), the AssignmentEpochs of current assignments (4.3), the
  AssignmentTimestamp of target-assignment metadata (4.3, KIP-1263), the streams-group
  metadata tags (4.2-4.4). So bytes written by any 4.x release decode with these layouts, and
  an absent tag reads as its default.
- Share-group and streams-group schemas carried "in development, subject to
  non-backwards-compatible changes" until Kafka 4.2; they are final from 4.2 and decoded with
  the final layouts. Records of the 4.0 share-group early access that changed incompatibly
  (ShareGroupMetadata without MetadataHash, ShareGroupStatePartitionMetadata without
  InitializingTopics) are corrupt under them, as they are for Kafka 4.2's loader. Record types
  never final in a release (9 ShareGroupPartitionMetadata of 4.0, 18 StreamsGroupPartitionMetadata,
  24) stay ``UnknownKey`` with their group id.
- Wire sentinels become ``None``: RebalanceTimeoutMs -1, the streams topology epochs -1 and
  null strings/arrays/structs; other defaults keep Kafka's value (MetadataHash 0,
  AssignmentTimestamp 0). Uuids are Kafka's ``Uuid.toString()`` strings.
- Every dataclass default is Kafka's field default (through the sentinel): the writer leaves a
  tagged field out exactly when it equals that default, as Kafka's generated writer does.
- Python attribute names are the snake_case of Kafka's field names, except
  ConsumerGroupRegularExpressionValue.Version -> ``image_version`` (``version`` is the value
  version). The JSON names (``Field.json_name``) are Kafka's camelCase names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from coordinator_core.codec.wire import Builder, Field, Layout, Message, compile_layout

TaggedFields: TypeAlias = tuple[tuple[int, bytes], ...]

# ---------------------------------------------------------------------------------------------
# Record types (CoordinatorRecordType ids = the JSON files' apiKey)
# ---------------------------------------------------------------------------------------------
CONSUMER_GROUP_METADATA: Final = 3
CONSUMER_GROUP_PARTITION_METADATA: Final = 4
CONSUMER_GROUP_MEMBER_METADATA: Final = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: Final = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: Final = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: Final = 8
SHARE_GROUP_MEMBER_METADATA: Final = 10
SHARE_GROUP_METADATA: Final = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA: Final = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER: Final = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT: Final = 14
SHARE_GROUP_STATE_PARTITION_METADATA: Final = 15
CONSUMER_GROUP_REGULAR_EXPRESSION: Final = 16
STREAMS_GROUP_METADATA: Final = 17
STREAMS_GROUP_MEMBER_METADATA: Final = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: Final = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER: Final = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: Final = 22
STREAMS_GROUP_TOPOLOGY: Final = 23

# The kind of group a record type belongs to (types recognised but never final included).
GROUP_TYPE_BY_RECORD_TYPE: Final[dict[int, str]] = {
    0: "classic",
    1: "classic",
    2: "classic",
    **{t: "consumer" for t in (3, 4, 5, 6, 7, 8, 16)},
    **{t: "share" for t in range(9, 16)},
    **{t: "streams" for t in range(17, 25)},
}

# MemberState ids written in CurrentMemberAssignment.State (org.apache.kafka.coordinator.group.
# modern.MemberState for consumer and share groups, ...group.streams.MemberState for streams).
MODERN_MEMBER_STATES: Final[dict[int, str]] = {
    0: "STABLE",
    1: "UNREVOKED_PARTITIONS",
    2: "UNRELEASED_PARTITIONS",
    127: "UNKNOWN",
}
STREAMS_MEMBER_STATES: Final[dict[int, str]] = {
    1: "STABLE",
    2: "UNREVOKED_TASKS",
    3: "UNRELEASED_TASKS",
    127: "UNKNOWN",
}


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupKey:
    """Key of a per-group record (3, 4, 6, 11, 12, 15, 17, 20, 23): the group id.
    ``version`` is the record type."""

    group: str
    version: int


@dataclass(frozen=True, slots=True)
class GroupMemberKey:
    """Key of a per-member record (5, 7, 8, 10, 13, 14, 19, 21, 22): group id and member id."""

    group: str
    member_id: str
    version: int


@dataclass(frozen=True, slots=True)
class RegularExpressionKey:
    """Key of ConsumerGroupRegularExpression (16): group id and the regular expression."""

    group: str
    regular_expression: str
    version: int = CONSUMER_GROUP_REGULAR_EXPRESSION


ModernKey: TypeAlias = GroupKey | GroupMemberKey | RegularExpressionKey


# ---------------------------------------------------------------------------------------------
# Shared structs
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TopicIdPartitions:
    """TopicId + Partitions (assignments); ``assignment_epochs`` is the tagged AssignmentEpochs
    of ConsumerGroupCurrentMemberAssignment (4.3+), else None."""

    topic_id: str
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class KeyValue:
    """Key/Value string pairs (streams ClientTags, TopicConfigs, LastAssignmentConfigs)."""

    key: str
    value: str
    tagged_fields: TaggedFields = ()


# ---------------------------------------------------------------------------------------------
# Consumer groups (KIP-848)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    racks: tuple[str, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: str
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionMetadata, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    """Subscription metadata (4.0); replaced by ConsumerGroupMetadataValue.MetadataHash in 4.1."""

    topics: tuple[TopicMetadata, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Set when the member still speaks the classic protocol in a consumer group (online
    upgrade, KIP-848 "classic members")."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicIdPartitions, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicIdPartitions, ...]
    partitions_pending_revocation: tuple[TopicIdPartitions, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """A resolved regular expression: the topics it matched, at which metadata image version
    (``image_version``, Kafka's ``Version``) and when."""

    topics: tuple[str, ...]
    image_version: int
    timestamp: int
    version: int = 0
    tagged_fields: TaggedFields = ()


# ---------------------------------------------------------------------------------------------
# Share groups (KIP-932)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicIdPartitions, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicIdPartitions, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class TopicIdName:
    topic_id: str
    topic_name: str
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicIdName, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


# ---------------------------------------------------------------------------------------------
# Streams groups (KIP-1071)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int | None = None
    last_assignment_configs: tuple[KeyValue, ...] | None = None
    stored_description_topology_epoch: int | None = None
    failed_description_topology_epoch: int | None = None
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[KeyValue, ...]
    rebalance_timeout_ms: int | None = None
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class TaskIds:
    """SubtopologyId + Partitions; ``assignment_epochs`` is the tagged AssignmentEpochs of
    StreamsGroupCurrentMemberAssignment (4.2+), else None."""

    subtopology_id: str
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    active_tasks_pending_revocation: tuple[TaskIds, ...]
    standby_tasks_pending_revocation: tuple[TaskIds, ...]
    warmup_tasks_pending_revocation: tuple[TaskIds, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int
    replication_factor: int
    topic_configs: tuple[KeyValue, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics, source regexes, repartition sources."""

    source_topics: tuple[int, ...]
    source_topic_regex: tuple[int, ...]
    repartition_source_topics: tuple[int, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[TopicInfo, ...]
    copartition_groups: tuple[CopartitionGroup, ...]
    tagged_fields: TaggedFields = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    epoch: int
    subtopologies: tuple[Subtopology, ...]
    version: int = 0
    tagged_fields: TaggedFields = ()


ModernValue: TypeAlias = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
    | ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
    | StreamsGroupMetadataValue
    | StreamsGroupMemberMetadataValue
    | StreamsGroupTargetAssignmentMetadataValue
    | StreamsGroupTargetAssignmentMemberValue
    | StreamsGroupCurrentMemberAssignmentValue
    | StreamsGroupTopologyValue
)


# ---------------------------------------------------------------------------------------------
# Declarative specs (Kafka's message JSON, field order = wire order)
# ---------------------------------------------------------------------------------------------
_NULLABLE: Final = "0+"


def _f(
    kafka_name: str,
    type_: str,
    *,
    nullable: bool = False,
    sentinel: int | None = None,
    fields: tuple[Field, ...] = (),
    tag: int | None = None,
    name: str | None = None,
) -> Field:
    """A field from its Kafka name: snake_case attribute, camelCase JSON name (Kafka's
    ``camelCaseName``: the first letter lowered)."""
    snake = name or re.sub(r"(?<!^)(?=[A-Z])", "_", kafka_name).lower()
    return Field(
        snake, kafka_name[0].lower() + kafka_name[1:], type_, "0+", _NULLABLE if nullable else "", sentinel, fields, tag
    )


def _value(name: str, *fields: Field) -> Message:
    return Message(name, valid_versions="0", flexible_versions="0+", fields=fields)


_TOPIC_PARTITION: Final = (_f("TopicId", "uuid"), _f("Partitions", "[]int32"))
_TOPIC_PARTITIONS_WITH_EPOCHS: Final = (*_TOPIC_PARTITION, _f("AssignmentEpochs", "[]int32", nullable=True, tag=0))
_KEY_VALUE: Final = (_f("Key", "string"), _f("Value", "string"))
_TOPIC_CONFIG: Final = (_f("key", "string"), _f("value", "string"))
_TASK_IDS: Final = (_f("SubtopologyId", "string"), _f("Partitions", "[]int32"))
_TASK_IDS_WITH_EPOCHS: Final = (*_TASK_IDS, _f("AssignmentEpochs", "[]int32", nullable=True, tag=0))
_TOPIC_PARTITIONS_INFO: Final = (_f("TopicId", "uuid"), _f("TopicName", "string"), _f("Partitions", "[]int32"))
_TOPIC_INFO: Final = (_f("TopicId", "uuid"), _f("TopicName", "string"))
_STREAMS_TOPIC_INFO: Final = (
    _f("Name", "string"),
    _f("Partitions", "int32"),
    _f("ReplicationFactor", "int16"),
    _f("TopicConfigs", "[]TopicConfig", fields=_TOPIC_CONFIG),
)

CONSUMER_GROUP_METADATA_VALUE: Final = _value(
    "ConsumerGroupMetadataValue", _f("Epoch", "int32"), _f("MetadataHash", "int64", tag=0)
)
CONSUMER_GROUP_PARTITION_METADATA_VALUE: Final = _value(
    "ConsumerGroupPartitionMetadataValue",
    _f(
        "Topics",
        "[]TopicMetadata",
        fields=(
            _f("TopicId", "uuid"),
            _f("TopicName", "string"),
            _f("NumPartitions", "int32"),
            _f("PartitionMetadata", "[]PartitionMetadata", fields=(_f("Partition", "int32"), _f("Racks", "[]string"))),
        ),
    ),
)
CONSUMER_GROUP_MEMBER_METADATA_VALUE: Final = _value(
    "ConsumerGroupMemberMetadataValue",
    _f("InstanceId", "string", nullable=True),
    _f("RackId", "string", nullable=True),
    _f("ClientId", "string"),
    _f("ClientHost", "string"),
    _f("SubscribedTopicNames", "[]string"),
    _f("SubscribedTopicRegex", "string", nullable=True),
    _f("RebalanceTimeoutMs", "int32", sentinel=-1),
    _f("ServerAssignor", "string", nullable=True),
    _f(
        "ClassicMemberMetadata",
        "ClassicMemberMetadata",
        nullable=True,
        tag=0,
        fields=(
            _f("SessionTimeoutMs", "int32"),
            _f("SupportedProtocols", "[]ClassicProtocol", fields=(_f("Name", "string"), _f("Metadata", "bytes"))),
        ),
    ),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Final = _value(
    "ConsumerGroupTargetAssignmentMetadataValue",
    _f("AssignmentEpoch", "int32"),
    _f("AssignmentTimestamp", "int64", tag=0),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Final = _value(
    "ConsumerGroupTargetAssignmentMemberValue", _f("TopicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITION)
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Final = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    _f("MemberEpoch", "int32"),
    _f("PreviousMemberEpoch", "int32"),
    _f("State", "int8"),
    _f("AssignedPartitions", "[]TopicPartitions", fields=_TOPIC_PARTITIONS_WITH_EPOCHS),
    _f("PartitionsPendingRevocation", "[]TopicPartitions", fields=_TOPIC_PARTITIONS_WITH_EPOCHS),
)
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE: Final = _value(
    "ConsumerGroupRegularExpressionValue",
    _f("Topics", "[]string"),
    _f("Version", "int64", name="image_version"),
    _f("Timestamp", "int64"),
)
SHARE_GROUP_MEMBER_METADATA_VALUE: Final = _value(
    "ShareGroupMemberMetadataValue",
    _f("RackId", "string", nullable=True),
    _f("ClientId", "string"),
    _f("ClientHost", "string"),
    _f("SubscribedTopicNames", "[]string"),
)
SHARE_GROUP_METADATA_VALUE: Final = _value("ShareGroupMetadataValue", _f("Epoch", "int32"), _f("MetadataHash", "int64"))
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Final = _value(
    "ShareGroupTargetAssignmentMetadataValue", _f("AssignmentEpoch", "int32"), _f("AssignmentTimestamp", "int64", tag=0)
)
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Final = _value(
    "ShareGroupTargetAssignmentMemberValue", _f("TopicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITION)
)
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Final = _value(
    "ShareGroupCurrentMemberAssignmentValue",
    _f("MemberEpoch", "int32"),
    _f("PreviousMemberEpoch", "int32"),
    _f("State", "int8"),
    _f("AssignedPartitions", "[]TopicPartitions", fields=_TOPIC_PARTITION),
)
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE: Final = _value(
    "ShareGroupStatePartitionMetadataValue",
    _f("InitializingTopics", "[]TopicPartitionsInfo", fields=_TOPIC_PARTITIONS_INFO),
    _f("InitializedTopics", "[]TopicPartitionsInfo", fields=_TOPIC_PARTITIONS_INFO),
    _f("DeletingTopics", "[]TopicInfo", fields=_TOPIC_INFO),
)
STREAMS_GROUP_METADATA_VALUE: Final = _value(
    "StreamsGroupMetadataValue",
    _f("Epoch", "int32"),
    _f("MetadataHash", "int64"),
    _f("ValidatedTopologyEpoch", "int32", sentinel=-1, tag=0),
    _f("LastAssignmentConfigs", "[]LastAssignmentConfig", nullable=True, tag=1, fields=_KEY_VALUE),
    _f("StoredDescriptionTopologyEpoch", "int32", sentinel=-1, tag=2),
    _f("FailedDescriptionTopologyEpoch", "int32", sentinel=-1, tag=3),
)
STREAMS_GROUP_MEMBER_METADATA_VALUE: Final = _value(
    "StreamsGroupMemberMetadataValue",
    _f("InstanceId", "string", nullable=True),
    _f("RackId", "string", nullable=True),
    _f("ClientId", "string"),
    _f("ClientHost", "string"),
    _f("RebalanceTimeoutMs", "int32", sentinel=-1),
    _f("TopologyEpoch", "int32"),
    _f("ProcessId", "string"),
    _f("UserEndpoint", "Endpoint", nullable=True, fields=(_f("Host", "string"), _f("Port", "uint16"))),
    _f("ClientTags", "[]KeyValue", fields=_KEY_VALUE),
)
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Final = _value(
    "StreamsGroupTargetAssignmentMetadataValue",
    _f("AssignmentEpoch", "int32"),
    _f("AssignmentTimestamp", "int64", tag=0),
)
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Final = _value(
    "StreamsGroupTargetAssignmentMemberValue",
    _f("ActiveTasks", "[]TaskIds", fields=_TASK_IDS),
    _f("StandbyTasks", "[]TaskIds", fields=_TASK_IDS),
    _f("WarmupTasks", "[]TaskIds", fields=_TASK_IDS),
)
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Final = _value(
    "StreamsGroupCurrentMemberAssignmentValue",
    _f("MemberEpoch", "int32"),
    _f("PreviousMemberEpoch", "int32"),
    _f("State", "int8"),
    *(
        _f(name, "[]TaskIds", fields=_TASK_IDS_WITH_EPOCHS)
        for name in (
            "ActiveTasks",
            "StandbyTasks",
            "WarmupTasks",
            "ActiveTasksPendingRevocation",
            "StandbyTasksPendingRevocation",
            "WarmupTasksPendingRevocation",
        )
    ),
)
STREAMS_GROUP_TOPOLOGY_VALUE: Final = _value(
    "StreamsGroupTopologyValue",
    _f("Epoch", "int32"),
    _f(
        "Subtopologies",
        "[]Subtopology",
        fields=(
            _f("SubtopologyId", "string"),
            _f("SourceTopics", "[]string"),
            _f("SourceTopicRegex", "[]string"),
            _f("StateChangelogTopics", "[]TopicInfo", fields=_STREAMS_TOPIC_INFO),
            _f("RepartitionSinkTopics", "[]string"),
            _f("RepartitionSourceTopics", "[]TopicInfo", fields=_STREAMS_TOPIC_INFO),
            _f(
                "CopartitionGroups",
                "[]CopartitionGroup",
                fields=(
                    _f("SourceTopics", "[]int16"),
                    _f("SourceTopicRegex", "[]int16"),
                    _f("RepartitionSourceTopics", "[]int16"),
                ),
            ),
        ),
    ),
)

# Key layouts: GroupId (+ MemberId / RegularExpression), plain STRINGs (non-flexible).
GROUP_KEY: Final = Message("GroupKey", "0", "none", (_f("GroupId", "string", name="group"),))
GROUP_MEMBER_KEY: Final = Message(
    "GroupMemberKey", "0", "none", (_f("GroupId", "string", name="group"), _f("MemberId", "string"))
)
REGULAR_EXPRESSION_KEY: Final = Message(
    "RegularExpressionKey", "0", "none", (_f("GroupId", "string", name="group"), _f("RegularExpression", "string"))
)


@dataclass(frozen=True, slots=True)
class ModernType:
    """One modern record type: Kafka's name, its key and value layouts (value version 0)."""

    record_type: int
    name: str
    group_type: str
    key_message: Message
    key_layout: Layout
    value_message: Message
    value_cls: type[Any]
    value_layout: Layout

    @property
    def key_json_fields(self) -> tuple[Field, ...]:
        return self.key_message.fields


_NESTED: Final[dict[str, type[Any]]] = {
    "TopicMetadata": TopicMetadata,
    "PartitionMetadata": PartitionMetadata,
    "ClassicMemberMetadata": ClassicMemberMetadata,
    "ClassicProtocol": ClassicProtocol,
    "TopicPartition": TopicIdPartitions,
    "TopicPartitions": TopicIdPartitions,
    "TopicPartitionsInfo": TopicPartitionsInfo,
    "TopicInfo": TopicIdName,  # share-group TopicInfo; the streams topology overrides it
    "LastAssignmentConfig": KeyValue,
    "KeyValue": KeyValue,
    "TopicConfig": KeyValue,
    "Endpoint": Endpoint,
    "TaskIds": TaskIds,
    "Subtopology": Subtopology,
    "CopartitionGroup": CopartitionGroup,
}

_SPECS: Final[tuple[tuple[int, Message, Message, type[Any]], ...]] = (
    (3, GROUP_KEY, CONSUMER_GROUP_METADATA_VALUE, ConsumerGroupMetadataValue),
    (4, GROUP_KEY, CONSUMER_GROUP_PARTITION_METADATA_VALUE, ConsumerGroupPartitionMetadataValue),
    (5, GROUP_MEMBER_KEY, CONSUMER_GROUP_MEMBER_METADATA_VALUE, ConsumerGroupMemberMetadataValue),
    (6, GROUP_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, ConsumerGroupTargetAssignmentMetadataValue),
    (7, GROUP_MEMBER_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, ConsumerGroupTargetAssignmentMemberValue),
    (8, GROUP_MEMBER_KEY, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE, ConsumerGroupCurrentMemberAssignmentValue),
    (10, GROUP_MEMBER_KEY, SHARE_GROUP_MEMBER_METADATA_VALUE, ShareGroupMemberMetadataValue),
    (11, GROUP_KEY, SHARE_GROUP_METADATA_VALUE, ShareGroupMetadataValue),
    (12, GROUP_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, ShareGroupTargetAssignmentMetadataValue),
    (13, GROUP_MEMBER_KEY, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, ShareGroupTargetAssignmentMemberValue),
    (14, GROUP_MEMBER_KEY, SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE, ShareGroupCurrentMemberAssignmentValue),
    (15, GROUP_KEY, SHARE_GROUP_STATE_PARTITION_METADATA_VALUE, ShareGroupStatePartitionMetadataValue),
    (16, REGULAR_EXPRESSION_KEY, CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE, ConsumerGroupRegularExpressionValue),
    (17, GROUP_KEY, STREAMS_GROUP_METADATA_VALUE, StreamsGroupMetadataValue),
    (19, GROUP_MEMBER_KEY, STREAMS_GROUP_MEMBER_METADATA_VALUE, StreamsGroupMemberMetadataValue),
    (20, GROUP_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE, StreamsGroupTargetAssignmentMetadataValue),
    (21, GROUP_MEMBER_KEY, STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE, StreamsGroupTargetAssignmentMemberValue),
    (22, GROUP_MEMBER_KEY, STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE, StreamsGroupCurrentMemberAssignmentValue),
    (23, GROUP_KEY, STREAMS_GROUP_TOPOLOGY_VALUE, StreamsGroupTopologyValue),
)

_KEY_CLASSES: Final[dict[str, type[Any]]] = {
    "GroupKey": GroupKey,
    "GroupMemberKey": GroupMemberKey,
    "RegularExpressionKey": RegularExpressionKey,
}


def struct_builders(value: Message) -> dict[str, Builder]:
    """Struct name -> (dataclass, fixed arguments) of the nested structs of ``value`` (the
    names are Kafka's; the streams topology's TopicInfo is not the share groups' one)."""
    builders: dict[str, Builder] = {k: (v, {}) for k, v in _NESTED.items()}
    if value is STREAMS_GROUP_TOPOLOGY_VALUE:
        builders["TopicInfo"] = (TopicInfo, {})
    return builders


def _compile(record_type: int, name: str, key: Message, value: Message, cls: type[Any]) -> ModernType:
    builders = struct_builders(value)
    builders[value.name] = (cls, {"version": 0})
    key_builders: dict[str, Builder] = {key.name: (_KEY_CLASSES[key.name], {"version": record_type})}
    return ModernType(
        record_type=record_type,
        name=name,
        group_type=GROUP_TYPE_BY_RECORD_TYPE[record_type],
        key_message=key,
        key_layout=compile_layout(key, 0, key_builders),
        value_message=value,
        value_cls=cls,
        value_layout=compile_layout(value, 0, builders),
    )


MODERN_TYPES: Final[dict[int, ModernType]] = {
    rt: _compile(rt, value.name.removesuffix("Value"), key, value, cls) for rt, key, value, cls in _SPECS
}
VALUE_TYPE_BY_CLASS: Final[dict[type[Any], ModernType]] = {t.value_cls: t for t in MODERN_TYPES.values()}


def group_type(record_type: int) -> str | None:
    """``classic``, ``consumer``, ``share`` or ``streams`` for a record type, else None."""
    return GROUP_TYPE_BY_RECORD_TYPE.get(record_type)
