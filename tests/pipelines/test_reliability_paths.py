"""A warehouse whose path holds a space, non-ASCII letters, ``#`` and ``?`` (issue 37, item 9):
``run batch`` writes it and runs again idempotently, and ``sql`` (DuckDB and Spark), ``report``,
``metrics``, ``dq``, ``serve`` and ``tables`` read it (one batch run, shared). A path holding a
percent-escape (``%20``), which delta-rs cannot read back, is refused in one line before anything
is written. Data-file locations from delta-rs are decoded in one place (``pipelines.uri``)."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pipelines.config import Config, load_config

ODD = "wh ré#? ü"


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from pipelines.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


class Odd:
    cfg: Config
    conf: Path
    first: tuple[int, str, str]
    second: tuple[int, str, str]


@pytest.fixture(scope="module")
def odd(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Odd:
    from pipelines.inputs.raw_files import write_raw_records
    from pipelines.inputs.sample import sample_records

    root = tmp_path_factory.mktemp("paths") / ODD
    root.mkdir()
    o = Odd()
    o.conf = root.parent / "odd.yaml"
    o.conf.write_text(f"paths:\n  root: {json.dumps(str(root))}\n")
    o.cfg = load_config(o.conf)
    assert o.cfg.paths.warehouse == str(root / "warehouse")
    write_raw_records(sample_records(4, seed=11), o.cfg.paths.landing)
    from pipelines.cli import main

    o.first = (main(["run", "batch", "--conf", str(o.conf), "--json"]), "", "")
    o.second = (main(["run", "batch", "--conf", str(o.conf), "--json"]), "", "")
    return o


def _tables(cfg: Config) -> dict[str, int]:
    from pipelines.tableio import TableIO

    io = TableIO(cfg, None, engine="rust")
    return {t: io.count(t) for t in io.list_tables()}


@pytest.mark.spark
def test_run_batch_writes_the_warehouse_and_a_second_run_is_up_to_date(odd: Odd) -> None:
    from pipelines.tableio import TableIO

    assert odd.first[0] == 0 and odd.second[0] == 0
    io = TableIO(odd.cfg, None, engine="rust")
    assert io.count("raw_records") > 0 and io.count("offset_commits") > 0 and io.count("group_state") > 0
    # the second run saw every marker (delta-rs' history of such a path is read from the log)
    assert io.history("raw_records", 1)[0]["version"] == io.version("raw_records")
    assert len(io.history("offset_commits")) == io.version("offset_commits") + 1
    runs = sorted(Path(odd.cfg.paths.warehouse, "_runs", "batch").glob("*.json"))
    assert len(runs) == 2
    first, last = (json.loads(r.read_text())["tables"] for r in runs)
    assert {t["action"] for t in first.values()} <= {"written", "merged"}
    assert {t["action"] for t in last.values()} == {"unchanged"}, last  # every marker seen
    assert {n: t["version"] for n, t in last.items()} == {n: t["version"] for n, t in first.items()}


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_sql_reads_the_warehouse(odd: Odd, capsys: pytest.CaptureFixture[str], engine: str) -> None:
    want = _tables(odd.cfg)["offset_commits"]
    rc, out, err = _cli(
        [
            "sql",
            "--conf",
            str(odd.conf),
            "--engine",
            engine,
            "--format",
            "tsv",
            "SELECT count(*) AS n FROM offset_commits",
        ],
        capsys,
    )
    assert rc == 0, err
    assert out == f"n\n{want}\n"
    rc, out, err = _cli(
        [
            "sql",
            "--conf",
            str(odd.conf),
            "--engine",
            engine,
            "--format",
            "tsv",
            "SELECT count(*) AS n FROM consumer_lag",
        ],
        capsys,
    )
    assert rc == 0, err


@pytest.mark.spark
def test_report_metrics_tables_and_dq_read_the_warehouse(odd: Odd, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(["metrics", "--conf", str(odd.conf)], capsys)
    assert rc == 0, err
    assert "offsetlake_consumergroup_" in out or "offsetlake_" in out
    rc, out, err = _cli(["tables", "--conf", str(odd.conf), "--json"], capsys)
    assert rc == 0, err
    rc, out, err = _cli(["report", "--conf", str(odd.conf)], capsys)
    assert rc == 0, err
    assert any(Path(odd.cfg.paths.reports).glob("*.html"))
    rc, out, err = _cli(["dq", "--conf", str(odd.conf), "--json"], capsys)
    assert rc in (0, 1), err  # 1: a blocking expectation failed on this sample, not an unreadable table
    assert "Traceback" not in err and "not found" not in (out + err).lower()


@pytest.mark.spark
def test_serve_answers_from_the_warehouse(odd: Odd) -> None:
    from pipelines.serve.http import make_server
    from pipelines.tableio import TableIO

    io = TableIO(odd.cfg, None, engine="rust")
    group = io.read_arrow("group_state").column("group_id")[0].as_py()
    server = make_server(io, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        for path in ("/healthz", "/metrics", f"/v3/kafka/local/consumer/{urllib.request.quote(group)}/status"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
                assert r.status == 200, path
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", [["run", "batch"], ["sql", "SELECT 1"], ["metrics"], ["config", "--check"]])
def test_a_warehouse_path_with_a_percent_escape_is_refused_in_one_line_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    root = tmp_path / "wh ré#%20?"
    conf = tmp_path / "pct.yaml"
    conf.write_text(f"paths:\n  root: {json.dumps(str(root))}\n")
    rc, out, err = _cli([*command, "--conf", str(conf)], capsys)
    assert rc == 2, out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "'%20'" in lines[0] and "paths.warehouse" in lines[0], err
    assert not (root / "warehouse").exists()


def test_data_file_locations_from_delta_rs_are_decoded_once() -> None:
    from pipelines import uri

    assert uri.from_delta_rs("/data/wh%20r%C3%A9%23%3F/t/part-0.parquet") == "/data/wh ré#?/t/part-0.parquet"
    assert uri.from_delta_rs("file:///data/wh%20r%C3%A9%23%3F/t/p.parquet") == "/data/wh ré#?/t/p.parquet"
    assert uri.from_delta_rs("/data/50%25/t/p.parquet") == "/data/50%/t/p.parquet"
    assert uri.from_delta_rs("s3a://bucket/wh%20x/t/p.parquet") == "s3a://bucket/wh x/t/p.parquet"
    assert uri.from_delta_rs("/data/plain/t/p.parquet") == "/data/plain/t/p.parquet"
    assert uri.delta_rs_problem("/data/wh ré#?/x") is None and uri.delta_rs_problem("/data/50%/x") is None
    assert uri.delta_rs_problem("/data/wh%20x") and uri.delta_rs_problem("file:///data/wh%2520x")
    assert uri.delta_rs_problem("s3a://b/wh%20x") is None  # object stores keep their keys as written
