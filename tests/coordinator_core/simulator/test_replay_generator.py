"""Replaying the generator's log (``coordinator_core.simulator.generator``: groups run through the
coordinator simulator) gives what the simulator knows about every group (its ``truth()``).

Without retention the replay must reproduce every live group exactly (state, generation,
offsets) and every deleted group whose tombstones are in the log. With the simulator's
retention the expiry decider must predict every expiry the log later confirms, no later than
the log's tombstone and at most one cleanup interval earlier, and kill the groups the simulator
expired (including generation-0 groups, which get no group tombstone).
"""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord
from coordinator_core.events import GroupLifecycle, OffsetExpiration, StateTransition
from coordinator_core.loader.replay import ReplayResult, replay_groups
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.generator import generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def generated() -> tuple[list[LogRecord], dict[str, Any]]:
    # Retention checks pinned to start + k * 10 min, so one runs exactly at the end of the 1-hour
    # run and the simulator's final states are the states a replay predicts as of the end.
    log = generate(groups=10, hours=1.0, seed=5, retention_check_phase_ms=0)
    records = []
    for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps):
        rec = decode_record(k, v)
        records.append(LogRecord(p, o, ts, rec.key, rec.value))
    return records, log.truth


def test_replay_without_retention_matches_every_group_the_log_describes(
    generated: tuple[list[LogRecord], dict[str, Any]],
) -> None:
    records, truth = generated
    out = replay_groups(records, assume_log_start=True)
    kinds = set()
    for gid, t in truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        snap = out[gid].snapshot
        kinds.add(t["kind"])
        if t["final_state"] == "Dead" and t["generation"] == 0:
            # expired simple group: the old coordinator writes no group tombstone for it
            assert snap.offset_count == 0, gid
            continue
        assert snap.state.value == t["final_state"], gid
        assert snap.generation == t["generation"], gid
        assert snap.offset_count == t["live_offsets"], gid
        if t["exists"]:
            assert snap.member_count == t["members"], gid
            assert snap.protocol == t["protocol"], gid
        # completed rebalances (into Stable), rebalances that ended Empty, group records
        events = out[gid].events
        assert sum(isinstance(e, StateTransition) and e.to_state == "Stable" for e in events) == t["rebalances"], gid
        emptied = sum(isinstance(e, GroupLifecycle) and e.event == "group_emptied" for e in events)
        assert emptied == t["went_empty"], gid
        stats = out[gid].stats
        assert stats.group_records + stats.group_tombstones == t["group_records"], gid
    assert {"app", "simple", "ephemeral"} <= kinds


def test_expiry_predictions_agree_with_the_logs_tombstones(generated: tuple[list[LogRecord], dict[str, Any]]) -> None:
    records, truth = generated
    retention = truth["retention_ms"]
    interval = truth["config"]["retention_check_interval_ms"]
    out: dict[str, ReplayResult] = replay_groups(
        records, assume_log_start=True, settings=ReplaySettings(retention_ms=retention), as_of_ms=truth["end_ms"]
    )
    confirmed = 0
    deleted_topics = {(d["topic"], d["time_ms"]) for d in truth.get("deleted_topics", [])}
    for gid, t in truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        result = out[gid]
        final = {e.event_key: e for e in result.events if isinstance(e, OffsetExpiration)}
        for e in final.values():
            if e.status == "confirmed":
                confirmed += 1
                assert e.predicted_ms is not None and e.observed_ms is not None
                assert 0 <= e.observed_ms - e.predicted_ms <= interval, (gid, e)
            # nothing the log removed by retention went unpredicted (topic deletions are not retention)
            by_topic_deletion = (e.topic, e.observed_ms) in deleted_topics
            assert not (
                e.status == "observed"
                and t["expired_ms"] is not None
                and t["deleted_ms"] is None
                and not by_topic_deletion
            ), (gid, e)
        assert result.snapshot.state.value == t["final_state"], gid
        if t["expired_ms"] is not None:
            deaths = [e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
            assert deaths and deaths[0].predicted_ms is not None, gid
            assert 0 <= t["expired_ms"] - deaths[0].predicted_ms <= interval, gid
    assert confirmed > 0
