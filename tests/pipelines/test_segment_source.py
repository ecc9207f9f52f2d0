"""The segment source's driver side, micro-batch by micro-batch (no Spark: the reader is driven by
hand as Spark's micro-batch engine drives it): open transactions carried across micro-batches,
kept per end position, and rebuilt from the log when their file is gone."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from coordinator_core import segments as S
from pipelines.stream.packing import bucket_options
from pipelines.stream.segment_source import SegmentStreamReader
from tests.pipelines.test_batch_segments import _commit, _marker, _txn


def _log_dir(root: Path) -> None:
    d = root / "__consumer_offsets-7"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(
        _txn([_commit(0, "g1", 0, 10), _commit(1, "g2", 0, 20)], 9001)
        + S.encode_batch_v2([_commit(2, "g3", 0, 30)])
        + S.encode_batch_v2([_commit(3, "g3", 1, 31)])
        + _marker(S.CONTROL_COMMIT, 4, 9001)
        + _txn([_commit(5, "g1", 1, 40)], 9002)
    )


def _batches(reader: SegmentStreamReader, limit: int) -> list[tuple[dict[str, Any], dict[str, Any], list[Any]]]:
    from pyspark.sql.streaming.datasource import ReadMaxBytes

    out = []
    start = reader.initialOffset()
    while True:
        end = reader.latestOffset(start, ReadMaxBytes(limit))
        if end == start:
            return out
        out.append((start, end, reader.partitions(start, end)))
        start = end


def test_a_marker_in_a_later_micro_batch_reaches_the_groups_an_earlier_one_read(tmp_path: Path) -> None:
    from pipelines.records.replay_input import REC_TXN_MARKER, unpack_packs

    _log_dir(tmp_path / "log")
    opts = {"path": str(tmp_path / "log"), "stateDir": str(tmp_path / "state"), **bucket_options()}
    batches = _batches(SegmentStreamReader(opts), limit=150)
    assert len(batches) >= 3
    # the micro-batch holding the COMMIT marker (offset 4) hands it to g1 and g2, read by the first one
    with_marker = [b for b in batches if b[0]["parts"] and b[0]["parts"]["7"][0] <= 4 < b[1]["parts"]["7"][0]]
    assert len(with_marker) == 1 and with_marker[0][0]["parts"]["7"][0] > 1  # not the first micro-batch
    (part,) = with_marker[0][2]
    assert part.prior == {(7, 9001): {"g1", "g2"}}
    reader = SegmentStreamReader(opts)
    packs = [b for b in reader.read(part)]
    markers: dict[str, int] = {}
    for pack in packs:
        for blob in pack.column("records").to_pylist():
            rows = unpack_packs([blob]).to_pylist()
            for r in rows:
                if r["rec_kind"] == REC_TXN_MARKER:
                    markers[r["group_id"]] = markers.get(r["group_id"], 0) + 1
    assert markers.get("g1") == 1 and markers.get("g2") == 1 and not markers.get("g3")

    # the state at that micro-batch's start, removed: planned again, it is rebuilt from the log
    shutil.rmtree(tmp_path / "state")
    start, end, _ = with_marker[0]
    again = SegmentStreamReader(opts).partitions(start, end)
    assert [p.prior for p in again] == [part.prior]


def test_open_transactions_at_the_end_are_kept_and_a_closed_commit_is_reported(tmp_path: Path) -> None:
    from pipelines.stream.segment_txn import StateFiles

    _log_dir(tmp_path / "log")
    opts = {"path": str(tmp_path / "log"), "stateDir": str(tmp_path / "state"), **bucket_options()}
    reader = SegmentStreamReader(opts)
    batches = _batches(reader, limit=10_000)  # one micro-batch: the whole log
    assert len(batches) == 1
    _start, end, (_part,) = batches[0]
    state = StateFiles(str(tmp_path / "state")).load(end)
    assert state is not None and list(state.rows) == [(7, 9002)]  # 9001 committed, 9002 still open
    assert state.rows[(7, 9002)].column("txn_outcome").to_pylist() == ["open"]
