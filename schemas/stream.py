"""``stream_progress``: one row per micro-batch of the streaming replay (``pipelines.stream``).

Rules:
- Written by the streaming job only, one row per (query_name, batch_id), MERGEd on that key
  (with the Delta txn app id ``offsetlake-stream-progress-<query>``, version = newest batch id),
  so a batch re-run after a crash does not log twice.
- Values come from Spark's ``StreamingQueryProgress``; ``state_rows``/``state_memory_bytes``
  sum every stateful operator (there is one: the group replay).
- ``watermark`` is the event-time watermark the batch ran with (null before the first batch
  with data); the streaming replay's offset expiry is driven by it.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

STREAM_PROGRESS = TableSpec(
    name="stream_progress",
    doc="Progress of the streaming replay: one row per micro-batch (input rows, rates, state "
    "size, watermark, duration), taken from Spark's StreamingQueryProgress.",
    columns=(
        Column("query_name", "string", False, "Streaming query name (`stream` section of the config)."),
        Column(
            "batch_id", "bigint", False, "Micro-batch id (Spark's batchId; also the Delta txn version of its writes)."
        ),
        Column("timestamp", "timestamp", False, "When the micro-batch started (trigger time), UTC."),
        Column("input_rows", "bigint", True, "Raw records read in this micro-batch (all sources)."),
        Column("input_rows_per_second", "double", True, "Input rate: rows / time since the previous trigger."),
        Column("processed_rows_per_second", "double", True, "Processing rate: rows / batch duration."),
        Column("batch_duration_ms", "bigint", True, "Wall time of the micro-batch (triggerExecution), ms."),
        Column(
            "state_rows",
            "bigint",
            True,
            "State buckets held in the state store after the batch (each holds its groups' states).",
        ),
        Column(
            "state_memory_bytes",
            "bigint",
            True,
            "State store memory used after the batch (RocksDB: its estimate), bytes.",
        ),
        Column("watermark", "timestamp", True, "Event-time watermark of the batch (drives offset expiry)."),
        Column(
            "sources", "string", True, "JSON array of the sources' progress (description, start/end offsets, rows)."
        ),
    ),
    primary_key=("query_name", "batch_id"),
    mode="merge",
)

TABLES = [STREAM_PROGRESS]
