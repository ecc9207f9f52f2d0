"""Issue 14: a generated mixed Kafka 4 cluster (classic groups, KIP-848 consumer groups, classic
groups converted online to the consumer protocol and some back, and since issue 35 share groups,
one of them deleted, and streams groups) through the batch job: the gold tables say of every
group what the generator's truth says - its type, state, group epoch, members with their
assignments and epochs, and its committed offsets - and every gold table equals the pure core's
(the chain batch == stream == pure core on all four group types)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from coordinator_core.simulator.generator import GeneratedLog, generate

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def mixed() -> GeneratedLog:
    # retention checks at start + k * 10 min: one runs at the end of the 1-hour run, so the
    # simulator's final states are what the rules give as of the end of the log
    return generate(
        14,
        1.0,
        seed=5,
        coordinator="new",
        consumer_groups=0.5,
        conversions=0.5,
        conversions_back=0.5,
        retention_check_phase_ms=0,
        share_groups=3,  # the third (k % 3 == 2) loses its members and is deleted: Dead, tombstones
        streams_groups=2,
    )


@pytest.fixture(scope="module")
def batch_io(spark: Any, tmp_path_factory: pytest.TempPathFactory, mixed: GeneratedLog) -> Any:
    return _run_batch(spark, tmp_path_factory.mktemp("generated-batch"), mixed)


def _run_batch(spark: Any, root: Path, log: GeneratedLog) -> Any:
    from pipelines.config import load_config
    from pipelines.inputs.raw_files import RawRecord, write_raw_records
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    truth = log.truth
    cfg = load_config(
        overrides={
            "paths.root": str(root),
            "replay.retention_ms": truth["retention_ms"],
            "replay.as_of_ms": truth["end_ms"],
        }
    )
    raw = zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps)
    write_raw_records([RawRecord(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in raw], cfg.paths.landing)
    io = TableIO(cfg, spark)
    assert run_batch(cfg, spark, io=io).reconciled
    return io


# long: one walk over the generator's truth, checking each table's row for each group
def test_the_batch_job_on_a_generated_mixed_cluster_tells_the_generators_truth(
    batch_io: Any, mixed: GeneratedLog
) -> None:
    io = batch_io
    truth = mixed.truth
    state = {r["group_id"]: r.asDict(recursive=True) for r in io.read("group_state").collect()}
    offsets: dict[str, dict[str, int]] = defaultdict(dict)
    for r in io.read("offsets_current").collect():
        offsets[r["group_id"]][f"{r['topic']}:{r['partition']}"] = r["offset"]
    epochs: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for r in io.read("group_members").where("group_type = 'consumer'").collect():
        epochs[r["group_id"]][r["generation"]][r["member_id"]] = r["member_epoch"]
    kinds: set[tuple[str, str]] = set()
    for gid, t in truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        r = state[gid]
        assert r["state"] == t["final_state"], gid
        assert len(offsets[gid]) == t["live_offsets"], gid
        if t["group_type"] is None:
            continue
        kinds.add((t["group_type"], t["client_protocol"]))
        assert r["group_type"] == t["group_type"] and r["exists"], gid
        assert (r["generation"], r["member_count"]) == (t["generation"], t["members"]), gid
        if t["group_type"] != "consumer":
            continue
        c = t["consumer"]
        assert r["protocol_type"] == "consumer" and r["protocol"] == c["assignor"], gid
        assert offsets[gid] == c["offsets"], gid
        got = {
            m["member_id"]: sorted([p["topic"], p["partition"]] for p in m["assigned_partitions"] or [])
            for m in r["members"]
        }
        assert got == {mid: m["assigned"] for mid, m in c["members"].items()}, gid
        if t["final_state"] == "Stable" and c["members"]:
            # Stable at its group epoch: every member is there at that epoch (group_members)
            at = epochs[gid][c["group_epoch"]]
            assert at and set(at) <= set(c["members"]), gid
            assert all(at[mid] == c["members"][mid]["member_epoch"] == c["group_epoch"] for mid in at), gid
    for gid, t in truth["modern_groups"].items():  # share (KIP-932) and streams (KIP-1071) groups
        r = state[gid]
        assert (r["state"], r["group_type"]) == (t["final_state"], t["group_type"]), gid
        assert (r["generation"], sorted(m["member_id"] for m in r["members"])) == (t["group_epoch"], t["members"]), gid
        # a share group commits nothing here; a streams group's commits are all live (subscribed)
        assert offsets[gid] == t.get("offsets", {}) and r["offsets_kept_in"] == (
            "__share_group_state" if t["group_type"] == "share" else "__consumer_offsets"
        ), gid
        assert t["group_type"] == "share" or t["offsets"], gid
    assert {t["group_type"] for t in truth["modern_groups"].values()} == {"share", "streams"}
    assert any(t["final_state"] == "Dead" for t in truth["modern_groups"].values())  # a share group deleted
    assert ("consumer", "consumer") in kinds and ("classic", "classic") in kinds
    assert ("consumer", "classic") in kinds  # upgraded online
    assert any("downgraded" in t["traits"] and t["group_type"] == "classic" for t in truth["groups"].values())


def test_the_batch_job_on_a_generated_mixed_cluster_equals_the_pure_core(
    spark: Any, batch_io: Any, mixed: GeneratedLog
) -> None:
    """Every gold table of the batch job equals the pure core's (``decode_record(..., modern=True)``
    + ``replay`` per group, ``test_replay_job.core_gold``) at the job's present: as of the end of
    the run, predictions judged up to the newest record less the watermark delay
    (``batch.replay.present``), Kafka 4's coordinator rules (the job's default ``auto``)."""
    from chispa import assert_df_equality

    from pipelines.config import load_config
    from schemas.gold import GOLD_TABLES
    from tests.pipelines.test_replay_job import core_gold

    truth = mixed.truth
    log = list(zip(mixed.keys, mixed.values, mixed.partitions, mixed.offsets, mixed.timestamps, strict=True))
    delay = load_config().stream.watermark_delay_ms
    log_end = min(truth["end_ms"], max(mixed.timestamps) - delay)
    core = core_gold(
        log, retention_ms=truth["retention_ms"], as_of_ms=truth["end_ms"], log_end_ms=log_end, coordinator="auto"
    )
    for spec in GOLD_TABLES:
        want = spark.createDataFrame(core[spec.name].to_pylist(), spec.spark_schema())
        assert_df_equality(batch_io.read(spec.name), want, ignore_row_order=True, ignore_nullable=True)
    state = {r["group_id"]: r for r in core["group_state"].to_pylist()}
    # all four group types in the comparison, the deleted share group Dead
    assert {r["group_type"] for r in state.values()} >= {"classic", "consumer", "share", "streams"}
    dead = [g for g, t in truth["modern_groups"].items() if t["final_state"] == "Dead"]
    assert dead and all((state[g]["state"], state[g]["exists"]) == ("Dead", False) for g in dead)
    moved = {r["group_type"] for r in core["rebalances"].to_pylist()}
    assert moved >= {"classic", "consumer", "share", "streams"}


def test_the_stream_on_a_generated_mixed_cluster_writes_the_tables_of_the_batch(
    spark: Any, tmp_path: Path, mixed: GeneratedLog
) -> None:
    """The same generated mixed cluster through the streaming job, several micro-batches: every
    gold table equals the batch job's functions at the stream's final watermark (the chain
    stream == batch == the generator's truth), consumer groups replayed as consumer groups."""
    from pipelines.inputs.raw_files import RawRecord
    from pipelines.jobs import stream as stream_job
    from pipelines.tableio import TableIO
    from tests.pipelines.test_stream_job import DELAY_MS, assert_gold_equal, batch_gold, land, stream_config

    raw = zip(mixed.keys, mixed.values, mixed.partitions, mixed.offsets, mixed.timestamps, strict=True)
    records = sorted(
        (RawRecord(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in raw),
        key=lambda r: (r.timestamp_ms, r.partition, r.offset),
    )
    landing = tmp_path / "landing"
    land(records, landing, rows_per_file=max(1, len(records) // 5))
    cfg = stream_config(tmp_path)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    assert_gold_equal(spark, cfg, batch_gold(spark, landing, watermark))
    kinds = {r["group_type"] for r in TableIO(cfg, spark).read("group_state").select("group_type").collect()}
    assert kinds >= {"classic", "consumer", "share", "streams"}
