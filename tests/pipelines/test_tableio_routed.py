"""The spark engine's routed writes run the same routes as the rust engine: the rows a routed pass
gives as DataFrames (``pipelines.tableio.routed``, what Spark's Delta then writes) equal what the
rust engine's tasks committed, and the counts the commit checks are the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.batch.decode import FILE_ROUTE, TABLES, write_decoded_from_raw_table  # noqa: E402
from pipelines.batch.file_tasks import spread  # noqa: E402
from pipelines.batch.ingest import ingest  # noqa: E402
from pipelines.config import load_config  # noqa: E402
from pipelines.inputs.raw_files import write_raw_records  # noqa: E402
from pipelines.inputs.sample import sample_records  # noqa: E402
from pipelines.tableio import TableIO  # noqa: E402
from pipelines.tableio.routed import routed_frames  # noqa: E402


def test_a_routed_pass_as_dataframes_gives_the_rows_the_rust_engine_committed(tmp_path: Path, spark: Any) -> None:
    from chispa import assert_df_equality

    cfg = load_config(overrides={"paths.root": str(tmp_path)})
    write_raw_records(sample_records(3, seed=4), cfg.paths.landing, rows_per_file=50)
    io = TableIO(cfg, spark)
    ingest(spark, cfg, io)
    raw = io.count("raw_records")
    write_decoded_from_raw_table(io, app_id="t", version=1, expected_rows=raw)
    files = io.snapshot_files("raw_records")
    assert files and len(files) > 1

    out = routed_frames(
        spread(spark, [(f,) for f in files], "path string"), FILE_ROUTE, {"lenient": False}, list(TABLES)
    )
    try:
        assert out.rows_in == raw == sum(out.rows_out.values())
        assert out.problem(rows_equal_input=True, expected_rows=raw) is None
        assert out.problem(rows_equal_input=True, expected_rows=raw + 1) == f"read {raw} input rows, expected {raw + 1}"
        for name in TABLES:
            assert out.rows_out[name] == io.count(name)
            assert_df_equality(out.frames[name], io.read(name), ignore_row_order=True, ignore_nullable=True)
    finally:
        out.packed.unpersist()


def test_spread_builds_the_schema_sparks_ddl_parser_gives(spark: Any) -> None:
    from pyspark.sql.types import _parse_datatype_string

    from pipelines.batch.file_tasks import _simple_struct

    for ddl in ("path string", "bucket int, paths string", "a bigint,b binary"):
        assert _simple_struct(ddl) == _parse_datatype_string(ddl)
    assert _simple_struct("a array<int>") is None and _simple_struct("a int not null") is None


@pytest.mark.parametrize("setting", [None, "false"])
def test_a_routed_write_leaves_the_sessions_codegen_setting_as_it_found_it(
    tmp_path: Path, spark: Any, setting: str | None
) -> None:
    """The rust engine's routed pass runs without whole-stage codegen (``rust._without_whole_stage
    _codegen``); afterwards the session's setting is what it was, whatever it was."""
    key = "spark.sql.codegen.wholeStage"
    cfg = load_config(overrides={"paths.root": str(tmp_path)})
    write_raw_records(sample_records(2, seed=5), cfg.paths.landing, rows_per_file=40)
    io = TableIO(cfg, spark, engine="rust")
    if setting is not None:
        spark.conf.set(key, setting)
    try:
        before = spark.conf.get(key)
        ingest(spark, cfg, io)
        raw = io.count("raw_records")
        write_decoded_from_raw_table(io, app_id="t", version=1, expected_rows=raw)
        assert io.count("offset_commits") > 0
        assert spark.conf.get(key) == before
    finally:
        spark.conf.unset(key)
    assert spark.conf.get(key) == "true"
