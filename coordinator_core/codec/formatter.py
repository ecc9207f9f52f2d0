"""Kafka console-formatter JSON for decoded records (spec §3.4, §4.4).

Rules — reproduce exactly what ``kafka-console-consumer`` prints with
``org.apache.kafka.tools.consumer.OffsetsMessageFormatter`` (offset records) and
``GroupMetadataMessageFormatter`` (group records) (apache/kafka ``tools/.../consumer``):
- ``{"key": {"version": V, "data": {...}}, "value": {"version": V, "data": {...}}}``; a
  tombstone prints ``"value": null``.
- ``data`` is the generated ``*JsonConverter.write(message, version)``: only the fields that
  exist in that version, in schema order, camelCase names, wire values (sentinels as -1, null
  strings as null), bytes as base64. Unknown tagged fields are not printed.
- A key version the formatter does not handle prints ``"data": "unknown"``; so does a value
  version outside 0-4 (even if the codec read it leniently).
- For an unknown record type, the value is printed the way OffsetsMessageFormatter does: it
  decodes the value as an OffsetCommitValue when its version is 0-4, independently of the key.
- ``to_rich_json`` adds, outside Kafka's part: the record-type name, the group's coordinator
  partition, the parsed consumer-protocol blobs of each member (``consumer`` groups only) and,
  for a value version above 4 read leniently, its fields (``valueReadAsV4``).

The modern record types (KIP-848 consumer groups 3-8 and 16, KIP-932 share groups 10-15,
KIP-1071 streams groups 17-23; records decoded with ``modern=True``) print as Kafka 4's
``CoordinatorRecordMessageFormatter`` does (``ShareGroupMessageFormatter`` for share groups;
Kafka ships no console formatter for the consumer/streams types, ``kafka-dump-log
--offsets-decoder`` prints the same data with the numbers as strings):
- ``{"key": {"type": T, "data": {...}}, "value": {"version": V, "data": {...}}}`` (tombstone:
  ``"value": null``); the key is written at version 0 (``writeRecordKeyAsJson``).
- ``data`` follows the generated JsonConverters: camelCase names, uuids as ``Uuid.toString()``,
  bytes base64, nested structs as objects, null for null strings/arrays/structs, sentinels as
  -1; a tagged field is printed only when it differs from its default; unknown tagged fields
  are not printed. A value version other than 0 prints ``"data": "unknown"``.

Dict insertion order is the JSON field order; dump with ``json.dumps(..., separators=(",",
":"))`` to get Kafka's compact form.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from coordinator_core.codec.consumer_protocol import ASSIGNMENT, SUBSCRIPTION, parse_member_blobs
from coordinator_core.codec.modern_records import (
    MODERN_MEMBER_STATES,
    MODERN_TYPES,
    STREAMS_MEMBER_STATES,
    VALUE_TYPE_BY_CLASS,
    GroupKey,
    GroupMemberKey,
    RegularExpressionKey,
    group_type,
)
from coordinator_core.codec.record_codec import (
    GROUP_METADATA_VALUE,
    HIGHEST_VALUE_VERSION,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    decode_value,
    offset_commit_topic_id,
)
from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordValue,
    UnknownKey,
    UnknownValue,
    record_type_name,
)
from coordinator_core.codec.wire import Field, Message, empty_struct, in_versions
from coordinator_core.errors import CorruptRecordError
from coordinator_core.partitioner import DEFAULT_NUM_PARTITIONS, partition_for

__all__ = ["message_to_json", "to_kafka_json", "to_rich_json"]

UNKNOWN = "unknown"


def _json_value(f: Field, value: Any, version: int) -> Any:
    if value is None:
        return f.sentinel  # None for nullable strings/bytes/arrays/structs, -1 for sentinel ints
    if f.struct_name is not None:
        return [struct_to_json(f.fields, item, version) for item in value]
    if f.single_struct_name is not None:
        return struct_to_json(f.fields, value, version)
    if f.type == "bytes":
        return base64.b64encode(value).decode("ascii")
    if f.type.startswith("[]"):
        return list(value)
    return value


_DEFAULTS: dict[type[Any], dict[str, Any]] = {}


def _defaults(cls: type[Any]) -> dict[str, Any]:
    found = _DEFAULTS.get(cls)
    if found is None:
        found = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        _DEFAULTS[cls] = found
    return found


def _tagged_default(f: Field, obj: Any, value: Any, version: int) -> bool:
    """Whether Kafka's JsonConverter leaves the tagged field out: it equals its default (the
    dataclass default), or for a struct field the empty struct (``wire.empty_struct``: a null
    struct IS printed, as Kafka 4.4 prints ``"classicMemberMetadata":null``)."""
    if f.single_struct_name is not None:
        return value is not None and value == empty_struct(f.fields, type(value), version)
    return bool(value == _defaults(type(obj)).get(f.name, dataclasses.MISSING))


def struct_to_json(fields: tuple[Field, ...], obj: Any, version: int) -> dict[str, Any]:
    """Kafka's generated JsonConverter for one struct at ``version`` (a tagged field only when
    it differs from its default, ``_tagged_default``)."""
    out: dict[str, Any] = {}
    for f in fields:
        if not in_versions(f.versions, version):
            continue
        value = getattr(obj, f.name)
        if f.tag is not None and _tagged_default(f, obj, value, version):
            continue
        out[f.json_name] = _json_value(f, value, version)
    return out


def message_to_json(message: Message, obj: Any, version: int) -> dict[str, Any]:
    """``<Message>JsonConverter.write(obj, version)``."""
    return struct_to_json(message.fields, obj, version)


def _value_json(value: RecordValue | None, raw_value_of_unknown_key: bool) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, UnknownValue):
        if raw_value_of_unknown_key and value.version is not None and 0 <= value.version <= HIGHEST_VALUE_VERSION:
            # OffsetsMessageFormatter decodes the value as an OffsetCommitValue whatever the key.
            try:
                decoded = decode_value(OffsetCommitKey("", "", 0), value.raw)
            except CorruptRecordError:
                decoded = None
            if isinstance(decoded, OffsetCommitValue):
                return {
                    "version": value.version,
                    "data": message_to_json(OFFSET_COMMIT_VALUE, decoded, decoded.version),
                }
        return {"version": value.version, "data": UNKNOWN}
    if not 0 <= value.version <= HIGHEST_VALUE_VERSION:
        return {"version": value.version, "data": UNKNOWN}
    if isinstance(value, OffsetCommitValue):
        data = message_to_json(OFFSET_COMMIT_VALUE, value, value.version)
        topic_id = offset_commit_topic_id(value)
        if topic_id is not None:
            data["topicId"] = topic_id  # v4 tagged field 0, the schema's last field (Kafka 4.1+)
        return {"version": value.version, "data": data}
    return {"version": value.version, "data": message_to_json(GROUP_METADATA_VALUE, value, value.version)}


def _modern_json(key: GroupKey | GroupMemberKey | RegularExpressionKey, value: RecordValue | None) -> dict[str, Any]:
    """``CoordinatorRecordMessageFormatter``: the key's type and data, the value's version and data."""
    modern_type = MODERN_TYPES[key.version]
    value_json: dict[str, Any] | None
    if value is None:
        value_json = None
    elif type(value) in VALUE_TYPE_BY_CLASS and value.version == 0:
        value_json = {"version": 0, "data": message_to_json(VALUE_TYPE_BY_CLASS[type(value)].value_message, value, 0)}
    else:
        value_json = {"version": getattr(value, "version", None), "data": UNKNOWN}
    return {"key": {"type": key.version, "data": message_to_json(modern_type.key_message, key, 0)}, "value": value_json}


def to_kafka_json(record: Record) -> dict[str, Any]:
    """The JSON object Kafka's console formatter prints for ``record``."""
    key = record.key
    if isinstance(key, GroupKey | GroupMemberKey | RegularExpressionKey):
        return _modern_json(key, record.value)
    key_json: dict[str, Any]
    if isinstance(key, OffsetCommitKey):
        key_json = {"version": key.version, "data": message_to_json(OFFSET_COMMIT_KEY, key, key.version)}
    elif isinstance(key, GroupMetadataKey):
        key_json = {"version": key.version, "data": {"group": key.group}}
    else:
        key_json = {"version": key.version, "data": UNKNOWN}
    return {"key": key_json, "value": _value_json(record.value, isinstance(key, UnknownKey))}


def to_rich_json(record: Record, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> dict[str, Any]:
    """Kafka's JSON plus ``recordType``, ``coordinatorPartition``, for classic consumer groups
    ``consumerProtocol`` (per member the parsed subscription/assignment, or the errors) and, for
    the modern record types, ``groupType`` and the name of a current assignment's ``memberState``."""
    out = to_kafka_json(record)
    key = record.key
    out["recordType"] = record_type_name(key.version)
    if isinstance(key, UnknownKey):
        out["keyFields"] = dict(key.fields)
    out["coordinatorPartition"] = partition_for(key.group, num_partitions) if key.group is not None else None
    value = record.value
    kind = group_type(key.version)
    if isinstance(key, UnknownKey | GroupKey | GroupMemberKey | RegularExpressionKey) and kind is not None:
        out["groupType"] = kind  # consumer / share / streams (the classic types have their own keys)
        state = getattr(value, "state", None)
        if isinstance(state, int):
            names = STREAMS_MEMBER_STATES if kind == "streams" else MODERN_MEMBER_STATES
            out["memberState"] = names.get(state, f"Unknown({state})")
    if isinstance(value, OffsetCommitValue | GroupMetadataValue) and value.version > HIGHEST_VALUE_VERSION:
        # read leniently (v4 layout): Kafka prints "unknown", the rich view shows the fields
        message = OFFSET_COMMIT_VALUE if isinstance(value, OffsetCommitValue) else GROUP_METADATA_VALUE
        out["valueReadAsV4"] = message_to_json(message, value, HIGHEST_VALUE_VERSION)
    if isinstance(value, GroupMetadataValue):
        members = []
        for m in value.members:
            parsed = parse_member_blobs(value.protocol_type, m)
            members.append(
                {
                    "memberId": m.member_id,
                    "subscription": None
                    if parsed.subscription is None
                    else {
                        "version": parsed.subscription.version,
                        "data": message_to_json(SUBSCRIPTION, parsed.subscription, min(parsed.subscription.version, 3)),
                    },
                    "assignment": None
                    if parsed.assignment is None
                    else {
                        "version": parsed.assignment.version,
                        "data": message_to_json(ASSIGNMENT, parsed.assignment, min(parsed.assignment.version, 3)),
                    },
                    "errors": list(parsed.errors),
                    "notes": list(parsed.notes),
                }
            )
        out["consumerProtocol"] = members
    return out
