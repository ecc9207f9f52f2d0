"""Streams groups (KIP-1071) replayed from broker bytes, following Kafka's ``StreamsGroupTest``
and ``GroupMetadataManagerTest`` streams-group scenarios: topology, state (NotReady, Assigning,
Reconciling, Stable, Empty, Dead), epochs, members with process ids and tasks, rebalances with
tasks moved, deletion, and the expiry of a streams group's offsets."""

from __future__ import annotations

from coordinator_core.codec.records import OffsetCommitKey, OffsetCommitValue
from coordinator_core.loader.replay import new_snapshot, replay
from coordinator_core.loader.snapshot_codec import deserialize_snapshot, serialize_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.streams.fold import StreamsGroupFold
from tests.coordinator_core.modern_group_log import S_UNREVOKED, StreamsGroupLog

DAY = 86_400_000


def _states(log: StreamsGroupLog) -> list[str]:
    f = StreamsGroupFold(log.group)
    out = []
    for r in log.records:
        f.apply(r)
        out.append(f.state)
    return out


def _two_members() -> StreamsGroupLog:
    log = StreamsGroupLog()
    log.join("a", {"a": {"0": [0, 1], "1": [0, 1]}}, first=True)
    # b joins: the sticky assignor gives b half of each subtopology, a must revoke first
    log.join("b", {"a": {"0": [0], "1": [0]}, "b": {"0": [1], "1": [1]}}, standby={"b": {"1": [0]}})
    log.batch()
    log.current("a", 2, {"0": [0], "1": [0]}, previous=1, state=S_UNREVOKED, pending={"0": [1], "1": [1]})
    log.batch()
    log.current("a", 2, {"0": [0], "1": [0]}, previous=1)
    return log


def test_state_as_streams_group_derives_it() -> None:
    log = StreamsGroupLog()
    log.batch()
    log.member("a")
    assert _states(log)[-1] == "NotReady"  # no topology yet
    log.topology()
    log.group_epoch(1, validated=None)
    assert _states(log)[-1] == "NotReady"  # topology epoch 0 not validated (-1)
    log.group_epoch(1, validated=0)
    assert _states(log)[-1] == "Assigning"  # group epoch 1 > target epoch 0
    log.target("a", {"0": [0]})
    log.target_epoch(1)
    assert _states(log)[-1] == "Reconciling"  # a is uninitialized
    log.current("a", 1, {"0": [0]})
    assert _states(log)[-1] == "Stable"


def test_fold_topology_members_tasks() -> None:
    log = _two_members()
    f = StreamsGroupFold("app")
    for r in log.records:
        f.apply(r)
    s = f.snapshot()
    assert (s.state, s.group_epoch, s.target_assignment_epoch) == ("Stable", 2, 2)
    t = s.details.topology
    assert t.source_topics == {"input", "app-KSTREAM-REPARTITION-repartition"}
    assert "app-store-changelog" in t.required_topics and "app-store-changelog" not in t.source_topics
    b = s.members["b"]
    assert (b.process_id, b.user_endpoint, b.client_tags, b.rebalance_timeout_ms) == (
        "process-b",
        "localhost:7070",
        (("zone", "a"),),
        30_000,
    )
    assert list(b.assigned_tasks.by_role()) == [("active", "0", 1), ("active", "1", 1), ("standby", "1", 0)]
    assert s.members["a"].tasks_pending_revocation.active == ()


def test_replay_rows_reconciling_then_stable_and_tasks_moved() -> None:
    res = replay(new_snapshot("app"), _two_members().records)
    row = res.snapshot.to_state_row()
    assert (row["state"], row["group_type"], row["protocol_type"], row["protocol"]) == (
        "Stable",
        "streams",
        "streams",
        "sticky",
    )
    states = [(e.from_state, e.to_state) for e in res.events if e.kind == "state_transition"]
    # b's metadata first (uninitialized: Reconciling), then the epoch bump, within one write
    assert ("Stable", "Reconciling") in states and ("Reconciling", "Assigning") in states
    assert states[-1] == ("Reconciling", "Stable")
    rebalances = {e.event_key: e for e in res.events if e.kind == "rebalance"}
    second = list(rebalances.values())[1]
    assert (second.generation, second.joined, second.cause, second.partitions_moved) == (2, ("b",), "members_joined", 2)
    assert second.partitions_lost == (("a", "0", 1), ("a", "1", 1))
    assert second.end_ms == res.snapshot.last_timestamp_ms  # Stable once a revoked its tasks
    members = [e for e in res.events if e.kind == "group_member" and e.event_key.startswith(second.event_key[:2])]
    rows = {m.member_id: m.to_row() for m in members}
    assert rows["b"]["process_id"] == "process-b" and rows["b"]["assigned_partitions"] is None
    assert rows["b"]["assigned_tasks"][-1] == {"role": "standby", "subtopology_id": "1", "partition": 0}


def test_offsets_expire_by_the_modern_rule() -> None:
    """Subscribed (source) topics never expire while the group has members; changelog-like
    and other topics at commit + retention; everything once the group is Empty; then the
    Empty group without offsets dies and Kafka writes its tombstones."""
    log = StreamsGroupLog()
    log.join("a", {"a": {"0": [0]}}, first=True)
    log.batch()
    log.add(OffsetCommitKey("app", "input", 0), OffsetCommitValue(5, "", log.now))
    log.add(OffsetCommitKey("app", "other", 0), OffsetCommitValue(6, "", log.now))
    settings = ReplaySettings(retention_ms=DAY)
    res = replay(new_snapshot("app"), log.records, settings=settings, as_of_ms=log.now + 2 * DAY)
    assert sorted(res.snapshot.offsets) == [("input", 0)]
    log.leave("a")
    res = replay(new_snapshot("app"), log.records, settings=settings, as_of_ms=log.now + 2 * DAY)
    assert res.snapshot.offsets == {}
    deaths = [e for e in res.events if e.kind == "group_lifecycle" and e.event == "group_deleted"]
    assert [d.status for d in deaths] == ["predicted"]


def test_delete_and_bytes_round_trip() -> None:
    log = _two_members()
    log.leave("b")
    log.leave("a")
    log.delete()
    one = replay(new_snapshot("app"), log.records)
    row = one.snapshot.to_state_row()
    assert (row["state"], row["exists"], row["group_type"]) == ("Dead", False, "streams")
    assert not [e for e in one.events if e.kind == "consumer_anomaly"]
    for cut in (3, 9, len(log.records) - 2):
        first = replay(new_snapshot("app"), log.records[:cut])
        back = deserialize_snapshot(serialize_snapshot(first.snapshot))
        assert back == first.snapshot
        second = replay(back, log.records[cut:])
        assert second.snapshot == one.snapshot
        assert first.events + second.events == one.events
