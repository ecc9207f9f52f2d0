"""``format("offsetlake_kafka")`` (the Python data source) through Spark, on librdkafka's mock cluster.

Proves: the streaming source delivers exactly the records ``offsetlake capture`` lands (bytes,
positions, timestamps), micro-batches follow ``maxOffsetsPerTrigger``, a restarted query resumes
from its checkpoint without loss or duplicates, and the batch job reading Kafka through it builds
the same Delta tables as the batch job reading the landing files.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from pipelines.inputs.raw_files import RawRecord, read_raw_records, write_raw_records
from pipelines.inputs.sample import sample_records
from pipelines.kafka.capture import capture
from pipelines.kafka.client import KafkaSettings
from pipelines.kafka.mock import MOCK_PARTITIONS, MockKafkaCluster
from pipelines.kafka.source import SOURCE_NAME, offsets_json, register_kafka_source

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

COLS = ["partition", "offset", "key", "value", "timestamp", "timestampType"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[MockKafkaCluster]:
    with MockKafkaCluster(num_brokers=3) as mc:
        yield mc


@pytest.fixture(scope="module")
def records() -> list[RawRecord]:
    return sample_records(10, seed=5, num_partitions=MOCK_PARTITIONS)


@pytest.fixture(scope="module")
def offsets_topic(cluster: MockKafkaCluster, records: list[RawRecord]) -> str:
    """The generated log produced into the mock's ``__consumer_offsets``."""
    pos = cluster.produce([(r.key, r.value, r.partition, r.timestamp_ms) for r in records], "__consumer_offsets")
    assert pos == [(r.partition, r.offset) for r in records]
    return "__consumer_offsets"


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["partition"],
            r["offset"],
            bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
            r["timestamp"],
            r["timestampType"],
        )
        for r in df.select(*COLS).collect()
    )


def _stream(spark: Any, bootstrap: str, topic: str, sink: Path, ckpt: Path, **opts: Any) -> Any:
    register_kafka_source(spark)
    reader = spark.readStream.format(SOURCE_NAME).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for k, v in opts.items():
        reader = reader.option(k, str(v))
    q = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None
    return q


def test_stream_delivers_exactly_the_captured_records_in_rate_limited_batches(
    spark: Any, cluster: MockKafkaCluster, offsets_topic: str, records: list[RawRecord], tmp_path: Path
) -> None:
    landing = tmp_path / "capture"
    res = capture(KafkaSettings(cluster.bootstrap_servers, offsets_topic), landing, until_end=True)
    assert res.records == len(records)
    captured = spark.read.parquet(str(landing))

    q = _stream(
        spark, cluster.bootstrap_servers, offsets_topic, tmp_path / "sink", tmp_path / "ckpt", maxOffsetsPerTrigger=150
    )
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert sum(p["numInputRows"] for p in batches) == len(records)
    assert len(batches) == -(-len(records) // 150)
    assert max(p["numInputRows"] for p in batches) <= 150
    streamed = spark.read.parquet(str(tmp_path / "sink"))
    assert streamed.schema == captured.schema
    assert _rows(streamed) == _rows(captured)
    # the checkpoint holds Spark's Kafka-source offset JSON: the next offset per partition
    last = q.lastProgress["sources"][0]["endOffset"]
    ends = dict.fromkeys(range(MOCK_PARTITIONS), 0)  # an empty partition is still tracked
    for r in records:
        ends[r.partition] = r.offset + 1
    assert (last if isinstance(last, dict) else json.loads(last)) == offsets_json(offsets_topic, ends)


def test_restarted_query_reads_only_new_records_once(spark: Any, cluster: MockKafkaCluster, tmp_path: Path) -> None:
    topic = f"stream-restart-{uuid.uuid4().hex[:8]}"
    first = [(b"k%d" % i, b"v%d" % i, i % MOCK_PARTITIONS, 1_000 + i) for i in range(200)]
    cluster.produce(first, topic)
    sink, ckpt = tmp_path / "sink", tmp_path / "ckpt"
    _stream(spark, cluster.bootstrap_servers, topic, sink, ckpt)
    assert spark.read.parquet(str(sink)).count() == 200
    second = [(b"n%d" % i, None, i % MOCK_PARTITIONS, 5_000 + i) for i in range(120)]
    cluster.produce(second, topic)
    _stream(spark, cluster.bootstrap_servers, topic, sink, ckpt)
    out = spark.read.parquet(str(sink))
    assert out.count() == 320
    assert out.select("partition", "offset").distinct().count() == 320
    assert out.where("value IS NULL").count() == 120


def test_batch_read_honours_starting_and_ending_offsets(
    spark: Any, cluster: MockKafkaCluster, offsets_topic: str, records: list[RawRecord]
) -> None:
    register_kafka_source(spark)
    start = {p: 2 for p in range(MOCK_PARTITIONS)}
    end = {p: 5 for p in range(MOCK_PARTITIONS)}
    df = (
        spark.read.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("startingOffsets", json.dumps(offsets_json(offsets_topic, start)))
        .option("endingOffsets", json.dumps(offsets_json(offsets_topic, end)))
        .option("maxRecordsPerPartition", 2)
        .load()
    )
    got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    want = sorted((r.partition, r.offset) for r in records if 2 <= r.offset < 5)
    assert got == want
    nothing = (
        spark.read.format(SOURCE_NAME)
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("startingOffsets", "latest")
        .load()
    )
    assert nothing.count() == 0  # no ranges planned: Spark still runs one (empty) task


def test_batch_job_from_kafka_builds_the_same_delta_tables_as_from_landing_files(
    spark: Any, cluster: MockKafkaCluster, offsets_topic: str, records: list[RawRecord], tmp_path: Path
) -> None:
    batch = pytest.importorskip("pipelines.jobs.batch")
    from pipelines.config import config_from_dict
    from pipelines.tableio import TableIO

    landing = tmp_path / "landing"
    write_raw_records(records, landing)
    assert len(list(read_raw_records(landing))) == len(records)
    common = {
        "offsets_topic": {"num_partitions": MOCK_PARTITIONS},
        "replay": {"as_of_ms": 1_700_001_000_000},
        "delta": {"engine": "rust"},
    }
    cfg_files = config_from_dict(
        {**common, "paths": {"root": str(tmp_path / "a")}, "input": {"source": "landing", "path": str(landing)}}
    )
    cfg_kafka = config_from_dict(
        {
            **common,
            "paths": {"root": str(tmp_path / "b")},
            "input": {"source": "kafka"},
            "kafka": {"bootstrap_servers": cluster.bootstrap_servers, "engine": "python", "topic": offsets_topic},
        }
    )
    s_files = batch.run_batch(cfg_files, spark)
    s_kafka = batch.run_batch(cfg_kafka, spark)
    assert s_files.raw_total == s_kafka.raw_total == len(records)
    io_a, io_b = TableIO(cfg_files, spark), TableIO(cfg_kafka, spark)
    names = [t.name for t in s_files.tables]
    assert [t.name for t in s_kafka.tables] == names
    assert {"raw_records", "offset_commits", "group_metadata"} <= set(names)
    for name in names:
        a, b = io_a.read(name), io_b.read(name)
        assert a.schema == b.schema, name
        assert a.count() == b.count(), name
        assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0, name


def test_stream_job_reading_kafka_equals_the_batch_replay_of_the_same_log(
    spark: Any, cluster: MockKafkaCluster, tmp_path: Path
) -> None:
    """``input.source: kafka`` + ``kafka.engine: python``: the streaming job's gold tables equal
    the batch replay of the same records read from landing files, at the stream's watermark."""
    stream_test = pytest.importorskip("tests.pipelines.test_stream_job")
    from pipelines.config import config_from_dict
    from pipelines.jobs import stream as stream_job
    from schemas.raw import RAW_RECORDS
    from tests.pipelines.pipeline_helpers import spark_gold

    records = sample_records(8, seed=13, num_partitions=MOCK_PARTITIONS)
    topic = f"offsets-stream-{uuid.uuid4().hex[:8]}"
    pos = cluster.produce([(r.key, r.value, r.partition, r.timestamp_ms) for r in records], topic)
    assert pos == [(r.partition, r.offset) for r in records]

    landing = tmp_path / "landing"
    write_raw_records(records, landing)
    watermark = max(r.timestamp_ms for r in records) - stream_test.DELAY_MS
    raw = spark.read.schema(RAW_RECORDS.spark_schema()).parquet(str(landing))
    expected = spark_gold(
        spark,
        raw,
        retention_ms=stream_test.RETENTION_MS,
        num_partitions=MOCK_PARTITIONS,
        **stream_test.final_present(watermark),
    )

    cfg = config_from_dict(
        {
            "paths": {"root": str(tmp_path / "stream")},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": stream_test.RETENTION_MS},
            "offsets_topic": {"num_partitions": MOCK_PARTITIONS},
            "stream": {"watermark_delay_ms": stream_test.DELAY_MS},
            "input": {"source": "kafka"},
            "kafka": {"bootstrap_servers": cluster.bootstrap_servers, "topic": topic, "engine": "python"},
        }
    )
    recorder = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    batches = [r for r in recorder.rows if r["query_name"] == stream_job.REPLAY_QUERY]
    assert sum(r["input_rows"] for r in batches) == len(records)
    stream_test.assert_gold_equal(spark, cfg, expected)


def test_engine_auto_falls_back_to_the_python_source_and_jvm_without_the_jar_is_refused(
    spark: Any, cluster: MockKafkaCluster
) -> None:
    from pipelines.config import config_from_dict
    from pipelines.errors import UsageError
    from pipelines.kafka.source import choose_engine, read_kafka_stream
    from pipelines.runtime.spark_session import kafka_connector_available
    from schemas.raw import RAW_RECORDS

    if kafka_connector_available(spark):
        pytest.skip("the spark-sql-kafka jar is on this classpath")
    assert choose_engine(spark, "auto") == "python"
    cfg = config_from_dict({"kafka": {"bootstrap_servers": cluster.bootstrap_servers, "engine": "auto"}})
    df = read_kafka_stream(spark, cfg)
    assert df.isStreaming and df.schema == RAW_RECORDS.spark_schema()
    with pytest.raises(UsageError, match="spark-sql-kafka"):
        read_kafka_stream(spark, config_from_dict({"kafka": {"bootstrap_servers": "x:1", "engine": "jvm"}}))
