"""Issue 13's proof on generated logs shaped like the world: Kafka 3 and Kafka 4 coordinators,
compacted captures, idle partitions, offset-less groups, mass restarts, retention checks on the
broker's own schedule. The replay (coordinator ``auto``: taken from the log) must agree with
what the simulated broker did — every death it confirms, no prediction the log contradicts, the
final states of every group — and never tell a deletion the log does not show.
"""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord
from coordinator_core.events import GroupLifecycle, StateTransition
from coordinator_core.loader.replay import ReplayResult, replay_groups
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.generator import generate

pytestmark = pytest.mark.slow

WORLDS = [("old", "none"), ("new", "none"), ("new", "cleaned"), ("old", "cleaned")]


def _replay(coordinator: str, compaction: str, seed: int) -> tuple[dict[str, ReplayResult], dict[str, Any]]:
    # retention checks pinned to start + k * interval: one runs exactly at the end of the run,
    # so the simulator's final states are what the replay says as of the end
    log = generate(
        groups=16,
        hours=2.0,
        seed=seed,
        coordinator=coordinator,
        compaction=compaction,
        retention_check_phase_ms=0,
        retention_ms=30 * 60_000,
    )
    records = []
    for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps):
        rec = decode_record(k, v)
        records.append(LogRecord(p, o, ts, rec.key, rec.value))
    t = log.truth
    end = t["end_ms"]
    out = replay_groups(
        records,
        settings=ReplaySettings(
            retention_ms=t["retention_ms"], cleanup_interval_ms=t["retention_checks"]["interval_ms"]
        ),
        as_of_ms=end,
        log_end_ms=end,
    )
    return out, t


@pytest.mark.parametrize(("coordinator", "compaction"), WORLDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_the_replay_agrees_with_the_simulated_broker(coordinator: str, compaction: str, seed: int) -> None:
    out, truth = _replay(coordinator, compaction, seed)
    end = truth["end_ms"]
    interval = truth["retention_checks"]["interval_ms"]
    for gid, t in truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        r = out.get(gid)
        if r is None:  # compaction removed every record of a group the broker had deleted
            assert compaction == "cleaned" and not t["exists"], gid
            continue
        snap = r.snapshot
        # the broker kept everything the rules had due and no tombstone confirmed: none here
        assert snap.predictions_contradicted == 0, (gid, t["traits"])
        assert snap.exists == t["exists"], (gid, t)
        if t["exists"]:
            assert (snap.state.value, snap.generation) == (t["final_state"], t["generation"]), gid
        deaths = [e for e in r.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
        for d in deaths:
            if d.status == "predicted":  # a forecast: its cleanup window reaches past the end
                assert d.predicted_ms is not None and d.predicted_ms + interval + 60_000 > end, (gid, d)
            else:
                assert d.status in ("observed", "confirmed") and d.observed_ms is not None, (gid, d)
        # compaction may leave only a deleted group's tombstones: the deletion is then a fact
        # whose cause the capture no longer shows (observed), never invented
        kinds = ("confirmed",) if compaction == "none" else ("confirmed", "observed")
        told = {d.observed_ms for d in deaths if d.status in kinds}
        for death in t["deaths"]:
            if death["cause"] == "retention" and death["time_ms"] < end:
                assert death["time_ms"] in told, (gid, death, deaths)
        assert not [e for e in r.events if isinstance(e, StateTransition) and e.timestamp_source == "predicted"]


@pytest.mark.parametrize("coordinator", ["old", "new"])
def test_the_coordinator_is_recognised_from_kafka4s_creation_records(coordinator: str) -> None:
    out, truth = _replay(coordinator, "none", 3)
    classic = [r.snapshot for gid, r in out.items() if truth["groups"][gid]["protocol_type"] is not None]
    assert classic
    assert all(s.new_coordinator_seen for s in classic) == (coordinator == "new")
