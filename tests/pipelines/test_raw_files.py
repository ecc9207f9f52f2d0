"""Raw-record files: sequential atomic Parquet, JSON-lines reading, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipelines.errors import UsageError
from pipelines.inputs.raw_files import (
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
    assert [f.name for f in files] == ["part-00000000.parquet", "part-00000001.parquet", "part-00000002.parquet"]
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
        json.dumps({"key": "0002000167", "value": None, "partition": 3, "offset": 7, "timestamp": 5})
        + "\n"
        + json.dumps({"key": "AAIAAWc=", "value": "AAN4", "encoding": "base64"})
        + "\n"
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


# ---------------------------------------------------------------------------------------------
# kcat -J dumps and field checks (issue 18)

KCAT_DUMP = Path(__file__).parent / "vectors" / "kcat" / "consumer_offsets_J.jsonl"


def _kcat_expected() -> list[RawRecord]:
    # what make_consumer_offsets_J.py produced; kcat wrote it with -J (real output, see that script)
    from coordinator_core import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, encode_key, encode_value

    t0 = 1_700_000_000_000
    kv = [
        (
            encode_key(OffsetCommitKey('g-"q\\b\n', "orders", 0)),
            encode_value(OffsetCommitValue(42, "", t0, leader_epoch=3, version=3)),
        ),
        (
            encode_key(OffsetCommitKey("billing", "orders", 1)),
            encode_value(OffsetCommitValue(7, "é€", t0 + 1, version=1, expire_timestamp=None)),
        ),
        (encode_key(GroupMetadataKey("billing")), None),
        (encode_key(OffsetCommitKey("bin", "t", 2)), bytes([0, 3]) + bytes(range(256))),
    ]
    return [RawRecord(k, v, "__consumer_offsets", 0, i, t0 + i, 0) for i, (k, v) in enumerate(kv)]


def test_a_real_kcat_json_dump_is_read_byte_for_byte() -> None:
    assert b"\xff" in KCAT_DUMP.read_bytes()  # kcat writes bytes >= 0x80 raw: the file is not UTF-8
    assert list(read_raw_records(KCAT_DUMP)) == _kcat_expected()
    assert sum(b.num_rows for b in iter_raw_batches(KCAT_DUMP, positions="required")) == 4


def _kcat_line(**fields: object) -> bytes:
    obj: dict[str, object] = {
        "topic": "__consumer_offsets",
        "partition": 1,
        "offset": 9,
        "tstype": "logappend",
        "ts": 1_700_000_000_000,
        "broker": 1,
        "key": "\u0000\u0002\u0000\u0001g",
        "payload": None,
    }
    obj.update(fields)
    return json.dumps({k: v for k, v in obj.items() if v is not ...}).encode() + b"\n"


def test_kcat_log_append_time_and_tombstones_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "kcat.jsonl"
    path.write_bytes(_kcat_line())
    assert list(read_raw_records(path)) == [
        RawRecord(b"\x00\x02\x00\x01g", None, "__consumer_offsets", 1, 9, 1_700_000_000_000, 1)
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"key_schema_id": 3}, ":2: unknown field 'key_schema_id'"),
        ({"ts": ...}, ":2: kcat -J line without 'ts'"),
        ({"partition": ...}, ":2: kcat -J line without 'partition'"),
        ({"key": None}, ":2: kcat 'key' is null"),
        ({"payload": "\u00003\ufffd"}, ":2: kcat 'payload' has the character U\\+FFFD"),
        ({"tstype": "unknown"}, ":2: kcat 'tstype' must be"),
        ({"headers": ["h", "v"]}, ":2: kcat 'headers' is not empty"),
    ],
)
def test_a_kcat_line_with_unknown_or_missing_fields_is_an_error_naming_line_and_field(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    path = tmp_path / "kcat.jsonl"
    path.write_bytes(_kcat_line() + _kcat_line(**fields))
    with pytest.raises(UsageError, match=message):
        list(read_raw_records(path))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"key": "0002000167", "vlaue": "00", "partition": 0, "offset": 0}', "unknown field 'vlaue'"),
        ('{"key": "0002000167", "partition": 0, "offset": 0}', "no 'value'"),
    ],
)
def test_our_json_lines_refuse_unknown_fields_and_an_implied_tombstone(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UsageError, match=message) as err:
        list(read_raw_records(path))
    assert "in.jsonl:1" in str(err.value)


def test_binary_and_console_consumer_text_are_a_one_line_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "console.txt"
    path.write_bytes(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00\t\x00\x03\xff\xfe\x80*\n")
    with pytest.raises(UsageError, match=r"console\.txt:1: not valid JSON") as err:
        list(read_raw_records(path))
    assert "\n" not in str(err.value)
