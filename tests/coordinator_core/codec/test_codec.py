"""Table-driven tests of the record codec: layouts, sentinels, unknown types, corrupt input."""

from __future__ import annotations

import struct

import pytest

from coordinator_core.codec.record_codec import (
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from coordinator_core.codec.records import (
    RECORD_TYPE_NAMES,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    UnknownKey,
    UnknownValue,
)
from coordinator_core.errors import CorruptRecordError

OFFSET_KEY = bytes.fromhex("0001000867726f75702d69640003666f6f00000001")
GROUP_KEY = bytes.fromhex("0002000867726f75702d6964")
V3_VALUE = bytes.fromhex("000300000000000000640000000a00086d6574616461746100000000000004d2")
V4_VALUE = bytes.fromhex("000400000000000000640000000a096d6574616461746100000000000004d200")


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _raises(fn: object, *args: object, **kwargs: object) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    return info.value


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
def test_offset_commit_key_versions_0_and_1_share_a_layout() -> None:
    body = OFFSET_KEY[2:]
    assert decode_key(b"\x00\x00" + body) == OffsetCommitKey("group-id", "foo", 1, version=0)
    assert decode_key(b"\x00\x01" + body) == OffsetCommitKey("group-id", "foo", 1, version=1)


def test_empty_group_id_is_a_legal_offset_commit_key() -> None:
    key = OffsetCommitKey("", "t", 0)
    assert decode_key(encode_key(key)) == key


def test_group_metadata_key_roundtrips() -> None:
    assert decode_key(GROUP_KEY) == GroupMetadataKey("group-id")
    assert encode_key(GroupMetadataKey("group-id")) == GROUP_KEY


@pytest.mark.parametrize("extra", [b"\x00", b"garbage"])
def test_trailing_bytes_after_a_key_are_corrupt(extra: bytes) -> None:
    err = _raises(decode_key, OFFSET_KEY + extra)
    assert (err.part, err.record_type, err.version, err.position) == ("key", 1, 1, len(OFFSET_KEY))
    err = _raises(decode_key, GROUP_KEY + extra)
    assert (err.part, err.record_type, err.position) == ("key", 2, len(GROUP_KEY))


@pytest.mark.parametrize("data", [b"", b"\x00"])
def test_key_shorter_than_its_version_is_corrupt(data: bytes) -> None:
    err = _raises(decode_key, data)
    assert (err.part, err.record_type, err.position) == ("key", None, 0)


def test_null_group_in_a_key_is_corrupt() -> None:
    err = _raises(decode_key, b"\x00\x02\xff\xff")
    assert "non-nullable field group was serialized as null" in err.reason
    assert err.position == 2


def test_invalid_utf8_in_a_key_reports_the_byte() -> None:
    err = _raises(decode_key, b"\x00\x02\x00\x03a\xffb")
    assert "UTF-8" in err.reason and err.position == 5


def test_string_length_beyond_the_buffer_is_corrupt() -> None:
    err = _raises(decode_key, b"\x00\x02\x7f\xffabc")
    assert err.position == 2 and "exceeds" in err.reason


@pytest.mark.parametrize("version", sorted(v for v in RECORD_TYPE_NAMES if v >= 3))
def test_every_newer_record_type_is_named_and_never_fatal(version: int) -> None:
    raw = struct.pack(">h", version) + s16("my-group") + s16("member-1")
    key = decode_key(raw)
    assert isinstance(key, UnknownKey)
    assert key.type_name == RECORD_TYPE_NAMES[version]
    assert key.group == "my-group"
    assert key.fields[0] == ("group_id", "my-group")
    assert encode_key(key) == raw
    value = decode_value(key, b"\x00\x00\x01")
    assert value == UnknownValue(version=0, raw=b"\x00\x00\x01")
    assert decode_value(key, None) is None


@pytest.mark.parametrize(
    "raw", [b"\x00\x03", b"\x00\x03\xff", b"\x00\x05\x00\x09abc", b"\x7f\xff", b"\xff\xff\x00\x01a"]
)
def test_unknown_record_types_with_unparseable_fields_still_decode(raw: bytes) -> None:
    key = decode_key(raw)
    assert isinstance(key, UnknownKey) and key.raw == raw
    assert encode_key(key) == raw


def test_two_field_key_types_decode_their_second_string() -> None:
    key = decode_key(b"\x00\x10" + s16("g") + s16("topic-.*"))
    assert isinstance(key, UnknownKey)
    assert key.type_name == "ConsumerGroupRegularExpression"
    assert dict(key.fields) == {"group_id": "g", "regular_expression": "topic-.*"}


def test_encoding_a_key_with_a_mismatched_version_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_key(OffsetCommitKey("g", "t", 0, version=2))
    with pytest.raises(ValueError):
        encode_key(GroupMetadataKey("g", version=1))


# ---------------------------------------------------------------------------------------------
# Offset commit values
# ---------------------------------------------------------------------------------------------
KEY = OffsetCommitKey("g", "t", 0)


@pytest.mark.parametrize(
    ("value", "hex_"),
    [
        (
            OffsetCommitValue(100, "metadata", 1234, version=0),
            "0000000000000000006400086d6574616461746100000000000004d2",
        ),
        (
            OffsetCommitValue(100, "metadata", 1234, expire_timestamp=5000, version=1),
            "0001000000000000006400086d6574616461746100000000000004d20000000000001388",
        ),
        (
            OffsetCommitValue(100, "metadata", 1234, version=1),
            "0001000000000000006400086d6574616461746100000000000004d2ffffffffffffffff",
        ),
        (
            OffsetCommitValue(100, "metadata", 1234, version=2),
            "0002000000000000006400086d6574616461746100000000000004d2",
        ),
        (OffsetCommitValue(100, "metadata", 1234, leader_epoch=10, version=3), V3_VALUE.hex()),
        (
            OffsetCommitValue(100, "", 1234, leader_epoch=None, version=3),
            "00030000000000000064ffffffff000000000000000004d2",
        ),
        (OffsetCommitValue(100, "metadata", 1234, leader_epoch=10, version=4), V4_VALUE.hex()),
    ],
)
def test_offset_commit_value_layouts(value: OffsetCommitValue, hex_: str) -> None:
    assert encode_value(value) == bytes.fromhex(hex_)
    assert decode_value(KEY, bytes.fromhex(hex_)) == value


def test_only_minus_one_is_the_leader_epoch_sentinel() -> None:
    value = OffsetCommitValue(1, "", 2, leader_epoch=-2, version=3)
    assert decode_value(KEY, encode_value(value)) == value


def test_fields_absent_in_the_target_version_are_dropped_like_kafka_ignorable_fields() -> None:
    value = OffsetCommitValue(1, "m", 2, leader_epoch=7, expire_timestamp=9, version=0)
    assert decode_value(KEY, encode_value(value)) == OffsetCommitValue(1, "m", 2, version=0)


def test_v4_unknown_tagged_fields_are_kept_and_reencoded_exactly() -> None:
    raw = V4_VALUE[:-1] + bytes.fromhex("020502abcd87ad4b00")  # tag 5 (2 bytes), tag 1234567 (empty)
    value = decode_value(KEY, raw)
    assert isinstance(value, OffsetCommitValue)
    assert value.tagged_fields == ((5, b"\xab\xcd"), (1234567, b""))
    assert encode_value(value) == raw


def test_values_tolerate_trailing_bytes_like_kafka() -> None:
    value = decode_value(KEY, V3_VALUE + b"\x01\x02\x03")
    assert value == decode_value(KEY, V3_VALUE)
    assert encode_value(value) == V3_VALUE  # the identity holds only without trailing bytes


def test_tombstone_value_is_none() -> None:
    assert decode_value(KEY, None) is None
    assert encode_value(None) is None
    record = decode_record(OFFSET_KEY, None)
    assert record.is_tombstone and encode_record(record) == (OFFSET_KEY, None)


@pytest.mark.parametrize("version", [5, 10, 0x7FFF, -1])
def test_unknown_value_versions_are_reported_not_raised(version: int) -> None:
    raw = struct.pack(">h", version) + V4_VALUE[2:]
    assert decode_value(KEY, raw) == UnknownValue(version=version, raw=raw)
    assert encode_value(UnknownValue(version=version, raw=raw)) == raw


def test_lenient_mode_reads_higher_versions_with_the_v4_layout() -> None:
    raw = b"\x00\x07" + V4_VALUE[2:]
    value = decode_value(KEY, raw, lenient=True)
    assert value == OffsetCommitValue(100, "metadata", 1234, leader_epoch=10, version=7)
    assert encode_value(value) == raw
    assert decode_value(KEY, b"\xff\xff" + V4_VALUE[2:], lenient=True) == UnknownValue(-1, b"\xff\xff" + V4_VALUE[2:])


def test_lenient_mode_still_rejects_corrupt_higher_versions() -> None:
    err = _raises(decode_value, KEY, b"\x00\x09\x00", lenient=True)
    assert (err.part, err.version) == ("value", 9)


@pytest.mark.parametrize("cut", range(2, len(V3_VALUE)))
def test_every_truncation_of_a_value_raises_the_typed_error(cut: int) -> None:
    err = _raises(decode_value, KEY, V3_VALUE[:cut])
    assert err.part == "value" and err.record_type == 1 and err.version == 3
    assert 2 <= err.position <= cut


def test_value_shorter_than_its_version_is_corrupt() -> None:
    err = _raises(decode_value, KEY, b"\x00")
    assert (err.part, err.position, err.record_type, err.version) == ("value", 0, 1, None)


def test_null_metadata_is_corrupt_because_kafka_never_writes_it() -> None:
    raw = bytes.fromhex("00030000000000000064ffffffffffff00000000000004d2")
    err = _raises(decode_value, KEY, raw)
    assert "non-nullable field metadata" in err.reason and err.position == 14


def test_compact_string_length_beyond_0x7fff_is_corrupt() -> None:
    raw = bytes.fromhex("00040000000000000064ffffffff8180 02") + b"x" * 40
    err = _raises(decode_value, KEY, raw)
    assert "invalid length" in err.reason


def test_overlong_varint_is_corrupt() -> None:
    raw = bytes.fromhex("00040000000000000064ffffffffffffffffff7f")
    err = _raises(decode_value, KEY, raw)
    assert "varint" in err.reason and err.position == 14


def test_varint_beyond_32_bits_is_corrupt_so_reencoding_stays_exact() -> None:
    raw = V4_VALUE[:-1] + bytes.fromhex("01ffffffff1f00")  # tag = 2^33-1
    err = _raises(decode_value, KEY, raw)
    assert "32 bits" in err.reason and err.position == len(V4_VALUE)


def test_tagged_field_count_beyond_the_buffer_is_corrupt() -> None:
    err = _raises(decode_value, KEY, V4_VALUE[:-1] + b"\xff\xff\xff\xff\x07")
    assert "tagged-field count" in err.reason and err.position == len(V4_VALUE) - 1


# ---------------------------------------------------------------------------------------------
# Group metadata values
# ---------------------------------------------------------------------------------------------
GKEY = GroupMetadataKey("g")


def _member(version: int) -> MemberMetadata:
    return MemberMetadata(
        member_id="m-1",
        client_id="c",
        client_host="/10.0.0.1",
        session_timeout=10_000,
        subscription=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff",
        assignment=b"",
        rebalance_timeout=30_000 if version >= 1 else None,
        group_instance_id="i-1" if version >= 3 else None,
    )


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_roundtrips_every_version(version: int) -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m-1",
        members=(_member(version), _member(version)),
        current_state_timestamp=1_700_000_000_000 if version >= 2 else None,
        version=version,
    )
    raw = encode_value(value)
    assert raw is not None and raw[:2] == struct.pack(">h", version)
    assert decode_value(GKEY, raw) == value


def test_v0_member_rebalance_timeout_falls_back_to_session_timeout() -> None:
    member = _member(0)
    assert member.rebalance_timeout is None
    assert member.effective_rebalance_timeout == member.session_timeout


def test_group_array_count_of_int_max_fails_before_allocating() -> None:
    raw = bytes.fromhex("00030008") + b"consumer" + bytes.fromhex("00000001ffffffff00000000000000017fffffff")
    err = _raises(decode_value, GKEY, raw)
    assert "tried to allocate a collection of size 2147483647" in err.reason
    assert (err.part, err.record_type, err.version, err.position) == ("value", 2, 3, len(raw) - 4)


def test_negative_member_count_is_corrupt() -> None:
    raw = bytes.fromhex("00010008") + b"consumer" + bytes.fromhex("00000001fffffffffffffffe")
    err = _raises(decode_value, GKEY, raw)
    assert "negative count" in err.reason


def test_negative_bytes_length_in_a_member_is_corrupt() -> None:
    value = GroupMetadataValue(
        "consumer", 1, "range", "m-1", members=(_member(3),), current_state_timestamp=5, version=3
    )
    raw = bytearray(encode_value(value) or b"")
    sub_len_at = raw.index(b"\x00\x00\x00\x0a\x00\x00")  # subscription length 10
    raw[sub_len_at : sub_len_at + 4] = b"\xff\xff\xff\xff"
    err = _raises(decode_value, GKEY, bytes(raw))
    assert "non-nullable field subscription" in err.reason and err.position == sub_len_at


def test_flexible_group_value_keeps_member_and_top_level_tagged_fields() -> None:
    member = MemberMetadata("m", "c", "h", 1, b"", b"", rebalance_timeout=2, tagged_fields=((0, b"x"),))
    value = GroupMetadataValue(
        "", 0, None, None, members=(member,), current_state_timestamp=None, version=4, tagged_fields=((3, b"yz"),)
    )
    assert decode_value(GKEY, encode_value(value)) == value


def test_decode_record_pairs_key_and_value() -> None:
    record = decode_record(OFFSET_KEY, V3_VALUE)
    assert record == Record(
        OffsetCommitKey("group-id", "foo", 1), OffsetCommitValue(100, "metadata", 1234, leader_epoch=10)
    )
    assert record.group == "group-id"


def test_decoder_accepts_memoryview_and_bytearray() -> None:
    assert decode_key(memoryview(OFFSET_KEY)) == decode_key(OFFSET_KEY)
    assert decode_value(KEY, bytearray(V3_VALUE)) == decode_value(KEY, V3_VALUE)


def test_encoding_unrepresentable_values_raises_value_error() -> None:
    with pytest.raises(ValueError):
        encode_value(OffsetCommitValue(2**63, "", 0, version=3))
    with pytest.raises(ValueError):
        encode_value(OffsetCommitValue(0, "x" * 40_000, 0, version=3))
    with pytest.raises(ValueError):
        encode_value(GroupMetadataValue("consumer", 1, None, None, version=-1))
    with pytest.raises(ValueError):
        encode_key(OffsetCommitKey("\ud800", "t", 0))  # a lone surrogate is not UTF-8


def test_fast_constructor_fills_slots_and_respects_post_init() -> None:
    from dataclasses import dataclass

    from coordinator_core.codec.wire import fast_constructor

    @dataclass(frozen=True, slots=True)
    class Plain:
        a: int
        b: str = "x"

    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    assert fast_constructor(Plain)((1, "y")) == Plain(1, "y")
    with pytest.raises(ValueError):
        fast_constructor(Checked)((-1,))
