"""Byte-exact codecs for ``__consumer_offsets`` keys and values (spec §1, §3, §4).

The layouts are declared once, as data, mirroring Kafka's message JSON files
(``OffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json``,
``GroupMetadataValue.json``) and executed by the generic reader/writer of
``coordinator_core.codec.wire``. Per-version layouts are compiled once at import.

Rules:
- Key = int16 key version (the record type) + key struct; value = int16 value version + value
  struct, or ``None`` (tombstone). Key and value versions are independent.
- Key versions 0/1 (OffsetCommitKey) and 2 (GroupMetadataKey) are decoded strictly: trailing
  bytes after the key are corrupt (a key is an exact compaction identity). Every other key
  version (3-24: KIP-848 consumer, KIP-932 share, KIP-1071 streams record types, or anything
  else) is returned as ``UnknownKey`` with its leading plain-string fields decoded on a
  best-effort basis — never an exception (KIP-915: loaders skip unknown record types).
- Values tolerate trailing bytes (Kafka's generated readers do not check), so
  ``encode(decode(b)) == b`` holds for every valid ``b`` WITHOUT trailing bytes. Varints are
  re-encoded minimally, and a nullable string/bytes length other than -1 is rejected, so the
  identity holds for every value this module accepts that has no trailing bytes.
- Value versions 0-4 are decoded; a version outside that range becomes ``UnknownValue``
  unless ``lenient=True``, which reads versions above 4 with the v4 layout (Kafka's newer
  loader: generated readers do not check the version). The value keeps its real version and
  is re-encoded with the v4 layout under that version prefix.
- The value of an unknown record type is ``UnknownValue`` (raw bytes) — never an error.
- Wire sentinels become ``None`` (leader_epoch -1, expire_timestamp -1,
  current_state_timestamp -1, rebalance_timeout -1, null strings); fields absent in a version
  are ``None``. Encoding drops fields the target version does not have (Kafka's "ignorable"
  fields) and writes the sentinel for ``None``.
- Corrupt bytes raise ``CorruptRecordError`` (record type, version, part, byte position) and
  nothing else: no IndexError/struct.error escapes, no allocation before a length is checked.
- The embedded consumer-protocol blobs (subscription/assignment) stay opaque bytes here; see
  ``coordinator_core.codec.consumer_protocol``.
- ``modern=True`` (``decode_key``/``decode_record``) materialises the KIP-848 consumer-group,
  KIP-932 share-group and KIP-1071 streams-group record types of Kafka 4
  (``coordinator_core.codec.modern_records``): their keys are decoded strictly (trailing bytes are
  corrupt) and their values with Kafka's layouts; a value version other than 0 is
  ``UnknownValue`` (Kafka 4's ``CoordinatorRecordSerde`` rejects it too; ``lenient`` does not
  apply). Without it (the default, what the batch/stream decode and the classic replay use)
  those types stay ``UnknownKey``/``UnknownValue`` exactly as before. Types never final in a
  release (9, 18, 24) and anything above 24 are ``UnknownKey`` either way.
"""

from __future__ import annotations

import struct
from typing import Final

from coordinator_core.codec.modern_records import (
    MODERN_TYPES,
    VALUE_TYPE_BY_CLASS,
    GroupKey,
    GroupMemberKey,
    RegularExpressionKey,
)
from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    RecordValue,
    UnknownKey,
    UnknownValue,
)
from coordinator_core.codec.wire import (
    Buffer,
    Builder,
    Field,
    Layout,
    Message,
    WireError,
    compile_layout,
    fast_constructor,
    uuid_to_str,
)
from coordinator_core.errors import CorruptRecordError, Part

__all__ = [
    "GROUP_METADATA_KEY",
    "GROUP_METADATA_VALUE",
    "HIGHEST_VALUE_VERSION",
    "OFFSET_COMMIT_KEY",
    "OFFSET_COMMIT_TOPIC_ID_TAG",
    "OFFSET_COMMIT_VALUE",
    "UNKNOWN_KEY_FIELDS",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
    "offset_commit_topic_id",
    "value_layout",
]

# ---------------------------------------------------------------------------------------------
# Declarative specs (Kafka's message JSON at apache/kafka 1eb7644, group-coordinator/src/main/
# resources/common/message/*.json)
# ---------------------------------------------------------------------------------------------
OFFSET_COMMIT_KEY: Final = Message(
    "OffsetCommitKey",
    valid_versions="0-1",
    flexible_versions="none",
    fields=(
        Field("group", "group", "string"),
        Field("topic", "topic", "string"),
        Field("partition", "partition", "int32"),
    ),
)

GROUP_METADATA_KEY: Final = Message(
    "GroupMetadataKey",
    valid_versions="2",
    flexible_versions="none",
    fields=(Field("group", "group", "string", versions="2"),),
)

OFFSET_COMMIT_VALUE: Final = Message(
    "OffsetCommitValue",
    valid_versions="0-4",
    flexible_versions="4+",
    fields=(
        Field("offset", "offset", "int64"),
        Field("leader_epoch", "leaderEpoch", "int32", versions="3+", sentinel=-1),
        Field("metadata", "metadata", "string"),
        Field("commit_timestamp", "commitTimestamp", "int64"),
        Field("expire_timestamp", "expireTimestamp", "int64", versions="1", sentinel=-1),
    ),
)

MEMBER_METADATA_FIELDS: Final = (
    Field("member_id", "memberId", "string"),
    Field("group_instance_id", "groupInstanceId", "string", versions="3+", nullable_versions="3+"),
    Field("client_id", "clientId", "string"),
    Field("client_host", "clientHost", "string"),
    Field("rebalance_timeout", "rebalanceTimeout", "int32", versions="1+", sentinel=-1),
    Field("session_timeout", "sessionTimeout", "int32"),
    Field("subscription", "subscription", "bytes"),
    Field("assignment", "assignment", "bytes"),
)

GROUP_METADATA_VALUE: Final = Message(
    "GroupMetadataValue",
    valid_versions="0-4",
    flexible_versions="4+",
    fields=(
        Field("protocol_type", "protocolType", "string"),
        Field("generation", "generation", "int32"),
        Field("protocol", "protocol", "string", nullable_versions="0+"),
        Field("leader", "leader", "string", nullable_versions="0+"),
        Field("current_state_timestamp", "currentStateTimestamp", "int64", versions="2+", sentinel=-1),
        Field("members", "members", "[]MemberMetadata", fields=MEMBER_METADATA_FIELDS),
    ),
)

HIGHEST_VALUE_VERSION: Final = 4

#: OffsetCommitValue v4+ tagged field 0, ``TopicId`` (uuid, default ``Uuid.ZERO_UUID``; Kafka 4.1+
#: writes the committed partition's topic id). Kept raw in ``tagged_fields`` (the snapshot and the
#: vectorised decoder carry it unchanged); ``offset_commit_topic_id`` reads it.
OFFSET_COMMIT_TOPIC_ID_TAG: Final = 0


def offset_commit_topic_id(value: OffsetCommitValue) -> str | None:
    """The ``TopicId`` an OffsetCommitValue v4+ carries (``Uuid.toString()``), None when absent or
    the zero uuid (Kafka's default, which its writer and JsonConverter leave out)."""
    if value.version < 4:
        return None
    for tag, data in value.tagged_fields:
        if tag == OFFSET_COMMIT_TOPIC_ID_TAG and len(data) == 16 and any(data):
            return uuid_to_str(data)
    return None


# Key fields of the newer record types, all plain non-flexible STRINGs (spec §3.1). Decoded
# best-effort for reporting only: the streams numbering (17-24) changed during development.
UNKNOWN_KEY_FIELDS: Final[dict[int, tuple[str, ...]]] = {
    3: ("group_id",),
    4: ("group_id",),
    5: ("group_id", "member_id"),
    6: ("group_id",),
    7: ("group_id", "member_id"),
    8: ("group_id", "member_id"),
    9: ("group_id",),
    10: ("group_id", "member_id"),
    11: ("group_id",),
    12: ("group_id",),
    13: ("group_id", "member_id"),
    14: ("group_id", "member_id"),
    15: ("group_id",),
    16: ("group_id", "regular_expression"),
    17: ("group_id",),
    18: ("group_id",),
    19: ("group_id", "member_id"),
    20: ("group_id",),
    21: ("group_id", "member_id"),
    22: ("group_id", "member_id"),
    23: ("group_id",),
    24: ("group_id",),
}


# ---------------------------------------------------------------------------------------------
# Compiled layouts
# ---------------------------------------------------------------------------------------------
def _value_builders(version: int) -> dict[str, Builder]:
    return {
        "OffsetCommitValue": (OffsetCommitValue, {"version": version}),
        "GroupMetadataValue": (GroupMetadataValue, {"version": version}),
        "MemberMetadata": (MemberMetadata, {}),
    }


_KEY_LAYOUTS: Final[dict[int, Layout]] = {
    0: compile_layout(OFFSET_COMMIT_KEY, 0, {"OffsetCommitKey": (OffsetCommitKey, {"version": 0})}),
    1: compile_layout(OFFSET_COMMIT_KEY, 1, {"OffsetCommitKey": (OffsetCommitKey, {"version": 1})}),
    2: compile_layout(GROUP_METADATA_KEY, 2, {"GroupMetadataKey": (GroupMetadataKey, {"version": 2})}),
}
_OFFSET_VALUE_LAYOUTS: Final[dict[int, Layout]] = {
    v: compile_layout(OFFSET_COMMIT_VALUE, v, _value_builders(v)) for v in range(HIGHEST_VALUE_VERSION + 1)
}
_GROUP_VALUE_LAYOUTS: Final[dict[int, Layout]] = {
    v: compile_layout(GROUP_METADATA_VALUE, v, _value_builders(v)) for v in range(HIGHEST_VALUE_VERSION + 1)
}
_KEY_READERS: Final = {v: layout.fast_read for v, layout in _KEY_LAYOUTS.items()}
_MODERN_KEYS: Final = (GroupKey, GroupMemberKey, RegularExpressionKey)
_new_record: Final = fast_constructor(Record)
_LENIENT_CACHE: dict[tuple[str, int], Layout] = {}

_U16: Final = struct.Struct(">h")
_unpack16 = _U16.unpack_from


def value_layout(message: Message, version: int) -> Layout:
    """The layout used to read/write ``message`` at ``version`` (versions > 4 use the v4 layout)."""
    known = _OFFSET_VALUE_LAYOUTS if message is OFFSET_COMMIT_VALUE else _GROUP_VALUE_LAYOUTS
    if version in known:
        return known[version]
    if not 0 <= version <= 0x7FFF:
        raise ValueError(f"value version {version} is outside 0..32767")
    layout = _LENIENT_CACHE.get((message.name, version))
    if layout is None:
        # Kafka's generated reader given an unknown higher version follows the version ranges
        # of the fields ("3+", "4+"), i.e. the highest layout; keep the real version on the value.
        base = known[HIGHEST_VALUE_VERSION]
        layout = compile_layout(message, version, _value_builders(version))
        assert layout.fields == base.fields
        if len(_LENIENT_CACHE) < 1024:
            _LENIENT_CACHE[(message.name, version)] = layout
    return layout


def _corrupt(exc: WireError, part: Part, record_type: int | None, version: int | None) -> CorruptRecordError:
    return CorruptRecordError(exc.reason, part=part, position=exc.position, record_type=record_type, version=version)


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
def decode_key(data: Buffer, *, modern: bool = False) -> RecordKey:
    """Decode a record key.

    Returns ``OffsetCommitKey`` (versions 0/1), ``GroupMetadataKey`` (2), with ``modern=True``
    the ``GroupKey``/``GroupMemberKey``/``RegularExpressionKey`` of the modern record types,
    or ``UnknownKey``.

    Raises:
        CorruptRecordError: fewer than 2 bytes, a malformed classic (or modern) key, or
            trailing bytes.
    """
    end = len(data)
    if end < 2:
        raise CorruptRecordError(
            f"key needs a 2-byte version, got {end} bytes", part="key", position=0, record_type=None
        )
    version = _unpack16(data, 0)[0]
    read = _KEY_READERS.get(version)
    if read is None:
        modern_type = MODERN_TYPES.get(version) if modern else None
        if modern_type is None:
            return _unknown_key(version, data, end)
        read = modern_type.key_layout.fast_read
    try:
        key, pos = read(data, 2, end)
    except WireError as exc:
        raise _corrupt(exc, "key", version, version) from None
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} trailing bytes after the key", part="key", position=pos, record_type=version, version=version
        )
    return key  # type: ignore[no-any-return]


def _unknown_key(version: int, data: Buffer, end: int) -> UnknownKey:
    names = UNKNOWN_KEY_FIELDS.get(version, ())
    fields: list[tuple[str, str]] = []
    pos = 2
    for name in names:
        # best effort: plain STRING fields, stop at the first one that does not parse
        if pos + 2 > end:
            break
        n = _unpack16(data, pos)[0]
        if n < 0 or pos + 2 + n > end:
            break
        try:
            text = str(data[pos + 2 : pos + 2 + n], "utf-8")
        except UnicodeDecodeError:
            break
        fields.append((name, text))
        pos += 2 + n
    group = fields[0][1] if fields else None
    return UnknownKey(version=version, raw=bytes(data), group=group, fields=tuple(fields))


def encode_key(key: RecordKey) -> bytes:
    """Encode a key with its version prefix (``UnknownKey`` re-emits its raw bytes).

    Raises:
        ValueError: the key cannot be encoded (bad version, string too long, int out of range).
    """
    if isinstance(key, UnknownKey):
        return key.raw
    if isinstance(key, _MODERN_KEYS):
        modern_type = MODERN_TYPES.get(key.version)
        if modern_type is None or not isinstance(key, modern_type.key_layout.cls):
            raise ValueError(f"{type(key).__name__} cannot be encoded with record type {key.version}")
        parts = [_U16.pack(key.version)]
        modern_type.key_layout.write(key, parts)
        return b"".join(parts)
    layout = _KEY_LAYOUTS.get(key.version)
    if layout is None or (isinstance(key, OffsetCommitKey) != (key.version in (0, 1))):
        raise ValueError(f"{type(key).__name__} cannot be encoded with key version {key.version}")
    out: list[bytes] = [_U16.pack(key.version)]
    layout.write(key, out)
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------
def decode_value(key: RecordKey, data: Buffer | None, *, lenient: bool = False) -> RecordValue | None:
    """Decode the value of a record whose key is ``key``; ``None`` (tombstone) stays ``None``.

    Args:
        key: the decoded key (selects OffsetCommitValue / GroupMetadataValue).
        data: the value bytes, or None for a tombstone.
        lenient: read value versions above 4 with the v4 layout instead of returning
            ``UnknownValue``.

    Raises:
        CorruptRecordError: the bytes do not follow the layout of their version.
    """
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return _decode_value(OFFSET_COMMIT_VALUE, _OFFSET_VALUE_LAYOUTS, key.version, data, lenient)
    if isinstance(key, GroupMetadataKey):
        return _decode_value(GROUP_METADATA_VALUE, _GROUP_VALUE_LAYOUTS, key.version, data, lenient)
    if isinstance(key, UnknownKey):
        return UnknownValue(version=_unpack16(data, 0)[0] if len(data) >= 2 else None, raw=bytes(data))
    return _decode_modern_value(key.version, data)


def _value_version(data: Buffer, record_type: int) -> int:
    """A value's int16 version prefix (``CorruptRecordError`` when the bytes are shorter)."""
    if len(data) < 2:
        raise CorruptRecordError(
            f"value needs a 2-byte version, got {len(data)} bytes", part="value", position=0, record_type=record_type
        )
    return int(_unpack16(data, 0)[0])


def _decode_value(
    message: Message, layouts: dict[int, Layout], record_type: int, data: Buffer, lenient: bool
) -> RecordValue:
    end = len(data)
    version = _value_version(data, record_type)
    layout = layouts.get(version)
    if layout is None:
        if not lenient or version < 0:
            return UnknownValue(version=version, raw=bytes(data))
        layout = value_layout(message, version)
    try:
        value, _pos = layout.read(data, 2, end)  # trailing bytes tolerated, like Kafka
    except WireError as exc:
        raise _corrupt(exc, "value", record_type, version) from None
    return value  # type: ignore[no-any-return]


def _decode_modern_value(record_type: int, data: Buffer) -> RecordValue:
    end = len(data)
    version = _value_version(data, record_type)
    modern_type = MODERN_TYPES.get(record_type)
    if modern_type is None or version != 0:
        return UnknownValue(version=version, raw=bytes(data))
    try:
        value, _pos = modern_type.value_layout.read(data, 2, end)  # trailing bytes tolerated, like Kafka
    except WireError as exc:
        raise _corrupt(exc, "value", record_type, version) from None
    return value  # type: ignore[no-any-return]


def encode_value(value: RecordValue | None) -> bytes | None:
    """Encode a value with its version prefix (``value.version``); ``None`` stays ``None``.

    ``UnknownValue`` re-emits its raw bytes. Versions above 4 use the v4 layout.

    Raises:
        ValueError: the value cannot be encoded at its version.
    """
    if value is None:
        return None
    if isinstance(value, UnknownValue):
        return value.raw
    modern_type = VALUE_TYPE_BY_CLASS.get(type(value))
    if modern_type is not None:
        if value.version != 0:
            raise ValueError(f"{type(value).__name__} has only value version 0, not {value.version}")
        parts = [_U16.pack(0)]
        modern_type.value_layout.write(value, parts)
        return b"".join(parts)
    assert isinstance(value, OffsetCommitValue | GroupMetadataValue)
    message = OFFSET_COMMIT_VALUE if isinstance(value, OffsetCommitValue) else GROUP_METADATA_VALUE
    layout = value_layout(message, value.version)
    out: list[bytes] = [_U16.pack(value.version)]
    layout.write(value, out)
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------
def decode_record(key: Buffer, value: Buffer | None, *, lenient: bool = False, modern: bool = False) -> Record:
    """Decode a key/value pair (``value=None`` is a tombstone).

    ``modern=True`` materialises the KIP-848/932/1071 record types (see the module rules).

    Raises:
        CorruptRecordError: the key or the value is corrupt.
    """
    k = decode_key(key, modern=True) if modern else decode_key(key)
    record: Record = _new_record((k, decode_value(k, value, lenient=lenient)))
    return record


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """Encode a record to its (key, value) bytes."""
    return encode_key(record.key), encode_value(record.value)
