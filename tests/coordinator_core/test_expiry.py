"""Offset expiry and group death (spec §8), the four rule sets, and expiry inside the replay."""

from __future__ import annotations

import pytest

from coordinator_core.codec.records import GroupMetadataKey, LogRecord, OffsetCommitKey
from coordinator_core.events import Event, GroupLifecycle, OffsetExpiration, StateTransition
from coordinator_core.expiry import RULE_SETS, expire_offsets, next_expiry_ms, plan_expiry
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import GroupSnapshot, new_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.state import GroupState
from tests.coordinator_core.replay_builders import GroupLog, member

DAY = 86_400_000
WEEK = 7 * DAY


def _snap(log: GroupLog) -> GroupSnapshot:
    return replay(new_snapshot("g"), log.records).snapshot


def _expired_tps(snap: GroupSnapshot, now: int, retention: int = WEEK, rules: str = "current") -> list[tuple[str, int]]:
    return [
        (r.key.topic, r.key.partition)
        for r in expire_offsets(snap, now, retention, rules)
        if isinstance(r.key, OffsetCommitKey)
    ]


def _empty_group_with_offsets() -> GroupLog:
    log = GroupLog()
    log.stable(1, [member("m1", assigned={"t": [0, 1]})])
    log.commit("t", 0, 10, at=log.now + 1000)
    log.commit("t", 1, 11, at=log.now + 1000)
    log.empty(2, at=log.now + DAY)
    return log


def test_empty_group_expires_everything_from_when_it_became_empty() -> None:
    log = _empty_group_with_offsets()
    snap = _snap(log)
    empty_at = snap.current_state_timestamp
    assert empty_at == log.now
    assert _expired_tps(snap, empty_at + WEEK - 1) == []
    recs = expire_offsets(snap, empty_at + WEEK, WEEK)
    assert [(r.key.topic, r.key.partition) for r in recs if isinstance(r.key, OffsetCommitKey)] == [("t", 0), ("t", 1)]
    # the group dies with them; generation 2 > 0, so the old coordinator writes a group tombstone
    assert isinstance(recs[-1].key, GroupMetadataKey) and recs[-1].value is None
    assert all(r.value is None for r in recs)


def test_empty_group_without_current_state_timestamp_uses_each_commit_timestamp() -> None:
    log = GroupLog()
    log.stable(1, [member("m1")], version=1)
    log.commit("t", 0, 10, at=log.now + 1000)
    c0 = log.now
    log.commit("t", 1, 11, at=log.now + DAY)
    log.empty(2, at=log.now + DAY, cst=None)
    snap = _snap(log)
    assert snap.current_state_timestamp is None
    assert _expired_tps(snap, c0 + WEEK) == [("t", 0)]
    assert next_expiry_ms(snap, WEEK) == c0 + WEEK


def test_stable_consumer_group_expires_only_topics_no_member_subscribes_to() -> None:
    log = GroupLog()
    log.stable(1, [member("m1", topics=["t"], assigned={"t": [0]})])
    log.commit("t", 0, 10, at=log.now + 10)
    log.commit("old", 0, 3)
    old_ts = log.now
    snap = _snap(log)
    assert _expired_tps(snap, old_ts + WEEK - 1) == []
    assert _expired_tps(snap, old_ts + 10 * WEEK) == [("old", 0)]
    assert next_expiry_ms(snap, WEEK) == old_ts + WEEK
    plan = plan_expiry(snap, old_ts + 10 * WEEK, WEEK)
    assert not plan.group_dies


def test_stable_consumer_group_with_unparseable_subscription_expires_nothing() -> None:
    log = GroupLog()
    log.stable(1, [member("m1", subscription=b"\x00")])
    log.commit("old", 0, 3, at=log.now + 10)
    snap = _snap(log)
    assert snap.subscribed_topics is None
    assert _expired_tps(snap, log.now + 100 * WEEK) == []
    assert next_expiry_ms(snap, WEEK) is None


def test_stable_group_of_another_protocol_type_expires_nothing() -> None:
    log = GroupLog()
    log.stable(1, [member("w1")], protocol_type="connect")
    log.commit("t", 0, 3, at=log.now + 10)
    assert _expired_tps(_snap(log), log.now + 100 * WEEK) == []


def test_group_without_protocol_type_expires_from_each_commit_timestamp() -> None:
    log = GroupLog()
    log.commit("t", 0, 1)
    first = log.now
    log.commit("t", 1, 2, at=log.now + DAY)
    snap = _snap(log)
    assert _expired_tps(snap, first + WEEK) == [("t", 0)]
    plan = plan_expiry(snap, log.now + WEEK, WEEK)
    assert plan.group_dies and plan.death_ms == log.now + WEEK
    assert not plan.group_tombstone  # generation 0: "only using Kafka for offset storage"


def test_explicit_v1_expire_timestamp_is_used_for_eligible_offsets() -> None:
    log = GroupLog()
    log.commit("t", 0, 1, expire=GroupLog().now + 5000)
    snap = _snap(log)
    assert _expired_tps(snap, log.now + 4999) == []
    assert _expired_tps(snap, log.now + 5000) == [("t", 0)]


def test_empty_group_without_offsets_dies_at_the_next_cleanup() -> None:
    log = GroupLog()
    log.stable(1, [member("m1")])
    log.empty(2, at=log.now + 1000)
    snap = _snap(log)
    assert not plan_expiry(snap, log.now, WEEK).group_dies  # records of the same instant come first
    plan = plan_expiry(snap, log.now + 1, WEEK)
    assert plan.group_dies and plan.group_tombstone and plan.death_ms == log.now
    assert next_expiry_ms(snap, WEEK) == log.now + 1


@pytest.mark.parametrize(
    ("rules", "expired"), [("current", ["old"]), ("2.4-3.1", ["old"]), ("2.1-2.3", []), ("pre-2.1", ["old", "t"])]
)
def test_rule_sets_for_older_clusters(rules: str, expired: list[str]) -> None:
    log = GroupLog()
    log.stable(1, [member("m1", topics=["t"], assigned={"t": [0]})])
    log.commit("t", 0, 10, at=log.now + 10)
    log.commit("old", 0, 3)
    snap = _snap(log)
    now = log.now + 2 * WEEK
    assert sorted({t for t, _ in _expired_tps(snap, now, WEEK, rules)}) == expired


def test_pre_2_1_expiry_is_strict() -> None:
    log = GroupLog()
    log.commit("t", 0, 1, expire=log.now + 5000)
    snap = _snap(log)
    assert _expired_tps(snap, log.now + 5000, WEEK, "pre-2.1") == []
    assert _expired_tps(snap, log.now + 5001, WEEK, "pre-2.1") == [("t", 0)]


def test_unknown_rule_set_is_rejected() -> None:
    with pytest.raises(ValueError, match="rule set"):
        next_expiry_ms(new_snapshot("g"), WEEK, "3.9")
    assert RULE_SETS == ("current", "2.4-3.1", "2.1-2.3", "pre-2.1")


# --------------------------------------------------------------------------------------------
# Expiry inside the replay
# --------------------------------------------------------------------------------------------
def test_a_group_back_after_its_due_time_with_no_tombstone_was_never_expired() -> None:
    # issue 13: the broker removes only in its cleanup and writes tombstones for it; a later
    # record of the group with no tombstone before it shows the cleanup did not remove anything
    log = _empty_group_with_offsets()
    empty_at = log.now
    log.commit("other", 0, 1, at=empty_at + 30 * DAY)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK))
    assert [e for e in result.events if isinstance(e, OffsetExpiration)] == []
    assert not [e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
    assert not [e for e in result.events if isinstance(e, StateTransition) and e.to_state == "Dead"]
    snap = result.snapshot
    assert (snap.state, snap.protocol_type, snap.generation, snap.offset_count) == (GroupState.EMPTY, "consumer", 2, 3)
    assert result.stats.predictions_contradicted == 2  # both offsets (and the group's death)
    assert snap.predictions_contradicted == 2


def test_replay_with_retention_forecasts_expiry_at_the_end_of_the_log() -> None:
    log = _empty_group_with_offsets()
    empty_at = log.now
    as_of = empty_at + WEEK + 60_000
    result = replay(
        new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK), as_of_ms=as_of, log_end_ms=as_of
    )
    exps = [e for e in result.events if isinstance(e, OffsetExpiration)]
    assert [(e.topic, e.partition, e.predicted_ms, e.status) for e in exps] == [
        ("t", 0, empty_at + WEEK, "predicted"),
        ("t", 1, empty_at + WEEK, "predicted"),
    ]
    deaths = [e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
    assert [(d.timestamp_ms, d.status, d.group_tombstone) for d in deaths] == [(empty_at + WEEK, "predicted", True)]
    # a forecast is no transition: the history holds only what the log shows
    assert not [e for e in result.events if isinstance(e, StateTransition) and e.to_state == "Dead"]
    # due is not dead: a minute after the due time the broker's next cleanup may not have run
    # (it runs within cleanup_interval_ms): the group is Empty with its offsets due, the
    # deletion a forecast with that window
    snap = result.snapshot
    assert (snap.state, snap.exists, snap.offset_count) == (GroupState.EMPTY, True, 2)
    interval = ReplaySettings().cleanup_interval_ms
    assert [(e.forecast_from_ms, e.forecast_to_ms) for e in exps] == [(empty_at + WEEK, empty_at + WEEK + interval)] * 2
    assert [(d.forecast_from_ms, d.forecast_to_ms, d.offsets_remaining) for d in deaths] == [
        (empty_at + WEEK, empty_at + WEEK + interval, 2)
    ]
    row = snap.to_state_row(settings=ReplaySettings(retention_ms=WEEK))
    assert (row["state"], row["exists"], row["offsets_due"]) == ("Empty", True, 2)
    assert (row["death_forecast_from_ms"], row["death_forecast_to_ms"]) == (empty_at + WEEK, empty_at + WEEK + interval)
    # once the window has passed (no log beyond to contradict it) the view drops them: Dead
    later = replay(snap, [], settings=ReplaySettings(retention_ms=WEEK), as_of_ms=empty_at + WEEK + interval).snapshot
    assert (later.state, later.exists, later.offset_count) == (GroupState.DEAD, False, 0)
    assert later.to_state_row(settings=ReplaySettings(retention_ms=WEEK))["death_forecast_from_ms"] is None
    # and an earlier as-of restores the fold: the forecast view is a view, not a fact
    back = replay(later, [], settings=ReplaySettings(retention_ms=WEEK), as_of_ms=as_of).snapshot
    assert (back.state, back.exists, back.offset_count) == (GroupState.EMPTY, True, 2)


def test_the_end_of_the_log_contradicts_a_removal_whose_cleanup_it_reaches_past() -> None:
    log = _empty_group_with_offsets()
    empty_at = log.now
    end = empty_at + WEEK + 3 * 600_000  # three cleanups after the due time, no tombstone
    result = replay(
        new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK), as_of_ms=end, log_end_ms=end
    )
    assert [e for e in result.events if isinstance(e, (OffsetExpiration,))] == []
    snap = result.snapshot
    assert (snap.state, snap.offset_count, snap.predictions_contradicted) == (GroupState.EMPTY, 2, 2)


def test_predicted_tombstones_equal_replaying_the_deciders_records() -> None:
    log = _empty_group_with_offsets()
    base = _snap(log)
    now = log.now + 2 * WEEK
    predicted = replay(base, [], settings=ReplaySettings(retention_ms=WEEK), as_of_ms=now).snapshot
    tomb = [LogRecord(7, 1000 + i, now, r.key, None) for i, r in enumerate(expire_offsets(base, now, WEEK))]
    applied = replay(base, tomb).snapshot
    assert (predicted.state, dict(predicted.offsets), predicted.has_metadata) == (
        applied.state,
        dict(applied.offsets),
        applied.has_metadata,
    )


def test_observed_tombstone_after_a_prediction_carries_both_times() -> None:
    log = _empty_group_with_offsets()
    empty_at = log.now
    observed_at = empty_at + WEEK + 5 * 60_000  # the cleanup task ran 5 minutes later
    log.offset_tombstone("t", 0, at=observed_at)
    log.offset_tombstone("t", 1, at=observed_at)
    log.group_tombstone(at=observed_at)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK))
    final = {e.event_key: e for e in result.events if isinstance(e, OffsetExpiration)}
    assert {(e.status, e.cause, e.predicted_ms, e.observed_ms) for e in final.values()} == {
        ("confirmed", "retention", empty_at + WEEK, observed_at)
    }
    deaths = {e.event_key: e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"}
    ((_, death),) = deaths.items()
    assert (death.status, death.predicted_ms, death.observed_ms) == ("confirmed", empty_at + WEEK, observed_at)
    # the history's Dead transition is the tombstone's: observed, at its time (never the forecast)
    dead = [t for t in result.events if isinstance(t, StateTransition) and t.to_state == "Dead"]
    assert len(dead) == 1 and dead[0].observed and dead[0].timestamp_ms == observed_at


def test_expiry_at_an_earlier_watermark_and_later_equals_once_at_the_end() -> None:
    log = GroupLog()
    log.commit("t", 0, 1)
    log.commit("t", 1, 1, at=log.now + 3 * DAY)
    log.commit("t", 2, 1, at=log.now + 3 * DAY)
    snap = _snap(log)
    end = log.now + 30 * DAY
    once = replay(snap, [], settings=ReplaySettings(retention_ms=WEEK), as_of_ms=end)
    w1 = replay(snap, [], settings=ReplaySettings(retention_ms=WEEK), as_of_ms=log.now + 2 * DAY)
    w2 = replay(w1.snapshot, [], settings=ReplaySettings(retention_ms=WEEK), as_of_ms=end)

    # a later event with the same key replaces an earlier one (the tables MERGE on it): a
    # forecast is told again by every call that still makes it
    def final(events: list[Event]) -> dict[tuple[str, str], dict[str, object]]:
        return {(e.kind, e.to_row()["event_key"]): e.to_row() for e in events}

    assert final(w1.events + w2.events) == final(once.events)
    assert w2.snapshot == once.snapshot


def test_next_expiry_drives_the_timer() -> None:
    log = GroupLog()
    log.commit("t", 0, 1)
    log.commit("t", 1, 1, at=log.now + DAY)
    snap = _snap(log)
    t1 = next_expiry_ms(snap, WEEK)
    assert t1 == log.records[0].timestamp_ms + WEEK
    assert snap.next_expiry_ms(ReplaySettings(retention_ms=WEEK)) == t1
    settings = ReplaySettings(retention_ms=WEEK)
    due = replay(snap, [], settings=settings, as_of_ms=t1).snapshot
    # at its due time the offset is still held (its cleanup runs within the interval)
    assert (due.offset_count, due.to_state_row(settings=settings)["offsets_due"]) == (2, 1)
    after = replay(snap, [], settings=settings, as_of_ms=t1 + settings.cleanup_interval_ms).snapshot
    assert after.offset_count == 1
    assert next_expiry_ms(after, WEEK) == log.now + WEEK
    assert next_expiry_ms(snap, None) is None


def test_new_coordinator_also_tombstones_a_generation_zero_group_when_it_dies() -> None:
    # spec §4.3/§8.3: the old GroupCoordinator writes the group tombstone only when
    # generation > 0; the new group-coordinator (Kafka 4.0) writes it for any Empty classic group.
    log = GroupLog()
    log.commit("t", 0, 1)
    snap = _snap(log)
    at = log.now + WEEK
    old = plan_expiry(snap, at, WEEK, coordinator="old")
    new = plan_expiry(snap, at, WEEK, coordinator="new")
    assert old.group_dies and new.group_dies
    assert not old.group_tombstone and new.group_tombstone
    assert [type(r.key).__name__ for r in expire_offsets(snap, at, WEEK, coordinator="new")] == [
        "OffsetCommitKey",
        "GroupMetadataKey",
    ]
    deaths = [
        e
        for e in replay(
            new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK, coordinator="new"), as_of_ms=at
        ).events
        if isinstance(e, GroupLifecycle) and e.event == "group_deleted"
    ]
    assert len(deaths) == 1 and deaths[0].group_tombstone


def test_unknown_coordinator_is_rejected() -> None:
    with pytest.raises(ValueError, match="coordinator"):
        replay(new_snapshot("g"), [], settings=ReplaySettings(retention_ms=WEEK, coordinator="newest"))
