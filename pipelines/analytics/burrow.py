"""Burrow's partition evaluator, as a tiny pure-Python reference (no Spark).

Rules (linkedin/Burrow ``core/internal/evaluator/caching.go``, ``calculatePartitionStatus``):
- The window is the last N (default 10) commits of a partition at or before the evaluation
  time T, oldest first; each commit carries its offset, its time (ms) and its lag (offsets
  behind the log end at that commit; ``None`` when no end-offset sample exists).
- ``OK`` unless ``current_lag > 0`` and no lag in the window is 0; then, in order: ``REWIND``
  if an offset is lower than the one before it; ``STOP`` if ``T - last commit time`` exceeds
  ``last - first commit time``; ``STALL`` if every offset is equal; ``WARN`` if the lag never
  decreases between consecutive commits; else ``OK``.
- Unknown lag (our choice, Burrow always has a lag): REWIND needs no lag and is still
  reported when the offsets rewind; otherwise a window with any unknown lag (or an unknown
  current lag) is ``UNKNOWN`` — STOP/STALL/WARN would be false alarms for a caught-up idle
  consumer, which only the lag tells apart. An empty window is ``UNKNOWN`` too.
- The Spark SQL version (``pipelines.analytics.views.burrow_status_sql``) must agree with
  ``evaluate`` on every window (a test checks hand-made windows for every rule).
- Group status (Burrow's ``evaluateGroup``: a partition status above ERR counts as ERR, the
  group takes the worst): ERR when any partition is STOP, STALL or REWIND, else WARN when any is
  WARN, else OK; UNKNOWN when no partition has a known status (ours are UNKNOWN without lag).
  ``group_status`` is the one definition ``serve``, ``inspect`` and the report use;
  ``group_status_sql`` is its aggregate twin in the views (``group_status_now``), checked
  against it by a test.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import NamedTuple

OK, WARN, STOP, STALL, REWIND, UNKNOWN = "OK", "WARN", "STOP", "STALL", "REWIND", "UNKNOWN"
STATUSES = (OK, WARN, STOP, STALL, REWIND, UNKNOWN)
DEFAULT_WINDOW = 10


class Commit(NamedTuple):
    """One commit in a Burrow window."""

    offset: int
    time_ms: int
    lag: int | None


def evaluate(window: Sequence[Commit], now_ms: int, current_lag: int | None = None) -> str:
    """Burrow's status of one partition for ``window`` (oldest first) evaluated at ``now_ms``.

    Args:
        window: the last N commits at or before ``now_ms``.
        now_ms: evaluation time T.
        current_lag: the partition's lag at T; default: the lag of the last commit.
    """
    if not window:
        return UNKNOWN
    if current_lag is None:
        current_lag = window[-1].lag
    rewind = any(b.offset < a.offset for a, b in itertools.pairwise(window))
    lags = [c.lag for c in window]
    if current_lag is None or any(lag is None for lag in lags):
        return REWIND if rewind else UNKNOWN
    if not (current_lag > 0 and all(lag != 0 for lag in lags)):
        return OK
    if rewind:
        return REWIND
    first, last = window[0].time_ms, window[-1].time_ms
    if now_ms - last > last - first:
        return STOP
    if all(c.offset == window[0].offset for c in window):
        return STALL
    if all(b.lag >= a.lag for a, b in itertools.pairwise(window)):  # type: ignore[operator]
        return WARN
    return OK


ERR = "ERR"
GROUP_STATUSES = (OK, WARN, ERR, UNKNOWN)


def group_status(statuses: Iterable[str | None]) -> str:
    """Burrow's group status from its partitions' statuses (module rules)."""
    known = [s for s in statuses if s and s != UNKNOWN]
    if not known:
        return UNKNOWN
    if any(s in (STOP, STALL, REWIND) for s in known):
        return ERR
    return WARN if WARN in known else OK


def group_status_sql(col: str) -> str:
    """``group_status`` as a Spark SQL aggregate over the partition status column ``col``."""
    return (
        f"CASE WHEN count_if({col} IN ('STOP', 'STALL', 'REWIND')) > 0 THEN 'ERR' "
        f"WHEN count_if({col} = 'WARN') > 0 THEN 'WARN' "
        f"WHEN count_if({col} = 'OK') > 0 THEN 'OK' ELSE 'UNKNOWN' END"
    )
