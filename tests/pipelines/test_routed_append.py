"""A routed pass with an appended input table (``RoutedWriter``, ``appended`` tables), run in
process without Spark: the batch job's decode pass copying the ingest's landing files into
raw_records. The executor side writes every table's files, the driver commits raw_records first
(an append, no marker) and the decoded tables with the marker; rows that do not add up commit
nothing and leave no file behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pipelines.batch.decode import FILE_ROUTE, LANDING_KEY, TABLES
from pipelines.batch.ingest import CHECK, RAW_TABLE
from pipelines.inputs.raw_files import write_raw_records
from pipelines.inputs.sample import sample_records
from pipelines.tableio import deltars
from pipelines.tableio.deltars import already_applied
from pipelines.tableio.rust_sink import RoutedMessage, RoutedWriter, encode_schema
from schemas import get as get_spec


def _pass(root: Path, landing: list[str], rows: int, appended_rows: int) -> tuple[RoutedWriter, RoutedMessage]:
    """Tables under ``root`` and one task's pass over ``landing`` (its files copied and decoded)."""
    tables = []
    for name in (RAW_TABLE, *TABLES):
        spec = get_spec(name)
        deltars.create(str(root / name), spec.arrow_schema(), list(spec.partition_by))
        entry: dict[str, Any] = {
            "name": name,
            "path": str(root / name),
            "arrow_schema": encode_schema(spec.arrow_schema()),
            "partition_by": list(spec.partition_by),
            "marked": True,
        }
        if name == RAW_TABLE:
            entry["append"] = {"rows": appended_rows, "metadata": {"offsetlake.test": "landing"}}
        tables.append(entry)
    route_options = {"lenient": False, "min_copy_rows": 38, "existing": [], "num_partitions": 50, LANDING_KEY: landing}
    writer = RoutedWriter(
        {
            "tables": json.dumps(tables),
            "route": FILE_ROUTE,
            "route_options": json.dumps(route_options),
            "target_file_rows": "1000",
            "write_mode": "overwrite",
            "require_latest": "true",
            "rows_equal_input": "true",
            "expected_rows": str(rows),
            "txn_app_id": "test-decode",
            "txn_version": "1",
            "commit_check": CHECK,
        },
        True,
    )
    return writer, writer.write(iter([pa.RecordBatch.from_pydict({"path": landing})]))


def test_the_appended_input_is_committed_first_without_the_marker_and_the_decoded_tables_with_it(
    tmp_path: Path,
) -> None:
    records = sample_records(2, seed=1)
    landing = [str(p) for p in write_raw_records(records, tmp_path / "landing", rows_per_file=40)]
    writer, message = _pass(tmp_path / "w", landing, len(records), len(records))
    writer.commit([message])

    raw = DeltaTable(str(tmp_path / "w" / RAW_TABLE))
    assert raw.version() == 1 and raw.to_pyarrow_table().num_rows == len(records)
    info = raw.history(1)[0]
    assert info.get("offsetlake.test") == "landing" and not already_applied(raw, "test-decode", 1)
    decoded = {name: DeltaTable(str(tmp_path / "w" / name)) for name in TABLES}
    assert sum(dt.to_pyarrow_table().num_rows for dt in decoded.values()) == len(records)
    assert all(already_applied(dt, "test-decode", 1, require_latest=True) for dt in decoded.values())
    # the 40-row landing file was copied byte for byte, the last one (36 rows) rewritten
    assert len(records) == 76 and len(landing) == 2
    (copied,) = [f for f in raw.file_uris() if f.endswith(".c000.parquet")]
    assert Path(copied).read_bytes() == Path(landing[0]).read_bytes()


@pytest.mark.parametrize(("rows", "appended_rows"), [(1, 0), (0, 1)])
def test_rows_that_do_not_add_up_commit_nothing_and_leave_no_file(
    tmp_path: Path, rows: int, appended_rows: int
) -> None:
    records = sample_records(2, seed=1)
    landing = [str(p) for p in write_raw_records(records, tmp_path / "landing", rows_per_file=40)]
    writer, message = _pass(tmp_path / "w", landing, len(records) + rows, len(records) + appended_rows)
    assert any(message.files.values())
    with pytest.raises(RuntimeError, match="count mismatch, nothing committed"):
        writer.commit([message])
    for name in (RAW_TABLE, *TABLES):
        assert DeltaTable(str(tmp_path / "w" / name)).version() == 0
        assert not list((tmp_path / "w" / name).rglob("*.parquet")), name
