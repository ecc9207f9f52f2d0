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

Dict insertion order is the JSON field order; dump with ``json.dumps(..., separators=(",",
":"))`` to get Kafka's compact form.
"""

from __future__ import annotations

import base64
from typing import Any

from coordinator_core.codec import (
    GROUP_METADATA_VALUE,
    HIGHEST_VALUE_VERSION,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    decode_value,
)
from coordinator_core.consumer_protocol import ASSIGNMENT, SUBSCRIPTION, parse_member_blobs
from coordinator_core.errors import CorruptRecordError
from coordinator_core.partitioner import DEFAULT_NUM_PARTITIONS, partition_for
from coordinator_core.records import (
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
from coordinator_core.wire import Field, Message, in_versions

__all__ = ["message_to_json", "to_kafka_json", "to_rich_json"]

UNKNOWN = "unknown"


def _json_value(f: Field, value: Any, version: int) -> Any:
    if f.struct_name is not None:
        return [struct_to_json(f.fields, item, version) for item in value]
    if value is None:
        return f.sentinel  # None for nullable strings/bytes, -1 for sentinel ints
    if f.type == "bytes":
        return base64.b64encode(value).decode("ascii")
    if f.type.startswith("[]"):
        return list(value)
    return value


def struct_to_json(fields: tuple[Field, ...], obj: Any, version: int) -> dict[str, Any]:
    """Kafka's generated JsonConverter for one struct at ``version``."""
    return {
        f.json_name: _json_value(f, getattr(obj, f.name), version)
        for f in fields
        if in_versions(f.versions, version)
    }


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
                return {"version": value.version, "data": message_to_json(OFFSET_COMMIT_VALUE, decoded, decoded.version)}
        return {"version": value.version, "data": UNKNOWN}
    if not 0 <= value.version <= HIGHEST_VALUE_VERSION:
        return {"version": value.version, "data": UNKNOWN}
    message = OFFSET_COMMIT_VALUE if isinstance(value, OffsetCommitValue) else GROUP_METADATA_VALUE
    return {"version": value.version, "data": message_to_json(message, value, value.version)}


def to_kafka_json(record: Record) -> dict[str, Any]:
    """The JSON object Kafka's console formatter prints for ``record``."""
    key = record.key
    key_json: dict[str, Any]
    if isinstance(key, OffsetCommitKey):
        key_json = {"version": key.version, "data": message_to_json(OFFSET_COMMIT_KEY, key, key.version)}
    elif isinstance(key, GroupMetadataKey):
        key_json = {"version": key.version, "data": {"group": key.group}}
    else:
        key_json = {"version": key.version, "data": UNKNOWN}
    return {"key": key_json, "value": _value_json(record.value, isinstance(key, UnknownKey))}


def to_rich_json(record: Record, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> dict[str, Any]:
    """Kafka's JSON plus ``recordType``, ``coordinatorPartition`` and, for consumer groups,
    ``consumerProtocol``: per member the parsed subscription/assignment (or the errors)."""
    out = to_kafka_json(record)
    key = record.key
    out["recordType"] = record_type_name(key.version)
    if isinstance(key, UnknownKey):
        out["keyFields"] = dict(key.fields)
    out["coordinatorPartition"] = partition_for(key.group, num_partitions) if key.group is not None else None
    value = record.value
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
