"""The batch replay's transactions (``pipelines.records.transactions`` + the bulk replay) equal the
core's replay of the same records and markers — no Spark needed."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from coordinator_core import (
    LogRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    ReplayItem,
    ReplaySettings,
    TxnMarker,
    encode_key,
    encode_value,
    replay_groups,
)
from pipelines.records.replay import replay_sorted_batches
from pipelines.records.replay_input import replay_order
from pipelines.records.transactions import attach_transactions
from schemas.raw import RAW_TRANSACTIONS
from tests.pipelines.test_replay_job import replay_input_arrow

T0 = 1_700_000_000_000


def _log() -> tuple[list[ReplayItem], list[tuple[bytes, bytes | None, int, int, int]], pa.Table]:
    """Plain commit runs around three transactions in partition 3 (committed, aborted, open) and
    one in partition 4 with the same producer id and no marker."""
    items: list[ReplayItem] = []
    txn_rows: list[dict[str, Any]] = []
    offsets = {3: 0, 4: 0}

    def commit(group: str, part: int, tpart: int, value: int, pid: int | None = None) -> None:
        off = offsets[part]
        offsets[part] += 1
        v = OffsetCommitValue(value, "", T0 + off, None, None, 3)
        items.append(LogRecord(part, off, T0 + off, OffsetCommitKey(group, "t", tpart), v, pid))
        if pid is not None:
            txn_rows.append({"partition": part, "offset": off, "producer_id": pid, "control_type": None, "ts": off})

    def marker(part: int, pid: int, committed: bool) -> None:
        off = offsets[part]
        offsets[part] += 1
        items.append(TxnMarker(part, off, T0 + off, pid, committed))
        txn_rows.append(
            {"partition": part, "offset": off, "producer_id": pid, "control_type": int(committed), "ts": off}
        )

    for i in range(40):
        commit("a", 3, i % 4, i)
        commit("b", 3, i % 2, 1000 + i)
    commit("a", 3, 0, 500, pid=7)
    commit("b", 3, 1, 600, pid=7)
    for i in range(30):
        commit("a", 3, 1 + i % 3, 2000 + i)  # plain commits while the transaction is open
    marker(3, 7, True)
    commit("b", 3, 0, 700, pid=8)
    marker(3, 8, False)
    commit("c", 4, 0, 1)
    commit("c", 4, 1, 2, pid=7)  # producer 7 again, another partition: partition 3's marker is not its
    marker(3, 9, True)  # a producer with nothing pending
    commit("a", 3, 5, 9, pid=10)  # open at the end of the log
    log = [
        (encode_key(r.key), encode_value(r.value), r.partition, r.offset, r.timestamp_ms)  # type: ignore[arg-type]
        for r in items
        if isinstance(r, LogRecord)
    ]
    n = len(txn_rows)
    txn = pa.Table.from_pydict(
        {
            "topic": ["__consumer_offsets"] * n,
            "partition": [r["partition"] for r in txn_rows],
            "offset": [r["offset"] for r in txn_rows],
            "timestamp": [(T0 + r["ts"]) * 1000 for r in txn_rows],
            "producer_id": [r["producer_id"] for r in txn_rows],
            "producer_epoch": [0] * n,
            "control_type": [r["control_type"] for r in txn_rows],
            "coordinator_epoch": [None] * n,
            "source_file": [None] * n,
        },
        schema=RAW_TRANSACTIONS.arrow_schema(),
    )
    return items, log, txn


def test_bulk_replay_of_rows_with_producer_ids_and_markers_equals_the_core_replay() -> None:
    items, log, txn = _log()
    settings = ReplaySettings(retention_ms=10**10)
    as_of = max(i.timestamp_ms for i in items)
    rows = attach_transactions(replay_input_arrow(log), txn)
    rows = rows.take(pa.array(replay_order(rows), pa.int64()))
    tables = ("offsets_current", "group_state")
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    for part in replay_sorted_batches(
        rows.to_batches(max_chunksize=50), settings=settings, as_of_ms=as_of, tables=tables, as_tables=True
    ):
        for name, t in part.items():
            out[name].extend(t.to_pylist())
    core = replay_groups(items, settings=settings, as_of_ms=as_of)
    got = sorted(
        (r["group_id"], r["topic"], r["partition"], r["offset"], r["transactional_producer_id"])
        for r in out["offsets_current"]
    )
    want = sorted(
        (g, r["topic"], r["partition"], r["offset"], r["transactional_producer_id"])
        for g, res in core.items()
        for r in res.snapshot.offset_rows()
    )
    assert got == want
    offsets = {(g, p): (o, pid) for g, _, p, o, pid in got}
    assert offsets[("a", 0)] == (500, 7) and offsets[("b", 1)] == (600, 7)  # committed
    assert offsets[("b", 0)] == (1038, None)  # aborted: the plain commit stays
    assert ("c", 1) not in offsets and ("a", 5) not in offsets  # open: invisible
    assert {r["group_id"]: r["records_applied"] for r in out["group_state"]} == {
        g: res.snapshot.records_applied for g, res in core.items()
    }


def test_cli_replay_of_broker_segments_applies_commit_and_abort_markers(tmp_path: Any, capsys: Any) -> None:
    import json

    from pipelines.cli import main
    from tests.pipelines.test_batch_segments import _write_log_dir

    _write_log_dir(tmp_path / "logdir")
    assert main(["replay", "--input", str(tmp_path / "logdir")]) == 0
    groups = {r["group"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    offsets = {
        g: {(o["partition"], o["offset"], o["transactional_producer_id"]) for o in r["offsets"]}
        for g, r in groups.items()
    }
    assert offsets["committed-a"] == {(0, 50, 9001)} and offsets["committed-b"] == {(0, 60, 9001)}
    assert offsets["aborted"] == {(1, 5, None)}  # the aborted transaction's offset never shows
    assert offsets["open"] == {(2, 1, None)} and offsets["elsewhere"] == {(0, 7, None)}


def test_an_offsets_current_table_written_before_the_transactional_column_gets_it_added(tmp_path: Any) -> None:
    """An existing warehouse (the table without ``transactional_producer_id``) is evolved by
    ``TableIO.ensure``: the column is added, null in the rows already there, nothing rewritten."""
    from deltalake import DeltaTable, write_deltalake

    from pipelines.config import load_config
    from pipelines.tableio import TableIO
    from schemas import get

    cfg = load_config(overrides={"paths.root": str(tmp_path)})
    io = TableIO(cfg, None, engine="rust")
    schema = get("offsets_current").arrow_schema()
    old = pa.schema([f for f in schema if f.name != "transactional_producer_id"])
    row = {f.name: None for f in old} | {"group_id": "g", "topic": "t", "partition": 0}
    write_deltalake(io.path("offsets_current"), pa.Table.from_pylist([row], schema=old))
    io.ensure("offsets_current")
    table = DeltaTable(io.path("offsets_current")).to_pyarrow_table()
    assert table.schema.names == schema.names
    assert table.to_pylist()[0]["transactional_producer_id"] is None and table.num_rows == 1


def test_inspect_replays_a_segment_warehouses_transactions_as_the_batch_does(tmp_path: Any, capsys: Any) -> None:
    """``offsetlake inspect`` reads raw_records and raw_transactions (written here with delta-rs
    from the segments' ingest shapes): the aborted transaction's offset never shows, the
    committed one does."""
    import json

    from deltalake import write_deltalake

    from coordinator_core import partition_for
    from coordinator_core import segments as S
    from pipelines.cli import main
    from pipelines.inputs.segment_input import landing_tables
    from tests.pipelines.test_batch_segments import _commit, _marker, _txn

    group = "orders-app"
    d = tmp_path / "logdir" / f"__consumer_offsets-{partition_for(group, 50)}"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(
        S.encode_batch_v2([_commit(0, group, 0, 1)])
        + _txn([_commit(1, group, 0, 2)], 5)
        + _marker(S.CONTROL_ABORT, 2, 5)
        + _txn([_commit(3, group, 1, 3)], 6)
        + _marker(S.CONTROL_COMMIT, 4, 6)
    )
    parts = landing_tables(sorted(d.iterdir()))
    warehouse = tmp_path / "data" / "warehouse"
    write_deltalake(str(warehouse / "raw_records"), parts.raw)
    write_deltalake(str(warehouse / "raw_transactions"), parts.transactions)
    conf = tmp_path / "c.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\n")
    assert main(["inspect", "group", group, "--conf", str(conf), "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert {(o["partition"], o["offset"]) for o in view["offsets"]} == {(0, 1), (1, 3)}
