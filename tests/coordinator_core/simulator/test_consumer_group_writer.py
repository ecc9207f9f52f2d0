"""``ConsumerGroupWriter`` writes a consumer group's life as Kafka 4 does; its records, encoded to
bytes and folded (``consumer_group.fold``), rebuild the writer's own group: the writer and the
fold check each other."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_core.modern.consumer.events import ConsumerAnomaly, ConsumerRebalance, ProtocolConversion
from coordinator_core.modern.consumer.fold import fold
from coordinator_core.modern.consumer.model import ConsumerGroupState, dump_snapshot, load_snapshot
from coordinator_core.simulator.consumer_group_writer import UNRELEASED_PARTITIONS, ConsumerGroupWriter, topic_id_for
from tests.coordinator_core.consumer_group_log import ConsumerGroupLog

TOPICS = {"foo": 6, "bar": 3}


def _types(records: list) -> list[int]:
    return [r.key.version for r in records]


def test_first_join_writes_kafkas_sequence() -> None:
    """GroupMetadataManagerTest.testMemberJoinsEmptyConsumerGroup: 5, 4, 3, 7, 6, 8."""
    w = ConsumerGroupWriter("cg", TOPICS)
    recs = w.join("m1", ["foo", "bar"], assignor="range")
    assert _types(recs) == [5, 4, 3, 7, 6, 8]
    assert recs[-1].value.member_epoch == 1 and recs[-1].value.state == 0


def test_second_join_waits_for_released_partitions() -> None:
    """The joining member's target is still owned by m1: UNRELEASED_PARTITIONS at the new epoch
    with nothing assigned (testReconciliationProcess); same subscribed topics, no 4."""
    w = ConsumerGroupWriter("cg", TOPICS)
    w.join("m1", ["foo"])
    recs = w.join("m2", ["foo"])
    assert _types(recs) == [5, 3, 7, 7, 6, 8]
    last = recs[-1].value
    assert (last.member_epoch, last.state, last.assigned_partitions) == (2, UNRELEASED_PARTITIONS, ())
    batches = w.reconcile()
    # m1 revokes (UNREVOKED, epoch kept); m2 still waits (CurrentAssignmentBuilder's
    # updateMemberEpoch(target) makes its previous epoch 2); m1 reaches epoch 2; m2 takes 3-5
    assert [
        [(r.key.member_id, r.value.state, r.value.member_epoch, r.value.previous_member_epoch) for r in b]
        for b in batches
    ] == [[("m1", 1, 1, 1)], [("m2", 2, 2, 2)], [("m1", 0, 2, 1)], [("m2", 0, 2, 2)]]


def test_leave_writes_tombstones_then_bump() -> None:
    """GroupMetadataManagerTest.testLeavingMemberBumpsGroupEpoch: 8, 7, 5 tombstones, 3."""
    w = ConsumerGroupWriter("cg", TOPICS, subscription_metadata=False)
    w.join("m1", ["foo"])
    w.join("m2", ["foo"])
    w.reconcile()
    recs = w.leave("m2")
    assert [(r.key.version, r.value is None) for r in recs] == [(8, True), (7, True), (5, True), (3, False)]


def test_written_life_folds_back_to_the_writers_group() -> None:
    w = ConsumerGroupWriter("cg", TOPICS)
    log = ConsumerGroupLog()
    log.write(w.join("m1", ["foo", "bar"]))
    log.write(w.join("m2", ["foo"]))
    for b in w.reconcile():
        log.write(b)
    snap, events = fold("cg", log.records)
    assert snap.state is ConsumerGroupState.STABLE and not [e for e in events if isinstance(e, ConsumerAnomaly)]
    foo = topic_id_for("foo")
    assert snap.members["m2"].assigned_partitions == ((foo, (3, 4, 5)),)
    moved = [e for e in events if isinstance(e, ConsumerRebalance) and e.assignment_epoch == 2]
    assert moved[-1].partitions_moved == 3 and moved[-1].partitions_gained[0] == ("m2", "foo", 3)


def test_upgrade_then_downgrade_written_are_two_conversions() -> None:
    w = ConsumerGroupWriter("cg", TOPICS)
    log = ConsumerGroupLog()
    log.classic_group(7, {"m1": {"foo": range(6)}})
    log.write(w.upgrade_from_classic(7, {"m1": (["foo"], frozenset({("foo", p) for p in range(6)}))}))
    log.write(w.join("m2", ["foo"]))
    for b in w.reconcile():
        log.write(b)
    mid, _ = fold("cg", log.records)
    assert mid.state is ConsumerGroupState.STABLE and mid.group_epoch == 8
    log.write(w.leave("m2"))
    log.write(w.downgrade_to_classic())
    snap, events = fold("cg", log.records)
    conv = [(e.from_type, e.to_type, e.generation) for e in events if isinstance(e, ProtocolConversion)]
    assert conv == [("classic", "consumer", 7), ("consumer", "classic", 9)]
    assert snap.group_type == "classic" and snap.classic_generation == 9
    assert not [e for e in events if isinstance(e, ConsumerAnomaly)]


_step = st.one_of(
    st.tuples(
        st.just("join"),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from([("foo",), ("bar",), ("foo", "bar")]),
        st.sampled_from([None, "i1", "i2"]),
    ),
    st.tuples(st.just("leave"), st.sampled_from(["a", "b", "c", "d"]), st.just(()), st.just(None)),
    st.tuples(st.just("heartbeat"), st.sampled_from(["a", "b", "c", "d"]), st.just(()), st.just(None)),
    st.tuples(st.just("reconcile"), st.just(""), st.just(()), st.just(None)),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_step, max_size=14), st.booleans())
def test_any_written_life_folds_without_anomaly_and_matches_the_writer(steps: list, metadata: bool) -> None:
    w = ConsumerGroupWriter("cg", TOPICS, subscription_metadata=metadata)
    log = ConsumerGroupLog()
    for op, member, topics, instance in steps:
        if op == "join" and member not in w.members:
            if instance is not None and any(m.instance_id == instance for m in w.members.values()):
                instance = None
            log.write(w.join(member, topics, instance_id=instance))
        elif op == "leave" and member in w.members:
            log.write(w.leave(member))
        elif op == "heartbeat" and member in w.members:
            log.write(w.heartbeat(member))
        elif op == "reconcile":
            for b in w.reconcile():
                log.write(b)
        snap, events = fold("cg", log.records)
        assert not [e for e in events if isinstance(e, ConsumerAnomaly)]
        assert load_snapshot(dump_snapshot(snap)) == snap
        assert set(snap.members) == set(w.members)
        if w.members:
            assert snap.state is not ConsumerGroupState.DEAD and snap.group_epoch == w.group_epoch
        assert snap.subscribed_topics == {t for m in w.members.values() for t in m.topics}
    for b in w.reconcile():
        log.write(b)
    snap, _ = fold("cg", log.records)
    if w.members:
        assert snap.state is ConsumerGroupState.STABLE
        for mid, m in snap.members.items():
            assert m.assigned_partitions == snap.target_assignment[mid]
    created = bool(log.records)
    for mid in sorted(w.members):
        log.write(w.leave(mid))
    if created:
        log.write(w.delete())
    dead, events = fold("cg", log.records)
    assert dead.state is ConsumerGroupState.DEAD and dead.deleted is created
    assert not [e for e in events if isinstance(e, ConsumerAnomaly)]
