"""Delta on Spark for real (``delta.engine: spark``, the delta-spark jars fetched by the project
and put in ``spark.jars``): the batch job, the stream, maintenance and SQL on the same log as the
delta-rs engine, and each engine continuing the other's warehouse.

- Two warehouses are built in two runs each (half the landing's files, then all of them):
  spark→rust and rust→spark. The second run reads what the first committed (positions,
  raw_records, current-state tables MERGEd) with the other engine and writes on top of it: both
  mixed warehouses equal one delta-rs run over every file, table for table (delta-rs reads Spark's tables, Spark
  reads delta-rs's, each writes where the other wrote).
- Maintenance (OPTIMIZE, VACUUM) with Spark's Delta on the rust→spark warehouse (raw_records:
  files of both engines; offsets_current: files a MERGE replaced) leaves every table's rows as
  they were, compacted and vacuumed.
- The stream with ``delta.engine: spark`` equals the stream with delta-rs, and Spark SQL over
  Spark's Delta answers what delta-rs reads.
- A write of no rows on Spark's Delta (a routed table the pass gave no rows, an append or
  overwrite of an empty frame, a MERGE of an empty source) leaves no data file that no commit
  mentions (Spark's writer writes an empty one, which Delta leaves out of its commit), and commits
  what the rust engine commits: the same commits, txns and markers.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from pipelines.tableio import read_arrow_at
from tests.cluster.jobs import assert_same_tables, job_args, run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONF = "conf/local.yaml"
BATCH = str(REPO / "pipelines/jobs/batch.py")
STREAM = str(REPO / "pipelines/jobs/stream.py")


def _land(root: Path, files: list[Path]) -> None:
    landing = root / "landing"
    landing.mkdir(parents=True, exist_ok=True)
    for f in files:
        if not (landing / f.name).exists():
            (landing / f.name).symlink_to(f)


def _delta_tables(warehouse: Path) -> dict[str, DeltaTable]:
    return {p.name: DeltaTable(str(p)) for p in sorted(warehouse.iterdir()) if (p / "_delta_log").is_dir()}


def _batch(root: Path, engine: str, log: Path) -> float:
    return run([sys.executable, BATCH, *job_args(CONF, root, "--set", f"delta.engine={engine}")], log, timeout_s=2400)


# five batch runs (two on Spark's Delta) and maintenance on Spark's Delta
def test_each_engine_continues_the_others_warehouse(jvm_bundles: object, tiny_log: Path, tmp_path: Path) -> None:
    files = sorted(tiny_log.glob("*.parquet"))
    assert len(files) >= 2
    half = files[: len(files) // 2]
    roots = {}
    for first, second in (("spark", "rust"), ("rust", "spark")):
        root = tmp_path / f"{first}-{second}"
        _land(root, half)
        _batch(root, first, tmp_path / f"{first}-{second}-1.log")
        _land(root, files)
        _batch(root, second, tmp_path / f"{first}-{second}-2.log")
        roots[(first, second)] = root / "warehouse"
    # the reference: one delta-rs run over every file (two runs equal one: test_batch_incremental.py)
    _land(tmp_path / "rust", files)
    _batch(tmp_path / "rust", "rust", tmp_path / "rust.log")
    reference = tmp_path / "rust" / "warehouse"
    counts = assert_same_tables(roots[("spark", "rust")], reference)
    assert_same_tables(roots[("rust", "spark")], reference)
    assert counts["raw_records"] == sum(pq.read_metadata(f).num_rows for f in files)

    mixed = roots[("rust", "spark")]
    before = {n: (t.version(), len(t.file_uris())) for n, t in _delta_tables(mixed).items()}
    # two tables: raw_records (files of both engines: compacted) and offsets_current (files a
    # MERGE replaced: vacuumed); every table costs Spark jobs
    maintenance = [sys.executable, "-m", "pipelines.jobs.maintenance", "--json", "--retention-hours", "0"]
    maintenance += ["--tables", "raw_records,offsets_current"]
    run([*maintenance, *job_args(CONF, mixed.parent, "--set", "delta.engine=spark")], tmp_path / "maint.log")
    assert_same_tables(mixed, reference)  # the rows as they were
    after = {n: (t.version(), len(t.file_uris())) for n, t in _delta_tables(mixed).items()}
    compacted = [n for n in before if before[n][1] > 1 and after[n][1] == 1]
    assert compacted, (before, after)  # Spark's OPTIMIZE ran
    for name in compacted:  # and its VACUUM (retention 0) deleted the files it replaced
        on_disk = [p for p in (mixed / name).rglob("*.parquet") if "_delta_log" not in p.parts]
        assert len(on_disk) == 1, (name, on_disk)


def test_the_stream_and_sql_on_sparks_delta(jvm_bundles: object, tiny_log: Path, tmp_path: Path) -> None:
    roots = {}
    for engine in ("spark", "rust"):
        root = tmp_path / engine
        _land(root, sorted(tiny_log.glob("*.parquet")))
        run(
            [sys.executable, STREAM, *job_args(CONF, root, "--set", f"delta.engine={engine}", "--available-now")],
            tmp_path / f"stream-{engine}.log",
        )
        roots[engine] = root
    assert_same_tables(roots["spark"] / "warehouse", roots["rust"] / "warehouse")

    query = "SELECT state, count(*) AS groups FROM group_state GROUP BY state ORDER BY state"
    out = tmp_path / "sql.log"
    sql = [sys.executable, "-m", "pipelines", "sql", "--engine", "spark", "--format", "json", query]
    run([*sql, *job_args(CONF, roots["spark"], "--set", "delta.engine=spark")], out)
    answered = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    states = Counter(read_arrow_at(str(roots["spark"] / "warehouse" / "group_state"), ["state"])["state"].to_pylist())
    assert {r["state"]: r["groups"] for r in answered} == dict(states)


def test_a_write_of_no_rows_leaves_no_file_and_commits_as_the_rust_engine(tmp_path: Path, jvm_bundles: object) -> None:
    out = tmp_path / "zero_rows.log"
    run([sys.executable, "-m", "tests.cluster.zero_row_writes", str(tmp_path)], out, timeout_s=600, cwd=REPO)
    report = json.loads(next(line for line in out.read_text().splitlines() if line.startswith("{")))
    spark, rust = report["spark"], report["rust"]
    assert spark["engine"] == "spark" and rust["engine"] == "rust"
    empty = sorted(name for name, rows in spark["decoded_rows"].items() if rows == 0)
    assert empty and spark["decoded_rows"] == rust["decoded_rows"]  # the pass routed no rows to some tables
    assert {name: files for name, files in spark["unreferenced"].items() if files} == {}
    assert {name: files for name, files in rust["unreferenced"].items() if files} == {}
    # the tables without rows: the same commits (created, then the marker alone; an empty MERGE
    # source commits nothing); tables with rows differ only in that Spark's first write creates them
    for name in [*empty, "rebalances", "group_transitions", "offsets_current", "group_state"]:
        assert spark["commits"][name] == rust["commits"][name], name
    for name in spark["commits"]:
        assert spark["commits"][name][-1]["marker"] == rust["commits"][name][-1]["marker"], name
