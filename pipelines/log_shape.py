"""``log_partitions`` from ``raw_records``: ``coordinator_core.log_shape``'s rule, in Spark.

Rules: one aggregate over (topic, partition, offset, timestamp) gives each log partition's count,
range and clock figures (``partition_stats``, shared with the log clock's fast path); only
partitions whose range is not full (offsets absent) pay for the window that finds the gaps
(``offset - lag(offset) - 1``). A test holds the rows equal to
``coordinator_core.log_shape.partition_shape`` on the same offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO


#: the topic whose partitions ``log_partitions`` describes (raw_records may also hold rows of
#: synthetic topics: ``input.synthesize_positions``)
OFFSETS_TOPIC = "__consumer_offsets"


def partition_stats(raw: DataFrame) -> list[dict[str, Any]]:
    """One aggregate job over ``raw_records``: per (topic, partition) the record count, the offset
    range, the oldest/newest timestamp and the timestamp of the last record (by offset). Shared
    by ``log_partitions`` and the log clock's fast path (``pipelines.log_clock.clock_from_stats``)."""
    from pyspark.sql import functions as F

    ts = F.unix_millis("timestamp")
    return [
        r.asDict()
        for r in raw.groupBy("topic", "partition").agg(
            F.count(F.lit(1)).alias("records"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.min("timestamp").alias("first_timestamp"),
            F.max("timestamp").alias("last_timestamp"),
            F.max(ts).alias("newest_ms"),
            F.max_by(ts, F.col("offset")).alias("last_record_ms"),
        ).collect()
    ]


def log_partitions(raw: DataFrame, stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``raw_records`` (positions unique) and its ``partition_stats`` → the ``log_partitions``
    rows (one per ``__consumer_offsets`` partition: small, on the driver). A window job runs only
    over partitions whose offset range is not full."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    mine = [r for r in stats if r["topic"] == OFFSETS_TOPIC]
    gappy = [r["partition"] for r in mine if r["last_offset"] - r["first_offset"] + 1 != r["records"]]
    holes: dict[int, Any] = {}
    if gappy:
        w = Window.partitionBy("partition").orderBy("offset")
        for h in (
            raw.where((F.col("topic") == OFFSETS_TOPIC) & F.col("partition").isin(gappy))
            .select("partition", "offset", (F.col("offset") - F.lag("offset").over(w) - 1).alias("hole"))
            .where(F.col("hole") > 0)
            .groupBy("partition")
            .agg(
                F.sum("hole").alias("missing"),
                F.count(F.lit(1)).alias("gaps"),
                F.max("hole").alias("largest"),
                F.max("offset").alias("until"),
            )
            .collect()
        ):
            holes[h["partition"]] = h
    rows = []
    for r in sorted(mine, key=lambda r: r["partition"]):
        h = holes.get(r["partition"])
        largest = 0 if h is None else int(h["largest"])
        rows.append({
            "log_partition": int(r["partition"]),
            "records": int(r["records"]),
            "first_offset": int(r["first_offset"]),
            "last_offset": int(r["last_offset"]),
            "missing_offsets": 0 if h is None else int(h["missing"]),
            "gaps": 0 if h is None else int(h["gaps"]),
            "largest_gap": largest,
            "compacted": largest > 1,
            "compacted_until": None if h is None else int(h["until"]),
            "first_timestamp": r["first_timestamp"],
            "last_timestamp": r["last_timestamp"],
        })
    return rows


def rows_to_table(name: str, rows: list[dict[str, Any]]) -> Any:
    """Collected rows of table ``name`` as an Arrow table of its declared schema."""
    import pyarrow as pa

    from schemas import get

    schema = get(name).arrow_schema()
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def compaction_note(io: TableIO, rows: list[Any]) -> str | None:
    """One line for the run summary when the capture is compacted (None: it is not)."""
    compacted = [r for r in rows if r["compacted"]]
    if not compacted:
        marker = sum(int(r["missing_offsets"]) for r in rows)
        return None if not marker else f"{marker} offsets absent in single gaps (transaction markers)"
    missing = sum(int(r["missing_offsets"]) for r in compacted)
    affected = 0
    if io.exists("group_state"):
        from pyspark.sql import functions as F

        until = {int(r["log_partition"]): int(r["compacted_until"]) for r in compacted}
        spark = io.spark
        assert spark is not None
        cut = spark.createDataFrame(list(until.items()), "coordinator_partition int, compacted_until bigint")
        affected = (
            io.read("group_state").join(cut, "coordinator_partition")
            .where(F.col("first_log_offset") < F.col("compacted_until")).count()
        )
    parts = ", ".join(str(r["log_partition"]) for r in sorted(compacted, key=lambda r: r["log_partition"]))
    return (
        f"compacted input: partitions {parts} lack {missing} offsets (the log cleaner's work); "
        f"{affected} groups start inside the compacted part, their earlier history is unknown "
        "(log_partitions, group_state.first_log_offset)"
    )
