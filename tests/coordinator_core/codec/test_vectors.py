"""Every golden vector of ``docs/spec/vectors/`` (spec §11) through the core codecs.

Formatter vectors are compared exactly (values AND field order, as Kafka's JSON prints them);
real captures are compared with their source's rendering; negative vectors must raise the
typed error; every full valid record must re-encode to its exact bytes.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

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
from coordinator_core.codec.formatter import to_kafka_json
from coordinator_core.codec.record_codec import decode_key, decode_record, decode_value, encode_key, encode_value
from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    UnknownValue,
)
from coordinator_core.errors import CorruptRecordError
from coordinator_core.partitioner import java_string_hash, kafka_abs, partition_for

VECTORS = Path(__file__).resolve().parents[3] / "docs" / "spec" / "vectors"


def _load(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((VECTORS / name).read_text())
    return data


def _by_id(name: str) -> dict[str, dict[str, Any]]:
    return {v["id"]: v for v in _load(name)}


def _hex(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)


def _ordered(obj: Any) -> Any:
    """Dicts as lists of (key, value) pairs so that comparison also checks field order."""
    if isinstance(obj, dict):
        return [(k, _ordered(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [_ordered(v) for v in obj]
    return obj


# ---------------------------------------------------------------------------------------------
# Kafka formatter tests
# ---------------------------------------------------------------------------------------------
FORMATTER = _load("kafka_formatter_tests.json")
FORMATTER_JSON = [
    v for v in FORMATTER if isinstance(v["expected"].get("key"), dict) and "version" in v["expected"]["key"]
]
FULL_VALID = [v for v in FORMATTER if v["key_hex"]]


@pytest.mark.parametrize("vec", FORMATTER_JSON, ids=lambda v: v["id"])
def test_formatter_json_matches_kafka_exactly(vec: dict[str, Any]) -> None:
    record = decode_record(bytes.fromhex(vec["key_hex"]), _hex(vec["value_hex"]))
    got = to_kafka_json(record)
    assert _ordered(got) == _ordered(vec["expected"])
    # and the compact text, as the console prints it
    assert json.dumps(got, separators=(",", ":")) == json.dumps(vec["expected"], separators=(",", ":"))


@pytest.mark.parametrize("vec", FULL_VALID, ids=lambda v: v["id"])
def test_formatter_vector_bytes_reencode_exactly(vec: dict[str, Any]) -> None:
    key_bytes = bytes.fromhex(vec["key_hex"])
    value_bytes = _hex(vec["value_hex"])
    record = decode_record(key_bytes, value_bytes)
    assert encode_key(record.key) == key_bytes
    assert encode_value(record.value) == value_bytes
    assert decode_record(encode_key(record.key), encode_value(record.value)) == record


def test_offset_key_v1_vector_restates_the_object() -> None:
    vec = _by_id("kafka_formatter_tests.json")["kafka-formatter-offset-key-v1"]
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    assert record.key == OffsetCommitKey(**vec["expected"]["key"], version=1)
    assert to_kafka_json(record)["value"] == vec["expected"]["value"]


@pytest.mark.parametrize(
    "vec",
    [v for v in FORMATTER if v["id"].startswith("kafka-offsettest-") or v["id"].startswith("kafka-derived-")],
    ids=lambda v: v["id"],
)
def test_restated_group_objects_match_the_formatter_data(vec: dict[str, Any]) -> None:
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    value_json = to_kafka_json(record)["value"]
    assert value_json is not None
    assert value_json["data"] == vec["expected"]


def test_unknown_value_versions_are_reported_and_lenient_mode_reads_them_with_v4_layout() -> None:
    vecs = _by_id("kafka_formatter_tests.json")
    vec = vecs["kafka-formatter-offset-value-unknown-version-5"]
    key = decode_key(bytes.fromhex(vec["key_hex"]))
    raw = bytes.fromhex(vec["value_hex"])
    assert decode_value(key, raw) == UnknownValue(version=5, raw=raw)
    lenient = decode_value(key, raw, lenient=True)
    assert lenient == OffsetCommitValue(
        offset=100, metadata="metadata", commit_timestamp=1234, leader_epoch=10, version=5
    )
    assert encode_value(lenient) == raw
    # the formatter still prints "unknown" for a version it does not handle
    assert to_kafka_json(decode_record(bytes.fromhex(vec["key_hex"]), raw, lenient=True))["value"] == {
        "version": 5,
        "data": "unknown",
    }
    group = vecs["kafka-formatter-group-unknown-version-10"]
    gkey = GroupMetadataKey("group-id")
    gvalue = decode_value(gkey, bytes.fromhex(group["value_hex"]), lenient=True)
    assert isinstance(gvalue, GroupMetadataValue) and gvalue.version == 10
    assert gvalue.members[0].group_instance_id == "group-instance-1"
    assert encode_value(gvalue) == bytes.fromhex(group["value_hex"])


def test_unknown_record_types_are_named_with_their_string_fields() -> None:
    vec = _by_id("kafka_formatter_tests.json")["kafka-formatter-offset-unknown-key-version-5"]
    key = decode_key(bytes.fromhex(vec["key_hex"]))
    assert isinstance(key, UnknownKey)
    assert key.type_name == "ConsumerGroupMemberMetadata"
    assert key.group == "group-id"
    assert key.fields[0] == ("group_id", "group-id")
    assert encode_key(key) == bytes.fromhex(vec["key_hex"])


# ---------------------------------------------------------------------------------------------
# Real captures (kafkesc/konsumer_offsets): expected is a Rust Debug rendering
# ---------------------------------------------------------------------------------------------
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<ident>[A-Za-z_]\w*)|(?P<sym>[{}\[\]:,]))')


def parse_rust_debug(text: str) -> Any:
    """Parse Rust's ``{:#?}`` output (structs, vecs, strings, ints) into dicts/lists."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m, text[pos : pos + 20]
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    i = 0

    def value() -> Any:
        nonlocal i
        kind, tok = tokens[i]
        i += 1
        if kind == "str":
            return json.loads(tok)
        if kind == "num":
            return int(tok)
        if tok == "[":
            items = []
            while tokens[i][1] != "]":
                items.append(value())
                if tokens[i][1] == ",":
                    i += 1
            i += 1
            return items
        if kind == "ident":
            if tok in ("true", "false"):
                return tok == "true"
            assert tokens[i][1] == "{"
            i += 1
            obj: dict[str, Any] = {"__type__": tok}
            while tokens[i][1] != "}":
                name = tokens[i][1]
                assert tokens[i + 1][1] == ":"
                i += 2
                obj[name] = value()
                if tokens[i][1] == ",":
                    i += 1
            i += 1
            return obj
        raise AssertionError(tok)

    return value()


def _or_empty(s: str | None) -> str:
    return "" if s is None else s  # konsumer_offsets renders null strings as ""


def _or_minus_one(n: int | None) -> int:
    return -1 if n is None else n


REAL = _load("konsumer_offsets_real.json")


@pytest.mark.parametrize("vec", REAL, ids=lambda v: v["id"])
def test_real_captured_records_decode_like_the_source_and_reencode_exactly(vec: dict[str, Any]) -> None:
    exp = parse_rust_debug(vec["expected_source_rendering"])
    key_bytes, value_bytes = bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"])
    record = decode_record(key_bytes, value_bytes)
    assert encode_key(record.key) == key_bytes
    assert encode_value(record.value) == value_bytes
    key, value = record.key, record.value
    assert key.version == exp["message_version"]
    assert key.group == exp["group"]
    assert record.is_tombstone == exp["is_tombstone"]
    if exp["__type__"] == "OffsetCommit":
        assert isinstance(key, OffsetCommitKey) and isinstance(value, OffsetCommitValue)
        assert (key.topic, key.partition) == (exp["topic"], exp["partition"])
        assert value.version == exp["schema_version"]
        assert value.offset == exp["offset"]
        assert _or_minus_one(value.leader_epoch) == exp["leader_epoch"]
        assert value.metadata == exp["metadata"]
        assert value.commit_timestamp == exp["commit_timestamp"]
        assert _or_minus_one(value.expire_timestamp) == exp["expire_timestamp"]
        return
    assert isinstance(key, GroupMetadataKey) and isinstance(value, GroupMetadataValue)
    assert value.version == exp["schema_version"]
    assert value.protocol_type == exp["protocol_type"]
    assert value.generation == exp["generation"]
    assert _or_empty(value.protocol) == exp["protocol"]
    assert _or_empty(value.leader) == exp["leader"]
    assert _or_minus_one(value.current_state_timestamp) == exp["current_state_timestamp"]
    assert len(value.members) == len(exp["members"])
    for member, em in zip(value.members, exp["members"]):
        assert member.member_id == em["id"]
        assert _or_empty(member.group_instance_id) == em["group_instance_id"]
        assert (member.client_id, member.client_host) == (em["client_id"], em["client_host"])
        assert (member.rebalance_timeout, member.session_timeout) == (em["rebalance_timeout"], em["session_timeout"])
        parsed = parse_member_blobs(value.protocol_type, member)
        assert parsed.errors == () and parsed.notes == ()
        sub, asg = parsed.subscription, parsed.assignment
        assert sub is not None and asg is not None
        es, ea = em["subscription"], em["assignment"]
        assert sub.version == es["schema_version"]
        assert list(sub.topics) == es["subscribed_topics"]
        assert list(sub.user_data or b"") == es["user_data"]
        assert [(tp.topic, list(tp.partitions)) for tp in sub.owned_partitions] == [
            (tp["topic"], tp["partitions"]) for tp in es["owned_topic_partitions"]
        ]
        assert _or_minus_one(sub.generation_id) == es["generation_id"]
        assert _or_empty(sub.rack_id) == es["rack_id"]
        assert asg.version == ea["schema_version"]
        assert [(tp.topic, list(tp.partitions)) for tp in asg.assigned_partitions] == [
            (tp["topic"], tp["partitions"]) for tp in ea["assigned_topic_partitions"]
        ]
        assert list(asg.user_data or b"") == ea["user_data"]
        assert encode_subscription(sub) == member.subscription
        assert encode_assignment(asg) == member.assignment


def test_real_empty_group_has_null_protocol_and_leader_on_the_wire() -> None:
    vec = _by_id("konsumer_offsets_real.json")["konsumer-offsets-group_metadata-05"]
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    assert isinstance(record.value, GroupMetadataValue)
    assert (record.value.protocol, record.value.leader, record.value.members) == (None, None, ())


# ---------------------------------------------------------------------------------------------
# linkedin/Burrow
# ---------------------------------------------------------------------------------------------
BURROW = _by_id("burrow.json")


def test_burrow_offset_key1_value0() -> None:
    vec = BURROW["burrow-offset-key1-value0"]
    exp = vec["expected"]
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    assert record.key == OffsetCommitKey(exp["group"], exp["topic"], exp["partition"], version=1)
    assert isinstance(record.value, OffsetCommitValue)
    assert (record.value.offset, record.value.commit_timestamp, record.value.version) == (
        exp["offset"],
        exp["timestamp"],
        0,
    )
    assert encode_value(record.value) == bytes.fromhex(vec["value_hex"])


def test_burrow_group_value1_keeps_empty_subscription_and_parses_assignment() -> None:
    vec = BURROW["burrow-group-key2-value1"]
    exp = vec["expected"]
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    assert record.key == GroupMetadataKey(exp["group"])
    value = record.value
    assert isinstance(value, GroupMetadataValue) and value.version == 1
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "consumer",
        1,
        "testprotocol",
        "testleader",
    )
    (member,) = value.members
    assert (member.client_id, member.client_host) == (exp["client_id"], exp["client_host"])
    assert (member.rebalance_timeout, member.session_timeout) == (4, 8)
    assert member.subscription == b""
    parsed = parse_member_blobs(value.protocol_type, member)
    assert parsed.subscription is None and parsed.errors == ()
    assert parsed.assignment is not None
    (tp,) = parsed.assignment.assigned_partitions
    assert (tp.topic, tp.partitions) == (exp["assigned_topic"], (exp["assigned_partition"],))
    assert encode_value(value) == bytes.fromhex(vec["value_hex"])


def test_burrow_group_value2_header_and_member_blobs() -> None:
    vec = BURROW["burrow-group-value2-body"]
    exp = vec["expected"]
    value = decode_value(GroupMetadataKey("g"), bytes.fromhex(vec["value_hex"]))
    assert isinstance(value, GroupMetadataValue)
    assert (
        value.version,
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        value.current_state_timestamp,
    ) == (
        exp["value_version"],
        exp["protocol_type"],
        exp["generation"],
        exp["protocol"],
        exp["leader"],
        exp["current_state_timestamp"],
    )
    (member,) = value.members
    assert (member.client_id, member.client_host, member.rebalance_timeout, member.session_timeout) == (
        "tMember",
        "/172.18.0.1",
        30000,
        30000,
    )
    assert decode_subscription(member.subscription).topics == ("testtopic",)
    (tp,) = decode_assignment(member.assignment).assigned_partitions
    assert (tp.topic, tp.partitions) == ("testtopic", tuple(range(9)))
    assert encode_value(value) == bytes.fromhex(vec["value_hex"])


def test_burrow_group_value3_null_instance_id_and_truncated_v1_subscription_tolerated() -> None:
    vec = BURROW["burrow-group-value3-body"]
    exp = vec["expected"]
    em = exp["member (from TestKafkaClient_decodeMetadataMemberV3, same member bytes)"]
    value = decode_value(GroupMetadataKey("g"), bytes.fromhex(vec["value_hex"]))
    assert isinstance(value, GroupMetadataValue)
    assert (
        value.version,
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        value.current_state_timestamp,
    ) == (
        exp["value_version"],
        exp["protocol_type"],
        exp["generation"],
        exp["protocol"],
        exp["leader"],
        exp["current_state_timestamp"],
    )
    (member,) = value.members
    assert member.member_id == em["member_id"]
    assert member.group_instance_id is None  # 0xFFFF on the wire
    assert (member.client_id, member.client_host, member.session_timeout) == (
        em["client_id"],
        em["client_host"],
        em["session_timeout"],
    )
    assert member.rebalance_timeout is None  # -1 on the wire
    assert member.effective_rebalance_timeout == em["session_timeout"]
    parsed = parse_member_blobs(value.protocol_type, member)
    assert parsed.errors == ()
    assert parsed.subscription is not None and parsed.subscription.version == 1
    assert parsed.subscription.topics == ("topic1",) and parsed.subscription.owned_partitions == ()
    assert len(parsed.notes) == 1 and "version-0 fields" in parsed.notes[0]
    assert parsed.assignment is not None
    assert {tp.topic: list(tp.partitions) for tp in parsed.assignment.assigned_partitions} == em["assignment"]
    assert encode_value(value) == bytes.fromhex(vec["value_hex"])


def test_burrow_offset_value3_body() -> None:
    vec = BURROW["burrow-offset-value3-body"]
    data = vec["value_body_version"].to_bytes(2, "big") + bytes.fromhex(vec["value_body_hex"])
    value = decode_value(OffsetCommitKey("g", "t", 0), data)
    assert isinstance(value, OffsetCommitValue)
    assert (value.offset, value.commit_timestamp) == (vec["expected"]["offset"], vec["expected"]["timestamp"])
    assert (value.leader_epoch, value.metadata) == (0, "testdata")


@pytest.mark.parametrize("key_version", [0, 1])
def test_burrow_offset_key_body(key_version: int) -> None:
    vec = BURROW["burrow-offset-key-body-partition11"]
    data = key_version.to_bytes(2, "big") + bytes.fromhex(vec["key_body_hex"])
    assert decode_key(data) == OffsetCommitKey(**vec["expected"], version=key_version)


def test_burrow_nonconformant_v4_value_without_tagged_field_byte_is_rejected() -> None:
    vec = BURROW["burrow-offset-key1-value4-nonconformant"]
    key = decode_key(b"\x00\x01" + bytes.fromhex(vec["key_body_hex"]))
    raw = bytes.fromhex(vec["value_hex"])
    with pytest.raises(CorruptRecordError) as info:
        decode_value(key, raw)
    err = info.value
    assert (err.part, err.record_type, err.version, err.position) == ("value", 1, 4, len(raw))
    # the conformant bytes (one 0x00 tagged-field count more) decode to what Burrow expects
    value = decode_value(key, raw + b"\x00")
    assert isinstance(value, OffsetCommitValue)
    assert (value.offset, value.commit_timestamp) == (vec["expected"]["offset"], vec["expected"]["timestamp"])


def test_burrow_assignment_v0_body() -> None:
    vec = BURROW["burrow-assignment-v0-body"]
    asg = decode_assignment(b"\x00\x00" + bytes.fromhex(vec["assignment_body_hex"]))
    assert {tp.topic: list(tp.partitions) for tp in asg.assigned_partitions} == vec["expected"]["assignment"]


def test_burrow_unknown_key_version_3_is_reported_not_fatal() -> None:
    vec = BURROW["burrow-unknown-key-version-3"]
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    assert isinstance(record.key, UnknownKey)
    assert record.key.type_name == "ConsumerGroupMetadata"
    assert record.key.group == "testgroup"
    assert isinstance(record.value, UnknownValue)
    assert encode_key(record.key) == bytes.fromhex(vec["key_hex"])
    assert encode_value(record.value) == bytes.fromhex(vec["value_hex"])


# ---------------------------------------------------------------------------------------------
# Bogdanp/Franz and IBM/sarama
# ---------------------------------------------------------------------------------------------
def test_franz_truncated_v1_value_is_rejected_with_position() -> None:
    (vec,) = _load("franz.json")
    key = decode_key(bytes.fromhex(vec["key_hex"]))
    assert key == OffsetCommitKey("ABC", "BCD", 1, version=1)
    with pytest.raises(CorruptRecordError) as info:
        decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    err = info.value
    assert (err.part, err.record_type, err.version, err.position) == ("value", 1, 1, 10)
    assert "metadata" in err.reason


SARAMA = _by_id("sarama_consumer_protocol.json")


def test_sarama_subscription_v0() -> None:
    vec = SARAMA["sarama-subscription-v0"]
    blob = bytes.fromhex(vec["blob_hex"])
    sub = decode_subscription(blob)
    assert (sub.version, list(sub.topics), sub.user_data) == (0, vec["expected"]["topics"], bytes.fromhex("010203"))
    assert encode_subscription(sub) == blob


def test_sarama_assignment_v0() -> None:
    vec = SARAMA["sarama-assignment-v0"]
    blob = bytes.fromhex(vec["blob_hex"])
    asg = decode_assignment(blob)
    assert {tp.topic: list(tp.partitions) for tp in asg.assigned_partitions} == vec["expected"]["topics"]
    assert asg.user_data == bytes.fromhex(vec["expected"]["user_data_hex"])
    assert encode_assignment(asg) == blob


def test_sarama_subscription_v1_with_empty_owned_partitions() -> None:
    blob = bytes.fromhex(SARAMA["sarama-subscription-v1"]["blob_hex"])
    sub, note = decode_subscription_tolerant(blob)
    assert note is None
    assert (sub.version, sub.topics, sub.user_data, sub.owned_partitions) == (1, ("one", "two"), b"\x01\x02\x03", ())
    assert encode_subscription(sub) == blob


def test_sarama_truncated_v1_subscription_falls_back_to_v0_fields() -> None:
    blob = bytes.fromhex(SARAMA["sarama-subscription-v1-truncated"]["blob_hex"])
    sub, note = decode_subscription_tolerant(blob)
    assert note is not None
    assert (sub.version, sub.topics, sub.user_data, sub.owned_partitions) == (1, ("one", "two"), b"\x01\x02\x03", ())
    assert subscribed_topics_v0(blob) == frozenset({"one", "two"})


# ---------------------------------------------------------------------------------------------
# partition_for
# ---------------------------------------------------------------------------------------------
PARTITION_EXAMPLES = json.loads((VECTORS / "partition_for.json").read_text())["examples"]


@pytest.mark.parametrize("ex", PARTITION_EXAMPLES, ids=lambda e: e["group_id"] or "<empty>")
def test_partition_for_matches_kafka(ex: dict[str, Any]) -> None:
    gid = ex["group_id"]
    assert java_string_hash(gid) == ex["java_hashCode"]
    assert kafka_abs(ex["java_hashCode"]) == ex["utils_abs"]
    assert partition_for(gid) == ex["partition_50"]
    assert partition_for(gid, 100) == ex["partition_100"]
    assert partition_for(gid, 1) == ex["partition_1"]


def test_formatter_prints_bytes_as_base64() -> None:
    vec = _by_id("kafka_formatter_tests.json")["kafka-formatter-group-value-v3"]
    record = decode_record(bytes.fromhex(vec["key_hex"]), bytes.fromhex(vec["value_hex"]))
    assert isinstance(record.value, GroupMetadataValue)
    member_json = to_kafka_json(record)["value"]["data"]["members"][0]
    assert base64.b64decode(member_json["subscription"]) == record.value.members[0].subscription
