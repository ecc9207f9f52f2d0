"""Records a real Kafka 4.4.0 broker wrote into ``__consumer_offsets`` (issue 31), with what
Kafka's own ``DumpLogSegments --offsets-decoder`` printed for them: each must decode to exactly
those fields, print as Kafka prints it and re-encode byte for byte.

Found by the real-broker tests (``tests/broker/test_kafka4_*.py``), kept here as small hex
vectors (no broker needed):
- a consumer-protocol member's ConsumerGroupMemberMetadataValue ends with the tagged section
  ``01 00 01 00``: Kafka writes the null ClassicMemberMetadata (tag 0) explicitly and prints
  ``"classicMemberMetadata":null``; its generated reader starts the field at the empty struct,
  so a value WITHOUT the tag is a classic member with no protocols to Kafka (bytes of
  ``new ConsumerGroupMemberMetadataValue()`` from Kafka 4.4's own writer);
- OffsetCommitValue v4 carries the tagged TopicId (tag 0), printed as ``topicId``;
- librdkafka's commit metadata reaches the broker with its C string's NUL terminator.
"""

from __future__ import annotations

import json

from coordinator_core.codec.formatter import to_kafka_json
from coordinator_core.codec.modern_records import ClassicMemberMetadata, ConsumerGroupMemberMetadataValue
from coordinator_core.codec.record_codec import decode_record, encode_record, offset_commit_topic_id
from coordinator_core.codec.records import OffsetCommitValue

MEMBER_KEY = "00050002673100167a4561654c4e4d5a52644b72664149335a5062556977"
MEMBER_VALUE = "000000000363310b2f3132372e302e302e310203743101000493e00001000100"
MEMBER_DUMP = (
    '{"type":"5","data":{"groupId":"g1","memberId":"zEaeLNMZRdKrfAI3ZPbUiw"}} payload: {"version":"0","data":'
    '{"instanceId":null,"rackId":null,"clientId":"c1","clientHost":"/127.0.0.1","subscribedTopicNames":["t1"],'
    '"subscribedTopicRegex":"","rebalanceTimeoutMs":300000,"serverAssignor":null,"classicMemberMetadata":null}}'
)
COMMIT_KEY = "0001000267310002743100000003"
COMMIT_VALUE = "00040000000000000014ffffffff066331233400000001a2230a94a3010010a4f4543092ae4078a18332674bc31227"
COMMIT_DUMP = (
    '{"type":"1","data":{"group":"g1","topic":"t1","partition":3}} payload: {"version":"4","data":{"offset":20,'
    '"leaderEpoch":-1,"metadata":"c1#4\\u0000","commitTimestamp":1795884225699,"topicId":"pPRUMJKuQHihgzJnS8MSJw"}}'
)


def _kafka(dump: str) -> tuple[dict[str, object], dict[str, object]]:
    key_text, _, payload_text = dump.partition(" payload: ")
    key, payload = json.loads(key_text), json.loads(payload_text)
    return key, payload


def test_a_consumer_protocol_member_prints_its_null_classic_metadata_and_reencodes_exactly() -> None:
    key, value = bytes.fromhex(MEMBER_KEY), bytes.fromhex(MEMBER_VALUE)
    record = decode_record(key, value, modern=True)
    assert isinstance(record.value, ConsumerGroupMemberMetadataValue)
    assert record.value.classic_member_metadata is None and record.value.subscribed_topic_regex == ""
    kafka_key, kafka_value = _kafka(MEMBER_DUMP)
    printed = to_kafka_json(record)
    assert printed["key"]["data"] == kafka_key["data"] and printed["key"]["type"] == int(str(kafka_key["type"]))
    assert printed["value"]["data"] == kafka_value["data"]
    assert list(printed["value"]["data"]) == list(kafka_value["data"])  # Kafka's field order
    assert encode_record(record) == (key, value)


def test_a_member_value_without_the_tag_is_a_classic_member_as_kafka_reads_it() -> None:
    # ``new ConsumerGroupMemberMetadataValue()`` written by Kafka 4.4 itself: no tagged field
    value = bytes.fromhex("0000010101010101ffffffff0100")
    record = decode_record(bytes.fromhex(MEMBER_KEY), value, modern=True)
    assert isinstance(record.value, ConsumerGroupMemberMetadataValue)
    assert record.value.classic_member_metadata == ClassicMemberMetadata(0, ())
    assert "classicMemberMetadata" not in to_kafka_json(record)["value"]["data"]
    assert encode_record(record)[1] == value


def test_an_offset_commit_v4_prints_its_topic_id_and_the_clients_nul_terminated_metadata() -> None:
    key, value = bytes.fromhex(COMMIT_KEY), bytes.fromhex(COMMIT_VALUE)
    record = decode_record(key, value, modern=True)
    assert isinstance(record.value, OffsetCommitValue)
    assert record.value.metadata == "c1#4\x00" and offset_commit_topic_id(record.value) == "pPRUMJKuQHihgzJnS8MSJw"
    kafka_key, kafka_value = _kafka(COMMIT_DUMP)
    printed = to_kafka_json(record)
    assert printed["key"]["data"] == kafka_key["data"]
    assert printed["value"] == {"version": 4, "data": kafka_value["data"]}
    assert list(printed["value"]["data"]) == list(kafka_value["data"])
    assert encode_record(record) == (key, value)


def test_a_consumer_groups_topics_are_named_by_its_commits_topic_ids() -> None:
    """Kafka 4.1+ writes no record naming a consumer group's topics (assignments hold topic ids):
    the commits' TopicId (the real commit above: t1 = pPRUMJKuQHihgzJnS8MSJw) names them, as
    ``kafka-consumer-groups --describe --members`` shows ``t1:0,1,2``."""
    from coordinator_core.codec.modern_records import (
        ConsumerGroupCurrentMemberAssignmentValue,
        ConsumerGroupMetadataValue,
        ConsumerGroupTargetAssignmentMemberValue,
        ConsumerGroupTargetAssignmentMetadataValue,
        GroupKey,
        GroupMemberKey,
        TopicIdPartitions,
    )
    from coordinator_core.codec.records import LogRecord
    from coordinator_core.loader.replay import new_snapshot, replay

    member = decode_record(bytes.fromhex(MEMBER_KEY), bytes.fromhex(MEMBER_VALUE), modern=True)
    commit = decode_record(bytes.fromhex(COMMIT_KEY), bytes.fromhex(COMMIT_VALUE), modern=True)
    mid, tid = "zEaeLNMZRdKrfAI3ZPbUiw", "pPRUMJKuQHihgzJnS8MSJw"
    parts = (TopicIdPartitions(tid, (0, 1, 2)),)
    records = [
        (member.key, member.value),
        (GroupKey("g1", 3), ConsumerGroupMetadataValue(epoch=2)),
        (GroupMemberKey("g1", mid, 7), ConsumerGroupTargetAssignmentMemberValue(parts)),
        (GroupKey("g1", 6), ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=2)),
        (GroupMemberKey("g1", mid, 8), ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, parts, ())),
        (commit.key, commit.value),
    ]
    log = [LogRecord(0, i, 1_000 + i, k, v) for i, (k, v) in enumerate(records)]
    snap = replay(new_snapshot("g1"), log).snapshot
    assert snap.consumer is not None and snap.consumer.topic_label(tid) == "t1"
    row = snap.to_state_row(num_partitions=3)
    assert [(p["topic"], p["partition"]) for p in row["members"][0]["assigned_partitions"]] == [
        ("t1", 0),
        ("t1", 1),
        ("t1", 2),
    ]
