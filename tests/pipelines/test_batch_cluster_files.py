"""The batch job packs a landing of many files into one task per core: on compacted logs written by
Kafka 3's and Kafka 4's coordinators (KIP-848 groups, online upgrades, idle partitions, groups
that never commit), landed in files of uneven size, its gold tables are those of one in-process
replay of every record (``arrow_gold``, itself checked against the core's record-by-record
replay in ``test_replay_bulk``), and every raw record is accounted for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.pipelines.test_stream_job import assert_gold_equal, land

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("coordinator", "shape"),
    [
        ("new", {"consumer_groups": 0.5, "conversions": 0.3}),  # Kafka 4: KIP-848 groups, online upgrades
        ("old", {}),  # Kafka 3's coordinator and records
    ],
)
def test_a_many_file_compacted_cluster_log_gives_the_one_pass_gold_tables(
    spark: Any, tmp_path: Path, coordinator: str, shape: dict[str, float]
) -> None:
    from coordinator_core.simulator.generator import generate
    from pipelines.batch.file_tasks import task_slots
    from pipelines.batch.replay import current_replay_input, read_manifest
    from pipelines.config import config_from_dict
    from pipelines.inputs.raw_files import RawRecord
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO
    from schemas.raw import RAW_RECORDS
    from tests.pipelines.pipeline_helpers import spark_gold

    log = generate(
        groups=12, hours=1.0, seed=17, coordinator=coordinator, compaction="cleaned", retention_ms=10 * 60_000, **shape
    )
    assert log.truth["compaction"]["mode"] == "cleaned"
    records = sorted(
        (
            RawRecord(k, v, "__consumer_offsets", p, o, ts)
            for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps)
        ),
        key=lambda r: (r.timestamp_ms, r.partition, r.offset),
    )
    landing = tmp_path / "landing"
    # uneven files (a big one, then smaller ones): more files than task slots, so tasks take several
    cut = len(records) // 2
    files = land(records[:cut], landing, rows_per_file=cut) + land(
        records[cut:], landing, rows_per_file=max(1, len(records) // 14)
    )
    slots = task_slots(spark)
    assert len(files) > 2 * slots
    retention = log.truth["retention_ms"]
    as_of = max(r.timestamp_ms for r in records)
    cfg = config_from_dict(
        {
            "paths": {"root": str(tmp_path / "wh")},
            "delta": {"engine": "rust"},
            "input": {"source": "landing", "path": str(landing)},
            "replay": {"retention_ms": retention, "as_of_ms": as_of, "coordinator": coordinator},
        }
    )
    io = TableIO(cfg, spark)
    summary = run_batch(cfg, spark, io=io)
    assert summary.reconciled and summary.raw_total == len(records)
    assert summary.paths["ingest"] == "landing -> raw_records (copied by the decode's pass)"

    # one task per slot decoded the files, each writing one replay-input file per source table
    # whatever the bucket count: each bucket's rows came from at most `slots` tasks' files
    manifest = current_replay_input(io, summary.raw_version)
    assert manifest is not None
    entries = read_manifest(manifest)
    files = {str(e["path"]) for e in entries}
    per_source: dict[str, set[str]] = {}
    for f in files:
        per_source.setdefault(f.rsplit("/", 1)[-1].rsplit("-", 1)[0], set()).add(f)
    assert per_source and max(len(fs) for fs in per_source.values()) <= slots
    buckets_per_file: dict[str, set[int]] = {}
    for e in entries:
        buckets_per_file.setdefault(str(e["path"]), set()).add(int(e["bucket"]))
    assert max(len(b) for b in buckets_per_file.values()) > 1  # a file holds several buckets' batches
    per_bucket: dict[tuple[int, str], int] = {}
    for entry in entries:
        key = (int(entry["bucket"]), str(entry["path"]).rsplit("/", 1)[-1].rsplit("-", 1)[0])
        per_bucket[key] = per_bucket.get(key, 0) + 1
        assert entry["batches"] and int(entry["rows"]) > 0
    assert max(per_bucket.values()) <= slots

    raw = spark.read.schema(RAW_RECORDS.spark_schema()).parquet(str(landing))
    assert_gold_equal(
        spark, cfg, spark_gold(spark, raw, retention_ms=retention, as_of_ms=as_of, coordinator=coordinator)
    )
