"""The one SQL form of the lag rules (``pipelines.analytics.lag`` is the reference): Spark SQL
that ``pipelines.analytics.transpile`` carries to DuckDB, used by the ``consumer_lag`` and
``partition_status_*`` views and by ``offsetlake serve``.

Rules: as ``pipelines.analytics.lag``, computed with sorts only (samples and rows unioned per
topic-partition; ``last``/``first(..., true)`` over time for the log end at x, over offsets for
the two samples bracketing an offset), never a range join: linear in rows + samples. Arithmetic
in doubles, floored (equal to the reference below 2**53 / span).
"""

from __future__ import annotations


def lag_ctes(src: str, cols: tuple[str, ...] = (), out: str = "lag_out") -> str:
    """CTEs (no leading ``WITH``) ending in ``out``: every row of ``src`` (columns ``group_id``,
    ``topic``, ``partition``, ``offset``, ``x`` = epoch ms, and ``cols``) with ``log_end_offset``,
    ``end_offset_sampled_at`` (the newest sample at or before x), ``log_end_method``,
    ``ahead_of_end``, ``lag_offsets`` and ``lag_ms`` by ``pipelines.analytics.lag``'s rules.
    Reads ``partition_end_offsets``."""
    keep = "".join(f", {c}" for c in cols)
    nulls = "".join(f", NULL AS {c}" for c in cols)
    by_t = "PARTITION BY topic, partition ORDER BY x, kind"
    by_o = "PARTITION BY topic, partition ORDER BY v, kind, x"
    upto, since = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"
    sample_t = "CASE WHEN kind = -1 THEN x END"
    return f"""ls AS (
  SELECT topic, partition, unix_millis(sampled_at) AS st, max(log_end_offset) AS e
  FROM partition_end_offsets GROUP BY topic, partition, unix_millis(sampled_at)),
lr AS (
  SELECT group_id, topic, partition, committed_offset, max(unix_millis(committed_record_timestamp)) AS r_ms
  FROM partition_end_offsets WHERE group_id IS NOT NULL AND committed_record_timestamp IS NOT NULL
  GROUP BY group_id, topic, partition, committed_offset),
lf AS (SELECT topic, partition, min(st) AS t0, min_by(e, st) AS e0 FROM ls GROUP BY topic, partition),
lu AS (
  SELECT 0 AS kind, group_id, topic, partition, offset, x, CAST(NULL AS bigint) AS e{keep} FROM {src}
  UNION ALL
  SELECT -1 AS kind, NULL, topic, partition, NULL, st, e{nulls} FROM ls),
lt AS (
  SELECT *, coalesce(offset, e) AS v,
    last({sample_t}, true) OVER ({by_t} {upto}) AS t1, last(e, true) OVER ({by_t} {upto}) AS e1,
    first({sample_t}, true) OVER ({by_t} {since}) AS t2, first(e, true) OVER ({by_t} {since}) AS e2
  FROM lu),
lo AS (
  SELECT *,
    last({sample_t}, true) OVER ({by_o} {upto}) AS ta, last(e, true) OVER ({by_o} {upto}) AS ea,
    first({sample_t}, true) OVER ({by_o} {since}) AS tb, first(e, true) OVER ({by_o} {since}) AS eb
  FROM lt),
lc AS (
  SELECT lo.*, lf.t0, lf.e0, r.r_ms,
    CASE WHEN e1 IS NULL THEN e2 WHEN e2 IS NULL OR t1 = x THEN e1
         ELSE e1 + CAST(floor((e2 - e1) * (x - t1) / (t2 - t1)) AS bigint) END AS end_at
  FROM lo LEFT JOIN lf ON lf.topic = lo.topic AND lf.partition = lo.partition
  LEFT JOIN lr r ON r.group_id = lo.group_id AND r.topic = lo.topic AND r.partition = lo.partition
    AND r.committed_offset = lo.offset
  WHERE lo.kind = 0),
{out} AS (
  SELECT group_id, topic, partition, offset, x{keep},
    end_at AS log_end_offset, timestamp_millis(t1) AS end_offset_sampled_at,
    CASE WHEN end_at IS NULL THEN NULL WHEN e1 IS NULL THEN 'next' WHEN t1 = x THEN 'exact'
         WHEN e2 IS NULL THEN 'previous' ELSE 'interpolated' END AS log_end_method,
    coalesce(offset > CASE WHEN t1 = x THEN e1 ELSE e2 END, false) AS ahead_of_end,
    CASE WHEN end_at IS NULL OR offset IS NULL THEN NULL ELSE greatest(end_at - offset, 0) END AS lag_offsets,
    CASE WHEN r_ms IS NOT NULL THEN greatest(x - r_ms, 0)
         WHEN e1 IS NULL OR offset IS NULL THEN NULL
         WHEN offset >= e1 THEN 0
         WHEN ea IS NOT NULL AND tb <= x AND eb > ea
           THEN greatest(CAST(floor(x - (ta + (offset - ea) * (tb - ta) / (eb - ea))) AS bigint), 0)
         WHEN ea IS NULL AND e1 > e0
           THEN greatest(CAST(floor(x - (t0 + (offset - e0) * (t1 - t0) / (e1 - e0))) AS bigint), 0)
         END AS lag_ms
  FROM lc)"""


def consumer_lag_sql() -> str:
    src = (
        "lag_src AS (SELECT group_id, topic, partition, offset, unix_millis(commit_timestamp) AS x, "
        "commit_timestamp, log_partition, log_offset FROM analytics_commits)"
    )
    ctes = lag_ctes("lag_src", ("commit_timestamp", "log_partition", "log_offset"))
    return f"""
WITH {src},
{ctes}
SELECT group_id, topic, partition, offset, commit_timestamp, log_partition, log_offset,
       log_end_offset, end_offset_sampled_at, lag_offsets, lag_ms, log_end_method, ahead_of_end
FROM lag_out
"""
