"""Nothing lost, nothing silently wrong (issue 19): one writer per warehouse, positions validated
at ingest, conflicting duplicates kept with both copies, a robust log clock, the stream's file
order, cleanup after a failed attempt, secrets never printed, and every failure as one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config import Config, load_config
from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA, RawRecord, records_to_batch, write_raw_records
from pipelines.inputs.sample import sample_records

REPO = Path(__file__).resolve().parents[2]
SPARK = pytest.mark.spark


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(overrides={"paths.root": str(tmp_path / "data")})


def _conf_file(tmp_path: Path, extra: str = "") -> Path:
    conf = tmp_path / "test.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\n{extra}")
    return conf


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from pipelines.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line(err: str) -> str:
    """The one error line of a failed command (progress lines aside), with no trace around it."""
    assert "Traceback" not in err and "\tat " not in err, err[-3000:]
    lines = [
        ln for ln in err.splitlines() if ln.startswith("offsetlake ") and (": error: " in ln or ": failed: " in ln)
    ]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def _rows(io: Any, name: str) -> list[dict[str, Any]]:
    """A table's rows (timestamps as integers: a hostile one may be past year 9999)."""
    from deltalake import DeltaTable

    t = DeltaTable(io.path(name)).to_pyarrow_table()
    cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in t.columns]
    return pa.Table.from_arrays(cols, names=t.column_names).to_pylist()


def _write_table(path: Path, columns: dict[str, pa.Array]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


# --------------------------------------------------------------------------------------------
# one writer per warehouse


def _hold_lock(warehouse: str, command: str) -> subprocess.Popen[str]:
    code = (
        "import sys, time\nfrom pipelines.warehouse.lock import WarehouseLock\n"
        "WarehouseLock(sys.argv[1], sys.argv[2]).acquire()\nprint('held', flush=True)\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, warehouse, command], cwd=REPO, text=True, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@SPARK
def test_a_second_writer_is_refused_with_one_line_naming_the_holder_and_a_dead_holder_is_taken_over(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(tmp_path)
    cfg = load_config(conf)
    write_raw_records(sample_records(3, seed=5), cfg.paths.landing)
    holder = _hold_lock(cfg.paths.warehouse, "offsetlake stream")
    try:
        for job in (["run", "batch"], ["run", "batch", "--json"]):
            rc, _, err = _cli([*job, "--conf", str(conf)], capsys)
            line = _one_line(err)
            assert rc == 2 and f"pid {holder.pid}" in line and "offsetlake stream" in line, err
        from pipelines.jobs.batch import run_batch
        from pipelines.warehouse.lock import WarehouseBusyError

        with pytest.raises(WarehouseBusyError):  # the replay stage alone as well
            run_batch(cfg, spark, stages=("replay",))
        assert not Path(cfg.table_path("raw_records")).exists()  # nothing was written
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the killed holder's lock is released by the kernel: the next run takes it over
    rc, out, err = _cli(["run", "batch", "--conf", str(conf), "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["reconciled"]
    assert "took over the warehouse lock" in err and str(holder.pid) in err


@SPARK
def test_two_batch_processes_at_once_never_both_write(tmp_path: Path) -> None:
    """Two real `offsetlake run batch` processes on one warehouse: one runs, the other is
    refused with exit 2 and one line; raw_records holds every position once. The winner's input
    repeats itself (the duplicate-dropping path): its stderr holds no Spark ERROR line."""
    conf = _conf_file(tmp_path, "spark:\n  master: local[1]\n")
    cfg = load_config(conf)
    write_raw_records(sample_records(4, seed=2), cfg.paths.landing)
    write_raw_records(sample_records(4, seed=2)[:30], cfg.paths.landing)  # re-delivered
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    exe = str(Path(sys.executable).parent / "offsetlake")
    procs = [
        subprocess.Popen(
            [exe, "run", "batch", "--conf", str(conf), "--json"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [r[1][-2000:] for r in results]
    loser = next(r for p, r in zip(procs, results, strict=True) if p.returncode == 2)
    winner = next(r for p, r in zip(procs, results, strict=True) if p.returncode == 0)
    assert "is in use by pid" in _one_line(loser[1])
    assert json.loads(winner[0][winner[0].index("{") :])["duplicates"] == 30
    assert " ERROR " not in winner[1] and "Traceback" not in winner[1], winner[1][-3000:]
    from deltalake import DeltaTable

    raw = DeltaTable(cfg.table_path("raw_records")).to_pyarrow_table(columns=["partition", "offset"])
    positions = list(zip(raw.column("partition").to_pylist(), raw.column("offset").to_pylist(), strict=True))
    assert len(positions) == len(set(positions)) == len(sample_records(4, seed=2))


# --------------------------------------------------------------------------------------------
# positions validated at ingest


def _valid(n_groups: int = 3, seed: int = 4) -> list[RawRecord]:
    return sample_records(n_groups, seed=seed)


@SPARK
def test_bad_positions_are_refused_into_ingest_quarantine_and_never_poison_raw_records(cfg: Config, spark: Any) -> None:
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    good = _valid()
    write_raw_records(good, cfg.paths.landing)
    template = records_to_batch(good[:20])
    landing = Path(cfg.paths.landing)
    # 20 rows with null offsets / partitions / a partition outside 0..49, in one file
    offs = pa.array([None] * 8 + [10_000 + i for i in range(12)], pa.int64())
    parts = pa.array([5] * 8 + [None] * 6 + [2147483647] * 3 + [-1] * 3, pa.int32())
    cols = {n: template.column(n) for n in RAW_ARROW_SCHEMA.names}
    cols["offset"], cols["partition"] = offs, parts
    _write_table(landing / "bad-00000000.parquet", cols)
    # a file without any offset column at all
    no_offset = {n: template.column(n) for n in RAW_ARROW_SCHEMA.names if n != "offset"}
    _write_table(landing / "nooffset-00000000.parquet", no_offset)
    io = TableIO(cfg, spark)
    summary = run_batch(cfg, spark, io=io)
    assert summary.records_read == len(good) + 40
    assert summary.records_new == len(good) and summary.raw_total == len(good)
    assert summary.refused == 40
    assert summary.refused_reasons == {"null_position": 34, "partition_out_of_range": 6}
    assert summary.records_read == summary.records_new + (summary.records_read - summary.records_new - 40) + 40
    assert summary.reconciled and summary.decoded == len(good)
    assert any("40 input records refused" in w for w in summary.warnings)
    rows = _rows(io, "ingest_quarantine")
    assert len(rows) == 40  # every refused record kept with its bytes (none collapsed)
    assert sorted({r["source_file"].rsplit("/", 1)[-1] for r in rows}) == [
        "bad-00000000.parquet",
        "nooffset-00000000.parquet",
    ]
    assert {bytes(r["key"]) for r in rows} <= {bytes(k) for k in template.column("key").to_pylist()}
    details = {r["detail"] for r in rows}
    assert "offset is null" in details and "partition is null" in details
    assert "partition 2147483647 outside 0..49 (offsets_topic.num_partitions)" in details
    # a rerun adds nothing anywhere, and after the bad files are gone the next runs still succeed
    again = run_batch(cfg, spark, io=io)
    assert again.records_new == 0 and len(_rows(io, "ingest_quarantine")) == 40
    (landing / "bad-00000000.parquet").unlink()
    (landing / "nooffset-00000000.parquet").unlink()
    write_raw_records([r._replace(offset=r.offset + 10_000) for r in good[:5]], landing)
    after = run_batch(cfg, spark, io=io)
    assert after.records_new == 5 and after.reconciled


@SPARK
def test_conflicting_duplicates_are_quarantined_with_both_copies_and_identical_ones_counted(
    cfg: Config, spark: Any
) -> None:
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    good = _valid()
    landing = Path(cfg.paths.landing)
    write_raw_records(good, landing)
    io = TableIO(cfg, spark)
    run_batch(cfg, spark, io=io)
    commits = [r for r in good if r.value is not None and r.key[:2] == b"\x00\x01"]
    target = commits[3]
    changed = target._replace(value=target.value[:-1] + bytes([target.value[-1] ^ 0xFF]))  # type: ignore[index]
    # a new position the input disagrees about (two copies), plus an identical re-delivery
    fresh_pos = target._replace(offset=99_999)
    twin = fresh_pos._replace(value=b"\x00\x03" + b"\x00" * 20)
    # (the committed copy re-delivered next to a changed one: a duplicate, not a conflict)
    write_raw_records([changed, good[0], fresh_pos, target], landing)
    write_raw_records([twin], landing)
    summary = run_batch(cfg, spark, io=io)
    assert summary.records_read == len(good) + 5
    assert summary.records_new == 0 and summary.refused == 3
    assert summary.records_read - summary.records_new - summary.refused == len(good) + 2  # identical copies
    raw = {(r["partition"], r["offset"]): bytes(r["value"]) for r in _rows(io, "raw_records") if r["value"] is not None}
    assert raw[(target.partition, target.offset)] == target.value  # the committed copy stays
    assert (target.partition, 99_999) not in raw
    rows = sorted(_rows(io, "ingest_quarantine"), key=lambda r: (r["offset"], bytes(r["value"])))
    assert [r["reason"] for r in rows] == ["conflicting_duplicate"] * 3
    vs_raw = next(r for r in rows if r["offset"] == target.offset)
    assert (bytes(vs_raw["value"]), bytes(vs_raw["other_value"]), vs_raw["other_in_raw_records"]) == (
        changed.value,
        target.value,
        True,
    )
    pair = [r for r in rows if r["offset"] == 99_999]
    assert {(bytes(r["value"]), bytes(r["other_value"])) for r in pair} == {
        (fresh_pos.value, twin.value),
        (twin.value, fresh_pos.value),
    }
    assert all(r["other_in_raw_records"] is False for r in pair)


@SPARK
def test_json_lines_without_positions_are_an_error_unless_synthesised_positions_are_asked_for(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(tmp_path)
    cfg = load_config(conf)
    landing = Path(cfg.paths.landing)
    landing.mkdir(parents=True)
    recs = _valid(2, seed=8)
    half = len(recs) // 2
    for i, chunk in enumerate((recs[:half], recs[half:])):
        with (landing / f"capture-{i}.jsonl").open("w") as fh:
            for r in chunk:
                fh.write(
                    json.dumps(
                        {
                            "key": r.key.hex(),
                            "value": None if r.value is None else r.value.hex(),
                            "timestamp": r.timestamp_ms,
                        }
                    )
                    + "\n"
                )
    rc, _, err = _cli(["run", "batch", "--conf", str(conf)], capsys)
    line = _one_line(err)
    assert rc == 2 and "capture-0.jsonl:1: no 'partition'" in line
    rc, out, err = _cli(
        ["run", "batch", "--conf", str(conf), "--json", "--set", "input.synthesize_positions=true"], capsys
    )
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["records_new"] == len(recs) == summary["raw_total"]  # no file dropped as duplicates
    from pipelines.tableio import TableIO

    topics = {r["topic"] for r in _rows(TableIO(cfg, None), "raw_records")}
    assert topics == {"synthetic:capture-0.jsonl", "synthetic:capture-1.jsonl"}


@SPARK
def test_a_parquet_file_with_a_wrong_column_type_fails_with_one_line_naming_file_and_column(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(tmp_path)
    cfg = load_config(conf)
    write_raw_records(_valid(2), cfg.paths.landing)
    template = records_to_batch(_valid(2)[:10])
    cols = {n: template.column(n) for n in RAW_ARROW_SCHEMA.names}
    cols["offset"] = pa.array([str(i) for i in range(10)], pa.string())
    _write_table(Path(cfg.paths.landing) / "typed-00000000.parquet", cols)
    rc, _, err = _cli(["run", "batch", "--conf", str(conf)], capsys)
    line = _one_line(err)
    assert rc == 2 and "typed-00000000.parquet: column 'offset' has type string" in line
    assert "Traceback" not in err


# --------------------------------------------------------------------------------------------
# a robust "now"


@SPARK
def test_one_record_from_the_year_9999_does_not_move_now_for_every_group(tmp_path: Path, spark: Any) -> None:
    from coordinator_core import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
    from pipelines.jobs.batch import gold_table_names, run_batch
    from pipelines.tableio import TableIO

    good = sample_records(6, seed=3, start_ms=int(time.time() * 1000) - 30 * 86_400_000)
    # a commit of a group of its own, dated 9999, in the middle of partition 7's log
    part = max({r.partition for r in good}, key=lambda p: sum(r.partition == p for r in good))
    offsets = sorted(r.offset for r in good if r.partition == part)
    mid = offsets[len(offsets) // 2]
    shifted = [r._replace(offset=r.offset + 1) if r.partition == part and r.offset >= mid else r for r in good]
    far = 253_402_300_799_000  # 9999-12-31T23:59:59Z
    hostile = RawRecord(
        encode_key(OffsetCommitKey("hostile-group", "t", 0)),
        encode_value(OffsetCommitValue(5, "", far, None, None, 3)),
        "__consumer_offsets",
        part,
        mid,
        far,
    )

    def build(name: str, records: list[RawRecord]) -> tuple[Any, Any]:
        cfg = load_config(overrides={"paths.root": str(tmp_path / name)})
        write_raw_records(records, cfg.paths.landing)
        io = TableIO(cfg, spark)
        return run_batch(cfg, spark, io=io), io

    clean, clean_io = build("clean", shifted)
    dirty, dirty_io = build("dirty", [*shifted, hostile])
    for name in gold_table_names():

        def content(io: Any, table: str = name) -> list[str]:
            return sorted(repr(sorted(r.items())) for r in _rows(io, table) if r.get("group_id") != "hostile-group")

        assert content(dirty_io) == content(clean_io), name
    assert dirty.clock_outliers == 1 and clean.clock_outliers == 0
    assert any("ignored for the log clock" in w and "9999-12-31" in w for w in dirty.warnings)


# --------------------------------------------------------------------------------------------
# cleanup after a failed attempt


@SPARK
def test_leftover_staging_and_orphan_files_of_a_failed_attempt_are_removed_by_the_next_run(
    cfg: Config, spark: Any
) -> None:
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    write_raw_records(_valid(), cfg.paths.landing)
    io = TableIO(cfg, spark)
    first = run_batch(cfg, spark, io=io)
    before = {name: sorted(repr(sorted(r.items())) for r in _rows(io, name)) for name in io.list_tables()}
    wh = Path(cfg.paths.warehouse)
    # what a killed attempt leaves: its run's spool and staged table, uncommitted data files
    spool = wh / "_staging" / "20260101T000000Z-deadbeef" / "replay_spool"
    spool.mkdir(parents=True)
    (spool / "b00001-offset_commits-x.arrows").write_bytes(b"\x00" * 4096)
    orphans = [wh / "offset_commits" / "part-00000-orphan-c000.zstd.parquet", wh / "raw_records" / "orphan.parquet"]
    for o in orphans:
        o.write_bytes(Path(io.snapshot_files("offset_commits")[0].replace("file://", "")).read_bytes())
        os.utime(o, (time.time() - 60, time.time() - 60))
    messages: list[str] = []
    second = run_batch(cfg, spark, io=io, echo=messages.append)
    assert not (wh / "_staging").exists()
    assert not any(o.exists() for o in orphans)
    assert any("1 leftover staging dir(s) and 2 orphan data file(s)" in m for m in messages), messages
    # every referenced file is still there: tables unchanged, readable, and equal
    assert second.raw_total == first.raw_total
    after = {name: sorted(repr(sorted(r.items())) for r in _rows(io, name)) for name in io.list_tables()}
    assert after == before


# --------------------------------------------------------------------------------------------
# failures: one line, exit 2


def test_known_failure_classes_are_described_in_one_line_naming_file_or_device() -> None:
    import errno

    from pipelines.errors import describe_failure

    full = OSError(errno.ENOSPC, "No space left on device", "/wh/raw_records/part-1.parquet")
    assert describe_failure(RuntimeError("write failed").with_traceback(None)) is None
    assert describe_failure(full) == "disk full (ENOSPC): no space left on the device /wh/raw_records/part-1.parquet"
    ro = OSError(errno.EROFS, "Read-only file system", "/wh/_offsetlake.lock")
    assert describe_failure(ro) == "read-only file system (EROFS): cannot write /wh/_offsetlake.lock"
    # as Spark and delta-rs report them: text only
    spark_text = Exception(
        "Job aborted ... org.apache.spark.api.python.PythonException: ValueError: "
        "/l/part-3.parquet: unreadable landing Parquet file (Couldn't deserialize thrift)"
    )
    assert describe_failure(spark_text) == (
        "input: /l/part-3.parquet: unreadable Parquet file (corrupt page or footer: Couldn't deserialize thrift)"
    )
    rust = Exception(
        "Generic LocalFileSystem error: Unable to open file /wh/t/x.parquet: No space left on device (os error 28)"
    )
    assert describe_failure(rust) is not None and "ENOSPC" in describe_failure(rust)  # type: ignore[operator]


#: what ``StreamingQueryException`` says when the stateful function refused a kept group's entry
#: (a real run's text, its traces shortened): the worker's ValueError inside Spark's wrapping
SPARK_KEPT_STATE_FAILURE = """\
[STREAM_FAILED] Query [id = d9b9f609-9d37-40e5-bad4-67fed32eb4d1, runId = 4be75b50-9b9e-4234-9d3e-b71bb800d6f7] \
terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in \
foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/repo/pipelines/stream/sinks.py", line 100, in __call__
    output = batch_df.toArrow()
  File "/venv/lib/python3.11/site-packages/pyspark/errors/exceptions/captured.py", line 280, in unwrap_spark_exception
    raise converted from None
pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/repo/pipelines/stream/state.py", line 102, in __call__
    after, rows, timer = self.replay_bucket(groups, table, watermark)
  File "/repo/pipelines/records/carried.py", line 74, in snapshot_of_entry
    raise ValueError(
ValueError: a kept group's snapshot has format 4, which this release does not read (it reads 1, 2 and 3): \
a newer release wrote this state
 SQLSTATE: 39000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: offsetlake_stream_replay [id = d9b9f609-9d37-40e5-bad4-67fed32eb4d1, runId = 4be75b50-9b9e-4234-9d3e-b71bb800d6f7]
"""


def test_a_kept_state_this_release_does_not_read_is_one_line_naming_the_checkpoint() -> None:
    """A stream whose checkpoint a newer release wrote fails inside Spark: the refusal of
    ``carried.snapshot_of_entry`` is found in the wrapped text and told in one line (exit 2), the
    stream naming its checkpoint; the end-to-end run is
    ``test_a_checkpoint_a_newer_release_wrote_is_refused_in_one_line_and_left_as_it_was``."""
    from pipelines.errors import UsageError, describe_failure
    from pipelines.jobs.stream import _kept_state_refused

    refusal = (
        "a kept group's snapshot has format 4, which this release does not read (it reads 1, 2 and 3): "
        "a newer release wrote this state"
    )
    wrapped = RuntimeError(f"streaming query offsetlake_stream_replay failed: {SPARK_KEPT_STATE_FAILURE}")
    assert describe_failure(wrapped, "/srv/wh") == refusal  # its place is not the warehouse's device
    refused = _kept_state_refused(wrapped, "/srv/cp/stream_replay")
    assert isinstance(refused, UsageError) and str(refused) == (
        f"stream state: {refusal} (checkpoint /srv/cp/stream_replay: run that release, "
        "or move it aside to replay the log into a new one)"
    )
    corrupt = SPARK_KEPT_STATE_FAILURE.replace(
        refusal, "a kept group's snapshot has format 3 and does not read: corrupt snapshot values: 99"
    )
    refused = _kept_state_refused(RuntimeError(corrupt), "/cp")
    assert refused is not None and "newer release" not in str(refused) and "run that release" not in str(refused)
    assert str(refused).endswith("(checkpoint /cp: move it aside to replay the log into a new one)")
    # another failure of the stateful function is not taken for one
    other = SPARK_KEPT_STATE_FAILURE.replace(refusal, "boom")
    assert _kept_state_refused(RuntimeError(other), "/cp") is None and describe_failure(RuntimeError(other)) is None


@SPARK
def test_a_corrupt_page_fails_the_run_with_one_line_naming_the_file(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(tmp_path, "delta:\n  target_file_rows: 4\n")
    cfg = load_config(conf)
    files = write_raw_records(_valid(3), cfg.paths.landing)
    data = bytearray(files[0].read_bytes())
    for i in range(200, 1200):  # inside the first column chunk's pages
        data[i] ^= 0x5A
    files[0].write_bytes(bytes(data))
    rc, _, err = _cli(["run", "batch", "--conf", str(conf)], capsys)
    line = _one_line(err)
    assert rc == 2 and files[0].name in line, err[-3000:]
    assert "Traceback" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
@SPARK
def test_a_read_only_warehouse_fails_with_one_line(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(tmp_path)
    cfg = load_config(conf)
    write_raw_records(_valid(2), cfg.paths.landing)
    wh = Path(cfg.paths.warehouse)
    wh.mkdir(parents=True)
    wh.chmod(0o555)
    try:
        rc, _, err = _cli(["run", "batch", "--conf", str(conf)], capsys)
    finally:
        wh.chmod(0o755)
    assert rc == 2 and "permission denied" in _one_line(err)


def test_sasl_password_without_username_is_refused_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(
        tmp_path,
        "kafka:\n  security:\n    protocol: SASL_SSL\n    sasl_mechanism: PLAIN\n"
        "  secrets:\n    sasl_password: ${OFFSETLAKE_TEST_PW}\n",
    )
    rc, _, err = _cli(["config", "--conf", str(conf), "--check"], capsys)
    assert rc == 2 and "kafka.secrets.sasl_username" in _one_line(err)


# --------------------------------------------------------------------------------------------
# secrets


SECRET = "hunter2-s3cr3t-value"


@pytest.mark.parametrize(
    "extra",
    [
        'input:\n  kafka_options:\n    kafka.sasl.jaas.config: \'PlainLoginModule required username="u" password="{s}";\'\n',
        "spark:\n  conf:\n    spark.hadoop.fs.s3a.secret.key: {s}\n",
        "input:\n  kafka_options:\n    kafka.ssl.truststore.password: {s}\n",
    ],
)
def test_a_literal_secret_in_free_form_options_is_refused_without_echoing_it(
    tmp_path: Path, extra: str, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf_file(tmp_path, extra.format(s=SECRET))
    rc, out, err = _cli(["config", "--conf", str(conf)], capsys)
    assert rc == 2 and "${" in _one_line(err)
    assert SECRET not in out + err


@SPARK
def test_secrets_referenced_from_the_environment_never_reach_output_logs_or_delta_logs(
    tmp_path: Path,
    spark: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OFFSETLAKE_TEST_JAAS", f'PlainLoginModule required username="u" password="{SECRET}";')
    monkeypatch.setenv("OFFSETLAKE_TEST_S3", SECRET)
    monkeypatch.setenv("OFFSETLAKE_TEST_PW", SECRET)
    conf = _conf_file(
        tmp_path,
        (
            "input:\n  kafka_options:\n    kafka.sasl.jaas.config: ${OFFSETLAKE_TEST_JAAS}\n"
            "spark:\n  conf:\n    spark.hadoop.fs.s3a.secret.key: ${OFFSETLAKE_TEST_S3}\n"
            "kafka:\n  secrets:\n    sasl_username: ${OFFSETLAKE_TEST_PW}\n    sasl_password: ${OFFSETLAKE_TEST_PW}\n"
        ),
    )
    cfg = load_config(conf)
    # the references are resolved where they are used (and only there)
    from pipelines.config import spark_kafka_options

    assert spark_kafka_options(cfg)["kafka.sasl.jaas.config"] == os.environ["OFFSETLAKE_TEST_JAAS"]
    write_raw_records(_valid(2), cfg.paths.landing)
    seen = []
    for argv in (
        ["config", "--conf", str(conf)],
        ["config", "--conf", str(conf), "--check"],
        ["run", "batch", "--conf", str(conf), "--json"],
        ["run", "batch", "--conf", str(conf)],
    ):
        rc, out, err = _cli(argv, capsys)
        assert rc == 0, err
        seen.append(out + err)
    assert "${OFFSETLAKE_TEST_JAAS}" in seen[0] and "${OFFSETLAKE_TEST_S3}" in seen[0]
    assert spark.conf.get("spark.hadoop.fs.s3a.secret.key") == SECRET  # the session got the value
    texts = [*seen, caplog.text]
    for path in Path(cfg.paths.root).rglob("*"):
        if path.is_file() and path.suffix in (".json", ".crc", ".yaml", ".log", ".lock", ""):
            texts.append(path.read_text(errors="replace"))
    assert all(SECRET not in t for t in texts)


# --------------------------------------------------------------------------------------------
# the stream never drops data silently


@SPARK
def test_stream_over_files_with_reversed_mtimes_gives_the_tables_of_ordered_files(spark: Any, tmp_path: Path) -> None:
    from pipelines.jobs import stream as stream_job
    from tests.pipelines.test_stream_job import DELAY_MS, assert_gold_equal, batch_gold, land, sample_log, stream_config

    records = sample_log(8, seed=5)
    landing = tmp_path / "landing"
    files = land(records, landing, rows_per_file=40)
    assert len(files) >= 6
    newest = int(max(f.stat().st_mtime for f in files))
    for i, f in enumerate(files):  # the first records in the newest file, the last in the oldest
        os.utime(f, (newest + len(files) - i, newest + len(files) - i))
    cfg = stream_config(tmp_path)
    recorder = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    assert_gold_equal(spark, cfg, batch_gold(spark, landing, watermark))
    assert not recorder.dropped

    # progress rows lost to a kill between a batch's commit and its poll are rebuilt on restart
    from deltalake import DeltaTable

    from pipelines.tableio import TableIO

    io = TableIO(cfg, spark)
    query = f"query_name = '{stream_job.REPLAY_QUERY}'"
    n = io.read("stream_progress").where(query).count()
    assert n >= 3
    DeltaTable(io.path("stream_progress")).delete("batch_id >= 1")
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)  # nothing new
    rows = io.read("stream_progress").where(query).collect()
    ids = sorted(r["batch_id"] for r in rows)
    assert ids == list(range(len(ids))) and len(ids) >= n  # (a no-data batch may follow)
    assert sum(r["input_rows"] for r in rows) == len(records)


@SPARK
def test_records_arriving_behind_the_watermark_fail_the_stream_counted_in_records(spark: Any, tmp_path: Path) -> None:
    from pipelines.errors import UsageError
    from pipelines.jobs import stream as stream_job
    from tests.pipelines.test_stream_job import land, sample_log, stream_config

    records = sample_log(6, seed=9)
    head, tail = records[:-12], records[-12:]
    landing = tmp_path / "landing"
    land(head, landing, rows_per_file=40)
    cfg = stream_config(tmp_path)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    # the rest arrives later, stamped an hour before everything already processed
    first_ts = min(r.timestamp_ms for r in head)
    late = [r._replace(timestamp_ms=first_ts - 3_600_000 + i) for i, r in enumerate(tail)]
    land(late, landing, rows_per_file=40)
    with pytest.raises(UsageError, match=r"stream: 12 records \(\d+ packs\) arrived later than the watermark"):
        stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    # allowed by config: the run ends normally and says what it dropped
    allowed = stream_config(tmp_path, allow_late_drops=True)
    land([r._replace(offset=r.offset + 100_000) for r in late], landing, rows_per_file=40)
    recorder = stream_job.run(spark, allowed, available_now=True, with_quarantine=False, poll_seconds=0.5)
    assert sum(d[3] or 0 for d in recorder.dropped) == 12


def _stream_rows(records: list[RawRecord], landing: Path, name: str, mtime: int) -> Path:
    """One landing file holding ``records`` as given (no sorting), modified at ``mtime``."""
    path = landing / name
    batch = records_to_batch(records) if records else None
    assert batch is not None
    _write_table(path, {n: batch.column(n) for n in RAW_ARROW_SCHEMA.names})
    os.utime(path, (mtime, mtime))
    return path


def _reconciled(recorder: Any) -> tuple[int, int, int, int]:
    """(records, replayed, duplicates, refused) over the replay query's micro-batches; each
    batch's records = replayed + duplicates + refused (+ control records: none in landing
    files), and its input rows are those records."""
    from pipelines.stream.settings import REPLAY_QUERY

    inputs = {r["batch_id"]: r["input_rows"] for r in recorder.rows if r["query_name"] == REPLAY_QUERY}
    for batch, records, replayed, dups, refused, _outliers, controls in recorder.counted:
        assert controls == 0
        assert records == replayed + dups + refused, (batch, records, replayed, dups, refused)
        assert inputs[batch] == records
    return tuple(sum(c[i] for c in recorder.counted) for i in range(1, 5))  # type: ignore[return-value]


@SPARK
def test_stream_refuses_bad_positions_and_conflicting_copies_into_ingest_quarantine_and_counts_reconcile(
    spark: Any, tmp_path: Path
) -> None:
    from pipelines.jobs import stream as stream_job
    from pipelines.tableio import TableIO
    from tests.pipelines.test_stream_job import DELAY_MS, assert_gold_equal, batch_gold, land, sample_log, stream_config

    records = sample_log(6, seed=11)
    landing = tmp_path / "landing"
    files = land(records, landing, rows_per_file=40)
    newest = int(max(f.stat().st_mtime for f in files))
    # a record with a value, in the last micro-batch's time range
    late = [r for r in sorted(records, key=lambda r: r.timestamp_ms) if r.value is not None][-5]
    # bad positions: null offset, null partition, partition outside 0..49, a negative offset
    bad = [
        late._replace(offset=None),  # type: ignore[arg-type]
        late._replace(partition=None),  # type: ignore[arg-type]
        late._replace(partition=2147483647),
        late._replace(offset=-3),
    ]
    # two copies of a new position that disagree (same file: the same micro-batch), and an
    # identical copy of a record of another file
    fresh = late._replace(offset=900_000)
    twin = fresh._replace(value=fresh.value + b"\x00")  # type: ignore[operator]
    _stream_rows([*bad, fresh, twin, records[7]], landing, "zz-mixed.parquet", newest + 1)
    cfg = stream_config(tmp_path)
    first = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    # later: a copy of a record taken in an earlier micro-batch, with other bytes
    taken = next(r for r in records[3:] if r.value is not None)
    changed = taken._replace(value=taken.value[:-1] + bytes([taken.value[-1] ^ 0xFF]))  # type: ignore[index]
    assert changed.value != taken.value
    _stream_rows([changed], landing, "zz-changed.parquet", newest + 2)
    second = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)

    io = TableIO(cfg, spark)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    clean = tmp_path / "clean"
    land(records, clean, rows_per_file=40)
    assert_gold_equal(spark, cfg, batch_gold(spark, clean, watermark))  # nothing refused was replayed
    rows = _rows(io, "ingest_quarantine")
    reasons = sorted(r["reason"] for r in rows)
    assert reasons == sorted(
        ["null_position"] * 2 + ["partition_out_of_range", "negative_offset"] + ["conflicting_duplicate"] * 3
    )
    details = {r["detail"] for r in rows}
    assert {"offset is null", "partition is null", "offset -3 is negative"} <= details
    assert "partition 2147483647 outside 0..49 (offsets_topic.num_partitions)" in details
    pair = [r for r in rows if r["offset"] == 900_000]
    assert {(bytes(r["value"]), bytes(r["other_value"])) for r in pair} == {
        (fresh.value, twin.value),
        (twin.value, fresh.value),
    }
    assert all(r["other_in_raw_records"] is False for r in pair)
    vs_taken = next(r for r in rows if r["reason"] == "conflicting_duplicate" and r["offset"] == taken.offset)
    assert (bytes(vs_taken["value"]), bytes(vs_taken["other_value"]), vs_taken["other_in_raw_records"]) == (
        changed.value,
        taken.value,
        True,
    )
    assert "earlier micro-batch" in vs_taken["detail"]
    # counts in == counts out, per micro-batch and in total
    n1, replayed1, dups1, refused1 = _reconciled(first)
    assert (n1, replayed1, dups1, refused1) == (len(records) + 7, len(records), 1, 6)
    assert _reconciled(second) == (1, 0, 0, 1)
    assert not first.dropped and not second.dropped


@SPARK
def test_a_file_landed_again_after_newer_data_is_counted_as_duplicates_and_does_not_fail_the_stream(
    spark: Any, tmp_path: Path
) -> None:
    import shutil

    from pipelines.jobs import stream as stream_job
    from tests.pipelines.test_stream_job import DELAY_MS, assert_gold_equal, batch_gold, land, sample_log, stream_config

    records = sample_log(6, seed=9)
    n = len(records)
    landing = tmp_path / "landing"
    head = land(records[: n // 2], landing, rows_per_file=40)
    cfg = stream_config(tmp_path)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    land(records[n // 2 :], landing, rows_per_file=40)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    # the first file is landed again (a re-run of the capture): its records are old, but they
    # are exact copies of what was taken, not late data
    again = landing / "recapture-00000000.parquet"
    shutil.copy(head[0], again)
    newest = int(max(p.stat().st_mtime for p in landing.glob("*.parquet")))
    os.utime(again, (newest + 1, newest + 1))
    recorder = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    assert not recorder.dropped
    rows_again = pq.read_metadata(again).num_rows
    assert _reconciled(recorder) == (rows_again, 0, rows_again, 0)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    assert_gold_equal(spark, cfg, batch_gold(spark, landing, watermark))


@SPARK
def test_one_record_from_the_year_9999_does_not_move_the_streams_watermark_and_it_equals_the_batch(
    spark: Any, tmp_path: Path
) -> None:
    from coordinator_core import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
    from pipelines.jobs import stream as stream_job
    from tests.pipelines.test_stream_job import DELAY_MS, RETENTION_MS, final_present, land, sample_log, stream_config

    records = sample_log(8, seed=5)
    # a commit of a group of its own dated 9999, in the middle of the busiest partition's log
    part = max({r.partition for r in records}, key=lambda p: sum(r.partition == p for r in records))
    mine = sorted((r for r in records if r.partition == part), key=lambda r: r.offset)
    mid = mine[len(mine) // 3]
    far = 253_402_300_799_000  # 9999-12-31T23:59:59Z
    hostile = RawRecord(
        encode_key(OffsetCommitKey("hostile-group", "t", 0)),
        encode_value(OffsetCommitValue(5, "", far, None, None, 3)),
        "__consumer_offsets",
        part,
        mid.offset,
        far,
    )
    shifted = [
        r._replace(offset=r.offset + 1) if r.partition == part and r.offset >= mid.offset else r for r in records
    ]
    at = shifted.index(mid._replace(offset=mid.offset + 1))
    landing = tmp_path / "landing"
    land([*shifted[:at], hostile, *shifted[at:]], landing, rows_per_file=40)
    cfg = stream_config(tmp_path)
    recorder = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    assert not recorder.dropped
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    marks = [r["watermark"] for r in recorder.rows if r["watermark"] is not None]
    assert int(max(marks).timestamp() * 1000) == watermark  # the record from 9999 did not move it
    assert sum(c[5] for c in recorder.counted) == 1  # and it was reported
    # the same tables as the batch functions over the same landing at that watermark, the
    # record from 9999 replayed as it is (compared with timestamps as integers: some are past 9999)
    from pipelines.records.gold import DEFAULT_TABLES
    from pipelines.tableio import TableIO
    from tests.pipelines.pipeline_helpers import arrow_gold

    raw = pq.read_table(landing, columns=["key", "value", "topic", "partition", "offset", "timestamp"])
    want = arrow_gold(raw, retention_ms=RETENTION_MS, **final_present(watermark))
    io = TableIO(cfg, spark)

    def content(t: pa.Table) -> list[str]:
        cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in t.columns]
        return sorted(repr(sorted(r.items())) for r in pa.Table.from_arrays(cols, names=t.column_names).to_pylist())

    for name in DEFAULT_TABLES:
        got = sorted(repr(sorted(r.items())) for r in _rows(io, name))
        assert got == content(want[name].select(io.read(name).columns)), name
    assert any(r["group_id"] == "hostile-group" for r in _rows(io, "offsets_current"))


def test_the_stream_plan_judges_copies_across_micro_batches_and_keeps_only_ranges_of_taken_files(
    tmp_path: Path,
) -> None:
    """``plan_batch`` on its own: identical copies are duplicates, a differing copy of a taken
    position is refused (the taken one stays), and once copies of a position disagreed every
    further copy is refused; what is kept of a taken file is its ranges and clock levels."""
    from pipelines.stream.ledger import _FACTS, plan_batch

    good = _valid(3, seed=2)
    w = [r for r in good if r.value is not None]
    a, b = w[0], w[1]
    files = {
        "f1.parquet": [a, b],
        "f2.parquet": [a, b._replace(value=b.value + b"\x01")],  # type: ignore[operator]
        "f3.parquet": [b, a._replace(offset=777_777), a._replace(offset=777_777, value=b"\x00\x01")],
        "f4.parquet": [a._replace(offset=777_777)],
    }
    for name, rows in files.items():
        _stream_rows(rows, tmp_path, name, 1_600_000_000)
    names = list(files)

    def plan(i: int) -> Any:
        return plan_batch(str(tmp_path), names[:i], [names[i]], num_partitions=50, tolerance_ms=86_400_000)

    first = plan(0)
    assert (first.records, first.replayed, first.duplicates, len(first.refused)) == (2, 2, 0, 0)
    second = plan(1)  # a: identical to the taken copy; b: differs from it
    assert (second.duplicates, [r["detail"] for r in second.refused]) == (
        1,
        ["the copy already in an earlier micro-batch of the stream has a different value"],
    )
    assert second.refused[0]["other_value"] == b.value and second.refused[0]["other_in_raw_records"] is True
    third = plan(2)  # b again: its earlier copies disagree; a new position whose two copies disagree
    assert third.replayed == 0 and third.duplicates == 0
    assert sorted(r["offset"] for r in third.refused) == sorted([b.offset, 777_777, 777_777])
    fourth = plan(3)  # a copy of the position the input disagreed about: refused too
    assert (fourth.replayed, len(fourth.refused)) == (0, 1)
    kept = [f for (path, *_), f in _FACTS.items() if path.startswith(str(tmp_path))]
    assert kept and all(not hasattr(f, "stairs") and len(f.ranges) <= 2 for f in kept)


def test_a_restarted_stream_plans_from_the_kept_facts_without_reading_the_taken_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The taken files' facts kept in the checkpoint (``facts_dir``): a new process (the
    in-process cache empty) plans the next micro-batch without reading any taken file, and its
    plan equals the one of a process that read them all."""
    from pipelines.stream import ledger

    good = _valid(3, seed=2)
    w = [r for r in good if r.value is not None]
    files = {f"f{i}.parquet": w[i * 4 : i * 4 + 4] for i in range(3)}
    files["f3.parquet"] = [
        w[0],
        w[5]._replace(value=b"\x00\x02"),
        w[-1]._replace(offset=888_888),
    ]  # a duplicate, a conflict
    landing = tmp_path / "landing"
    landing.mkdir()
    for name, rows in files.items():
        _stream_rows(rows, landing, name, 1_600_000_000)
    names = list(files)
    facts = str(tmp_path / "facts")

    def plan(i: int, facts_dir: str | None) -> Any:
        return ledger.plan_batch(
            str(landing), names[:i], [names[i]], num_partitions=50, tolerance_ms=86_400_000, facts_dir=facts_dir
        )

    for i in range(3):
        plan(i, facts)
    ledger._FACTS.clear()  # a restarted process
    want = plan(3, None)  # reads every taken file again
    ledger._FACTS.clear()
    read = ledger._trusted

    def only_the_batch(path: str, num_partitions: int) -> Any:
        assert path.endswith("f3.parquet"), f"a taken file was read: {path}"
        return read(path, num_partitions)

    monkeypatch.setattr(ledger, "_trusted", only_the_batch)
    got = plan(3, facts)
    assert (got.records, got.replayed, got.duplicates) == (want.records, want.replayed, want.duplicates) == (3, 1, 1)
    assert [r["detail"] for r in got.refused] == [r["detail"] for r in want.refused] and len(got.refused) == 1
    assert len(os.listdir(facts)) == 4  # one small file per landing file


def test_the_stream_refuses_to_read_landing_files_with_sparks_file_source(tmp_path: Path) -> None:
    from pipelines.errors import UsageError
    from pipelines.stream.settings import settings_from_config
    from tests.pipelines.test_stream_job import stream_config

    (tmp_path / "landing").mkdir()
    with pytest.raises(UsageError, match=r"stream.landing_reader: spark: .*modification-time order"):
        settings_from_config(stream_config(tmp_path, landing_reader="spark"))
    assert settings_from_config(stream_config(tmp_path)).landing_reader == "python"


def test_the_replay_command_keeps_now_when_one_record_is_from_the_year_9999(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from coordinator_core import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value

    good = sample_records(4, seed=6)
    part = good[0].partition
    top = max(r.offset for r in good if r.partition == part)
    far = 253_402_300_799_000
    hostile = RawRecord(
        encode_key(OffsetCommitKey("hostile-group", "t", 0)),
        encode_value(OffsetCommitValue(5, "", far, None, None, 3)),
        "__consumer_offsets",
        part,
        top + 1,
        far,
    )
    write_raw_records(good, tmp_path / "clean")
    write_raw_records([*good, hostile], tmp_path / "dirty")
    outputs = {}
    for name in ("clean", "dirty"):
        rc, out, err = _cli(["replay", "--input", str(tmp_path / name), "--retention-ms", "3600000"], capsys)
        assert rc == 0, err
        outputs[name] = sorted(ln for ln in out.splitlines() if '"hostile-group"' not in ln)
        if name == "dirty":
            assert "ignored for the log clock" in err
    assert outputs["dirty"] == outputs["clean"]


def test_the_log_clock_ignores_records_far_ahead_but_not_records_far_behind_or_after_a_quiet_spell() -> None:
    from pipelines.log_clock import decide, staircase

    day, t0, wall = 86_400_000, 1_700_000_000_000, 1_800_000_000_000
    far = 253_402_300_799_000

    def clock(parts: dict[int, list[int]], tasks: int = 1) -> Any:
        rows = [("__consumer_offsets", p, off, ts) for p, tss in parts.items() for off, ts in enumerate(tss)]
        out = []
        for k in range(tasks):  # the staircase of each task's slice, as Spark's tasks see them
            mine = rows[k::tasks]
            table = pa.table(
                {
                    "topic": [r[0] for r in mine],
                    "partition": pa.array([r[1] for r in mine], pa.int32()),
                    "offset": pa.array([r[2] for r in mine], pa.int64()),
                    "ts": pa.array([r[3] for r in mine], pa.int64()),
                }
            )
            st = staircase(table, day).to_pydict()
            out += zip(st["topic"], st["partition"], st["offset"], st["ts"], st["prev_ts"], st["jump"], strict=True)
        return decide(out, day, wall)

    steady = [t0 + i * 1000 for i in range(50)]
    # a task holding only a partition's tail of clock resets (another file) flags nothing
    tail = [("__consumer_offsets", 0, off, ts) for off, ts in enumerate(steady)]
    out = []
    for part in (tail, [("__consumer_offsets", 0, 50, 0), ("__consumer_offsets", 0, 51, -day)]):
        st = staircase(
            pa.table(
                {
                    "topic": [r[0] for r in part],
                    "partition": pa.array([r[1] for r in part], pa.int32()),
                    "offset": pa.array([r[2] for r in part], pa.int64()),
                    "ts": pa.array([r[3] for r in part], pa.int64()),
                }
            ),
            day,
        ).to_pydict()
        out += zip(st["topic"], st["partition"], st["offset"], st["ts"], st["prev_ts"], st["jump"], strict=True)
    split = decide(out, day, wall)
    assert (split.now_ms, split.outliers) == (steady[-1], ())
    for tasks in (1, 3):
        assert clock({0: steady}, tasks).now_ms == steady[-1]
        mid = clock({0: [*steady[:20], far, *steady[20:]]}, tasks)  # 9999 in the middle
        assert (mid.now_ms, [o.offset for o in mid.outliers]) == (steady[-1], [20])
        two = clock({0: [*steady[:20], far, far + 5, *steady[20:]]}, tasks)  # two in a row
        assert (two.now_ms, len(two.outliers)) == (steady[-1], 2)
        last = clock({0: [*steady, far], 1: steady}, tasks)  # the last record: beyond the wall clock
        assert (last.now_ms, len(last.outliers)) == (steady[-1], 1)
        reset = clock({0: [*steady, 0, -day]}, tasks)  # a clock reset behind: no false outlier
        assert (reset.now_ms, reset.outliers) == (steady[-1], ())
        ahead = clock({0: [*steady[:20], t0 + 30 * day, *steady[20:]]}, tasks)  # a month ahead, old log
        assert (ahead.now_ms, len(ahead.outliers)) == (steady[-1], 1)
        quiet = clock({0: [*steady, t0 + 30 * day]}, tasks)  # a month of silence, then a commit
        assert (quiet.now_ms, quiet.outliers) == (t0 + 30 * day, ())


@SPARK
def test_a_file_landed_twice_in_the_stream_leaves_one_row_per_position_in_every_decoded_table(
    spark: Any, tmp_path: Path
) -> None:
    """The stream's side query writes the decoded tables (quarantine and unsupported included)
    by log position: the same file landed twice, in one micro-batch or in a later one, adds no
    row twice."""
    import shutil

    from pipelines.jobs import stream as stream_job
    from pipelines.tableio import TableIO
    from tests.pipelines.test_stream_job import land, sample_log, stream_config

    records = sample_log(4, seed=3)
    first = records[0]
    # a corrupt value (an offset commit key with 3 bytes of value) and a record of an unknown type
    corrupt = first._replace(value=b"\x00\x03\x00", offset=first.offset + 10_000)
    unknown = first._replace(key=b"\x00\x63" + first.key[2:], offset=first.offset + 10_001)
    landing = tmp_path / "landing"
    files = land([*records, corrupt, unknown], landing, rows_per_file=10_000)
    shutil.copy(files[0], landing / "again-a.parquet")  # the same micro-batch
    cfg = stream_config(tmp_path, max_files_per_trigger=10)
    stream_job.run(spark, cfg, available_now=True, with_quarantine=True, poll_seconds=0.5)
    shutil.copy(files[0], landing / "again-b.parquet")  # a later micro-batch
    newest = int(max(p.stat().st_mtime for p in landing.glob("*.parquet")))
    os.utime(landing / "again-b.parquet", (newest + 1, newest + 1))
    stream_job.run(spark, cfg, available_now=True, with_quarantine=True, poll_seconds=0.5)
    io = TableIO(cfg, None, engine="rust")
    for name, expected in (("quarantine", 1), ("unsupported_records", 1)):
        got = io.read_arrow(name)
        assert got is not None and got.num_rows == expected, (name, None if got is None else got.num_rows)
    commits = io.read_arrow("offset_commits", ["coordinator_partition", "log_offset"])
    assert commits is not None and commits.num_rows == len(set(zip(*(c.to_pylist() for c in commits.columns))))
    assert commits.num_rows == sum(1 for r in records if r.key[1] in (0, 1))
