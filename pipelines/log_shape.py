"""``log_partitions`` from ``raw_records``: ``coordinator_core.log_shape``'s rule, in Spark.

Rules: one aggregate over (partition, offset, timestamp) gives each log partition's count and
range; only partitions whose range is not full (offsets absent) pay for the window that finds
the gaps (``offset - lag(offset) - 1``). A test holds the rows equal to
``coordinator_core.log_shape.partition_shape`` on the same offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO


def log_partitions(raw: DataFrame) -> DataFrame:
    """``raw_records`` (positions unique) → the ``log_partitions`` rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from schemas import get

    spec = get("log_partitions")
    stats = raw.groupBy(F.col("partition").alias("log_partition")).agg(
        F.count(F.lit(1)).alias("records"),
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.min("timestamp").alias("first_timestamp"),
        F.max("timestamp").alias("last_timestamp"),
    )
    gappy = [
        r["log_partition"]
        for r in stats.where(F.col("last_offset") - F.col("first_offset") + 1 != F.col("records"))
        .select("log_partition")
        .collect()
    ]
    zero = F.lit(0).cast("bigint")
    if gappy:
        w = Window.partitionBy("partition").orderBy("offset")
        holes = (
            raw.where(F.col("partition").isin(gappy))
            .select("partition", "offset", (F.col("offset") - F.lag("offset").over(w) - 1).alias("hole"))
            .where(F.col("hole") > 0)
            .groupBy(F.col("partition").alias("log_partition"))
            .agg(
                F.sum("hole").cast("bigint").alias("missing_offsets"),
                F.count(F.lit(1)).cast("bigint").alias("gaps"),
                F.max("hole").cast("bigint").alias("largest_gap"),
                F.max("offset").alias("compacted_until"),
            )
        )
        out = stats.join(holes, "log_partition", "left")
    else:
        out = stats.select(
            "*",
            zero.alias("missing_offsets"),
            zero.alias("gaps"),
            zero.alias("largest_gap"),
            F.lit(None).cast("bigint").alias("compacted_until"),
        )
    out = out.select(
        F.col("log_partition").cast("int"),
        F.col("records").cast("bigint"),
        "first_offset",
        "last_offset",
        F.coalesce("missing_offsets", zero).alias("missing_offsets"),
        F.coalesce("gaps", zero).alias("gaps"),
        F.coalesce("largest_gap", zero).alias("largest_gap"),
        (F.coalesce("largest_gap", zero) > 1).alias("compacted"),
        "compacted_until",
        "first_timestamp",
        "last_timestamp",
    )
    return out.select(*spec.column_names)


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
