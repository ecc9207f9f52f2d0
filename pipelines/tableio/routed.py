"""A routed pass as DataFrames: how the spark engine runs ``TableIO.write_routed``.

Rules:
- The same routes as the rust engine (``"module:function"``, called on the executors as
  ``route(batches, options)``, yielding ``({table: pa.Table}, input rows consumed)``, side outputs
  appended to ``options[SIDE_KEY]``): one ``mapInArrow`` pass whose rows carry each produced table
  slice as one Arrow IPC message, plus a row per consumed count and per side output. That pass is
  persisted; the driver checks the counts and side outputs (the same checks as the rust engine's
  commit), then each table's rows are unpacked with a second ``mapInArrow`` and written by the
  engine (Spark's Delta: one commit per table).
- Nothing here knows Delta: ``routed_frames`` is testable on any Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.tableio.base import SIDE_KEY
from pipelines.tableio.rust_sink import load_route
from pipelines.uri import table_from_ipc, table_to_ipc
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

#: the packed pass's rows: a table slice (``kind`` "rows"), a consumed count or a side output
PACKED_DDL = "kind string, name string, payload binary, rows bigint"


@dataclass
class RoutedFrames:
    """The outcome of a routed pass: one DataFrame per table and what the driver checks."""

    frames: dict[str, DataFrame]
    rows_in: int
    rows_out: dict[str, int]
    side: list[dict[str, Any]] = field(default_factory=list)
    packed: Any = None  # the persisted pass (``unpersist`` it when the tables are written)

    def problem(self, *, rows_equal_input: bool, expected_rows: int | None) -> str | None:
        """The count mismatch the rust engine's commit would refuse, if any."""
        written = sum(self.rows_out.values())
        if rows_equal_input and written != self.rows_in:
            return f"routed {written} rows from {self.rows_in} input rows"
        if expected_rows is not None and self.rows_in != expected_rows:
            return f"read {self.rows_in} input rows, expected {expected_rows}"
        return None


def routed_frames(df: DataFrame, route: str, route_options: dict[str, Any], names: list[str]) -> RoutedFrames:
    """Run ``route`` over ``df`` once (persisted) and return each table's rows as a DataFrame."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    def packed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        side: list[dict[str, Any]] = []
        options = {**route_options, SIDE_KEY: side}
        rows: list[tuple[str, str, bytes | None, int]] = []
        for tables, consumed in load_route(route)((b for b in batches if b.num_rows), options):
            rows.append(("consumed", "", None, consumed))
            rows.extend(("rows", name, table_to_ipc(t), t.num_rows) for name, t in tables.items() if t.num_rows)
            if len(rows) >= 64:
                yield _batch(rows)
                rows = []
        rows.extend(("side", "", json.dumps(entry).encode(), 0) for entry in side)
        if rows:
            yield _batch(rows)

    out = df.mapInArrow(packed, PACKED_DDL).persist(StorageLevel.MEMORY_AND_DISK)
    counts = {
        (r["kind"], r["name"]): int(r["n"] or 0)
        for r in out.groupBy("kind", "name").agg(F.sum("rows").alias("n")).collect()
    }
    side = [json.loads(r["payload"]) for r in out.where("kind = 'side'").select("payload").collect()]
    frames = {}
    for name in names:
        spec = get_spec(name)
        schema = spec.arrow_schema()

        def unpack(batches: Iterator[pa.RecordBatch], schema: pa.Schema = schema) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for blob in batch.column("payload").to_pylist():
                    table = table_from_ipc(blob)
                    yield from table.select(schema.names).cast(schema).to_batches()

        rows_of = out.where((F.col("kind") == "rows") & (F.col("name") == name)).select("payload")
        frames[name] = rows_of.mapInArrow(unpack, spec.ddl())
    return RoutedFrames(
        frames, counts.get(("consumed", ""), 0), {n: counts.get(("rows", n), 0) for n in names}, side, out
    )


def _batch(rows: list[tuple[str, str, bytes | None, int]]) -> pa.RecordBatch:
    import pyarrow as pa

    kinds, names, payloads, counts = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(kinds, pa.string()),
            pa.array(names, pa.string()),
            pa.array(payloads, pa.binary()),
            pa.array(counts, pa.int64()),
        ],
        names=["kind", "name", "payload", "rows"],
    )
