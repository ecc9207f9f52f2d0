"""``partition_end_offsets``: samples of each consumed topic-partition's log end (lag source).

Rules: one row per sample of a (topic, partition), or per (group, topic, partition) when the
sampler took the committed offsets from ``offsets_current``; append-only, so lag over time is a
query. Offsets are Kafka's ListOffsets answers (log start = earliest, log end = high watermark).
``committed_record_timestamp`` is the timestamp of the record at the committed offset (the
oldest record the group has not consumed): ``sampled_at - committed_record_timestamp`` is the
lag in time; it is null when the group is caught up or the record could not be fetched in time.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

PARTITION_END_OFFSETS = TableSpec(
    name="partition_end_offsets",
    doc="Sampled log-start/log-end offsets per topic-partition (and per consuming group with its "
    "committed offset and the timestamp of the record there): lag in offsets and in time.",
    columns=(
        Column("sampled_at", "timestamp", False, "When the sample was taken (sampler clock, UTC)."),
        Column("topic", "string", False, "Consumed topic."),
        Column("partition", "int", False, "Partition of the consumed topic."),
        Column("log_start_offset", "bigint", True, "Earliest offset still in the log (ListOffsets EARLIEST)."),
        Column("log_end_offset", "bigint", False, "High watermark: the offset the next record will get."),
        Column(
            "group_id",
            "string",
            True,
            "Consumer group whose committed offset is sampled; null = partition-level sample.",
        ),
        Column("committed_offset", "bigint", True, "The group's committed offset (from offsets_current)."),
        Column("lag_offsets", "bigint", True, "log_end_offset - committed_offset (>= 0)."),
        Column(
            "committed_record_timestamp",
            "timestamp",
            True,
            "Timestamp of the record at the committed offset; null when caught up or not fetched.",
        ),
        Column("bootstrap_servers", "string", True, "The cluster that was sampled."),
    ),
    partition_by=(),
    mode="append",
)

TABLES = [PARTITION_END_OFFSETS]
