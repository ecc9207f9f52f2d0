"""Test helpers: the records functions both wings use, driven on the driver or in plain Spark.

- ``decode_raw`` / ``reconcile_counts``: the Spark decode (``decode_union`` + ``split_union``, the
  stream's own functions) as DataFrames, with the per-table counts.
- ``arrow_gold`` / ``spark_gold``: raw records -> decode -> replay input -> replay -> gold rows,
  with exactly the functions the batch job's tasks run (``decode_batch``, ``split_union_arrow``,
  ``replay_input.project``, ``replay_order``, ``replay_sorted_batches``), without Delta: the
  reference the stream's tables are compared with. The batch job itself is compared with the
  pure core in ``test_batch_job``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipelines.records.decode import KIND_NAMES
from pipelines.stream.decode import DecodeResult, decode_union, split_union

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def decode_raw(raw_df: DataFrame, *, lenient: bool = False, persist: bool = False) -> DecodeResult:
    """Decode raw records into ``offset_commits``, ``group_metadata``, ``group_records``,
    ``unsupported_records`` and ``quarantine`` DataFrames.

    Args:
        raw_df: raw records with at least key and value (Spark's Kafka source schema).
        lenient: read value versions above 4 with the v4 layout (core codec ``lenient``).
        persist: persist the union (MEMORY_AND_DISK) so writing the four tables and the
            count reconciliation decode each record once. Caller unpersists ``result.union``.
    """
    union = decode_union(raw_df, lenient=lenient)
    if persist:
        from pyspark import StorageLevel

        union = union.persist(StorageLevel.MEMORY_AND_DISK)
    return split_union(union)


@dataclass(frozen=True)
class Reconciliation:
    """raw = offset_commits + group_metadata + group_records + unsupported + quarantine, checked."""

    raw: int
    offset_commits: int
    group_metadata: int
    unsupported: int
    quarantine: int
    group_records: int = 0  # Kafka 4 group records (decoded with modern=True)

    @property
    def decoded(self) -> int:
        return self.offset_commits + self.group_metadata + self.group_records

    @property
    def ok(self) -> bool:
        return self.raw == self.decoded + self.unsupported + self.quarantine

    def as_dict(self) -> dict[str, int | bool]:
        return {
            "raw": self.raw,
            "offset_commits": self.offset_commits,
            "group_metadata": self.group_metadata,
            "group_records": self.group_records,
            "decoded": self.decoded,
            "unsupported": self.unsupported,
            "quarantine": self.quarantine,
            "ok": self.ok,
        }

    def message(self) -> str:
        verdict = "OK" if self.ok else "MISMATCH"
        return (
            f"decode reconciliation {verdict}: raw {self.raw} = offset_commits {self.offset_commits} "
            f"+ group_metadata {self.group_metadata} + group_records {self.group_records} "
            f"+ unsupported {self.unsupported} "
            f"+ quarantine {self.quarantine} (sum {self.decoded + self.unsupported + self.quarantine})"
        )


def kind_counts(union: DataFrame) -> dict[str, int]:
    """Rows per decoded table, counted in one aggregation over the union."""
    rows = union.groupBy("kind").count().collect()
    counts = {name: 0 for name in KIND_NAMES.values()}
    for r in rows:
        counts[KIND_NAMES[int(r["kind"])]] = int(r["count"])
    return counts


def reconcile_counts(raw_count: int, counts: dict[str, int] | DecodeResult, *, strict: bool = False) -> Reconciliation:
    """Check raw = offset_commits + group_metadata + group_records + unsupported + quarantine.

    Args:
        raw_count: number of raw records decoded.
        counts: per-table counts (``kind_counts``) or a ``DecodeResult`` (counted here).
        strict: raise ``RuntimeError`` with the reconciliation message on a mismatch.
    """
    if isinstance(counts, DecodeResult):
        counts = kind_counts(counts.union)
    rec = Reconciliation(
        raw=int(raw_count),
        offset_commits=int(counts.get("offset_commits", 0)),
        group_metadata=int(counts.get("group_metadata", 0)),
        unsupported=int(counts.get("unsupported_records", 0)),
        quarantine=int(counts.get("quarantine", 0)),
        group_records=int(counts.get("group_records", 0)),
    )
    if strict and not rec.ok:
        raise RuntimeError(rec.message())
    return rec


def arrow_gold(
    raw: pa.Table,
    *,
    retention_ms: int | None = None,
    as_of_ms: int | None = None,
    tables: Sequence[str] | None = None,
    **replay_options: Any,
) -> dict[str, pa.Table]:
    """The gold tables of raw records (``key, value, topic, partition, offset, timestamp``)."""
    from pipelines.records import replay_input
    from pipelines.records.decode import decode_batch, split_union_arrow
    from pipelines.records.gold import DEFAULT_TABLES, GOLD_SPECS
    from pipelines.records.replay import as_of_and_log_end, replay_sorted_batches

    names = tuple(tables or DEFAULT_TABLES)
    parts = [replay_input.schema().empty_table()]
    for batch in raw.to_batches():
        for union in decode_batch(batch):
            for name, rows in split_union_arrow(union).items():
                if name in replay_input.SOURCES:
                    parts.append(replay_input.project(name, rows))
    inp = pa.concat_tables(parts)
    log_end = replay_options.pop("log_end_ms", None)
    if retention_ms is not None and inp.num_rows:
        newest = int(pa.compute.max(inp.column("log_timestamp_ms")).as_py())
        as_of_ms, log_end = as_of_and_log_end(as_of_ms, log_end, newest)
    ordered = inp.take(pa.array(replay_input.replay_order(inp), pa.int64()))
    out: dict[str, list[pa.Table]] = {n: [GOLD_SPECS[n].arrow_schema().empty_table()] for n in names}
    from coordinator_core import ReplaySettings

    coordinator = replay_options.pop("coordinator", None)  # Kafka 3 ("old") or 4 ("new") rules
    settings = ReplaySettings(retention_ms=retention_ms, **({"coordinator": coordinator} if coordinator else {}))
    for produced in replay_sorted_batches(
        ordered.to_batches(),
        tables=names,
        as_tables=True,
        settings=settings,
        as_of_ms=as_of_ms,
        log_end_ms=log_end,
        **replay_options,
    ):
        for name, rows in produced.items():
            out[name].append(rows)
    return {n: pa.concat_tables(ts) for n, ts in out.items()}


def spark_gold(spark: Any, raw_df: DataFrame, **options: Any) -> dict[str, DataFrame]:
    """``arrow_gold`` of a raw-records DataFrame, as DataFrames with the gold tables' schemas."""
    from pipelines.records.gold import GOLD_SPECS

    raw = raw_df.select("key", "value", "topic", "partition", "offset", "timestamp").toArrow()
    return {
        name: spark.createDataFrame(rows.to_pylist(), GOLD_SPECS[name].spark_schema())
        for name, rows in arrow_gold(raw, **options).items()
    }


def partition_stats(raw: DataFrame) -> list[dict[str, Any]]:
    """One aggregate job over ``raw_records``: per (topic, partition) the record count, the offset
    range, the oldest/newest timestamp and the timestamp of the last record (by offset). Shared
    by ``log_partitions`` and the log clock's fast path (``pipelines.log_clock.clock_from_stats``)."""
    from pyspark.sql import functions as F

    ts = F.unix_millis("timestamp")
    return [
        r.asDict()
        for r in raw.groupBy("topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.min("timestamp").alias("first_timestamp"),
            F.max("timestamp").alias("last_timestamp"),
            F.max(ts).alias("newest_ms"),
            F.max_by(ts, F.col("offset")).alias("last_record_ms"),
        )
        .collect()
    ]


def sample_raw(n: int = 8, seed: int = 3) -> pa.Table:
    """``sample_records(n, seed)`` as the landing's raw columns (what the jobs read)."""
    from pipelines.inputs.sample import sample_records

    recs = sample_records(n, seed=seed)
    return pa.table(
        {
            "key": pa.array([r.key for r in recs], pa.binary()),
            "value": pa.array([r.value for r in recs], pa.binary()),
            "topic": pa.array([r.topic for r in recs], pa.string()),
            "partition": pa.array([r.partition for r in recs], pa.int32()),
            "offset": pa.array([r.offset for r in recs], pa.int64()),
            "timestamp": pa.array([r.timestamp_ms * 1000 for r in recs], pa.timestamp("us", "UTC")),
        }
    )


def write_gold_warehouse(cfg: Any, raw: pa.Table) -> dict[str, pa.Table]:
    """The gold tables of ``raw`` (the jobs' Arrow replay, at ``cfg``'s retention and as-of) and its
    decoded ``offset_commits``, written with delta-rs into ``cfg``'s warehouse: a warehouse the
    views, ``metrics``, ``serve`` and ``report`` read, without Spark."""
    from pipelines.records.decode import decode_batch, split_union_arrow
    from pipelines.tableio import append_arrow_at, conform_arrow
    from schemas import get as get_spec

    tables = dict(arrow_gold(raw, retention_ms=cfg.replay.retention_ms, as_of_ms=cfg.replay.as_of_ms))
    commits = [
        rows
        for batch in raw.to_batches()
        for union in decode_batch(batch)
        for name, rows in split_union_arrow(union).items()
        if name == "offset_commits"
    ]
    tables["offset_commits"] = pa.concat_tables(
        [pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b for b in commits]
    )
    for name, table in tables.items():
        append_arrow_at(cfg.table_path(name), conform_arrow(table, get_spec(name)))
    return tables
