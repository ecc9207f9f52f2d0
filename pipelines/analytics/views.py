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
  ``ended_empty`` or ``first_record`` (a generation change), and every row of a consumer
  (KIP-848), share (KIP-932) or streams (KIP-1071) group (``group_type`` in
  ``MODERN_GROUP_TYPES``: a group-epoch bump; ``IS_REBALANCE_SQL``).
  ``static_member_rejoined`` rows are KIP-345 static members back with a new member id WITHOUT a
  rebalance: counted separately, as rebalances avoided. ``assignor_stickiness`` compares classic
  assignments only (a consumer group's members are told when it is Stable, not at the bump).
- Expiry rules are never re-implemented in SQL: ``offsets_at_risk`` is ``pipelines.analytics.at_risk``
  (each offset's due time from the core, relative to ``as_of``).
- Burrow statuses (``pipelines.analytics.burrow`` is the reference) are Spark SQL over
  ``collect_list`` windows with higher-order functions (``exists``/``forall``/``zip_with``), so
  they run over the full history (``partition_status``: at each commit) and at any time
  (``partition_status_at(spark, T)``; view ``partition_status_now`` at ``as_of``).
- Lag: ``pipelines.analytics.lag``'s rules (kafka-lag-exporter's interpolation between
  end-offset samples), in SQL once (``lag_sql.lag_ctes``: ``consumer_lag``, ``partition_status_*``,
  ``serve``). ``partition_status_now`` takes each partition's NEWEST sample unless
  ``replay.as_of_ms`` fixes the moment; ``group_status_now`` rolls partitions up per group
  (total/max lag, max time lag, ``burrow.group_status_sql``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.analytics.at_risk import as_of_sql, offsets_at_risk_df
from pipelines.analytics.burrow import group_status_sql
from pipelines.analytics.lag_sql import consumer_lag_sql, lag_ctes
from pipelines.analytics.transpile import parse, referenced_tables
from pipelines.tableio import TableIO
from schemas import get as get_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config

REBALANCE_CAUSES = ("new_generation", "ended_empty", "first_record")
#: a consumer (KIP-848), share (KIP-932) or streams (KIP-1071) group's rows are group-epoch bumps: each is one
MODERN_GROUP_TYPES = ("consumer", "share", "streams")
IS_REBALANCE_SQL = (
    "(cause IN ('new_generation', 'ended_empty', 'first_record') OR group_type IN ('consumer', 'share', 'streams'))"
)
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
       round(coalesce(sum(duration_min_ms), 0) / 60000.0, 3) AS rebalance_minutes_min,
       CASE WHEN count(duration_max_ms) = count(duration_ms)
            THEN round(coalesce(sum(duration_max_ms), 0) / 60000.0, 3) END AS rebalance_minutes_max,
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
        "minutes (from the estimated starts) and their range (rebalance_minutes_min/_max: what the start "
        "windows allow; max null when a window is unbounded), partitions moved, members joined/left.",
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
        "",  # built from lag_ctes (the one SQL form of pipelines.analytics.lag)
        "Lag at every commit: log_end_offset = the topic-partition's log end at the commit time, "
        "interpolated between the partition_end_offsets samples around it (log_end_method: exact, "
        "interpolated, previous = after the newest sample, next = before the oldest: an upper "
        "bound); lag_offsets = max(log_end_offset - offset, 0); ahead_of_end = the offset is above "
        "a later log end (topic recreated or truncated); lag_ms = time since the record at the "
        "offset was written (exact when a sample fetched it, else kafka-lag-exporter's "
        "interpolation; null when unknown).",
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
        "set (coordinator_core.expiry), hours until expiry relative to as_of, removal_by_timestamp "
        "(due + replay.cleanup_interval_ms: due is not dead, the broker's next cleanup removes it in "
        "between) and expiry_status: held (not due, or never), due (due at as_of, still committed, its "
        "removal a forecast; column due), kept_past_due (its whole window passed before as_of and the "
        "log's evidence horizon and the log still holds it: the broker's retention or rules differ). "
        "at_risk: due, or expiring within N hours (at_risk_hours, default 24).",
        ("offsets_current", "group_state", "partition_end_offsets"),
    ),
    View(
        "partition_status_now",
        "",
        "partition_status_at(now): Burrow status at the one now (pipelines.log_clock) of every "
        "partition the group still holds an offset for (offsets_current: not those of deleted topics "
        "or groups), with the lag from each partition's newest end-offset sample (log_end_offset, "
        "current_lag, lag_ms, ahead_of_end) unless replay.as_of_ms fixes the moment.",
        ("offsets_current",),
    ),
    View(
        "group_status_now",
        f"""
SELECT p.group_id, count(*) AS partitions, count(CASE WHEN p.current_lag > 0 AND NOT p.ahead_of_end THEN 1 END) AS partitions_with_lag,
       count(p.current_lag) AS partitions_lag_known,
       sum(p.current_lag) AS total_lag, max(p.current_lag) AS max_lag, max(p.lag_ms) AS max_lag_ms,
       count_if(p.ahead_of_end) AS offsets_ahead_of_end,
       {group_status_sql("p.status")} AS status
FROM partition_status_now p
JOIN offsets_current o ON o.group_id = p.group_id AND o.topic = p.topic AND o.partition = p.partition
GROUP BY p.group_id
""",
        "Per group, over the partitions it still holds offsets for (offsets_current): partitions with "
        "lag (> 0, not above the log end) and with a known lag, total lag, "
        "max lag, max time lag, offsets above the log end, and Burrow's group status rolled up "
        "from partition_status_now (ERR if any partition is STOP, STALL or REWIND, else WARN if "
        "any is WARN, else OK; UNKNOWN without lag).",
        ("offsets_current",),
    ),
]

VIEW_NAMES = [v.name for v in VIEWS]


def _ensure_table(spark: SparkSession, io: TableIO, name: str) -> None:
    """Register table ``name`` as a view: its data, or an empty DataFrame with its schema."""

    if io.exists(name):
        io.read(name).createOrReplaceTempView(name)
    else:
        spec = get_spec(name)
        spark.createDataFrame([], spec.spark_schema()).createOrReplaceTempView(name)


def _table_exists_as_view(spark: SparkSession, name: str) -> bool:
    return bool(spark.catalog.tableExists(name))


def partition_status_at(spark: SparkSession, at: Any, *, window: int = 10) -> DataFrame:
    """Burrow status of every (group, topic, partition) at time ``at`` (epoch ms, datetime or a
    SQL timestamp expression string), over the last ``window`` commits at or before it.

    The current lag at T is the latest end-offset sample at or before T minus the last commit's
    offset (else the last commit's own lag). Needs the ``consumer_lag`` and
    ``partition_end_offsets`` views (``register_analytics_views``).
    """
    return spark.sql(partition_status_at_sql(at, window=window))


def partition_status_at_sql(at: Any, *, window: int = 10, newest: bool = False) -> str:
    """The Spark SQL of ``partition_status_at`` (reads ``consumer_lag`` and ``partition_end_offsets``).

    The current lag is the log end at T (``lag_ctes``: interpolated between the samples around T)
    minus the last commit's offset; ``newest``: the log end of the partition's NEWEST sample,
    whatever its time (lag now). STOP is judged at T either way."""
    t_sql = _time_sql(at)
    status = burrow_status_sql("win", "t_ms", "current_lag")
    x = "coalesce(n.st, unix_millis(tt.at_time))" if newest else "unix_millis(tt.at_time)"
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
n AS (SELECT topic, partition, max(unix_millis(sampled_at)) AS st FROM partition_end_offsets GROUP BY topic, partition),
now_src AS (
  SELECT w.group_id, w.topic, w.partition, element_at(w.win, -1).o AS offset, {x} AS x
  FROM w CROSS JOIN tt LEFT JOIN n ON n.topic = w.topic AND n.partition = w.partition),
{lag_ctes("now_src", out="now_lag")},
j AS (
  SELECT w.*, unix_millis(tt.at_time) AS t_ms, tt.at_time, l.log_end_offset, l.lag_ms, l.ahead_of_end,
         coalesce(l.lag_offsets, element_at(w.win, -1).lag) AS current_lag
  FROM w CROSS JOIN tt
  LEFT JOIN now_lag l ON l.group_id = w.group_id AND l.topic = w.topic AND l.partition = w.partition)
SELECT group_id, topic, partition, at_time, size(win) AS window_commits,
       element_at(win, -1).o AS last_offset, timestamp_millis(element_at(win, -1).t) AS last_commit,
       current_lag, {status} AS status, log_end_offset, lag_ms, coalesce(ahead_of_end, false) AS ahead_of_end
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
        ("offsets_current", "group_state", "partition_end_offsets"),  # the now: log_clock.now_of
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
    if name == "consumer_lag":
        return consumer_lag_sql()
    if name == "partition_status_now":
        as_of = cfg.replay.as_of_ms
        at = int(as_of) if as_of is not None else f"({as_of_sql(cfg)})"
        held = (
            "WHERE EXISTS (SELECT 1 FROM offsets_current o WHERE o.group_id = s.group_id AND o.topic = s.topic "
            "AND o.partition = s.partition)"
        )
        return f"SELECT s.* FROM ({partition_status_at_sql(at, window=burrow_window, newest=as_of is None)}) s {held}"
    return next(v.sql for v in VIEWS if v.name == name)


def view_inputs(name: str, cfg: Config, *, replayed_commits: bool) -> list[str]:
    """The tables and views view ``name`` reads (from its SQL, parsed; ``PYTHON_VIEWS`` declare theirs)."""

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
