"""The real brokers themselves: they start in seconds, answer, and Kafka's own tools read them."""

from __future__ import annotations

import time

import pytest

from pipelines.kafka import kafka_tools
from pipelines.kafka.local_broker import BrokerFailed, LocalBroker
from tests.broker.conftest import jars_or_skip

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]


def _commit_once(bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        fut.result(timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 9)], asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize("which", ["kafka39", "kafka4"])
def test_broker_answers_and_kafka_tools_read_it(which: str, request: pytest.FixtureRequest) -> None:
    broker: LocalBroker = request.getfixturevalue(which)
    assert broker.running() and broker.started_s is not None
    assert broker.started_s < 60, f"{broker.version} took {broker.started_s:.1f} s to be ready"
    group, topic = f"smoke-{which}", f"smoke-{which}"
    _commit_once(broker.bootstrap, group, topic)

    rows = kafka_tools.describe_group(broker.bundle, broker.bootstrap, group, "offsets")
    got = {(r["TOPIC"], int(r["PARTITION"])): int(r["CURRENT-OFFSET"]) for r in rows if r.get("TOPIC")}
    assert got == {(topic, 0): 7, (topic, 1): 9}

    deadline = time.monotonic() + 20
    commits: list[dict[str, object]] = []
    while time.monotonic() < deadline and len(commits) < 2:
        files = [f for d in broker.offsets_dirs() for f in sorted(d.glob("*.log"))]
        entries = kafka_tools.dump_log(broker.bundle, files)
        commits = [
            e
            for e in entries
            if e["kind"] == "record" and isinstance(e.get("key"), dict) and e["key"]["data"].get("group") == group
        ]
    assert sorted((c["key"]["data"]["partition"], c["payload"]["data"]["offset"]) for c in commits) == [(0, 7), (1, 9)]  # type: ignore[index]


@pytest.mark.broker("kafka-3.9")
def test_a_broker_that_cannot_start_says_why_in_one_line(tmp_path: object) -> None:
    jars_or_skip("kafka-3.9")
    broker = LocalBroker("kafka-3.9", tmp_path, {"offsets.topic.replication.factor": "not-a-number"})  # type: ignore[arg-type]
    began = time.monotonic()
    with pytest.raises(BrokerFailed) as info:
        broker.start()
    assert time.monotonic() - began < 60
    assert "\n" not in str(info.value) and "not-a-number" in str(info.value)
    assert not broker.running()
