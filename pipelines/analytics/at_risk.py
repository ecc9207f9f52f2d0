"""``offsets_at_risk``: each committed offset's predicted expiry, relative to ``as_of``.

Rules: expiry rules are never re-implemented in SQL. ``AT_RISK_JOIN_SQL`` gives each offset with
its group's state columns; ``due_times_fn`` (per group: ``pipelines.analytics.forecast.due_times``,
the core's ``offset_due_times``) predicts each due time; ``at_risk_sql`` compares them with
``as_of`` (``as_of_sql``: the one "now", ``pipelines.log_clock.now_of``).
Spark runs the grouped function with ``applyInPandas`` (``offsets_at_risk_df``); DuckDB runs the
same pieces on the driver (``pipelines.analytics.duck``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.analytics.forecast import due_times
from pipelines.log_clock import now_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config


AT_RISK_SCHEMA = (
    "group_id string, topic string, partition int, offset bigint, commit_timestamp timestamp, "
    "expire_timestamp timestamp, state string, predicted_expiry_timestamp timestamp"
)


def due_times_fn(retention_ms: int, rules: str) -> Any:
    """Grouped function: one group's offsets (+ its state columns) -> predicted expiry per offset."""

    def fn(pdf: Any) -> Any:
        import pandas as pd

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
    "s.state, s.generation, s.protocol_type, s.current_state_timestamp, s.state_timestamp, s.subscribed_topics, "
    "s.group_type "
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
    """``offsets_at_risk`` over ``_offsets_due`` (each offset's predicted expiry) and ``as_of``.

    Due is not dead (``coordinator_core.expiry.cleanup_window``): an offset whose expiry time has
    passed is removed by the broker's next cleanup of its partition, in
    ``[due, due + replay.cleanup_interval_ms]`` (``removal_by_timestamp``, the window's end). Each
    offset's ``expiry_status`` (``forecast.expiry_status``, the same rule on the driver):
    ``held`` (not due, or never expires as the group stands), ``due`` (due at ``as_of``, its
    removal a forecast: at risk, still committed) or ``kept_past_due`` (its whole window passed
    before ``as_of`` and before the evidence horizon, ``log_clock.evidence_horizon``: the newest
    record minus ``stream.watermark_delay_ms``; yet the log still holds it: the broker's retention
    or rules differ from the configured ones). A window that ends after the log does is still
    ``due``: nothing in the log says the cleanup has run."""
    interval = int(cfg.replay.cleanup_interval_ms)
    delay = int(cfg.stream.watermark_delay_ms)  # the evidence horizon (log_clock.evidence_horizon)
    cols = ", ".join(f"t.{c}" for c in (*DUE_COLUMNS, "predicted_expiry_timestamp"))
    return f"""
WITH t AS (
  SELECT d.*, a.as_of, e.evidence_ms,
         timestamp_millis(unix_millis(d.predicted_expiry_timestamp) + {interval}) AS removal_by_timestamp
  FROM _offsets_due d CROSS JOIN ({as_of_sql(cfg)}) a
  CROSS JOIN (SELECT unix_millis(max(last_timestamp)) - {delay} AS evidence_ms FROM group_state) e),
s AS (
  SELECT t.*,
         CASE WHEN t.predicted_expiry_timestamp IS NULL OR t.predicted_expiry_timestamp > t.as_of THEN 'held'
              WHEN unix_millis(t.predicted_expiry_timestamp) + {interval} < unix_millis(t.as_of)
                   AND unix_millis(t.predicted_expiry_timestamp) + {interval} < coalesce(t.evidence_ms, unix_millis(t.as_of))
              THEN 'kept_past_due'
              ELSE 'due' END AS expiry_status
  FROM t)
SELECT {cols}, t.as_of,
       round((unix_millis(t.predicted_expiry_timestamp) - unix_millis(t.as_of)) / 3600000.0, 3) AS hours_until_expiry,
       (t.expiry_status = 'due'
        OR coalesce(t.predicted_expiry_timestamp > t.as_of
                    AND unix_millis(t.predicted_expiry_timestamp) - unix_millis(t.as_of) <= {float(at_risk_hours) * 3_600_000.0},
                    false)) AS at_risk,
       t.expiry_status = 'kept_past_due' AS kept_past_due,
       t.expiry_status = 'due' AS due,
       t.removal_by_timestamp,
       t.expiry_status
FROM s t
"""


def as_of_sql(cfg: Config) -> str:
    """One-row query with the ``as_of`` timestamp: the one "now" of statuses and countdowns
    (``pipelines.log_clock.now_of``: replay.as_of_ms, else ``replay.now``, by default the newest
    evidence — the last record or end-offset sample)."""

    return now_of(cfg)
