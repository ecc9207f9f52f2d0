"""Lag, owner and Burrow status of ONE group's committed offsets, on the driver (no Spark): what
``inspect group`` shows (``kafka-consumer-groups --describe``: CURRENT-OFFSET, LOG-END-OFFSET,
LAG, CONSUMER-ID, HOST, CLIENT-ID, plus time lag and status).

Rules: the lag rules are ``pipelines.analytics.lag``'s, the statuses ``pipelines.analytics.burrow``'s
(``evaluate`` per partition over its last 10 commits at or before T, each commit's lag from the
samples as ``consumer_lag`` computes it; ``group_status`` for the group). Without an as-of time,
lag is the NEWEST sample's; at T, the log end interpolated at T. The owner of a partition is the
member whose assignment holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.analytics import burrow
from pipelines.analytics import lag as L
from pipelines.analytics.lag import Sample
from pipelines.analytics.reads import driver_io, epoch_ms

if TYPE_CHECKING:
    from pipelines.config import Config


def end_offset_samples(
    cfg: Config, group_id: str
) -> tuple[dict[tuple[str, int], list[Any]], dict[tuple[str, int], list[tuple[int, int | None, int | None]]], bool]:
    """``partition_end_offsets`` read once: (topic, partition) -> samples (``lag.Sample``), the
    group's own samples (topic, partition) -> [(sampled ms, committed offset, record ms)], and
    whether the table exists."""

    cols = ["sampled_at", "topic", "partition", "log_end_offset", "group_id", "committed_offset"]
    t = driver_io(cfg).read_arrow("partition_end_offsets", [*cols, "committed_record_timestamp"])
    if t is None:
        return {}, {}, False
    samples: dict[tuple[str, int], list[Sample]] = {}
    own: dict[tuple[str, int], list[tuple[int, int | None, int | None]]] = {}
    rec_ms = epoch_ms(t.column("committed_record_timestamp"))
    for s_ms, topic, p, leo, g, committed, r_ms in zip(
        epoch_ms(t.column("sampled_at")), *(t.column(c).to_pylist() for c in cols[1:]), rec_ms
    ):
        if s_ms is None or leo is None:
            continue
        samples.setdefault((topic, p), []).append(Sample(s_ms, leo))
        if g == group_id:
            own.setdefault((topic, p), []).append((s_ms, committed, r_ms))
    return samples, own, True


def add_lag(
    cfg: Config,
    group_id: str,
    offsets: list[dict[str, Any]],
    members: list[dict[str, Any]],
    commits: list[Any],
    as_of_ms: int | None,
    t_end: int,
) -> dict[str, Any]:
    """Each offset row gains its owner, log end, lag, time lag and Burrow status (module rules);
    returns the group totals and status."""

    samples, own, sampled = end_offset_samples(cfg, group_id)
    owners = {(a["topic"], a["partition"]): m for m in members for a in (m.get("assigned_partitions") or [])}
    windows: dict[tuple[str, int], list[Any]] = {}
    for c in sorted(commits, key=lambda e: (e.commit_timestamp, e.log_partition, e.log_offset)):
        windows.setdefault((c.topic, c.partition), []).append(c)
    for o in offsets:
        tp = (o["topic"], o["partition"])
        m = owners.get(tp)
        o["owner"] = None if m is None else {k: m[k] for k in ("member_id", "client_id", "client_host")}
        pts = samples.get(tp, [])
        # the record at the committed offset, fetched by a sample of this group: its timestamp
        known = [x[2] for x in own.get(tp, []) if x[1] == o["offset"] and x[2] is not None]
        record_ms = max(known) if known else None
        method: str | None
        if as_of_ms is None:  # now: the newest sample, whatever its time
            now = L.lag_now(pts, o["offset"], record_ms)
            end, method, t_lag = now["log_end_offset"], L.EXACT, now["lag_ms"]
        else:
            found = L.log_end_at(pts, t_end)
            end, method = (None, None) if found is None else found
            t_lag = None if o["offset"] is None else L.time_lag_ms(pts, o["offset"], t_end, record_ms)
        after = L.end_at_or_after(pts, o["commit_timestamp_ms"] or 0)
        o.update(
            log_end_offset=end,
            log_end_method=method if end is not None else None,
            lag=L.lag_offsets(end, o["offset"]),
            lag_ms=t_lag,
            ahead_of_end=o["offset"] is not None and after is not None and o["offset"] > after,
        )
        window = [
            burrow.Commit(
                c.offset, c.commit_timestamp, L.lag_offsets(_end(L.log_end_at(pts, c.commit_timestamp)), c.offset)
            )
            for c in windows.get(tp, [])[-burrow.DEFAULT_WINDOW :]
        ]
        o["status"] = burrow.evaluate(window, t_end, o["lag"]) if window else burrow.UNKNOWN
    lags = [o["lag"] for o in offsets if o["lag"] is not None]
    t_lags = [o["lag_ms"] for o in offsets if o["lag_ms"] is not None]
    return {
        "total_lag": sum(lags) if lags else None,
        "max_lag": max(lags) if lags else None,
        "max_lag_ms": max(t_lags) if t_lags else None,
        "status": burrow.group_status(o["status"] for o in offsets),
        "partitions_with_lag": sum(1 for o in offsets if (o["lag"] or 0) > 0 and not o["ahead_of_end"]),
        "partitions_lag_known": len(lags),
        "ahead_of_end": sum(1 for o in offsets if o["ahead_of_end"]),
        "end_offsets_sampled": sampled,
        "topics_without_samples": sorted({o["topic"] for o in offsets if (o["topic"], o["partition"]) not in samples})
        if sampled
        else [],
    }


def _end(found: tuple[int, str] | None) -> int | None:
    return None if found is None else found[0]
