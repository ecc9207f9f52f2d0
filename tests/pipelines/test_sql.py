"""``offsetlake sql`` on DuckDB and on Spark over one small warehouse built by the real batch job
(a simulator log with static members, rebalances and expiring groups, plus end-offset samples so
the lag views have rows): every view gives the same rows on both engines; DuckDB answers in a
fresh process without a JVM; output is scriptable; errors are one line and exit 2; Spark leaves
no ``spark-warehouse/`` behind; the shell runs statements."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.config import Config, load_config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: a query with no faithful DuckDB form (a higher-order function the transpiler does not carry)
SPARK_ONLY_SQL = "SELECT aggregate(array(1, 2, 3), 0, (acc, x) -> acc + x) AS s"


class Warehouse:
    cfg: Config
    conf: Path


@pytest.fixture(scope="module")
def wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    import pyarrow as pa
    import pyarrow.compute as pc

    from coordinator_core.simulator.generator import generate
    from pipelines.inputs.raw_files import RawRecord, write_raw_records
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO, append_arrow_at, conform_arrow
    from schemas import get as get_spec

    log = generate(6, 1.0, seed=2)  # static groups with rejoins, dynamic apps, groups that expire
    root = tmp_path_factory.mktemp("sqlwh")
    w = Warehouse()
    w.cfg = load_config(overrides={"paths.root": str(root), "replay.retention_ms": log.truth["retention_ms"]})
    w.conf = root / "sql.yaml"
    w.conf.write_text(f"paths:\n  root: {root}\nreplay:\n  retention_ms: {log.truth['retention_ms']}\n")
    write_raw_records(
        [
            RawRecord(k, v, "__consumer_offsets", p, o, t)
            for k, v, p, o, t in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True)
        ],
        w.cfg.paths.landing,
    )
    run_batch(w.cfg, spark)

    # end-offset samples of the busiest (group, topic, partition), 1 ms before each of its first
    # 30 commits, lag growing then dropping; every 5th sample is a group sample with a time lag
    commits = TableIO(w.cfg, None, engine="rust").read_arrow("offset_commits")
    assert commits is not None
    live = commits.filter(pc.invert(commits["is_tombstone"])).to_pylist()
    busiest = Counter((c["group_id"], c["topic"], c["partition"]) for c in live).most_common(1)[0][0]
    mine = sorted(
        (c for c in live if (c["group_id"], c["topic"], c["partition"]) == busiest), key=lambda c: c["log_offset"]
    )[:30]
    samples = []
    for i, c in enumerate(mine):
        at = c["commit_timestamp"] - dt.timedelta(milliseconds=1)
        group = i % 5 == 0
        samples.append(
            {
                "sampled_at": at,
                "topic": c["topic"],
                "partition": c["partition"],
                "log_start_offset": 0,
                "log_end_offset": c["committed_offset"] + (5 + i if i < 12 else i % 3),
                "group_id": c["group_id"] if group else None,
                "committed_offset": None,
                "lag_offsets": None,
                "committed_record_timestamp": at - dt.timedelta(milliseconds=500) if group else None,
                "bootstrap_servers": "test:9092",
            }
        )
    spec = get_spec("partition_end_offsets")
    append_arrow_at(
        w.cfg.table_path("partition_end_offsets"),
        conform_arrow(pa.Table.from_pylist(samples, schema=spec.arrow_schema()), spec),
    )
    return w


def _norm(v: Any) -> Any:
    """One value, engine types aside: numbers as rounded floats, timestamps as UTC microseconds,
    structs as sorted items, lists as multisets (``collect_list`` has no order in either engine)."""
    if isinstance(v, dt.datetime):
        v = v if v.tzinfo else v.replace(tzinfo=dt.UTC)
        return round(v.timestamp() * 1_000_000)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float, decimal.Decimal)):
        return round(float(v), 6)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(sorted((_norm(x) for x in v), key=repr))
    return v


def _rows(table: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_norm(v) for v in r.values()) for r in table.to_pylist())


def test_every_view_gives_the_same_rows_on_duckdb_and_spark(spark: Any, wh: Warehouse) -> None:
    from pipelines.analytics.views import VIEW_NAMES
    from pipelines.commands.sql import open_session, register_views

    register_views(spark, wh.cfg)
    duck = open_session(wh.cfg, engine="duckdb")
    compared = {}
    for view in VIEW_NAMES:  # every view has a DuckDB form (a UsageError here fails the test)
        sql = f"SELECT * FROM {view}"
        mine = duck.execute(sql)
        theirs = spark.sql(sql).toArrow()
        assert mine.column_names == theirs.column_names, view
        assert _rows(mine) == _rows(theirs), view
        compared[view] = mine.num_rows
    empty = [v for v, n in compared.items() if n == 0]
    assert not empty, f"views without rows compare nothing: {empty}"


def test_duckdb_transpile_keeps_sparks_answers() -> None:
    """Each rewrite in ``pipelines.analytics.transpile`` against Spark's documented answer."""
    import duckdb

    from pipelines.analytics.transpile import to_duckdb

    con = duckdb.connect()
    cases = {
        # Spark truncates a fractional value cast to an integer type (avg 1.5 -> 1; DuckDB rounds to 2)
        "SELECT CAST(avg(x) AS bigint) AS v FROM VALUES (1), (2) AS t(x)": 1,
        # last(x, true) over a window skips nulls (sqlglot alone drops the flag: null)
        "SELECT max(v) AS v FROM (SELECT last(x, true) OVER (ORDER BY y ROWS BETWEEN UNBOUNDED PRECEDING "
        "AND CURRENT ROW) AS v, y FROM VALUES (7, 1), (NULL, 2) AS t(x, y)) WHERE y = 2": 7,
        # percentile_approx returns an element of the data (DuckDB's approx_quantile interpolates)
        "SELECT percentile_approx(x, 0.95) AS v FROM VALUES (1), (2), (3), (4), (100) AS t(x)": 100,
        "SELECT percentile_approx(x, 0.5) AS v FROM VALUES (1), (2), (3), (4) AS t(x)": 2,
        # exists: true if any, else null if any null, else false (empty: false); forall mirrors it
        "SELECT exists(array(1, NULL), x -> x > 1) AS v": None,
        "SELECT exists(array(1, NULL, 5), x -> x > 1) AS v": True,
        "SELECT exists(slice(array(1), 2, 1), x -> x > 1) AS v": False,
        "SELECT forall(array(1, NULL), x -> x > 0) AS v": None,
        "SELECT forall(array(0, NULL), x -> x > 0) AS v": False,
        "SELECT forall(slice(array(1), 2, 1), x -> x > 5) AS v": True,
        # zip_with pads the shorter array with nulls
        "SELECT zip_with(array(1, 2, 3), array(10, 20), (a, b) -> coalesce(b, -1) + a) AS v": [11, 22, 2],
        "SELECT timestamp_millis(1700000000123) = TIMESTAMP '2023-11-14 22:13:20.123' AS v": True,
        # max_by/min_by return the extreme row's value even when it is null (rows with a null
        # ordering value are skipped); DuckDB's arg_max would skip the null value: 1
        "SELECT max_by(x, y) AS v FROM VALUES (1, 1), (NULL, 2), (3, NULL) AS t(x, y)": None,
        "SELECT min_by(x, y) AS v FROM VALUES (NULL, 1), (2, 2) AS t(x, y)": None,
    }
    for spark_sql, want in cases.items():
        assert con.sql(to_duckdb(spark_sql)).fetchall() == [(want,)], spark_sql


def test_only_the_tables_and_views_a_query_reads_are_registered(wh: Warehouse) -> None:
    from pipelines.commands.sql import open_session

    s = open_session(wh.cfg, engine="duckdb")
    assert s.execute("SELECT 1 AS one").to_pylist() == [{"one": 1}]
    assert s.duck._registered == set()
    s.execute("SELECT * FROM rebalances_daily")
    assert s.duck._registered == {"rebalances_daily", "rebalances"}


def _cli(
    wh: Warehouse, *args: str, cwd: Path | None = None, no_java: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``offsetlake sql`` in a fresh process; ``no_java``: no Java on PATH or JAVA_HOME, so a
    JVM start fails (proof that DuckDB answered)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(REPO))
    if no_java:
        env["JAVA_HOME"] = "/nonexistent"
        env["PATH"] = str(Path(sys.executable).parent)
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sql", "--conf", str(wh.conf), *args],
        cwd=cwd or REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        input=stdin,
    )


def test_duckdb_answers_in_a_fresh_process_without_a_jvm_as_tsv(wh: Warehouse) -> None:
    from pipelines.tableio import TableIO

    groups = TableIO(wh.cfg, None, engine="rust").count("group_state")
    start = time.perf_counter()
    proc = _cli(wh, "SELECT count(*) AS n FROM group_state")
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"n\n{groups}\n"  # piped: tsv, header then rows
    assert elapsed < 10  # ≤ 3 s measured alone (bench/sql.py); loose on a shared machine


def test_piped_output_keeps_every_cell_whole_in_each_format(wh: Warehouse) -> None:
    long = "x" * 150
    sql = f"SELECT group_id, '{long}' AS long, 'a\tb' AS tab, CAST(NULL AS string) AS nothing FROM group_state"
    tsv = _cli(wh, sql)
    assert tsv.returncode == 0, tsv.stderr
    lines = tsv.stdout.splitlines()
    assert lines[0] == "group_id\tlong\ttab\tnothing"
    assert all(line.split("\t")[1:] == [long, "a\\tb", ""] for line in lines[1:]) and len(lines) > 1
    assert not any("…" in line for line in lines)
    rows = [json.loads(line) for line in _cli(wh, "--format", "json", sql).stdout.splitlines()]
    assert rows and all(r["long"] == long and r["tab"] == "a\tb" and r["nothing"] is None for r in rows)
    csv_lines = _cli(wh, "--format", "csv", sql).stdout.splitlines()
    assert csv_lines[0] == "group_id,long,tab,nothing" and csv_lines[1].endswith(f",{long},a\tb,")


def test_query_from_stdin_is_answered_when_stdin_is_not_a_terminal(wh: Warehouse) -> None:
    proc = _cli(wh, stdin="SELECT 40 + 2 AS answer;\n")
    assert (proc.returncode, proc.stdout) == (0, "answer\n42\n"), proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("SELEC 1",), "query failed: "),
        (("SELECT no_such_column FROM group_state",), "query failed: "),
        (("SELECT * FROM no_such_table",), "unknown table or view no_such_table"),
        (("SELECT * FROM partition_end_offsets_typo",), "unknown table or view"),
        (("--engine", "duckdb", SPARK_ONLY_SQL), "no DuckDB form: uses a higher-order function"),
    ],
)
def test_bad_queries_and_unknown_tables_are_one_line_and_exit_2(
    wh: Warehouse, args: tuple[str, ...], message: str
) -> None:
    proc = _cli(wh, *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_warehouse_is_an_error_not_zero_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipelines.cli import main

    conf = tmp_path / "none.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'nothing-here'}\n")
    assert main(["sql", "--conf", str(conf), "SELECT * FROM group_state"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "no Delta tables under" in captured.err


def test_auto_lets_spark_answer_a_query_without_a_duckdb_form(
    spark: Any, wh: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    assert main(["sql", "--conf", str(wh.conf), "--format", "json", "--verbose", SPARK_ONLY_SQL]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"s": 6}
    assert "note: Spark answers: uses a higher-order function" in out.err and "engine: spark" in out.err


def test_auto_gives_tables_over_the_size_limit_to_spark(
    spark: Any, wh: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    base = ["sql", "--conf", str(wh.conf), "--format", "json", "--verbose", "--duckdb-max-mb", "0"]
    assert main([*base, "SELECT count(*) AS n FROM group_state"]) == 0
    out = capsys.readouterr()
    assert "engine: spark (the tables read hold 0." in out.err and " MiB > --duckdb-max-mb 0)" in out.err
    assert json.loads(out.out)["n"] > 0
    assert main([*base, "SELECT 1 AS one"]) == 0  # reads no table: nothing too big
    assert "engine: duckdb" in capsys.readouterr().err


def test_spark_leaves_no_spark_warehouse_in_the_working_directory(wh: Warehouse, tmp_path: Path) -> None:
    # SHOW TABLES opens Spark's session catalog, which creates the SQL warehouse directory
    proc = _cli(wh, "--engine", "spark", "SHOW TABLES", cwd=tmp_path, no_java=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0].split("\t") == ["namespace", "tableName", "isTemporary"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_local_spark_session_keeps_its_sql_warehouse_in_the_temp_directory(spark: Any) -> None:
    import tempfile

    where = spark.conf.get("spark.sql.warehouse.dir")
    assert where.removeprefix("file:").startswith(tempfile.gettempdir())
    assert not where.removeprefix("file:").startswith(os.getcwd())


def test_the_shell_runs_statements_lists_tables_and_quits(wh: Warehouse) -> None:
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: offsetlake sql on a terminal, no query
        os.environ.update(JAVA_HOME="/nonexistent", PATH=str(Path(sys.executable).parent), PYTHONPATH=str(REPO))
        os.execv(sys.executable, [sys.executable, "-m", "pipelines.cli", "sql", "--conf", str(wh.conf)])
    os.write(fd, b"SELECT 40 + 2\n  AS answer;\n\\d\nSELECT * FROM nope;\n\\q\n")
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "answer" in text and "42" in text  # a two-line statement, as a table
    assert "group_state" in text and "rebalances_daily" in text  # \d
    assert "error: unknown table or view nope" in text  # an error keeps the shell going
