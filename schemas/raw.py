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

INGEST_QUARANTINE = TableSpec(
    name="ingest_quarantine",
    doc="Input records refused at ingest because their position cannot be trusted: a null or "
    "missing topic/partition/offset, a partition outside 0..`offsets_topic.num_partitions`-1, or "
    "a position already held (in `raw_records` or elsewhere in the input) by a copy with different "
    "bytes. Kept with their bytes (and, for a conflict, the other copy's) and the reason; never "
    "in `raw_records`. Ingest reconciles: records read = new + identical duplicates + refused. The "
    "streaming job refuses by the same rules into this table (its earlier micro-batches playing "
    "`raw_records`' part): records read = replayed + duplicates + refused.",
    columns=(
        *RAW_RECORDS.columns,
        Column(
            "reason",
            "string",
            False,
            "null_position | partition_out_of_range | conflicting_duplicate | bad_batch (a broker segment's "
            "batch that cannot be read: CRC mismatch, codec failure, malformed or truncated; `value` holds its "
            "bytes, `offset` its base offset when readable, `detail` the file position, length and cause, ending "
            "`; offsets B..L` when the batch held more offsets than its base: all are accounted, none called compaction) | "
            "overlapping_segment (a record of a segment batch whose offsets an earlier segment of its partition "
            "holds, in log order: base offset, then file name; the batch and streaming jobs keep the first copy; "
            "`key`/`value` its bytes).",
        ),
        Column(
            "detail",
            "string",
            True,
            "What exactly: the null column, the partition and range, or which part differs and from which copy.",
        ),
        Column("other_key", "binary", True, "Conflicts: the key bytes of the other copy at this position."),
        Column("other_value", "binary", True, "Conflicts: the value bytes of the other copy at this position."),
        Column(
            "other_in_raw_records",
            "boolean",
            True,
            "Conflicts: true when the other copy is the one already in `raw_records` (it stays there); "
            "the stream: the one taken by an earlier micro-batch.",
        ),
        Column("source_file", "string", True, "Input file the record came from, when known."),
        Column(
            "record_id",
            "string",
            False,
            "Hash of the record's columns and reason: the idempotence key (a rerun adds nothing).",
        ),
        Column("run_id", "string", True, "Ingest run that refused it."),
    ),
    primary_key=("record_id",),
    mode="append",
)

RAW_TRANSACTIONS = TableSpec(
    name="raw_transactions",
    doc="What broker log segments carry beyond `raw_records` (KIP-98): one row per record of a "
    "transactional batch (a TxnOffsetCommit's offset commits: `control_type` null, the record itself is in "
    "`raw_records`, and in `offset_commits` with its transaction's outcome) and one per control record (COMMIT/ABORT markers, which are in no other table). The "
    "replay applies them: a transactional commit is pending until its producer's COMMIT marker in its "
    "partition, dropped on ABORT. Empty for inputs without batch attributes (Parquet/JSON landings, Kafka "
    "consumers). Idempotent on (topic, partition, offset).",
    columns=(
        Column("topic", "string", False, "Source topic, normally `__consumer_offsets`."),
        Column("partition", "int", False, "`__consumer_offsets` partition."),
        Column("offset", "bigint", False, "Offset of the record in its partition."),
        Column("timestamp", "timestamp", True, "Record timestamp, UTC."),
        Column("producer_id", "bigint", False, "Producer id of the record's batch."),
        Column("producer_epoch", "int", True, "Producer epoch of the record's batch."),
        Column(
            "control_type",
            "int",
            True,
            "Kafka's ControlRecordType: 0 ABORT, 1 COMMIT (others: KRaft types, ignored by the replay); "
            "null for a data record of a transactional batch.",
        ),
        Column("coordinator_epoch", "int", True, "EndTransactionMarker's coordinator epoch (markers only)."),
        Column("source_file", "string", True, "Segment file the record was read from."),
    ),
    primary_key=("topic", "partition", "offset"),
    mode="append",
)

TABLES = [RAW_RECORDS, INGEST_QUARANTINE, RAW_TRANSACTIONS]
