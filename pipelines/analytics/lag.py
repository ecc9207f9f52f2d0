"""Lag from end-offset samples, as a tiny pure-Python reference (no Spark): the rules the
``consumer_lag`` / ``partition_status_*`` views (Spark SQL), ``inspect`` and ``serve`` follow.

Rules (a partition's samples are points (time ms, log end offset) of ``partition_end_offsets``):
- Log end at time t (the lag of a commit at t, in offsets), kafka-lag-exporter's lookup table
  read the other way (its ``LookupTable``: points of (offset, time), linear between two points):
  a sample at t -> that sample (``exact``); between two samples -> linear interpolation in time,
  floored (``interpolated``); after the newest -> the newest (``previous``: Burrow's rule, the
  latest broker offset known); before the oldest -> the oldest (``next``: an upper bound of the
  lag, the only thing the log can say before sampling started). No sample -> unknown.
- Lag "now" uses the NEWEST sample of the partition, whatever its time: a sampler that ran after
  the last batch run is the freshest truth (``lag_now``).
- Lag in offsets = max(log end - committed offset, 0); a committed offset ABOVE the log end of a
  sample at or after the commit is flagged ``ahead_of_end`` (the log end never decreases: the
  topic was recreated or truncated). Lag reads 0 then, never negative.
- Lag in time of committed offset o at time t: t - the time the record at o was written. Exact
  when a sample of the group fetched that record's timestamp (``capture-end-offsets``:
  ``committed_record_timestamp`` with ``committed_offset`` = o, whenever it was sampled); else
  kafka-lag-exporter's ``lookup``: with the samples known at t, the time the log end reached o
  is interpolated between the two samples whose ends bracket o; o at or above the newest end ->
  0 (caught up); o below the oldest end -> extrapolated along the line through the oldest and
  newest samples (when the log grew between them), else unknown. Floored to whole ms, >= 0.
- Lag "now" is evaluated at the newest sample's time.
- Log ends are assumed not to decrease between samples (a truncated or recreated topic breaks
  the interpolation; the ``ahead_of_end`` flag says so). The SQL twin
  (``pipelines.analytics.lag_sql.lag_ctes``) computes the same with windows, in doubles: equal to
  the ms / offset for logs below 2**53 / span.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import NamedTuple

EXACT, INTERPOLATED, PREVIOUS, NEXT = "exact", "interpolated", "previous", "next"


class Sample(NamedTuple):
    """One end-offset sample of a partition."""

    time_ms: int
    log_end: int


def _sorted(samples: Sequence[Sample]) -> list[Sample]:
    # one end per time: the largest (partition-level and per-group rows of one sampling run)
    by_time: dict[int, int] = {}
    for s in samples:
        by_time[s.time_ms] = max(s.log_end, by_time.get(s.time_ms, s.log_end))
    return [Sample(t, e) for t, e in sorted(by_time.items())]


def log_end_at(samples: Sequence[Sample], t_ms: int) -> tuple[int, str] | None:
    """The log end at ``t_ms`` and how it was found (module rules); None without samples."""
    pts = _sorted(samples)
    if not pts:
        return None
    times = [p.time_ms for p in pts]
    i = bisect.bisect_right(times, t_ms)  # pts[i-1].time <= t < pts[i].time
    if i == 0:
        return pts[0].log_end, NEXT
    before = pts[i - 1]
    if before.time_ms == t_ms:
        return before.log_end, EXACT
    if i == len(pts):
        return before.log_end, PREVIOUS
    after = pts[i]
    span = after.time_ms - before.time_ms
    return before.log_end + (after.log_end - before.log_end) * (t_ms - before.time_ms) // span, INTERPOLATED


def end_at_or_after(samples: Sequence[Sample], t_ms: int) -> int | None:
    """The log end of the first sample at or after ``t_ms`` (None: none)."""
    for s in _sorted(samples):
        if s.time_ms >= t_ms:
            return s.log_end
    return None


def lag_offsets(log_end: int | None, offset: int | None) -> int | None:
    """max(log end - offset, 0); None when either is unknown."""
    if log_end is None or offset is None:
        return None
    return max(log_end - offset, 0)


def time_lag_ms(samples: Sequence[Sample], offset: int, t_ms: int, record_ms: int | None = None) -> int | None:
    """How long ago (at ``t_ms``) the record at ``offset`` was written (module rules; ``record_ms``:
    its timestamp when a sample fetched it); None: unknown."""
    if record_ms is not None:
        return max(t_ms - record_ms, 0)
    pts = [p for p in _sorted(samples) if p.time_ms <= t_ms]
    if not pts:
        return None
    if offset >= pts[-1].log_end:
        return 0
    ends = [p.log_end for p in pts]
    i = bisect.bisect_right(ends, offset)  # ends[i-1] <= offset < ends[i]
    if i == 0:
        a, b = pts[0], pts[-1]
        if b.log_end <= a.log_end:
            return None
    else:
        a, b = pts[i - 1], pts[i]
    produced = a.time_ms + (offset - a.log_end) * (b.time_ms - a.time_ms) / (b.log_end - a.log_end)
    return max(math.floor(t_ms - produced), 0)


def lag_now(
    samples: Sequence[Sample], offset: int | None, record_ms: int | None = None
) -> dict[str, int | bool | None]:
    """The partition's lag from its NEWEST sample: log end, sampled at, lag in offsets and in
    time (at the sample time), committed offset ahead of the end."""
    pts = _sorted(samples)
    if not pts or offset is None:
        return {"log_end_offset": None, "sampled_ms": None, "lag": None, "lag_ms": None, "ahead_of_end": False}
    newest = pts[-1]
    return {
        "log_end_offset": newest.log_end,
        "sampled_ms": newest.time_ms,
        "lag": lag_offsets(newest.log_end, offset),
        "lag_ms": time_lag_ms(pts, offset, newest.time_ms, record_ms),
        "ahead_of_end": offset > newest.log_end,
    }
