"""The jar-free Kafka reader against a real Kafka 4 broker: a task reads its ranges one after the
other with one consumer, and the next range does not wait out the broker's fetch wait of the one
before (``READER_FETCH_WAIT_MS``; at 100 ms a micro-batch of 50 partitions paid ~2.5 s for it)."""

from __future__ import annotations

import time

import pytest

from pipelines.kafka.local_broker import LocalBroker

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

PARTITIONS = 30
PER_PARTITION = 40


def test_a_task_reads_its_ranges_one_after_the_other_without_waiting_between_them(kafka4: LocalBroker) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql.pandas.types import to_arrow_schema

    from pipelines.kafka.client import KafkaSettings
    from pipelines.kafka.source import KafkaRange, raw_schema, read_range, reader_consumer

    topic = "reader-ranges"
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(timeout=30)
    producer = ck.Producer({"bootstrap.servers": kafka4.bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=p)
    assert producer.flush(30) == 0

    settings = KafkaSettings(kafka4.bootstrap, topic=topic)
    schema = to_arrow_schema(raw_schema(), timezone="UTC")
    consumer = reader_consumer(settings)
    try:
        for _ in read_range(settings, schema, KafkaRange(topic, 0, 0, 1), consumer=consumer):
            pass  # connected and warm: what follows is the ranges' own cost
        began = time.monotonic()
        got = {}
        for p in range(PARTITIONS):
            batches = list(read_range(settings, schema, KafkaRange(topic, p, 10, PER_PARTITION), consumer=consumer))
            got[p] = [o for b in batches for o in b.column("offset").to_pylist()]
        took = time.monotonic() - began
    finally:
        consumer.close()
    assert got == {p: list(range(10, PER_PARTITION)) for p in range(PARTITIONS)}
    # at a 100 ms fetch wait each range after the first waited ~100 ms: >= 2.9 s for these 30
    assert took < 0.08 * PARTITIONS, f"{PARTITIONS} ranges took {took:.2f} s"
