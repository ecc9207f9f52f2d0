"""Issue 13: the replay tells the truth on the logs real clusters write.

Each test is a situation an operator meets (a compacted capture, a Kafka 4 cluster, members that
all restart within seconds, a broker's cleanup) and checks that the history holds only what the
log shows, that predictions never change the group's state, and that the state as of T is
Kafka's loader fold followed by one cleanup at T.
"""

from __future__ import annotations

from coordinator_core.codec.consumer_protocol import subscribed_topics_v0
from coordinator_core.events import GroupLifecycle, OffsetExpiration, StateTransition
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import group_subscribed_topics, new_snapshot
from coordinator_core.log_shape import partition_shape
from coordinator_core.settings import ReplaySettings
from coordinator_core.state import GroupState
from tests.coordinator_core.replay_builders import GroupLog, member

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY
CLEANUP = 10 * MINUTE


def _deaths(events: list[object]) -> list[GroupLifecycle]:
    return [e for e in events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]


def _dead_edges(events: list[object]) -> list[StateTransition]:
    return [e for e in events if isinstance(e, StateTransition) and e.to_state == "Dead"]


def _expirations(events: list[object]) -> list[OffsetExpiration]:
    return [e for e in events if isinstance(e, OffsetExpiration)]


def test_a_compacted_capture_keeps_a_stable_groups_idle_partition_offsets() -> None:
    # A capture from earliest of a compacted log: partition 2 of topic t was committed once, long
    # ago (nobody produces to it), then only the group's latest Stable record survives. Kafka's
    # loader folds the partition first: a Stable consumer group never expires the offsets of the
    # topics it subscribes to, however old.
    log = GroupLog()
    log.commit("t", 2, 40)
    log.advance(30 * DAY).stable(57, [member("m1", topics=["t"], assigned={"t": [0, 1, 2]})])
    log.advance(MINUTE).commit("t", 0, 9000)
    end = log.now + HOUR
    result = replay(
        new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK), as_of_ms=end, log_end_ms=end
    )
    assert _expirations(result.events) == []
    assert _deaths(result.events) == [] and _dead_edges(result.events) == []
    snap = result.snapshot
    assert (snap.state, snap.generation) == (GroupState.STABLE, 57)
    assert snap.offset("t", 2) is not None and snap.offset("t", 2).offset == 40  # type: ignore[union-attr]


def test_kafka4_classic_group_creation_record_is_a_creation_not_a_predicted_death() -> None:
    # Kafka 4's group coordinator writes an Empty generation-0 record when a classic group is
    # created (its first JoinGroup), then the Stable generation-1 record after the initial delay.
    log = GroupLog()
    log.empty(0)
    log.advance(3_000).stable(1, [member("m1", assigned={"t": [0]})])
    log.advance(MINUTE).commit("t", 0, 1)
    end = log.now + HOUR
    result = replay(
        new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK), as_of_ms=end, log_end_ms=end
    )
    assert _deaths(result.events) == [] and _dead_edges(result.events) == []
    created = [e for e in result.events if isinstance(e, GroupLifecycle) and e.event == "group_created"]
    assert len(created) == 1
    assert result.snapshot.state is GroupState.STABLE
    assert result.snapshot.new_coordinator_seen  # auto: the log was written by Kafka 4


def test_kafka4_deletes_an_abandoned_empty_classic_group_at_its_next_cleanup() -> None:
    # the same creation record, but the joiner went away: the new coordinator deletes the Empty
    # group (no offsets) at its next cleanup and writes a tombstone even at generation 0
    log = GroupLog()
    log.empty(0)
    log.group_tombstone(at=log.now + 7 * MINUTE)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK))
    (death,) = _deaths(result.events)
    assert (death.status, death.cause, death.observed_ms) == ("confirmed", "group_tombstone", log.now)


def test_an_offsetless_group_whose_members_all_restart_within_seconds_is_never_reported_deleted() -> None:
    # Connect workers / consumers that store offsets elsewhere: the group goes Empty for a few
    # seconds while every member restarts. An Empty group without offsets is deletable only at
    # the broker's cleanup, which would have written a tombstone; there is none.
    log = GroupLog()
    log.stable(1, [member("m1"), member("m2")])
    for gen in range(2, 12, 2):
        log.advance(HOUR).empty(gen)
        log.advance(4_000).stable(gen + 1, [member(f"m{gen}a"), member(f"m{gen}b")])
    end = log.now + HOUR
    result = replay(
        new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK), as_of_ms=end, log_end_ms=end
    )
    assert _deaths(result.events) == [] and _dead_edges(result.events) == []
    assert result.snapshot.state is GroupState.STABLE and result.snapshot.exists


def test_offsets_due_while_the_group_was_empty_are_not_expired_when_it_came_back_without_tombstones() -> None:
    log = GroupLog()
    log.stable(1, [member("m1", assigned={"t": [0]})])
    log.commit("t", 0, 5)
    log.empty(2, at=log.now + MINUTE)
    # due one retention later; the group is back 20 minutes after that, no tombstone in between
    log.stable(3, [member("m2", assigned={"t": [0]})], at=log.now + WEEK + 20 * MINUTE)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK))
    assert _expirations(result.events) == [] and _deaths(result.events) == []
    assert result.snapshot.offset("t", 0) is not None
    assert result.stats.predictions_contradicted == 1


def test_a_record_inside_the_cleanup_window_does_not_contradict_the_prediction() -> None:
    # the cleanup runs every 10 minutes: 3 minutes after the due time it may not have run yet,
    # so a commit of another partition then proves nothing; the tombstone 5 minutes later confirms
    log = GroupLog()
    log.commit("a", 0, 1)
    log.commit("b", 0, 1, at=log.now + WEEK + 3 * MINUTE)
    log.offset_tombstone("a", 0, at=log.now + 5 * MINUTE)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK))
    (exp,) = _expirations(result.events)
    assert (exp.status, exp.cause, exp.predicted_ms) == ("confirmed", "retention", log.records[0].timestamp_ms + WEEK)


def test_a_tombstone_after_the_cleanup_window_is_another_removal_not_the_predicted_one() -> None:
    log = GroupLog()
    log.commit("a", 0, 1)
    log.offset_tombstone("a", 0, at=log.now + WEEK + 3 * HOUR)  # e.g. kafka-consumer-groups --delete-offsets
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK))
    (exp,) = _expirations(result.events)
    assert (exp.status, exp.cause, exp.predicted_ms) == ("observed", "tombstone", None)


def test_kafka3_deletes_a_simple_group_with_its_last_offset_and_writes_no_group_tombstone() -> None:
    log = GroupLog()
    log.commit("t", 0, 1)
    log.offset_tombstone("t", 0, at=log.now + WEEK + 4 * MINUTE)  # the retention cleanup
    old = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK, coordinator="old"))
    (death,) = _deaths(old.events)
    assert (death.status, death.group_tombstone, death.observed_ms) == ("confirmed", False, log.now)
    assert (old.snapshot.state, old.snapshot.exists) == (GroupState.DEAD, False)
    # Kafka 4 keeps the Empty group until its cleanup writes the group tombstone
    new = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK, coordinator="new"))
    assert _deaths(new.events) == []
    assert (new.snapshot.state, new.snapshot.exists) == (GroupState.EMPTY, True)


def test_kafka3_topic_deletion_that_empties_an_empty_simple_group_deletes_it_in_the_same_step() -> None:
    # handleDeletedPartitions -> cleanupGroupMetadata: the offsets of the deleted topic go, and an
    # Empty group left without offsets goes with them (no group tombstone at generation 0)
    log = GroupLog()
    log.commit("gone", 0, 1)
    log.commit("gone", 1, 1)
    log.offset_tombstone("gone", 0, at=log.now + HOUR)
    log.offset_tombstone("gone", 1)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=None, coordinator="old"))
    (death,) = _deaths(result.events)
    assert (death.status, death.cause, death.timestamp_ms) == ("observed", "offsets_deleted", log.now)
    assert not result.snapshot.exists


def test_the_coordinator_is_taken_from_the_log_by_default() -> None:
    log = GroupLog()
    log.commit("t", 0, 1)
    log.offset_tombstone("t", 0, at=log.now + HOUR)
    # nothing tells Kafka 4: the old rule (the simple group goes with its last offset)
    assert not replay(new_snapshot("g"), log.records).snapshot.exists
    k4 = GroupLog()
    k4.empty(0)
    k4.advance(3_000).stable(1, [member("m1")])
    k4.advance(MINUTE).empty(2)
    k4.commit("t", 0, 1)
    k4.offset_tombstone("t", 0, at=k4.now + HOUR)
    snap = replay(new_snapshot("g"), k4.records).snapshot
    assert snap.new_coordinator_seen and snap.exists  # Kafka 4 waits for its cleanup's tombstone


def test_subscription_version_is_read_not_checked() -> None:
    # ConsumerProtocol.deserializeVersion reads any int16; the body is parsed as version 0
    good = member("m1", topics=["x", "y"]).subscription
    weird = b"\xff\xfe" + good[2:]
    assert subscribed_topics_v0(weird) == frozenset({"x", "y"})
    assert subscribed_topics_v0(b"\x00") is None


def test_subscribed_topics_need_a_selected_protocol() -> None:
    members = [member("m1", topics=["x"])]
    assert group_subscribed_topics("consumer", members, "range") == frozenset({"x"})
    assert group_subscribed_topics("consumer", members, None) is None
    assert group_subscribed_topics("connect", members, "range") is None


def test_a_forecast_is_withdrawn_by_a_later_call_when_the_group_comes_back() -> None:
    # streaming: the watermark passes the due time (forecast told), then the group's next record
    # shows the cleanup never removed it: the forecast row is withdrawn (same key)
    log = GroupLog()
    log.stable(1, [member("m1", assigned={"t": [0]})])
    log.commit("t", 0, 5)
    log.empty(2, at=log.now + MINUTE)
    due = log.now + WEEK
    first = replay(
        new_snapshot("g"),
        log.records,
        settings=ReplaySettings(retention_ms=WEEK),
        as_of_ms=due + 11 * MINUTE,
        log_end_ms=due + 11 * MINUTE,
    )
    assert [e.status for e in _expirations(first.events)] == ["predicted"]
    # the view as of T: the cleanup window (10 minutes) has passed, so the removal is shown
    assert first.snapshot.state is GroupState.DEAD
    back = GroupLog(first_offset=200, start_ms=due + 30 * MINUTE)
    back.stable(3, [member("m2", assigned={"t": [0]})])
    later = replay(
        first.snapshot, back.records, settings=ReplaySettings(retention_ms=WEEK), as_of_ms=back.now, log_end_ms=back.now
    )
    assert [e.status for e in _expirations(later.events)] == ["withdrawn"]
    assert [e.status for e in _deaths(later.events)] == ["withdrawn"]
    assert later.snapshot.state is GroupState.STABLE and later.snapshot.offset("t", 0) is not None
    # one pass over the same records tells neither
    once = replay(
        new_snapshot("g"),
        log.records + back.records,
        settings=ReplaySettings(retention_ms=WEEK),
        as_of_ms=back.now,
        log_end_ms=back.now,
    )
    assert _expirations(once.events) == [] and _deaths(once.events) == []
    assert once.snapshot == later.snapshot


def test_partition_shape_finds_where_compaction_ends() -> None:
    shape = partition_shape([0, 1, 2, 9, 10, 11, 12, 14, 15])
    assert (shape.records, shape.missing_offsets, shape.gaps, shape.largest_gap) == (9, 7, 2, 6)
    assert shape.compacted_until == 14 and shape.compacted
    marker = partition_shape([5, 6, 8, 9])  # one offset: a transaction marker
    assert marker.missing_offsets == 1 and not marker.compacted
    assert partition_shape([3, 4, 5]).compacted_until is None


def test_a_rebalance_from_empty_starts_no_earlier_than_the_initial_delays_its_joiners_can_rearm() -> None:
    # InitialDelayedJoin: 3 s, never completing early, re-armed (by at most 3 s) only for a member
    # that joined during the previous delay; never longer than the rebalance timeout. Kafka 3's
    # coordinator re-arms only at generation 0 (addMemberAndRebalance), so a group back from
    # Empty at generation 2 started exactly one delay before its join ended (issue 17: this test
    # pinned n delays there, the old guess)
    from coordinator_core.events import Rebalance

    def window(n: int, rebalance_timeout: int = 300_000, back: bool = True) -> tuple[int | None, int | None, int]:
        log = GroupLog()
        if back:
            log.stable(1, [member("m0")])
            log.empty(2, at=log.now + HOUR)
        log.stable(
            3 if back else 1,
            [member(f"n{i}", rebalance_timeout=rebalance_timeout) for i in range(n)],
            at=log.now + HOUR,
            cst=log.now + HOUR - 100,
        )
        rb = [e for e in replay(new_snapshot("g"), log.records).events if isinstance(e, Rebalance)][-1]
        return rb.duration_max_ms, rb.duration_min_ms, rb.end_ms - rb.start_ms

    assert window(1) == (3_100, 3_100, 3_100)  # the join phase, then 100 ms to the leader's SyncGroup
    assert window(4) == (3_100, 3_100, 3_100)
    # a new group (generation 0): up to n delays, never more than the rebalance timeout
    assert window(4, back=False)[:2] == (12_100, 3_100)
    assert window(200, rebalance_timeout=30_000, back=False)[:2] == (30_100, 3_100)


def test_contradictions_judged_on_a_state_compaction_made_are_not_counted() -> None:
    # a compacted capture: an idle partition's old commit, then the group's latest record at
    # generation 13 — the "simple group" between them never existed, so what the rules said of
    # it is no sign of a retention mismatch
    log = GroupLog()
    log.commit("t", 2, 40)
    log.advance(3 * WEEK).stable(13, [member("m1", topics=["t"], assigned={"t": [2]})])
    assert (
        replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=WEEK)).snapshot.to_state_row()[
            "predictions_contradicted"
        ]
        == 0
    )
    # the same commit before a first group record at generation 1 was a real simple-group phase
    real = GroupLog()
    real.commit("t", 2, 40)
    real.advance(3 * WEEK).stable(1, [member("m1", topics=["t"], assigned={"t": [2]})])
    assert (
        replay(new_snapshot("g"), real.records, settings=ReplaySettings(retention_ms=WEEK)).snapshot.to_state_row()[
            "predictions_contradicted"
        ]
        == 1
    )
