"""Records a real Kafka 3.9.2 broker wrote to ``__consumer_offsets`` (tests/broker/, docs/real-kafka.md),
their bytes and what Kafka's own ``DumpLogSegments --offsets-decoder`` printed for them: the pure core
decodes them field by field as Kafka does, with no broker running.

Among them: a group with a static and a dynamic member (consumer protocol v3 subscriptions:
``ownedPartitions``, ``generationId``, ``rackId``), an offset commit whose metadata ends in a NUL
(confluent-kafka sends one; Kafka stores and prints it; librdkafka's Admin API cuts it off), an
offset tombstone (a deletion by the admin tool) and a group tombstone (the broker deleting an
expired group).
"""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_core.codec.formatter import to_rich_json
from coordinator_core.codec.record_codec import decode_record

VECTORS: dict[str, dict[str, Any]] = {
    "gm": {
        "key": "0002000a6333392d6b6565706572",
        "value": "00030008636f6e73756d657200000002000572616e676500326b6565702d7374617469632d312d61316166666663352d343763352d343632382d613463652d366266303663663039396239000001a2233fad750000000200326b6565702d7374617469632d312d61316166666663352d343763352d343632382d613463652d366266303663663039396239000d6b6565702d7374617469632d3100066b6565702d31000a2f3132372e302e302e31000493e000004e2000000022000300000001000c6333392d6b65657065722d740000000000000000ffffffff000000000028000000000001000c6333392d6b65657065722d740000000300000003000000040000000500000000002b6b6565702d322d38343734356561652d663736362d346431642d623432382d616665343262656463343464ffff00066b6565702d32000a2f3132372e302e302e31000493e00000177000000022000300000001000c6333392d6b65657065722d740000000000000000ffffffff000000000028000000000001000c6333392d6b65657065722d740000000300000000000000010000000200000000",
        "dump_key": {"type": "2", "data": {"group": "c39-keeper"}},
        "dump_payload": {
            "version": "3",
            "data": {
                "protocolType": "consumer",
                "generation": 2,
                "protocol": "range",
                "leader": "keep-static-1-a1afffc5-47c5-4628-a4ce-6bf06cf099b9",
                "currentStateTimestamp": 1795887705461,
                "members": [
                    {
                        "memberId": "keep-static-1-a1afffc5-47c5-4628-a4ce-6bf06cf099b9",
                        "groupInstanceId": "keep-static-1",
                        "clientId": "keep-1",
                        "clientHost": "/127.0.0.1",
                        "rebalanceTimeout": 300000,
                        "sessionTimeout": 20000,
                        "subscription": {
                            "topics": ["c39-keeper-t"],
                            "userData": "",
                            "ownedPartitions": [],
                            "generationId": -1,
                            "rackId": "",
                        },
                        "assignment": {
                            "assignedPartitions": [{"topic": "c39-keeper-t", "partitions": [3, 4, 5]}],
                            "userData": "",
                        },
                    },
                    {
                        "memberId": "keep-2-84745eae-f766-4d1d-b428-afe42bedc44d",
                        "groupInstanceId": None,
                        "clientId": "keep-2",
                        "clientHost": "/127.0.0.1",
                        "rebalanceTimeout": 300000,
                        "sessionTimeout": 6000,
                        "subscription": {
                            "topics": ["c39-keeper-t"],
                            "userData": "",
                            "ownedPartitions": [],
                            "generationId": -1,
                            "rackId": "",
                        },
                        "assignment": {
                            "assignedPartitions": [{"topic": "c39-keeper-t", "partitions": [0, 1, 2]}],
                            "userData": "",
                        },
                    },
                ],
            },
        },
    },
    "commit_nul": {
        "key": "0001000a6333392d61746f6e6365000c6333392d61746f6e63652d7400000004",
        "value": "00030000000000000001ffffffff000a62792d6f6e63652d3100000001a2233fd46a",
        "dump_key": {"type": "1", "data": {"group": "c39-atonce", "topic": "c39-atonce-t", "partition": 4}},
        "dump_payload": {
            "version": "3",
            "data": {"offset": 1, "leaderEpoch": -1, "metadata": "by-once-1\u0000", "commitTimestamp": 1795887715434},
        },
    },
    "offset_tomb": {
        "key": "0001000a6333392d61746f6e6365000c6333392d61746f6e63652d7400000003",
        "value": None,
        "dump_key": {"type": "1", "data": {"group": "c39-atonce", "topic": "c39-atonce-t", "partition": 3}},
        "dump_payload": None,
    },
    "group_tomb": {
        "key": "0002000a6333392d61746f6e6365",
        "value": None,
        "dump_key": {"type": "2", "data": {"group": "c39-atonce"}},
        "dump_payload": None,
    },
}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_the_core_decodes_real_kafka_39_records_as_dump_log_segments_prints_them(name: str) -> None:
    v = VECTORS[name]
    value = bytes.fromhex(v["value"]) if v["value"] is not None else None
    rich = to_rich_json(decode_record(bytes.fromhex(v["key"]), value), 3)
    assert rich["key"]["version"] == int(v["dump_key"]["type"])
    assert rich["key"]["data"] == v["dump_key"]["data"]
    payload = v["dump_payload"]
    if payload is None:
        assert rich["value"] is None
        return
    assert rich["value"]["version"] == int(payload["version"])
    data = dict(payload["data"])
    kafka_members = data.pop("members", None)
    assert {k: rich["value"]["data"][k] for k in data} == data
    if kafka_members is not None:
        mine = rich["value"]["data"]["members"]
        parsed = rich["consumerProtocol"]
        assert len(mine) == len(kafka_members) == len(parsed)
        for km, mm, pm in zip(kafka_members, mine, parsed, strict=True):
            for k, want in km.items():
                if k in ("subscription", "assignment"):
                    assert pm[k]["data"] == want, k
                else:
                    assert mm[k] == want, k
