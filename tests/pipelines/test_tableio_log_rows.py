"""``TableIO.merge_log_rows``: a table keyed on a log position takes a batch of new positions as an
APPEND (no MERGE, whose cost grows with the table), and a batch repeating a position it holds as
the MERGE it always was (a repeat updates its row where it differs). No Spark (the rust engine
on the driver)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import schemas
from pipelines.config import load_config
from pipelines.tableio import TableIO
from schemas.base import Column, TableSpec

LOG = TableSpec(
    name="tio_log",
    doc="test table: rows keyed on a log position, a nested payload",
    columns=(
        Column("partition", "int", False, "log partition"),
        Column("offset", "bigint", False, "log offset"),
        Column("members", "array<struct<id:string,n:int>>", True, "nested payload"),
    ),
    primary_key=("partition", "offset"),
)


@pytest.fixture
def io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TableIO]:
    monkeypatch.setitem(schemas.TABLES, LOG.name, LOG)
    cfg = load_config(overrides={"paths.root": str(tmp_path), "delta.engine": "rust"})
    yield TableIO(cfg, None)


def _rows(positions: list[tuple[int, int]], tag: str = "a") -> pa.Table:
    return pa.Table.from_pylist(
        [{"partition": p, "offset": o, "members": [{"id": f"{tag}{o}", "n": p}]} for p, o in positions],
        schema=LOG.arrow_schema(),
    )


def _held(io: TableIO) -> list[tuple[int, int, str]]:
    t = io.read_arrow(LOG.name)
    assert t is not None
    return sorted((r["partition"], r["offset"], r["members"][0]["id"]) for r in t.to_pylist())


def _operation(io: TableIO) -> str:
    return str(io.history(LOG.name, 1)[0]["operation"])


def test_new_positions_are_appended_and_a_repeat_is_merged(io: TableIO) -> None:
    first = io.merge_log_rows(LOG.name, _rows([(0, 5), (0, 6), (1, 5)]), txn_app_id="s", txn_version=0)
    assert not first.skipped and first.rows == 3 and _operation(io) == "WRITE"
    io.merge_log_rows(LOG.name, _rows([(1, 6), (2, 0)], tag="b"), txn_app_id="s", txn_version=1)
    assert _operation(io) == "WRITE"
    # a batch repeating positions (one with other bytes: a transaction's fate learned later)
    again = io.merge_log_rows(LOG.name, _rows([(0, 6), (1, 5), (2, 1)], tag="c"), txn_app_id="s", txn_version=2)
    assert _operation(io) == "MERGE" and not again.skipped
    assert _held(io) == [(0, 5, "a5"), (0, 6, "c6"), (1, 5, "c5"), (1, 6, "b6"), (2, 0, "b0"), (2, 1, "c1")]


def test_a_retried_batch_is_skipped_by_its_marker(io: TableIO) -> None:
    io.merge_log_rows(LOG.name, _rows([(0, 1)]), txn_app_id="s", txn_version=3)
    retry = io.merge_log_rows(LOG.name, _rows([(0, 2)]), txn_app_id="s", txn_version=3)
    assert retry.skipped and _held(io) == [(0, 1, "a1")]


def test_a_repeat_below_other_partitions_offsets_is_found(io: TableIO) -> None:
    """The held keys are read at or above the batch's smallest offset (statistics prune the
    rest); a batch reaching back below other partitions' offsets still finds what it repeats."""
    from pipelines.tableio import deltars

    io.merge_log_rows(LOG.name, _rows([(0, o) for o in range(100, 110)]))
    io.merge_log_rows(LOG.name, _rows([(1, o) for o in range(1, 4)]))
    batch = _rows([(0, 109), (1, 2), (1, 4), (0, 110)], tag="z")
    fresh = deltars.rows_not_held(io.path(LOG.name), batch, LOG.primary_key)
    assert sorted(zip(fresh.column("partition").to_pylist(), fresh.column("offset").to_pylist())) == [(0, 110), (1, 4)]
    io.merge_log_rows(LOG.name, batch)
    held = _held(io)
    assert len(held) == 15 and len({(p, o) for p, o, _ in held}) == 15
