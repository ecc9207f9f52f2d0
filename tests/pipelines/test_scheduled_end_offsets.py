"""The scheduled paths sample end offsets when a cluster is configured: the batch job (whatever
starts it: the CLI, the Airflow DAG's one spark-submit) after its replay, the streaming job while
it runs and when an available-now run ends. Against librdkafka's mock cluster on loopback."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from pipelines.inputs.raw_files import RawRecord
from pipelines.kafka.mock import MockKafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

GROUP = "lag-consumer"


def _landing(root: Path, topic: str, gone: str) -> None:
    """A simple consumer's commits: topic-0 at 3 then 7, topic-1 at 6, and one on a topic the
    cluster does not have."""
    from coordinator_core import OffsetCommitKey, OffsetCommitValue, Record, encode_record, partition_for
    from pipelines.inputs.raw_files import write_raw_records

    part = partition_for(GROUP, 50)
    commits = [(topic, 0, 3, 10_000), (topic, 1, 6, 20_000), (topic, 0, 7, 20_000), (gone, 0, 5, 20_000)]
    raw = []
    for i, (t, p, o, ts) in enumerate(commits):
        k, v = encode_record(Record(OffsetCommitKey(GROUP, t, p), OffsetCommitValue(o, "", ts)))
        raw.append(RawRecord(k, v, "__consumer_offsets", part, i, ts))
    write_raw_records(raw, root / "landing")


def _cfg(root: Path, bootstrap: str) -> Any:
    from pipelines.config import config_from_dict

    return config_from_dict(
        {
            "paths": {"root": str(root), "landing": str(root.parent / "landing")},
            "delta": {"engine": "rust"},
            "kafka": {"bootstrap_servers": bootstrap},
            "stream": {"watermark_delay_ms": 1_000},
            # the commits are dated 1970 and "now" is the end-offset sample (the wall clock): a
            # retention longer than that keeps them held, so their lag is still there to see
            "replay": {"retention_ms": 100 * 365 * 86_400_000},
        }
    )


def _samples(cfg: Any) -> dict[tuple[str, int], dict[str, Any]]:
    from pipelines.tableio import TableIO

    t = TableIO(cfg, None, engine="rust").read_arrow("partition_end_offsets")
    assert t is not None, "no partition_end_offsets written"
    return {(r["topic"], r["partition"]): r for r in t.to_pylist() if r["group_id"] == GROUP}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with MockKafkaCluster(num_brokers=1) as mc:
        topic, gone = f"data-{uuid.uuid4().hex[:8]}", f"gone-{uuid.uuid4().hex[:8]}"
        mc.produce(
            [(b"k", b"v", 0, 1_000 + i) for i in range(10)] + [(b"k", b"v", 1, 2_000 + i) for i in range(6)], topic
        )
        root = tmp_path_factory.mktemp("sched")
        _landing(root, topic, gone)
        yield mc, root, topic, gone


def _check(cfg: Any, topic: str) -> None:
    got = _samples(cfg)
    assert set(got) == {(topic, 0), (topic, 1)}
    assert (got[(topic, 0)]["log_end_offset"], got[(topic, 0)]["committed_offset"], got[(topic, 0)]["lag_offsets"]) == (
        10,
        7,
        3,
    )
    assert round(got[(topic, 0)]["committed_record_timestamp"].timestamp() * 1000) == 1_007
    assert got[(topic, 1)]["lag_offsets"] == 0


def test_batch_job_samples_end_offsets_after_its_replay_when_a_cluster_is_configured(spark: Any, world: Any) -> None:
    from pipelines.analytics.inspect import inspect_group
    from pipelines.jobs.batch import run_batch

    mc, root, topic, gone = world
    cfg = _cfg(root / "batch", mc.bootstrap_servers)
    said: list[str] = []
    summary = run_batch(cfg, spark, echo=said.append)
    _check(cfg, topic)
    assert "2 rows sampled" in summary.paths["end_offsets"]
    assert any("not on the cluster" in line and gone in line for line in said)  # reported, not skipped
    view = inspect_group(cfg, GROUP)  # the lag is there when you look
    lag = {(o["topic"], o["partition"]): o["lag"] for o in view.offsets}
    assert lag == {(topic, 0): 3, (topic, 1): 0, (gone, 0): None}
    assert view.lag["topics_without_samples"] == [gone]


def test_batch_job_without_a_cluster_samples_nothing(spark: Any, world: Any) -> None:
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    _, root, _, _ = world
    cfg = _cfg(root / "plain", "")
    summary = run_batch(cfg, spark)
    assert "end_offsets" not in summary.paths
    assert not TableIO(cfg, None, engine="rust").exists("partition_end_offsets")


def test_stream_job_samples_end_offsets_when_an_available_now_run_ends(spark: Any, world: Any) -> None:
    from pipelines.jobs import stream as stream_job

    mc, root, topic, _ = world
    cfg = _cfg(root / "stream", mc.bootstrap_servers)
    recorder = stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)
    _check(cfg, topic)
    assert recorder.end_offsets and "2 rows sampled" in recorder.end_offsets[-1]


def test_the_missing_partitions_line_stays_one_bounded_line_whatever_the_log_holds() -> None:
    """A compacted log of a long-lived cluster may hold offsets of thousands of deleted topics'
    partitions: the line gives the totals, partitions as ranges, and names the first topics only."""
    from pipelines.kafka.end_offsets import MISSING_TOPICS_NAMED, missing_line

    few = missing_line([("t", 0, "g1"), ("t", 1, "g2"), ("t", 2, None), ("t", 5, "g1"), ("u", -1, "g3")])
    assert few.startswith("not on the cluster, no lag sampled for 4 partitions of 2 topics (3 groups): ")
    assert "t[0-2,5] (groups g1, g2)" in few and "; u (groups g3)" in few and "more" not in few
    many = [(f"deleted-{i:04d}", p, f"group-{i}-{p % 5}") for i in range(3000) for p in range(64)]
    line = missing_line(many)
    assert "192000 partitions of 3000 topics (15000 groups)" in line
    assert "deleted-0000[0-63] (groups group-0-0, group-0-1, group-0-2 and 2 more)" in line
    assert f"; and {3000 - MISSING_TOPICS_NAMED} more topics" in line
    assert len(line) < 2000 and "\n" not in line
