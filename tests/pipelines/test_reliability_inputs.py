"""Careless input and settings (issue 37, item 10), each one line and exit 2 (or an answer):
kcat/JSON lines whose partition, offset or time do not fit the raw-record schema name their file
and line; a JSON line naming a field twice is refused; a SASL password without a user name is
refused before a client is built; ``--stage replay`` on a stream warehouse gives advice that does
not lead to a refusal; a disk-full failure names where the command writes; ``--set`` reaches
option names with dots."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from pipelines.errors import UsageError
from pipelines.inputs.sample import sample_records

SPARK = pytest.mark.spark


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from pipelines.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("offsetlake ") and ": error: " in ln]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


def _kcat_line(**over: Any) -> dict[str, Any]:
    r = sample_records(1, seed=3)[0]
    line = {
        "topic": "__consumer_offsets",
        "partition": r.partition,
        "offset": r.offset,
        "tstype": "create",
        "ts": r.timestamp_ms,
        "broker": 0,
        "headers": [],
        "key": r.key.decode("latin-1"),
        "payload": None if r.value is None else r.value.decode("latin-1"),
    }
    line.update(over)
    return line


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return path


BAD_NUMBERS = [
    ("partition", 2**31),
    ("partition", -(2**31) - 1),
    ("offset", 2**63),
    ("offset", -(2**63) - 1),
    ("ts", 2**62),
]


@pytest.mark.parametrize(("field", "value"), BAD_NUMBERS)
def test_kcat_numbers_outside_the_schema_name_file_line_and_field(tmp_path: Path, field: str, value: int) -> None:
    from pipelines.inputs.raw_files import iter_raw_batches

    good = json.dumps(_kcat_line())
    path = _write_lines(tmp_path / "dump.jsonl", [good, json.dumps(_kcat_line(**{field: value}))])
    with pytest.raises(UsageError) as info:
        list(iter_raw_batches(str(path)))
    msg = str(info.value)
    name = "timestamp" if field == "ts" else field
    assert msg.startswith(f"{path}:2: '{name}' {value} is out of range"), msg


@pytest.mark.parametrize(("field", "value"), [("partition", 2**31), ("offset", 2**64), ("timestamp", 2**62)])
def test_our_json_lines_numbers_outside_the_schema_name_file_and_line(tmp_path: Path, field: str, value: int) -> None:
    from pipelines.inputs.raw_files import iter_raw_batches

    line = {"key": "00", "value": None, "encoding": "hex", "partition": 0, "offset": 1, "timestamp": 0}
    line[field] = value
    path = _write_lines(tmp_path / "dump.jsonl", [json.dumps(line)])
    with pytest.raises(UsageError) as info:
        list(iter_raw_batches(str(path)))
    assert str(info.value).startswith(f"{path}:1: '{field}' {value} is out of range"), info.value


@pytest.mark.parametrize("field", ["offset", "payload", "partition", "key"])
def test_a_json_line_naming_a_field_twice_is_refused_naming_line_and_field(tmp_path: Path, field: str) -> None:
    from pipelines.inputs.raw_files import iter_raw_batches

    line = json.dumps(_kcat_line())
    twice = line[:-1] + f', "{field}": {json.dumps(_kcat_line()[field])}' + "}"
    path = _write_lines(tmp_path / "dump.jsonl", [line, twice])
    with pytest.raises(UsageError) as info:
        list(iter_raw_batches(str(path)))
    assert str(info.value).startswith(f"{path}:2: the field '{field}' appears twice"), info.value


@SPARK
def test_run_batch_over_an_out_of_range_kcat_line_exits_2_naming_file_and_line(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "data" / "landing"
    path = _write_lines(landing / "dump.jsonl", [json.dumps(_kcat_line(offset=2**63))])
    conf = tmp_path / "t.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\n")
    rc, _, err = _cli(["run", "batch", "--conf", str(conf)], capsys)
    assert rc == 2 and f"{path}:1: 'offset'" in _one_line(err)


def test_a_sasl_password_without_a_user_name_is_refused_before_a_client_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETLAKE_KAFKA_SASL_PASSWORD", "pw-not-echoed")
    monkeypatch.delenv("OFFSETLAKE_KAFKA_SASL_USERNAME", raising=False)
    argv = [
        "capture",
        "--bootstrap-servers",
        "127.0.0.1:9",
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "--out",
        str(tmp_path / "cap"),
    ]
    rc, out, err = _cli(argv, capsys)
    assert rc == 2, err
    line = _one_line(err)
    assert "user name" in line and "OFFSETLAKE_KAFKA_SASL_USERNAME" in line
    assert "pw-not-echoed" not in out + err


def test_stage_replay_on_a_stream_warehouse_advises_a_warehouse_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.warehouse.lock import claim_job

    wh = tmp_path / "data" / "warehouse"
    wh.mkdir(parents=True)
    claim_job(str(wh), "stream")  # what the streaming job records when it first writes here
    conf = tmp_path / "t.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\n")
    for stage in ("replay", "decode"):
        rc, _, err = _cli(["run", "batch", "--conf", str(conf), "--stage", stage], capsys)
        line = _one_line(err)
        assert rc == 2 and "written by the stream job" in line and "paths.warehouse" in line, line
        assert "--stage ingest" not in line  # that advice led to a refusal
    # following the advice: a warehouse of its own gets the batch's own next step
    rc, _, err = _cli(
        ["run", "batch", "--conf", str(conf), "--set", f"paths.warehouse={tmp_path / 'own'}", "--stage", "replay"],
        capsys,
    )
    assert rc == 2 and "--stage ingest" in _one_line(err)


def test_a_disk_full_failure_names_where_the_command_writes() -> None:
    from pipelines.errors import describe_failure

    with open("/dev/full", "wb", buffering=0) as fh, pytest.raises(OSError) as info:
        fh.write(b"x" * 10_000)  # a real ENOSPC, without a file name (as a library's buffer write gets it)
    assert info.value.errno == errno.ENOSPC and not info.value.filename
    line = describe_failure(info.value, "/srv/wh")
    assert line is not None and line.startswith("disk full (ENOSPC)") and "/srv/wh" in line and "MiB free" in line
    rust = Exception("Generic LocalFileSystem error: No space left on device (os error 28)")
    assert "/srv/wh" in (describe_failure(rust, "/srv/wh") or "")
    named = OSError(errno.ENOSPC, "No space left on device", "/wh/t/part-1.parquet")
    assert describe_failure(named, "/srv/wh") == "disk full (ENOSPC): no space left on the device /wh/t/part-1.parquet"


@pytest.mark.parametrize(
    "item", ['spark.conf."spark.sql.shuffle.partitions"=7', "spark.conf[spark.sql.shuffle.partitions]=7"]
)
def test_set_reaches_spark_conf_keys_with_dots(item: str) -> None:
    from pipelines.config import load_config, parse_set_option

    cfg = load_config(overrides=dict([parse_set_option(item)]))
    assert cfg.spark.conf["spark.sql.shuffle.partitions"] == 7


def test_set_with_an_unquoted_dotted_option_name_says_how_to_quote_it(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _cli(["config", "--set", "spark.conf.spark.sql.shuffle.partitions=7"], capsys)
    assert rc == 2 and 'spark.conf."' in _one_line(err)
