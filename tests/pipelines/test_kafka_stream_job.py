"""The streaming job reading Kafka with the jar-free engine (``pipelines.stream.kafka_packed``), on
librdkafka's mock cluster with a topic of several partitions. Proves: one query reads Kafka
(its tasks write the decoded tables; no second query), the decoded tables equal the batch
decode of the same records and the gold tables the batch replay, a restart from the checkpoint
adds exactly the new records, and a task reading several partitions with one consumer reads
exactly its ranges.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from pipelines.inputs.sample import sample_records
from pipelines.kafka.mock import MockKafkaCluster

pytestmark = [pytest.mark.kafka]

PARTITIONS = 6
TOPIC = f"offsets-packed-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockKafkaCluster]:
    with MockKafkaCluster(num_brokers=3, topic=TOPIC, partitions=PARTITIONS) as mc:
        yield mc


def test_mock_topic_is_created_with_the_partitions_asked_for(cluster: MockKafkaCluster) -> None:
    assert cluster.partitions(TOPIC) == list(range(PARTITIONS))


def test_one_consumer_reading_several_ranges_is_exactly_their_records(cluster: MockKafkaCluster) -> None:
    """A task's ranges (``split_tasks``) read one after the other with one consumer: every
    record of every range, none of another partition or beyond a range's end."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from pipelines.kafka.client import KafkaSettings
    from pipelines.kafka.source import KafkaRange, raw_schema, read_range, reader_consumer
    from pipelines.stream.kafka_packed import split_tasks

    topic = f"{TOPIC}-ranges"
    cluster.partitions(topic)  # auto-created with the mock's default 4 partitions
    sent = [(b"k%d" % i, b"v%d" % i, i % 4, 2_000 + i) for i in range(400)]
    cluster.produce(sent, topic)
    settings = KafkaSettings(cluster.bootstrap_servers, topic=topic)
    ranges = [KafkaRange(topic, p, 10, 90) for p in range(4)] + [KafkaRange(topic, 1, 95, 100)]
    tasks = split_tasks(ranges, 2)
    assert len(tasks) == 2 and sorted(r.value for t in tasks for r in t) == sorted(r.value for r in ranges)
    schema = to_arrow_schema(raw_schema(), timezone="UTC")
    got = []
    for task in tasks:
        consumer = reader_consumer(settings)
        try:
            for rng in task:
                for b in read_range(settings, schema, rng, consumer=consumer, read_timeout_s=20):
                    got.extend(zip(b.column("partition").to_pylist(), b.column("offset").to_pylist(), strict=True))
        finally:
            consumer.close()
    want = [(r.partition, o) for r in ranges for o in range(r.start, r.end)]
    assert sorted(got) == sorted(want) and len(got) == len(set(got))


@pytest.mark.spark
def test_stream_job_from_kafka_is_one_query_writing_the_decoded_tables_and_restarts_exactly(
    spark: Any, cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    """``input.source: kafka``, ``kafka.engine: python``: the replay query alone reads Kafka
    (no ``quarantine`` query, no checkpoint of it); its tasks' decoded tables equal the batch
    decode of the records and its gold tables the batch replay at the watermark; a second run
    after more records are produced resumes from the checkpoint: every record once."""
    from pipelines.config import config_from_dict
    from pipelines.inputs.raw_files import write_raw_records
    from pipelines.jobs import stream as stream_job
    from pipelines.stream.settings import settings_from_config
    from pipelines.stream.source import plan_dir
    from pipelines.tableio import TableIO
    from schemas.raw import RAW_RECORDS
    from tests.pipelines import test_stream_job as stream_test
    from tests.pipelines.pipeline_helpers import decode_raw, spark_gold

    records = sample_records(8, seed=13, num_partitions=PARTITIONS)
    # the second run's records are all newer than the first's (else the first run's watermark
    # would drop them as late: a property of event time, not of the source)
    cut = sorted(r.timestamp_ms for r in records)[len(records) // 2]
    first, second = [r for r in records if r.timestamp_ms < cut], [r for r in records if r.timestamp_ms >= cut]
    cfg = config_from_dict(
        {
            "paths": {"root": str(tmp_path / "stream")},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": stream_test.RETENTION_MS},
            "offsets_topic": {"num_partitions": PARTITIONS},
            "stream": {"watermark_delay_ms": stream_test.DELAY_MS},
            "input": {"source": "kafka"},
            "kafka": {"bootstrap_servers": cluster.bootstrap_servers, "topic": TOPIC, "engine": "python"},
        }
    )
    settings = settings_from_config(cfg)
    io = TableIO(cfg, spark)
    landing = tmp_path / "landing"
    for part, batch in enumerate((first, second)):
        pos = cluster.produce([(r.key, r.value, r.partition, r.timestamp_ms) for r in batch], TOPIC)
        assert pos == [(r.partition, r.offset) for r in batch]
        write_raw_records(batch, landing / str(part))
        recorder = stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)

        assert {r["query_name"] for r in recorder.rows} == {stream_job.REPLAY_QUERY}
        assert sum(r["input_rows"] for r in recorder.rows) == len(batch)  # records, not packs
        assert not os.path.exists(settings.quarantine_checkpoint)
        plans = plan_dir(settings)
        assert plans is not None and not os.listdir(plans)  # every batch's output taken and removed

        raw = spark.read.schema(RAW_RECORDS.spark_schema()).parquet(str(landing / "*"))
        for name, want in decode_raw(raw).tables().items():
            if not io.exists(name):  # a table nothing was decoded into is not written
                assert want.count() == 0, name
                continue
            got = io.read(name)
            assert got.count() == want.count(), name
            cols = [c for c in want.columns if c != "ingested_at"]
            assert got.select(*cols).exceptAll(want.select(*cols)).count() == 0, name
        seen = first if part == 0 else records
        watermark = max(r.timestamp_ms for r in seen) - stream_test.DELAY_MS
        gold = spark_gold(
            spark,
            raw,
            retention_ms=stream_test.RETENTION_MS,
            num_partitions=PARTITIONS,
            **stream_test.final_present(watermark),
        )
        stream_test.assert_gold_equal(spark, cfg, gold)


def test_a_stream_given_ending_offsets_stops_there(cluster: MockKafkaCluster) -> None:
    """``endingOffsets`` bounds a stream (``Trigger.AvailableNow`` and every later batch) below
    the log end; a partition it names no offset for reads to the log end, one past the log end
    stops at the log end."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from pipelines.kafka.source import KafkaStreamReader, offsets_from_json, offsets_json, raw_schema

    topic = f"{TOPIC}-ending"
    cluster.partitions(topic)  # auto-created with the mock's default 4 partitions
    cluster.produce([(b"k%d" % i, b"v%d" % i, i % 4, 5_000 + i) for i in range(40)], topic)
    base = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "topic": topic}
    ending = json.dumps(offsets_json(topic, {0: 3, 1: 7, 3: 99}))
    bounded, free = (
        KafkaStreamReader({**base, "endingOffsets": ending}, raw_schema()),
        KafkaStreamReader(base, raw_schema()),
    )
    try:
        start = bounded.initialOffset()
        assert offsets_from_json(topic, free.latestOffset(start, ReadAllAvailable())) == {p: 10 for p in range(4)}
        want = {0: 3, 1: 7, 2: 10, 3: 10}
        assert offsets_from_json(topic, bounded.latestOffset(start, ReadAllAvailable())) == want
        bounded.prepareForTriggerAvailableNow()
        cluster.produce([(b"late", b"v", p, 9_000) for p in range(4)], topic)
        assert offsets_from_json(topic, bounded.latestOffset(start, ReadAllAvailable())) == want
    finally:
        bounded.stop()
        free.stop()
