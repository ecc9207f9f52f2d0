"""``log_partitions`` from ``raw_records``: ``coordinator_core.log_shape``'s rule, in Spark.

Rules: one aggregate over (topic, partition, offset, timestamp) gives each log partition's count,
range and clock figures (``partition_stats``, shared with the log clock's fast path); only
partitions whose range is not full (offsets absent) pay for the window that finds the gaps
(``offset - lag(offset) - 1``). A test holds the rows equal to
``coordinator_core.log_shape.partition_shape`` on the same offsets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from schemas import get

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO


#: the topic whose partitions ``log_partitions`` describes (raw_records may also hold rows of
#: synthetic topics: ``input.synthesize_positions``)
OFFSETS_TOPIC = "__consumer_offsets"


class StatsAccumulator:
    """``partition_stats``' figures over raw batches in a task (pyarrow/numpy, no Spark job): the
    decode pass feeds it the raw records it reads anyway, and reports ``entries()`` beside its
    spool (``STATS_KIND`` side outputs); ``combine`` merges the tasks' entries on the driver."""

    def __init__(self) -> None:
        self.by: dict[tuple[str, int], list[int]] = {}  # records, first, last, oldest, newest, last_ms

    def add(self, batch: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        topics = batch.column("topic")
        ts = pc.cast(pc.cast(batch.column("timestamp"), pa.timestamp("ms")), pa.int64())
        t = pa.table({"partition": batch.column("partition"), "offset": batch.column("offset"), "ts": ts})
        names = pc.unique(topics).to_pylist()  # one, __consumer_offsets, in practice
        for topic in names:
            self._add_topic(str(topic), t if len(names) == 1 else t.filter(pc.equal(topics, topic)))

    def _add_topic(self, topic: str, t: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        agg = (
            t.group_by(["partition"])
            .aggregate([("offset", "count"), ("offset", "min"), ("offset", "max"), ("ts", "min"), ("ts", "max")])
            .to_pylist()
        )
        # the timestamp of each partition's last record: from the few rows at a max offset
        maxima = pa.array([r["offset_max"] for r in agg], pa.int64())
        cand = t.filter(pc.is_in(t.column("offset"), value_set=maxima)).to_pydict()
        last_ts = dict(zip(zip(cand["partition"], cand["offset"]), cand["ts"]))
        for r in agg:
            key = (topic, int(r["partition"]))
            cur = [
                int(r["offset_count"]),
                int(r["offset_min"]),
                int(r["offset_max"]),
                int(r["ts_min"]),
                int(r["ts_max"]),
                int(last_ts[(r["partition"], r["offset_max"])]),
            ]
            prev = self.by.get(key)
            self.by[key] = (
                cur
                if prev is None
                else [
                    prev[0] + cur[0],
                    min(prev[1], cur[1]),
                    max(prev[2], cur[2]),
                    min(prev[3], cur[3]),
                    max(prev[4], cur[4]),
                    cur[5] if cur[2] > prev[2] else prev[5],
                ]
            )

    def entries(self) -> list[dict[str, Any]]:
        return [{"kind": STATS_KIND, "topic": t, "partition": p, "v": v} for (t, p), v in sorted(self.by.items())]


#: side-output entry kind of ``StatsAccumulator`` (beside the spool's file entries)
STATS_KIND = "partition_stats"


def combine(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks' ``StatsAccumulator`` entries → ``partition_stats`` rows (positions are unique in
    ``raw_records``, so counts add up)."""
    import datetime as dt

    acc = StatsAccumulator()
    for e in entries:
        key, cur = (str(e["topic"]), int(e["partition"])), [int(x) for x in e["v"]]
        prev = acc.by.get(key)
        acc.by[key] = (
            cur
            if prev is None
            else [
                prev[0] + cur[0],
                min(prev[1], cur[1]),
                max(prev[2], cur[2]),
                min(prev[3], cur[3]),
                max(prev[4], cur[4]),
                cur[5] if cur[2] > prev[2] else prev[5],
            ]
        )

    def when(ms: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)

    return [
        {
            "topic": t,
            "partition": p,
            "records": v[0],
            "first_offset": v[1],
            "last_offset": v[2],
            "first_timestamp": when(v[3]),
            "last_timestamp": when(v[4]),
            "newest_ms": v[4],
            "last_record_ms": v[5],
        }
        for (t, p), v in sorted(acc.by.items())
    ]


def _refused_positions(raw: DataFrame, refused: DataFrame, gappy: list[int]) -> DataFrame:
    """The positions inside ``raw``'s offset range (per gappy partition) that ingest refused or
    quarantined and ``raw`` lacks: ``partition, offset, refused`` (true)."""
    from pyspark.sql import functions as F

    from pipelines.inputs.segment_input import BAD_BATCH_SPAN

    bounds = raw.groupBy("partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
    # a bad batch's row holds its base offset; its other offsets are in ``detail``
    # (``segment_input.BAD_BATCH_SPAN``): every one of them is accounted for
    span = F.regexp_extract(F.coalesce(F.col("detail"), F.lit("")), BAD_BATCH_SPAN, 2)
    last = F.when(span != "", span.cast("bigint")).otherwise(F.col("offset"))
    known = (
        refused.where((F.col("topic") == OFFSETS_TOPIC) & F.col("partition").isin(gappy))
        .where(F.col("offset").isNotNull())
        .join(bounds, "partition")
        .where((F.col("offset") <= F.col("hi")) & (last >= F.col("lo")))
        .select(
            "partition",
            F.explode(F.sequence(F.greatest(F.col("offset"), F.col("lo")), F.least(last, F.col("hi")))).alias("offset"),
        )
        .distinct()
        .join(raw.select("partition", "offset"), ["partition", "offset"], "left_anti")
        .select("partition", "offset", F.lit(True).alias("refused"))
    )
    return known


def log_partitions(
    read_raw: Callable[[], DataFrame],
    stats: list[dict[str, Any]],
    read_refused: Callable[[], DataFrame | None] | None = None,
) -> list[dict[str, Any]]:
    """``raw_records`` (positions unique; ``read_raw`` reads it, only when needed) and its
    ``partition_stats`` → the ``log_partitions`` rows (one per ``__consumer_offsets`` partition:
    small, on the driver). A window job runs only over partitions whose offset range is not
    full. ``read_refused``: the positions refused or quarantined at ingest (``ingest_quarantine``),
    which fill their gaps before any is inferred (``accounted_offsets``, not a table column:
    the run summary's)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    mine = [r for r in stats if r["topic"] == OFFSETS_TOPIC]
    gappy = [r["partition"] for r in mine if r["last_offset"] - r["first_offset"] + 1 != r["records"]]
    holes: dict[int, Any] = {}
    accounted: dict[int, int] = {}
    if gappy:
        w = Window.partitionBy("partition").orderBy("offset")
        raw = read_raw().where((F.col("topic") == OFFSETS_TOPIC) & F.col("partition").isin(gappy))
        positions = raw.select("partition", "offset", F.lit(False).alias("refused"))
        refused = read_refused() if read_refused is not None else None
        if refused is not None:
            known = _refused_positions(raw, refused, gappy)
            positions = positions.unionByName(known)
            for k in known.groupBy("partition").count().collect():
                accounted[int(k["partition"])] = int(k["count"])
        for h in (
            positions.select("partition", "offset", (F.col("offset") - F.lag("offset").over(w) - 1).alias("hole"))
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
        g = holes.get(r["partition"])
        largest = 0 if g is None else int(g["largest"])
        rows.append(
            {
                "log_partition": int(r["partition"]),
                "records": int(r["records"]),
                "first_offset": int(r["first_offset"]),
                "last_offset": int(r["last_offset"]),
                "missing_offsets": 0 if g is None else int(g["missing"]),
                "gaps": 0 if g is None else int(g["gaps"]),
                "largest_gap": largest,
                "compacted": largest > 1,
                "compacted_until": None if g is None else int(g["until"]),
                "first_timestamp": r["first_timestamp"],
                "last_timestamp": r["last_timestamp"],
                "accounted_offsets": accounted.get(int(r["partition"]), 0),
            }
        )
    return rows


def rows_to_table(name: str, rows: list[dict[str, Any]]) -> Any:
    """Collected rows of table ``name`` as an Arrow table of its declared schema."""
    import pyarrow as pa

    schema = get(name).arrow_schema()
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def compaction_note(io: TableIO, rows: list[Any]) -> str | None:
    """One line for the run summary when the capture is compacted (None: it is not)."""
    refused = sum(int(r.get("accounted_offsets") or 0) for r in rows)
    said = (
        f"{refused} offsets refused or quarantined at ingest (ingest_quarantine), not missing from the log"
        if refused
        else None
    )
    compacted = [r for r in rows if r["compacted"]]
    if not compacted:
        marker = sum(int(r["missing_offsets"]) for r in rows)
        note = None if not marker else f"{marker} offsets absent in single gaps (transaction markers)"
        return "; ".join(x for x in (said, note) if x) or None
    missing = sum(int(r["missing_offsets"]) for r in compacted)
    affected = 0
    if io.exists("group_state"):
        from pyspark.sql import functions as F

        until = {int(r["log_partition"]): int(r["compacted_until"]) for r in compacted}
        spark = io.spark
        assert spark is not None
        cut = spark.createDataFrame(list(until.items()), "coordinator_partition int, compacted_until bigint")
        affected = (
            io.read("group_state")
            .join(cut, "coordinator_partition")
            .where(F.col("first_log_offset") < F.col("compacted_until"))
            .count()
        )
    parts = ", ".join(str(r["log_partition"]) for r in sorted(compacted, key=lambda r: r["log_partition"]))
    return (
        f"compacted input: partitions {parts} lack {missing} offsets (the log cleaner's work); "
        f"{affected} groups start inside the compacted part, their earlier history is unknown "
        "(log_partitions, group_state.first_log_offset)" + (f"; {said}" if said else "")
    )
