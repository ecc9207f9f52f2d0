"""The streaming replay equals the batch replay; duplicates and overlaps change nothing.

What "equal" means: after ``--available-now`` the stream has replayed every group to its last
record; its final watermark is the newest record time − ``stream.watermark_delay_ms``, so it
states the present as of the newest record (watermark + delay) and judges forecasts against the
log up to the watermark (``pipelines.log_clock``). The batch job states the same present by
default: the same gold tables, current state included, row for row (chispa, row order ignored).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from coordinator_core import ReplaySettings

RETENTION_MS = 20_000
DELAY_MS = 5_000


# ---------------------------------------------------------------------------------------------
# helpers (shared with test_stream_recovery.py)
# ---------------------------------------------------------------------------------------------
def sample_log(groups: int = 12, seed: int = 3) -> list[Any]:
    """A multi-group log (rebalances, Empty groups, deletions) in time order across partitions."""
    from pipelines.inputs.sample import sample_records

    records = sample_records(groups, seed=seed)
    records.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
    return records


def land(records: list[Any], landing: Path, rows_per_file: int, *, mtime_base: int = 1_600_000_000) -> list[Path]:
    """Write raw-record files whose modification times follow their names (the file source's
    order): each new file is one second newer than every file already there."""
    from pipelines.inputs.raw_files import RawRecordWriter

    existing = [int(p.stat().st_mtime) for p in landing.glob("*.parquet")] if landing.is_dir() else []
    base = max([mtime_base - 1, *existing]) + 1
    writer = RawRecordWriter(landing, rows_per_file=rows_per_file)
    writer.write(records)
    files = writer.close()
    for i, f in enumerate(files):
        os.utime(f, (base + i, base + i))
    return files


def stream_config(root: Path, **stream: Any) -> Any:
    from pipelines.config import config_from_dict

    return config_from_dict(
        {
            "paths": {"root": str(root)},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": RETENTION_MS},
            "stream": {"max_files_per_trigger": 3, "watermark_delay_ms": DELAY_MS, **stream},
        }
    )


def final_present(watermark_ms: int, delay_ms: int = DELAY_MS) -> dict[str, int]:
    """What a stream whose final watermark is ``watermark_ms`` states: the present as of the
    watermark + delay (the newest record), forecasts judged up to the watermark — the batch job's
    default (``log_clock.stream_as_of``, ``log_clock.evidence_horizon``)."""
    return {"as_of_ms": watermark_ms + delay_ms, "log_end_ms": watermark_ms}


def batch_gold(spark: Any, landing: Path, watermark_ms: int) -> dict[str, Any]:
    """The gold tables the batch job's functions compute over the landing files at the present a
    stream with final watermark ``watermark_ms`` states (one row per key: the replay keeps the
    last row per event key, as the stream's MERGE does)."""
    from schemas.raw import RAW_RECORDS
    from tests.pipelines.pipeline_helpers import spark_gold

    raw = spark.read.schema(RAW_RECORDS.spark_schema()).parquet(str(landing))
    return spark_gold(spark, raw, retention_ms=RETENTION_MS, **final_present(watermark_ms))


def assert_gold_equal(spark: Any, cfg: Any, expected: dict[str, Any]) -> None:
    from chispa import assert_df_equality

    from pipelines.records.gold import DEFAULT_TABLES
    from pipelines.tableio import TableIO

    io = TableIO(cfg, spark)
    for name in DEFAULT_TABLES:
        got = io.read(name)
        want = expected[name]
        assert got.count() == want.count(), name
        assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


# ---------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def log_records() -> list[Any]:
    return sample_log()


@pytest.fixture(scope="module")
def batch_reference(spark: Any, log_records: list[Any], tmp_path_factory: Any) -> tuple[Path, dict[str, Any], int]:
    landing = tmp_path_factory.mktemp("stream_ref") / "landing"
    land(log_records, landing, rows_per_file=10_000)
    watermark = max(r.timestamp_ms for r in log_records) - DELAY_MS
    gold = batch_gold(spark, landing, watermark)
    return landing, gold, watermark


def test_packed_rows_unpack_to_each_buckets_records_in_replay_order(log_records: list[Any]) -> None:
    """One packed row per state bucket: its newest record time and exactly its groups' rows,
    sorted by (group_id, coordinator_partition, log_offset), whatever order the raw batch had."""
    import random

    import pyarrow as pa

    from pipelines.records.replay_input import pack_buckets, schema, state_bucket_of, unpack_packs

    rows = _replay_input_table(_decoded(log_records)).to_pylist()
    random.Random(7).shuffle(rows)
    table = pa.Table.from_pylist(rows, schema=schema())
    buckets = 8
    packed = pack_buckets(table, buckets).to_pylist()
    of_row = state_bucket_of(table.column("group_id"), buckets).tolist()
    assert sorted(p["state_bucket"] for p in packed) == sorted(set(of_row))
    for p in packed:
        got = unpack_packs([p["records"]]).to_pylist()
        want = sorted(
            (r for r, b in zip(rows, of_row, strict=True) if b == p["state_bucket"]),
            key=lambda r: (r["group_id"], r["coordinator_partition"], r["log_offset"]),
        )
        assert got == want
        newest = max(r["log_timestamp_ms"] for r in want)
        assert int(p["log_timestamp"].timestamp() * 1000) == newest


def test_a_bucket_without_members_packs_only_its_own_rows(log_records: list[Any]) -> None:
    """A bucket whose rows hold no member (commits only) is packed as small as its rows: Arrow's
    IPC writer would copy other rows' member structs into a slice's message (``pack_buckets``)."""
    import pyarrow as pa

    from pipelines.records.replay_input import REC_OFFSET_COMMIT, pack_buckets, schema, state_bucket_of, unpack_packs

    rows = _replay_input_table(_decoded(log_records)).to_pylist()
    assert any(r["members"] for r in rows)
    buckets = 1 << 20  # the commits-only group alone in its bucket
    commits = [dict(r, group_id="~commits-only") for r in rows if r["rec_kind"] == REC_OFFSET_COMMIT][:3]
    table = pa.Table.from_pylist(rows + commits, schema=schema())
    alone = int(state_bucket_of(pa.array(["~commits-only"]), buckets)[0])
    assert list(state_bucket_of(table.column("group_id"), buckets)).count(alone) == len(commits)
    packed = {p["state_bucket"]: p["records"] for p in pack_buckets(table, buckets).to_pylist()}
    blob = packed[alone]
    assert unpack_packs([blob]).to_pylist() == commits
    own = pa.Table.from_pylist(commits, schema=schema()).to_batches()[0].serialize().size
    assert len(blob) <= own + 512, (len(blob), own)


@pytest.mark.spark
def test_the_state_bucket_is_sparks_pmod_xxhash64(spark: Any) -> None:
    """``state_bucket_of`` (numpy, in the source's tasks) is Spark's
    ``pmod(xxhash64(group_id), B)``, which keyed the state of checkpoints written before the
    packs carried the bucket: every length class of XXH64 (stripes, words, a 4-byte word, tail
    bytes), multi-byte UTF-8, a null, and ids longer than the vectorised width."""
    import random
    import string

    import pyarrow as pa
    from pyspark.sql import functions as F

    from pipelines.records.replay_input import spark_xxhash64, state_bucket_of

    rng = random.Random(3)
    ids: list[str | None] = ["", "a", "abcd", "abcde", "consumer-group-7", "é漢字🙂" * 7, None, "x" * 300, "y" * 1000]
    ids += ["".join(rng.choices(string.printable, k=rng.randint(0, 120))) for _ in range(500)]
    df = spark.createDataFrame(list(enumerate(ids)), "i int, g string")
    got = df.select("i", F.xxhash64("g").alias("h"), F.pmod(F.xxhash64("g"), F.lit(256)).alias("b")).collect()
    want = {r["i"]: (r["h"], r["b"]) for r in got}
    hashes = spark_xxhash64(pa.array(ids)).tolist()
    buckets = state_bucket_of(pa.array(ids), 256).tolist()
    assert [(hashes[i], buckets[i]) for i in range(len(ids))] == [want[i] for i in range(len(ids))]


def _decoded(raw: list[Any]) -> list[Any]:
    from coordinator_core import LogRecord, decode_record

    out = []
    for r in raw:
        rec = decode_record(r.key, r.value, modern=True)
        out.append(LogRecord(r.partition, r.offset, r.timestamp_ms, rec.key, rec.value))
    return out


@pytest.mark.spark
def test_stream_in_small_files_equals_batch_at_the_final_watermark(
    spark: Any, log_records: list[Any], batch_reference: Any, tmp_path: Path
) -> None:
    from pipelines.jobs import stream as stream_job
    from pipelines.tableio import TableIO

    _, gold, watermark = batch_reference
    land(log_records, tmp_path / "landing", rows_per_file=25)
    cfg = stream_config(tmp_path)
    recorder = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)

    batches = [r for r in recorder.rows if r["query_name"] == stream_job.REPLAY_QUERY]
    assert len(batches) >= 5  # many micro-batches, not one
    final_wm = max(r["watermark"] for r in batches if r["watermark"] is not None)
    assert int(final_wm.timestamp() * 1000) == watermark
    assert_gold_equal(spark, cfg, gold)

    io = TableIO(cfg, spark)
    exp = io.read("offset_expirations").where("cause = 'retention'").count()
    assert exp > 0  # Empty groups went silent and their offsets expired on the watermark
    progress = io.read("stream_progress").where(f"query_name = '{stream_job.REPLAY_QUERY}'")
    assert progress.count() == len(batches)

    # a job killed between a batch's commit and its progress poll: the next start rebuilds the
    # missing rows from the checkpoint (the raw records read, the watermark, the trigger time)
    import pyarrow as pa

    from pipelines.stream.progress import reconstruct_progress
    from pipelines.stream.settings import settings_from_config

    def rows() -> dict[int, Any]:
        got = io.read("stream_progress").where(f"query_name = '{stream_job.REPLAY_QUERY}'").collect()
        return {int(r["batch_id"]): r for r in got}

    before = rows()
    lost = sorted(before)[1:3]
    io.delete_keys(
        "stream_progress",
        pa.table({"query_name": [stream_job.REPLAY_QUERY] * len(lost), "batch_id": pa.array(lost, pa.int64())}),
    )
    assert set(rows()) == set(before) - set(lost)
    checkpoint = settings_from_config(cfg).replay_checkpoint
    assert reconstruct_progress(io, stream_job.REPLAY_QUERY, checkpoint) == len(lost)
    after = rows()
    assert set(after) == set(before)
    for bid in lost:
        assert after[bid]["input_rows"] == before[bid]["input_rows"]
        assert after[bid]["watermark"] == before[bid]["watermark"]
        assert after[bid]["batch_duration_ms"] is None  # not in the checkpoint: unknown
    assert reconstruct_progress(io, stream_job.REPLAY_QUERY, checkpoint) == 0  # nothing missing now


@pytest.mark.spark
def test_same_file_landed_twice_and_overlapping_capture_change_nothing(
    spark: Any, log_records: list[Any], batch_reference: Any, tmp_path: Path
) -> None:
    """The stream's landing reader (Spark's file source is refused for landing files:
    ``test_the_stream_refuses_to_read_landing_files_with_sparks_file_source``)."""
    from pipelines.jobs import stream as stream_job

    _, gold, _ = batch_reference
    landing = tmp_path / "landing"
    n = len(log_records)
    first = land(log_records[: n // 2], landing, rows_per_file=40)
    # the same file landed again under a new name, then an overlapping capture of the rest
    dup = landing / "part-00000900.parquet"
    shutil.copy(first[-1], dup)
    newest = max(int(p.stat().st_mtime) for p in first)
    os.utime(dup, (newest + 1, newest + 1))
    land(log_records[n // 2 - 30 :], landing, rows_per_file=40)
    cfg = stream_config(tmp_path)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    assert_gold_equal(spark, cfg, gold)


@pytest.mark.spark
def test_stream_decoded_tables_are_decoded_once_and_leave_out_refused_copies_as_the_batch_decode_does(
    spark: Any, tmp_path: Path
) -> None:
    """The replay query writes the decoded tables from what its landing source decoded (no second
    query decodes the files again): a position whose copies disagree is refused into
    ``ingest_quarantine`` and is in no decoded table (the batch job decodes ``raw_records``); an
    identical copy is written once; the batch's plan directory is emptied."""
    from pipelines.jobs import stream as stream_job
    from pipelines.stream.settings import settings_from_config
    from pipelines.stream.source import FACTS_DIR, plan_dir
    from pipelines.tableio import TableIO

    records = sample_log(4, seed=3)
    landing = tmp_path / "landing"
    land(records, landing, rows_per_file=200)
    commit = next(r for r in reversed(records) if r.key[1] in (0, 1) and r.value is not None)
    fresh = commit._replace(offset=900_000)
    twin = fresh._replace(value=fresh.value + b"\x00")
    land([fresh, twin, records[5]], landing, rows_per_file=10)
    cfg = stream_config(tmp_path, max_files_per_trigger=10)
    stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)

    io = TableIO(cfg, None, engine="rust")
    commits = io.read_arrow("offset_commits", ["coordinator_partition", "log_offset"])
    assert commits is not None
    positions = list(zip(*(c.to_pylist() for c in commits.columns), strict=True))
    assert len(positions) == len(set(positions)) == sum(1 for r in records if r.key[1] in (0, 1))
    assert (fresh.partition, 900_000) not in positions
    assert io.count("ingest_quarantine") == 2
    settings = settings_from_config(cfg)
    assert not os.path.exists(settings.quarantine_checkpoint)  # the files were decoded once
    plans = plan_dir(settings)
    assert plans is not None and [n for n in os.listdir(plans) if n != FACTS_DIR] == []  # facts stay


def test_split_calls_with_timers_equal_one_replay(log_records: list[Any]) -> None:
    """The stateful function's pure part: a bucket's groups carried across calls (chunks of the
    log in log order, several groups per call) + a timer call at the end give the same snapshot
    per group as one replay of everything at that as_of."""
    from coordinator_core import LogRecord, decode_record, replay_groups
    from pipelines.records.carried import BucketReplayer, snapshot_of_entry
    from pipelines.records.gold import DEFAULT_TABLES

    fn = BucketReplayer(ReplaySettings(retention_ms=RETENTION_MS, rules="current"), tuple(DEFAULT_TABLES), 50)
    logs = []
    for r in log_records:
        rec = decode_record(r.key, r.value, modern=True)
        logs.append(LogRecord(r.partition, r.offset, r.timestamp_ms, rec.key, rec.value))
    as_of = max(r.timestamp_ms for r in logs) - DELAY_MS
    want = replay_groups(logs, settings=ReplaySettings(retention_ms=RETENTION_MS), as_of_ms=as_of)
    groups: dict[str, Any] = {}
    wm = 0
    for i in range(0, len(logs), 7):  # chunks of 7 records, watermark trailing by DELAY_MS
        chunk = logs[i : i + 7]
        groups, _out, timer = fn.replay_bucket(groups, _replay_input_table(chunk), wm)
        wm = max(wm, max(r.timestamp_ms for r in chunk) - DELAY_MS)
    groups, _out, timer = fn.replay_bucket(groups, None, as_of)
    assert set(groups) == set(want)
    for group, result in want.items():
        got = snapshot_of_entry(groups[group])
        assert got.offsets == result.snapshot.offsets, group
        assert got.state == result.snapshot.state, group
    assert timer is None or timer >= as_of


def test_a_bucket_an_earlier_release_wrote_carries_on_to_the_same_groups_and_rows(log_records: list[Any]) -> None:
    """A checkpoint's buckets hold the snapshot bytes (format 2) a release before the plain
    values wrote: the calls after read them and give the same groups and changed rows as a run
    that kept plain values throughout, and write plain values from then on."""
    from coordinator_core import SNAPSHOT_FORMAT_VERSION, VALUES_FORMAT_VERSION, decode_record, serialize_snapshot
    from coordinator_core import LogRecord as Rec
    from pipelines.records.carried import BucketReplayer, decode_bucket, encode_bucket, snapshot_of_entry
    from pipelines.records.gold import DEFAULT_TABLES

    fn = BucketReplayer(ReplaySettings(retention_ms=RETENTION_MS, rules="current"), tuple(DEFAULT_TABLES), 50)
    logs = []
    for r in log_records:
        rec = decode_record(r.key, r.value, modern=True)
        logs.append(Rec(r.partition, r.offset, r.timestamp_ms, rec.key, rec.value))
    chunks = [logs[i : i + 50] for i in range(0, len(logs), 50)]
    half = len(chunks) // 2
    groups: dict[str, Any] = {}
    for chunk in chunks[:half]:
        groups, _out, _timer = fn.replay_bucket(groups, _replay_input_table(chunk), chunk[0].timestamp_ms - DELAY_MS)
    assert groups and {e[0] for e in groups.values()} == {VALUES_FORMAT_VERSION}
    old = {g: (SNAPSHOT_FORMAT_VERSION, serialize_snapshot(snapshot_of_entry(e)), e[2]) for g, e in groups.items()}
    old = decode_bucket(encode_bucket(old))
    for chunk in chunks[half:]:
        wm = chunk[0].timestamp_ms - DELAY_MS
        groups, out, timer = fn.replay_bucket(groups, _replay_input_table(chunk), wm)
        old, old_out, old_timer = fn.replay_bucket(old, _replay_input_table(chunk), wm)
        assert (old_out, old_timer) == (out, timer)
    assert {g: snapshot_of_entry(e) for g, e in old.items()} == {g: snapshot_of_entry(e) for g, e in groups.items()}
    assert any(e[0] == SNAPSHOT_FORMAT_VERSION for e in old.values())  # groups the second half left alone
    assert any(e[0] == VALUES_FORMAT_VERSION for e in old.values())


def test_a_snapshot_format_this_release_does_not_know_is_refused_by_name() -> None:
    """Every refusal begins with ``KEPT_STATE`` (``kept_state_refusal`` finds it, the CLI tells it
    in one line); only an unknown format says a newer release wrote it."""
    from pipelines.errors import KEPT_STATE, kept_state_refusal
    from pipelines.records.carried import snapshot_of_entry

    newer = ((4, ("g",), None), (7, b"\x02", None))
    corrupt = ((2, ("g",), None), (3, ("g", 99), None), (3, (), None), (2, b"\x02\xff", None), (0, b"\x02", None))
    for entry in (*newer, *corrupt):
        with pytest.raises(ValueError, match="does not read") as info:
            snapshot_of_entry(entry)
        assert str(info.value).startswith(f"{KEPT_STATE} has format {entry[0]}"), info.value
        assert kept_state_refusal(info.value) == str(info.value)
        assert ("newer release" in str(info.value)) == (entry in newer), info.value


def test_split_calls_with_a_watermark_delay_state_the_batchs_present(log_records: list[Any]) -> None:
    """Issue 33: with the watermark trailing the newest record by the delay, the stateful
    function's calls (chunks, then the final no-data call at the final watermark) state each group
    as one replay of everything does at the batch's present: as of the newest record, forecasts
    judged up to the newest record − delay. Due is not dead in both: a forecast whose window has
    not passed keeps its offsets and the group Empty."""
    from coordinator_core import LogRecord, decode_record, replay_groups
    from pipelines.records.carried import BucketReplayer, snapshot_of_entry
    from pipelines.records.gold import DEFAULT_TABLES

    settings = ReplaySettings(retention_ms=RETENTION_MS, rules="current", cleanup_interval_ms=30_000)
    fn = BucketReplayer(settings, tuple(DEFAULT_TABLES), 50, DELAY_MS)
    logs = []
    for r in log_records:
        rec = decode_record(r.key, r.value, modern=True)
        logs.append(LogRecord(r.partition, r.offset, r.timestamp_ms, rec.key, rec.value))
    newest = max(r.timestamp_ms for r in logs)
    want = replay_groups(logs, settings=settings, **final_present(newest - DELAY_MS))
    groups: dict[str, Any] = {}
    wm = 0
    for i in range(0, len(logs), 7):
        chunk = logs[i : i + 7]
        groups, _out, _timer = fn.replay_bucket(groups, _replay_input_table(chunk), wm)
        wm = max(wm, max(r.timestamp_ms for r in chunk) - DELAY_MS)
    groups, _out, timer = fn.replay_bucket(groups, None, wm)
    assert wm == newest - DELAY_MS and set(groups) == set(want)
    due = 0
    for group, result in want.items():
        got = snapshot_of_entry(groups[group])
        assert (got.state, got.exists, dict(got.offsets)) == (
            result.snapshot.state,
            result.snapshot.exists,
            dict(result.snapshot.offsets),
        ), group
        assert got.forecast_columns(settings) == result.snapshot.forecast_columns(settings), group
        due += got.forecast_columns(settings)["offsets_due"]
    assert due > 0  # offsets due, not yet removed, at the present both state
    assert timer is None or timer >= wm


def test_a_timer_call_replays_only_the_due_groups(log_records: list[Any]) -> None:
    """A bucket call without records replays the groups whose timer is due (watermark > timer)
    and leaves the others' state bytes as they were; the bucket's timer is the earliest."""
    from coordinator_core import LogRecord, decode_record
    from pipelines.records.carried import BucketReplayer
    from pipelines.records.gold import DEFAULT_TABLES

    fn = BucketReplayer(ReplaySettings(retention_ms=RETENTION_MS, rules="current"), tuple(DEFAULT_TABLES), 50)
    logs = []
    for r in log_records:
        rec = decode_record(r.key, r.value, modern=True)
        logs.append(LogRecord(r.partition, r.offset, r.timestamp_ms, rec.key, rec.value))
    wm = min(r.timestamp_ms for r in logs)
    groups, _out, timer = fn.replay_bucket({}, _replay_input_table(logs), wm)
    timers = {g: e[2] for g, e in groups.items() if e[2] is not None}
    assert timers and timer == min(timers.values())
    # a watermark past the earliest timer only
    first = min(timers.values())
    later = sorted(t for t in timers.values() if t > first)
    wm2 = first + 1 if not later else min(first + 1, later[0])
    due = {g for g, t in timers.items() if wm2 > t}
    after, out, _ = fn.replay_bucket(groups, None, wm2)
    assert due and due != set(groups)
    for g in groups:
        if g not in due:
            assert after[g] == groups[g], g  # untouched
    touched = {r["group_id"] for r in out.get("group_state", [])}
    assert touched == due


def _replay_input_table(records: list[Any]) -> Any:
    """Replay-input rows (``REPLAY_INPUT_DDL``) for core records, via the batch's own mapping."""
    import pyarrow as pa

    from coordinator_core import GroupMetadataKey, OffsetCommitKey
    from pipelines.records.replay_input import schema as replay_input_schema

    rows = []
    for r in records:
        row: dict[str, Any] = {
            "group_id": r.key.group,
            "coordinator_partition": r.partition,
            "log_offset": r.offset,
            "log_timestamp_ms": r.timestamp_ms,
            "is_tombstone": r.value is None,
            "key_version": r.key.version,
        }
        if isinstance(r.key, OffsetCommitKey):
            row.update(rec_kind=0, topic=r.key.topic, partition=r.key.partition)
            if r.value is not None:
                v = r.value
                row.update(
                    value_version=v.version,
                    committed_offset=v.offset,
                    leader_epoch=v.leader_epoch,
                    metadata=v.metadata,
                    commit_timestamp_ms=v.commit_timestamp,
                    expire_timestamp_ms=v.expire_timestamp,
                )
        elif not isinstance(r.key, GroupMetadataKey):  # a Kafka 4 group record: its raw bytes
            from coordinator_core import Record, encode_record
            from pipelines.records.replay_input import REC_GROUP_RECORD

            key, value = encode_record(Record(r.key, r.value))
            row.update(rec_kind=REC_GROUP_RECORD, raw_key=key, raw_value=value)
        else:
            row.update(rec_kind=1)
            if r.value is not None:
                v = r.value
                row.update(
                    value_version=v.version,
                    protocol_type=v.protocol_type,
                    generation=v.generation,
                    protocol=v.protocol,
                    leader=v.leader,
                    current_state_timestamp_ms=v.current_state_timestamp,
                    members=[
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "rebalance_timeout": m.rebalance_timeout,
                            "session_timeout": m.session_timeout,
                            "subscription": m.subscription,
                            "assignment": m.assignment,
                        }
                        for m in v.members
                    ],
                )
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=replay_input_schema())


@pytest.mark.spark
def test_silent_empty_group_expires_only_when_the_watermark_passes_its_due_time(
    spark: Any, log_records: list[Any], batch_reference: Any, tmp_path: Path
) -> None:
    """A group that went Empty and wrote nothing more: its offsets expire from the event-time
    timer (no record of the group arrives), after a restart from the checkpoint, once the
    watermark reaches Empty time + retention — and the rows equal the batch's."""
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    from pipelines.jobs import stream as stream_job
    from pipelines.tableio import TableIO

    _, gold, _ = batch_reference
    exp = gold["offset_expirations"].where("cause = 'retention'")
    first = exp.orderBy("predicted_time").first()
    assert first is not None
    group = first["group_id"]
    due_ms = int(first["predicted_time"].timestamp() * 1000)
    last_of_group = max(r.timestamp_ms for r in log_records if _group_of(r) == group)
    assert last_of_group < due_ms  # silent: nothing of the group after it went Empty

    landing = tmp_path / "landing"
    # the present the stream states (its watermark + delay: the newest record) stays before due
    cut = [r for r in log_records if r.timestamp_ms < due_ms]
    land(cut, landing, rows_per_file=30)
    cfg = stream_config(tmp_path)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    io = TableIO(cfg, spark)
    assert io.read("offset_expirations").where(F.col("group_id") == group).count() == 0
    held = io.read("offsets_current").where(F.col("group_id") == group).count()
    assert held > 0

    land(log_records[len(cut) :], landing, rows_per_file=30)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    got = io.read("offset_expirations").where(F.col("group_id") == group)
    want = gold["offset_expirations"].where(F.col("group_id") == group)
    assert got.count() == held
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
    # due is not dead: what is still held at the present (inside the cleanup window, no tombstone
    # yet) is what the batch holds at the same present
    still = gold["offsets_current"].where(F.col("group_id") == group).count()
    assert io.read("offsets_current").where(F.col("group_id") == group).count() == still


def _group_of(raw: Any) -> str:
    from coordinator_core import decode_key

    return str(decode_key(raw.key).group)


@pytest.mark.spark
@pytest.mark.slow
def test_stream_from_earliest_on_a_compacted_kafka4_capture_equals_batch(spark: Any, tmp_path: Path) -> None:
    """Issue 13: a compacted capture written by Kafka 4's coordinator (idle partitions, offset-less
    groups, mass restarts), streamed from earliest in small files, gives the batch job's tables."""
    from coordinator_core.simulator.generator import generate
    from pipelines.config import config_from_dict
    from pipelines.inputs.raw_files import RawRecord
    from pipelines.jobs import stream as stream_job
    from schemas.raw import RAW_RECORDS
    from tests.pipelines.pipeline_helpers import spark_gold

    log = generate(groups=10, hours=1.0, seed=11, coordinator="new", compaction="cleaned", retention_ms=10 * 60_000)
    records = [
        RawRecord(k, v, "__consumer_offsets", p, o, ts)
        for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps)
    ]
    records.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
    assert log.truth["compaction"]["mode"] == "cleaned"
    retention = log.truth["retention_ms"]
    land(records, tmp_path / "landing", rows_per_file=2_000)
    cfg = config_from_dict(
        {
            "paths": {"root": str(tmp_path)},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": retention},
            "stream": {"max_files_per_trigger": 4, "watermark_delay_ms": DELAY_MS},
        }
    )
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    raw = spark.read.schema(RAW_RECORDS.spark_schema()).parquet(str(tmp_path / "landing"))
    assert_gold_equal(spark, cfg, spark_gold(spark, raw, retention_ms=retention, **final_present(watermark)))


def test_a_checkpoint_of_another_state_layout_is_refused(tmp_path: Path) -> None:
    """A new checkpoint gets the layout file before its query starts; one of the per-group
    layout (progress, no layout file) or of another bucket count is refused with one line."""
    import json

    from pipelines.errors import UsageError
    from pipelines.stream.state import LAYOUT_FILE, STATE_BUCKETS, STATE_LAYOUT_VERSION, check_state_layout

    fresh = tmp_path / "fresh"
    check_state_layout(str(fresh))
    assert json.loads((fresh / LAYOUT_FILE).read_text()) == {"layout": STATE_LAYOUT_VERSION, "buckets": STATE_BUCKETS}
    check_state_layout(str(fresh))  # the same layout resumes

    old = tmp_path / "per_group"
    (old / "offsets").mkdir(parents=True)
    (old / "offsets" / "0").write_text("v1\n")
    with pytest.raises(UsageError, match=r"holds state layout 1 \(one state row per group\)"):
        check_state_layout(str(old))
    assert not (old / LAYOUT_FILE).exists()

    other = tmp_path / "other"
    other.mkdir()
    (other / LAYOUT_FILE).write_text(json.dumps({"layout": STATE_LAYOUT_VERSION, "buckets": STATE_BUCKETS * 2}))
    with pytest.raises(UsageError, match="move the checkpoint aside"):
        check_state_layout(str(other))


@pytest.mark.parametrize(
    ("coordinator", "shape"),
    [
        ("new", {"consumer_groups": 0.5, "conversions": 0.3}),  # Kafka 4: KIP-848 groups, online upgrades
        ("old", {}),  # Kafka 3's coordinator and records
    ],
)
def test_one_bucket_of_a_compacted_cluster_log_equals_the_core_replay(
    coordinator: str, shape: dict[str, float]
) -> None:
    """Every group of a compacted cluster log (offsets skip; idle partitions, groups that never
    commit, mass restarts) in ONE state bucket, fed through the project's decoder in log-order
    chunks with a trailing watermark, then a timer call two retentions after the log: each
    group's snapshot equals the core's replay of its records at that as_of."""
    import pyarrow as pa

    from coordinator_core import LogRecord, decode_record, replay_groups
    from coordinator_core.simulator.generator import generate
    from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA
    from pipelines.records import replay_input
    from pipelines.records.carried import BucketReplayer, snapshot_of_entry
    from pipelines.records.decode import decode_batch, split_union_arrow
    from pipelines.records.gold import DEFAULT_TABLES

    log = generate(
        groups=10, hours=1.0, seed=13, coordinator=coordinator, compaction="cleaned", retention_ms=10 * 60_000, **shape
    )
    assert log.truth["compaction"]["mode"] == "cleaned"
    retention = log.truth["retention_ms"]
    settings = ReplaySettings(retention_ms=retention, coordinator=coordinator)  # type: ignore[arg-type]
    n = len(log.keys)
    raw = pa.RecordBatch.from_arrays(
        [
            pa.array(log.keys, pa.binary()),
            pa.array(log.values, pa.binary()),
            pa.array(["__consumer_offsets"] * n, pa.string()),
            pa.array(log.partitions, pa.int32()),
            pa.array(log.offsets, pa.int64()),
            pa.array(log.timestamps, pa.int64())
            .cast(pa.timestamp("ms", tz="UTC"))
            .cast(RAW_ARROW_SCHEMA.field("timestamp").type),
            pa.array([0] * n, pa.int32()),
        ],
        schema=RAW_ARROW_SCHEMA,
    )
    order = sorted(range(n), key=lambda i: log.timestamps[i])  # log order across partitions
    fn = BucketReplayer(settings, tuple(DEFAULT_TABLES), 50)
    groups: dict[str, Any] = {}
    wm = 0
    for lo in range(0, n, 1_500):
        chunk = raw.take(pa.array(order[lo : lo + 1_500]))
        parts = [split_union_arrow(u) for u in decode_batch(chunk)]
        rows = pa.concat_tables([replay_input.project_tables(p) for p in parts])
        groups, _out, _timer = fn.replay_bucket(groups, rows, wm)
        wm = max(wm, max(log.timestamps[i] for i in order[lo : lo + 1_500]) - DELAY_MS)
    as_of = max(log.timestamps) + 2 * retention  # the watermark long after the log: expiries fall due
    groups, out, timer = fn.replay_bucket(groups, None, as_of)
    assert out.get("offset_expirations")  # the timer call replayed the due groups

    records = []
    for i in order:
        rec = decode_record(log.keys[i], log.values[i], modern=True)
        records.append(LogRecord(log.partitions[i], log.offsets[i], log.timestamps[i], rec.key, rec.value))
    want = replay_groups(records, settings=settings, as_of_ms=as_of, log_end_ms=as_of)
    assert len(want) >= 10 and set(groups) == set(want)
    for group, result in want.items():
        assert snapshot_of_entry(groups[group]) == result.snapshot, group
    assert timer is None or timer >= as_of
