"""``log_partitions``: what the captured ``__consumer_offsets`` says about its own completeness.

Rules: one row per log partition present in ``raw_records``, rebuilt by every batch replay
(``coordinator_core.log_shape`` has the rule: Kafka's offsets are consecutive, so missing
offsets are records the log cleaner removed (compaction) or transaction markers).
``compacted_until`` is where the compacted part ends: a group whose first record
(``group_state.first_log_offset``) lies before it may have lost older history to compaction.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

LOG_PARTITIONS = TableSpec(
    name="log_partitions",
    doc="Per __consumer_offsets partition captured: records, offset range, offsets absent "
    "(compaction or transaction markers) and where the compacted part ends.",
    columns=(
        Column("log_partition", "int", False, "__consumer_offsets partition."),
        Column("records", "bigint", False, "Records captured (distinct offsets)."),
        Column("first_offset", "bigint", False, "Smallest offset captured."),
        Column("last_offset", "bigint", False, "Largest offset captured."),
        Column("missing_offsets", "bigint", False, "Offsets between first and last that the capture lacks."),
        Column("gaps", "bigint", False, "Runs of missing offsets."),
        Column("largest_gap", "bigint", False, "The longest run of missing offsets (1 = a transaction marker)."),
        Column(
            "compacted", "boolean", False, "A gap longer than a transaction marker: the log cleaner removed records."
        ),
        Column(
            "compacted_until",
            "bigint",
            True,
            "First offset after the last gap: history before it may be incomplete (null: no gap).",
        ),
        Column("first_timestamp", "timestamp", True, "Timestamp of the oldest record captured."),
        Column("last_timestamp", "timestamp", True, "Timestamp of the newest record captured."),
    ),
    primary_key=("log_partition",),
    mode="overwrite",
)

TABLES = [LOG_PARTITIONS]
