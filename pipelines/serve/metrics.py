"""Prometheus metrics of the warehouse, read-only from its Delta tables (no Spark).

Rules:
- Everything is read through ``pipelines.analytics.duck.DuckDBSession`` (DuckDB over
  ``TableIO.snapshot_files`` / ``read_arrow``); the queries are Spark SQL run through
  ``pipelines.analytics.transpile`` like ``offsetlake sql``. Views are the analytics views' one
  definition (``partition_status_now`` for Burrow statuses, ``offsets_at_risk`` for due times).
  A declared table the warehouse does not hold yet (``partition_end_offsets`` before the first
  sample) reads as empty: its metrics are absent, never zero.
- "Now" is the one "now" of every view (``pipelines.log_clock.now_of``: ``replay.as_of_ms``, else
  ``replay.now``: by default the newest evidence, the last record in ``group_state`` or the newest
  end-offset sample, so a new sample moves it without a batch run): the rebalance window ends there.
- Lag now (per partition of ``offsets_current``) follows ``pipelines.analytics.lag`` through its
  one SQL form (``lag_sql.lag_ctes``) at the NEWEST sample of the topic-partition (it may be
  newer than ``as_of``: a live sampler runs after the last batch): log end minus the committed
  offset, floored at 0; a committed offset above the log end (topic recreated or truncated) is
  flagged by its own gauge; lag in time = since the record at the committed offset was written
  (its timestamp when the group's sample fetched it, else kafka-lag-exporter's interpolation).
- Names follow kafka-lag-exporter (``kafka_consumergroup_group_lag``, ``..._max_lag``,
  ``..._sum_lag``, ``..._lag_seconds``, ``kafka_partition_latest_offset``) with labels
  ``cluster_name``, ``group``, ``topic``, ``partition`` (no member labels: a rebalance would
  start new series); states one-hot with a ``state`` label as
  kminion does, with the group's ``group_type`` (classic, consumer, share, streams: which states
  the one-hot is over). What only offsetlake knows is ``kafka_consumergroup_group_rebalance*``,
  ``..._offset_expiry_timestamp_seconds`` and ``..._deletion_timestamp_seconds``. README
  "Monitoring" documents each family.
- Group status is Burrow's roll-up, ``pipelines.analytics.burrow.group_status`` (the one
  definition ``inspect``, the report and the ``group_status_now`` view share).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.analytics.at_risk import as_of_sql
from pipelines.analytics.burrow import group_status
from pipelines.analytics.duck import DuckDBSession
from pipelines.analytics.lag_sql import lag_ctes
from pipelines.analytics.transpile import to_duckdb
from pipelines.analytics.views import IS_REBALANCE_SQL, view_closure
from pipelines.errors import UsageError

if TYPE_CHECKING:
    from pipelines.tableio import TableIO


GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
#: a consumer group's (KIP-848, ``group_type`` consumer) states: its one-hot is over these
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
#: share groups' (KIP-932) and streams groups' (KIP-1071) states (``ShareGroupState``, ``StreamsGroupState``)
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")
STREAMS_GROUP_STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead")
STATES_BY_TYPE = {"consumer": CONSUMER_GROUP_STATES, "share": SHARE_GROUP_STATES, "streams": STREAMS_GROUP_STATES}
ALL_STATES = (*GROUP_STATES, "Assigning", "Reconciling", "NotReady")
#: the tables whose Delta versions key the cache (what the queries below read)
SOURCE_TABLES = (
    "group_state",
    "offsets_current",
    "partition_end_offsets",
    "rebalances",
    "group_lifecycle",
    "offset_commits",
    "offset_commits_replayed",
)
READS = [
    "group_state",
    "offsets_current",
    "partition_end_offsets",
    "rebalances",
    "group_lifecycle",
    "partition_status_now",
    "offsets_at_risk",
    "consumer_lag",
]
DEFAULT_WINDOW_S = 3600.0
BURROW_WINDOW = 10

#: lag now of every committed offset: ``lag_sql.lag_ctes`` (the views' one lag rule) at the
#: NEWEST sample of its topic-partition
_LAG_NOW_SQL = f"""
WITH n AS (SELECT topic, partition, max(unix_millis(sampled_at)) AS st FROM partition_end_offsets GROUP BY topic, partition),
now_src AS (
  SELECT o.group_id, o.topic, o.partition, o.offset, n.st AS x, unix_millis(o.commit_timestamp) AS commit_ms
  FROM offsets_current o LEFT JOIN n ON n.topic = o.topic AND n.partition = o.partition),
{lag_ctes("now_src", ("commit_ms",))}
SELECT group_id, topic, partition, offset, commit_ms, log_end_offset, x AS sampled_ms, lag_offsets AS lag, lag_ms,
       ahead_of_end
FROM lag_out
"""

#: the first and last commit of each partition's Burrow window (the last BURROW_WINDOW commits at
#: or before as_of, ``views.partition_status_at_sql``'s order): Burrow's ``start`` / ``end``
_WINDOW_ENDS_SQL = """
WITH c AS (
  SELECT group_id, topic, partition, offset, unix_millis(commit_timestamp) AS t, lag_offsets,
         row_number() OVER (PARTITION BY group_id, topic, partition
                            ORDER BY commit_timestamp DESC, log_partition DESC, log_offset DESC) AS rn,
         count(*) OVER (PARTITION BY group_id, topic, partition) AS n
  FROM consumer_lag WHERE commit_timestamp <= timestamp_millis({as_of}))
SELECT group_id, topic, partition, offset, t, lag_offsets, rn = 1 AS is_end
FROM c WHERE rn = 1 OR rn = least(n, {window})
"""


@dataclass
class Snapshot:
    """What the tables say, collected once (the cache holds one)."""

    as_of_ms: int | None
    groups: list[dict[str, Any]]
    partitions: list[dict[str, Any]]  # offsets_current + lag now + Burrow status + window ends
    rebalances: dict[str, tuple[int, int]]  # group -> (rebalances, total ms) in the window
    # offsets that will expire or are due (removal forecast): group, topic, partition, due_ms,
    # removal_by_ms (the end of the removal window), at_risk, due
    expiries: list[dict[str, Any]]
    deletions: dict[str, tuple[int, int]]  # group -> predicted deletion window (ms): earliest, latest
    window_s: float
    versions: tuple[int | None, ...] = field(default=())


def table_versions(io: TableIO) -> tuple[int | None, ...]:
    """The Delta versions of ``SOURCE_TABLES`` (``None``: absent): the cache key."""
    return tuple(io.version(t) for t in SOURCE_TABLES)


#: each group's forecast deletion window: (earliest, latest) ms; a window without its end is one
#: cleanup interval wide
_DELETIONS_SQL = (
    "SELECT group_id, min(unix_millis(predicted_time)) AS ms, "
    "max(coalesce(unix_millis(forecast_to_time), unix_millis(predicted_time) + {interval})) AS to_ms "
    "FROM group_lifecycle "
    "WHERE event = 'group_deleted' AND status = 'predicted' AND predicted_time IS NOT NULL "
    "GROUP BY group_id"
)


def collect(io: TableIO, *, window_s: float = DEFAULT_WINDOW_S) -> Snapshot:
    """Query the warehouse once (DuckDB) and return the ``Snapshot``."""

    if not io.exists("group_state"):
        raise UsageError(f"no group_state table under {io.warehouse} (run: offsetlake run batch --conf ...)")
    versions = table_versions(io)
    s = DuckDBSession(io)
    s.register(view_closure(READS, io.conf, replayed_commits=s.replayed_commits))

    def rows(spark_sql: str) -> list[dict[str, Any]]:
        return list(s.query(to_duckdb(spark_sql)).to_pylist())

    as_of_rows = rows(f"SELECT unix_millis(as_of) AS ms FROM ({as_of_sql(io.conf)}) a")
    as_of = as_of_rows[0]["ms"] if as_of_rows else None
    groups = rows(
        "SELECT group_id, state, member_count, generation, protocol_type, protocol, members, group_type, offsets_kept_in "
        "FROM group_state "
        "ORDER BY group_id"
    )
    owners = {  # (group, topic, partition) -> the member assigned it in the current generation
        (g["group_id"], a["topic"], a["partition"]): m
        for g in groups
        for m in g.pop("members") or []
        for a in m.get("assigned_partitions") or []
    }
    parts = {(r["group_id"], r["topic"], r["partition"]): r for r in rows(_LAG_NOW_SQL)}
    for key, p in parts.items():
        m = owners.get(key)
        p["owner"] = None if m is None else {k: m[k] for k in ("member_id", "client_id", "client_host")}
    at = int(as_of) if as_of is not None else 0
    for r in rows("SELECT group_id, topic, partition, status, current_lag, window_commits FROM partition_status_now"):
        key = (r["group_id"], r["topic"], r["partition"])
        if key in parts:
            parts[key].update(status=r["status"], window_commits=r["window_commits"])
    for r in rows(_WINDOW_ENDS_SQL.format(as_of=at, window=BURROW_WINDOW)):
        key = (r["group_id"], r["topic"], r["partition"])
        if key in parts:
            end = {"offset": r["offset"], "timestamp": r["t"], "lag": r["lag_offsets"]}
            parts[key]["end" if r["is_end"] else "start"] = end
            parts[key].setdefault("start", end)  # a one-commit window starts where it ends
    since = at - int(window_s * 1000)
    rebalances = {
        r["group_id"]: (int(r["n"]), int(r["ms"]))
        for r in rows(
            "SELECT group_id, count(*) AS n, coalesce(sum(duration_ms), 0) AS ms FROM rebalances "
            f"WHERE {IS_REBALANCE_SQL} AND end_time > timestamp_millis({since}) "
            f"AND end_time <= timestamp_millis({at}) GROUP BY group_id"
        )
    }
    expiries = rows(
        "SELECT group_id, topic, partition, unix_millis(predicted_expiry_timestamp) AS due_ms, "
        "unix_millis(removal_by_timestamp) AS removal_by_ms, at_risk, due "
        "FROM offsets_at_risk WHERE predicted_expiry_timestamp IS NOT NULL AND NOT kept_past_due "
        "ORDER BY group_id, topic, partition"
    )
    interval = int(io.conf.replay.cleanup_interval_ms)
    deletions = {r["group_id"]: (int(r["ms"]), int(r["to_ms"])) for r in rows(_DELETIONS_SQL.format(interval=interval))}
    return Snapshot(
        as_of_ms=as_of,
        groups=groups,
        partitions=[parts[k] for k in sorted(parts)],
        rebalances=rebalances,
        expiries=expiries,
        deletions=deletions,
        window_s=window_s,
        versions=versions,
    )


# ---- exposition ---------------------------------------------------------------------------------
Sample = tuple[dict[str, Any], float]


def escape_label(value: Any) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def family(name: str, kind: str, doc: str, samples: Iterable[Sample]) -> str:
    """One metric family: ``# HELP``, ``# TYPE`` and its samples."""
    out = [f"# HELP {name} {_help(doc)}", f"# TYPE {name} {kind}"]
    for labels, v in samples:
        inner = ",".join(f'{k}="{escape_label(val)}"' for k, val in labels.items())
        out.append(f"{name}{{{inner}}} {_value(float(v))}" if inner else f"{name} {_value(float(v))}")
    return "\n".join(out) + "\n"


#: every family (all gauges) and its HELP text, in exposition order (README "Monitoring" lists them)
FAMILIES: dict[str, str] = {
    "offsetlake_as_of_timestamp_seconds": "The now statuses are evaluated at: replay.as_of_ms, else replay.now "
    "(evidence: the newest record or end-offset sample; log; wall).",
    "kafka_consumergroup_groups": "Consumer groups per state (group_state).",
    "kafka_consumergroup_group_state": "1 for the group's current state, 0 for the others (one-hot over the state label, "
    "over the states of its group_type: classic, consumer, share, streams).",
    "kafka_consumergroup_group_members": "Current members of the group.",
    "kafka_consumergroup_group_generation": "Current generation id of the group.",
    "kafka_consumergroup_group_offset": "Committed offset per partition (offsets_current).",
    "kafka_partition_latest_offset": "Log end offset of the partition: its newest partition_end_offsets sample.",
    "kafka_consumergroup_group_offset_ahead_of_end": "Committed offset - log end offset when the committed offset "
    "is above the log end (topic recreated or truncated; lag reads 0 then).",
    "kafka_consumergroup_group_lag": "Lag in offsets per partition: newest end-offset sample - committed offset, floored at 0.",
    "kafka_consumergroup_group_max_lag": "Largest partition lag of the group (offsets).",
    "kafka_consumergroup_group_sum_lag": "Total lag of the group (offsets).",
    "kafka_consumergroup_group_lag_seconds": "Lag in time per partition: sampled_at - timestamp of the record at the "
    "committed offset (the group's newest own sample; absent when unknown).",
    "kafka_consumergroup_group_max_lag_seconds": "Largest partition time lag of the group.",
    "kafka_consumergroup_partition_status": "Burrow status of the partition at as_of (partition_status_now), value 1.",
    "kafka_consumergroup_group_status": "Burrow's group status rolled up from its partitions (OK, WARN, ERR; "
    "UNKNOWN without lag), value 1.",
    "kafka_consumergroup_rebalance_window_seconds": "Length of the window the rebalance metrics count over, ending at as_of.",
    "kafka_consumergroup_group_rebalances": "Rebalances (generation changes) that ended in the window.",
    "kafka_consumergroup_group_rebalance_seconds": "Total duration of the rebalances that ended in the window "
    "(estimated start to end).",
    "kafka_consumergroup_offset_expiry_timestamp_seconds": "Predicted expiry (due) time of a committed offset that will "
    "expire or is due and still held (offsets_at_risk: the core's expiry rules); the broker removes it at its next "
    "cleanup, by ..._offset_expiry_latest_timestamp_seconds.",
    "kafka_consumergroup_offset_expiry_latest_timestamp_seconds": "Latest time the broker's cleanup removes that offset: "
    "its due time + replay.cleanup_interval_ms (offsets_at_risk.removal_by_timestamp).",
    "kafka_consumergroup_group_offsets_at_risk": "Offsets of the group due at as_of (removal forecast, still committed) "
    "or predicted to expire within 24 h of it (offsets_at_risk.at_risk).",
    "kafka_consumergroup_group_offsets_due": "Offsets of the group due at as_of: still committed, removed by the "
    "broker's next cleanup (offsets_at_risk.due).",
    "kafka_consumergroup_group_deletion_timestamp_seconds": "Predicted deletion time of the group, the earliest of its "
    "window (group_lifecycle, status predicted: when it falls due).",
    "kafka_consumergroup_group_deletion_latest_timestamp_seconds": "Latest time of the group's predicted deletion: the end "
    "of its window (group_lifecycle.forecast_to_time, due + replay.cleanup_interval_ms).",
}


def render(snap: Snapshot, cluster: str) -> str:
    """The Prometheus text exposition (format 0.0.4) of ``snap``."""
    c = {"cluster_name": cluster}
    samples = {**_group_samples(snap, c), **_partition_samples(snap, c)}
    return "".join(family(n, "gauge", doc, samples.get(n, [])) for n, doc in FAMILIES.items())


def _group_samples(snap: Snapshot, c: dict[str, Any]) -> dict[str, list[Sample]]:
    groups = snap.groups
    statuses: dict[str, list[str | None]] = {}
    for p in snap.partitions:
        statuses.setdefault(p["group_id"], []).append(p.get("status"))
    at_risk: dict[str, int] = {}
    due: dict[str, int] = {}
    for e in snap.expiries:
        at_risk[e["group_id"]] = at_risk.get(e["group_id"], 0) + (1 if e["at_risk"] else 0)
        due[e["group_id"]] = due.get(e["group_id"], 0) + (1 if e.get("due") else 0)

    def gl(g: str) -> dict[str, Any]:
        return {**c, "group": g}

    def rebalances(g: str, i: int) -> float:
        return snap.rebalances.get(g, (0, 0))[i]

    return {
        "offsetlake_as_of_timestamp_seconds": [(c, snap.as_of_ms / 1000)] if snap.as_of_ms is not None else [],
        "kafka_consumergroup_groups": [
            ({**c, "state": s}, sum(1 for g in groups if g["state"] == s)) for s in ALL_STATES
        ],
        "kafka_consumergroup_group_state": [
            (
                {**gl(g["group_id"]), "group_type": g.get("group_type") or "classic", "state": s},
                1 if g["state"] == s else 0,
            )
            for g in groups
            for s in STATES_BY_TYPE.get(g.get("group_type") or "classic", GROUP_STATES)
        ],
        "kafka_consumergroup_group_members": [(gl(g["group_id"]), g["member_count"] or 0) for g in groups],
        "kafka_consumergroup_group_generation": [
            (gl(g["group_id"]), g["generation"]) for g in groups if g["generation"] is not None
        ],
        "kafka_consumergroup_group_status": [
            ({**gl(g), "status": group_status(st)}, 1) for g, st in sorted(statuses.items())
        ],
        "kafka_consumergroup_rebalance_window_seconds": [(c, snap.window_s)],
        "kafka_consumergroup_group_rebalances": [(gl(g["group_id"]), rebalances(g["group_id"], 0)) for g in groups],
        "kafka_consumergroup_group_rebalance_seconds": [
            (gl(g["group_id"]), rebalances(g["group_id"], 1) / 1000) for g in groups
        ],
        "kafka_consumergroup_group_offsets_at_risk": [(gl(g), n) for g, n in sorted(at_risk.items())],
        "kafka_consumergroup_group_offsets_due": [(gl(g), n) for g, n in sorted(due.items())],
        "kafka_consumergroup_group_deletion_timestamp_seconds": [
            (gl(g), lo / 1000) for g, (lo, _) in sorted(snap.deletions.items())
        ],
        "kafka_consumergroup_group_deletion_latest_timestamp_seconds": [
            (gl(g), hi / 1000) for g, (_, hi) in sorted(snap.deletions.items())
        ],
    }


def _partition_samples(snap: Snapshot, c: dict[str, Any]) -> dict[str, list[Sample]]:
    parts = snap.partitions
    lagged = [p for p in parts if p.get("lag") is not None]
    timed = [p for p in parts if p.get("lag_ms") is not None]
    by_group: dict[str, list[int]] = {}
    for p in lagged:
        by_group.setdefault(p["group_id"], []).append(p["lag"])
    by_group_t: dict[str, list[int]] = {}
    for p in timed:
        by_group_t.setdefault(p["group_id"], []).append(p["lag_ms"])
    ends = {(p["topic"], p["partition"]): p["log_end_offset"] for p in lagged}

    def pl(p: dict[str, Any]) -> dict[str, Any]:
        return {**c, "group": p["group_id"], "topic": p["topic"], "partition": p["partition"]}

    def ml(p: dict[str, Any]) -> dict[str, Any]:
        """``pl`` plus the member assigned the partition, as kafka-lag-exporter labels it ("" when none)."""
        o = p.get("owner") or {}
        member = {
            "member_host": o.get("client_host"),
            "consumer_id": o.get("member_id"),
            "client_id": o.get("client_id"),
        }
        return {**pl(p), **{k: v or "" for k, v in member.items()}}

    return {
        "kafka_consumergroup_group_offset": [(ml(p), p["offset"]) for p in parts if p["offset"] is not None],
        "kafka_partition_latest_offset": [
            ({**c, "topic": t, "partition": n}, end) for (t, n), end in sorted(ends.items())
        ],
        "kafka_consumergroup_group_offset_ahead_of_end": [
            (pl(p), p["offset"] - p["log_end_offset"]) for p in lagged if p["offset"] > p["log_end_offset"]
        ],
        "kafka_consumergroup_group_lag": [(ml(p), p["lag"]) for p in lagged],
        "kafka_consumergroup_group_max_lag": [({**c, "group": g}, max(v)) for g, v in sorted(by_group.items())],
        "kafka_consumergroup_group_sum_lag": [({**c, "group": g}, sum(v)) for g, v in sorted(by_group.items())],
        "kafka_consumergroup_group_lag_seconds": [(ml(p), p["lag_ms"] / 1000) for p in timed],
        "kafka_consumergroup_group_max_lag_seconds": [
            ({**c, "group": g}, max(v) / 1000) for g, v in sorted(by_group_t.items())
        ],
        "kafka_consumergroup_partition_status": [
            ({**pl(p), "status": p["status"]}, 1) for p in parts if p.get("status")
        ],
        "kafka_consumergroup_offset_expiry_timestamp_seconds": [(pl(e), e["due_ms"] / 1000) for e in snap.expiries],
        "kafka_consumergroup_offset_expiry_latest_timestamp_seconds": [
            (pl(e), e["removal_by_ms"] / 1000) for e in snap.expiries
        ],
    }
