"""Decoded (silver) tables: what ``pipelines.records.decode`` makes of ``raw_records``.

Rules:
- Every raw record lands in exactly one of ``offset_commits``, ``group_metadata``,
  ``group_records``, ``unsupported_records`` or ``quarantine``; the job checks
  ``raw = offset_commits + group_metadata + group_records + unsupported_records + quarantine``
  (decoded = the first three).
- ``group_records`` holds Kafka 4's group records decoded with the core codec's ``modern=True``
  (KIP-848 consumer groups 3-8/16, KIP-932 share groups 10-15, KIP-1071 streams groups
  17/19-23): raw bytes, what kind of record, and the value as Kafka's formatter prints it. The
  replay folds all three kinds, each by its own rules (``coordinator_core.modern.consumer``,
  ``coordinator_core.modern.share``, ``coordinator_core.streams``), into the gold tables with
  their ``group_type``. A modern key or value that does not parse is in ``quarantine``; a
  modern value version Kafka 4 cannot read, and the record types never final in a release (9,
  18, 24), stay in ``unsupported_records``.
- Decoded rows keep their log position as ``coordinator_partition`` / ``log_offset`` /
  ``log_timestamp`` (the ``__consumer_offsets`` partition, offset and record timestamp), so a
  group's records order totally by (coordinator_partition, log_offset). ``topic`` /
  ``partition`` in ``offset_commits`` are the *committed* topic-partition (Kafka's key fields).
- ``offset_commits`` says which commits were transactional and what became of their transaction
  (``TXN_COLUMNS``: ``coordinator_core.loader.transactions.transaction_fates`` over ``raw_transactions``,
  set by the batch decode); null where the input has no batch attributes.
- ``quarantine``, ``group_records`` and ``unsupported_records`` keep the raw record in Spark's Kafka source
  columns (key, value, topic, partition, offset, timestamp): they can be fed back to decode.
- Times are TIMESTAMP (UTC, converted from the core's epoch ms); wire sentinels (-1) are null,
  exactly as ``coordinator_core.codec.records`` has them.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

MEMBER_TYPE = (
    "struct<member_id:string,group_instance_id:string,client_id:string,client_host:string,"
    "rebalance_timeout:int,session_timeout:int,subscription:binary,assignment:binary,"
    "subscribed_topics:array<string>,assigned_partitions:array<struct<topic:string,partition:int>>>"
)

_POSITION = (
    Column(
        "coordinator_partition",
        "int",
        False,
        "`__consumer_offsets` partition the record was read from (the group's coordinator partition).",
    ),
    Column("log_offset", "bigint", False, "Offset of the record in that partition."),
    Column("log_timestamp", "timestamp", True, "Record timestamp (CREATE_TIME, the coordinator's clock), UTC."),
)

#: a transactional commit (KIP-98, a TxnOffsetCommit's record) and what became of its transaction;
#: known only where the input has batch attributes (broker segments: ``raw_transactions``)
TXN_COLUMNS = (
    Column(
        "producer_id",
        "bigint",
        True,
        "Producer id when the record is in a transactional batch (a TxnOffsetCommit, KIP-98), from "
        "`raw_transactions`; null for a plain commit, and for every row of an input without batch attributes "
        "(Parquet/JSON landings, Kafka consumers), where it cannot be known.",
    ),
    Column(
        "txn_outcome",
        "string",
        True,
        "Transactional commits: `committed` or `aborted` by the first COMMIT/ABORT marker of the producer in "
        "this partition after the record (Kafka applies a marker to every group with pending offsets of its "
        "producer); `open` when none follows (pending at the end of the log, not applied). The transaction's fate, "
        "not the offset's: a committed offset still loses to a later-written commit of the partition, and a "
        "Kafka 4 tombstone drops it while pending (`offsets_current` has what holds). Null when `producer_id` is.",
    ),
    Column(
        "txn_marker_offset",
        "bigint",
        True,
        "Offset (in this `__consumer_offsets` partition) of the marker that committed or aborted the "
        "transaction; null when open or not transactional.",
    ),
)

OFFSET_COMMITS = TableSpec(
    name="offset_commits",
    doc="One row per OffsetCommit record (key version 0/1), tombstones included. The bulk of "
    "any `__consumer_offsets` log; decoded vectorised (numpy over Arrow) and proven equal to "
    "the core codec.",
    columns=(
        *_POSITION,
        Column("group_id", "string", False, "Consumer group id (OffsetCommitKey.group; may be empty)."),
        Column("topic", "string", False, "Committed topic (OffsetCommitKey.topic)."),
        Column("partition", "int", False, "Committed partition (OffsetCommitKey.partition)."),
        Column("key_version", "int", False, "Key version: 0 (0.8.2) or 1 (every broker since 0.9)."),
        Column(
            "is_tombstone",
            "boolean",
            False,
            "True when the value is null: the offset was deleted (expiry, OffsetDelete, DeleteGroups, topic deletion).",
        ),
        Column("value_version", "int", True, "OffsetCommitValue version 0-4; null for a tombstone."),
        Column("committed_offset", "bigint", True, "OffsetCommitValue.offset: the committed offset."),
        Column("leader_epoch", "int", True, "OffsetCommitValue.leader_epoch (v3+); null when absent or -1."),
        Column("metadata", "string", True, 'OffsetCommitValue.metadata: client-supplied string ("" when none).'),
        Column(
            "commit_timestamp", "timestamp", True, "OffsetCommitValue.commit_timestamp (broker time of the commit)."
        ),
        Column(
            "expire_timestamp",
            "timestamp",
            True,
            "OffsetCommitValue.expire_timestamp (v1 only); null when absent or -1.",
        ),
        *TXN_COLUMNS,
    ),
    primary_key=("coordinator_partition", "log_offset"),
    mode="append",
)

GROUP_METADATA = TableSpec(
    name="group_metadata",
    doc="One row per GroupMetadata record (key version 2), tombstones included; members as "
    "an array of structs with their embedded consumer-protocol subscription and assignment "
    "parsed where the protocol type is `consumer`.",
    columns=(
        *_POSITION,
        Column("group_id", "string", False, "Group id (GroupMetadataKey.group)."),
        Column("key_version", "int", False, "Key version (always 2)."),
        Column("is_tombstone", "boolean", False, "True when the value is null: the group's metadata was deleted."),
        Column("value_version", "int", True, "GroupMetadataValue version 0-4; null for a tombstone."),
        Column("protocol_type", "string", True, 'GroupMetadataValue.protocol_type ("consumer", "connect", "" = none).'),
        Column("generation", "int", True, "GroupMetadataValue.generation (generation id)."),
        Column("protocol", "string", True, "Selected protocol (assignor name); null for an Empty group."),
        Column("leader", "string", True, "Leader member id; null for an Empty group."),
        Column(
            "current_state_timestamp",
            "timestamp",
            True,
            "GroupMetadataValue.current_state_timestamp (v2+); null when absent or -1.",
        ),
        Column("member_count", "int", True, "Number of members (0 = the group is Empty)."),
        Column(
            "members",
            f"array<{MEMBER_TYPE}>",
            True,
            "Members (MemberMetadata): ids, client, timeouts (rebalance_timeout null when absent/-1), "
            "raw subscription/assignment bytes, parsed subscribed topics and assigned partitions "
            "(null when not parseable or protocol type is not consumer).",
        ),
    ),
    primary_key=("coordinator_partition", "log_offset"),
    mode="append",
)

_RAW = (
    Column("key", "binary", True, "Raw record key bytes, untouched."),
    Column("value", "binary", True, "Raw record value bytes, untouched (null = tombstone)."),
    Column("topic", "string", True, "Source topic, normally `__consumer_offsets`."),
    Column("partition", "int", True, "`__consumer_offsets` partition of the record."),
    Column("offset", "bigint", True, "Offset of the record in that partition."),
    Column("timestamp", "timestamp", True, "Record timestamp, UTC."),
)

QUARANTINE = TableSpec(
    name="quarantine",
    doc="Records that could not be decoded: raw bytes kept with their log position and where "
    "and why decoding failed. Never dropped; counted in the decode reconciliation.",
    columns=(
        *_RAW,
        Column(
            "error_class",
            "string",
            False,
            "Error class, e.g. `CorruptRecordError` (from coordinator_core.errors) or `ValueOutOfRange`.",
        ),
        Column("error_message", "string", True, "Human-readable message of the error."),
        Column("part", "string", True, "Part that failed: key, value, subscription or assignment."),
        Column("byte_position", "int", True, "Byte offset inside that part where reading failed."),
        Column("record_type", "int", True, "Key version (record type) if it could be read."),
        Column("version", "int", True, "Version of the failing part (key or value version) if known."),
    ),
    primary_key=("topic", "partition", "offset"),
    mode="append",
)

GROUP_RECORDS = TableSpec(
    name="group_records",
    doc="One row per Kafka 4 group record (KIP-848 consumer groups 3-8/16, KIP-932 share groups 10-15, "
    "KIP-1071 streams groups 17/19-23), tombstones included, decoded by the core codec (`modern=True`): "
    "the raw record, its type and group kind, and the value as Kafka's CoordinatorRecordMessageFormatter "
    "prints it. The replay folds the consumer-, share- and streams-group records.",
    columns=(
        *_RAW,
        Column("group_id", "string", False, "Group id (the key's GroupId)."),
        Column("group_type", "string", False, "consumer (KIP-848), share (KIP-932) or streams (KIP-1071)."),
        Column("record_type", "int", False, "Record type (the key's version, CoordinatorRecordType id)."),
        Column("record_type_name", "string", False, "Kafka's name for the record type, e.g. ConsumerGroupMetadata."),
        Column("member_id", "string", True, "The key's MemberId (member records); null for group-level records."),
        Column("is_tombstone", "boolean", False, "True when the value is null: Kafka deleted the record."),
        Column("version", "int", True, "Value version (always 0 in Kafka 4); null for a tombstone."),
        Column(
            "value_json",
            "string",
            True,
            "The value's data as Kafka's formatter prints it (camelCase fields, compact JSON); null for a tombstone.",
        ),
    ),
    primary_key=("topic", "partition", "offset"),
    mode="append",
)

UNSUPPORTED_RECORDS = TableSpec(
    name="unsupported_records",
    doc="Well-formed records the decoder does not materialise: record types it does not know or that "
    "were never final in a Kafka release (9, 18, 24, above 24), value versions outside 0-4 (strict mode) "
    "and modern values of a version other than 0. Kept raw; never fatal.",
    columns=(
        *_RAW,
        Column("group_id", "string", True, "Group id when the key's leading GroupId field parses."),
        Column("record_type", "int", False, "Key version (record type)."),
        Column("record_type_name", "string", False, "Kafka's name for the record type, or Unknown(N)."),
        Column("version", "int", True, "Value version, if the value is not null."),
        Column("reason", "string", False, "Why it is unsupported (unknown record type / unknown value version)."),
    ),
    primary_key=("topic", "partition", "offset"),
    mode="append",
)

TABLES = [OFFSET_COMMITS, GROUP_METADATA, QUARANTINE, UNSUPPORTED_RECORDS, GROUP_RECORDS]
