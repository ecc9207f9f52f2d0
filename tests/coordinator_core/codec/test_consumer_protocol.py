"""The embedded consumer protocol: versions, quirks, and the never-raising member view."""

from __future__ import annotations

import struct

import pytest

from coordinator_core.codec.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    decode_subscription_tolerant,
    encode_assignment,
    encode_subscription,
    parse_member_blobs,
    subscribed_topics_v0,
)
from coordinator_core.codec.records import Assignment, MemberMetadata, Subscription, TopicPartitions
from coordinator_core.errors import CorruptRecordError

SUB_V3 = Subscription(
    topics=("a", "b"),
    user_data=None,
    owned_partitions=(TopicPartitions("a", (0, 2)),),
    generation_id=7,
    rack_id="rack-1",
    version=3,
)


def _member(subscription: bytes, assignment: bytes) -> MemberMetadata:
    return MemberMetadata("m", "c", "h", 10, subscription, assignment, rebalance_timeout=20)


@pytest.mark.parametrize("version", range(4))
def test_subscription_roundtrips_every_version(version: int) -> None:
    sub = Subscription(
        topics=("t1", "t2"),
        user_data=b"\x01" if version % 2 else None,
        owned_partitions=(TopicPartitions("t1", (3,)),) if version >= 1 else (),
        generation_id=5 if version >= 2 else None,
        rack_id="r" if version >= 3 else None,
        version=version,
    )
    blob = encode_subscription(sub)
    assert struct.unpack(">h", blob[:2])[0] == version
    assert decode_subscription(blob) == sub


def test_v3_subscription_bytes_follow_the_schema() -> None:
    blob = encode_subscription(SUB_V3)
    assert blob == bytes.fromhex(
        "000300000002000161000162ffffffff00000001000161000000020000000000000002000000070006" + b"rack-1".hex()
    )


def test_generation_id_minus_one_is_none() -> None:
    sub = Subscription(topics=(), version=2)
    blob = encode_subscription(sub)
    assert blob.endswith(b"\xff\xff\xff\xff")
    assert decode_subscription(blob).generation_id is None


def test_versions_above_the_highest_known_are_read_as_the_highest_known() -> None:
    blob = b"\x00\x09" + encode_subscription(SUB_V3)[2:] + b"future-field"
    sub = decode_subscription(blob)
    assert sub.version == 9 and sub.rack_id == "rack-1" and sub.topics == ("a", "b")
    asg = decode_assignment(b"\x00\x05" + encode_assignment(Assignment((TopicPartitions("x", (1,)),)))[2:])
    assert asg.version == 5 and asg.assigned_partitions == (TopicPartitions("x", (1,)),)


def test_negative_versions_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError) as info:
        decode_subscription(b"\xff\xff\x00\x00\x00\x00")
    assert info.value.part == "subscription"
    with pytest.raises(CorruptRecordError) as info:
        decode_assignment(b"\x80\x00")
    assert info.value.part == "assignment"


def test_v2_subscription_missing_generation_id_falls_back_to_v1_fields() -> None:
    v1 = encode_subscription(Subscription(topics=("t",), owned_partitions=(TopicPartitions("t", (0,)),), version=1))
    sub, note = decode_subscription_tolerant(b"\x00\x02" + v1[2:])
    assert note is not None and "version-1 fields" in note
    assert sub.version == 2 and sub.owned_partitions == (TopicPartitions("t", (0,)),) and sub.generation_id is None


def test_subscription_cut_inside_a_field_is_corrupt() -> None:
    blob = encode_subscription(SUB_V3)
    with pytest.raises(CorruptRecordError) as info:
        decode_subscription(blob[:-3])
    assert info.value.part == "subscription" and info.value.version == 3


def test_broker_rule_parses_only_the_v0_prefix() -> None:
    assert subscribed_topics_v0(encode_subscription(SUB_V3)) == frozenset({"a", "b"})
    assert subscribed_topics_v0(b"\x00\x01") is None
    assert subscribed_topics_v0(b"") is None
    # deserializeVersion reads any int16 (no check): version -1, no topics, null user data
    assert subscribed_topics_v0(b"\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff") == frozenset()


def test_parse_member_blobs_only_for_consumer_protocol_type() -> None:
    sub, asg = encode_subscription(SUB_V3), encode_assignment(Assignment((TopicPartitions("a", (0,)),), version=1))
    parsed = parse_member_blobs("consumer", _member(sub, asg))
    assert parsed.subscription == SUB_V3 and parsed.assignment is not None and parsed.errors == ()
    assert parse_member_blobs("connect", _member(sub, asg)) == (None, None, (), ())
    assert parse_member_blobs("", _member(sub, asg)).subscription is None


def test_unparseable_blobs_are_reported_not_raised() -> None:
    parsed = parse_member_blobs("consumer", _member(b"\x00\x01", b"\x01\x02"))
    assert parsed.subscription is None and parsed.assignment is None
    assert len(parsed.errors) == 2
    assert parsed.errors[0].startswith("corrupt subscription") and parsed.errors[1].startswith("corrupt assignment")


def test_empty_blobs_mean_not_yet_assigned_and_are_not_errors() -> None:
    parsed = parse_member_blobs("consumer", _member(encode_subscription(SUB_V3), b""))
    assert parsed.assignment is None and parsed.errors == ()


def test_assignment_partition_count_beyond_the_buffer_is_corrupt() -> None:
    blob = bytes.fromhex("0000000000010001617fffffff")
    with pytest.raises(CorruptRecordError) as info:
        decode_assignment(blob)
    assert info.value.position == 9 and "allocate" in info.value.reason
