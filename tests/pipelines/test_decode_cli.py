"""``offsetlake decode``: Kafka formatter JSON for one record or a file; exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator_core import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from pipelines.cli import main

VECTORS = Path(__file__).resolve().parents[2] / "docs" / "spec" / "vectors"
FORMATTER = {v["id"]: v for v in json.loads((VECTORS / "kafka_formatter_tests.json").read_text())}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    "vec_id",
    [
        "kafka-formatter-offset-value-v3",
        "kafka-formatter-group-value-v4",
        "kafka-formatter-offset-tombstone",
        "kafka-formatter-group-unknown-version-10",
    ],
)
def test_single_record_prints_exactly_kafkas_json(capsys: pytest.CaptureFixture[str], vec_id: str) -> None:
    vec = FORMATTER[vec_id]
    argv = ["decode", "--key", vec["key_hex"]] + (["--value", vec["value_hex"]] if vec["value_hex"] else [])
    rc, out, _ = _run(capsys, *argv)
    assert rc == 0
    assert out == json.dumps(vec["expected"], separators=(",", ":")) + "\n"


def test_rich_format_adds_record_type_and_partition(capsys: pytest.CaptureFixture[str]) -> None:
    vec = FORMATTER["kafka-formatter-group-value-v3"]
    rc, out, _ = _run(capsys, "decode", "--format", "rich", "--key", vec["key_hex"], "--value", vec["value_hex"])
    obj = json.loads(out)
    assert rc == 0 and obj["recordType"] == "GroupMetadata" and obj["coordinatorPartition"] == 13
    assert obj["consumerProtocol"][0]["errors"]  # the opaque 2-byte blobs are reported, not fatal


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["decode", "--key", "zz"], "not valid hex"),
        (["decode", "--key", "0001000867"], "corrupt key"),
        (["decode", "--key", "0001000867726f75702d69640003666f6f00000001", "--value", "0001"], "corrupt value"),
        (["decode", "--input", "/nonexistent/file.jsonl"], "no such file"),
        (["decode", "--key", "0002000867726f75702d6964", "--num-partitions", "0"], "--num-partitions"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def _records() -> list[tuple[bytes, bytes | None]]:
    ok = encode_value(OffsetCommitValue(42, "", 1000, leader_epoch=3, version=3))
    group = encode_value(GroupMetadataValue("consumer", 1, None, None, version=3, current_state_timestamp=7))
    return [
        (encode_key(OffsetCommitKey("g", "t", 0)), ok),
        (encode_key(GroupMetadataKey("g")), group),
        (encode_key(OffsetCommitKey("g", "t", 1)), None),
        (encode_key(OffsetCommitKey("g", "t", 2)), b"\x00\x03\x00"),  # corrupt
    ]


def test_input_jsonl_decodes_to_json_lines_and_reports_corrupt_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(
            json.dumps({"key": k.hex(), "value": None if v is None else v.hex(), "partition": 7, "offset": i}) + "\n"
            for i, (k, v) in enumerate(_records())
        )
    )
    rc, out, err = _run(capsys, "decode", "--input", str(path))
    lines = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and len(lines) == 4
    assert lines[0]["value"]["data"] == {"offset": 42, "leaderEpoch": 3, "metadata": "", "commitTimestamp": 1000}
    assert lines[1]["value"]["data"]["protocol"] is None
    assert lines[2]["value"] is None
    assert lines[3]["error"]["part"] == "value" and lines[3]["position"] == {
        "partition": 7,
        "offset": 3,
        "timestamp": 0,
    }
    assert "4 records (1 corrupt)" in err
    rc, _, err = _run(capsys, "decode", "--input", str(path), "--strict")
    assert rc == 2 and "offset 3" in err


def test_input_parquet_with_binary_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = _records()[:3]
    table = pa.table(
        {"key": pa.array([k for k, _ in recs], pa.binary()), "value": pa.array([v for _, v in recs], pa.binary())}
    )
    pq.write_table(table, tmp_path / "part-00000000.parquet")
    rc, out, _ = _run(capsys, "decode", "--input", str(tmp_path / "part-00000000.parquet"), "--format", "rich")
    lines = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and [line["recordType"] for line in lines] == ["OffsetCommit", "GroupMetadata", "OffsetCommit"]
    assert lines[2]["value"] is None and lines[0]["position"]["offset"] == 0


def test_cli_runs_as_a_subprocess() -> None:
    vec = FORMATTER["kafka-formatter-offset-value-v4"]
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines", "decode", "--key", vec["key_hex"], "--value", vec["value_hex"]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == vec["expected"]


KIP848 = Path(__file__).resolve().parents[1] / "coordinator_core" / "vectors" / "kip848"


@pytest.mark.parametrize(
    "name",
    [
        "05-ConsumerGroupMemberMetadata",
        "08-ConsumerGroupCurrentMemberAssignment",
        "16-ConsumerGroupRegularExpression",
        "14-ShareGroupCurrentMemberAssignment",
        "23-StreamsGroupTopology",
    ],
)
def test_modern_group_records_print_with_named_fields(capsys: pytest.CaptureFixture[str], name: str) -> None:
    case = next(c for c in json.loads((KIP848 / f"{name}.json").read_text())["cases"] if c["name"] == "full")
    rc, out, _ = _run(capsys, "decode", "--key", case["key_hex"], "--value", case["value_hex"])
    assert rc == 0
    assert out == json.dumps(case["kafka_json"], separators=(",", ":"), ensure_ascii=False) + "\n"


def test_input_file_of_modern_records_decodes_each_and_reports_the_corrupt_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = json.loads((KIP848 / "08-ConsumerGroupCurrentMemberAssignment.json").read_text())["cases"]
    rows = [(c["key_hex"], c["value_hex"]) for c in cases] + [(cases[0]["key_hex"], "0000000000")]  # last: truncated
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(json.dumps({"key": k, "value": v, "partition": 3, "offset": i}) + "\n" for i, (k, v) in enumerate(rows))
    )
    rc, out, err = _run(capsys, "decode", "--input", str(path), "--format", "rich")
    lines = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and len(lines) == len(rows)
    assert [line.get("groupType") for line in lines[:-1]] == ["consumer"] * len(cases)
    assert lines[1]["value"]["data"]["assignedPartitions"][0]["partitions"]
    assert lines[3]["value"] is None  # tombstone
    assert lines[-1]["error"]["recordType"] == 8 and lines[-1]["error"]["part"] == "value"
    assert f"{len(rows)} records (1 corrupt)" in err


def test_a_key_of_a_modern_type_that_is_not_that_types_key_is_shown_as_unknown_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    vec = FORMATTER["kafka-formatter-group-unknown-version-10"]  # a group key written as version 10
    rc, out, _ = _run(capsys, "decode", "--format", "rich", "--key", vec["key_hex"], "--value", vec["value_hex"])
    obj = json.loads(out)
    assert rc == 0 and obj["key"] == {"version": 10, "data": "unknown"} and obj["groupType"] == "share"
    assert "corrupt key (record type 10" in obj["modernKeyError"] and "member_id" in obj["modernKeyError"]


KCAT_DUMP = Path(__file__).parent / "vectors" / "kcat" / "consumer_offsets_J.jsonl"


def test_decode_of_a_kcat_json_dump_prints_the_records_not_tombstones(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "decode", "--input", str(KCAT_DUMP))
    objs = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and len(objs) == 4
    assert objs[0]["key"]["data"] == {"group": 'g-"q\\b\n', "topic": "orders", "partition": 0}
    assert objs[0]["value"]["data"]["offset"] == 42
    assert objs[1]["value"]["data"]["metadata"] == "é€"
    assert objs[2]["value"] is None  # the one real tombstone
    assert "error" in objs[3] and objs[3]["valueHex"] == "0003" + bytes(range(256)).hex()
    assert "decoded 4 records (1 corrupt)" in err


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00\t\x00\x03\xff\xfe\x80*\n",  # console-consumer output
        b"offsetlake notes\nnot a capture at all\n",
    ],
    ids=["console-consumer", "text"],
)
def test_decode_of_a_text_or_console_consumer_file_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    path = tmp_path / "dump.txt"
    path.write_bytes(content)
    rc, out, err = _run(capsys, "decode", "--input", str(path))
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "dump.txt:1: not valid JSON" in err and "Traceback" not in err
