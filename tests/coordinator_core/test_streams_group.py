"""Streams groups (KIP-1071) replayed from broker bytes, following Kafka's ``StreamsGroupTest``
and ``GroupMetadataManager``'s replay (apache/kafka's group-coordinator; each test names what it
follows): topology and its tombstone, state (NotReady, Assigning, Reconciling, Stable, Empty,
Dead), epochs, members with process ids and instance ids, active/standby/warm-up tasks,
rebalances with tasks moved, deletion, tombstones for unknown members or groups, and the
expiry of a streams group's offsets."""

from __future__ import annotations

import dataclasses

from coordinator_core.codec.records import OffsetCommitKey, OffsetCommitValue
from coordinator_core.loader.replay import new_snapshot, replay
from coordinator_core.settings import ReplaySettings
from coordinator_core.streams.fold import StreamsGroupFold
from tests.coordinator_core.modern_group_log import S_UNREVOKED, StreamsGroupLog
from tests.coordinator_core.stored import stored

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
    """``StreamsGroupTest.testGroupState`` and ``testStateTransitionMetrics``: NotReady without a
    (validated) topology, Assigning while the group epoch is ahead of the target's, Reconciling
    until the member has its epoch, Stable."""
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
    """``StreamsGroupTest.testUpdatingMemberUpdatesProcessId`` and ``testAsDescribedGroup``: the
    topology, the member's process id, endpoint, client tags, and its tasks by role."""
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
    """``StreamsGroupTest.testGroupState``: a member with unrevoked tasks keeps the group Reconciling;
    the rebalance moves the tasks a revokes."""
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
    """``StreamsGroupTest.testOffsetExpirationCondition`` (commit timestamp + retention).
    Subscribed (source) topics never expire while the group has members; changelog-like
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
    """``StreamsGroupTest.testCreateGroupTombstoneRecords`` and ``testValidateDeleteGroup`` (deleted
    once Empty): Dead without an anomaly; a resumed replay equals one pass (offsetlake's own)."""
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
        back = stored(first.snapshot)
        assert back == first.snapshot
        second = replay(back, log.records[cut:])
        assert second.snapshot == one.snapshot
        assert first.events + second.events == one.events


def test_warmup_tasks_are_assigned_and_told_as_their_role() -> None:
    """``StreamsGroupTest.testUpdatingMemberUpdatesProcessId``: a member's tasks are a tuple of
    active, standby and warm-up tasks (``TasksTuple``); a warm-up task is told under its role in
    the fold, the member rows and the target assignment."""
    log = StreamsGroupLog()
    log.batch()
    log.topology()
    log.member("a")
    log.group_epoch(1)
    log.target("a", {"0": [0]}, warmup={"1": [0, 1]})
    log.target_epoch(1)
    log.current("a", 1, {"0": [0]}, previous=0, warmup={"1": [0, 1]})
    res = replay(new_snapshot("app"), log.records)
    m = res.snapshot.modern
    assert m is not None and res.snapshot.to_state_row()["state"] == "Stable"
    a = m.members["a"]
    assert list(a.assigned_tasks.by_role()) == [("active", "0", 0), ("warmup", "1", 0), ("warmup", "1", 1)]
    rows = [e.to_row() for e in res.events if e.kind == "group_member"]
    assert rows[-1]["assigned_tasks"] == [
        {"role": "active", "subtopology_id": "0", "partition": 0},
        {"role": "warmup", "subtopology_id": "1", "partition": 0},
        {"role": "warmup", "subtopology_id": "1", "partition": 1},
    ]


def test_a_static_member_carries_its_instance_id_and_leaves_with_its_tombstones() -> None:
    """``StreamsGroupTest.testGetStaticMemberByInstanceId`` and ``testRemoveStaticMember``: the
    member metadata record carries the instance id (KIP-345 for streams); the member's rows say
    it, and its tombstones remove it like any member."""
    log = StreamsGroupLog()
    log.batch()
    log.topology()
    log.member("a", instance="instance-a")
    log.group_epoch(1)
    log.target("a", {"0": [0]})
    log.target_epoch(1)
    log.current("a", 1, {"0": [0]}, previous=0)
    res = replay(new_snapshot("app"), log.records)
    m = res.snapshot.modern
    assert m is not None and m.members["a"].instance_id == "instance-a"
    assert [e.to_row()["group_instance_id"] for e in res.events if e.kind == "group_member"] == ["instance-a"]
    log.leave("a")
    res = replay(new_snapshot("app"), log.records)
    m = res.snapshot.modern
    assert m is not None and m.members == {} and res.snapshot.to_state_row()["state"] == "Empty"
    rebalances = {e.event_key: e for e in res.events if e.kind == "rebalance"}
    assert [(r.generation, r.joined, r.left) for r in rebalances.values()] == [(1, ("a",), ()), (2, (), ("a",))]


def test_a_topology_tombstone_leaves_the_members_not_ready() -> None:
    """``StreamsGroupTest.testGroupState``: a group with members and no topology is NotReady;
    the topology tombstone (``StreamsGroup.createGroupTombstoneRecords`` writes it, Kafka's
    replay sets the topology to none) takes a Stable group back there, without an anomaly."""
    log = StreamsGroupLog()
    log.join("a", {"a": {"0": [0]}}, first=True)
    log.batch()
    log.topology_tombstone()
    f = StreamsGroupFold("app")
    told = [e for r in log.records for e in f.apply(r)]
    assert f.state == "NotReady" and f.exists and sorted(f.members) == ["a"]
    changes = [(e.from_state, e.to_state) for e in told if e.kind == "consumer_state_change"]
    assert changes[-1] == ("Stable", "NotReady")
    assert not [e for e in told if e.kind == "consumer_anomaly"]
    assert f.snapshot().details.topology is None


def test_tombstones_for_an_unknown_member_or_group_are_ignored() -> None:
    """``GroupMetadataManager.replay`` of a tombstone looks the group up without creating it and
    the member without creating it, and returns on ``GroupIdNotFoundException`` /
    ``UnknownMemberIdException`` ("If the group does not exist, we can ignore the tombstone"):
    tombstones for a group never written create nothing, for an unknown member change nothing."""
    log = StreamsGroupLog()
    log.batch()
    log.current_tombstone("ghost")
    log.target_tombstone("ghost")
    log.member_tombstone("ghost")
    log.topology_tombstone()
    f = StreamsGroupFold("app")
    assert [e for r in log.records for e in f.apply(r)] == [] and not f.exists
    res = replay(new_snapshot("app"), log.records)
    assert (res.snapshot.exists, res.events, res.stats.unsupported_skipped) == (False, [], 0)
    live = _two_members()
    before = replay(new_snapshot("app"), live.records).snapshot
    live.batch()
    live.current_tombstone("ghost")
    live.target_tombstone("ghost")
    live.member_tombstone("ghost")
    after = replay(new_snapshot("app"), live.records)
    assert after.snapshot.modern is not None and before.modern is not None
    assert dataclasses.replace(after.snapshot.modern, last_timestamp_ms=0) == dataclasses.replace(
        before.modern, last_timestamp_ms=0
    )
    assert after.stats.type_conflicts == 0 and after.snapshot.to_state_row()["state"] == "Stable"
