"""Gold tables: what the per-group replay (``coordinator_core.loader.replay``) says about each group.

Rules:
- Columns are the keys of the core's rows (``GroupSnapshot.to_state_row()`` /
  ``offset_rows()`` and each event's ``to_row()``, documented in ``coordinator_core.events``)
  with Kafka's field names. The only change is the type of time points: the core's epoch-ms
  ints become TIMESTAMP columns (UTC) named by one rule, applied by ``pipelines.records.gold``:
  ``X_timestamp`` keeps its name (commit_timestamp, expire_timestamp,
  current_state_timestamp), ``timestamp_ms`` -> ``timestamp``, ``X_timestamp_ms`` ->
  ``X_timestamp``, other ``X_ms`` -> ``X_time``. Durations (``duration_ms``, ``cadence_ms``,
  ``since_previous_ms``) stay bigint milliseconds.
- Log positions are ``log_partition`` / ``log_offset`` (the ``__consumer_offsets`` record
  that told it); ``partition`` / ``offset`` are the committed topic-partition and offset.
- ``group_state`` and ``offsets_current`` are current-state tables (MERGE on their key);
  event tables are keyed by ``(group_id, event_key)``, deterministic across batch splits, so
  re-delivered events MERGE idempotently (batch and streaming write the same rows).
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

TOPIC_PARTITIONS = "array<struct<topic:string,partition:int>>"
MEMBER_PARTITIONS = "array<struct<member_id:string,topic:string,partition:int>>"
STREAMS_TASKS = "array<struct<role:string,subtopology_id:string,partition:int>>"
STATE_MEMBER_TYPE = (
    "struct<member_id:string,group_instance_id:string,client_id:string,client_host:string,"
    "session_timeout:int,rebalance_timeout:int,is_leader:boolean,"
    f"subscribed_topics:array<string>,assigned_partitions:{TOPIC_PARTITIONS}>"
)

_GROUP = Column("group_id", "string", False, "Consumer group id.")
_EVENT_KEY = Column(
    "event_key",
    "string",
    False,
    "Deterministic event id within the group (`<partition>:<offset>[:<seq>]` for events told by a "
    "record, computed time for predictions); MERGE key with group_id.",
)
#: the kind of group a row is about; appended last to every gold table (a column added to
#: existing warehouses: ``TableIO.ensure`` adds it, older rows read null)
_GROUP_TYPE = Column(
    "group_type",
    "string",
    True,
    "Kind of group: classic (JoinGroup/SyncGroup, or only offsets: a simple group), consumer (KIP-848, "
    "group.protocol=consumer), share (KIP-932) or streams (KIP-1071); for an event, the kind of group the "
    "record that told it belongs to (offset records and forecasts: the group's kind at that moment).",
)
_LOG_POS = (
    Column(
        "log_partition",
        "int",
        True,
        "`__consumer_offsets` partition of the record that told it (null for predictions).",
    ),
    Column("log_offset", "bigint", True, "Offset of that record (null for predictions)."),
)

#: appended last (``TableIO.ensure`` adds them to existing warehouses; older rows read null)
_FORECAST_STATE = (
    Column(
        "offsets_due",
        "int",
        True,
        "Offsets held whose removal the rules forecast and the broker's cleanup may not have run yet "
        "(their window has not passed): still committed, still returned by OffsetFetch.",
    ),
    Column(
        "death_forecast_from_time",
        "timestamp",
        True,
        "A group that still exists but is due to be deleted (its offsets expired or none left): the "
        "earliest time of the broker's cleanup that deletes it (null: no deletion due).",
    ),
    Column(
        "death_forecast_to_time",
        "timestamp",
        True,
        "The latest time of that cleanup (`death_forecast_from_time` + cleanup_interval_ms).",
    ),
)
_FORECAST_EVENT = (
    Column("confirmed", "boolean", True, "A tombstone in the log attests it (status observed or confirmed)."),
    Column(
        "forecast_from_time",
        "timestamp",
        True,
        "A forecast's window: the broker's next cleanup of the group's partition removes it between this "
        "time (when it fell due) and `forecast_to_time` (null when confirmed).",
    ),
    Column("forecast_to_time", "timestamp", True, "End of the forecast's window (due + cleanup_interval_ms)."),
)

GROUP_STATE = TableSpec(
    name="group_state",
    doc="Every group as of `as_of` (one row per group): what Kafka's loader holds after its "
    "records (latest value per key, tombstones delete). Due is not dead: what the rules have due is a "
    "forecast until a tombstone confirms it, removed from the view only once its cleanup window "
    "(due .. due + cleanup_interval_ms) has passed; until then the group keeps it (an Empty group whose "
    "offsets are due is Empty, `offsets_due` > 0, `death_forecast_*` its deletion's window). The "
    "forecasts are in offset_expirations/group_lifecycle with status predicted.",
    columns=(
        _GROUP,
        Column("coordinator_partition", "int", True, "`__consumer_offsets` partition holding the group."),
        Column(
            "state",
            "string",
            False,
            "Kafka state: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead (classic); Empty, "
            "Assigning, Reconciling, Stable (consumer); Empty, Stable (share); Empty, NotReady, Assigning, "
            "Reconciling, Stable (streams).",
        ),
        Column("exists", "boolean", True, "False for a group that was deleted (Dead) or never created."),
        Column("generation", "int", True, "Generation id."),
        Column("protocol_type", "string", True, "Protocol type (consumer, connect, ...); null = simple group."),
        Column("protocol", "string", True, "Selected protocol (assignor)."),
        Column("leader", "string", True, "Leader member id."),
        Column(
            "current_state_timestamp",
            "timestamp",
            True,
            "GroupMetadataValue.current_state_timestamp of the last group record.",
        ),
        Column(
            "state_timestamp", "timestamp", True, "When the group entered its current state (as far as the log tells)."
        ),
        Column("members", f"array<{STATE_MEMBER_TYPE}>", True, "Current members (same fields as group_members)."),
        Column("member_count", "int", True, "Number of current members."),
        Column("offset_count", "int", True, "Number of committed offsets held."),
        Column(
            "subscribed_topics",
            "array<string>",
            True,
            "Union of the members' subscribed topics (consumer protocol v0 parse); null when unknown.",
        ),
        Column("last_log_partition", "int", True, "Partition of the last record applied (idempotence watermark)."),
        Column(
            "last_log_offset", "bigint", True, "Offset of the last record applied; records at or below are duplicates."
        ),
        Column("last_timestamp", "timestamp", True, "Timestamp of the last record applied."),
        Column(
            "next_expiry_time", "timestamp", True, "When the next offset would expire under the rules (null = never)."
        ),
        Column("records_applied", "bigint", True, "Records replayed into this state."),
        Column(
            "unsupported_records", "bigint", True, "Records of this group skipped as unsupported (newer record types)."
        ),
        Column(
            "first_log_offset",
            "bigint",
            True,
            "Offset of the group's first record in the input: its history before that is unknown "
            "(a compacted capture keeps only each key's latest record).",
        ),
        Column(
            "predictions_contradicted",
            "bigint",
            True,
            "Offset expiries the rules predicted and the log contradicted (the broker's cleanup passed "
            "with no tombstone): a sign that replay.retention_ms or replay.rules differ from the broker's.",
        ),
        Column("format_version", "int", True, "Version of the snapshot format."),
        _GROUP_TYPE,
        *_FORECAST_STATE,
        Column(
            "offsets_kept_in",
            "string",
            True,
            "Where the group's consumption positions live: __consumer_offsets (its committed offsets: "
            "offsets_current, offset_expirations, lag), or __share_group_state for a share group (KIP-932: "
            "it commits nothing to __consumer_offsets, so it has no offset, expiry or lag rows here, and it "
            "never expires).",
        ),
    ),
    primary_key=("group_id",),
    mode="merge",
)

GROUP_TRANSITIONS = TableSpec(
    name="group_transitions",
    doc="Every state change of every group, observed in the log or inferred between two "
    "records (flagged), with time, time source and cause.",
    columns=(
        _GROUP,
        _EVENT_KEY,
        Column("from_state", "string", True, "State before; null when the group is created."),
        Column("to_state", "string", False, "State after."),
        Column("generation", "int", True, "Generation during/after the transition."),
        Column("timestamp", "timestamp", True, "When; null when unknown (skipped generations)."),
        Column(
            "timestamp_source", "string", True, "record | current_state_timestamp | estimate | predicted | unknown."
        ),
        Column("observed", "boolean", True, "True when the log attests it, false when inferred."),
        Column(
            "cause", "string", True, "Why (rebalance_started, join_completed, sync_completed, all_members_left, ...)."
        ),
        *_LOG_POS,
        # the window of an inferred rebalance start (issue 17): the log does not store it
        Column(
            "timestamp_earliest",
            "timestamp",
            True,
            "Inferred rebalance start: earliest time Kafka's rules allow (null: no bound the log shows).",
        ),
        Column("timestamp_latest", "timestamp", True, "Inferred rebalance start: latest time Kafka's rules allow."),
        Column(
            "estimate_method",
            "string",
            True,
            "How the estimated timestamp was chosen inside the window (initial_delay, initial_delay_rearmed, "
            "departed_last_commit, departed_session_timeout, members_rejoin).",
        ),
        _GROUP_TYPE,
    ),
    primary_key=("group_id", "event_key"),
    mode="merge",
)

REBALANCES = TableSpec(
    name="rebalances",
    doc="One row per generation change (and per same-generation static-member rewrite): "
    "estimated start/end, members in/out, partitions moved, assignor and leader. A consumer group "
    "(KIP-848, group_type consumer): one row per group-epoch bump (generation = group epoch, protocol = "
    "the server assignor, no leader; it ends when the group is Stable at that epoch); a share group (KIP-932) "
    "or streams group (KIP-1071) the same (protocol = the broker's assignor; a share rebalance ends when every "
    "member took the new epoch's assignment; a streams rebalance counts active tasks moved, the subtopology id "
    "in partitions_gained/lost's topic).",
    columns=(
        _GROUP,
        _EVENT_KEY,
        Column("generation", "int", True, "The new generation."),
        Column("previous_generation", "int", True, "Generation before (null on the first record)."),
        Column("skipped_generations", "int", True, "Generations that never completed a SyncGroup."),
        Column(
            "start_time", "timestamp", True, "Estimated start of the rebalance (inside [start_earliest, start_latest])."
        ),
        Column("end_time", "timestamp", True, "End: the group-metadata record's timestamp."),
        Column("duration_ms", "bigint", True, "end - start in milliseconds."),
        Column("join_completed_time", "timestamp", True, "When the group entered CompletingRebalance (v2+ records)."),
        Column("since_previous_ms", "bigint", True, "Milliseconds since the previous group-metadata record."),
        Column("members_before", "int", True, "Members before."),
        Column("members_after", "int", True, "Members after."),
        Column("joined", "array<string>", True, "Members that joined (group_instance_id if set, else member_id)."),
        Column("left", "array<string>", True, "Members that left."),
        Column(
            "static_rejoined", "array<string>", True, "Static members (group_instance_id) back with a new member id."
        ),
        Column("leader", "string", True, "Leader member id after."),
        Column("previous_leader", "string", True, "Leader member id before."),
        Column("leader_changed", "boolean", True, "Leader differs."),
        Column("protocol_type", "string", True, "Protocol type."),
        Column("protocol", "string", True, "Assignor after (range, cooperative-sticky, ...)."),
        Column("previous_protocol", "string", True, "Assignor before."),
        Column("protocol_changed", "boolean", True, "Assignor differs."),
        Column("assignment_known", "boolean", True, "All assignments before and after were parsed."),
        Column("partitions_moved", "int", True, "Partitions owned before and after by a different member."),
        Column("partitions_gained", MEMBER_PARTITIONS, True, "Partitions gained, per member."),
        Column("partitions_lost", MEMBER_PARTITIONS, True, "Partitions lost, per member."),
        Column("ended_empty", "boolean", True, "The rebalance ended with no members."),
        Column("cause", "string", True, "new_generation | ended_empty | static_member_rejoined | first_record."),
        *_LOG_POS,
        # the start is inferred: the window it must lie in, and how start_time was estimated (issue 17)
        Column(
            "start_earliest_time",
            "timestamp",
            True,
            "Earliest start Kafka's rules allow (null: no bound the log shows, or the start is not inferred).",
        ),
        Column("start_latest_time", "timestamp", True, "Latest start Kafka's rules allow (null: not inferred)."),
        Column("start_method", "string", True, "How start_time was estimated inside the window (null: not inferred)."),
        Column("duration_min_ms", "bigint", True, "end - start_latest: the shortest duration the window allows."),
        Column("duration_max_ms", "bigint", True, "end - start_earliest: the longest duration (null: unbounded)."),
        _GROUP_TYPE,
    ),
    primary_key=("group_id", "event_key"),
    mode="merge",
)

GROUP_MEMBERS = TableSpec(
    name="group_members",
    doc="Members per generation: one row per member per group-metadata record with members; a consumer "
    "group's (KIP-848) members each time it is Stable at a new group epoch (generation = member epoch), "
    "with their assigned and pending-revocation partitions; a share group's (KIP-932) each time every member "
    "took the new epoch's assignment; a streams group's (KIP-1071) each time it is Stable at a new epoch, with "
    "their process ids and tasks.",
    columns=(
        _GROUP,
        _EVENT_KEY,
        Column("generation", "int", True, "Generation id."),
        Column("member_id", "string", False, "Member id."),
        Column("group_instance_id", "string", True, "Static membership id (KIP-345); null = dynamic member."),
        Column("client_id", "string", True, "Client id."),
        Column("client_host", "string", True, "Client host."),
        Column("session_timeout", "int", True, "Session timeout (ms)."),
        Column(
            "rebalance_timeout", "int", True, "Kafka's effective rebalance timeout (ms; session timeout when absent)."
        ),
        Column("is_leader", "boolean", True, "The member is the group leader."),
        Column("protocol", "string", True, "Assignor of the generation."),
        Column(
            "subscribed_topics",
            "array<string>",
            True,
            "Subscribed topics (null when the subscription cannot be parsed).",
        ),
        Column(
            "assigned_partitions",
            TOPIC_PARTITIONS,
            True,
            "Assigned partitions (null when unparseable). A Kafka 4.1+ consumer group's assignments carry "
            "topic ids: the topic is named by a record that names its id (an offset commit's TopicId, a "
            "PartitionMetadata record) or by elimination (the one id of the current epoch's target "
            "assignment no record names is the one subscribed topic no named id carries), else the id is shown.",
        ),
        Column("timestamp", "timestamp", True, "Timestamp of the group-metadata record."),
        *_LOG_POS,
        _GROUP_TYPE,
        Column(
            "member_epoch",
            "int",
            True,
            "Consumer-group member (KIP-848): its member epoch (= generation of the row); null for classic members.",
        ),
        Column(
            "member_state",
            "string",
            True,
            "Consumer-group member: its MemberState (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS, "
            "UNKNOWN); null for classic members.",
        ),
        Column(
            "pending_revocation_partitions",
            TOPIC_PARTITIONS,
            True,
            "Consumer-group member: partitions it still has to revoke (topic name, or topic id when no record "
            "named it); null for classic members.",
        ),
        Column(
            "process_id",
            "string",
            True,
            "Streams-group member (KIP-1071): the Kafka Streams process (client instance) it runs in; null for "
            "other members.",
        ),
        Column(
            "assigned_tasks",
            STREAMS_TASKS,
            True,
            "Streams-group member: its tasks, role active, standby or warmup (its assigned_partitions is null: "
            "streams members own tasks); null for other members.",
        ),
        Column(
            "pending_revocation_tasks",
            STREAMS_TASKS,
            True,
            "Streams-group member: tasks it still has to revoke; null for other members.",
        ),
    ),
    primary_key=("group_id", "event_key"),
    mode="merge",
)

OFFSETS_CURRENT = TableSpec(
    name="offsets_current",
    doc="Latest committed offset per (group, topic, partition) after replay and expiry up to `as_of`.",
    columns=(
        _GROUP,
        Column("topic", "string", False, "Committed topic."),
        Column("partition", "int", False, "Committed partition."),
        Column("offset", "bigint", True, "Committed offset (OffsetCommitValue.offset)."),
        Column("leader_epoch", "int", True, "Leader epoch (null when absent/-1)."),
        Column("metadata", "string", True, "Commit metadata."),
        Column("commit_timestamp", "timestamp", True, "Commit time (OffsetCommitValue.commit_timestamp)."),
        Column("expire_timestamp", "timestamp", True, "Explicit expiry (v1 values) or null."),
        Column("value_version", "int", True, "OffsetCommitValue version of the commit."),
        *_LOG_POS,
        Column("timestamp", "timestamp", True, "Timestamp of the commit record."),
        _GROUP_TYPE,
        Column(
            "transactional_producer_id",
            "bigint",
            True,
            "Producer id of the transaction (TxnOffsetCommit, KIP-98) whose COMMIT marker made this offset; "
            "null for a plain commit. Only broker segments carry it (other inputs: always null).",
        ),
    ),
    primary_key=("group_id", "topic", "partition"),
    mode="merge",
)

OFFSET_EXPIRATIONS = TableSpec(
    name="offset_expirations",
    doc="Offsets removed: observed (a tombstone in the log), confirmed (the tombstone of a removal "
    "the rules predicted), predicted (a forecast: due by `as_of`, its cleanup not yet past the end of "
    "the log). A prediction the log contradicts (the cleanup passed with no tombstone) is never a row.",
    columns=(
        _GROUP,
        _EVENT_KEY,
        Column("topic", "string", False, "Topic of the removed offset."),
        Column("partition", "int", False, "Partition of the removed offset."),
        Column("offset", "bigint", True, "The removed committed offset."),
        Column("commit_timestamp", "timestamp", True, "Commit time of the removed commit."),
        Column("cause", "string", True, "retention | tombstone | group_deleted."),
        Column(
            "status",
            "string",
            True,
            "observed | confirmed (the tombstone of a predicted removal) | predicted (a forecast at as_of, "
            "with its window; the offset stays in offsets_current until the window has passed).",
        ),
        Column(
            "predicted_time",
            "timestamp",
            True,
            "When the rules make it due (base + retention, or expire_timestamp; not before the group "
            "entered its current state); the broker's next cleanup (within cleanup_interval_ms) removes it.",
        ),
        Column("observed_time", "timestamp", True, "Timestamp of the tombstone in the log."),
        Column("rules", "string", True, "Expiry rule set used for the prediction."),
        *_LOG_POS,
        _GROUP_TYPE,
        *_FORECAST_EVENT,
    ),
    primary_key=("group_id", "event_key"),
    mode="merge",
)

GROUP_LIFECYCLE = TableSpec(
    name="group_lifecycle",
    doc="Groups created, emptied (all members left) and deleted (Dead), observed or predicted.",
    columns=(
        _GROUP,
        _EVENT_KEY,
        Column("event", "string", False, "group_created | group_emptied | group_deleted."),
        Column("generation", "int", True, "Generation at the event."),
        Column("timestamp", "timestamp", True, "When (computed time for predictions)."),
        Column("observed", "boolean", True, "The log attests it."),
        Column(
            "status",
            "string",
            True,
            "observed | confirmed (the tombstone of a predicted deletion) | predicted (a forecast at as_of) | "
            "unknown (a creation compaction removed: the group existed, its creation is not in the log).",
        ),
        Column(
            "cause",
            "string",
            True,
            "offset_commit, group_metadata, all_members_left, group_tombstone, offsets_expired.",
        ),
        Column("predicted_time", "timestamp", True, "Predicted death time."),
        Column("observed_time", "timestamp", True, "Time of the group tombstone in the log."),
        Column("group_tombstone", "boolean", True, "A group tombstone was observed / Kafka would write one."),
        Column("offsets_remaining", "int", True, "Offsets still held (a group tombstone does not delete offsets)."),
        *_LOG_POS,
        _GROUP_TYPE,
        *_FORECAST_EVENT,
    ),
    primary_key=("group_id", "event_key"),
    mode="merge",
)

OFFSET_COMMITS_REPLAYED = TableSpec(
    name="offset_commits_replayed",
    doc="Every offset commit as the replay applied it, with the offset it replaced (cadence, "
    "delta, regressions). As large as the log: written only when asked for.",
    columns=(
        _GROUP,
        _EVENT_KEY,
        Column("topic", "string", False, "Committed topic."),
        Column("partition", "int", False, "Committed partition."),
        Column("offset", "bigint", True, "Committed offset."),
        Column("leader_epoch", "int", True, "Leader epoch."),
        Column("metadata", "string", True, "Commit metadata."),
        Column("commit_timestamp", "timestamp", True, "Commit time."),
        Column("expire_timestamp", "timestamp", True, "Explicit expiry (v1) or null."),
        Column("previous_offset", "bigint", True, "Offset this commit replaced."),
        Column("previous_commit_timestamp", "timestamp", True, "Commit time of the replaced commit."),
        Column("cadence_ms", "bigint", True, "commit_timestamp - previous_commit_timestamp (ms)."),
        Column("offset_delta", "bigint", True, "offset - previous_offset."),
        Column("regression", "boolean", True, "The new offset is lower than the previous one."),
        Column("timestamp", "timestamp", True, "Record timestamp."),
        *_LOG_POS,
        _GROUP_TYPE,
    ),
    primary_key=("group_id", "event_key"),
    mode="merge",
)

#: The gold tables the batch replay writes by default, in write order.
GOLD_TABLES = (
    GROUP_STATE,
    GROUP_TRANSITIONS,
    REBALANCES,
    GROUP_MEMBERS,
    OFFSETS_CURRENT,
    OFFSET_EXPIRATIONS,
    GROUP_LIFECYCLE,
)

TABLES = [*GOLD_TABLES, OFFSET_COMMITS_REPLAYED]
