"""A warehouse written before a gold column was declared (``group_type``, the consumer-group
member columns) takes the next job's rows: ``TableIO.ensure`` adds the nullable columns (Delta
ADD COLUMNS), older rows read null, nothing is rewritten. Arrow on the rust engine, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.config import load_config
from pipelines.errors import UsageError
from pipelines.tableio import TableIO, deltars
from schemas.decoded import OFFSET_COMMITS
from schemas.gold import GROUP_MEMBERS, GROUP_STATE

NEW_COLUMNS = {
    "group_state": [
        "group_type",
        "offsets_due",
        "death_forecast_from_time",
        "death_forecast_to_time",
        "offsets_kept_in",
    ],
    "group_members": [
        "group_type",
        "member_epoch",
        "member_state",
        "pending_revocation_partitions",
        "process_id",
        "assigned_tasks",
        "pending_revocation_tasks",
    ],
    "offset_commits": ["producer_id", "txn_outcome", "txn_marker_offset"],
}


def _old_table(io: TableIO, name: str, schema: pa.Schema, row: dict[str, object]) -> None:
    """The table as a warehouse of the previous release holds it: without the new columns, one row."""
    old = pa.schema([f for f in schema if f.name not in NEW_COLUMNS[name]])
    deltars.create(io.path(name), old, [])
    deltars.write_arrow(io.path(name), pa.Table.from_pylist([{f.name: row.get(f.name) for f in old}], schema=old))


@pytest.fixture
def io(tmp_path: Path) -> TableIO:
    return TableIO(load_config(overrides={"paths.root": str(tmp_path)}), None, engine="rust")


def test_a_gold_table_from_before_group_type_gets_the_new_columns_at_the_next_merge(io: TableIO) -> None:
    schema = GROUP_STATE.arrow_schema()
    _old_table(io, "group_state", schema, {"group_id": "old-group", "state": "Stable"})
    row = {f.name: None for f in schema}
    row.update(group_id="cg", state="Stable", group_type="consumer")
    io.merge("group_state", pa.Table.from_pylist([row], schema=schema))
    got = {r["group_id"]: r["group_type"] for r in io.read_arrow("group_state").to_pylist()}
    assert got == {"old-group": None, "cg": "consumer"}
    assert deltars.column_names(io.path("group_state")) == list(GROUP_STATE.column_names)


def test_the_members_table_gets_the_consumer_member_columns_with_their_nested_type(io: TableIO) -> None:
    schema = GROUP_MEMBERS.arrow_schema()
    _old_table(io, "group_members", schema, {"group_id": "old-group", "event_key": "0:1:m", "member_id": "m"})
    io.ensure("group_members")
    assert deltars.column_names(io.path("group_members")) == list(GROUP_MEMBERS.column_names)
    row = {f.name: None for f in schema}
    row.update(
        group_id="cg",
        event_key="3:9:m1",
        member_id="m1",
        group_type="consumer",
        member_epoch=4,
        pending_revocation_partitions=[{"topic": "orders", "partition": 2}],
    )
    io.merge("group_members", pa.Table.from_pylist([row], schema=schema))
    got = {
        r["member_id"]: (r["member_epoch"], r["pending_revocation_partitions"])
        for r in io.read_arrow("group_members").to_pylist()
    }
    assert got == {"m": (None, None), "m1": (4, [{"topic": "orders", "partition": 2}])}


def test_offset_commits_from_before_the_transaction_columns_gets_them_with_older_rows_null(io: TableIO) -> None:
    schema = OFFSET_COMMITS.arrow_schema()
    old = {"coordinator_partition": 7, "log_offset": 1, "group_id": "g", "topic": "t", "partition": 0}
    _old_table(io, "offset_commits", schema, {**old, "key_version": 1, "is_tombstone": False})
    io.ensure("offset_commits")
    assert deltars.column_names(io.path("offset_commits")) == list(OFFSET_COMMITS.column_names)
    (row,) = io.read_arrow("offset_commits").to_pylist()
    assert row["log_offset"] == 1 and (row["producer_id"], row["txn_outcome"], row["txn_marker_offset"]) == (
        None,
        None,
        None,
    )


def test_a_missing_non_nullable_column_is_one_clear_error(io: TableIO, monkeypatch: pytest.MonkeyPatch) -> None:
    import schemas
    from schemas.base import Column, TableSpec

    spec = TableSpec(name="evo_t", doc="t", columns=(Column("k", "string", False, "k"),), primary_key=("k",))
    monkeypatch.setitem(schemas.TABLES, spec.name, spec)
    deltars.create(io.path("evo_t"), pa.schema([pa.field("other", pa.string())]), [])
    with pytest.raises(UsageError, match=r"lacks the non-nullable columns \['k'\]"):
        io.ensure("evo_t")
