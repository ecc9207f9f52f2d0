"""``offsetlake replay``: JSON lines per group (or events) from a captured file, pure Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator_core import GroupMemberKey, LogRecord, Record, UnknownValue, encode_record
from pipelines.cli import main
from pipelines.inputs.raw_files import RawRecord, write_raw_records
from tests.coordinator_core.replay_builders import GroupLog, member

WEEK = 7 * 86_400_000


def _log() -> list[LogRecord]:
    a = GroupLog("orders-app", partition=3)
    a.stable(1, [member("c-1", topics=["orders"], assigned={"orders": [0, 1]}, instance="pod-0")])
    a.commit("orders", 0, 100, at=a.now + 1000)
    a.commit("orders", 1, 200)
    a.stable(
        2,
        [
            member("c-1", topics=["orders"], assigned={"orders": [0]}, instance="pod-0"),
            member("c-2", topics=["orders"], assigned={"orders": [1]}),
        ],
        at=a.now + 5000,
    )
    a.commit("orders", 0, 150, at=a.now + 1000)
    b = GroupLog("standalone", partition=9)
    b.commit("t", 0, 7)
    # a KIP-848 member record whose value version Kafka 4 cannot read: unsupported, counted
    b._append(GroupMemberKey("standalone", "m1", 5), UnknownValue(1, b"\x00\x01\x00"), None)
    return a.records + b.records


def _write_jsonl(records: list[LogRecord], path: Path, corrupt: bool = False) -> Path:
    with path.open("w") as fh:
        for r in records:
            k, v = encode_record(Record(r.key, r.value))
            fh.write(
                json.dumps(
                    {
                        "key": k.hex(),
                        "value": None if v is None else v.hex(),
                        "partition": r.partition,
                        "offset": r.offset,
                        "timestamp": r.timestamp_ms,
                    }
                )
                + "\n"
            )
        if corrupt:
            fh.write(json.dumps({"key": "0001ff", "value": None, "partition": 0, "offset": 999}) + "\n")
    return path


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict], str]:  # type: ignore[type-arg]
    rc = main(["replay", *args])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines()], err


def test_replay_prints_one_json_line_per_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_jsonl(_log(), tmp_path / "dump.jsonl", corrupt=True)
    rc, rows, err = _run(["--input", str(path)], capsys)
    assert rc == 0
    assert [r["group"] for r in rows] == ["orders-app", "standalone"]
    app, simple = rows
    assert (app["state"], app["generation"], app["protocol_type"], app["protocol"], app["leader"]) == (
        "Stable",
        2,
        "consumer",
        "range",
        "c-1",
    )
    assert isinstance(app["current_state_timestamp"], int)
    m = app["members"][1]
    assert (m["member_id"], m["group_instance_id"], m["client_id"], m["session_timeout"], m["rebalance_timeout"]) == (
        "c-2",
        None,
        "consumer",
        10_000,
        30_000,
    )
    assert m["subscribed_topics"] == ["orders"] and m["assigned_partitions"] == [{"topic": "orders", "partition": 1}]
    assert app["members"][0]["client_host"] == "/10.0.0.1"
    offs = {(o["topic"], o["partition"]): o for o in app["offsets"]}
    assert offs[("orders", 0)]["offset"] == 150 and offs[("orders", 1)]["offset"] == 200
    assert set(offs[("orders", 0)]) >= {"leader_epoch", "metadata", "commit_timestamp", "expire_timestamp"}
    assert (simple["state"], simple["protocol_type"], simple["generation"], simple["unsupported_records"]) == (
        "Empty",
        None,
        0,
        1,
    )
    assert "1 corrupt skipped" in err


def test_replay_as_of_reads_parquet_and_shows_the_past(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _log()
    raw = []
    for r in records:
        k, v = encode_record(Record(r.key, r.value))
        raw.append(RawRecord(k, v, "__consumer_offsets", r.partition, r.offset, r.timestamp_ms))
    write_raw_records(raw, tmp_path / "landing")
    before_gen2 = records[3].timestamp_ms - 1
    rc, rows, _ = _run(["--input", str(tmp_path / "landing"), "--as-of-ms", str(before_gen2)], capsys)
    assert rc == 0
    app = next(r for r in rows if r["group"] == "orders-app")
    assert (app["generation"], app["member_count"]) == (1, 1)


def test_replay_with_retention_expires_as_of_a_later_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _log()
    path = _write_jsonl(records, tmp_path / "dump.jsonl")
    later = records[-1].timestamp_ms + 2 * WEEK
    rc, rows, _ = _run(
        ["--input", str(path), "--retention-ms", str(WEEK), "--as-of-ms", str(later), "--group", "standalone"], capsys
    )
    assert rc == 0
    (simple,) = rows
    assert (simple["state"], simple["offsets"]) == ("Dead", [])


def test_replay_events_prints_the_event_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_jsonl(_log(), tmp_path / "dump.jsonl")
    rc, rows, _ = _run(["--input", str(path), "--events", "--kinds", "rebalance,offset_commit"], capsys)
    assert rc == 0
    assert {r["kind"] for r in rows} == {"rebalance", "offset_commit"}
    rb = [r for r in rows if r["kind"] == "rebalance"]
    assert [r["generation"] for r in rb] == [1, 2]
    assert rb[1]["joined"] == ["c-2"] and rb[1]["partitions_moved"] == 1 and rb[1]["table"] == "rebalances"


def test_replay_bad_options_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_jsonl(_log(), tmp_path / "dump.jsonl")
    assert main(["replay", "--input", str(path), "--events", "--kinds", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown event kind" in err and len(err.strip().splitlines()) == 1
    assert main(["replay", "--input", str(tmp_path / "missing.jsonl")]) == 2


def test_replay_folds_a_kafka4_consumer_group_as_a_consumer_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A KIP-848 group's records (an online upgrade from classic, members joining and leaving)
    replay as the live consumer group they describe, not as a simple group."""
    from tests.coordinator_core.consumer_group_log import kafka4_consumer_group_life

    path = _write_jsonl(kafka4_consumer_group_life("cg").records, tmp_path / "k4.jsonl")
    rc, rows, _ = _run(["--input", str(path)], capsys)
    assert rc == 0 and len(rows) == 1
    cg = rows[0]
    assert (cg["group_type"], cg["state"], cg["generation"], cg["protocol_type"], cg["protocol"]) == (
        "consumer",
        "Stable",
        5,
        "consumer",
        "uniform",
    )
    assert [m["member_id"] for m in cg["members"]] == ["m2"] and cg["unsupported_records"] == 0
