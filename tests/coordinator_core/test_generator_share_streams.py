"""The generator writes share groups (KIP-932) and streams groups (KIP-1071) in a mixed Kafka 4
cluster (``generate --mixed``), with their truth, and the replay of its bytes tells that truth:
state, group and assignment epochs, members; each group's own fold sees nothing Kafka's loader
would refuse."""

from __future__ import annotations

from collections import defaultdict

import pytest

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord, OffsetCommitKey
from coordinator_core.loader.replay import replay_groups
from coordinator_core.modern.share.fold import ShareGroupFold
from coordinator_core.simulator.generator import GeneratedLog, generate
from coordinator_core.streams.fold import StreamsGroupFold


@pytest.fixture(scope="module")
def mixed() -> GeneratedLog:
    return generate(
        8, 1.0, seed=4, coordinator="new", consumer_groups=0.5, conversions=0.3, share_groups=3, streams_groups=2
    )


@pytest.fixture(scope="module")
def records(mixed: GeneratedLog) -> list[LogRecord]:
    out = []
    for k, v, p, o, ts in zip(mixed.keys, mixed.values, mixed.partitions, mixed.offsets, mixed.timestamps):
        r = decode_record(k, v, modern=True)
        out.append(LogRecord(p, o, ts, r.key, r.value))
    return out


def test_the_replay_tells_the_generators_truth(mixed: GeneratedLog, records: list[LogRecord]) -> None:
    """State, epochs, members, a streams group's processes, topics and committed offsets."""
    truth = mixed.truth["modern_groups"]
    assert {t["group_type"] for t in truth.values()} == {"share", "streams"} and len(truth) == 5
    assert any(t["final_state"] == "Dead" for t in truth.values())  # a share group deleted
    results = replay_groups(records, assume_log_start=True)
    for gid, t in truth.items():
        snap = results[gid].snapshot
        row = snap.to_state_row()
        assert (row["state"], row["group_type"], row["unsupported_records"]) == (t["final_state"], t["group_type"], 0)
        assert results[gid].stats.type_conflicts == 0, gid  # nothing Kafka's loader would refuse
        m = snap.modern
        assert m is not None
        if t["final_state"] == "Dead":
            assert not m.exists and m.deleted
            continue
        assert (m.group_epoch, m.target_assignment_epoch, sorted(m.members)) == (
            t["group_epoch"],
            t["assignment_epoch"],
            t["members"],
        ), gid
        if t["group_type"] == "streams":
            assert sorted({x.process_id for x in m.members.values()}) == t["processes"]
            # its commits: every source partition, none expired (subscribed, never Empty)
            got = {f"{tp}:{p}": o[0].offset for (tp, p), o in snap.offsets.items()}
            assert got == t["offsets"] and {k.rsplit(":", 1)[0] for k in got} == set(t["source_topics"]), gid
            assert sorted(row["subscribed_topics"]) == sorted(t["source_topics"])
        rebalances = {e.event_key: e for e in results[gid].events if e.kind == "rebalance"}
        assert max(r.generation for r in rebalances.values()) == t["group_epoch"]


def test_no_record_is_one_kafkas_loader_would_refuse(mixed: GeneratedLog, records: list[LogRecord]) -> None:
    by: dict[str, list[LogRecord]] = defaultdict(list)
    for r in records:
        by[str(r.key.group)].append(r)
    for gid, t in mixed.truth["modern_groups"].items():
        f = ShareGroupFold(gid) if t["group_type"] == "share" else StreamsGroupFold(gid)
        told = [e for r in by[gid] if not isinstance(r.key, OffsetCommitKey) for e in f.apply(r)]  # the fold's own
        assert not [e for e in told if e.kind == "consumer_anomaly"], gid
        states = {e.to_state for e in told if e.kind == "consumer_state_change"}
        assert "Stable" in states and (t["group_type"] == "share" or "Reconciling" in states), gid
