"""The fold of a Kafka 4 consumer group (``coordinator_core.modern.consumer.fold``), on records encoded
to the bytes a broker writes (``consumer_group_log``). Each scenario follows a test of Kafka's
own suite (``GroupMetadataManagerTest``, ``ConsumerGroupTest``, ``OffsetMetadataManagerTest``,
named in the docstrings): the record sequence that test asserts, then the state Kafka's loader
rebuilds from it."""

from __future__ import annotations

import dataclasses

import pytest

from coordinator_core.codec.records import OffsetCommitKey, OffsetCommitValue
from coordinator_core.modern.consumer.events import (
    ConsumerAnomaly,
    ConsumerRebalance,
    ConsumerStateChange,
    ProtocolConversion,
)
from coordinator_core.modern.consumer.fold import ConsumerGroupFold, fold
from coordinator_core.modern.consumer.model import (
    DEFAULT_CONSUMER_ASSIGNOR,
    ConsumerGroupState,
    deletion_records,
    dump_snapshot,
    load_snapshot,
    offset_due_ms,
    plan_cleanup,
)
from coordinator_core.modern.consumer.rows import DEFAULT_SESSION_TIMEOUT_MS, as_rebalance, as_transition, member_events
from tests.coordinator_core.consumer_group_log import (
    UNRELEASED,
    UNREVOKED,
    ConsumerGroupLog,
    kafka4_consumer_group_life,
    topic_id,
)

FOO, BAR = topic_id("foo"), topic_id("bar")


def _of(events: list, cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]


def _rebalances(events: list) -> list[ConsumerRebalance]:
    """The rebalances as a MERGE on ``event_key`` leaves them: the last telling of each."""
    last: dict[str, ConsumerRebalance] = {}
    for e in _of(events, ConsumerRebalance):
        last[e.event_key] = e
    return list(last.values())


def _two_stable_members(log: ConsumerGroupLog) -> None:
    """m1 alone at epoch 1 (foo 0-5), then m2 joins and both reconcile at epoch 2."""
    log.join_first("m1", {"foo": range(6)}, assignor="range")
    log.batch()  # m2's first heartbeat: new target assignment at epoch 2
    log.member("m2", ["foo"], assignor="range")
    log.group_epoch(2)
    log.target("m1", {"foo": [0, 1, 2]})
    log.target("m2", {"foo": [3, 4, 5]})
    log.target_epoch(2)
    log.current("m2", 2, 0, {}, state=UNRELEASED)
    log.batch()  # m1 heartbeats: must revoke 3-5 first (stays at epoch 1)
    log.current("m1", 1, 0, {"foo": [0, 1, 2]}, state=UNREVOKED, revoking={"foo": [3, 4, 5]})
    log.batch()  # m1 acknowledges the revocation
    log.current("m1", 2, 1, {"foo": [0, 1, 2]})
    log.batch()  # m2 gets the released partitions
    log.current("m2", 2, 0, {"foo": [3, 4, 5]})


# ---------------------------------------------------------------------------------------------
# Join, reconciliation, states
# ---------------------------------------------------------------------------------------------
def test_first_member_join_is_stable_at_epoch_1() -> None:
    """GroupMetadataManagerTest.testMemberJoinsEmptyConsumerGroup: member subscription,
    subscription metadata, epoch 1, target assignment, target epoch 1, current assignment."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": range(6), "bar": range(3)}, assignor="range")
    snap, events = fold("cg", log.records)

    assert snap.group_type == "consumer" and snap.state is ConsumerGroupState.STABLE
    assert (snap.group_epoch, snap.target_assignment_epoch) == (1, 1)
    m = snap.members["m1"]
    assert (m.member_epoch, m.previous_member_epoch, m.state) == (1, 0, "STABLE")
    assert m.assigned_partitions == tuple(sorted([(FOO, (0, 1, 2, 3, 4, 5)), (BAR, (0, 1, 2))]))
    assert m.subscribed_topic_names == ("bar", "foo")  # Kafka sorts them
    assert m.server_assignor == "range" and snap.assignor == "range"
    assert snap.subscribed_topics == {"foo", "bar"}
    assert snap.topic_label(FOO) == "foo"
    # the states Kafka's replay walks through, record by record
    assert [(e.from_state, e.to_state) for e in _of(events, ConsumerStateChange)] == [
        (None, "Stable"),
        ("Stable", "Assigning"),
        ("Assigning", "Reconciling"),
        ("Reconciling", "Stable"),
    ]
    rebalances = _of(events, ConsumerRebalance)
    # told at the bump, again at the target epoch (6), again when Stable (the last 8)
    assert [r.assignment_epoch for r in rebalances] == [None, 1, 1]
    assert [r.reconciled_ms for r in rebalances] == [None, None, log.records[-1].timestamp_ms]
    done = rebalances[-1]
    assert (done.group_epoch, done.previous_group_epoch, done.cause) == (1, None, "group_created")
    assert done.joined == ("m1",) and done.partitions_moved == 0
    assert len(done.partitions_gained) == 9 and done.event_key == rebalances[0].event_key


def test_second_member_join_reconciles_through_revocation_to_stable() -> None:
    """GroupMetadataManagerTest.testReconciliationProcess / ConsumerGroupTest.testGroupState:
    the group is Reconciling while a member revokes (UNREVOKED_PARTITIONS) or waits for
    released partitions (UNRELEASED_PARTITIONS), Stable once all are STABLE at the target epoch."""
    log = ConsumerGroupLog()
    _two_stable_members(log)
    f = ConsumerGroupFold("cg")
    states = []
    for r in log.records:
        f.apply(r)
        states.append(f.state)
    # m2 at epoch 0 is not reconciled; the bump makes the group Assigning until the target
    # epoch, then it reconciles until m2 holds 3-5
    assert states[6:] == [
        ConsumerGroupState.RECONCILING,
        ConsumerGroupState.ASSIGNING,
        ConsumerGroupState.ASSIGNING,
        ConsumerGroupState.ASSIGNING,
        ConsumerGroupState.RECONCILING,
        ConsumerGroupState.RECONCILING,
        ConsumerGroupState.RECONCILING,
        ConsumerGroupState.RECONCILING,
        ConsumerGroupState.STABLE,
    ]
    snap = f.snapshot()
    assert snap.members["m2"].assigned_partitions == ((FOO, (3, 4, 5)),)
    assert snap.members["m1"].partitions_pending_revocation == ()
    assert snap.members["m1"].previous_member_epoch == 1


def test_second_member_join_rebalance_moves_three_partitions() -> None:
    """The epoch-2 bump is a rebalance: m2 joined, foo 3-5 moved from m1 to m2 (targets)."""
    log = ConsumerGroupLog()
    _two_stable_members(log)
    _, events = fold("cg", log.records)
    r = [e for e in _of(events, ConsumerRebalance) if e.group_epoch == 2]
    assert [e.assignment_epoch for e in r] == [None, 2, 2]
    done = r[-1]
    assert done.reconciled_ms == log.records[-1].timestamp_ms > done.assigned_ms > done.timestamp_ms - 1
    assert (done.previous_group_epoch, done.joined, done.left, done.cause) == (1, ("m2",), (), "members_joined")
    assert (done.members_before, done.members_after, done.assignor) == (1, 2, "range")
    assert done.partitions_moved == 3
    assert done.partitions_gained == tuple(("m2", "foo", p) for p in (3, 4, 5))
    assert done.partitions_lost == tuple(("m1", "foo", p) for p in (3, 4, 5))
    assert not _of(events, ConsumerAnomaly)


def test_group_state_follows_kafka_group_state_test() -> None:
    """ConsumerGroupTest.testGroupState, as records: members at epoch 1 with group epoch 1 and
    target epoch 0 -> Assigning; target epoch 2 -> Reconciling; both STABLE at 2 -> Stable;
    both removed -> Empty."""
    log = ConsumerGroupLog()
    log.current("member1", 1, 0)
    log.group_epoch(1)
    seen = [ConsumerGroupFold("cg")]
    f = seen[0]
    for r in log.records:
        f.apply(r)
    assert f.state is ConsumerGroupState.ASSIGNING
    for r in (log.current("member2", 1, 0), log.group_epoch(2)):
        f.apply(r)
    assert f.state is ConsumerGroupState.ASSIGNING
    f.apply(log.target_epoch(2))
    assert f.state is ConsumerGroupState.RECONCILING
    f.apply(log.current("member1", 2, 1))
    assert f.state is ConsumerGroupState.RECONCILING
    f.apply(log.current("member2", 2, 1, state=UNREVOKED))
    assert f.state is ConsumerGroupState.RECONCILING
    f.apply(log.current("member2", 2, 1))
    assert f.state is ConsumerGroupState.STABLE
    for m in ("member1", "member2"):
        f.apply(log.current_tombstone(m))
        f.apply(log.member_tombstone(m))
    assert f.state is ConsumerGroupState.EMPTY and f.snapshot().exists  # Empty, not Dead


# ---------------------------------------------------------------------------------------------
# Members leaving, static members
# ---------------------------------------------------------------------------------------------
def test_member_leaving_bumps_epoch_and_survivor_takes_its_partitions() -> None:
    """GroupMetadataManagerTest.testLeavingMemberBumpsGroupEpoch: current assignment, target
    assignment and subscription tombstones, then epoch + 1 (Assigning until the new target)."""
    log = ConsumerGroupLog()
    _two_stable_members(log)
    log.batch()
    log.leave("m2")
    snap, _ = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.ASSIGNING and list(snap.members) == ["m1"]
    log.batch()
    log.target("m1", {"foo": range(6)})
    log.target_epoch(3)
    log.current("m1", 3, 2, {"foo": range(6)})
    snap, events = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.STABLE and snap.group_epoch == 3
    done = [e for e in _of(events, ConsumerRebalance) if e.group_epoch == 3][-1]
    assert (done.left, done.joined, done.cause, done.partitions_moved) == (("m2",), (), "members_left", 3)
    assert not _of(events, ConsumerAnomaly)


def test_static_member_rejoining_with_new_id_is_no_rebalance() -> None:
    """GroupMetadataManagerTest.testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves and
    testStaticMemberGetsBackAssignmentUponRejoin: epoch -2 (no bump; the group reconciles while
    the member is away), then the old member's tombstones and the new member id copying its
    assignment, still at epoch 1."""
    log = ConsumerGroupLog()
    log.member("m1", ["foo"], instance="i1")
    log.group_epoch(1)
    log.target("m1", {"foo": [0, 1]})
    log.target_epoch(1)
    log.current("m1", 1, 0, {"foo": [0, 1]})
    log.batch()
    log.current("m1", -2, 0, {"foo": [0, 1]})  # LEAVE_GROUP_STATIC_MEMBER_EPOCH
    away, _ = fold("cg", log.records)
    assert away.state is ConsumerGroupState.RECONCILING and away.group_epoch == 1
    log.batch()
    log.current_tombstone("m1")
    log.target_tombstone("m1")
    log.member_tombstone("m1")
    log.member("m1b", ["foo"], instance="i1")
    log.target("m1b", {"foo": [0, 1]})
    log.current("m1b", 0, 0, {"foo": [0, 1]})
    log.current("m1b", 1, 0, {"foo": [0, 1]})
    snap, events = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.STABLE and snap.group_epoch == 1
    assert snap.static_members == {"i1": "m1b"} and list(snap.members) == ["m1b"]
    assert [r.group_epoch for r in _rebalances(events)] == [1]  # no bump: still epoch 1's rebalance
    assert not _of(events, ConsumerAnomaly)


# ---------------------------------------------------------------------------------------------
# Regular expressions, subscribed topics, offset expiry
# ---------------------------------------------------------------------------------------------
def test_regex_resolved_topics_are_subscribed_until_the_regex_tombstone() -> None:
    """ConsumerGroupTest.testUpdateAndRemoveRegularExpression: a resolved regex counts its topics
    once, on top of the members' names; GroupMetadataManager.replay(ConsumerGroupRegularExpression)."""
    log = ConsumerGroupLog()
    log.member("member1", ["foo", "bar", "zar"])
    log.member("member2", ["foo", "bar"])
    log.member("member3", regex="foo.*")
    log.regex("foo.*", ["foo", "foobar"])
    snap, _ = fold("cg", log.records)
    assert snap.subscribed_topics == {"foo", "bar", "zar", "foobar"}
    assert snap.members["member3"].subscribed_topic_regex == "foo.*"
    log.regex("foo.*", ["foo"])  # re-resolved: foobar is gone
    snap, _ = fold("cg", log.records)
    assert snap.subscribed_topics == {"foo", "bar", "zar"}
    log.regex("foobar", ["foobar"])
    log.regex_tombstone("foo.*")
    snap, _ = fold("cg", log.records)
    assert snap.subscribed_topics == {"foo", "bar", "zar", "foobar"}
    assert list(snap.resolved_regexes) == ["foobar"]
    for m in ("member1", "member2"):
        log.current_tombstone(m)
        log.member_tombstone(m)
    log.regex_tombstone("foobar")
    snap, _ = fold("cg", log.records)
    assert snap.subscribed_topics == frozenset() and snap.is_subscribed_to_topic("foo") is False


def test_offsets_of_subscribed_topics_never_expire_others_at_commit_plus_retention() -> None:
    """OffsetMetadataManagerTest.testCleanupExpiredOffsets with ConsumerGroupTest.
    testOffsetExpirationCondition / testIsSubscribedToTopic: subscribed topics are skipped, the
    others expire at commit timestamp + retention, and the group is kept (not Empty)."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"firstTopic": [0]})
    snap, _ = fold("cg", log.records)
    retention = 60_000
    commit = log.now
    offsets = {
        ("firstTopic", 0): OffsetCommitValue(100, "", commit),
        ("secondTopic", 0): OffsetCommitValue(100, "", commit),
        ("secondTopic", 1): OffsetCommitValue(100, "", commit + 500),
    }
    assert offset_due_ms(snap, offsets[("firstTopic", 0)], "firstTopic", retention) is None
    assert offset_due_ms(snap, offsets[("secondTopic", 0)], "secondTopic", retention) == commit + retention
    plan = plan_cleanup(snap, offsets, commit + retention, retention)
    assert plan.expired == ((("secondTopic", 0), commit + retention),)
    assert [r.key for r in plan.records] == [OffsetCommitKey("cg", "secondTopic", 0)]
    assert not plan.group_deleted
    plan = plan_cleanup(snap, offsets, commit + 10 * retention, retention)
    assert [tp for tp, _ in plan.expired] == [("secondTopic", 0), ("secondTopic", 1)]


def test_empty_consumer_group_expires_at_commit_base_then_is_deleted_with_kafka_tombstones() -> None:
    """GroupCoordinatorShardTest.testCleanupGroupMetadata, GroupMetadataManagerTest.
    testConsumerGroupMaybeDelete: an Empty group's offsets expire at commit + retention (never
    the classic Empty-state base); with none left the group's tombstones follow: target
    assignment epoch, resolved regexes, subscription metadata, group epoch."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    log.regex("orders-.*", ["orders-eu"])
    log.batch()
    log.leave("m1")
    snap, _ = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.EMPTY
    assert snap.subscribed_topics == {"orders-eu"}  # until its regex tombstone
    commit = log.now - 5_000
    offsets = {("foo", 0): OffsetCommitValue(7, "", commit), ("orders-eu", 0): OffsetCommitValue(9, "", commit)}
    plan = plan_cleanup(snap, offsets, commit + 1_000, 1_000)
    assert not plan.group_deleted and [tp for tp, _ in plan.expired] == [("foo", 0)]
    tombstones = deletion_records(snap)
    assert [(r.key.version, r.value) for r in tombstones] == [(6, None), (16, None), (4, None), (3, None)]
    assert plan_cleanup(snap, {}, commit, 1_000).records == tuple(tombstones)
    log.batch()
    for r in tombstones:
        log.add(r.key, r.value)
    dead, events = fold("cg", log.records)
    assert dead.state is ConsumerGroupState.DEAD and dead.deleted and dead.group_type is None
    assert not _of(events, ConsumerAnomaly)
    assert _of(events, ConsumerStateChange)[-1].to_state == "Dead"


def test_deletion_of_group_with_members_replays_without_anomaly() -> None:
    """GroupMetadataManagerTest.testLastConsumerProtocolMemberLeavingConsumerGroup (the tombstone
    half): current assignments, target assignments, target epoch, subscriptions, subscription
    metadata, group epoch - the order GroupMetadataManager.replay accepts."""
    log = ConsumerGroupLog()
    _two_stable_members(log)
    snap, _ = fold("cg", log.records)
    keys = [(r.key.version, getattr(r.key, "member_id", None)) for r in deletion_records(snap)]
    assert keys == [(8, "m1"), (8, "m2"), (7, "m1"), (7, "m2"), (6, None), (5, "m1"), (5, "m2"), (4, None), (3, None)]
    log.batch()
    for r in deletion_records(snap):
        log.add(r.key, r.value)
    dead, events = fold("cg", log.records)
    assert dead.deleted and not _of(events, ConsumerAnomaly)


# ---------------------------------------------------------------------------------------------
# Online upgrade / downgrade
# ---------------------------------------------------------------------------------------------
def _upgraded(log: ConsumerGroupLog) -> None:
    """GroupMetadataManagerTest.testConsumerGroupHeartbeatWithStableClassicGroup at generation 5:
    GroupMetadata tombstone, the converted member (classic protocol, epoch = generation),
    epoch 5, its target, target epoch 5, its assignment; then the joining member bumps to 6."""
    log.classic_group(5, {"m1": {"foo": [0], "bar": [0]}})
    log.batch()
    log.classic_tombstone()
    log.member("m1", ["bar", "foo"], assignor=None, classic_protocols=["range"])
    log.group_epoch(5)
    log.target("m1", {"foo": [0], "bar": [0]})
    log.target_epoch(5)
    log.current("m1", 5, 5, {"foo": [0], "bar": [0]})
    log.member("m2", ["bar", "foo"], assignor="range")
    log.partition_metadata({"foo": 1, "bar": 1})
    log.group_epoch(6)
    log.target("m2", {"bar": [0]})
    log.target("m1", {"foo": [0]})
    log.target_epoch(6)
    log.current("m2", 6, 0, {}, state=UNRELEASED)


def test_classic_group_upgraded_online_is_one_consumer_group() -> None:
    log = ConsumerGroupLog()
    _upgraded(log)
    snap, events = fold("cg", log.records)
    conv = _of(events, ProtocolConversion)
    assert [(c.from_type, c.to_type, c.generation) for c in conv] == [("classic", "consumer", 5)]
    assert snap.group_type == "consumer" and snap.state is ConsumerGroupState.RECONCILING
    assert snap.group_epoch == 6 and snap.num_classic_protocol_members == 1
    causes = [(e.cause, e.reconciled_ms is not None) for e in _rebalances(events)]
    assert causes == [("converted_from_classic", True), ("members_joined", False)]  # m2 waits for bar-0
    assert not _of(events, ConsumerAnomaly)


def test_consumer_group_downgraded_online_becomes_classic_with_its_epoch() -> None:
    """GroupMetadataManagerTest.testLastConsumerProtocolMemberLeavingConsumerGroup: the last
    consumer-protocol member leaves; Kafka writes the group's tombstones and a GroupMetadata value
    whose generation is the group epoch, in one batch."""
    log = ConsumerGroupLog()
    _upgraded(log)
    snap, _ = fold("cg", log.records)
    log.batch()
    for r in deletion_records(snap):
        log.add(r.key, r.value)
    log.classic_group(snap.group_epoch, {"m1": {"foo": [0]}})
    after, events = fold("cg", log.records)
    conv = _of(events, ProtocolConversion)
    assert [(c.from_type, c.to_type, c.generation, c.members) for c in conv][-1] == ("consumer", "classic", 6, 1)
    assert after.group_type == "classic" and after.classic_generation == 6
    assert after.state is ConsumerGroupState.DEAD and not after.members
    assert not _of(events, ConsumerAnomaly)


def test_consumer_records_for_a_non_simple_classic_group_are_an_anomaly_but_convert() -> None:
    """getOrMaybeCreatePersistedConsumerGroup: Kafka's loader refuses a consumer record for a
    classic group that has a protocol type (no GroupMetadata tombstone first)."""
    log = ConsumerGroupLog()
    log.classic_group(3, {"m1": {"foo": [0]}})
    log.batch()
    log.member("m9", ["foo"])
    snap, events = fold("cg", log.records)
    assert [a.reason for a in _of(events, ConsumerAnomaly)] == ["not_a_consumer_group"]
    assert snap.group_type == "consumer" and list(snap.members) == ["m9"]


def test_simple_classic_group_is_replaced_silently() -> None:
    """getOrMaybeCreatePersistedConsumerGroup: a simple classic group (no protocol type, Empty)
    is replaced by the consumer group without complaint."""
    log = ConsumerGroupLog()
    log.classic_group(0, {}, protocol_type="")
    log.batch()
    log.join_first("m1", {"foo": [0]})
    snap, events = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.STABLE and not _of(events, ConsumerAnomaly)
    assert not _of(events, ProtocolConversion)  # not in one batch: a new group, not a conversion


# ---------------------------------------------------------------------------------------------
# Records Kafka's loader refuses; the fold's contract
# ---------------------------------------------------------------------------------------------
def test_member_tombstone_before_its_assignment_tombstones_is_an_anomaly() -> None:
    """GroupMetadataManager.replay(ConsumerGroupMemberMetadata tombstone): IllegalStateException
    unless the current assignment (epoch -1) and target assignment tombstones came first."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    log.batch()
    log.member_tombstone("m1")
    snap, events = fold("cg", log.records)
    assert [a.reason for a in _of(events, ConsumerAnomaly)] == [
        "member_tombstone_before_assignment_tombstone",
        "member_tombstone_before_target_tombstone",
    ]
    assert not snap.members and snap.state is ConsumerGroupState.EMPTY


def test_group_tombstone_with_members_is_an_anomaly_and_removes_the_group() -> None:
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    log.batch()
    log.group_epoch_tombstone()
    snap, events = fold("cg", log.records)
    assert [a.reason for a in _of(events, ConsumerAnomaly)] == ["group_tombstone_not_empty"]
    assert snap.deleted and snap.state is ConsumerGroupState.DEAD


def test_partition_owned_by_two_members_is_an_anomaly() -> None:
    """ConsumerGroup.addPartitionEpochs: IllegalStateException when a partition is still owned."""
    log = ConsumerGroupLog()
    log.current("m1", 1, 0, {"foo": [0, 1]})
    log.current("m2", 1, 0, {"foo": [1]})
    _, events = fold("cg", log.records)
    assert [a.reason for a in _of(events, ConsumerAnomaly)] == ["partition_owned_twice"]


def test_tombstones_for_a_missing_group_or_member_are_ignored() -> None:
    log = ConsumerGroupLog()
    log.current_tombstone("ghost")
    log.member_tombstone("ghost")
    log.group_epoch_tombstone()
    snap, events = fold("cg", log.records)
    assert snap.group_type is None and not snap.deleted and events == []


def test_record_of_another_group_is_refused() -> None:
    log = ConsumerGroupLog(group="other")
    with pytest.raises(ValueError, match="cannot apply ConsumerGroupMemberMetadata of group 'other'"):
        ConsumerGroupFold("cg").apply(log.member("m1", ["foo"]))
    with pytest.raises(ValueError, match="OffsetCommit"):
        ConsumerGroupFold("other").apply(log.commit("foo", 0, 1))


def test_fold_resumed_from_any_split_equals_one_pass() -> None:
    """Snapshots carry the fold's bookkeeping: folding a log in two chunks (any cut) gives the
    same snapshot and the same events as one pass."""
    log = ConsumerGroupLog()
    _upgraded(log)
    log.batch()
    log.current("m1", 6, 5, {"foo": [0]})
    log.current("m2", 6, 0, {"bar": [0]})
    log.batch()
    log.leave("m2")
    whole, whole_events = fold("cg", log.records)
    for cut in range(len(log.records) + 1):
        first, ev1 = fold("cg", log.records[:cut])
        second, ev2 = fold("cg", log.records[cut:], first)
        assert second == whole, cut
        assert ev1 + ev2 == whole_events, cut
        # the same through the serialized form (streaming state between micro-batches)
        stored = load_snapshot(dump_snapshot(first))
        assert stored == first, cut
        assert fold("cg", log.records[cut:], stored) == (second, ev2), cut


def test_snapshot_dump_refuses_foreign_bytes() -> None:
    with pytest.raises(ValueError, match="not a consumer-group snapshot dump"):
        load_snapshot(b"\x02[]")
    with pytest.raises(ValueError, match="not a consumer-group snapshot dump"):
        load_snapshot(b"")


def test_consumer_group_with_members_is_never_dead_nor_assignorless() -> None:
    log = ConsumerGroupLog()
    log.member("m1", ["foo"], assignor=None)
    snap, _ = fold("cg", log.records)
    assert snap.exists and snap.state is not ConsumerGroupState.DEAD
    assert snap.assignor == DEFAULT_CONSUMER_ASSIGNOR and snap.preferred_server_assignor is None
    assert dataclasses.replace(snap, group_type=None).state is ConsumerGroupState.DEAD


# ---------------------------------------------------------------------------------------------
# More of Kafka's scenarios
# ---------------------------------------------------------------------------------------------
def test_static_member_rejoining_with_new_subscription_is_a_rebalance_of_the_same_member() -> None:
    """GroupMetadataManagerTest.testStaticMemberRejoinsWithNewSubscribedTopics: the replaced
    member's tombstones, the copy under the new member id, then its new subscription bumps the
    epoch - the instance id came back, nobody joined or left."""
    log = ConsumerGroupLog()
    log.member("m1", ["foo"], instance="i1")
    log.group_epoch(10)
    log.target("m1", {"foo": [0, 1]})
    log.target_epoch(10)
    log.current("m1", 10, 9, {"foo": [0, 1]})
    log.batch()
    log.current("m1", -2, 9, {"foo": [0, 1]})
    log.batch()
    log.current_tombstone("m1")
    log.target_tombstone("m1")
    log.member_tombstone("m1")
    log.member("m1b", ["foo"], instance="i1")
    log.target("m1b", {"foo": [0, 1]})
    log.current("m1b", 0, 0, {"foo": [0, 1]})
    log.member("m1b", ["foo", "bar"], instance="i1")
    log.partition_metadata({"foo": 2, "bar": 1})
    log.group_epoch(11)
    log.target("m1b", {"foo": [0, 1], "bar": [0]})
    log.target_epoch(11)
    log.current("m1b", 11, 0, {"foo": [0, 1], "bar": [0]})
    snap, events = fold("cg", log.records)
    done = [e for e in _of(events, ConsumerRebalance) if e.group_epoch == 11][-1]
    assert (done.joined, done.left, done.static_rejoined) == ((), (), ("i1",))
    assert done.cause == "subscription_or_metadata" and done.partitions_moved == 2
    assert snap.state is ConsumerGroupState.STABLE and snap.subscribed_topics == {"foo", "bar"}
    assert snap.members["m1b"].subscribed_topic_names == ("bar", "foo")


def test_empty_classic_group_converted_by_a_heartbeat_is_one_group() -> None:
    """GroupMetadataManagerTest.testConsumerGroupHeartbeatWithEmptyClassicGroup: the empty
    classic group's tombstone and the new consumer group's records in one write."""
    log = ConsumerGroupLog()
    log.classic_group(0, {}, protocol_type="")
    log.batch()
    log.classic_tombstone()
    log.join_first("m1", {"foo": [0], "bar": [0]})
    snap, events = fold("cg", log.records)
    conv = _of(events, ProtocolConversion)
    assert [(c.from_type, c.to_type, c.generation) for c in conv] == [("classic", "consumer", 0)]
    assert snap.state is ConsumerGroupState.STABLE and not _of(events, ConsumerAnomaly)


def test_classic_join_to_empty_consumer_group_converts_it_back() -> None:
    """GroupMetadataManagerTest.testClassicGroupJoinWithEmptyConsumerGroup: the empty consumer
    group's tombstones (target epoch, subscription metadata, group epoch), then the classic
    group's empty GroupMetadata record, in one write."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    log.batch()
    log.leave("m1")
    snap, _ = fold("cg", log.records)
    log.batch()
    for r in deletion_records(snap):
        log.add(r.key, r.value)
    log.classic_group(0, {}, protocol_type="")
    after, events = fold("cg", log.records)
    assert [(c.from_type, c.to_type) for c in _of(events, ProtocolConversion)] == [("consumer", "classic")]
    assert after.group_type == "classic" and not _of(events, ConsumerAnomaly)


def test_group_deleted_then_recreated_later_is_not_a_conversion() -> None:
    """DeleteGroups writes the tombstones in one write; a consumer group created by a later
    heartbeat is a new group, not an upgrade (the conversion is one write)."""
    log = ConsumerGroupLog()
    log.classic_group(4, {})
    log.batch()
    log.classic_tombstone()
    log.batch(60_000)
    log.join_first("m1", {"foo": [0]})
    snap, events = fold("cg", log.records)
    assert not _of(events, ProtocolConversion) and snap.state is ConsumerGroupState.STABLE
    assert [e.cause for e in _of(events, ConsumerRebalance)][-1] == "group_created"


def test_group_tombstone_before_target_epoch_tombstone_is_an_anomaly() -> None:
    """GroupMetadataManager.replay(ConsumerGroupMetadata tombstone): the target assignment epoch
    must be -1 (its tombstone replayed) even when no member is left."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    log.batch()
    log.leave("m1")
    log.batch()
    log.group_epoch_tombstone()
    _, events = fold("cg", log.records)
    assert [a.reason for a in _of(events, ConsumerAnomaly)] == ["group_tombstone_not_empty"]


def test_stable_group_whose_offsets_all_expire_is_not_deleted() -> None:
    """GroupMetadataManager.maybeDeleteGroup deletes only an Empty group: a Stable group whose
    only offsets (an unsubscribed topic) expired keeps living."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    snap, _ = fold("cg", log.records)
    plan = plan_cleanup(snap, {("gone", 0): OffsetCommitValue(1, "", 0)}, 10_000, 1_000)
    assert plan.expired == ((("gone", 0), 1_000),) and not plan.group_deleted
    assert [r.key.version for r in plan.records] == [1]


def test_member_subscription_names_are_sorted_as_kafka_sorts_them() -> None:
    """ConsumerGroupMember.Builder.setSubscribedTopicNames sorts the names."""
    log = ConsumerGroupLog()
    log.member("m1", ["zeta", "alpha", "mid"])
    snap, _ = fold("cg", log.records)
    assert snap.members["m1"].subscribed_topic_names == ("alpha", "mid", "zeta")


def test_regex_subscription_life_keeps_matched_topics_from_expiring_until_member_leaves() -> None:
    """A regex member's life: its subscription (regex, no names) and first epoch; the asynchronous
    resolution (ConsumerGroupRegularExpression) with an epoch bump; the new target; then the
    leave, where Kafka tombstones the now unused regex before the bump
    (``consumerGroupFenceMembers`` -> ``maybeDeleteResolvedRegularExpressions``)."""
    log = ConsumerGroupLog()
    log.member("m1", regex="orders-.*")
    log.group_epoch(1)
    log.target("m1", {})
    log.target_epoch(1)
    log.current("m1", 1, 0)
    joined, _ = fold("cg", log.records)
    assert joined.state is ConsumerGroupState.STABLE and joined.subscribed_topics == frozenset()
    log.batch()
    log.regex("orders-.*", ["orders-eu", "orders-us"])
    log.group_epoch(2)
    log.batch()
    log.target("m1", {"orders-eu": [0], "orders-us": [0, 1]})
    log.target_epoch(2)
    log.current("m1", 2, 1, {"orders-eu": [0], "orders-us": [0, 1]})
    snap, events = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.STABLE and snap.subscribed_topics == {"orders-eu", "orders-us"}
    commit = OffsetCommitValue(5, "", log.now)
    assert offset_due_ms(snap, commit, "orders-eu", 1_000) is None
    assert offset_due_ms(snap, commit, "payments", 1_000) == log.now + 1_000
    assert _rebalances(events)[-1].cause == "subscription_or_metadata"
    log.batch()
    log.current_tombstone("m1")
    log.target_tombstone("m1")
    log.member_tombstone("m1")
    log.regex_tombstone("orders-.*")
    log.group_epoch(3)
    empty, events = fold("cg", log.records)
    assert empty.state is ConsumerGroupState.EMPTY and empty.subscribed_topics == frozenset()
    assert offset_due_ms(empty, commit, "orders-eu", 1_000) == commit.commit_timestamp + 1_000
    assert _rebalances(events)[-1].left == ("m1",) and not _of(events, ConsumerAnomaly)


def test_kafka_41_replaces_subscription_metadata_by_hash_and_keeps_topic_names() -> None:
    """GroupMetadataManager.replay(ConsumerGroupPartitionMetadata): Kafka 4.1+ tombstones the 4.0
    subscription metadata at the next heartbeat and carries a MetadataHash in the group epoch
    record (KIP-1101); topic ids learned from the 4.0 record still name the topics."""
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0, 1]})
    log.batch()
    log.partition_metadata_tombstone()
    log.group_epoch(2, metadata_hash=0x5EED)
    log.target_epoch(2)
    log.current("m1", 2, 1, {"foo": [0, 1]})
    snap, events = fold("cg", log.records)
    assert not snap.has_subscription_metadata and snap.metadata_hash == 0x5EED
    assert snap.topic_label(FOO) == "foo" and snap.state is ConsumerGroupState.STABLE
    assert _rebalances(events)[-1].partitions_moved == 0 and not _of(events, ConsumerAnomaly)


# ---------------------------------------------------------------------------------------------
# Gold rows (the existing tables' columns)
# ---------------------------------------------------------------------------------------------
def test_consumer_rebalance_row_is_the_epoch_bump_to_stable() -> None:
    log = ConsumerGroupLog()
    _two_stable_members(log)
    _, events = fold("cg", log.records)
    first, second = _rebalances(events)
    row = as_rebalance(second).to_row()
    bump = next(r for r in log.records if r.key.version == 3 and r.value.epoch == 2)
    assert (row["generation"], row["previous_generation"], row["skipped_generations"]) == (2, 1, 0)
    assert (row["start_ms"], row["end_ms"]) == (bump.timestamp_ms, log.records[-1].timestamp_ms)
    assert row["since_previous_ms"] == bump.timestamp_ms - first.timestamp_ms
    assert (row["protocol_type"], row["protocol"], row["previous_protocol"]) == ("consumer", "range", "range")
    assert (row["joined"], row["left"], row["partitions_moved"], row["ended_empty"]) == (["m2"], [], 3, False)
    assert row["partitions_gained"][0] == {"member_id": "m2", "topic": "foo", "partition": 3}
    assert (row["log_partition"], row["log_offset"], row["event_key"]) == (0, bump.offset, f"0:{bump.offset}")


def test_consumer_state_change_row_is_an_observed_transition() -> None:
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0]})
    _, events = fold("cg", log.records)
    rows = [as_transition(e).to_row() for e in _of(events, ConsumerStateChange)]
    assert [(r["from_state"], r["to_state"], r["generation"]) for r in rows][-1] == ("Reconciling", "Stable", 1)
    assert all(r["observed"] and r["timestamp_source"] == "record" for r in rows)
    assert rows[-1]["event_key"] == f"0:{log.records[-1].offset}:0"


def test_consumer_member_rows_carry_epochs_assignments_and_regex_topics() -> None:
    log = ConsumerGroupLog()
    log.join_first("m1", {"foo": [0, 1]})
    log.member("m2", regex="orders-.*", instance="i2", classic_protocols=["range"])
    log.regex("orders-.*", ["orders-eu"])
    snap, _ = fold("cg", log.records)
    rows = {r.member_id: r.to_row() for r in member_events(snap, 0, 99, log.now)}
    m1, m2 = rows["m1"], rows["m2"]
    assert (m1["generation"], m1["session_timeout"], m1["rebalance_timeout"]) == (1, DEFAULT_SESSION_TIMEOUT_MS, 45_000)
    assert m1["assigned_partitions"] == [{"topic": "foo", "partition": 0}, {"topic": "foo", "partition": 1}]
    assert (m2["generation"], m2["group_instance_id"], m2["session_timeout"]) == (0, "i2", 10_000)
    assert m2["subscribed_topics"] == ["orders-eu"] and m2["event_key"] == "0:99:m2"


def test_upgraded_group_life_keeps_subscribed_offsets_and_expires_the_dropped_topic() -> None:
    """A whole Kafka 4 life (``kafka4_consumer_group_life``): the group records fold to one
    Stable consumer group at epoch 5; of its offsets only the topic no member subscribes to any
    more (audit) is due, at its commit time + retention."""
    log = kafka4_consumer_group_life()
    group_records = [r for r in log.records if r.key.version not in (0, 1)]
    offsets = {(r.key.topic, r.key.partition): r.value for r in log.records if r.key.version in (0, 1)}
    snap, events = fold("cg", group_records)
    assert (snap.state, snap.group_epoch, list(snap.members)) == (ConsumerGroupState.STABLE, 5, ["m2"])
    assert [(c.from_type, c.to_type, c.generation) for c in _of(events, ProtocolConversion)] == [
        ("classic", "consumer", 3)
    ]
    day = 86_400_000
    dues = {tp: offset_due_ms(snap, v, tp[0], day) for tp, v in offsets.items()}
    assert dues[("audit", 0)] == offsets[("audit", 0)].commit_timestamp + day
    assert all(dues[("orders", p)] is None for p in range(4))
    plan = plan_cleanup(snap, offsets, log.now + 2 * day, day)
    assert [tp for tp, _ in plan.expired] == [("audit", 0)] and not plan.group_deleted
