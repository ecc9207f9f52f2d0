"""Broker log segments as the batch job's input: transactions replayed as Kafka does (KIP-98).

A log dir written with the project's encoder: plain commits, a committed transaction over two
groups, an aborted one, a transaction still open at the end of the log, a transactional commit in
another partition whose marker never comes, and a corrupt batch. ``offsetlake run batch`` on it:
``offsets_current`` equals the core's replay of the same segments and Kafka's semantics, the
corrupt batch is in ``ingest_quarantine`` with its file and position, and counts reconcile.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from coordinator_core import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value  # noqa: E402
from coordinator_core import segments as S  # noqa: E402
from pipelines.cli import main  # noqa: E402
from pipelines.inputs.segment_files import SegmentProblem, compress, read_segment_items  # noqa: E402
from pipelines.inputs.segment_input import replay_items  # noqa: E402

T0 = 1_700_000_000_000


def _commit(offset: int, group: str, part: int, committed: int) -> S.Record:
    key = encode_key(OffsetCommitKey(group, "orders", part))
    return S.Record(offset, T0 + offset, key, encode_value(OffsetCommitValue(committed, "", T0 + offset, version=3)))


def _txn(records: list[S.Record], pid: int, **kw: Any) -> bytes:
    return S.encode_batch_v2(records, transactional=True, producer_id=pid, producer_epoch=0, **kw)


def _marker(kind: int, offset: int, pid: int) -> bytes:
    return S.encode_control_batch(kind, offset=offset, timestamp_ms=T0 + offset, producer_id=pid, producer_epoch=0)


def _write_log_dir(root: Path) -> tuple[Path, int]:
    """Returns the file with the corrupt batch and that batch's byte position."""
    p7 = root / "__consumer_offsets-7"
    p7.mkdir(parents=True)
    corrupt = bytearray(S.encode_batch_v2([_commit(9, "plain", 0, 999)]))
    corrupt[-3] ^= 0x40  # CRC mismatch: the batch is quarantined, its commit never applies
    parts = [
        S.encode_batch_v2([_commit(0, "plain", 0, 100), _commit(1, "plain", 1, 200)], codec=S.CODEC_GZIP),
        _txn([_commit(2, "committed-a", 0, 50), _commit(3, "committed-b", 0, 60)], 9001),
        S.encode_batch_v2([_commit(4, "aborted", 1, 5)]),
        _marker(S.CONTROL_COMMIT, 5, 9001),
        _txn([_commit(6, "aborted", 0, 70)], 9002, codec=S.CODEC_ZSTD, compress=compress),
        _marker(S.CONTROL_ABORT, 7, 9002),
        S.encode_batch_v2([_commit(8, "open", 2, 1)], codec=S.CODEC_LZ4, compress=compress),
    ]
    head = b"".join(parts)
    tail = _txn([_commit(10, "open", 0, 80)], 9003)  # no marker: open at the end of the log
    (p7 / "00000000000000000000.log").write_bytes(head + bytes(corrupt) + tail)
    p12 = root / "__consumer_offsets-12"
    p12.mkdir()
    (p12 / "00000000000000000000.log").write_bytes(
        S.encode_batch_v2([_commit(0, "elsewhere", 0, 7)]) + _txn([_commit(1, "elsewhere", 1, 8)], 9001)
    )
    return p7 / "00000000000000000000.log", len(head)


def _offsets_current(warehouse: Path) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(warehouse / "offsets_current")).to_pyarrow_table().to_pylist()
    return sorted(
        (r["group_id"], r["topic"], r["partition"], r["offset"], r["log_offset"], r["transactional_producer_id"])
        for r in rows
    )


def _offset_commits_txn(warehouse: Path) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(warehouse / "offset_commits")).to_pyarrow_table().to_pylist()
    return sorted(
        (r["coordinator_partition"], r["log_offset"], r["producer_id"], r["txn_outcome"], r["txn_marker_offset"])
        for r in rows
    )


def _core_txn(landing: Path) -> list[tuple[Any, ...]]:
    """The core's rule over the same segments: every data record, its transaction's fate."""
    from coordinator_core import LogRecord, TxnMarker, transaction_fates

    items = list(replay_items(landing))
    fates = transaction_fates(
        [(i.partition, i.offset, i.producer_id) for i in items if isinstance(i, LogRecord) and i.producer_id],
        [i for i in items if isinstance(i, TxnMarker)],
    )
    outcome = {True: "committed", False: "aborted", None: "open"}
    out = []
    for i in items:
        if isinstance(i, LogRecord):
            f = fates.get(i.position)
            out.append(
                (i.partition, i.offset, i.producer_id, None, None)
                if f is None
                else (i.partition, i.offset, i.producer_id, outcome[f.committed], f.marker_offset)
            )
    return sorted(out)


def test_batch_job_on_broker_segments_applies_commit_and_abort_markers_and_quarantines_a_bad_batch(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from coordinator_core import replay_groups
    from pipelines.config import load_config

    landing = tmp_path / "landing"
    bad_file, bad_pos = _write_log_dir(landing)
    conf = tmp_path / "c.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\ninput:\n  path: {landing}\n")
    assert main(["run", "batch", "--conf", str(conf), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    warehouse = tmp_path / "data" / "warehouse"

    # Kafka's semantics: COMMIT applies (to both groups of the transaction), ABORT drops, an open
    # transaction is invisible, another partition's marker does not close it, the bad batch never applies
    got = _offsets_current(warehouse)
    assert got == [
        ("aborted", "orders", 1, 5, 4, None),
        ("committed-a", "orders", 0, 50, 2, 9001),
        ("committed-b", "orders", 0, 60, 3, 9001),
        ("elsewhere", "orders", 0, 7, 0, None),
        ("open", "orders", 2, 1, 8, None),
        ("plain", "orders", 0, 100, 0, None),
        ("plain", "orders", 1, 200, 1, None),
    ]
    # ... and equals the pure core's replay of the same segments
    cfg = load_config(conf)
    items = list(replay_items(landing))
    newest = max(i.timestamp_ms for i in items)
    core = replay_groups(items, settings=cfg.replay.settings(), as_of_ms=newest, log_end_ms=newest)
    expected = sorted(
        (g, r["topic"], r["partition"], r["offset"], r["log_offset"], r["transactional_producer_id"])
        for g, res in core.items()
        for r in res.snapshot.offset_rows()
    )
    assert got == expected
    assert core["open"].snapshot.pending_transactional_offsets == 1
    assert core["elsewhere"].snapshot.pending_transactional_offsets == 1

    # counts in == counts out: data records = raw (decoded + quarantined + unsupported), control
    # records in raw_transactions, the bad batch in ingest_quarantine with its file and position
    seg_items = list(read_segment_items(landing))
    problems = [i for i in seg_items if isinstance(i, SegmentProblem)]
    controls = [i for i in seg_items if not isinstance(i, SegmentProblem) and i.control_type is not None]
    data = len(seg_items) - len(problems) - len(controls)
    assert summary["records_read"] == summary["raw_total"] == data == 10
    assert summary["raw_total"] == summary["decoded"] + summary["quarantined"] + summary["unsupported"]
    assert summary["control_records"] == len(controls) == 2
    assert summary["bad_batches"] == len(problems) == 1
    from deltalake import DeltaTable

    quarantine = DeltaTable(str(warehouse / "ingest_quarantine")).to_pyarrow_table().to_pylist()
    assert [(q["reason"], q["source_file"]) for q in quarantine] == [("bad_batch", str(bad_file))]
    assert f"byte {bad_pos} " in quarantine[0]["detail"] and quarantine[0]["value"] == problems[0].data
    txn = DeltaTable(str(warehouse / "raw_transactions")).to_pyarrow_table()
    assert txn.num_rows == 2 + 1 + 1 + 1 + 2  # transactional records + markers

    # a rerun adds nothing anywhere
    assert main(["run", "batch", "--conf", str(conf), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["records_new"] == 0 and again["transactional_new"] == 0
    assert DeltaTable(str(warehouse / "ingest_quarantine")).to_pyarrow_table().num_rows == 1
    assert _offsets_current(warehouse) == got


def test_offset_commits_say_which_commits_were_transactional_and_what_became_of_them(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from deltalake import DeltaTable

    landing = tmp_path / "landing"
    _write_log_dir(landing)
    conf = tmp_path / "c.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\ninput:\n  path: {landing}\n")
    assert main(["run", "batch", "--conf", str(conf), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    warehouse = tmp_path / "data" / "warehouse"

    # (coordinator_partition, log_offset, producer_id, txn_outcome, txn_marker_offset)
    got = _offset_commits_txn(warehouse)
    assert got == [
        (7, 0, None, None, None),
        (7, 1, None, None, None),
        (7, 2, 9001, "committed", 5),  # one transaction over two groups: both committed by the marker
        (7, 3, 9001, "committed", 5),
        (7, 4, None, None, None),
        (7, 6, 9002, "aborted", 7),
        (7, 8, None, None, None),
        (7, 10, 9003, "open", None),  # no marker yet: pending at the end of the log
        (12, 0, None, None, None),
        (12, 1, 9001, "open", None),  # partition 7's COMMIT of producer 9001 does not close it
    ]
    assert got == _core_txn(landing)
    # the transactional commits are offset_commits rows (not extra ones): the counts rule holds
    txn = DeltaTable(str(warehouse / "raw_transactions")).to_pyarrow_table().to_pylist()
    assert sum(1 for r in got if r[2] is not None) == sum(1 for r in txn if r["control_type"] is None) == 5
    assert summary["offset_commits"] == len(got) == summary["raw_total"] - summary["quarantined"]

    # a later segment brings only the COMMIT of producer 9003 (no new data record, so raw_records'
    # version stays): the open transaction becomes committed, in offset_commits and offsets_current
    (landing / "__consumer_offsets-7" / "00000000000000000011.log").write_bytes(_marker(S.CONTROL_COMMIT, 11, 9003))
    assert main(["run", "batch", "--conf", str(conf), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["records_new"] == 0 and after["transactional_new"] == 1
    assert after["raw_version"] == summary["raw_version"]
    now = _offset_commits_txn(warehouse)
    assert (7, 10, 9003, "committed", 11) in now and now == _core_txn(landing)
    assert [r for r in now if r[1] != 10 or r[0] != 7] == [r for r in got if r[1] != 10 or r[0] != 7]
    assert ("open", "orders", 0, 80, 10, 9003) in _offsets_current(warehouse)
