"""Kafka console-formatter JSON: per-version fields, sentinels, unknowns, and the rich view."""

from __future__ import annotations

import json

from coordinator_core.codec.consumer_protocol import encode_assignment, encode_subscription
from coordinator_core.codec.formatter import to_kafka_json, to_rich_json
from coordinator_core.codec.record_codec import decode_record, encode_key, encode_value
from coordinator_core.codec.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    Subscription,
    TopicPartitions,
    UnknownKey,
    UnknownValue,
)
from coordinator_core.partitioner import partition_for


def test_sentinels_print_as_minus_one_like_kafka() -> None:
    record = Record(
        OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "", 6, leader_epoch=None, expire_timestamp=None, version=1)
    )
    assert to_kafka_json(record)["value"]["data"] == {
        "offset": 5,
        "metadata": "",
        "commitTimestamp": 6,
        "expireTimestamp": -1,
    }
    record = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5, "", 6, leader_epoch=None, version=3))
    assert to_kafka_json(record)["value"]["data"]["leaderEpoch"] == -1


def test_group_fields_follow_the_version_and_schema_order() -> None:
    member = MemberMetadata("m", "c", "h", 10, b"\x00", b"", rebalance_timeout=None, group_instance_id=None)
    value = GroupMetadataValue("consumer", 1, None, None, members=(member,), current_state_timestamp=None, version=3)
    data = to_kafka_json(Record(GroupMetadataKey("g"), value))["value"]["data"]
    assert list(data) == ["protocolType", "generation", "protocol", "leader", "currentStateTimestamp", "members"]
    assert data["currentStateTimestamp"] == -1 and data["protocol"] is None
    assert data["members"][0] == {
        "memberId": "m",
        "groupInstanceId": None,
        "clientId": "c",
        "clientHost": "h",
        "rebalanceTimeout": -1,
        "sessionTimeout": 10,
        "subscription": "AA==",
        "assignment": "",
    }


def test_lenient_higher_versions_still_print_unknown() -> None:
    record = Record(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, version=6))
    assert to_kafka_json(record)["value"] == {"version": 6, "data": "unknown"}


def test_unknown_key_value_is_printed_as_offset_commit_when_it_parses_like_kafka() -> None:
    raw_value = encode_value(OffsetCommitValue(1, "", 2, version=2))
    assert raw_value is not None
    key = UnknownKey(version=3, raw=b"\x00\x03\x00\x01g", group="g", fields=(("group_id", "g"),))
    assert to_kafka_json(Record(key, UnknownValue(2, raw_value)))["value"] == {
        "version": 2,
        "data": {"offset": 1, "metadata": "", "commitTimestamp": 2},
    }
    assert to_kafka_json(Record(key, UnknownValue(2, b"\x00\x02\x00")))["value"] == {"version": 2, "data": "unknown"}
    assert to_kafka_json(Record(key, UnknownValue(None, b"\x00")))["value"] == {"version": None, "data": "unknown"}


def test_rich_view_adds_type_partition_and_parsed_blobs() -> None:
    sub = Subscription(topics=("orders",), version=1)
    asg = Assignment((TopicPartitions("orders", (0, 1)),))
    member = MemberMetadata("m", "c", "h", 10, encode_subscription(sub), encode_assignment(asg), rebalance_timeout=20)
    record = Record(
        GroupMetadataKey("billing"), GroupMetadataValue("consumer", 4, "range", "m", members=(member,), version=2)
    )
    rich = to_rich_json(record)
    assert rich["recordType"] == "GroupMetadata"
    assert rich["coordinatorPartition"] == partition_for("billing")
    (parsed,) = rich["consumerProtocol"]
    assert parsed["subscription"] == {
        "version": 1,
        "data": {"topics": ["orders"], "userData": None, "ownedPartitions": []},
    }
    assert parsed["assignment"]["data"]["assignedPartitions"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert parsed["errors"] == []
    # the Kafka part is untouched
    assert {k: rich[k] for k in ("key", "value")} == to_kafka_json(record)


def test_output_is_json_serialisable_and_roundtrips_through_the_codec() -> None:
    record = Record(OffsetCommitKey("g-é", "t", 3, version=0), None)
    text = json.dumps(to_kafka_json(record), separators=(",", ":"), ensure_ascii=False)
    assert text == '{"key":{"version":0,"data":{"group":"g-é","topic":"t","partition":3}},"value":null}'
    assert decode_record(encode_key(record.key), None) == record


def test_rich_view_shows_leniently_read_higher_versions() -> None:
    record = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "m", 2, leader_epoch=None, version=5))
    rich = to_rich_json(record)
    assert rich["value"] == {"version": 5, "data": "unknown"}
    assert rich["valueReadAsV4"] == {"offset": 1, "leaderEpoch": -1, "metadata": "m", "commitTimestamp": 2}
