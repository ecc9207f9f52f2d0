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
        spread(spark, [(f,) for f in files], "path string").frame(), FILE_ROUTE, {"lenient": False}, list(TABLES)
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


def test_task_rows_hand_each_task_its_rows_by_rdd_and_as_a_dataframe(spark: Any) -> None:
    """``TaskRows``: task i gets bins[i] as one Arrow batch (a task without rows gets none), in
    task order, by Spark's RDD API; ``frame()`` holds the same rows, partition i = bins[i]."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from pipelines.tableio.task_rows import TaskRows

    schema = StructType([StructField("bucket", IntegerType()), StructField("path", StringType())])
    bins = [[(3, "c"), (1, "a")], [], [(2, "b")]]
    tasks = TaskRows(spark, schema, bins)

    def seen(batches: Any) -> Any:
        got = list(batches)
        yield [b.num_rows for b in got], [tuple(r.values()) for b in got for r in b.to_pylist()]
        yield str(got[0].schema) if got else None

    out = tasks.run(seen)
    assert out[0::2] == [([2], [(3, "c"), (1, "a")]), ([], []), ([1], [(2, "b")])]
    assert out[1] == "bucket: int32\npath: string" and out[3] is None
    frame = tasks.frame()
    assert frame.schema == schema
    parts = frame.rdd.glom().map(lambda rows: [tuple(r) for r in rows]).collect()
    assert parts == bins


def test_the_rust_engines_routed_writes_plan_no_sql_query(tmp_path: Path, spark: Any) -> None:
    """The ingest's copy and the decode's pass run as RDD jobs (``TaskRows.run``): the driver JVM
    plans, optimises and code-generates no SQL query for them (the first one of a process cost
    ~1 s of its CPU: ``pipelines.tableio.task_rows``)."""
    cfg = load_config(overrides={"paths.root": str(tmp_path)})
    write_raw_records(sample_records(2, seed=5), cfg.paths.landing, rows_per_file=40)
    io = TableIO(cfg, spark, engine="rust")
    store = spark._jsparkSession.sharedState().statusStore()
    before = store.executionsCount()
    ingest(spark, cfg, io)
    raw = io.count("raw_records")
    write_decoded_from_raw_table(io, app_id="t", version=1, expected_rows=raw)
    assert io.count("offset_commits") > 0
    assert store.executionsCount() == before
