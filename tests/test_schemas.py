"""schemas/: one declaration per table, Spark and Arrow schemas derived from it."""

from __future__ import annotations

import pyarrow as pa
import pytest

import schemas
from schemas.base import Column, TableSpec, parse_type, to_arrow_type


def test_every_table_has_documented_columns_and_derivable_arrow_schema() -> None:
    assert "raw_records" in schemas.TABLES
    for spec in schemas.TABLES.values():
        assert spec.doc.strip(), spec.name
        schema = spec.arrow_schema()
        assert schema.names == list(spec.column_names)
        assert spec.markdown().startswith(f"### `{spec.name}`")


def test_nested_ddl_types_map_to_arrow() -> None:
    t = to_arrow_type(parse_type("array<struct<topic:string,partition:int>>"))
    assert t == pa.list_(pa.struct([("topic", pa.string()), ("partition", pa.int32())]))
    assert to_arrow_type(parse_type("map<string, bigint>")) == pa.map_(pa.string(), pa.int64())


@pytest.mark.parametrize("bad", ["strin", "array<int", "struct<a int>", "int extra"])
def test_bad_types_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_type(bad)


def test_duplicate_columns_and_unknown_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        TableSpec("t", (Column("a", "int"), Column("a", "int")), "doc")
    with pytest.raises(ValueError, match="not declared"):
        TableSpec("t", (Column("a", "int"),), "doc", primary_key=("b",))
