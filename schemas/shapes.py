"""Row shapes that are not tables: what flows between stages, in memory, in files and in state.

Rules:
- Declared like tables (``TableSpec``: the same DDL types, Arrow and Spark schemas derived from
  them) but listed in ``SHAPES``, not ``TABLES``: nothing is stored under these names.
- The pipelines take their schemas from here (``REPLAY_INPUT.arrow_schema()``,
  ``STREAM_STATE.ddl()``, ...); no module outside ``schemas/`` declares columns.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec
from schemas.decoded import MEMBER_TYPE, TXN_COLUMNS

#: The members of a group-metadata record as the replay reads them (the decoded member struct
#: without the parsed subscription/assignment columns: the core parses the blobs itself).
REPLAY_MEMBER_TYPE = (
    "array<struct<member_id:string,group_instance_id:string,client_id:string,client_host:string,"
    "rebalance_timeout:int,session_timeout:int,subscription:binary,assignment:binary>>"
)

REPLAY_INPUT = TableSpec(
    name="replay_input",
    doc="One row per record of a group, any kind (the columns of the other kinds null): what the "
    "replay reads, in the batch job's bucket files and in the stream's per-group packs.",
    columns=(
        Column("group_id", "string"),
        Column("coordinator_partition", "int"),
        Column("log_offset", "bigint"),
        Column("log_timestamp_ms", "bigint"),
        Column(
            "rec_kind",
            "tinyint",
            doc="0 offset commit, 1 group metadata, 2 unsupported (raw bytes), 3 Kafka 4 group record (raw bytes), "
            "4 transaction marker.",
        ),
        Column("key_version", "int"),
        Column("is_tombstone", "boolean"),
        Column("value_version", "int"),
        Column("topic", "string"),
        Column("partition", "int"),
        Column("committed_offset", "bigint"),
        Column("leader_epoch", "int"),
        Column("metadata", "string"),
        Column("commit_timestamp_ms", "bigint"),
        Column("expire_timestamp_ms", "bigint"),
        Column("protocol_type", "string"),
        Column("generation", "int"),
        Column("protocol", "string"),
        Column("leader", "string"),
        Column("current_state_timestamp_ms", "bigint"),
        Column("members", REPLAY_MEMBER_TYPE),
        Column("raw_key", "binary"),
        Column("raw_value", "binary"),
        Column(
            "producer_id",
            "bigint",
            doc="Producer id of a record of a transactional batch, or of a COMMIT/ABORT marker (rec_kind 4; "
            "from `raw_transactions`); null for a plain record.",
        ),
        Column("txn_committed", "boolean", doc="rec_kind 4 (a transaction marker): true for COMMIT, false for ABORT."),
    ),
)

DECODE_UNION = TableSpec(
    name="decode_union",
    doc="The decoder's output: one row per raw record, ``kind`` says which decoded table it "
    "belongs to (0 offset_commits, 1 group_metadata, 2 unsupported_records, 3 quarantine, 4 group_records).",
    columns=(
        Column("kind", "tinyint", False),
        Column("coordinator_partition", "int"),
        Column("log_offset", "bigint"),
        Column("log_timestamp", "timestamp"),
        Column("group_id", "string"),
        Column("key_version", "int"),
        Column("is_tombstone", "boolean"),
        Column("value_version", "int"),
        # offset commit
        Column("topic", "string"),
        Column("partition", "int"),
        Column("committed_offset", "bigint"),
        Column("leader_epoch", "int"),
        Column("metadata", "string"),
        Column("commit_timestamp", "timestamp"),
        Column("expire_timestamp", "timestamp"),
        # group metadata
        Column("protocol_type", "string"),
        Column("generation", "int"),
        Column("protocol", "string"),
        Column("leader", "string"),
        Column("current_state_timestamp", "timestamp"),
        Column("member_count", "int"),
        Column("members", f"array<{MEMBER_TYPE}>"),
        # unsupported / quarantine: the raw record and what went wrong
        Column("raw_key", "binary"),
        Column("raw_value", "binary"),
        Column("raw_topic", "string"),
        Column("record_type", "int"),
        Column("record_type_name", "string"),
        Column("version", "int"),
        Column("error_class", "string"),
        Column("error_message", "string"),
        Column("part", "string"),
        Column("byte_position", "int"),
        # Kafka 4 group records (group_records)
        Column("group_type", "string"),
        Column("member_id", "string"),
        Column("value_json", "string"),
        # offset commits' transaction (null from the decoder: set from raw_transactions afterwards)
        *TXN_COLUMNS,
    ),
)

DECODE_FAST = TableSpec(
    name="decode_fast",
    doc="The vectorised offset-commit decoder's fields (epoch ms, exactly the core's values; "
    "-1 sentinels as null), before they become ``DECODE_UNION`` rows.",
    columns=(
        Column("key_version", "int", False),
        Column("group_id", "string", False),
        Column("topic", "string", False),
        Column("partition", "int", False),
        Column("is_tombstone", "boolean", False),
        Column("value_version", "int"),
        Column("committed_offset", "bigint"),
        Column("leader_epoch", "int"),
        Column("metadata", "string"),
        Column("commit_timestamp_ms", "bigint"),
        Column("expire_timestamp_ms", "bigint"),
    ),
)

POSITION_RANGES = TableSpec(
    name="position_ranges",
    doc="Ingest: per task and (topic, partition), the offsets a landing read holds.",
    columns=(
        Column("topic", "string"),
        Column("partition", "int"),
        Column("first", "bigint"),
        Column("last", "bigint"),
        Column("rows", "bigint"),
        Column("repeats", "boolean"),
    ),
)

CLOCK_STAIRS = TableSpec(
    name="clock_stairs",
    doc="The log clock: records whose timestamp jumps ahead of their partition's later records.",
    columns=(
        Column("topic", "string"),
        Column("partition", "int"),
        Column("offset", "bigint"),
        Column("ts", "bigint"),
        Column("prev_ts", "bigint"),
        Column("jump", "boolean"),
    ),
)

STREAM_PACK = TableSpec(
    name="stream_pack",
    doc="The stream's packed replay input: one row per (state bucket, pack of a task's input), the "
    "bucket's replay-input rows as one Arrow IPC message; ``state_bucket`` is Spark's "
    "``pmod(xxhash64(group_id), 256)``, ``log_timestamp`` the newest record's time.",
    columns=(Column("state_bucket", "bigint"), Column("log_timestamp", "timestamp"), Column("records", "binary")),
)

STREAM_STATE = TableSpec(
    name="stream_state",
    doc="A state bucket's row in the stream's state store: its layout version and its groups "
    "(group id -> the core's snapshot format, the snapshot and timer, pickled; the snapshot is "
    "the core's plain values, or an earlier release's bytes; neither layout changes when the core "
    "evolves: the core reads older formats).",
    columns=(Column("layout", "int"), Column("groups", "binary")),
)

STREAM_OUTPUT = TableSpec(
    name="stream_output",
    doc="What the stream's stateful function emits per state-bucket call: its groups' changed gold "
    "rows, Arrow IPC bytes per table, pickled.",
    columns=(Column("records", "binary"),),
)

SHAPES = [
    REPLAY_INPUT,
    DECODE_UNION,
    DECODE_FAST,
    POSITION_RANGES,
    CLOCK_STAIRS,
    STREAM_PACK,
    STREAM_STATE,
    STREAM_OUTPUT,
]
