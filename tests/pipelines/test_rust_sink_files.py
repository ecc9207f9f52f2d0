"""The Parquet files the rust engine's tasks write (``pipelines.tableio.rust_sink._TaskWriter``):
which columns are dictionary- or delta-encoded, and that the encodings change no value."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.tableio.rust_sink import _TaskWriter, delta_columns, dictionary_columns
from schemas.decoded import GROUP_METADATA, OFFSET_COMMITS


def _offset_commits(n: int) -> pa.Table:
    schema = OFFSET_COMMITS.arrow_schema()
    ts = [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i) for i in range(n)]
    cols = {
        "coordinator_partition": [i % 50 for i in range(n)],
        "log_offset": list(range(n)),
        "log_timestamp": ts,
        "group_id": [f"g{i % 7}" for i in range(n)],
        "topic": ["t"] * n,
        "partition": [i % 3 for i in range(n)],
        "key_version": [1] * n,
        "is_tombstone": [False] * n,
        "value_version": [3] * n,
        "committed_offset": [10 * i for i in range(n)],
        "leader_epoch": [None] * n,
        "metadata": [""] * n,
        "commit_timestamp": ts,
        "expire_timestamp": [None] * n,
        "producer_id": [None] * n,
        "txn_outcome": [None] * n,
        "txn_marker_offset": [None] * n,
    }
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema}, schema=schema)


def _encodings(path: Path, kind: str = "DICTIONARY") -> dict[str, bool]:
    meta = pq.read_metadata(path)
    group = meta.row_group(0)
    return {
        group.column(i).path_in_schema: any(kind in e for e in group.column(i).encodings)
        for i in range(meta.num_columns)
    }


def _written(tmp_path: Path, table: pa.Table) -> Path:
    """The one file a task writer makes of ``table`` (offset_commits' schema)."""
    writer = _TaskWriter(str(tmp_path), OFFSET_COMMITS.arrow_schema(), [], 10_000)
    writer.write(table)
    (added,) = writer.close()
    return tmp_path / added.path


def test_written_files_dictionary_encode_strings_and_32_bit_columns_only(tmp_path: Path) -> None:
    table = _offset_commits(1000)
    path = _written(tmp_path, table)
    dictionary = _encodings(path)
    assert dictionary["group_id"] and dictionary["topic"] and dictionary["coordinator_partition"]
    assert not dictionary["log_offset"] and not dictionary["committed_offset"] and not dictionary["log_timestamp"]
    assert pq.read_table(path).equals(table)


def test_nested_string_columns_are_in_the_dictionary_list() -> None:
    columns = dictionary_columns(GROUP_METADATA.arrow_schema())
    assert "members.list.element.member_id" in columns
    assert "members.list.element.assigned_partitions.list.element.partition" in columns
    assert "log_offset" not in columns and "current_state_timestamp" not in columns


def test_64_bit_columns_are_delta_encoded_and_read_back_unchanged(tmp_path: Path) -> None:
    table = _offset_commits(5000)
    path = _written(tmp_path, table)
    delta = _encodings(path, "DELTA_BINARY_PACKED")
    assert delta["log_offset"] and delta["log_timestamp"] and delta["committed_offset"] and delta["commit_timestamp"]
    assert not delta["group_id"] and not delta["coordinator_partition"] and not delta["partition"]
    assert pq.read_table(path).equals(table)
    plain = tmp_path / "plain.parquet"
    pq.write_table(table, plain, compression="snappy")
    assert path.stat().st_size < plain.stat().st_size


def test_nested_64_bit_columns_are_in_the_delta_list() -> None:
    columns = delta_columns(GROUP_METADATA.arrow_schema())
    assert "log_offset" in columns and "current_state_timestamp" in columns
    assert all(encoding == "DELTA_BINARY_PACKED" for encoding in columns.values())
    assert not set(columns) & set(dictionary_columns(GROUP_METADATA.arrow_schema()))
