"""Filtered Arrow reads find every matching row, whatever statistics the Delta log holds.

delta-rs turns each file's log statistics into a pyarrow guarantee; a column the log has no
min/max for got the bounds ``>= null and <= null`` and every filter on it dropped the file, so a
read filtered on a string column (the report's commits of its groups) came back empty. No Spark.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest

from pipelines.tableio import read_arrow_at


@pytest.fixture
def table(tmp_path: Path) -> str:
    """Two files written by the project's task writer (its log statistics hold min/max for
    integer columns only) in one commit, as the jobs' routed writes make them."""
    from pipelines.tableio import deltars
    from pipelines.tableio.rust_sink import _TaskWriter

    uri = str(tmp_path / "t")
    schema = pa.schema([("partition", pa.int32()), ("group_id", pa.string()), ("is_tombstone", pa.bool_())])
    deltars.create(uri, schema, [])
    writer = _TaskWriter(uri, schema, [], target_rows=3)
    for part in range(2):
        writer.write(
            pa.table(
                {
                    "partition": pa.array([part] * 3, pa.int32()),
                    "group_id": pa.array([f"g{part}-{i}" for i in range(3)], pa.string()),
                    "is_tombstone": pa.array([False, True, False]),
                },
                schema=schema,
            )
        )
    files = writer.close()
    assert len(files) == 2
    deltars.commit_files(
        uri,
        files,
        schema=schema,
        partition_by=[],
        overwrite=False,
        app_id=None,
        txn_version=None,
        require_latest=False,
        metadata={},
    )
    return uri


def test_a_filter_on_a_column_without_log_statistics_finds_its_rows(table: str) -> None:
    got = read_arrow_at(table, ["group_id"], pds.field("group_id").isin(["g0-1", "g1-2"]))
    assert sorted(got.column("group_id").to_pylist()) == ["g0-1", "g1-2"]
    assert read_arrow_at(table, None, pds.field("is_tombstone")).num_rows == 2
    assert read_arrow_at(table, ["group_id"], pds.field("group_id") == "nope").num_rows == 0


def test_a_filter_on_a_column_with_log_statistics_still_selects_exactly(table: str) -> None:
    got = read_arrow_at(table, ["partition", "group_id"], pds.field("partition") == 1)
    assert got.num_rows == 3 and pc.all(pc.equal(got.column("partition"), 1)).as_py()
    assert read_arrow_at(table).num_rows == 6
