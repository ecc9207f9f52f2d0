"""Golden vectors of Kafka 4's modern group records (KIP-848 consumer, KIP-932 share, KIP-1071
streams) and bytes checked by hand against Kafka's message JSON.

The vector files (``vectors/kip848/*.json``) were written by ``gen_kip848_vectors.py`` from
apache/kafka 4.4's ``group-coordinator/src/main/resources/common/message`` files with an
encoder independent of ``coordinator_core.codec.wire``; every case must decode (``modern=True``) to
exactly the console JSON stored with it and re-encode byte for byte.

How the hand-verified bytes were checked (``test_hand_verified_*``): each hex string below was
written field by field from the record's Key/Value JSON file — the 2-byte record type and plain
int16-length STRINGs of the key (non-flexible), then the 2-byte value version 0 and the value's
fields in file order with the flexible encodings (compact string/array length = N+1 as an
unsigned varint, 0 = null; a nullable struct is a presence byte -1/1; every struct ends with a
tagged-field section: count, then tag, size, bytes); the annotation next to each chunk names the
field. The test then checks the codec reads exactly those fields and writes the same bytes, and
that the generator's file holds the same bytes for the ``min`` case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coordinator_core.codec.formatter import to_kafka_json
from coordinator_core.codec.modern_records import (
    MODERN_TYPES,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue,
    Endpoint,
    GroupKey,
    GroupMemberKey,
    KeyValue,
    RegularExpressionKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    TopicIdName,
    TopicIdPartitions,
    TopicPartitionsInfo,
)
from coordinator_core.codec.record_codec import decode_record, encode_record
from coordinator_core.codec.records import Record, UnknownKey, UnknownValue
from coordinator_core.errors import CorruptRecordError

VECTOR_DIR = Path(__file__).resolve().parents[1] / "vectors" / "kip848"
FILES = sorted(VECTOR_DIR.glob("*.json"))


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in FILES:
        doc = json.loads(path.read_text())
        for case in doc["cases"]:
            out.append((f"{path.stem}:{case['name']}", {**case, "record_type": doc["record_type"]}))
    return out


CASES = _cases()


def _bytes(case: dict[str, Any]) -> tuple[bytes, bytes | None]:
    value = case["value_hex"]
    return bytes.fromhex(case["key_hex"]), None if value is None else bytes.fromhex(value)


def test_vectors_cover_every_modern_record_type_with_min_full_unknown_tags_and_tombstone() -> None:
    seen: dict[int, set[str]] = {}
    for _, case in CASES:
        seen.setdefault(case["record_type"], set()).add(case["name"])
    assert set(seen) == set(MODERN_TYPES)
    assert all(names == {"min", "full", "unknown_tags", "tombstone"} for names in seen.values())


@pytest.mark.parametrize(("name", "case"), CASES, ids=[n for n, _ in CASES])
def test_vector_decodes_to_kafkas_console_json(name: str, case: dict[str, Any]) -> None:
    key, value = _bytes(case)
    record = decode_record(key, value, modern=True)
    assert to_kafka_json(record) == case["kafka_json"]


@pytest.mark.parametrize(("name", "case"), CASES, ids=[n for n, _ in CASES])
def test_vector_reencodes_byte_for_byte(name: str, case: dict[str, Any]) -> None:
    key, value = _bytes(case)
    assert encode_record(decode_record(key, value, modern=True)) == (key, value)


@pytest.mark.parametrize(("name", "case"), CASES, ids=[n for n, _ in CASES])
def test_vector_stays_unsupported_on_the_default_decode_path(name: str, case: dict[str, Any]) -> None:
    """The batch/stream decode (modern=False) keeps routing these records to unsupported_records."""
    key, value = _bytes(case)
    record = decode_record(key, value)
    assert isinstance(record.key, UnknownKey)
    assert record.key.group == case["kafka_json"]["key"]["data"]["groupId"]
    assert value is None or isinstance(record.value, UnknownValue)


def test_unknown_tagged_fields_of_a_vector_are_kept_in_order_and_not_printed() -> None:
    doc = json.loads((VECTOR_DIR / "08-ConsumerGroupCurrentMemberAssignment.json").read_text())
    case = next(c for c in doc["cases"] if c["name"] == "unknown_tags")
    value = decode_record(*_bytes(case), modern=True).value
    assert isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
    assert value.tagged_fields == ((9, b"\x01\x02\x03"), (200, b""))
    assert value.assigned_partitions[0].tagged_fields == ((17, b"\xff"),)
    assert value.assigned_partitions[0].assignment_epochs is not None  # the known tag 0 is read
    full = next(c for c in doc["cases"] if c["name"] == "full")
    assert case["kafka_json"]["value"]["data"].keys() == full["kafka_json"]["value"]["data"].keys()


# ---------------------------------------------------------------------------------------------
# Hand-verified bytes: the ``min`` case of every record type
# ---------------------------------------------------------------------------------------------
GROUP = "00086772702dc3bc2d31"  # GroupId: STRING length 8, "grp-ü-1" (ü = c3 bc)
MEMBER = "000b6d656d6265722d37663361"  # MemberId: STRING length 11, "member-7f3a"
REGEX = "00096f72646572732d2e2a"  # RegularExpression: STRING length 9, "orders-.*"
V0 = "0000"  # value version 0
INT32_0, INT64_0 = "00000000", "0000000000000000"
NULL, EMPTY, NO_TAGS = "00", "01", "00"  # compact null; compact empty string/array; 0 tagged fields

HAND_MIN: dict[int, tuple[str, str]] = {
    3: ("0003" + GROUP, V0 + INT32_0 + NO_TAGS),  # Epoch; MetadataHash=0 is the default: not written
    4: ("0004" + GROUP, V0 + EMPTY + NO_TAGS),  # Topics []
    5: (
        "0005" + GROUP + MEMBER,
        V0
        + NULL
        + NULL  # InstanceId, RackId
        + EMPTY
        + EMPTY
        + EMPTY  # ClientId "", ClientHost "", SubscribedTopicNames []
        + NULL
        + INT32_0
        + NULL  # SubscribedTopicRegex, RebalanceTimeoutMs 0, ServerAssignor
        + "01000100",  # 1 tag: tag 0 ClassicMemberMetadata, 1 byte: presence varint 0 (null)
    ),  # a null tagged struct is written (it is not the empty struct), as the Kafka 4.4 broker does
    6: ("0006" + GROUP, V0 + INT32_0 + NO_TAGS),  # AssignmentEpoch; AssignmentTimestamp 0 = default
    7: ("0007" + GROUP + MEMBER, V0 + EMPTY + NO_TAGS),  # TopicPartitions []
    8: (
        "0008" + GROUP + MEMBER,
        V0
        + INT32_0
        + INT32_0
        + "00"  # MemberEpoch, PreviousMemberEpoch, State (int8)
        + EMPTY
        + EMPTY
        + NO_TAGS,
    ),  # AssignedPartitions [], PartitionsPendingRevocation []
    10: ("000a" + GROUP + MEMBER, V0 + NULL + EMPTY + EMPTY + EMPTY + NO_TAGS),  # RackId, ClientId, ClientHost, topics
    11: ("000b" + GROUP, V0 + INT32_0 + INT64_0 + NO_TAGS),  # Epoch, MetadataHash (untagged here)
    12: ("000c" + GROUP, V0 + INT32_0 + NO_TAGS),
    13: ("000d" + GROUP + MEMBER, V0 + EMPTY + NO_TAGS),
    14: ("000e" + GROUP + MEMBER, V0 + INT32_0 + INT32_0 + "00" + EMPTY + NO_TAGS),
    15: ("000f" + GROUP, V0 + EMPTY + EMPTY + EMPTY + NO_TAGS),  # Initializing, Initialized, Deleting
    16: ("0010" + GROUP + REGEX, V0 + EMPTY + INT64_0 + INT64_0 + NO_TAGS),  # Topics, Version, Timestamp
    17: ("0011" + GROUP, V0 + INT32_0 + INT64_0 + NO_TAGS),  # Epoch, MetadataHash; tags 0-3 at default
    19: (
        "0013" + GROUP + MEMBER,
        V0
        + NULL
        + NULL
        + EMPTY
        + EMPTY  # InstanceId, RackId, ClientId, ClientHost
        + INT32_0
        + INT32_0
        + EMPTY  # RebalanceTimeoutMs, TopologyEpoch, ProcessId ""
        + "ff"  # UserEndpoint: nullable struct, presence byte -1
        + EMPTY
        + NO_TAGS,
    ),  # ClientTags []
    20: ("0014" + GROUP, V0 + INT32_0 + NO_TAGS),
    21: ("0015" + GROUP + MEMBER, V0 + EMPTY * 3 + NO_TAGS),  # Active, Standby, Warmup
    22: ("0016" + GROUP + MEMBER, V0 + INT32_0 + INT32_0 + "00" + EMPTY * 6 + NO_TAGS),
    23: ("0017" + GROUP, V0 + INT32_0 + EMPTY + NO_TAGS),  # Epoch, Subtopologies []
}


def test_hand_verified_min_bytes_cover_every_record_type() -> None:
    assert set(HAND_MIN) == set(MODERN_TYPES)


@pytest.mark.parametrize("record_type", sorted(HAND_MIN))
def test_hand_verified_min_bytes_are_the_generated_vector_and_roundtrip(record_type: int) -> None:
    key_hex, value_hex = HAND_MIN[record_type]
    path = next(p for p in FILES if p.name.startswith(f"{record_type:02d}-"))
    case = next(c for c in json.loads(path.read_text())["cases"] if c["name"] == "min")
    assert (case["key_hex"], case["value_hex"]) == (key_hex, value_hex)
    record = decode_record(bytes.fromhex(key_hex), bytes.fromhex(value_hex), modern=True)
    assert record.key.group == "grp-\u00fc-1"
    assert record.key.version == record_type
    assert encode_record(record) == (bytes.fromhex(key_hex), bytes.fromhex(value_hex))


# ---------------------------------------------------------------------------------------------
# Hand-verified bytes with real content (tagged fields, nested and nullable structs)
# ---------------------------------------------------------------------------------------------
def _decode(key_hex: str, value_hex: str) -> Record:
    record = decode_record(bytes.fromhex(key_hex), bytes.fromhex(value_hex), modern=True)
    assert encode_record(record) == (bytes.fromhex(key_hex), bytes.fromhex(value_hex))
    return record


def test_hand_verified_current_assignment_with_tagged_assignment_epochs_is_read() -> None:
    value_hex = (
        V0
        + "0000000a"
        + "00000009"
        + "01"  # MemberEpoch 10, PreviousMemberEpoch 9, State 1
        + "02"  # AssignedPartitions: 1 element
        + "00000000000000000000000000000001"  # TopicId (Uuid.ONE_UUID)
        + "03"
        + "00000000"
        + "00000001"  # Partitions [0, 1]
        + "01"
        + "00"
        + "09"
        + "03"
        + "00000005"
        + "00000007"  # 1 tag: tag 0 AssignmentEpochs, 9 bytes: [5, 7]
        + EMPTY
        + NO_TAGS  # PartitionsPendingRevocation [], no top-level tags
    )
    record = _decode("0008" + GROUP + MEMBER, value_hex)
    assert record.key == GroupMemberKey("grp-\u00fc-1", "member-7f3a", 8)
    assert record.value == ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=10,
        previous_member_epoch=9,
        state=1,
        assigned_partitions=(TopicIdPartitions("AAAAAAAAAAAAAAAAAAAAAQ", (0, 1), assignment_epochs=(5, 7)),),
        partitions_pending_revocation=(),
    )


def test_hand_verified_member_metadata_with_classic_member_metadata_is_read() -> None:
    value_hex = (
        V0
        + NULL
        + "0272"
        + "0263"
        + "092f312e322e332e34"  # InstanceId null, RackId "r", ClientId "c", ClientHost "/1.2.3.4"
        + "03"
        + "0261"
        + "0262"  # SubscribedTopicNames: compact count 3 = 2 elements, "a", "b"
        + NULL
        + "0000ea60"
        + "08756e69666f726d"  # SubscribedTopicRegex null, RebalanceTimeoutMs 60000, ServerAssignor "uniform"
        + "01"
        + "00"
        + "11"  # 1 tag: tag 0 ClassicMemberMetadata, 17 bytes:
        + "01"
        + "0000afc8"  # presence varint 1, SessionTimeoutMs 45000
        + "02"
        + "0672616e6765"
        + "030001"
        + NO_TAGS  # SupportedProtocols: 1 x (Name "range", Metadata 00 01)
        + NO_TAGS  # end of ClassicMemberMetadata (the value's tagged section is the one holding tag 0)
    )
    record = _decode("0005" + GROUP + MEMBER, value_hex)
    value = record.value
    assert isinstance(value, ConsumerGroupMemberMetadataValue)
    assert (value.instance_id, value.rack_id, value.client_id, value.client_host) == (None, "r", "c", "/1.2.3.4")
    assert value.subscribed_topic_names == ("a", "b")
    assert (value.subscribed_topic_regex, value.rebalance_timeout_ms, value.server_assignor) == (None, 60000, "uniform")
    assert value.classic_member_metadata is not None
    assert value.classic_member_metadata.session_timeout_ms == 45000
    assert [(p.name, p.metadata) for p in value.classic_member_metadata.supported_protocols] == [("range", b"\x00\x01")]


def test_hand_verified_regular_expression_record_is_read() -> None:
    value_hex = V0 + "03" + "0261" + "0262" + "000000000000002a" + "0000018bcfe56800" + NO_TAGS
    record = _decode("0010" + GROUP + REGEX, value_hex)
    assert record.key == RegularExpressionKey("grp-\u00fc-1", "orders-.*")
    assert record.value == ConsumerGroupRegularExpressionValue(("a", "b"), image_version=42, timestamp=0x18BCFE56800)


def test_hand_verified_streams_metadata_with_its_four_tags_is_read() -> None:
    value_hex = (
        V0
        + "00000003"
        + "0000000000000010"  # Epoch 3, MetadataHash 16
        + "03"  # 3 tagged fields, in tag order:
        + "00"
        + "04"
        + "00000002"  # tag 0 ValidatedTopologyEpoch = 2
        + "01"
        + "06"
        + "02"
        + "026b"
        + "0276"
        + NO_TAGS  # tag 1 LastAssignmentConfigs [{"k": "v"}]
        + "02"
        + "04"
        + "fffffffe"  # tag 2 StoredDescriptionTopologyEpoch = -2 (tag 3 absent: -1)
    )
    record = _decode("0011" + GROUP, value_hex)
    assert record.key == GroupKey("grp-\u00fc-1", 17)
    assert record.value == StreamsGroupMetadataValue(
        epoch=3,
        metadata_hash=16,
        validated_topology_epoch=2,
        last_assignment_configs=(KeyValue("k", "v"),),
        stored_description_topology_epoch=-2,
        failed_description_topology_epoch=None,
    )


def test_hand_verified_streams_member_with_user_endpoint_is_read() -> None:
    value_hex = (
        V0
        + NULL
        + NULL
        + "0263"
        + "0268"  # InstanceId, RackId null; ClientId "c", ClientHost "h"
        + "0000012c"
        + "00000005"
        + "0270"  # RebalanceTimeoutMs 300, TopologyEpoch 5, ProcessId "p"
        + "01"
        + "0268"
        + "2384"
        + NO_TAGS  # UserEndpoint present: Host "h", Port 9092 (uint16)
        + "02"
        + "026b"
        + "0276"
        + NO_TAGS  # ClientTags [{"k": "v"}]
        + NO_TAGS
    )
    record = _decode("0013" + GROUP + MEMBER, value_hex)
    assert record.value == StreamsGroupMemberMetadataValue(
        instance_id=None,
        rack_id=None,
        client_id="c",
        client_host="h",
        topology_epoch=5,
        process_id="p",
        user_endpoint=Endpoint("h", 9092),
        client_tags=(KeyValue("k", "v"),),
        rebalance_timeout_ms=300,
    )


# ---------------------------------------------------------------------------------------------
# Kafka's own expectations: tools' ShareGroupMessageFormatterTest (apache/kafka 4.4) builds these
# records with the generated classes and asserts the console JSON below; the same records built
# here must print the same JSON.
# ---------------------------------------------------------------------------------------------
ONE_UUID = "AAAAAAAAAAAAAAAAAAAAAQ"
KAFKA_SHARE_FORMATTER_CASES: list[tuple[Any, Any, str]] = [
    (
        GroupMemberKey("group-id", "member-id", 10),
        ShareGroupMemberMetadataValue("rack-a", "client-id", "1.2.3.4", ("topic",)),
        '{"key":{"type":10,"data":{"groupId":"group-id","memberId":"member-id"}},"value":{"version":0,'
        '"data":{"rackId":"rack-a","clientId":"client-id","clientHost":"1.2.3.4","subscribedTopicNames":["topic"]}}}',
    ),
    (
        GroupMemberKey("group-id", "member-id", 10),
        None,
        '{"key":{"type":10,"data":{"groupId":"group-id","memberId":"member-id"}},"value":null}',
    ),
    (
        GroupKey("group-id", 11),
        ShareGroupMetadataValue(epoch=1, metadata_hash=1),
        '{"key":{"type":11,"data":{"groupId":"group-id"}},"value":{"version":0,"data":{"epoch":1,"metadataHash":1}}}',
    ),
    (
        GroupKey("group-id", 12),
        ShareGroupTargetAssignmentMetadataValue(assignment_epoch=1),
        '{"key":{"type":12,"data":{"groupId":"group-id"}},"value":{"version":0,"data":{"assignmentEpoch":1}}}',
    ),
    (
        GroupMemberKey("group-id", "member-id", 13),
        ShareGroupTargetAssignmentMemberValue((TopicIdPartitions(ONE_UUID, (0, 1)),)),
        '{"key":{"type":13,"data":{"groupId":"group-id","memberId":"member-id"}},"value":{"version":0,'
        '"data":{"topicPartitions":[{"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":[0,1]}]}}}',
    ),
    (
        GroupMemberKey("group-id", "member-id", 14),
        ShareGroupCurrentMemberAssignmentValue(1, 0, 0, (TopicIdPartitions(ONE_UUID, (0, 1)),)),
        '{"key":{"type":14,"data":{"groupId":"group-id","memberId":"member-id"}},"value":{"version":0,'
        '"data":{"memberEpoch":1,"previousMemberEpoch":0,"state":0,'
        '"assignedPartitions":[{"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":[0,1]}]}}}',
    ),
    (
        GroupKey("group-id", 15),
        ShareGroupStatePartitionMetadataValue(
            (TopicPartitionsInfo(ONE_UUID, "topic", (1,)),),
            (TopicPartitionsInfo(ONE_UUID, "topic", (0,)),),
            (TopicIdName(ONE_UUID, "topic"),),
        ),
        '{"key":{"type":15,"data":{"groupId":"group-id"}},"value":{"version":0,"data":{'
        '"initializingTopics":[{"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","topicName":"topic","partitions":[1]}],'
        '"initializedTopics":[{"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","topicName":"topic","partitions":[0]}],'
        '"deletingTopics":[{"topicId":"AAAAAAAAAAAAAAAAAAAAAQ","topicName":"topic"}]}}}',
    ),
]


@pytest.mark.parametrize(("key", "value", "expected"), KAFKA_SHARE_FORMATTER_CASES)
def test_share_records_print_what_kafkas_share_group_formatter_test_expects(
    key: Any, value: Any, expected: str
) -> None:
    record = decode_record(*encode_record(Record(key, value)), modern=True)
    assert json.dumps(to_kafka_json(record), separators=(",", ":")) == expected


# Kafka's own expectations, tools' DumpLogSegmentsTest.testOffsetsMessageParser (apache/kafka 4.4):
# ``kafka-dump-log --offsets-decoder`` prints the same key/value data (type and version as strings).
def test_consumer_group_metadata_prints_the_data_dump_log_segments_test_expects() -> None:
    record = decode_record(
        *encode_record(Record(GroupKey("group", 3), ConsumerGroupMetadataValue(epoch=10))), modern=True
    )
    printed = to_kafka_json(record)
    assert json.dumps(printed["key"]["data"], separators=(",", ":")) == '{"groupId":"group"}'
    assert json.dumps(printed["value"]["data"], separators=(",", ":")) == '{"epoch":10}'
    tombstone = decode_record(encode_record(Record(GroupKey("group", 3), None))[0], None, modern=True)
    assert to_kafka_json(tombstone) == {"key": {"type": 3, "data": {"groupId": "group"}}, "value": None}


def test_a_member_metadata_value_under_a_group_metadata_key_is_an_error_as_in_dump_log_segments_test() -> None:
    """Kafka: "Could not read record with version 0 from value's buffer due to: Error reading
    byte array of 536870911 byte(s): only 1 byte(s) available." Ours: the same size, the same overrun."""
    empty_member = ConsumerGroupMemberMetadataValue(  # ``new ConsumerGroupMemberMetadataValue()``: "" and -1
        instance_id="",
        rack_id="",
        client_id="",
        client_host="",
        subscribed_topic_names=(),
        subscribed_topic_regex="",
        server_assignor="",
        classic_member_metadata=ClassicMemberMetadata(0, ()),  # Kafka's constructor: the empty struct
    )
    _, value = encode_record(Record(GroupMemberKey("group", "m", 5), empty_member))
    # the bytes Kafka 4.4's own writer gives ``new ConsumerGroupMemberMetadataValue()`` (checked with
    # MessageUtil.toVersionPrefixedByteBuffer from kafka-group-coordinator-4.4.0.jar): no tag written
    assert value == bytes.fromhex("0000010101010101ffffffff0100")
    with pytest.raises(CorruptRecordError, match="tagged field 1 size 536870911 exceeds the 1 bytes left"):
        decode_record(encode_record(Record(GroupKey("group", 3), None))[0], value, modern=True)
