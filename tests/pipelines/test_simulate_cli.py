"""``offsetlake simulate`` / ``offsetlake generate``: files a pipeline can read, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator_core import decode_record
from pipelines.cli import main
from pipelines.inputs.raw_files import read_raw_records


def test_simulate_writes_readable_records_and_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "book_three_consumers_at_once", "--out", str(tmp_path), "--check"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "book-group: Stable -> PreparingRebalance -> CompletingRebalance -> PreparingRebalance" in out
    records = list(read_raw_records(tmp_path))  # the trace file is ignored (leading underscore)
    assert [r.topic for r in records] == ["__consumer_offsets"] * len(records)
    assert decode_record(records[0].key, records[0].value).key.group == "book-group"
    trace = [json.loads(line) for line in (tmp_path / "_trace.jsonl").read_text().splitlines()]
    assert {t["kind"] for t in trace} >= {"transition", "request", "response", "record", "client"}


def test_simulate_check_fails_when_expectations_are_not_met(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "topics: {t: 1}\nclients: {c: {group_id: g, topics: [t]}}\n"
        "timeline: [{at_ms: 0, client: c, action: start}]\nexpect: {group: g, generation: 5}\n"
    )
    assert main(["simulate", str(scenario), "--check"]) == 1


def test_a_bad_scenario_key_exits_2_naming_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("topics: {t: 1}\nclients: {c: {group_id: g, sesion_timeout_ms: 5}}\n")
    assert main(["simulate", str(scenario)]) == 2
    assert "clients.c.sesion_timeout_ms" in capsys.readouterr().err


def test_generate_writes_parquet_and_truth(tmp_path: Path) -> None:
    rc = main(["generate", "--groups", "4", "--hours", "0.25", "--seed", "2", "--out", str(tmp_path), "--quiet"])
    assert rc == 0
    truth = json.loads((tmp_path / "_truth.json").read_text())
    records = list(read_raw_records(tmp_path))
    assert len(records) == truth["records"] > 0
    assert len(truth["groups"]) == 4
    groups = {decode_record(r.key, r.value).key.group for r in records}
    assert groups <= set(truth["groups"])


def test_generate_writes_a_compacted_kafka_4_capture_with_the_worlds_shapes(tmp_path: Path) -> None:
    rc = main(
        [
            "generate",
            "--groups",
            "6",
            "--hours",
            "0.5",
            "--seed",
            "3",
            "--out",
            str(tmp_path),
            "--quiet",
            "--coordinator",
            "new",
            "--compaction",
            "cleaned",
            "--dirty-ratio",
            "0.3",
            "--delete-retention-ms",
            "600000",
            "--retention-check-phase-ms",
            "1234",
            "--idle-partitions",
            "1",
            "--commit-changed-only",
            "1",
            "--offsetless-groups",
            "0",
            "--mass-restarts",
            "0.5",
        ]
    )
    assert rc == 0
    truth = json.loads((tmp_path / "_truth.json").read_text())
    records = list(read_raw_records(tmp_path))
    assert len(records) == truth["records"] == truth["compaction"]["records_kept"] < truth["records_written"]
    assert truth["config"]["coordinator"] == "new" and truth["compaction"]["dirty_ratio"] == 0.3
    assert all(
        s[0]["first_run_ms"] == truth["start_ms"] + 1234 for s in truth["retention_checks"]["partitions"].values()
    )
    assert truth["idle_partitions"]


def test_generate_rejects_a_share_outside_0_to_1_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["generate", "--groups", "2", "--hours", "0.1", "--out", "/tmp/never", "--quiet", "--mass-restarts", "1.5"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "mass_restarts must be within 0..1" in err and "\n" not in err


def test_generate_rejects_nonsense_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--groups", "0", "--hours", "1", "--out", "/tmp/never"]) == 2


def test_simulate_list_names_every_shipped_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from pipelines.inputs.scenario_files import shipped_scenarios

    assert main(["simulate", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(p.stem in out for p in shipped_scenarios())


def test_generate_mixed_writes_a_kafka_4_cluster_with_consumer_groups_and_their_truth(tmp_path: Path) -> None:
    rc = main(
        ["generate", "--groups", "12", "--hours", "0.5", "--seed", "4", "--mixed", "--out", str(tmp_path), "--quiet"]
    )
    assert rc == 0
    truth = json.loads((tmp_path / "_truth.json").read_text())
    assert (truth["config"]["consumer_groups"], truth["config"]["conversions"]) == (0.4, 0.3)
    consumer = [g for g in truth["groups"].values() if g["group_type"] == "consumer"]
    assert consumer and all("group_epoch" in g["consumer"] and "members" in g["consumer"] for g in consumer)
    types = {int.from_bytes(r.key[:2], "big") for r in read_raw_records(tmp_path)}
    assert {3, 5, 6, 7, 8} <= types  # ConsumerGroupMetadata, member, target, current assignment records


def test_generate_refuses_consumer_groups_on_kafka_3s_coordinator_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["generate", "--groups", "2", "--hours", "0.1", "--out", "/tmp/never", "--quiet"]
    assert main([*args, "--consumer-groups", "0.5", "--coordinator", "old"]) == 2
    err = capsys.readouterr().err
    assert "coordinator 'new'" in err and len(err.strip().splitlines()) == 1
