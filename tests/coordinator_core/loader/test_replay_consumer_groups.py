"""Kafka 4 consumer groups (KIP-848) through the replay: a generated log, encoded to the bytes a
broker writes (``consumer_group_log``), replays as a live consumer group - never a simple or
Dead group while it has members - whose subscribed idle offsets are not predicted to expire."""

from __future__ import annotations

from coordinator_core.events import GroupLifecycle, OffsetExpiration, Rebalance, StateTransition
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.consumer_group_writer import ConsumerGroupWriter
from coordinator_core.state import GroupState
from tests.coordinator_core.consumer_group_log import ConsumerGroupLog, kafka4_consumer_group_life
from tests.coordinator_core.stored import stored

DAY = 86_400_000
SETTINGS = ReplaySettings(retention_ms=DAY)


def test_kafka4_log_replays_as_a_live_consumer_group() -> None:
    log = kafka4_consumer_group_life()
    result = replay(new_snapshot("cg"), log.records, settings=SETTINGS)
    snap = result.snapshot
    assert snap.group_type == "consumer" and snap.exists and snap.state is not GroupState.DEAD
    assert snap.protocol_type == "consumer" and snap.unsupported_records == 0
    row = snap.to_state_row(settings=SETTINGS)
    assert (row["state"], row["generation"], row["protocol"], row["member_count"]) == ("Stable", 5, "uniform", 1)
    assert row["members"][0]["member_id"] == "m2" and row["subscribed_topics"] == ["orders"]
    assert [m["topic"] for m in row["members"][0]["assigned_partitions"]] == ["orders"] * 4
    assert len(snap.offsets) == 5
    assert snap.consumer is not None and snap.consumer.group_epoch == 5


def test_subscribed_idle_offsets_of_a_consumer_group_are_not_predicted_to_expire() -> None:
    """Weeks after the last commit only the topic no member subscribes to (audit) is predicted
    gone, at commit + retention; the subscribed orders offsets stay, the group stays."""
    log = kafka4_consumer_group_life()
    result = replay(new_snapshot("cg"), log.records, settings=SETTINGS, as_of_ms=log.now + 30 * DAY)
    gone = [e for e in result.events if isinstance(e, OffsetExpiration) and e.status == "predicted"]
    audit = next(r for r in log.records if r.key.version == 1 and r.key.topic == "audit")
    assert [(e.topic, e.predicted_ms) for e in gone] == [("audit", audit.value.commit_timestamp + DAY)]
    assert sorted(result.snapshot.offsets) == [("orders", p) for p in range(4)]
    deaths = [e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
    assert [d.cause for d in deaths] == ["group_tombstone"]  # the classic group's, at the upgrade only


def test_empty_consumer_group_expires_by_commit_time_and_then_dies() -> None:
    """ConsumerGroup.offsetExpirationCondition: an Empty consumer group's offsets expire at their
    commit time + retention (not when it became Empty); with none left it is deleted."""
    w = ConsumerGroupWriter("cg", {"orders": 2})
    log = ConsumerGroupLog()
    log.write(w.join("m1", ["orders"]))
    log.commit("orders", 0, 7)
    commit_ms = log.now
    log.write(w.leave("m1"), advance_ms=DAY // 2)
    empty = replay(new_snapshot("cg"), log.records, settings=SETTINGS).snapshot
    assert (empty.group_type, empty.to_state_row()["state"], empty.generation) == ("consumer", "Empty", 2)
    assert empty.state_timestamp_ms == log.now  # Empty since the leave, yet the base is the commit
    result = replay(new_snapshot("cg"), log.records, settings=SETTINGS, as_of_ms=log.now + 2 * DAY)
    gone = [e for e in result.events if isinstance(e, OffsetExpiration) and e.status == "predicted"]
    assert [(e.topic, e.predicted_ms) for e in gone] == [("orders", commit_ms + DAY)]
    deaths = [e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
    assert [d.status for d in deaths] == ["predicted"]


def test_consumer_group_rebalances_and_states_are_gold_rows() -> None:
    log = kafka4_consumer_group_life()
    result = replay(new_snapshot("cg"), log.records)
    bumps = {f"{r.partition}:{r.offset}" for r in log.records if r.key.version == 3}  # the epoch records
    rebalances = {e.event_key: e for e in result.events if isinstance(e, Rebalance) and e.event_key in bumps}
    rows = sorted((r.generation, r.protocol_type, r.cause, r.partitions_moved) for r in rebalances.values())
    assert [r[0] for r in rows] == [3, 4, 5] and {r[1] for r in rows} == {"consumer"}
    assert rows[0][2] == "converted_from_classic" and rows[2][2] == "members_left"
    states = [e.to_state for e in result.events if isinstance(e, StateTransition)]
    assert states[-1] == "Stable" and "Reconciling" in states


def test_consumer_group_snapshot_survives_the_codec_and_any_split() -> None:
    log = kafka4_consumer_group_life()
    whole = replay(new_snapshot("cg"), log.records, settings=SETTINGS).snapshot
    assert whole.group_type == "consumer" and whole.consumer is not None
    assert stored(whole) == whole
    for cut in range(0, len(log.records) + 1, 3):
        first = replay(new_snapshot("cg"), log.records[:cut], settings=SETTINGS).snapshot
        back = stored(first)
        assert replay(back, log.records[cut:], settings=SETTINGS).snapshot == whole, cut


def test_downgraded_group_is_classic_again_with_its_epoch_as_generation() -> None:
    w = ConsumerGroupWriter("cg", {"orders": 2})
    log = ConsumerGroupLog()
    log.classic_group(4, {"c1": {"orders": [0, 1]}})
    log.write(w.upgrade_from_classic(4, {"c1": (["orders"], frozenset({("orders", 0), ("orders", 1)}))}))
    log.write(w.join("m2", ["orders"]))
    for b in w.reconcile():
        log.write(b)
    mid = replay(new_snapshot("cg"), log.records).snapshot
    assert mid.group_type == "consumer" and mid.generation == 5
    log.write(w.leave("m2"))
    log.write(w.downgrade_to_classic())
    snap = replay(new_snapshot("cg"), log.records).snapshot
    assert snap.group_type == "classic" and snap.state is GroupState.STABLE and snap.generation == 6
    assert snap.to_state_row()["state"] == "Stable" and snap.protocol == "range"


def test_consumer_group_keeps_kafka4_expiry_rule_whatever_the_classic_rule_set() -> None:
    """Consumer groups exist only on Kafka 4 brokers: the classic rule sets (here KIP-211's,
    under which a Stable group expires nothing, and pre-2.1's, under which everything expires)
    do not apply to them - the unsubscribed topic still expires, the subscribed ones do not."""
    log = kafka4_consumer_group_life()
    audit = next(r for r in log.records if r.key.version == 1 and r.key.topic == "audit")
    for rules in ("2.1-2.3", "pre-2.1"):
        settings = ReplaySettings(retention_ms=DAY, rules=rules)
        result = replay(new_snapshot("cg"), log.records, settings=settings, as_of_ms=log.now + 30 * DAY)
        gone = [e for e in result.events if isinstance(e, OffsetExpiration) and e.status == "predicted"]
        assert [(e.topic, e.predicted_ms) for e in gone] == [("audit", audit.value.commit_timestamp + DAY)], rules


def test_a_deleted_consumer_group_stays_a_consumer_group_in_its_state_row() -> None:
    """The group's tombstones (DeleteGroups) remove it: its state row says Dead, and of which
    kind the group was (consumer), not the classic default of a group the log no longer holds."""
    w = ConsumerGroupWriter("cg", {"orders": 2})
    log = ConsumerGroupLog()
    log.write(w.join("m1", ["orders"]))
    log.write(w.leave("m1"))
    log.write(w.delete())
    snap = replay(new_snapshot("cg"), log.records, settings=SETTINGS).snapshot
    row = snap.to_state_row(settings=SETTINGS)
    assert (row["state"], row["exists"], row["group_type"]) == ("Dead", False, "consumer")
    again = stored(snap).to_state_row(settings=SETTINGS)
    assert again["group_type"] == "consumer"
