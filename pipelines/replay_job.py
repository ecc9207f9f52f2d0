"""Per-group replay of the decoded tables into the gold tables (batch: a full rebuild).

Rules:
- All records of a group live in one ``__consumer_offsets`` partition, so grouping by
  ``group_id`` and sorting by (coordinator_partition, log_offset) gives the total order the
  core replay needs (DESIGN §1).
- Per-group replay two ways, same rows: ``groupBy("group_id").applyInArrow`` (Spark 4's
  Arrow-native twin of ``applyInPandas``: one Python call per group), or (default, faster)
  ``repartition(group_id)`` + ``sortWithinPartitions(group_id, partition, offset)`` +
  ``mapInArrow`` replaying every group of a batch in turn. Either way the Python side rebuilds
  ``LogRecord``s from the decoded columns, calls ``coordinator_core.replay.replay`` once per
  group and converts the snapshot and events with ``pipelines.gold`` — it never re-implements
  a core rule.
- One long-format output (``gold_table`` code + the union of the gold columns) is split into
  one DataFrame per gold table.
- ``as_of_ms`` defaults to the largest record timestamp of the input (deterministic: the same
  input gives the same gold rows whenever it runs). Expiry runs only with ``retention_ms``.
- Unsupported records (newer record types of the group, unknown value versions) can be passed
  so the snapshot counts them exactly like the pure core does; they are decoded by the core
  codec from their raw bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from coordinator_core.events import TABLE_BY_KIND
from pipelines.gold import DEFAULT_TABLES, GOLD_SPECS, GOLD_UNION_SCHEMA, UNION_CODES, rows_to_arrow, to_union

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from coordinator_core.records import LogRecord
    from coordinator_core.replay import ReplayResult

# record kinds in the replay input
REC_OFFSET_COMMIT = 0
REC_GROUP_METADATA = 1
REC_UNSUPPORTED = 2

# Tables that come from the snapshot rather than from events.
SNAPSHOT_TABLES = ("group_state", "offsets_current")
KINDS_BY_TABLE: dict[str, str] = {table: kind for kind, table in TABLE_BY_KIND.items()}

REPLAY_MEMBER_DDL = (
    "array<struct<member_id:string,group_instance_id:string,client_id:string,client_host:string,"
    "rebalance_timeout:int,session_timeout:int,subscription:binary,assignment:binary>>"
)

# The replay input: one row per record of any kind (columns of the other kinds null).
REPLAY_INPUT_DDL: tuple[tuple[str, str], ...] = (
    ("group_id", "string"),
    ("coordinator_partition", "int"),
    ("log_offset", "bigint"),
    ("log_timestamp_ms", "bigint"),
    ("rec_kind", "tinyint"),
    ("key_version", "int"),
    ("is_tombstone", "boolean"),
    ("value_version", "int"),
    ("topic", "string"),
    ("partition", "int"),
    ("committed_offset", "bigint"),
    ("leader_epoch", "int"),
    ("metadata", "string"),
    ("commit_timestamp_ms", "bigint"),
    ("expire_timestamp_ms", "bigint"),
    ("protocol_type", "string"),
    ("generation", "int"),
    ("protocol", "string"),
    ("leader", "string"),
    ("current_state_timestamp_ms", "bigint"),
    ("members", REPLAY_MEMBER_DDL),
    ("raw_key", "binary"),
    ("raw_value", "binary"),
)


# =============================================================================================
# Pure part (no Spark): Arrow rows of one group -> LogRecords -> core replay -> gold rows
# =============================================================================================
def records_from_arrow(table: pa.Table) -> list[LogRecord]:
    """Rebuild the core's ``LogRecord``s from replay-input rows, in the table's row order.

    Offset commits and group metadata are rebuilt from their decoded columns (the decode
    proved them equal to the core codec's values); unsupported records are decoded by the core
    codec from their raw bytes.
    """
    from coordinator_core.codec import decode_record
    from coordinator_core.records import (
        GroupMetadataKey,
        GroupMetadataValue,
        LogRecord,
        MemberMetadata,
        OffsetCommitKey,
        OffsetCommitValue,
    )
    from coordinator_core.wire import fast_constructor

    def col(name: str) -> list[Any]:
        return list(table.column(name).to_pylist())

    kinds = col("rec_kind")
    group = col("group_id")
    part = col("coordinator_partition")
    off = col("log_offset")
    ts = col("log_timestamp_ms")
    kver = col("key_version")
    tomb = col("is_tombstone")
    vver = col("value_version")
    has_oc = REC_OFFSET_COMMIT in kinds
    has_other = any(k != REC_OFFSET_COMMIT for k in kinds)
    if has_oc:
        topic, partition, coff, epoch, meta, cts, ets = (
            col(n) for n in ("topic", "partition", "committed_offset", "leader_epoch", "metadata",
                             "commit_timestamp_ms", "expire_timestamp_ms")
        )
    if has_other:
        ptype, gen, proto, leader, csts, members, rkey, rval = (
            col(n) for n in ("protocol_type", "generation", "protocol", "leader", "current_state_timestamp_ms",
                             "members", "raw_key", "raw_value")
        )
    keys: dict[tuple[Any, ...], OffsetCommitKey] = {}
    out: list[LogRecord] = []
    append = out.append
    # slot-filling constructors of the core (``coordinator_core.wire.fast_constructor``): the same
    # frozen dataclasses, about half the construction cost of their ``__init__``
    new_value = fast_constructor(OffsetCommitValue)
    new_log = fast_constructor(LogRecord)
    for i, kind in enumerate(kinds):
        if kind == REC_OFFSET_COMMIT:
            kk = (group[i], topic[i], partition[i], kver[i])
            key = keys.get(kk)
            if key is None:
                key = keys[kk] = OffsetCommitKey(group[i], topic[i], partition[i], kver[i])
            value: Any = None
            if not tomb[i]:
                value = new_value((coff[i], meta[i], cts[i], epoch[i], ets[i], vver[i], ()))
            append(new_log((part[i], off[i], ts[i], key, value)))
        elif kind == REC_GROUP_METADATA:
            gvalue = None
            if not tomb[i]:
                gvalue = GroupMetadataValue(
                    protocol_type=ptype[i],
                    generation=gen[i],
                    protocol=proto[i],
                    leader=leader[i],
                    members=tuple(
                        MemberMetadata(
                            member_id=m["member_id"],
                            client_id=m["client_id"],
                            client_host=m["client_host"],
                            session_timeout=m["session_timeout"],
                            subscription=m["subscription"],
                            assignment=m["assignment"],
                            rebalance_timeout=m["rebalance_timeout"],
                            group_instance_id=m["group_instance_id"],
                        )
                        for m in (members[i] or ())
                    ),
                    current_state_timestamp=csts[i],
                    version=vver[i],
                )
            append(LogRecord(part[i], off[i], ts[i], GroupMetadataKey(group[i], kver[i]), gvalue))
        else:
            rec = decode_record(rkey[i], rval[i])
            append(LogRecord(part[i], off[i], ts[i], rec.key, rec.value))
    return out


def event_kinds_for(tables: Iterable[str]) -> tuple[str, ...]:
    """The core event kinds needed to produce ``tables`` (fewer kinds = faster replay)."""
    return tuple(sorted(KINDS_BY_TABLE[t] for t in tables if t in KINDS_BY_TABLE))


def gold_rows(
    result: ReplayResult,
    *,
    tables: Sequence[str] = DEFAULT_TABLES,
    retention_ms: int | None = None,
    rules: str = "current",
    num_partitions: int = 50,
) -> dict[str, list[dict[str, Any]]]:
    """The core's rows of one replayed group, by gold table.

    Event rows are keyed by ``(group_id, event_key)`` and the core's contract is that a later
    event with the same key replaces the earlier one (a predicted expiry later confirmed by the
    log's tombstone, an offset tombstone re-emitted as ``group_deleted``). The streaming job gets
    that from its MERGE; here the last row per key is kept, so batch and stream write the same
    rows and the tables never hold two rows for one key.
    """
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    snap = result.snapshot
    if "group_state" in rows:
        rows["group_state"].append(
            snap.to_state_row(retention_ms=retention_ms, rules=rules, num_partitions=num_partitions)
        )
    if "offsets_current" in rows:
        rows["offsets_current"].extend(snap.offset_rows())
    keyed: dict[str, dict[str, dict[str, Any]]] = {}
    for event in result.events:
        if event.table not in rows:
            continue
        row = event.to_row()
        bucket = keyed.setdefault(event.table, {})
        bucket.pop(row["event_key"], None)  # re-insert: the later row wins and keeps log order
        bucket[row["event_key"]] = row
    for table, by_key in keyed.items():
        rows[table].extend(by_key.values())
    return rows


def _replay_one(
    group_id: str,
    records: list[LogRecord],
    *,
    retention_ms: int | None,
    rules: str,
    as_of_ms: int | None,
    tables: Sequence[str],
    num_partitions: int,
    kinds: tuple[str, ...],
    out: dict[str, list[dict[str, Any]]],
    coordinator: str = "old",
) -> None:
    from coordinator_core.replay import new_snapshot, replay

    result = replay(
        new_snapshot(group_id), records, retention_ms=retention_ms, rules=rules, as_of_ms=as_of_ms,
        event_kinds=kinds, coordinator=coordinator,
    )
    for name, rows in gold_rows(
        result, tables=tables, retention_ms=retention_ms, rules=rules, num_partitions=num_partitions
    ).items():
        out[name].extend(rows)


def _union_table(rows: dict[str, list[dict[str, Any]]]) -> pa.Table:
    parts = [to_union(name, rows_to_arrow(GOLD_SPECS[name], rs)) for name, rs in rows.items() if rs]
    return pa.concat_tables(parts) if parts else GOLD_UNION_SCHEMA.empty_table()


def replay_group_arrow(
    table: pa.Table,
    *,
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    tables: Sequence[str] = DEFAULT_TABLES,
    num_partitions: int = 50,
    coordinator: str = "old",
) -> pa.Table:
    """The grouped function (``applyInArrow``): one group's rows -> gold rows (union schema)."""
    if table.num_rows == 0:
        return GOLD_UNION_SCHEMA.empty_table()
    order = pc.sort_indices(table, [("coordinator_partition", "ascending"), ("log_offset", "ascending")])
    table = table.take(order)
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    _replay_one(
        table.column("group_id")[0].as_py(), records_from_arrow(table), retention_ms=retention_ms, rules=rules,
        as_of_ms=as_of_ms, tables=tables, num_partitions=num_partitions, kinds=event_kinds_for(tables), out=out,
        coordinator=coordinator,
    )
    return _union_table(out)


def replay_sorted_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    tables: Sequence[str] = DEFAULT_TABLES,
    num_partitions: int = 50,
    coordinator: str = "old",
) -> Iterator[pa.Table]:
    """Replay rows sorted by (group_id, coordinator_partition, log_offset), many groups per batch.

    The ``mapInArrow`` twin of ``replay_group_arrow``: a group's rows are contiguous (they may
    span batches; the tail group of a batch is carried into the next), each group is replayed
    once with exactly the same call, and the gold rows of all groups completed in a batch are
    converted together (per-group Arrow conversion would cost more than the replay).
    """
    kinds = event_kinds_for(tables)
    carry_gid: str | None = None
    carry: list[LogRecord] = []
    opts = {"retention_ms": retention_ms, "rules": rules, "as_of_ms": as_of_ms, "tables": tables,
            "num_partitions": num_partitions, "kinds": kinds, "coordinator": coordinator}
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        records = records_from_arrow(table)
        gids = table.column("group_id").to_pylist()
        out: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
        start = 0
        n = len(gids)
        while start < n:
            gid = gids[start]
            end = start + 1
            while end < n and gids[end] == gid:
                end += 1
            if gid == carry_gid:
                carry.extend(records[start:end])
            else:
                if carry_gid is not None:
                    _replay_one(carry_gid, carry, out=out, **opts)  # type: ignore[arg-type]
                carry_gid, carry = gid, records[start:end]
            start = end
        if any(out.values()):
            yield _union_table(out)
    if carry_gid is not None:
        out = {t: [] for t in tables}
        _replay_one(carry_gid, carry, out=out, **opts)  # type: ignore[arg-type]
        yield _union_table(out)


# =============================================================================================
# Spark
# =============================================================================================
def _ms(col: str) -> Any:
    from pyspark.sql import functions as F

    return F.unix_millis(F.col(col))


def replay_input(
    offset_commits_df: DataFrame,
    group_metadata_df: DataFrame,
    unsupported_df: DataFrame | None = None,
) -> DataFrame:
    """The decoded tables as one replay-input DataFrame (``REPLAY_INPUT_DDL`` columns)."""
    from pyspark.sql import functions as F

    def shape(df: DataFrame, exprs: dict[str, Any]) -> DataFrame:
        return df.select(*[
            (exprs[name] if name in exprs else F.lit(None)).cast(ddl).alias(name) for name, ddl in REPLAY_INPUT_DDL
        ])

    common = {
        "group_id": F.col("group_id"),
        "coordinator_partition": F.col("coordinator_partition"),
        "log_offset": F.col("log_offset"),
        "log_timestamp_ms": _ms("log_timestamp"),
        "key_version": F.col("key_version"),
        "is_tombstone": F.col("is_tombstone"),
        "value_version": F.col("value_version"),
    }
    oc = shape(offset_commits_df, {
        **common,
        "rec_kind": F.lit(REC_OFFSET_COMMIT),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "committed_offset": F.col("committed_offset"),
        "leader_epoch": F.col("leader_epoch"),
        "metadata": F.col("metadata"),
        "commit_timestamp_ms": _ms("commit_timestamp"),
        "expire_timestamp_ms": _ms("expire_timestamp"),
    })
    member_fields = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout",
                     "session_timeout", "subscription", "assignment")
    gm = shape(group_metadata_df, {
        **common,
        "rec_kind": F.lit(REC_GROUP_METADATA),
        "protocol_type": F.col("protocol_type"),
        "generation": F.col("generation"),
        "protocol": F.col("protocol"),
        "leader": F.col("leader"),
        "current_state_timestamp_ms": _ms("current_state_timestamp"),
        "members": F.transform("members", lambda m: F.struct(*[m[f].alias(f) for f in member_fields])),
    })
    out = oc.unionByName(gm)
    if unsupported_df is not None:
        un = shape(unsupported_df.where(F.col("group_id").isNotNull()), {
            "group_id": F.col("group_id"),
            "coordinator_partition": F.col("partition"),
            "log_offset": F.col("offset"),
            "log_timestamp_ms": _ms("timestamp"),
            "rec_kind": F.lit(REC_UNSUPPORTED),
            "key_version": F.col("record_type"),
            "raw_key": F.col("key"),
            "raw_value": F.col("value"),
        })
        out = out.unionByName(un)
    return out


def max_timestamp_ms(df: DataFrame, column: str = "log_timestamp_ms") -> int | None:
    """Largest value of an epoch-ms column (the deterministic default ``as_of_ms``)."""
    from pyspark.sql import functions as F

    row = df.agg(F.max(column).alias("m")).collect()[0]
    return None if row["m"] is None else int(row["m"])


def gold_union_spark_schema() -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(GOLD_UNION_SCHEMA)


def split_gold(union: DataFrame, tables: Iterable[str] = DEFAULT_TABLES) -> dict[str, DataFrame]:
    """Project the long-format replay output into one DataFrame per gold table."""
    from pyspark.sql import functions as F

    out = {}
    for name in tables:
        spec = GOLD_SPECS[name]
        out[name] = union.where(F.col("gold_table") == UNION_CODES[name]).select(*spec.column_names)
    return out


def replay_to_gold(
    offset_commits_df: DataFrame,
    group_metadata_df: DataFrame,
    *,
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    unsupported_df: DataFrame | None = None,
    tables: Sequence[str] = DEFAULT_TABLES,
    num_partitions: int = 50,
    persist: bool = True,
    on_as_of: Callable[[int | None], None] | None = None,
    method: str = "sorted",
    coordinator: str = "old",
) -> dict[str, DataFrame]:
    """Replay every group of the decoded tables and return the gold DataFrames.

    Args:
        offset_commits_df: ``offset_commits`` rows (``schemas.decoded``).
        group_metadata_df: ``group_metadata`` rows.
        retention_ms: offset retention for predicted expiry (None: only what the log says).
        rules: expiry rule set (``coordinator_core.expiry.RULE_SETS``).
        coordinator: whose group-deletion rule to predict (``old`` | ``new``, see
            ``coordinator_core.expiry.COORDINATORS``).
        as_of_ms: time to evaluate expiry at after the last record; default (with a
            retention) the largest record timestamp of the input.
        unsupported_df: ``unsupported_records`` rows, so group_state counts them like the core.
        tables: gold tables to produce (default: ``schemas.gold.GOLD_TABLES``; add
            ``offset_commits_replayed`` for one row per commit).
        num_partitions: ``offsets.topic.num.partitions`` (group_state.coordinator_partition).
        persist: persist the long-format output (MEMORY_AND_DISK) so writing the tables runs
            the replay once; the caller may ``unpersist()`` any returned DataFrame's source
            via ``result["_union"]``.
        on_as_of: called with the ``as_of_ms`` actually used (for the job's report).
        method: ``"sorted"`` (default): ``repartition(group_id)`` + ``sortWithinPartitions`` +
            ``mapInArrow`` replaying many groups per Arrow batch; ``"grouped"``:
            ``groupBy("group_id").applyInArrow`` (one Python call per group). Same rows; the
            sorted path avoids the per-group Arrow round trip (see bench/RESULTS.md).

    Returns:
        ``{table name: DataFrame}`` with the columns of ``schemas.gold``; key ``"_union"`` holds
        the long-format DataFrame they are projected from.
    """
    unknown = [t for t in tables if t not in GOLD_SPECS]
    if unknown:
        raise ValueError(f"unknown gold tables {unknown}; known: {sorted(GOLD_SPECS)}")
    inp = replay_input(offset_commits_df, group_metadata_df, unsupported_df)
    if as_of_ms is None and retention_ms is not None:
        as_of_ms = max_timestamp_ms(inp)
    if on_as_of is not None:
        on_as_of(as_of_ms)
    tables = tuple(tables)

    opts: dict[str, Any] = {"retention_ms": retention_ms, "rules": rules, "as_of_ms": as_of_ms,
                            "tables": tables, "num_partitions": num_partitions, "coordinator": coordinator}
    schema = gold_union_spark_schema()
    if method == "grouped":

        def grouped(table: pa.Table) -> pa.Table:
            return replay_group_arrow(table, **opts)

        union = inp.groupBy("group_id").applyInArrow(grouped, schema)
    elif method == "sorted":

        def sorted_map(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for table in replay_sorted_batches(batches, **opts):
                yield from table.to_batches()

        from pyspark.sql import functions as F

        n = int(inp.sparkSession.conf.get("spark.sql.shuffle.partitions") or 4)
        union = (
            inp.repartition(n, F.col("group_id"))
            .sortWithinPartitions("group_id", "coordinator_partition", "log_offset")
            .mapInArrow(sorted_map, schema)
        )
    else:
        raise ValueError(f"method must be 'sorted' or 'grouped', not {method!r}")
    if persist:
        from pyspark import StorageLevel

        union = union.persist(StorageLevel.MEMORY_AND_DISK)
    out = split_gold(union, tables)
    out["_union"] = union
    return out
