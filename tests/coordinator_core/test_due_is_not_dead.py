"""Issue 33's proof on generated worlds with the broker's own seeded cleanup schedule (each
``__consumer_offsets`` partition's retention check at a random phase, as a real broker runs it):
due is not dead. At as-ofs between records (not only at records) the replay's view of every
group is compared with what the simulated broker did:

- no group is Dead in the view before its tombstone is in the log or its cleanup window has
  passed (a removal only due is a forecast, the group Empty with its offsets);
- a group the broker has deleted by T and the view still shows carries a death forecast whose
  window contains the broker's actual deletion time;
- every forecast offset removal the broker carried out lies inside the forecast's window;
- at the end of the run every group's state equals the broker's.
"""

from __future__ import annotations

import bisect
from typing import Any

import pytest

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord, OffsetCommitKey
from coordinator_core.events import GroupLifecycle, OffsetExpiration
from coordinator_core.loader.replay import replay_groups
from coordinator_core.loader.snapshot import GroupSnapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.generator import generate

pytestmark = pytest.mark.slow

MINUTE = 60_000


def _world(coordinator: str, seed: int) -> tuple[list[LogRecord], dict[str, Any]]:
    log = generate(groups=12, hours=1.5, seed=seed, coordinator=coordinator, retention_ms=20 * MINUTE)
    records = []
    for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True):
        rec = decode_record(k, v)
        records.append(LogRecord(p, o, ts, rec.key, rec.value))
    return records, log.truth


def _as_ofs(records: list[LogRecord], truth: dict[str, Any], interval: int) -> list[int]:
    """Every 47 s across the run (between records), and just before, at and after each deletion
    the broker made and each end of a cleanup window that follows one."""
    start, end = truth["start_ms"], truth["end_ms"]
    times = set(range(start + 1, end, 47_000))
    for g in truth["groups"].values():
        for d in g["deaths"]:
            times.update({d["time_ms"] - 1, d["time_ms"], d["time_ms"] + 1})
    times.add(end)
    return sorted(t for t in times if start < t <= end)


def _broker_dead_at(truth_deaths: list[int], group_times: list[int], t: int) -> int | None:
    """The broker's deletion time of the group if it is deleted at ``t`` (a death at or before
    ``t`` with no record of the group after it up to ``t``), else None."""
    past = [d for d in truth_deaths if d <= t]
    if not past:
        return None
    d = past[-1]
    later = bisect.bisect_right(group_times, d)
    if later < len(group_times) and group_times[later] <= t:
        return None  # re-created (a new commit or join after the deletion)
    return d


@pytest.mark.parametrize(("coordinator", "seed"), [("new", 3), ("old", 4), ("new", 5)])
def test_due_is_not_dead_at_every_as_of(coordinator: str, seed: int) -> None:  # long: one walk over the run's as-ofs
    records, truth = _world(coordinator, seed)
    interval = truth["retention_checks"]["interval_ms"]
    settings = ReplaySettings(retention_ms=truth["retention_ms"], cleanup_interval_ms=interval)
    by_group: dict[str, list[int]] = {}
    tombstones: dict[tuple[str, str, int], list[int]] = {}
    for r in records:
        if r.key.group is not None:
            by_group.setdefault(r.key.group, []).append(r.timestamp_ms)
        if isinstance(r.key, OffsetCommitKey) and r.value is None:
            tombstones.setdefault((r.key.group, r.key.topic, r.key.partition), []).append(r.timestamp_ms)
    deaths = {g: sorted(d["time_ms"] for d in t["deaths"]) for g, t in truth["groups"].items()}
    snaps: dict[str, GroupSnapshot] = {}
    i = 0
    checked_forecasts = checked_due = 0  # forecasts the broker carried out; due, not dead
    for t in _as_ofs(records, truth, interval):
        j = i
        while j < len(records) and records[j].timestamp_ms <= t:
            j += 1
        out = replay_groups(records[i:j], snapshots=snaps, settings=settings, as_of_ms=t, log_end_ms=t)
        i = j
        for gid, res in out.items():
            snaps[gid] = res.snapshot
            for e in res.events:
                if isinstance(e, OffsetExpiration) and e.status == "predicted":
                    assert e.forecast_from_ms is not None and e.forecast_to_ms is not None
                    assert e.forecast_from_ms <= t, (gid, e)  # only what is due is forecast
                    done = [x for x in tombstones.get((gid, e.topic, e.partition), []) if x >= e.forecast_from_ms]
                    if done:  # the broker removed it: inside the window
                        assert done[0] <= e.forecast_to_ms, (gid, e, done[0])
                        checked_forecasts += 1
        for gid, snap in snaps.items():
            first = by_group.get(gid)
            if not first or first[0] > t:
                continue
            dead = _broker_dead_at(deaths.get(gid, []), by_group[gid], t)
            row = snap.to_state_row(settings=settings)
            if not snap.exists:
                # Dead in the view: the broker deleted it by then (a fact or a window passed)
                assert dead is not None, (gid, t, snap.state)
            elif dead is not None:
                # the broker deleted it and the view still has it: only while a forecast's window
                # containing the deletion is open at t
                lo, hi = row["death_forecast_from_ms"], row["death_forecast_to_ms"]
                assert lo is not None and hi is not None, (gid, t, dead)
                assert lo <= dead <= hi and t < hi, (gid, t, dead, lo, hi)
            elif row["death_forecast_from_ms"] is not None:
                # due, not dead: the group is still there (as at the broker) and the broker's next
                # deletion of it, unless a record of the group comes first, is inside the window
                lo, hi = row["death_forecast_from_ms"], row["death_forecast_to_ms"]
                later = [d for d in deaths.get(gid, []) if d > t]
                times = by_group[gid]
                nxt = bisect.bisect_right(times, t)
                if later and (nxt == len(times) or times[nxt] >= later[0]):
                    assert lo <= later[0] <= hi, (gid, t, later[0], lo, hi)
                checked_due += 1
    end = truth["end_ms"]
    for gid, g in truth["groups"].items():
        if g["final_state"] == "NeverCreated" or gid not in snaps:
            continue
        snap = snaps[gid]
        # the broker's describe at the end of the run: a group whose offsets are only due is
        # still there (Empty); the view says so
        if _broker_dead_at(deaths.get(gid, []), by_group.get(gid, []), end) is None:
            assert snap.exists == g["exists"], (gid, g["final_state"], snap.state)
            if g["exists"]:
                assert snap.state.value == g["final_state"], gid
                assert snap.offset_count == g["live_offsets"], gid
    assert checked_forecasts > 0  # the world has forecasts the broker then carried out
    assert checked_due > 0  # and as-ofs where a group's deletion was due, not yet done


def test_a_forecast_death_is_not_in_the_lifecycle_as_a_fact() -> None:
    records, truth = _world("new", 3)
    interval = truth["retention_checks"]["interval_ms"]
    settings = ReplaySettings(retention_ms=truth["retention_ms"], cleanup_interval_ms=interval)
    end = truth["end_ms"]
    out = replay_groups(records, settings=settings, as_of_ms=end, log_end_ms=end)
    for gid, res in out.items():
        for e in res.events:
            if isinstance(e, GroupLifecycle) and e.event == "group_deleted" and e.status == "predicted":
                assert e.forecast_from_ms is not None and e.forecast_to_ms is not None
                assert not e.observed and e.log_offset is None
                # still within its window at the end: the group is still there
                if e.forecast_to_ms > end:
                    assert res.snapshot.exists, gid
