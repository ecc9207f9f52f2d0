"""Raw-record files: sequential atomic Parquet, JSON-lines reading, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.errors import UsageError
from pipelines.raw_files import (
    RAW_ARROW_SCHEMA,
    RawRecord,
    RawRecordWriter,
    iter_raw_batches,
    read_raw_records,
    write_raw_records,
)


def _records(n: int) -> list[RawRecord]:
    return [
        RawRecord(
            key=b"\x00\x02\x00\x01" + bytes([65 + i % 26]),
            value=None if i % 4 == 0 else bytes([0, 3, i % 256]),
            topic="__consumer_offsets",
            partition=i % 3,
            offset=i,
            timestamp_ms=1_700_000_000_000 + i,
        )
        for i in range(n)
    ]


def test_written_files_read_back_identically_in_log_order(tmp_path: Path) -> None:
    recs = _records(25)
    files = write_raw_records(recs, tmp_path, rows_per_file=10)
    assert [f.name for f in files] == [
        "part-00000000.parquet", "part-00000001.parquet", "part-00000002.parquet"
    ]
    assert list(read_raw_records(tmp_path)) == recs
    assert pq.read_schema(files[0]).equals(RAW_ARROW_SCHEMA, check_metadata=False)


def test_a_second_writer_continues_the_sequence_and_leaves_no_temp_files(tmp_path: Path) -> None:
    write_raw_records(_records(3), tmp_path)
    with RawRecordWriter(tmp_path) as w:
        w.write(_records(2))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["part-00000000.parquet", "part-00000001.parquet"]


def test_jsonl_accepts_hex_and_base64_and_defaults_positions(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps({"key": "0002000167", "value": None, "partition": 3, "offset": 7, "timestamp": 5}) + "\n"
        + json.dumps({"key": "AAIAAWc=", "value": "AAN4", "encoding": "base64"}) + "\n"
    )
    first, second = read_raw_records(path)
    assert first == RawRecord(b"\x00\x02\x00\x01g", None, "__consumer_offsets", 3, 7, 5, 0)
    assert second.key == b"\x00\x02\x00\x01g" and second.value == b"\x00\x03x" and second.offset == 1
    assert sum(b.num_rows for b in iter_raw_batches(path)) == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"value": "00"}', "at least 'key'"),
        ('{"key": "zz!"}', "neither hex nor base64"),
        ('{"key": null}', "never null"),
        ('{"key": "00", "partition": "x"}', "must be integers"),
    ],
)
def test_bad_jsonl_lines_raise_one_clear_usage_error(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UsageError, match=message) as err:
        list(read_raw_records(path))
    assert "bad.jsonl:1" in str(err.value)


def test_missing_input_and_non_parquet_files_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        list(read_raw_records(tmp_path / "nope.parquet"))
    bogus = tmp_path / "bogus.parquet"
    bogus.write_bytes(b"not parquet at all")
    with pytest.raises(UsageError, match="not a readable Parquet"):
        list(read_raw_records(bogus))
