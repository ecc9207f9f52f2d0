"""``raw_records``: exactly Spark's Kafka source schema (``format("kafka")``).

Rules: the column names and types are Spark's own so ``format("kafka")``, the landing files
written by ``generate``/``simulate``/``capture`` and the Delta table are interchangeable.
(topic, partition, offset) identifies a record; ingest is idempotent on it.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

RAW_RECORDS = TableSpec(
    name="raw_records",
    doc="Every record read from `__consumer_offsets`, bytes untouched, exactly Spark's Kafka "
    "source schema. Ingest is idempotent on (topic, partition, offset).",
    columns=(
        Column("key", "binary", True, "Record key bytes: int16 key version (record type) + key struct."),
        Column("value", "binary", True, "Record value bytes: int16 value version + value struct; null = tombstone."),
        Column("topic", "string", True, "Source topic, normally `__consumer_offsets`."),
        Column("partition", "int", True, "`__consumer_offsets` partition (the group's coordinator partition)."),
        Column("offset", "bigint", True, "Offset of the record in its partition."),
        Column("timestamp", "timestamp", True, "Record timestamp (CREATE_TIME written by the coordinator), UTC."),
        Column("timestampType", "int", True, "0 = CREATE_TIME, 1 = LOG_APPEND_TIME (Kafka's codes)."),
    ),
    primary_key=("topic", "partition", "offset"),
    mode="append",
)

TABLES = [RAW_RECORDS]
