"""Analytics SQL views over the gold and decoded tables (``offsetlake sql`` sees them all).

Rules:
- ``VIEWS`` is the catalogue: ``(name, SQL, doc, required tables)``, registered in order (a view
  may use the views before it). ``register_analytics_views`` registers every view, always: a
  required table that does not exist yet (``partition_end_offsets`` before the first
  ``capture-end-offsets``) is registered as an EMPTY DataFrame with its declared schema, so a
  query never fails for a missing table, it returns no rows.
- One definition per view: ``view_sql`` (Spark SQL) is what Spark registers and what DuckDB runs
  after ``pipelines.analytics.transpile`` (``pipelines.analytics.duck``); ``view_closure`` (the
  views and tables a view reads, parsed from that SQL) registers only what a query needs.
- What counts as a rebalance: a ``rebalances`` row with ``cause`` in ``new_generation``,
  ``ended_empty`` or ``first_record`` (a generation change), and every row of a consumer group
  (``group_type`` consumer, KIP-848: a group-epoch bump; ``IS_REBALANCE_SQL``).
  ``static_member_rejoined`` rows are KIP-345 static members back with a new member id WITHOUT a
  rebalance: counted separately, as rebalances avoided. ``assignor_stickiness`` compares classic
  assignments only (a consumer group's members are told when it is Stable, not at the bump).
- Expiry rules are never re-implemented in SQL: ``offsets_at_risk`` computes each offset's due
  time with the core (``coordinator_core.expiry.offset_due_times``) in a grouped Arrow function
  over ``group_state`` + ``offsets_current``, relative to ``as_of`` = ``replay.as_of_ms`` when
  configured, else the last record time of the warehouse.
- Burrow statuses (``pipelines.analytics.burrow`` is the reference) are Spark SQL over
  ``collect_list`` windows with higher-order functions (``exists``/``forall``/``zip_with``), so
  they run over the full history (``partition_status``: at each commit) and at any time
  (``partition_status_at(spark, T)``; view ``partition_status_now`` at ``as_of``).
- Lag: ``consumer_lag`` attaches to every commit the latest ``partition_end_offsets`` sample of
  the topic-partition at or before the commit (an as-of join done as one sort: commits and
  samples unioned, ``last(..., true)`` over time). ``lag_offsets = max(log_end - offset, 0)``
  (a sample older than the commit can be behind it); ``lag_ms`` = ``sampled_at -
  committed_record_timestamp`` of the group's latest own sample at or before the commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.tableio import TableIO

REBALANCE_CAUSES = ("new_generation", "ended_empty", "first_record")
#: a consumer group's (KIP-848, ``group_type`` consumer) rows are group-epoch bumps: each is one
IS_REBALANCE_SQL = "(cause IN ('new_generation', 'ended_empty', 'first_record') OR group_type = 'consumer')"
_IS_REBALANCE = IS_REBALANCE_SQL


def _n(col: str) -> str:
    """Size of an array column, 0 when null (``size(null)`` is -1 or null depending on ANSI)."""
    return f"(CASE WHEN {col} IS NULL THEN 0 ELSE size({col}) END)"


@dataclass(frozen=True)
class View:
    """One analytics view."""

    name: str
    sql: str
    doc: str
    requires: tuple[str, ...]


def burrow_status_sql(win: str, now_ms: str, current_lag: str) -> str:
    """Spark SQL for Burrow's status of window ``win`` (array<struct<t,o,lag>> oldest first).

    Same rules as ``pipelines.analytics.burrow.evaluate``; ``now_ms`` / ``current_lag`` are SQL
    expressions (epoch ms of T, the lag at T).
    """
    pairs = f"zip_with(slice({win}, 2, size({win})), slice({win}, 1, greatest(size({win}) - 1, 0)), (b, a) -> {{}})"
    rewind = f"exists({pairs.format('b.o < a.o')}, x -> x)"
    not_decreasing = f"forall({pairs.format('b.lag >= a.lag')}, x -> x)"
    first_t = f"element_at({win}, 1).t"
    last_t = f"element_at({win}, -1).t"
    return (
        f"CASE WHEN {win} IS NULL OR size({win}) = 0 THEN 'UNKNOWN' "
        f"WHEN ({current_lag}) IS NULL OR exists({win}, x -> x.lag IS NULL) "
        f"THEN CASE WHEN {rewind} THEN 'REWIND' ELSE 'UNKNOWN' END "
        f"WHEN NOT (({current_lag}) > 0 AND forall({win}, x -> x.lag <> 0)) THEN 'OK' "
        f"WHEN {rewind} THEN 'REWIND' "
        f"WHEN ({now_ms}) - {last_t} > {last_t} - {first_t} THEN 'STOP' "
        f"WHEN forall({win}, x -> x.o = element_at({win}, 1).o) THEN 'STALL' "
        f"WHEN {not_decreasing} THEN 'WARN' "
        "ELSE 'OK' END"
    )


_WIN_STRUCT = "named_struct('t', unix_millis(commit_timestamp), 'lo', log_offset, 'o', offset, 'lag', lag_offsets)"


def _rebalances_per(unit: str) -> str:
    # a day is a DATE (of the session time zone, UTC); an hour stays the hour's start timestamp
    bucket = "CAST(end_time AS DATE)" if unit == "DAY" else f"date_trunc('{unit}', end_time)"
    return f"""
SELECT group_id, {bucket} AS {unit.lower()},
       count(*) AS rebalances,
       sum(duration_ms) AS total_duration_ms,
       CAST(avg(duration_ms) AS bigint) AS avg_duration_ms,
       max(duration_ms) AS max_duration_ms,
       round(coalesce(sum(duration_ms), 0) / 60000.0, 3) AS rebalance_minutes,
       sum(coalesce(partitions_moved, 0)) AS partitions_moved,
       sum({_n("joined")}) AS members_joined,
       sum({_n("`left`")}) AS members_left,
       count_if(ended_empty) AS ended_empty
FROM rebalances WHERE {_IS_REBALANCE}
GROUP BY group_id, {bucket}
"""


VIEWS: list[View] = [
    View(
        "rebalances_hourly",
        _rebalances_per("HOUR"),
        "Rebalances per group per hour (by end time): count, total/avg/max duration, rebalance "
        "minutes, partitions moved, members joined/left.",
        ("rebalances",),
    ),
    View(
        "rebalances_daily",
        _rebalances_per("DAY"),
        "Rebalances per group per day: same columns as rebalances_hourly.",
        ("rebalances",),
    ),
    View(
        "membership_churn",
        f"""
SELECT group_id, date_trunc('HOUR', end_time) AS hour,
       sum({_n("joined")}) AS joined, sum({_n("`left`")}) AS `left`,
       sum({_n("static_rejoined")}) AS static_rejoined,
       count_if({_IS_REBALANCE}) AS rebalances
FROM rebalances GROUP BY group_id, date_trunc('HOUR', end_time)
""",
        "Members joining and leaving per group per hour (identity = group_instance_id, else "
        "member_id), static rejoins and rebalances in the hour.",
        ("rebalances",),
    ),
    View(
        "member_lifetimes",
        """
WITH m AS (
  SELECT group_id, coalesce(group_instance_id, member_id) AS member, group_instance_id IS NOT NULL AS static,
         member_id, client_id, client_host, generation, timestamp
  FROM group_members),
seen AS (
  SELECT group_id, member, max(static) AS static, min(timestamp) AS first_seen, max(timestamp) AS last_seen,
         count(DISTINCT generation) AS generations, count(DISTINCT member_id) AS member_ids,
         max_by(client_id, timestamp) AS client_id, max_by(client_host, timestamp) AS client_host
  FROM m GROUP BY group_id, member),
gone AS (
  SELECT group_id, l.member AS member, end_time FROM rebalances LATERAL VIEW explode(`left`) l AS member),
cur AS (
  SELECT group_id, coalesce(c.group_instance_id, c.member_id) AS member
  FROM group_state LATERAL VIEW explode(members) x AS c)
SELECT s.group_id, s.member, s.static, s.client_id, s.client_host, s.first_seen, s.last_seen,
       min(g.end_time) AS left_time, s.generations, s.member_ids,
       (cur.member IS NOT NULL) AS current_member,
       unix_millis(coalesce(min(g.end_time), s.last_seen)) - unix_millis(s.first_seen) AS lifetime_ms
FROM seen s
LEFT JOIN gone g ON g.group_id = s.group_id AND g.member = s.member AND g.end_time >= s.last_seen
LEFT JOIN cur ON cur.group_id = s.group_id AND cur.member = s.member
GROUP BY s.group_id, s.member, s.static, s.client_id, s.client_host, s.first_seen, s.last_seen,
         s.generations, s.member_ids, cur.member
""",
        "Per member (identity = group_instance_id, else member_id): first/last seen in a "
        "generation, when it left, generations and member ids seen, lifetime (until it left, "
        "else until last seen) and whether it is a current member.",
        ("group_members", "rebalances", "group_state"),
    ),
    View(
        "static_membership",
        f"""
WITH s AS (
  SELECT group_id, count(DISTINCT group_instance_id) AS static_members,
         count(DISTINCT member_id) AS member_ids
  FROM group_members WHERE group_instance_id IS NOT NULL GROUP BY group_id),
r AS (
  SELECT group_id,
         count_if({_IS_REBALANCE}) AS rebalances,
         count_if(cause = 'static_member_rejoined') AS static_rejoins,
         sum(CASE WHEN cause = 'static_member_rejoined' THEN {_n("static_rejoined")} ELSE 0 END) AS members_rejoined,
         sum(CASE WHEN {_IS_REBALANCE} THEN {_n("static_rejoined")} ELSE 0 END) AS rejoined_in_rebalance
  FROM rebalances GROUP BY group_id)
SELECT s.group_id, s.static_members, s.member_ids, coalesce(r.rebalances, 0) AS rebalances,
       coalesce(r.static_rejoins, 0) AS static_rejoins_without_rebalance,
       coalesce(r.members_rejoined, 0) AS members_rejoined_without_rebalance,
       coalesce(r.rejoined_in_rebalance, 0) AS static_rejoins_in_rebalance,
       coalesce(r.static_rejoins, 0) AS rebalances_avoided,
       round(coalesce(r.static_rejoins, 0) / greatest(coalesce(r.static_rejoins, 0) + coalesce(r.rebalances, 0), 1), 3)
         AS avoided_fraction
FROM s LEFT JOIN r ON r.group_id = s.group_id
""",
        "Static membership (KIP-345) effectiveness per group with static members: rejoins "
        "without a rebalance (each is a rebalance a dynamic member would have caused), rejoins "
        "inside a rebalance, and the fraction avoided.",
        ("group_members", "rebalances"),
    ),
    View(
        "assignor_stickiness",
        f"""
WITH after AS (
  SELECT group_id, log_partition, log_offset, sum({_n("assigned_partitions")}) AS assigned_after
  FROM group_members GROUP BY group_id, log_partition, log_offset),
r AS (
  SELECT r.protocol, r.group_id, r.partitions_moved, a.assigned_after
  FROM rebalances r JOIN after a
    ON a.group_id = r.group_id AND a.log_partition = r.log_partition AND a.log_offset = r.log_offset
  WHERE r.cause = 'new_generation' AND r.assignment_known AND r.members_before > 0 AND r.protocol IS NOT NULL)
SELECT protocol, count(*) AS rebalances, count(DISTINCT group_id) AS groups,
       round(avg(partitions_moved), 3) AS avg_partitions_moved,
       sum(partitions_moved) AS partitions_moved, sum(assigned_after) AS partitions_assigned,
       round(1 - sum(partitions_moved) / greatest(sum(assigned_after), 1), 4) AS stickiness
FROM r GROUP BY protocol
""",
        "Per assignor: rebalances between two known assignments (members before > 0), "
        "partitions moved, and stickiness = 1 - moved / assigned after (1 = nothing moved).",
        ("rebalances", "group_members"),
    ),
    View(
        "analytics_commits",
        "",  # built in Python: offset_commits_replayed when written, else offset_commits
        "Every offset commit (tombstones excluded) with its log position: the base of "
        "commit_cadence, consumer_lag and partition_status.",
        ("offset_commits",),
    ),
    View(
        "commit_cadence",
        """
WITH c AS (
  SELECT group_id, topic, partition, offset, commit_timestamp,
         unix_millis(commit_timestamp) - unix_millis(lag(commit_timestamp) OVER (
           PARTITION BY group_id, topic, partition ORDER BY log_partition, log_offset)) AS interval_ms,
         offset - lag(offset) OVER (PARTITION BY group_id, topic, partition ORDER BY log_partition, log_offset) AS delta
  FROM analytics_commits)
SELECT group_id, topic, partition, count(*) AS commits,
       min(commit_timestamp) AS first_commit, max(commit_timestamp) AS last_commit,
       max_by(offset, commit_timestamp) AS last_offset,
       percentile_approx(interval_ms, 0.5) AS p50_interval_ms,
       percentile_approx(interval_ms, 0.95) AS p95_interval_ms,
       max(interval_ms) AS max_interval_ms,
       count_if(delta < 0) AS regressions, count_if(delta = 0) AS unchanged_commits
FROM c GROUP BY group_id, topic, partition
""",
        "Commit cadence per group/topic/partition over the whole history: commits, p50/p95/max "
        "interval between commits, last commit and offset, regressions (offset went back) and "
        "commits that did not move the offset.",
        (),
    ),
    View(
        "consumer_lag",
        """
WITH u AS (
  SELECT 0 AS kind, group_id, topic, partition, offset, commit_timestamp, log_partition, log_offset,
         commit_timestamp AS t, CAST(NULL AS bigint) AS log_end_offset, CAST(NULL AS timestamp) AS sampled_at,
         CAST(NULL AS bigint) AS time_lag_ms
  FROM analytics_commits
  UNION ALL
  SELECT 1 - 2 AS kind, group_id, topic, partition, NULL, NULL, NULL, NULL, sampled_at, log_end_offset, sampled_at,
         unix_millis(sampled_at) - unix_millis(committed_record_timestamp)
  FROM partition_end_offsets),
e AS (
  SELECT *,
    last(log_end_offset, true) OVER (PARTITION BY topic, partition ORDER BY t, kind
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS end_at,
    last(sampled_at, true) OVER (PARTITION BY topic, partition ORDER BY t, kind
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS end_sampled_at
  FROM u),
g AS (
  SELECT *,
    last(CASE WHEN kind = -1 THEN time_lag_ms END, true) OVER (
      PARTITION BY group_id, topic, partition ORDER BY t, kind
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS lag_ms_at
  FROM e)
SELECT group_id, topic, partition, offset, commit_timestamp, log_partition, log_offset,
       end_at AS log_end_offset, end_sampled_at AS end_offset_sampled_at,
       CASE WHEN end_at IS NULL THEN NULL ELSE greatest(end_at - offset, 0) END AS lag_offsets,
       lag_ms_at AS lag_ms
FROM g WHERE kind = 0
""",
        "Lag at every commit: the latest partition_end_offsets sample of the topic-partition at "
        "or before the commit gives lag_offsets = max(log_end_offset - offset, 0); lag_ms = "
        "sampled_at - committed_record_timestamp of the group's latest own sample (null when "
        "unknown).",
        ("partition_end_offsets",),
    ),
    View(
        "partition_status",
        "",  # built from burrow_status_sql (window size is a parameter)
        "Burrow status (OK, WARN, STOP, STALL, REWIND; UNKNOWN without lag) of each partition "
        "at each commit, over the last N commits (N = burrow_window, default 10).",
        (),
    ),
    View(
        "coordinator_load",
        """
WITH recs AS (
  SELECT coordinator_partition, group_id, 1 AS commit, CAST(is_tombstone AS int) AS tomb, 0 AS meta
  FROM offset_commits
  UNION ALL
  SELECT coordinator_partition, group_id, 0, CAST(is_tombstone AS int), 1 FROM group_metadata),
per_group AS (
  SELECT coordinator_partition, group_id, count(*) AS records FROM recs GROUP BY coordinator_partition, group_id),
ranked AS (
  SELECT *, row_number() OVER (PARTITION BY coordinator_partition ORDER BY records DESC, group_id) AS rk,
         sum(records) OVER (PARTITION BY coordinator_partition) AS total FROM per_group)
SELECT r.coordinator_partition, count(*) AS records, sum(commit) AS offset_commit_records,
       sum(meta) AS group_metadata_records, sum(tomb) AS tombstones,
       count(DISTINCT r.group_id) AS `groups`,
       max(k.top_groups) AS top_groups, max(k.top_group_share) AS top_group_share
FROM recs r JOIN (
  SELECT coordinator_partition,
         collect_list(named_struct('group_id', group_id, 'records', records)) AS top_groups,
         round(max(records) / max(total), 4) AS top_group_share
  FROM ranked WHERE rk <= 3 GROUP BY coordinator_partition) k
  ON k.coordinator_partition = r.coordinator_partition
GROUP BY r.coordinator_partition
""",
        "Load per __consumer_offsets partition (= coordinator): records, offset-commit and "
        "group-metadata records, tombstones, groups, the 3 noisiest groups and the top group's "
        "share of the partition's records.",
        ("offset_commits", "group_metadata"),
    ),
    View(
        "offsets_at_risk",
        "",  # built in Python with the core's expiry rules
        "Per committed offset: predicted expiry time under the configured retention and rule "
        "set (coordinator_core.expiry), hours until expiry relative to as_of, at_risk when "
        "it expires within N hours (at_risk_hours, default 24), and kept_past_due when it was due "
        "before as_of and the log shows the broker kept it (its retention or rules differ from "
        "the configured ones).",
        ("offsets_current", "group_state"),
    ),
    View(
        "partition_status_now",
        "",
        "partition_status_at(as_of): Burrow status of every partition at the as_of time.",
        (),
    ),
]

VIEW_NAMES = [v.name for v in VIEWS]

AT_RISK_SCHEMA = (
    "group_id string, topic string, partition int, offset bigint, commit_timestamp timestamp, "
    "expire_timestamp timestamp, state string, predicted_expiry_timestamp timestamp"
)


def _ensure_table(spark: SparkSession, io: TableIO, name: str) -> None:
    """Register table ``name`` as a view: its data, or an empty DataFrame with its schema."""
    from schemas import get as get_spec

    if io.exists(name):
        io.read(name).createOrReplaceTempView(name)
    else:
        spec = get_spec(name)
        spark.createDataFrame([], spec.spark_schema()).createOrReplaceTempView(name)


def _table_exists_as_view(spark: SparkSession, name: str) -> bool:
    return bool(spark.catalog.tableExists(name))


def due_times_fn(retention_ms: int, rules: str) -> Any:
    """Grouped function: one group's offsets (+ its state columns) -> predicted expiry per offset."""

    def fn(pdf: Any) -> Any:
        import pandas as pd

        from pipelines.analytics.forecast import due_times

        first = pdf.iloc[0].to_dict()
        due = due_times(first, pdf.to_dict("records"), retention_ms, rules)
        out = pdf[["group_id", "topic", "partition", "offset", "commit_timestamp", "expire_timestamp", "state"]].copy()
        out["predicted_expiry_timestamp"] = [
            None if due[(t, int(p))] is None else pd.Timestamp(due[(t, int(p))], unit="ms")
            for t, p in zip(out["topic"], out["partition"])
        ]
        out["predicted_expiry_timestamp"] = pd.to_datetime(out["predicted_expiry_timestamp"])
        return out

    return fn


#: ``offsets_at_risk``'s input: each committed offset with its group's state columns
AT_RISK_JOIN_SQL = (
    "SELECT o.group_id, o.topic, o.partition, o.offset, o.commit_timestamp, o.expire_timestamp, "
    "s.state, s.generation, s.protocol_type, s.current_state_timestamp, s.state_timestamp, s.subscribed_topics "
    "FROM offsets_current o JOIN group_state s ON s.group_id = o.group_id"
)
DUE_COLUMNS = ("group_id", "topic", "partition", "offset", "commit_timestamp", "expire_timestamp", "state")


def offsets_at_risk_df(spark: SparkSession, cfg: Config, *, at_risk_hours: float = 24) -> DataFrame:
    """The ``offsets_at_risk`` DataFrame (needs the ``offsets_current`` and ``group_state`` views)."""
    from pyspark.sql import functions as F

    retention = cfg.replay.retention_ms
    joined = spark.sql(AT_RISK_JOIN_SQL)
    if retention is None:
        due = joined.select(*DUE_COLUMNS, F.lit(None).cast("timestamp").alias("predicted_expiry_timestamp"))
    else:
        due = joined.groupBy("group_id").applyInPandas(due_times_fn(int(retention), cfg.replay.rules), AT_RISK_SCHEMA)
    due.createOrReplaceTempView("_offsets_due")
    return spark.sql(at_risk_sql(cfg, at_risk_hours=at_risk_hours))


def at_risk_sql(cfg: Config, *, at_risk_hours: float = 24) -> str:
    """``offsets_at_risk`` over ``_offsets_due`` (each offset's predicted expiry) and ``as_of``."""
    return f"""
SELECT d.*, a.as_of,
       round((unix_millis(d.predicted_expiry_timestamp) - unix_millis(a.as_of)) / 3600000.0, 3) AS hours_until_expiry,
       coalesce(d.predicted_expiry_timestamp > a.as_of
                AND unix_millis(d.predicted_expiry_timestamp) - unix_millis(a.as_of) <= {float(at_risk_hours) * 3_600_000.0},
                false) AS at_risk,
       coalesce(d.predicted_expiry_timestamp <= a.as_of, false) AS kept_past_due
FROM _offsets_due d CROSS JOIN ({_as_of_sql(cfg)}) a
"""


def _as_of_sql(cfg: Config) -> str:
    """One-row query with the ``as_of`` timestamp: replay.as_of_ms, else the warehouse's last record."""
    as_of_ms = cfg.replay.as_of_ms
    if as_of_ms is not None:
        return f"SELECT timestamp_millis({int(as_of_ms)}) AS as_of"
    return "SELECT max(last_timestamp) AS as_of FROM group_state"


def partition_status_at(spark: SparkSession, at: Any, *, window: int = 10) -> DataFrame:
    """Burrow status of every (group, topic, partition) at time ``at`` (epoch ms, datetime or a
    SQL timestamp expression string), over the last ``window`` commits at or before it.

    The current lag at T is the latest end-offset sample at or before T minus the last commit's
    offset (else the last commit's own lag). Needs the ``consumer_lag`` and
    ``partition_end_offsets`` views (``register_analytics_views``).
    """
    return spark.sql(partition_status_at_sql(at, window=window))


def partition_status_at_sql(at: Any, *, window: int = 10) -> str:
    """The Spark SQL of ``partition_status_at`` (reads ``consumer_lag`` and ``partition_end_offsets``)."""
    t_sql = _time_sql(at)
    status = burrow_status_sql("win", "t_ms", "current_lag")
    return f"""
WITH tt AS (SELECT {t_sql} AS at_time),
c AS (
  SELECT l.*, row_number() OVER (PARTITION BY group_id, topic, partition
                                 ORDER BY commit_timestamp DESC, log_partition DESC, log_offset DESC) AS rn
  FROM consumer_lag l CROSS JOIN tt WHERE l.commit_timestamp <= tt.at_time),
w AS (
  SELECT group_id, topic, partition,
         transform(sort_array(collect_list(named_struct('t', unix_millis(commit_timestamp), 'lo', log_offset,
                   'o', offset, 'lag', lag_offsets))), x -> x) AS win
  FROM c WHERE rn <= {int(window)} GROUP BY group_id, topic, partition),
e AS (
  SELECT p.topic, p.partition, max_by(p.log_end_offset, p.sampled_at) AS end_at
  FROM partition_end_offsets p CROSS JOIN tt WHERE p.sampled_at <= tt.at_time GROUP BY p.topic, p.partition),
j AS (
  SELECT w.*, unix_millis(tt.at_time) AS t_ms, tt.at_time,
         CASE WHEN e.end_at IS NULL THEN element_at(w.win, -1).lag
              ELSE greatest(e.end_at - element_at(w.win, -1).o, 0) END AS current_lag
  FROM w CROSS JOIN tt LEFT JOIN e ON e.topic = w.topic AND e.partition = w.partition)
SELECT group_id, topic, partition, at_time, size(win) AS window_commits,
       element_at(win, -1).o AS last_offset, timestamp_millis(element_at(win, -1).t) AS last_commit,
       current_lag, {status} AS status
FROM j
"""


def _time_sql(at: Any) -> str:
    import datetime as dt

    if isinstance(at, int):
        return f"timestamp_millis({at})"
    if isinstance(at, dt.datetime):
        if at.tzinfo is None:
            at = at.replace(tzinfo=dt.UTC)
        return f"timestamp_millis({int(at.timestamp() * 1000)})"
    return str(at)


def register_analytics_views(
    spark: SparkSession,
    cfg_or_io: Config | TableIO,
    *,
    at_risk_hours: float = 24,
    burrow_window: int = 10,
    only: set[str] | None = None,
) -> list[str]:
    """Register every analytics view (or those in ``only``, which must hold the views they read;
    ``view_closure``) and empty stand-ins for missing tables; returns view names."""
    from pipelines.tableio import TableIO

    if isinstance(cfg_or_io, TableIO):
        io, cfg = cfg_or_io, cfg_or_io.conf
    else:
        cfg = cfg_or_io
        io = TableIO(cfg, spark)
    needed = {t for v in VIEWS for t in v.requires} | {"offset_commits", "group_state", "offsets_current"}
    if only is not None:
        needed = {t for t in needed if t in only} | {t for v in VIEWS if v.name in only for t in v.requires}
    for name in sorted(needed):
        if not _table_exists_as_view(spark, name) or not io.exists(name):
            _ensure_table(spark, io, name)
    replayed = io.exists("offset_commits_replayed")
    if replayed:
        _ensure_table(spark, io, "offset_commits_replayed")
    names = []
    for v in VIEWS:
        if only is not None and v.name not in only:
            continue
        if v.name == "offsets_at_risk":
            df = offsets_at_risk_df(spark, cfg, at_risk_hours=at_risk_hours)
        else:
            df = spark.sql(view_sql(v.name, cfg, replayed_commits=replayed, burrow_window=burrow_window))
        df.createOrReplaceTempView(v.name)
        names.append(v.name)
    return names


#: views with a Python step between SQL statements: name -> (the step, tables read). Engines run
#: the same pieces: ``offsets_at_risk`` = ``AT_RISK_JOIN_SQL`` -> ``due_times_fn`` per group ->
#: ``_offsets_due`` -> ``at_risk_sql`` (Spark: applyInPandas; DuckDB: ``duck.offsets_due_arrow``)
PYTHON_VIEWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "offsets_at_risk": (
        "computes expiry times with the core (coordinator_core.expiry) in a pandas function",
        ("offsets_current", "group_state"),
    )
}


def view_sql(name: str, cfg: Config, *, replayed_commits: bool, burrow_window: int = 10) -> str:
    """The one Spark SQL definition of view ``name`` (``PYTHON_VIEWS`` have none: KeyError).

    ``replayed_commits``: whether ``offset_commits_replayed`` exists (``analytics_commits``
    reads it then, else ``offset_commits``)."""
    if name in PYTHON_VIEWS:
        raise KeyError(f"view {name} is computed in Python: {PYTHON_VIEWS[name][0]}")
    if name == "analytics_commits":
        return _commits_sql(replayed_commits)
    if name == "partition_status":
        return f"""
WITH w AS (
  SELECT group_id, topic, partition, offset, commit_timestamp, log_partition, log_offset, lag_offsets, lag_ms,
         collect_list({_WIN_STRUCT}) OVER (PARTITION BY group_id, topic, partition
             ORDER BY commit_timestamp, log_partition, log_offset
             ROWS BETWEEN {int(burrow_window) - 1} PRECEDING AND CURRENT ROW) AS win
  FROM consumer_lag)
SELECT group_id, topic, partition, offset, commit_timestamp, log_partition, log_offset, lag_offsets, lag_ms,
       size(win) AS window_commits,
       {burrow_status_sql("win", "unix_millis(commit_timestamp)", "lag_offsets")} AS status
FROM w
"""
    if name == "partition_status_now":
        as_of = cfg.replay.as_of_ms
        at = int(as_of) if as_of is not None else f"({_as_of_sql(cfg)})"
        return partition_status_at_sql(at, window=burrow_window)
    return next(v.sql for v in VIEWS if v.name == name)


def view_inputs(name: str, cfg: Config, *, replayed_commits: bool) -> list[str]:
    """The tables and views view ``name`` reads (from its SQL, parsed; ``PYTHON_VIEWS`` declare theirs)."""
    from pipelines.analytics.transpile import parse, referenced_tables

    if name in PYTHON_VIEWS:
        return list(PYTHON_VIEWS[name][1])
    return referenced_tables(parse(view_sql(name, cfg, replayed_commits=replayed_commits)))


def view_closure(names: list[str], cfg: Config, *, replayed_commits: bool) -> list[str]:
    """``names`` plus every view and table they read, transitively; views in ``VIEWS`` order
    (each after the views it reads), then tables (sorted)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in VIEW_NAMES:
            todo += view_inputs(n, cfg, replayed_commits=replayed_commits)
    return [v for v in VIEW_NAMES if v in seen] + sorted(seen - set(VIEW_NAMES))


def _commits_sql(replayed: bool) -> str:
    if replayed:
        return (
            "SELECT group_id, topic, partition, offset, commit_timestamp, log_partition, log_offset, timestamp "
            "FROM offset_commits_replayed"
        )
    return (
        "SELECT group_id, topic, partition, committed_offset AS offset, commit_timestamp, "
        "coordinator_partition AS log_partition, log_offset, log_timestamp AS timestamp "
        "FROM offset_commits WHERE NOT is_tombstone"
    )
