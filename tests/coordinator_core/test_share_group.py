"""Share groups (KIP-932) replayed from broker bytes, following Kafka's ``ShareGroupTest`` and
``GroupMetadataManagerTest`` share-group scenarios (apache/kafka's group-coordinator tests; each
test names the ones it follows): state, epochs, members, assignments, rebalances, deletion,
tombstones for unknown members or groups, a record for a group of another type, and no offsets
here."""

from __future__ import annotations

from coordinator_core.loader.as_of_view import next_judgment_ms
from coordinator_core.loader.replay import new_snapshot, replay
from coordinator_core.modern.share.fold import ShareGroupFold
from coordinator_core.settings import ReplaySettings
from tests.coordinator_core.consumer_group_log import topic_id
from tests.coordinator_core.modern_group_log import ShareGroupLog, StreamsGroupLog
from tests.coordinator_core.stored import stored

DAY = 86_400_000


def _two_members() -> ShareGroupLog:
    log = ShareGroupLog()
    log.join("m1", ["orders"], {"m1": {"orders": [0, 1, 2]}})
    log.batch()
    log.state_metadata({"orders": [0, 1, 2]})
    # a second member: the simple assignor shares the partitions out; m1 learns at its heartbeat
    log.join("m2", ["orders"], {"m1": {"orders": [0, 1]}, "m2": {"orders": [1, 2]}})
    log.heartbeat("m1", {"orders": [0, 1]})
    return log


def test_fold_state_epochs_members_and_assignments() -> None:
    """``GroupMetadataManagerTest.testShareGroupMemberJoinsEmptyGroupWithAssignments`` (then a second
    member) and ``ShareGroupTest.testGroupState``: members at the group epoch, Stable."""
    log = _two_members()
    f = ShareGroupFold("sg")
    for r in log.records:
        f.apply(r)
    s = f.snapshot()
    assert (s.exists, s.state, s.group_epoch, s.target_assignment_epoch) == (True, "Stable", 2, 2)
    assert sorted(s.members) == ["m1", "m2"]
    oid = topic_id("orders")
    assert s.members["m1"].assigned_partitions == ((oid, (0, 1)),)
    assert s.members["m2"].assigned_partitions == ((oid, (1, 2)),)  # partition 1 is shared: no conflict
    assert s.members["m2"].client_id == "client-m2" and s.members["m2"].subscribed_topic_names == ("orders",)
    assert s.target_assignment["m1"] == ((oid, (0, 1)),)
    assert s.details.state_topics.initialized == ((oid, "orders", (0, 1, 2)),)


def test_replay_rows_rebalances_and_members() -> None:
    """The same joins as
    ``GroupMetadataManagerTest.testShareGroupMemberJoinsEmptyGroupWithAssignments``, through the
    replay: the state row, the rebalances (one per group epoch) and the member rows."""
    res = replay(new_snapshot("sg"), _two_members().records)
    row = res.snapshot.to_state_row()
    assert (row["state"], row["group_type"], row["generation"], row["protocol_type"]) == ("Stable", "share", 2, "share")
    assert row["offsets_kept_in"] == "__share_group_state" and row["offset_count"] == 0
    assert [m["member_id"] for m in row["members"]] == ["m1", "m2"]
    assert row["members"][1]["assigned_partitions"] == [
        {"topic": "orders", "partition": 1},
        {"topic": "orders", "partition": 2},
    ]
    rebalances = {e.event_key: e for e in res.events if e.kind == "rebalance"}  # last telling wins
    assert [(r.generation, r.cause, r.joined, r.protocol_type) for r in rebalances.values()] == [
        (1, "group_created", ("m1",), "share"),
        (2, "members_joined", ("m2",), "share"),
    ]
    second = list(rebalances.values())[1]
    assert second.partitions_moved == 2  # partitions 1 and 2 gained a holder
    assert ("m2", "orders", 2) in second.partitions_gained and second.partitions_lost == (("m1", "orders", 2),)
    assert second.end_ms == res.snapshot.last_timestamp_ms  # settled when m1 took its new epoch
    members = [e for e in res.events if e.kind == "group_member"]
    assert {m.member_id for m in members} >= {"m1", "m2"} and all(m.protocol == "simple" for m in members)
    types = set(res.event_group_types())
    assert types == {"share"}


def test_leave_then_empty_then_delete_in_kafkas_tombstone_order() -> None:
    """``GroupMetadataManagerTest.testShareGroupLeavingMemberBumpsGroupEpoch`` (each leave a bump),
    ``testShareGroupStates`` (Empty when the last member is gone) and ``testShareGroupDelete``
    (``createGroupTombstoneRecords``' order): Dead, one observed deletion."""
    log = _two_members()
    log.leave("m2")
    log.leave("m1")
    res = replay(new_snapshot("sg"), log.records)
    assert res.snapshot.to_state_row()["state"] == "Empty"
    assert res.snapshot.modern is not None and res.snapshot.modern.group_epoch == 4
    left = [e for e in res.events if e.kind == "rebalance" and e.left]
    assert [(e.generation, e.left, e.members_after) for e in left] == [(3, ("m2",), 1), (4, ("m1",), 0)]
    log.delete()
    res2 = replay(res.snapshot, log.records)
    row = res2.snapshot.to_state_row()
    assert (row["state"], row["exists"], row["group_type"]) == ("Dead", False, "share")
    deaths = [e for e in res2.events if e.kind == "group_lifecycle" and e.event == "group_deleted"]
    assert len(deaths) == 1 and deaths[0].status == "observed"
    assert not [e for e in res2.events if e.kind == "consumer_anomaly"]


def test_a_share_group_never_expires() -> None:
    """``ShareGroupTest.testOffsetExpirationCondition`` (a share group has no offset expiration
    condition: its offsets are not in ``__consumer_offsets``): never expires, never dies by expiry.
    """
    log = ShareGroupLog()
    log.join("m1", ["orders"], {"m1": {"orders": [0]}})
    log.leave("m1")
    settings = ReplaySettings(retention_ms=DAY)
    res = replay(new_snapshot("sg"), log.records, settings=settings, as_of_ms=log.now + 30 * DAY)
    row = res.snapshot.to_state_row(settings=settings)
    assert (row["state"], row["exists"], row["next_expiry_ms"]) == ("Empty", True, None)
    assert not [e for e in res.events if e.kind == "group_lifecycle" and e.event == "group_deleted"]
    assert next_judgment_ms(res.snapshot, settings) is None


def test_snapshot_bytes_round_trip_and_resume_equals_one_pass() -> None:
    """offsetlake's own (no Kafka counterpart): a resumed replay equals one pass."""
    log = _two_members()
    log.leave("m2")
    one = replay(new_snapshot("sg"), log.records)
    cut = 7
    first = replay(new_snapshot("sg"), log.records[:cut])
    back = stored(first.snapshot)
    assert back == first.snapshot
    second = replay(back, log.records[cut:])
    assert second.snapshot == one.snapshot
    assert first.events + second.events == one.events


def test_member_tombstone_before_its_assignment_tombstone_is_an_anomaly_applied_anyway() -> None:
    """No Kafka test; Kafka's check in ``GroupMetadataManager.replay(ShareGroupMemberMetadataKey,
    null)`` (``IllegalStateException`` while the member's assignments remain): told, applied anyway.
    """
    log = ShareGroupLog()
    log.join("m1", ["orders"], {"m1": {"orders": [0]}})
    log.batch()
    r = log.member_tombstone("m1")
    f = ShareGroupFold("sg")
    for x in log.records[:-1]:
        f.apply(x)
    told = f.apply(r)
    assert [e.reason for e in told if e.kind == "consumer_anomaly"] == [
        "member_tombstone_before_assignment_tombstone",
        "member_tombstone_before_target_tombstone",
    ]
    assert f.snapshot().members == {}


def test_tombstones_for_an_unknown_member_or_group_are_ignored() -> None:
    """``GroupMetadataManager.replay`` of a share tombstone looks the group and the member up
    without creating them and returns when either is missing ("If the group does not exist, we
    can ignore the tombstone"): nothing is created, a live group is unchanged."""
    log = ShareGroupLog()
    log.batch()
    log.current_tombstone("ghost")
    log.target_tombstone("ghost")
    log.member_tombstone("ghost")
    f = ShareGroupFold("sg")
    assert [e for r in log.records for e in f.apply(r)] == [] and not f.exists
    res = replay(new_snapshot("sg"), log.records)
    assert (res.snapshot.exists, res.events, res.stats.unsupported_skipped) == (False, [], 0)
    live = _two_members()
    before = replay(new_snapshot("sg"), live.records).snapshot.to_state_row()
    live.batch()
    live.current_tombstone("ghost")
    live.target_tombstone("ghost")
    live.member_tombstone("ghost")
    after = replay(new_snapshot("sg"), live.records)
    row = after.snapshot.to_state_row()
    assert {k: row[k] for k in ("state", "generation", "members")} == {
        k: before[k] for k in ("state", "generation", "members")
    }
    assert after.stats.type_conflicts == 0


def _then_a_streams_group(log: ShareGroupLog) -> ShareGroupLog:
    """A copy of ``log`` followed by a streams group's first heartbeat for the same id (the
    positions continue: the replay is idempotent on them)."""
    out = ShareGroupLog(log.group)
    streams = StreamsGroupLog(log.group)
    streams.join("a", {"a": {"0": [0]}}, first=True)
    for r in log.records + streams.records:
        out.add(r.key, r.value)
    return out


def test_a_record_for_a_live_group_of_another_type_is_counted_and_applied() -> None:
    """``getOrMaybeCreatePersistedShareGroup`` / ``getOrMaybeCreatePersistedStreamsGroup`` throw
    ``IllegalStateException`` ("Group X is not a share/streams group") for a group that exists
    with another type: Kafka's load stops there. The replay counts it
    (``ReplayStats.type_conflicts``) and applies the record: the group becomes its type. After
    the old group's tombstones (a real broker's order) there is nothing to count."""
    classic = ShareGroupLog()
    classic.classic_group(1, {"c1": {"orders": [0]}})
    classic.batch()
    classic.join("m1", ["orders"], {"m1": {"orders": [0]}})
    res = replay(new_snapshot("sg"), classic.records)
    assert res.stats.type_conflicts == 1
    assert (res.snapshot.to_state_row()["group_type"], res.snapshot.to_state_row()["state"]) == ("share", "Stable")

    share = _two_members()
    res = replay(new_snapshot("sg"), _then_a_streams_group(share).records)
    assert res.stats.type_conflicts == 1  # the topology record: the share group is live
    assert res.snapshot.to_state_row()["group_type"] == "streams"

    share.leave("m2")
    share.leave("m1")
    share.delete()
    res = replay(new_snapshot("sg"), _then_a_streams_group(share).records)
    assert res.stats.type_conflicts == 0
    assert (res.snapshot.to_state_row()["group_type"], res.snapshot.to_state_row()["state"]) == ("streams", "Stable")

    offsets_only = ShareGroupLog()  # a group only offset commits created is no group of another type
    offsets_only.commit("orders", 0, 5)
    offsets_only.batch()
    offsets_only.join("m1", ["orders"], {"m1": {"orders": [0]}})
    assert replay(new_snapshot("sg"), offsets_only.records).stats.type_conflicts == 0
