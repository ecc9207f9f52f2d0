"""The one way to declare a table: columns with Spark SQL DDL types and a meaning.

Rules:
- Every table of the platform is a ``TableSpec`` in a module of this package; nothing else
  defines a table's columns. Spark (``spark_schema``) and Arrow/delta-rs (``arrow_schema``)
  schemas are derived from the same declaration, so both Delta engines write identical tables.
- Types are Spark SQL DDL strings: ``string binary boolean tinyint smallint int bigint float
  double date timestamp`` and ``array<T>``, ``map<K,V>``, ``struct<name:T,...>``.
- Timestamps are UTC with microsecond precision (what Delta stores); core values are epoch ms.
- ``doc`` is mandatory in spirit: the README's table reference is generated from it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import DataType, StructType

WriteMode = Literal["append", "merge", "overwrite"]

_PRIMITIVES = {
    "string",
    "binary",
    "boolean",
    "tinyint",
    "smallint",
    "int",
    "bigint",
    "float",
    "double",
    "date",
    "timestamp",
}


@dataclass(frozen=True, slots=True)
class Column:
    """One column: a name, a Spark SQL DDL type, nullability and what it means."""

    name: str
    type: str
    nullable: bool = True
    doc: str = ""


@functools.cache
def _arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema of ``columns``: parsed once per column tuple (~0.1 ms a parse; the stream
    asks for a table's schema per raw batch). Arrow schemas are immutable, so one is shared."""
    import pyarrow as pa

    return pa.schema([pa.field(c.name, to_arrow_type(parse_type(c.type)), c.nullable) for c in columns])


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A table: its columns, key, partitioning, write mode and documentation."""

    name: str
    columns: tuple[Column, ...]
    doc: str = ""
    primary_key: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    mode: WriteMode = "append"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"table {self.name}: duplicate columns {sorted(dupes)}")
        for key in (*self.primary_key, *self.partition_by):
            if key not in names:
                raise ValueError(f"table {self.name}: key/partition column {key!r} not declared")
        for col in self.columns:
            parse_type(col.type)  # fail at import time on a typo

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(f"table {self.name} has no column {name!r}")

    def ddl(self) -> str:
        """``name TYPE [NOT NULL], ...`` — usable in CREATE TABLE and ``spark.read.schema``."""
        parts = [f"{c.name} {c.type}{'' if c.nullable else ' NOT NULL'}" for c in self.columns]
        return ", ".join(parts)

    def spark_schema(self) -> StructType:
        from pyspark.sql.types import StructField, StructType

        return StructType([StructField(c.name, to_spark_type(parse_type(c.type)), c.nullable) for c in self.columns])

    def arrow_schema(self) -> pa.Schema:
        return _arrow_schema(self.columns)

    def markdown(self) -> str:
        """A Markdown section documenting the table (used for the README's table reference)."""
        lines = [f"### `{self.name}`", "", self.doc.strip(), ""]
        meta = [f"write mode: {self.mode}"]
        if self.primary_key:
            meta.append("key: " + ", ".join(f"`{k}`" for k in self.primary_key))
        if self.partition_by:
            meta.append("partitioned by: " + ", ".join(f"`{k}`" for k in self.partition_by))
        lines += ["; ".join(meta), "", "| column | type | meaning |", "|---|---|---|"]
        for c in self.columns:
            t = c.type.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            lines.append(f"| `{c.name}` | {t}{'' if c.nullable else ' (not null)'} | {c.doc} |")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# A tiny DDL type parser: string -> nested tuples, then to Spark / Arrow types.
# ---------------------------------------------------------------------------------------------
ParsedType = tuple[Any, ...]


def parse_type(text: str) -> ParsedType:
    """Parse a Spark SQL DDL type into ``("prim", name) | ("array", t) | ("map", k, v) |
    ("struct", ((name, t), ...))``."""
    stripped = text.strip()
    parsed, rest = _parse(stripped, 0)
    if _skip_ws(stripped, rest) != len(stripped):
        raise ValueError(f"bad type {text!r}: trailing text at {rest}")
    return parsed


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] == " ":
        i += 1
    return i


def _ident(s: str, i: int) -> tuple[str, int]:
    i = _skip_ws(s, i)
    j = i
    while j < len(s) and (s[j].isalnum() or s[j] == "_"):
        j += 1
    if j == i:
        raise ValueError(f"bad type {s!r}: expected a name at {i}")
    return s[i:j], j


def _expect(s: str, i: int, ch: str) -> int:
    i = _skip_ws(s, i)
    if i >= len(s) or s[i] != ch:
        raise ValueError(f"bad type {s!r}: expected {ch!r} at {i}")
    return i + 1


def _parse(s: str, i: int) -> tuple[ParsedType, int]:
    name, i = _ident(s, i)
    low = name.lower()
    if low == "array":
        i = _expect(s, i, "<")
        elem, i = _parse(s, i)
        i = _expect(s, i, ">")
        return ("array", elem), i
    if low == "map":
        i = _expect(s, i, "<")
        key, i = _parse(s, i)
        i = _expect(s, i, ",")
        val, i = _parse(s, i)
        i = _expect(s, i, ">")
        return ("map", key, val), i
    if low == "struct":
        i = _expect(s, i, "<")
        fields: list[tuple[str, ParsedType]] = []
        while True:
            fname, i = _ident(s, i)
            i = _expect(s, i, ":")
            ftype, i = _parse(s, i)
            fields.append((fname, ftype))
            i = _skip_ws(s, i)
            if i < len(s) and s[i] == ",":
                i += 1
                continue
            i = _expect(s, i, ">")
            return ("struct", tuple(fields)), i
    if low not in _PRIMITIVES:
        raise ValueError(f"bad type {s!r}: unknown type {name!r}")
    return ("prim", low), i


def to_spark_type(t: ParsedType) -> DataType:
    from pyspark.sql import types as T

    kind = t[0]
    if kind == "prim":
        return {
            "string": T.StringType(),
            "binary": T.BinaryType(),
            "boolean": T.BooleanType(),
            "tinyint": T.ByteType(),
            "smallint": T.ShortType(),
            "int": T.IntegerType(),
            "bigint": T.LongType(),
            "float": T.FloatType(),
            "double": T.DoubleType(),
            "date": T.DateType(),
            "timestamp": T.TimestampType(),
        }[t[1]]
    if kind == "array":
        return T.ArrayType(to_spark_type(t[1]), True)
    if kind == "map":
        return T.MapType(to_spark_type(t[1]), to_spark_type(t[2]), True)
    return T.StructType([T.StructField(n, to_spark_type(ft), True) for n, ft in t[1]])


def to_arrow_type(t: ParsedType) -> pa.DataType:
    import pyarrow as pa

    kind = t[0]
    if kind == "prim":
        return {
            "string": pa.string(),
            "binary": pa.binary(),
            "boolean": pa.bool_(),
            "tinyint": pa.int8(),
            "smallint": pa.int16(),
            "int": pa.int32(),
            "bigint": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "date": pa.date32(),
            "timestamp": pa.timestamp("us", tz="UTC"),
        }[t[1]]
    if kind == "array":
        return pa.list_(to_arrow_type(t[1]))
    if kind == "map":
        return pa.map_(to_arrow_type(t[1]), to_arrow_type(t[2]))
    return pa.struct([pa.field(n, to_arrow_type(ft)) for n, ft in t[1]])
