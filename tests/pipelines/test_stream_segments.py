"""Broker log segments as the streaming job's input: a log dir read as a tail, transactions
replayed as Kafka does across micro-batches and runs.

The log dir grows between two ``--available-now`` runs as a broker's would: the first run sees a
transaction's offsets but not its COMMIT marker (pending: invisible, ``txn_outcome`` open); the
second sees the marker, an aborted transaction, a corrupt batch, a transaction left open and a
new segment. After it the stream's tables equal the batch job's on the whole log dir: the
marker reached the groups an earlier run read, and ``offset_commits`` says what became of
every transactional commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from coordinator_core import segments as S  # noqa: E402
from pipelines.inputs.segment_files import compress  # noqa: E402
from tests.pipelines.test_batch_segments import _commit, _marker, _offset_commits_txn, _offsets_current, _txn  # noqa: E402

P7 = "__consumer_offsets-7"


def _first_half(landing: Path) -> None:
    (landing / P7).mkdir(parents=True)
    (landing / P7 / "00000000000000000000.log").write_bytes(
        S.encode_batch_v2([_commit(0, "plain", 0, 100), _commit(1, "plain", 1, 200)], codec=S.CODEC_GZIP)
        + _txn([_commit(2, "committed-a", 0, 50), _commit(3, "committed-b", 0, 60)], 9001)
        + S.encode_batch_v2([_commit(4, "aborted", 1, 5)])
    )
    (landing / "__consumer_offsets-12").mkdir()
    (landing / "__consumer_offsets-12" / "00000000000000000000.log").write_bytes(
        S.encode_batch_v2([_commit(0, "elsewhere", 0, 7)]) + _txn([_commit(1, "elsewhere", 1, 8)], 9001)
    )


def _second_half(landing: Path) -> tuple[str, int]:
    """Appends to the active segment and rolls a new one; returns the corrupt batch's file and
    byte position."""
    seg = landing / P7 / "00000000000000000000.log"
    corrupt = bytearray(S.encode_batch_v2([_commit(9, "plain", 0, 999)]))
    corrupt[-3] ^= 0x40
    tail = (
        _marker(S.CONTROL_COMMIT, 5, 9001)
        + _txn([_commit(6, "aborted", 0, 70)], 9002, codec=S.CODEC_ZSTD, compress=compress)
        + _marker(S.CONTROL_ABORT, 7, 9002)
        + S.encode_batch_v2([_commit(8, "open", 2, 1)], codec=S.CODEC_LZ4, compress=compress)
    )
    position = seg.stat().st_size + len(tail)
    with seg.open("ab") as fh:
        fh.write(tail + bytes(corrupt) + _txn([_commit(10, "open", 0, 80)], 9003))
    (landing / P7 / "00000000000000000011.log").write_bytes(S.encode_batch_v2([_commit(11, "plain", 1, 300)]))
    return str(seg), position


def _conf(tmp: Path, root: str, landing: Path) -> Path:
    conf = tmp / f"{root}.yaml"
    conf.write_text(
        f"paths:\n  root: {tmp / root}\ninput:\n  path: {landing}\n"
        "stream:\n  watermark_delay_ms: 5000\n  max_bytes_per_trigger: 200\n"
    )
    return conf


def test_stream_on_a_growing_log_dir_applies_a_marker_read_runs_later_and_equals_the_batch_job(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.config import load_config
    from pipelines.jobs import stream as stream_job

    landing = tmp_path / "landing"
    _first_half(landing)
    cfg = load_config(_conf(tmp_path, "stream", landing))
    first = stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)
    warehouse = tmp_path / "stream" / "warehouse"

    # the transaction's offsets are pending: invisible, and open in offset_commits
    groups = {row[0] for row in _offsets_current(warehouse)}
    assert groups == {"plain", "aborted", "elsewhere"}
    assert [r for r in _offset_commits_txn(warehouse) if r[2] is not None] == [
        (7, 2, 9001, "open", None),
        (7, 3, 9001, "open", None),
        (12, 1, 9001, "open", None),
    ]
    assert len([r for r in first.rows if r["query_name"] == stream_job.REPLAY_QUERY]) >= 2  # 200-byte triggers

    bad_file, bad_pos = _second_half(landing)
    second = stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)

    assert main_batch(tmp_path, landing, capsys) == 0
    batch_wh = tmp_path / "batch" / "warehouse"
    assert _offsets_current(warehouse) == _offsets_current(batch_wh)
    assert ("committed-a", "orders", 0, 50, 2, 9001) in _offsets_current(warehouse)  # the later marker reached it
    assert _offset_commits_txn(warehouse) == _offset_commits_txn(batch_wh)
    assert (12, 1, 9001, "open", None) in _offset_commits_txn(warehouse)  # a marker in 7 does not close 12

    from deltalake import DeltaTable

    bad = DeltaTable(str(warehouse / "ingest_quarantine")).to_pyarrow_table().to_pylist()
    assert [(r["reason"], r["source_file"]) for r in bad] == [("bad_batch", bad_file)]
    assert f"byte {bad_pos} " in bad[0]["detail"]
    raw_txn = DeltaTable(str(warehouse / "raw_transactions")).to_pyarrow_table().num_rows
    assert raw_txn == DeltaTable(str(batch_wh / "raw_transactions")).to_pyarrow_table().num_rows == 7

    # counts: every record read once over both runs = data + control records + the bad batch
    counted = first.counted + second.counted
    records, replayed, dups, refused, _outliers, controls = (sum(c[i] for c in counted) for i in range(1, 7))
    assert (records, replayed, dups, refused, controls) == (14, 11, 0, 1, 2)


def main_batch(tmp_path: Path, landing: Path, capsys: pytest.CaptureFixture[str]) -> int:
    from pipelines.cli import main

    capsys.readouterr()
    rc = main(["run", "batch", "--conf", str(_conf(tmp_path, "batch", landing)), "--json"])
    json.loads(capsys.readouterr().out)
    return rc


@pytest.mark.parametrize(
    ("coordinator", "shape"),
    [
        ("new", {"consumer_groups": 0.5, "conversions": 0.3}),  # Kafka 4: KIP-848 groups, online upgrades
        ("old", {}),  # Kafka 3's coordinator and records
    ],
)
def test_stream_on_the_segments_of_a_compacted_cluster_log_equals_its_replay(
    tmp_path: Path, spark: Any, coordinator: str, shape: dict[str, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generated cluster's log as the broker stores it after its cleaner ran (compacted: offsets
    skip; idle partitions, groups that never commit, mass restarts), written as segments of a few
    records per batch: the stream, in many small micro-batches, gives the tables of the replay of
    the same records at its final watermark. With 3 state buckets (a new checkpoint), so every
    bucket holds several of the groups, with their timers."""
    from coordinator_core.simulator.generator import generate
    from pipelines.config import config_from_dict
    from pipelines.inputs.segment_files import write_log_dir
    from pipelines.jobs import stream as stream_job
    from tests.pipelines.pipeline_helpers import spark_gold
    from tests.pipelines.test_stream_job import DELAY_MS, assert_gold_equal, final_present

    log = generate(
        groups=10, hours=1.0, seed=13, coordinator=coordinator, compaction="cleaned", retention_ms=10 * 60_000, **shape
    )
    assert log.truth["compaction"]["mode"] == "cleaned"
    records = list(zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True))
    assert write_log_dir(records, tmp_path / "logdir", per_batch=3) == len(records)
    retention = log.truth["retention_ms"]
    cfg = config_from_dict(
        {
            "paths": {"root": str(tmp_path / "root")},
            "input": {"path": str(tmp_path / "logdir")},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": retention, "coordinator": coordinator},
            "stream": {"max_bytes_per_trigger": 60_000, "watermark_delay_ms": DELAY_MS},
        }
    )
    monkeypatch.setattr("pipelines.stream.state.STATE_BUCKETS", 3)
    recorder = stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)
    replay_rows = [r for r in recorder.rows if r["query_name"] == stream_job.REPLAY_QUERY]
    assert len(replay_rows) >= 4
    assert max(r["state_rows"] for r in replay_rows) == 3  # 10 groups in 3 buckets
    assert sum(c[2] for c in recorder.counted) == len(records)  # every record replayed once

    from schemas.raw import RAW_RECORDS

    raw = spark.createDataFrame(
        [(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in records],
        "key binary, value binary, topic string, partition int, offset long, ts long",
    ).selectExpr("key", "value", "topic", "partition", "offset", "timestamp_millis(ts) AS timestamp")
    assert set(RAW_RECORDS.spark_schema().fieldNames()) >= set(raw.columns)
    watermark = max(r[4] for r in records) - DELAY_MS
    want = spark_gold(spark, raw, retention_ms=retention, coordinator=coordinator, **final_present(watermark))
    assert_gold_equal(spark, cfg, want)
