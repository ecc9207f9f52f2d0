"""Inferred rebalance start windows checked against the generator's truth (issue 17).

Rules:
- The log does not store when a classic group entered PreparingRebalance; the replay infers a
  window for it (``coordinator_core.loader.rebalance.start_window``). The simulator knows it: the
  generator's truth lists, per group, every entry into PreparingRebalance as ``[time_ms,
  generation, state left]`` (``rebalance_starts``).
- A ``rebalances`` row with an inferred start (``start_method`` set) is matched with the first
  entry into PreparingRebalance at its ``previous_generation`` (Kafka bumps the generation only
  on leaving PreparingRebalance) no earlier than the previous group record (``end_ms -
  since_previous_ms``) and no later than its ``end_ms``; without a previous record, the last
  such entry at or before ``end_ms`` (a group re-created after its death counts from 0 again).
- The replay is told the broker's ``group.initial.rebalance.delay.ms`` the generator used (the
  log does not store it) and nothing else of the truth. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord
from coordinator_core.events import Rebalance
from coordinator_core.loader.replay import replay_groups
from coordinator_core.settings import ReplaySettings


@dataclass(frozen=True, slots=True)
class WindowCheck:
    """One inferred rebalance start: its window, its estimate and the truth."""

    group_id: str
    kind: str  # the generator's group kind (app, static, ephemeral, ...)
    generation: int
    method: str
    earliest_ms: int | None
    latest_ms: int
    estimate_ms: int
    true_ms: int | None  # None: the truth has no matching start
    end_ms: int  # the rebalance's end (its group record)

    @property
    def contains(self) -> bool:
        """The window holds the true start."""
        t = self.true_ms
        return t is not None and (self.earliest_ms is None or self.earliest_ms <= t) and t <= self.latest_ms

    @property
    def width_ms(self) -> int | None:
        """``latest - earliest`` (None: unbounded below)."""
        return None if self.earliest_ms is None else self.latest_ms - self.earliest_ms

    @property
    def error_ms(self) -> int | None:
        """``|estimate - truth|``."""
        return None if self.true_ms is None else abs(self.estimate_ms - self.true_ms)


def true_start(
    starts: Sequence[Sequence[Any]], previous_generation: int | None, after_ms: int | None, end_ms: int
) -> int | None:
    """The truth's start of a rebalance (see the module rules)."""
    if previous_generation is None:
        return None
    at = [int(s[0]) for s in starts if s[1] == previous_generation and s[0] <= end_ms]
    if after_ms is not None:
        inside = [t for t in at if t >= after_ms]
        return inside[0] if inside else None
    return at[-1] if at else None


def check_windows(
    keys: Sequence[bytes],
    values: Sequence[bytes | None],
    partitions: Sequence[int],
    offsets: Sequence[int],
    timestamps: Sequence[int],
    truth: dict[str, Any],
) -> list[WindowCheck]:
    """Replay a generated log (its columns and ``truth``) and check every inferred start."""
    records = []
    for k, v, p, o, ts in zip(keys, values, partitions, offsets, timestamps, strict=True):
        rec = decode_record(k, v)
        records.append(LogRecord(p, o, ts, rec.key, rec.value))
    delay = int(truth["config"]["initial_rebalance_delay_ms"])
    settings = ReplaySettings(retention_ms=None, initial_rebalance_delay_ms=delay)
    out = replay_groups(records, assume_log_start=True, settings=settings, event_kinds=("rebalance",))
    checks: list[WindowCheck] = []
    for gid, result in sorted(out.items()):
        t = truth["groups"].get(gid)
        if t is None:
            continue
        for e in result.events:
            if not isinstance(e, Rebalance) or e.start_method is None or e.start_latest_ms is None:
                continue
            assert e.start_ms is not None
            after = None if e.since_previous_ms is None else e.end_ms - e.since_previous_ms
            checks.append(
                WindowCheck(
                    gid,
                    str(t["kind"]),
                    e.generation,
                    e.start_method,
                    e.start_earliest_ms,
                    e.start_latest_ms,
                    e.start_ms,
                    true_start(t["rebalance_starts"], e.previous_generation, after, e.end_ms),
                    e.end_ms,
                )
            )
    return checks
