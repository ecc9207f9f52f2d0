"""``offsetlake sql`` is query-only (issue 37, item 2): a statement that writes, drops, reads a
file by its path or runs code is refused with exit 2 and one line on every engine, before any
engine sees it, and the warehouse is byte for byte what it was; DuckDB itself reads nothing
outside the warehouse. Queries (SELECT, UNION, WITH, VALUES) keep answering."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from pipelines.config import Config, load_config

pytestmark = pytest.mark.spark

HOSTNAME = Path("/etc/hostname")


@pytest.fixture(scope="module")
def wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Config:
    from pipelines.inputs.raw_files import write_raw_records
    from pipelines.inputs.sample import sample_records
    from pipelines.jobs.batch import run_batch

    root = tmp_path_factory.mktemp("sqlro")
    cfg = load_config(overrides={"paths.root": str(root)})
    write_raw_records(sample_records(3, seed=5), cfg.paths.landing)
    run_batch(cfg, spark)
    return cfg


def _fingerprint(warehouse: str) -> dict[str, str]:
    """Every file under the warehouse and its content hash (lock files aside)."""
    out = {}
    for dirpath, _dirs, files in os.walk(warehouse):
        for name in files:
            if name.startswith("_offsetlake."):
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, warehouse)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _sql(cfg: Config, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from pipelines.cli import main

    rc = main(["sql", "--set", f"paths.root={cfg.paths.root}", "--format", "tsv", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _refused(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert lines[0].startswith("offsetlake sql: error: "), lines
    return lines[0]


WRITES = [
    "INSERT OVERWRITE DIRECTORY '{wh}/offsets_current' USING parquet SELECT 1 AS a",
    "INSERT OVERWRITE DIRECTORY '{wh}/offsets_current' USING parquet SELECT * FROM offsets_current",
    "INSERT INTO offsets_current SELECT * FROM offsets_current",
    "INSERT OVERWRITE TABLE offsets_current SELECT * FROM offsets_current",
    "DROP TABLE offsets_current",
    "DROP VIEW group_state",
    "CREATE TABLE x USING parquet LOCATION '{wh}/x' AS SELECT 1 AS a",
    "CREATE OR REPLACE TEMP VIEW offsets_current AS SELECT 1 AS a",
    "DELETE FROM offsets_current",
    "UPDATE offsets_current SET committed_offset = 0",
    "MERGE INTO offsets_current t USING offsets_current s ON t.group_id = s.group_id WHEN MATCHED THEN DELETE",
    "TRUNCATE TABLE offsets_current",
    "CACHE TABLE c AS SELECT 1 AS a",
    "SET spark.sql.warehouse.dir=/tmp",
    "ADD JAR /tmp/x.jar",
    "SELECT 1 AS a INTO t",
    "WITH s AS (SELECT 1 AS a) INSERT INTO offsets_current SELECT * FROM s",
    "EXPLAIN INSERT OVERWRITE DIRECTORY '{wh}/offsets_current' USING parquet SELECT 1 AS a",
    "COPY (SELECT 1) TO '{wh}/offsets_current/x.csv'",
    "ATTACH '{wh}/x.db'",
]


@pytest.mark.parametrize("engine", ["spark", "duckdb", "auto"])
@pytest.mark.parametrize("statement", WRITES)
def test_a_statement_that_writes_is_refused_in_one_line_and_the_warehouse_is_untouched(
    wh: Config, capsys: pytest.CaptureFixture[str], statement: str, engine: str
) -> None:
    before = _fingerprint(wh.paths.warehouse)
    assert any(p.startswith("offsets_current/_delta_log/") for p in before)
    rc, out, err = _sql(wh, capsys, "--engine", engine, statement.format(wh=wh.paths.warehouse))
    assert rc == 2, (out, err[-2000:])
    _refused(err)
    assert _fingerprint(wh.paths.warehouse) == before


READS = [
    "SELECT read_text('{f}') AS t",
    "SELECT * FROM read_text('{f}')",
    "SELECT * FROM read_blob('{f}')",
    "SELECT * FROM read_csv('{f}')",
    "SELECT * FROM read_csv_auto('{f}')",
    "SELECT * FROM read_json('{f}')",
    "SELECT * FROM read_parquet('{wh}/offsets_current/*.parquet')",
    "SELECT * FROM parquet_scan('{wh}/offsets_current/*.parquet')",
    "SELECT * FROM parquet_metadata('{wh}/offsets_current/*.parquet')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_files('{f}')",
    "SELECT * FROM text.`{f}`",
    "SELECT * FROM csv.`{f}`",
    "SELECT * FROM json.`{f}`",
    "SELECT * FROM parquet.`{wh}/offsets_current`",
    "SELECT * FROM delta.`{wh}/offsets_current`",
    "SELECT * FROM binaryFile.`{f}`",
    "SELECT * FROM IDENTIFIER('text.`{f}`')",
    "SELECT * FROM query('SELECT 42')",
    "SELECT getenv('HOME') AS h",
    "SELECT current_setting('temp_directory') AS d",
    "SELECT java_method('java.lang.System', 'getProperty', 'user.home') AS h",
    "SELECT reflect('java.lang.System', 'getenv', 'HOME') AS h",
    "SELECT 1 AS a UNION ALL SELECT length(value) FROM text.`{f}`",
    "WITH t AS (SELECT * FROM csv.`{f}`) SELECT count(*) FROM t",
    "SELECT TRANSFORM(group_id) USING 'cat {f}' AS (line) FROM offsets_current",
    "SELECT * FROM offsets_current WHERE group_id IN (SELECT TRANSFORM(group_id) USING 'cat {f}' FROM group_state)",
]


@pytest.mark.parametrize("engine", ["spark", "auto"])
@pytest.mark.parametrize("statement", READS)
def test_a_statement_that_reads_a_file_or_runs_code_is_refused(
    wh: Config, capsys: pytest.CaptureFixture[str], statement: str, engine: str
) -> None:
    rc, out, err = _sql(wh, capsys, "--engine", engine, statement.format(f=HOSTNAME, wh=wh.paths.warehouse))
    assert rc == 2, (out, err[-2000:])
    _refused(err)
    assert HOSTNAME.read_text().strip() not in out


def test_duckdb_reads_no_file_outside_the_warehouse_whatever_reaches_it(wh: Config) -> None:
    import duckdb

    from pipelines.analytics.duck import DuckDBSession
    from pipelines.tableio import TableIO

    session = DuckDBSession(TableIO(wh, None, engine="rust"))
    session.register(["offsets_current"])
    assert session.query("SELECT count(*) AS n FROM offsets_current").column("n")[0].as_py() > 0
    for sql in (
        f"SELECT * FROM read_text('{HOSTNAME}')",
        "SELECT * FROM glob('/etc/*')",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        f"ATTACH '{Path(wh.paths.root) / 'x.db'}'",
    ):
        with pytest.raises(duckdb.Error):
            session.query(sql)


@pytest.mark.parametrize(
    ("statement", "rows"),
    [
        ("SELECT count(*) AS n FROM offsets_current", None),
        ("SELECT 1 AS a UNION ALL SELECT 2 AS a", ["1", "2"]),
        ("WITH t AS (SELECT 3 AS a) SELECT a FROM t", ["3"]),
        ("SELECT * FROM VALUES (4) AS t(a)", ["4"]),
        ("SELECT * FROM range(2)", ["0", "1"]),
        ("SELECT x FROM (SELECT explode(array(5, 6)) AS x)", ["5", "6"]),
    ],
)
def test_queries_still_answer_on_duckdb(
    wh: Config, capsys: pytest.CaptureFixture[str], statement: str, rows: list[str] | None
) -> None:
    rc, out, err = _sql(wh, capsys, "--engine", "duckdb", statement)
    assert rc == 0, err[-2000:]
    body = out.splitlines()[1:]
    if rows is None:
        assert int(body[0]) > 0
    else:
        assert body == rows


def test_show_tables_still_answers_on_spark(wh: Config, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _sql(wh, capsys, "--engine", "spark", "SHOW TABLES")
    assert rc == 0, err[-2000:]
    assert out.splitlines()[0].split("\t") == ["namespace", "tableName", "isTemporary"]


def test_spark_substitutes_no_variable_into_the_checked_statement(
    wh: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    home = os.environ["HOME"]
    assert home and home != "/"
    rc, out, err = _sql(wh, capsys, "--engine", "spark", "SELECT '${env:HOME}' AS h")
    assert rc == 0, err[-2000:]
    assert home not in out and out.splitlines()[1:] == ["${env:HOME}"], out


def test_length_of_binary_falls_back_to_spark_on_auto_with_sparks_answer(
    wh: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.tableio import TableIO

    keys = TableIO(wh, None, engine="rust").read_arrow("raw_records", columns=["key"])
    assert keys is not None
    want = sum(len(k) for k in keys.column("key").to_pylist())
    sql = "SELECT sum(length(key)) AS n FROM raw_records"
    rc, out, err = _sql(wh, capsys, sql)
    assert rc == 0, err[-2000:]
    assert "note: Spark answers: DuckDB No function matches" in err
    assert out == f"n\n{want}\n"
    rc, out, err = _sql(wh, capsys, "--engine", "duckdb", sql)
    assert rc == 2 and "--engine spark" in _refused(err)
