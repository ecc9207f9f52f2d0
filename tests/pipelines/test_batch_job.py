"""The batch job end to end on a small generated log: counts reconcile, a corrupted record lands
in quarantine with nothing else lost, a rerun changes nothing, new input rebuilds, and the
spark-submit script runs the same job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.config import Config, load_config  # noqa: E402
from pipelines.inputs.raw_files import RawRecord, write_raw_records  # noqa: E402
from pipelines.inputs.sample import sample_records  # noqa: E402
from pipelines.jobs.batch import gold_table_names, run_batch  # noqa: E402
from pipelines.tableio import TableIO  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: the one path of the decode and replay stages, whatever runs the job (CLI, spark-submit, Airflow, bench)
ONE_PATH = {
    "decode": "routed raw_records files -> decoded tables + replay input",
    "replay": "replay input bucket files -> gold tables",
}


def _corrupt_record(records: list[RawRecord]) -> RawRecord:
    """A truncated offset-commit value appended at the end of the first record's partition."""
    base = next(r for r in records if r.value is not None and r.key[:2] == b"\x00\x01")
    last = max(r.offset for r in records if r.partition == base.partition)
    ts = max(r.timestamp_ms for r in records if r.partition == base.partition) + 1
    return base._replace(value=base.value[:5], offset=last + 1, timestamp_ms=ts)  # type: ignore[index]


def _snapshot(io: TableIO) -> dict[str, tuple[int | None, list[str]]]:
    """Every table's version and its rows (order-independent) read with delta-rs."""
    from deltalake import DeltaTable

    out = {}
    for name in io.list_tables():
        rows = DeltaTable(io.path(name)).to_pyarrow_table().to_pylist()
        out[name] = (io.version(name), sorted(repr(sorted(r.items())) for r in rows))
    return out


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(overrides={"paths.root": str(tmp_path), "replay.retention_ms": 60_000})


@pytest.fixture
def log_with_corruption(cfg: Config) -> tuple[list[RawRecord], RawRecord]:
    records = sample_records(8, seed=3)
    bad = _corrupt_record(records)
    write_raw_records([*records, bad], cfg.paths.landing)
    return records, bad


def test_batch_job_reconciles_quarantines_and_rerun_changes_nothing(
    cfg: Config, spark: Any, log_with_corruption: tuple[list[RawRecord], RawRecord]
) -> None:
    records, bad = log_with_corruption
    io = TableIO(cfg, spark)
    first = run_batch(cfg, spark, io=io)

    # counts: raw = decoded + quarantined + unsupported, and only the corrupted record is not decoded
    assert first.raw_total == len(records) + 1
    assert first.reconciled
    assert first.quarantined == 1 and first.unsupported == 0
    assert first.decoded == len(records)
    n_group_md = sum(1 for r in records if r.key[:2] == b"\x00\x02")
    assert (first.offset_commits, first.group_metadata) == (len(records) - n_group_md, n_group_md)
    q = io.read("quarantine").collect()
    assert [(r["partition"], r["offset"], bytes(r["value"])) for r in q] == [(bad.partition, bad.offset, bad.value)]
    assert q[0]["error_class"]

    # gold tables exist and cover every group of the log
    names = {t.name for t in first.tables}
    assert set(gold_table_names()) <= names
    assert first.groups == 8 == io.count("group_state")
    # the gold tables (the replay stage's "up to date" test) are committed after log_partitions: a
    # run killed between them redoes both, never only the gold tables (bench/crash_matrix.py)
    last = {name: io.history(name, 1)[0]["timestamp"] for name in (*gold_table_names(), "log_partitions")}
    assert last["log_partitions"] < min(last[name] for name in gold_table_names())

    # a rerun over the same input leaves every table (version and contents) unchanged
    before = _snapshot(io)
    second = run_batch(cfg, spark, io=io)
    assert _snapshot(io) == before
    assert second.records_new == 0
    assert {t.action for t in second.tables} == {"unchanged"}


def test_new_input_is_ingested_and_every_derived_table_is_rebuilt(
    cfg: Config, spark: Any, log_with_corruption: tuple[list[RawRecord], RawRecord]
) -> None:
    io = TableIO(cfg, spark)
    first = run_batch(cfg, spark, io=io)
    from coordinator_core import decode_key

    old = sample_records(8, seed=3)
    # two more groups (indexes 8, 9), placed after every existing offset of their partitions
    more = [
        r for r in sample_records(10, seed=3) if decode_key(r.key).group in {"orders-consumer-8", "payments-consumer-9"}
    ]
    top = {p: max((r.offset for r in old if r.partition == p), default=-1) + 2 for p in range(50)}
    extra = [r._replace(offset=r.offset + top[r.partition], timestamp_ms=r.timestamp_ms + 10**6) for r in more]
    assert extra
    write_raw_records(extra, cfg.paths.landing)
    second = run_batch(cfg, spark, io=io)
    assert second.records_new == len(extra)
    assert second.raw_version == first.raw_version + 1
    assert second.reconciled and second.raw_total == first.raw_total + len(extra)
    assert second.groups == 10
    assert second.decoded == first.decoded + len(extra)


def test_cli_run_batch_is_the_same_job(
    cfg: Config, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    write_raw_records(sample_records(3, seed=5), cfg.paths.landing)
    conf = tmp_path / "test.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path}\n")
    assert main(["run", "batch", "--conf", str(conf), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["reconciled"] and summary["groups"] == 3
    assert summary["raw_total"] == summary["decoded"] + summary["quarantined"] + summary["unsupported"]
    assert summary["tables"]["group_state"]["rows"] == 3
    assert {k: v for k, v in summary["paths"].items() if k != "ingest"} == ONE_PATH
    from pipelines.batch.summary import run_records

    assert [r["paths"] for r in run_records(cfg.paths.warehouse)] == [summary["paths"]]

    # the other commands read the same warehouse
    assert main(["tables", "--conf", str(conf), "--json"]) == 0
    listed = {t["table"]: t for t in json.loads(capsys.readouterr().out)}
    assert listed["group_state"]["rows"] == 3 and listed["raw_records"]["rows"] == summary["raw_total"]
    assert (
        main(
            [
                "sql",
                "--conf",
                str(conf),
                "--format",
                "json",
                "SELECT count(*) AS n, count(DISTINCT group_id) AS g FROM offset_commits",
            ]
        )
        == 0
    )
    row = json.loads(capsys.readouterr().out.strip())
    assert row == {"n": summary["offset_commits"], "g": 3}
    assert main(["sql", "--conf", str(conf), "SELECT no_such_column FROM group_state"]) == 2
    assert "query failed" in capsys.readouterr().err


def test_bad_config_exits_2_with_the_key_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipelines.cli import main

    conf = tmp_path / "bad.yaml"
    conf.write_text("replay:\n  retention_ms: abc\n")
    assert main(["run", "batch", "--conf", str(conf)]) == 2
    assert "replay.retention_ms: expected a positive integer, got 'abc'" in capsys.readouterr().err


@pytest.mark.slow
def test_spark_submit_runs_the_batch_script(tmp_path: Path) -> None:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.exists():
        pytest.skip("spark-submit not installed next to the interpreter")
    root = tmp_path / "data"
    write_raw_records(sample_records(3, seed=9), root / "landing")
    conf = tmp_path / "submit.yaml"
    conf.write_text(f"paths:\n  root: {root}\nspark:\n  conf:\n    spark.sql.shuffle.partitions: 2\n")
    env = dict(
        os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"
    )
    proc = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            "--driver-memory",
            "1g",
            str(REPO / "pipelines" / "jobs" / "batch.py"),
            "--conf",
            str(conf),
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert summary["reconciled"] and summary["groups"] == 3
    assert (root / "warehouse" / "group_state" / "_delta_log").is_dir()


def test_replay_stage_refuses_decoded_tables_behind_raw_records(cfg: Config, spark: Any) -> None:
    from pipelines.errors import UsageError

    write_raw_records(sample_records(2, seed=1), cfg.paths.landing)
    io = TableIO(cfg, spark)
    ingested = run_batch(cfg, spark, io=io, stages=("ingest",))
    assert ingested.records_new > 0 and not io.exists("group_state")
    with pytest.raises(UsageError, match="run the decode stage first"):
        run_batch(cfg, spark, io=io, stages=("replay",))


@pytest.mark.parametrize("replay_input", ["one run", "stage by stage"])
def test_every_gold_delta_table_equals_the_pure_core_replay(
    tmp_path: Path, spark: Any, replay_input: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What the job COMMITS (event tables in one routed pass, current-state tables MERGEd) equals
    the pure core's rows for the same log, table by table — on the one path, whether the stages
    run in one process or one by one (as separate tasks would): the replay reads the replay input
    the decode pass wrote either way."""
    import logging

    from chispa import assert_df_equality

    from schemas.gold import GOLD_TABLES
    from tests.pipelines.test_replay_job import DAY, build_log, core_gold

    log = build_log(n_groups=10, seed=5)
    cfg = load_config(
        overrides={
            "paths.root": str(tmp_path),
            "replay.retention_ms": 3 * DAY,
            "replay.rules": "current",
            "replay.coordinator": "old",
        }
    )
    write_raw_records([RawRecord(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in log], cfg.paths.landing)
    io = TableIO(cfg, spark)
    caplog.set_level(logging.INFO, logger="pipelines.batch.replay")
    if replay_input == "spool":
        summary = run_batch(cfg, spark, io=io)
    else:
        run_batch(cfg, spark, io=io, stages=("ingest", "decode"))
        summary = run_batch(cfg, spark, io=io, stages=("replay",))
        summary = run_batch(cfg, spark, io=io, stages=("ingest", "decode", "replay"))  # all up to date
    assert summary.reconciled and summary.quarantined == 1 and summary.unsupported == 1
    used = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay: ")]
    assert len(used) == 1 and used[0].endswith(
        f"buckets' files, {io.count('offset_commits') + io.count('group_metadata') + 1} rows"
    )
    assert summary.paths == {"ingest": f"{summary.source} -> raw_records", **ONE_PATH}
    assert not (Path(io.warehouse) / "_staging").exists()  # staged tables removed
    assert len(list((Path(io.warehouse) / "_replay_input").iterdir())) == 1  # this version's only
    expected = core_gold(log, retention_ms=3 * DAY, as_of_ms=max(ts for *_, ts in log))
    for spec in GOLD_TABLES:
        want = spark.createDataFrame(expected[spec.name].to_pylist(), spec.spark_schema())
        assert_df_equality(io.read(spec.name), want, ignore_row_order=True, ignore_nullable=True)


def _rows_by_table(io: TableIO) -> dict[str, list[str]]:
    """Every table's rows (order-independent), versions aside."""
    return {name: rows for name, (_version, rows) in _snapshot(io).items()}


def _files_no_commit_added(table_dir: Path) -> set[str]:
    """Data files in a table's directory that no commit of its Delta log ever added."""
    added = set()
    for log in (table_dir / "_delta_log").glob("*.json"):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added.add(action["add"]["path"])
    return (
        {str(p.relative_to(table_dir)) for p in table_dir.rglob("*.parquet")}
        - added
        - {str(p.relative_to(table_dir)) for p in (table_dir / "_delta_log").rglob("*.parquet")}
    )


def test_the_decode_pass_copies_the_landing_and_the_job_equals_its_stages_run_one_by_one(
    spark: Any, tmp_path: Path
) -> None:
    """The batch job's decode pass copies the ingest's landing files into raw_records (one read of
    each file); its tables are those of the three stages run one after the other, and when the
    ingest's check refuses (a file re-delivered) nothing of the pass stays and the job takes the
    exact ingest and its own decode pass. The log: a compacted capture of a Kafka 4 coordinator
    (KIP-848 groups, online upgrades, idle partitions)."""
    from coordinator_core.simulator.generator import generate
    from pipelines.batch.decode import TABLES
    from pipelines.jobs.batch import DECODE_APP_ID

    def conf(name: str) -> Config:
        # 200-row files: 120-row landing files are copied byte for byte, smaller ones rewritten
        overrides = {
            "paths.root": str(tmp_path / name),
            "delta.target_file_rows": 200,
            "replay.retention_ms": 10 * 60_000,
            "replay.coordinator": "new",
        }
        return load_config(overrides=overrides)

    joint, staged = conf("joint"), conf("staged")
    log = generate(
        groups=6, hours=1.0, seed=7, coordinator="new", compaction="cleaned", retention_ms=10 * 60_000,
        consumer_groups=0.5, conversions=0.3,
    )  # fmt: skip
    records = [
        RawRecord(k, v, "__consumer_offsets", p, o, ts)
        for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True)
    ]
    cut = sorted(r.offset for r in records)[len(records) // 2]
    first = [r for r in records if r.offset < cut]
    later = [r for r in records if r.offset >= cut]
    assert first and later
    stage_by_stage = ("ingest",), ("decode",), ("replay",)
    for cfg in (joint, staged):
        write_raw_records(first, cfg.paths.landing, rows_per_file=120)
    io, io_staged = TableIO(joint, spark), TableIO(staged, spark)

    one = run_batch(joint, spark, io=io)
    for stages in stage_by_stage:
        run_batch(staged, spark, io=io_staged, stages=stages)
    assert one.paths["ingest"] == "landing -> raw_records (copied by the decode's pass)"
    assert one.reconciled and one.records_new == len(first) and one.raw_version == 1
    assert io.version("raw_records") == 1  # one commit: the pass's append
    assert all(io.applied(name, DECODE_APP_ID, 1) for name in TABLES)
    assert _rows_by_table(io) == _rows_by_table(io_staged)

    # a re-delivered file (positions already in raw_records) with new records: the check refuses
    for cfg in (joint, staged):
        write_raw_records([*first[:40], *later], cfg.paths.landing, rows_per_file=120)
    two = run_batch(joint, spark, io=io)
    for stages in stage_by_stage:
        run_batch(staged, spark, io=io_staged, stages=stages)
    assert two.paths["ingest"] == "landing -> raw_records"  # the exact path, then the decode's own pass
    # read: the first run's files (known, not opened again) and the new ones; 40 rows re-delivered
    assert two.records_new == len(later) and two.records_read - two.records_new == len(first) + 40
    assert two.reconciled and two.raw_total == len(records)
    assert _rows_by_table(io) == _rows_by_table(io_staged)
    warehouse = Path(io.warehouse)
    for name in ("raw_records", *TABLES):
        assert _files_no_commit_added(warehouse / name) == set(), name  # the refused pass's files are gone
    # the second decode read only the new records: its replay input continues the first's, whose
    # files stay; nothing else is kept
    from pipelines.batch.replay import current_replay_input, read_entries

    manifest = current_replay_input(io, two.raw_version)
    assert manifest is not None
    named = {str(e["path"]).rsplit("/", 2)[-2] for e in read_entries(manifest) if "path" in e}
    assert {d.name for d in (warehouse / "_replay_input").iterdir()} == named and len(named) == 2


def test_landing_rows_without_a_position_stop_the_decode_pass_and_the_exact_ingest_refuses_them(
    cfg: Config, spark: Any
) -> None:
    """The decode's pass meets the landing's rows before the ingest's check: rows with a null
    position are not decoded there, the check refuses the pass (nothing committed) and the exact
    path quarantines them, as when the stages run one by one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.batch.decode import TABLES
    from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA, records_to_batch

    records = sample_records(4, seed=9)
    write_raw_records(records, cfg.paths.landing)
    bad = records_to_batch(records[:4])
    cols = {n: bad.column(n) for n in RAW_ARROW_SCHEMA.names}
    cols["offset"] = pa.array([None, 10_001, 10_002, None], pa.int64())
    cols["partition"] = pa.array([3, None, 2_147_483_647, 60], pa.int32())
    pq.write_table(pa.table(cols), Path(cfg.paths.landing) / "nulls-00000000.parquet")
    io = TableIO(cfg, spark)
    summary = run_batch(cfg, spark, io=io)
    assert summary.paths["ingest"] == "landing -> raw_records"
    assert summary.refused == 4 and summary.refused_reasons == {"null_position": 3, "partition_out_of_range": 1}
    assert summary.records_new == len(records) == summary.raw_total and summary.reconciled
    warehouse = Path(io.warehouse)
    for name in ("raw_records", *TABLES):
        assert _files_no_commit_added(warehouse / name) == set(), name
