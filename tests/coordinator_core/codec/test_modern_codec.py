"""The rules of the modern-record codec (``coordinator_core.codec.modern_records`` + ``wire``) that the
golden vectors do not pin by themselves: tagged-field order and defaults, presence markers,
strict keys, unknown versions and record types, the default (classic) decode path."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from coordinator_core.codec.formatter import to_kafka_json, to_rich_json
from coordinator_core.codec.modern_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMetadataValue,
    GroupKey,
    GroupMemberKey,
    StreamsGroupMetadataValue,
    TopicIdPartitions,
    group_type,
)
from coordinator_core.codec.record_codec import decode_key, decode_record, encode_key, encode_record, encode_value
from coordinator_core.codec.records import Record, UnknownKey, UnknownValue
from coordinator_core.codec.wire import Field, Message, WireError, compile_layout, uuid_from_str, uuid_to_str
from coordinator_core.errors import CorruptRecordError

G = "0001" + "67"  # GroupId "g"
M = "0001" + "6d"  # MemberId "m"


def _value(record_type: int, key_hex: str, value_hex: str) -> object:
    return decode_record(bytes.fromhex(f"{record_type:04x}" + key_hex), bytes.fromhex(value_hex), modern=True).value


# ---------------------------------------------------------------------------------------------
# Tagged fields
# ---------------------------------------------------------------------------------------------
def test_known_tags_are_read_in_any_order_like_kafkas_switch_on_the_tag() -> None:
    # StreamsGroupMetadataValue: Epoch 1, MetadataHash 2, then tag 2 before tag 0
    value = _value(17, G, "000000000001000000000000000202020400000007000400000005")
    assert value == StreamsGroupMetadataValue(1, 2, validated_topology_epoch=5, stored_description_topology_epoch=7)
    # re-encoded the way Kafka writes it: ascending tags
    assert encode_value(value) == bytes.fromhex("000000000001000000000000000202000400000005020400000007")


def test_a_tag_holding_its_default_value_is_not_written_back() -> None:
    """MetadataHash 0 is ConsumerGroupMetadataValue's default: Kafka never writes it."""
    value = _value(3, G, "0000000000040100080000000000000000")
    assert value == ConsumerGroupMetadataValue(epoch=4, metadata_hash=0)
    assert encode_value(value) == bytes.fromhex("00000000000400")


def test_a_known_tag_that_does_not_fill_its_declared_size_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match=r"metadata_hash \(tag 0\) left 1 of its 9 bytes unread"):
        _value(3, G, "000000000004010009000000000000000101")


def test_a_known_tag_that_overruns_its_declared_size_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="metadata_hash needs 8 bytes, 4 left"):
        _value(3, G, "0000000000040100040000000000000001")


def test_unknown_tags_are_kept_in_their_order_after_the_known_ones() -> None:
    value = _value(3, G, "00000000000403000800000000000000096301aa0500")
    assert value == ConsumerGroupMetadataValue(4, 9, tagged_fields=((99, b"\xaa"), (5, b"")))
    assert encode_value(value) == bytes.fromhex("00000000000403000800000000000000096301aa0500")


@dataclass(frozen=True, slots=True)
class _Tagged:
    a: int = 0
    b: int = 0
    tagged_fields: tuple[tuple[int, bytes], ...] = ()


def test_unknown_tags_interleave_with_known_ones_as_kafkas_raw_tagged_field_writer_does() -> None:
    """Known tags 2 and 6; unknown 1, 4, 9 go before the first known tag above them."""
    message = Message("T", "0", "0+", (Field("a", "a", "int32", tag=2), Field("b", "b", "int32", tag=6)))
    layout = compile_layout(message, 0, {"T": (_Tagged, {})})
    obj = _Tagged(a=7, b=8, tagged_fields=((1, b"x"), (4, b""), (9, b"z")))
    data = layout.encode(obj)
    assert data == bytes.fromhex(
        "05"  # 5 tagged fields
        "01"
        "01"
        "78"  # unknown 1: "x"
        "02"
        "04"
        "00000007"  # known 2: a = 7
        "04"
        "00"  # unknown 4: empty
        "06"
        "04"
        "00000008"  # known 6: b = 8
        "09"
        "01"
        "7a"  # unknown 9: "z"
    )
    assert layout.read(data, 0, len(data)) == (obj, len(data))


def test_a_nullable_tagged_struct_has_a_presence_varint_and_other_markers_are_corrupt() -> None:
    # ConsumerGroupMemberMetadataValue with tag 0 (ClassicMemberMetadata) holding presence varint 2
    base = "00000000010101000000000000"
    with pytest.raises(CorruptRecordError, match="presence varint 2"):
        _value(5, G + M, base + "01000702000000010100")
    present = _value(5, G + M, base + "01000701000000010100")
    assert present.classic_member_metadata.session_timeout_ms == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("marker", ["00", "02", "7f", "80"])
def test_a_nullable_struct_presence_byte_other_than_minus_one_or_one_is_corrupt(marker: str) -> None:
    # StreamsGroupMemberMetadataValue up to UserEndpoint, whose presence byte is ``marker``
    head = "000000000101000000000000000001"
    with pytest.raises(CorruptRecordError, match="presence byte"):
        _value(19, G + M, head + marker + "02682384000100")


def test_a_null_nullable_struct_is_one_presence_byte() -> None:
    value = _value(19, G + M, "000000000101000000000000000001ff0100")
    assert value.user_endpoint is None  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# Uuids, keys, versions, record types
# ---------------------------------------------------------------------------------------------
def test_uuids_are_kafkas_url_safe_base64_strings() -> None:
    raw = bytes.fromhex("fbff" + "00" * 13 + "01")
    assert uuid_to_str(raw) == "-_8AAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_str("-_8AAAAAAAAAAAAAAAAAAQ") == raw
    for bad in ("AAAA", "AAAAAAAAAAAAAAAAAAAAAQ==", "AAAAAAAAAAAAAAAAAAAAA+", "AAAAAAAAAAAAAAAAAAAAAR"):
        with pytest.raises(ValueError, match="not a Kafka uuid"):
            uuid_from_str(bad)
    with pytest.raises(ValueError, match="not a Kafka uuid"):
        encode_value(ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, (TopicIdPartitions("nope", ()),), ()))


def test_modern_keys_are_exact_identities_trailing_bytes_are_corrupt() -> None:
    assert decode_key(bytes.fromhex("0005" + G + M), modern=True) == GroupMemberKey("g", "m", 5)
    with pytest.raises(CorruptRecordError, match="1 trailing bytes after the key"):
        decode_key(bytes.fromhex("0003" + G + "00"), modern=True)
    with pytest.raises(CorruptRecordError, match="member_id"):
        decode_key(bytes.fromhex("0005" + G), modern=True)


def test_a_value_version_other_than_zero_is_unknown_not_corrupt() -> None:
    record = decode_record(bytes.fromhex("0003" + G), bytes.fromhex("00010000000400"), modern=True)
    assert record.value == UnknownValue(version=1, raw=bytes.fromhex("00010000000400"))
    assert to_kafka_json(record)["value"] == {"version": 1, "data": "unknown"}
    assert encode_record(record) == (bytes.fromhex("0003" + G), bytes.fromhex("00010000000400"))
    with pytest.raises(ValueError, match="only value version 0"):
        encode_value(ConsumerGroupMetadataValue(4, version=1))


def test_a_value_shorter_than_its_version_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="2-byte version"):
        decode_record(bytes.fromhex("0003" + G), b"\x00", modern=True)


@pytest.mark.parametrize(("record_type", "kind"), [(9, "share"), (18, "streams"), (24, "streams"), (25, None)])
def test_types_never_final_in_a_release_stay_unknown_keys_with_their_group(record_type: int, kind: str | None) -> None:
    record = decode_record(bytes.fromhex(f"{record_type:04x}" + G), bytes.fromhex("000000"), modern=True)
    assert isinstance(record.key, UnknownKey) and record.key.group == ("g" if kind else None)
    assert isinstance(record.value, UnknownValue)
    assert group_type(record_type) == kind
    assert to_rich_json(record).get("groupType") == kind


def test_the_default_decode_path_keeps_modern_records_unknown() -> None:
    key, value = encode_record(Record(GroupKey("g", 3), ConsumerGroupMetadataValue(4)))
    record = decode_record(key, value)
    assert isinstance(record.key, UnknownKey) and isinstance(record.value, UnknownValue)
    assert encode_key(record.key) == key


def test_rich_json_names_the_group_type_and_member_state() -> None:
    key, value = encode_record(
        Record(GroupMemberKey("g", "m", 8), ConsumerGroupCurrentMemberAssignmentValue(3, 2, 1, (), ()))
    )
    rich = to_rich_json(decode_record(key, value, modern=True))
    assert (rich["recordType"], rich["groupType"], rich["memberState"]) == (
        "ConsumerGroupCurrentMemberAssignment",
        "consumer",
        "UNREVOKED_PARTITIONS",
    )


def test_wire_errors_of_modern_values_carry_record_type_version_and_position() -> None:
    with pytest.raises(CorruptRecordError) as info:
        _value(8, G + M, "000000000001")
    assert (info.value.record_type, info.value.version, info.value.part, info.value.position) == (8, 0, "value", 6)
    assert not isinstance(info.value, WireError)
