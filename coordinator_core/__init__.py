"""offsetlake's pure-Python core: Kafka's group coordinator's rules over ``__consumer_offsets``.

This is the core's front door: code outside the core imports the names in ``__all__`` from here
(``from coordinator_core import replay, decode_record``), or a room's public module for what is
deliberately not in the front door (ARCHITECTURE.md, "The core's rooms"; the architecture test
enforces it). The names are loaded lazily, so ``import coordinator_core`` stays cheap.

Rules: standard library only (a test imports every submodule in a fresh interpreter and checks
``sys.modules``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator_core.codec.consumer_protocol import CONSUMER_PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
    from coordinator_core.codec.consumer_protocol import decode_assignment as decode_assignment
    from coordinator_core.codec.consumer_protocol import decode_subscription as decode_subscription
    from coordinator_core.codec.consumer_protocol import encode_assignment as encode_assignment
    from coordinator_core.codec.consumer_protocol import encode_subscription as encode_subscription
    from coordinator_core.codec.consumer_protocol import parse_member_blobs as parse_member_blobs
    from coordinator_core.codec.formatter import to_kafka_json as to_kafka_json
    from coordinator_core.codec.formatter import to_rich_json as to_rich_json
    from coordinator_core.codec.modern_records import VALUE_TYPE_BY_CLASS as VALUE_TYPE_BY_CLASS
    from coordinator_core.codec.modern_records import GroupKey as GroupKey
    from coordinator_core.codec.modern_records import GroupMemberKey as GroupMemberKey
    from coordinator_core.codec.modern_records import RegularExpressionKey as RegularExpressionKey
    from coordinator_core.codec.modern_records import group_type as group_type
    from coordinator_core.codec.record_codec import decode_key as decode_key
    from coordinator_core.codec.record_codec import decode_record as decode_record
    from coordinator_core.codec.record_codec import decode_value as decode_value
    from coordinator_core.codec.record_codec import encode_key as encode_key
    from coordinator_core.codec.record_codec import encode_record as encode_record
    from coordinator_core.codec.record_codec import encode_value as encode_value
    from coordinator_core.codec.record_codec import offset_commit_topic_id as offset_commit_topic_id
    from coordinator_core.codec.records import Assignment as Assignment
    from coordinator_core.codec.records import GroupMetadataKey as GroupMetadataKey
    from coordinator_core.codec.records import GroupMetadataValue as GroupMetadataValue
    from coordinator_core.codec.records import LogRecord as LogRecord
    from coordinator_core.codec.records import MemberMetadata as MemberMetadata
    from coordinator_core.codec.records import OffsetCommitKey as OffsetCommitKey
    from coordinator_core.codec.records import OffsetCommitValue as OffsetCommitValue
    from coordinator_core.codec.records import Record as Record
    from coordinator_core.codec.records import ReplayItem as ReplayItem
    from coordinator_core.codec.records import Subscription as Subscription
    from coordinator_core.codec.records import TopicPartitions as TopicPartitions
    from coordinator_core.codec.records import TxnMarker as TxnMarker
    from coordinator_core.codec.records import UnknownKey as UnknownKey
    from coordinator_core.codec.records import UnknownValue as UnknownValue
    from coordinator_core.codec.records import record_type_name as record_type_name
    from coordinator_core.codec.wire import fast_constructor as fast_constructor
    from coordinator_core.errors import ConfigError as ConfigError
    from coordinator_core.errors import CoordinatorError as CoordinatorError
    from coordinator_core.errors import CorruptRecordError as CorruptRecordError
    from coordinator_core.events import TABLE_BY_KIND as TABLE_BY_KIND
    from coordinator_core.events import WITHDRAWN as WITHDRAWN
    from coordinator_core.events import OffsetCommitted as OffsetCommitted
    from coordinator_core.events import Rebalance as Rebalance
    from coordinator_core.events import StateTransition as StateTransition
    from coordinator_core.expiry import DEFAULT_COORDINATOR as DEFAULT_COORDINATOR
    from coordinator_core.expiry import REPLAY_COORDINATORS as REPLAY_COORDINATORS
    from coordinator_core.expiry import RULE_SETS as RULE_SETS
    from coordinator_core.expiry import SIMULATED_COORDINATOR as SIMULATED_COORDINATOR
    from coordinator_core.expiry import OffsetState as OffsetState
    from coordinator_core.expiry import offset_due_times as offset_due_times
    from coordinator_core.loader.as_of_view import next_judgment_ms as next_judgment_ms
    from coordinator_core.loader.as_of_view import next_times_of as next_times_of
    from coordinator_core.loader.commit_runs import CommitRun as CommitRun
    from coordinator_core.loader.commit_runs import RunCounters as RunCounters
    from coordinator_core.loader.commit_runs import compress_commit_runs as compress_commit_runs
    from coordinator_core.loader.group_fold import ALL_EVENT_KINDS as ALL_EVENT_KINDS
    from coordinator_core.loader.replay import ReplayResult as ReplayResult
    from coordinator_core.loader.replay import replay as replay
    from coordinator_core.loader.replay import replay_groups as replay_groups
    from coordinator_core.loader.replay import replay_runs as replay_runs
    from coordinator_core.loader.replay import snapshot_as_of as snapshot_as_of
    from coordinator_core.loader.snapshot import SNAPSHOT_FORMAT_VERSION as SNAPSHOT_FORMAT_VERSION
    from coordinator_core.loader.snapshot import GroupSnapshot as GroupSnapshot
    from coordinator_core.loader.snapshot import new_snapshot as new_snapshot
    from coordinator_core.loader.snapshot_codec import deserialize_snapshot as deserialize_snapshot
    from coordinator_core.loader.snapshot_codec import serialize_snapshot as serialize_snapshot
    from coordinator_core.loader.snapshot_values import VALUES_FORMAT_VERSION as VALUES_FORMAT_VERSION
    from coordinator_core.loader.snapshot_values import snapshot_from_values as snapshot_from_values
    from coordinator_core.loader.snapshot_values import snapshot_values as snapshot_values
    from coordinator_core.loader.transactions import transaction_fates as transaction_fates
    from coordinator_core.log_shape import PartitionShape as PartitionShape
    from coordinator_core.log_shape import bad_batch_last_offset as bad_batch_last_offset
    from coordinator_core.log_shape import partition_shape as partition_shape
    from coordinator_core.partitioner import partition_for as partition_for
    from coordinator_core.settings import DEFAULT_CLEANUP_INTERVAL_MS as DEFAULT_CLEANUP_INTERVAL_MS
    from coordinator_core.settings import DEFAULT_INITIAL_REBALANCE_DELAY_MS as DEFAULT_INITIAL_REBALANCE_DELAY_MS
    from coordinator_core.settings import FACTS_ONLY as FACTS_ONLY
    from coordinator_core.settings import ExpiryRules as ExpiryRules
    from coordinator_core.settings import ReplaySettings as ReplaySettings
    from coordinator_core.state import GroupState as GroupState

#: module -> the names it gives the front door
_PUBLIC: dict[str, tuple[str, ...]] = {
    "coordinator_core.errors": ("ConfigError", "CoordinatorError", "CorruptRecordError"),
    "coordinator_core.settings": (
        "DEFAULT_CLEANUP_INTERVAL_MS",
        "DEFAULT_INITIAL_REBALANCE_DELAY_MS",
        "ExpiryRules",
        "FACTS_ONLY",
        "ReplaySettings",
    ),
    "coordinator_core.state": ("GroupState",),
    "coordinator_core.partitioner": ("partition_for",),
    "coordinator_core.codec.wire": ("fast_constructor",),
    "coordinator_core.codec.records": (
        "Assignment",
        "GroupMetadataKey",
        "GroupMetadataValue",
        "LogRecord",
        "MemberMetadata",
        "OffsetCommitKey",
        "OffsetCommitValue",
        "Record",
        "ReplayItem",
        "Subscription",
        "TopicPartitions",
        "TxnMarker",
        "UnknownKey",
        "UnknownValue",
        "record_type_name",
    ),
    "coordinator_core.codec.modern_records": (
        "GroupKey",
        "GroupMemberKey",
        "RegularExpressionKey",
        "VALUE_TYPE_BY_CLASS",
        "group_type",
    ),
    "coordinator_core.codec.record_codec": (
        "decode_key",
        "decode_record",
        "decode_value",
        "encode_key",
        "encode_record",
        "encode_value",
        "offset_commit_topic_id",
    ),
    "coordinator_core.codec.consumer_protocol": (
        "CONSUMER_PROTOCOL_TYPE",
        "decode_assignment",
        "decode_subscription",
        "encode_assignment",
        "encode_subscription",
        "parse_member_blobs",
    ),
    "coordinator_core.codec.formatter": ("to_kafka_json", "to_rich_json"),
    "coordinator_core.events": ("OffsetCommitted", "Rebalance", "StateTransition", "TABLE_BY_KIND", "WITHDRAWN"),
    "coordinator_core.expiry": (
        "DEFAULT_COORDINATOR",
        "OffsetState",
        "REPLAY_COORDINATORS",
        "RULE_SETS",
        "SIMULATED_COORDINATOR",
        "offset_due_times",
    ),
    "coordinator_core.log_shape": ("PartitionShape", "bad_batch_last_offset", "partition_shape"),
    "coordinator_core.loader.commit_runs": ("CommitRun", "RunCounters", "compress_commit_runs"),
    "coordinator_core.loader.group_fold": ("ALL_EVENT_KINDS",),
    "coordinator_core.loader.as_of_view": ("next_judgment_ms", "next_times_of"),
    "coordinator_core.loader.snapshot": ("GroupSnapshot", "SNAPSHOT_FORMAT_VERSION", "new_snapshot"),
    "coordinator_core.loader.snapshot_codec": ("deserialize_snapshot", "serialize_snapshot"),
    "coordinator_core.loader.snapshot_values": ("VALUES_FORMAT_VERSION", "snapshot_from_values", "snapshot_values"),
    "coordinator_core.loader.transactions": ("transaction_fates",),
    "coordinator_core.loader.replay": ("ReplayResult", "replay", "replay_groups", "replay_runs", "snapshot_as_of"),
}
_LAZY = {name: module for module, names in _PUBLIC.items() for name in names}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'coordinator_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
