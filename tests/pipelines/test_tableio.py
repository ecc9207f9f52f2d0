"""Table IO on the delta-rs engine (this machine has no Delta jars): idempotent appends,
MERGE upserts, overwrite markers, read-back equality, and plain-Delta interoperability."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from chispa import assert_df_equality  # noqa: E402

import schemas  # noqa: E402
from pipelines.config import Config, load_config  # noqa: E402
from pipelines.tableio import TableIO  # noqa: E402
from schemas.base import Column, TableSpec  # noqa: E402

KV = TableSpec(
    name="tio_kv",
    doc="test table: key/value with a nested column",
    columns=(
        Column("k", "string", False, "key"),
        Column("v", "bigint", True, "value"),
        Column("tps", "array<struct<topic:string,partition:int>>", True, "nested"),
        Column("ts", "timestamp", True, "a time"),
    ),
    primary_key=("k",),
    mode="merge",
)
PARTED = TableSpec(
    name="tio_parted",
    doc="test table: partitioned",
    columns=(Column("p", "int", False, "partition column"), Column("x", "string", True, "payload")),
    partition_by=("p",),
)


@pytest.fixture
def test_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(schemas.TABLES, KV.name, KV)
    monkeypatch.setitem(schemas.TABLES, PARTED.name, PARTED)
    yield


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(overrides={"paths.root": str(tmp_path), "delta.target_file_rows": 50})


@pytest.fixture
def io(cfg: Config, spark: Any, test_tables: None) -> TableIO:
    return TableIO(cfg, spark)


def _ts(sec: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=sec)


def _kv(spark: Any, rows: list[tuple[str, int | None, int]]) -> Any:
    data = [(k, v, [{"topic": f"t{v}", "partition": n}], _ts(n)) for k, v, n in rows]
    return spark.createDataFrame(data, KV.spark_schema())


def test_engine_is_rust_without_delta_jars(io: TableIO) -> None:
    assert io.engine == "rust"


def test_append_with_same_txn_version_is_applied_once(io: TableIO, spark: Any) -> None:
    df = _kv(spark, [(f"k{i}", i, i) for i in range(120)]).repartition(3)
    first = io.append("tio_kv", df, txn_app_id="job", txn_version=7)
    again = io.append("tio_kv", df, txn_app_id="job", txn_version=7)
    older = io.append("tio_kv", df, txn_app_id="job", txn_version=6)
    assert not first.skipped and first.rows == 120
    assert again.skipped and older.skipped
    assert io.count("tio_kv") == 120
    assert io.version("tio_kv") == first.version
    assert io.txn_version("tio_kv", "job") == 7
    nxt = io.append("tio_kv", df, txn_app_id="job", txn_version=8)
    assert not nxt.skipped and io.count("tio_kv") == 240


def test_executors_write_several_files_in_one_commit(io: TableIO, spark: Any) -> None:
    from deltalake import DeltaTable

    df = _kv(spark, [(f"k{i}", i, i) for i in range(200)]).repartition(2)
    res = io.append("tio_kv", df)
    t = DeltaTable(io.path("tio_kv"))
    assert res.version == 1  # version 0 = create, version 1 = the one write
    assert len(t.file_uris()) >= 4  # 2 tasks x rolling at delta.target_file_rows=50


def test_read_back_equals_written_including_nested_and_timestamps(io: TableIO, spark: Any) -> None:
    df = _kv(spark, [("a", 1, 1), ("b", None, 2), ("c", 3, 3)])
    io.append("tio_kv", df)
    assert_df_equality(io.read("tio_kv"), df, ignore_row_order=True, ignore_nullable=True)


def test_table_is_plain_delta_readable_by_delta_rs(io: TableIO, spark: Any) -> None:
    from deltalake import DeltaTable

    io.append("tio_kv", _kv(spark, [("a", 1, 1), ("b", 2, 2)]))
    table = DeltaTable(io.path("tio_kv")).to_pyarrow_table().sort_by("k")
    assert table.column("k").to_pylist() == ["a", "b"]
    assert table.column("tps").to_pylist() == [[{"topic": "t1", "partition": 1}], [{"topic": "t2", "partition": 2}]]
    assert table.schema.field("ts").type.tz == "UTC"


def test_empty_table_reads_as_empty_dataframe_with_declared_schema(io: TableIO) -> None:
    io.ensure("tio_kv")
    df = io.read("tio_kv")
    assert df.count() == 0
    assert [f.name for f in df.schema.fields] == list(KV.column_names)


def test_merge_upserts_and_unchanged_rows_make_no_commit(io: TableIO, spark: Any) -> None:
    io.merge("tio_kv", _kv(spark, [("a", 1, 1), ("b", 2, 2)]))
    v1 = io.version("tio_kv")
    res = io.merge("tio_kv", _kv(spark, [("b", 20, 2), ("c", 3, 3)]))
    assert not res.skipped
    rows = {r["k"]: r["v"] for r in io.read("tio_kv").collect()}
    assert rows == {"a": 1, "b": 20, "c": 3}
    v2 = io.version("tio_kv")
    assert v2 is not None and v1 is not None and v2 > v1
    same = io.merge("tio_kv", _kv(spark, [("b", 20, 2), ("c", 3, 3)]))
    assert same.skipped and io.version("tio_kv") == v2


def test_merge_with_delete_missing_is_a_full_rebuild(io: TableIO, spark: Any) -> None:
    io.merge("tio_kv", _kv(spark, [("a", 1, 1), ("b", 2, 2), ("c", 3, 3)]))
    io.merge("tio_kv", _kv(spark, [("b", 2, 2)]), delete_missing=True)
    assert [r["k"] for r in io.read("tio_kv").collect()] == ["b"]


def test_overwrite_replaces_contents_and_its_marker_skips_a_retry(io: TableIO, spark: Any) -> None:
    io.append("tio_kv", _kv(spark, [("a", 1, 1), ("b", 2, 2)]))
    res = io.overwrite("tio_kv", _kv(spark, [("z", 9, 9)]), txn_app_id="rebuild", txn_version=3)
    assert not res.skipped
    retry = io.overwrite("tio_kv", _kv(spark, [("z", 9, 9)]), txn_app_id="rebuild", txn_version=3)
    assert retry.skipped and retry.version == res.version
    assert [r["k"] for r in io.read("tio_kv").collect()] == ["z"]
    # another writer replaced the table since: the same marker is no longer the latest -> rewrite
    io.overwrite("tio_kv", _kv(spark, [("y", 8, 8)]), txn_app_id="other", txn_version=3)
    again = io.overwrite("tio_kv", _kv(spark, [("z", 9, 9)]), txn_app_id="rebuild", txn_version=3)
    assert not again.skipped
    assert [r["k"] for r in io.read("tio_kv").collect()] == ["z"]


def test_read_respects_the_snapshot_not_the_directory(io: TableIO, spark: Any) -> None:
    io.append("tio_kv", _kv(spark, [("a", 1, 1)]))
    io.overwrite("tio_kv", _kv(spark, [("b", 2, 2)]))
    # the overwritten file is still on disk (until VACUUM) but not in the snapshot
    files = [p for p in Path(io.path("tio_kv")).iterdir() if p.suffix == ".parquet"]
    assert len(files) == 2
    assert [r["k"] for r in io.read("tio_kv").collect()] == ["b"]
    assert [r["k"] for r in io.read("tio_kv", version=1).collect()] == ["a"]
    removed = io.vacuum("tio_kv", retention_hours=0)
    assert len(removed) == 1
    assert [r["k"] for r in io.read("tio_kv").collect()] == ["b"]


def test_partitioned_table_round_trips(io: TableIO, spark: Any) -> None:
    df = spark.createDataFrame([(i % 3, f"x{i}") for i in range(30)], PARTED.spark_schema())
    io.append("tio_parted", df)
    parts = sorted(p.name for p in Path(io.path("tio_parted")).iterdir() if p.is_dir() and p.name.startswith("p="))
    assert parts == ["p=0", "p=1", "p=2"]
    assert_df_equality(io.read("tio_parted"), df, ignore_row_order=True, ignore_nullable=True)


def test_dataframe_not_matching_the_declared_schema_is_rejected(io: TableIO, spark: Any) -> None:
    df = spark.createDataFrame([("a", 1)], "k string, other bigint")
    with pytest.raises(ValueError, match=r"tio_kv: .*missing v, tps, ts; unexpected other"):
        io.append("tio_kv", df)


def test_columns_are_reordered_and_cast_to_the_declared_types(io: TableIO, spark: Any) -> None:
    df = spark.createDataFrame(
        [(_ts(1), 5, "a", None)], "ts timestamp, v int, k string, tps array<struct<topic:string,partition:int>>"
    )
    io.append("tio_kv", df)
    back = io.read("tio_kv")
    assert dict(back.dtypes)["v"] == "bigint"
    assert back.collect()[0]["v"] == 5


def test_metadata_needs_no_spark(cfg: Config, spark: Any, test_tables: None) -> None:
    TableIO(cfg, spark).append("tio_kv", _kv(spark, [("a", 1, 1)]))
    meta = TableIO(cfg, None)
    assert meta.list_tables() == ["tio_kv"]
    assert meta.count("tio_kv") == 1 and meta.version("tio_kv") == 1


def test_delete_keys_removes_matching_rows_and_a_retry_commits_nothing(io: TableIO, spark: Any) -> None:
    io.append("tio_kv", _kv(spark, [("a", 1, 1), ("b", 2, 2), ("c", 3, 3)]))
    keys = spark.createDataFrame([("a",), ("zz",)], "k string")
    res = io.delete_keys("tio_kv", keys, txn_app_id="del", txn_version=1)
    assert res.rows == 1 and not res.skipped
    assert sorted(r["k"] for r in io.read("tio_kv").collect()) == ["b", "c"]
    again = io.delete_keys("tio_kv", keys, txn_app_id="del", txn_version=1)
    assert again.skipped and again.version == res.version
