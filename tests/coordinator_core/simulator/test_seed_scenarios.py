"""The shipped scenarios (conf/scenarios) reproduce the seeds' exact walk-throughs."""

from __future__ import annotations

import pytest

from coordinator_core.codec.records import GroupMetadataValue
from coordinator_core.simulator import ScenarioResult
from pipelines.inputs.scenario_files import load_scenario, shipped_scenarios


def run(name: str) -> ScenarioResult:
    return load_scenario(name).run()


def requests(r: ScenarioResult, api: str, client: str) -> list[int]:
    return [e.time_ms for e in r.events if e.kind == "request" and e.api == api and e.detail == client]


def responses(r: ScenarioResult, api: str) -> list[tuple[int, str | None, str | None]]:
    return [(e.time_ms, e.member, e.error) for e in r.events if e.kind == "response" and e.api == api]


def assigned(r: ScenarioResult, client: str) -> list[tuple[int, str, tuple[tuple[str, int], ...]]]:
    return [h for h in r.sim.clients[client].history if h[1] == "assigned"]


@pytest.mark.parametrize("path", shipped_scenarios(), ids=lambda p: p.stem)
def test_shipped_scenario_meets_its_expectations(path: object) -> None:
    result = load_scenario(str(path)).run()
    assert result.check() == []


def test_three_consumers_at_once_walk_through_the_books_six_states_with_one_assignment() -> None:
    r = run("book_three_consumers_at_once")
    assert r.states("book-group") == [
        "Stable",
        "PreparingRebalance",
        "CompletingRebalance",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
    ]
    # consumer-3 joins twice, the others once; its first SyncGroup meets PreparingRebalance
    assert len(requests(r, "JoinGroup", "consumer-3")) == 2
    assert len(requests(r, "JoinGroup", "consumer-2")) == 1
    assert len(requests(r, "JoinGroup", "consumer-1")) == 1
    sync_errors = [e.error for e in r.events if e.kind == "response" and e.api == "SyncGroup"]
    assert sync_errors[0] == "REBALANCE_IN_PROGRESS"
    # the second PreparingRebalance was entered from CompletingRebalance, caused by consumer-2
    transitions = [e for e in r.events if e.kind == "transition"]
    assert transitions[2].from_state == "CompletingRebalance" and transitions[2].cause == "JoinGroup(consumer-2)"
    # onPartitionsAssigned once per consumer, one partition each
    for c in ("consumer-1", "consumer-2", "consumer-3"):
        got = assigned(r, c)
        assert len(got) == 1 and len(got[0][2]) == 1


def test_joining_one_second_apart_makes_two_rebalances_and_the_first_consumer_takes_part_in_both() -> None:
    r = run("book_join_one_second_apart")
    first = assigned(r, "consumer-1")
    assert [len(a[2]) for a in first] == [3, 1]
    assert len(assigned(r, "consumer-2")) == 1 and len(assigned(r, "consumer-3")) == 1
    # consumer-3 joined before consumer-1 rejoined (seed steps 2-4)
    assert requests(r, "JoinGroup", "consumer-3")[0] < requests(r, "JoinGroup", "consumer-1")[1]


def test_three_joins_spread_out_make_three_rebalances() -> None:
    r = run("book_three_rebalances")
    assert [len(assigned(r, c)) for c in ("consumer-1", "consumer-2", "consumer-3")] == [3, 2, 1]


def test_a_follower_that_missed_its_join_response_rejoins_a_stable_group_without_a_rebalance() -> None:
    r = run("book_follower_misses_join_response")
    joins = requests(r, "JoinGroup", "consumer-3")
    rejoin_at = joins[-1]
    # no transition at or after the retry: the Stable group answers directly
    assert all(e.time_ms < rejoin_at for e in r.events if e.kind == "transition")
    syncs = [e for e in r.events if e.kind == "request" and e.api == "SyncGroup"]
    assert [e.detail for e in syncs] == ["consumer-2", "consumer-1", "consumer-3"]
    assert len(assigned(r, "consumer-3")) == 1 and assigned(r, "consumer-3")[0][0] == rejoin_at


def test_a_leader_that_missed_its_join_response_keeps_the_group_in_completing_rebalance() -> None:
    r = run("book_leader_misses_join_response")
    to_completing = next(e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "CompletingRebalance")
    to_stable = next(e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "Stable")
    leader_joins = requests(r, "JoinGroup", "consumer-1")
    assert to_stable == leader_joins[-1] > to_completing
    # the followers' SyncGroups arrived first and were answered only with the leader's
    follower_syncs = requests(r, "SyncGroup", "consumer-2") + requests(r, "SyncGroup", "consumer-3")
    assert max(follower_syncs) < to_stable
    assert all(len(assigned(r, c)) == 1 for c in ("consumer-1", "consumer-2", "consumer-3"))


def test_a_sync_group_in_preparing_rebalance_gets_rebalance_in_progress_and_the_leader_rejoins() -> None:
    r = run("book_sync_in_preparing_rebalance")
    errors = [(t, err) for t, _m, err in responses(r, "SyncGroup")]
    assert errors[0] == (500, "REBALANCE_IN_PROGRESS")
    assert requests(r, "JoinGroup", "consumer-1")[-1] == 500


def test_leave_in_preparing_rebalance_completes_the_delayed_join_at_once() -> None:
    r = run("leave_in_preparing_rebalance")
    leave_at = requests(r, "LeaveGroup", "consumer-2")[0]
    completing = [e for e in r.events if e.kind == "transition" and e.to_state == "CompletingRebalance"]
    assert completing[-1].time_ms == leave_at and completing[-1].cause == "LeaveGroup(consumer-2)"


def test_leave_in_empty_gets_unknown_member_id_and_the_empty_record_has_no_protocol() -> None:
    r = run("leave_in_empty")
    leave_responses = [e for e in r.events if e.kind == "response" and e.api == "LeaveGroup"]
    assert leave_responses[-1].error == "UNKNOWN_MEMBER_ID"
    group_values = [x.value for x in r.records if x.key.version == 2]
    last = group_values[-1]
    assert isinstance(last, GroupMetadataValue)
    assert (last.generation, last.protocol, last.leader, last.members) == (2, None, None, ())
    empty_at = next(e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "Empty")
    assert last.current_state_timestamp == empty_at


def test_rolling_restart_of_dynamic_members_makes_six_rebalances_and_static_members_none() -> None:
    dynamic = run("rolling_restart_dynamic")
    static = run("rolling_restart_static")
    assert dynamic.completed_rebalances("rolling-group") - 1 == 6
    assert static.completed_rebalances("rolling-group") - 1 == 0
    # static rejoins rewrite the same generation with the new member ids
    values = [x.value for x in static.records if x.key.version == 2]
    assert all(isinstance(v, GroupMetadataValue) and v.generation == 1 for v in values)
    ids = [frozenset(m.member_id for m in v.members) for v in values if isinstance(v, GroupMetadataValue)]
    assert len(set(ids)) == 4
    instance_ids = {m.group_instance_id for v in values if isinstance(v, GroupMetadataValue) for m in v.members}
    assert instance_ids == {"instance-1", "instance-2", "instance-3"}


def test_a_crashed_consumer_is_removed_one_session_timeout_after_its_last_heartbeat() -> None:
    r = run("session_timeout")
    member = r.sim.coordinator.groups["crash-group"].members
    assert len(member) == 1
    last_hb = max(
        e.time_ms for e in r.events if e.kind == "request" and e.api == "Heartbeat" and e.detail == "consumer-2"
    )
    expiry = next(e for e in r.events if e.kind == "timer" and e.api == "DelayedHeartbeat")
    assert expiry.time_ms == last_hb + 10_000
    rebalance = [e for e in r.events if e.kind == "transition" and e.to_state == "PreparingRebalance"][-1]
    assert rebalance.time_ms == expiry.time_ms and rebalance.cause.startswith("DelayedHeartbeat")


def test_a_partition_leader_change_causes_no_rebalance_and_no_record() -> None:
    r = run("partition_leader_change")
    change = next(e.time_ms for e in r.events if e.api == "PartitionLeaderChange")
    assert [x for x in r.records if x.timestamp_ms >= change] == []
    assert [e for e in r.events if e.kind == "transition" and e.time_ms >= change] == []


def test_the_group_record_carries_the_time_the_group_entered_completing_rebalance() -> None:
    r = run("book_join_one_second_apart")
    entered = [e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "CompletingRebalance"]
    stamps = [x.value.current_state_timestamp for x in r.records if isinstance(x.value, GroupMetadataValue)]
    assert stamps == entered


def test_scripted_sync_orders_the_follower_waits_and_a_late_follower_is_answered_by_the_stable_group() -> None:
    r = run("scripted_sync_from_stable")
    sync_responses = [
        (e.time_ms, e.member.split("-0")[0] if e.member else None, e.error)
        for e in r.events
        if e.kind == "response" and e.api == "SyncGroup"
    ]
    assert sync_responses == [(30, "consumer-1", "NONE"), (30, "consumer-2", "NONE"), (40, "consumer-3", "NONE")]
    stable_at = next(e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "Stable")
    assert stable_at == 30
    assert sorted(len(c.assignment) for c in r.sim.clients.values()) == [1, 1, 1]


def callbacks(r: ScenarioResult, client: str) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    return [(h[1], h[2]) for h in r.sim.clients[client].history]


def test_pre_2_4_clients_revoke_once_per_rebalance_with_an_empty_set_first_as_the_book_says() -> None:
    r = run("book_three_consumers_at_once")
    # scene 1: each listener's onPartitionsRevoked and onPartitionsAssigned run exactly once,
    # although consumer-3 sent JoinGroup twice (its retry belongs to the same rebalance)
    for c in ("consumer-1", "consumer-2", "consumer-3"):
        got = callbacks(r, c)
        assert [kind for kind, _ in got] == ["revoked", "assigned"], c
        assert got[0][1] == ()


def test_pre_2_4_first_consumer_revokes_and_is_assigned_twice_when_joining_one_second_apart() -> None:
    r = run("book_join_one_second_apart")
    first = callbacks(r, "consumer-1")
    assert [kind for kind, _ in first] == ["revoked", "assigned", "revoked", "assigned"]
    assert first[0][1] == () and len(first[2][1]) == 3  # the second revoke gives back all three
    for c in ("consumer-2", "consumer-3"):
        assert [kind for kind, _ in callbacks(r, c)] == ["revoked", "assigned"]


def test_a_2_4_client_revokes_nothing_on_its_first_join() -> None:
    from coordinator_core.simulator import Scenario

    raw = {
        "until_ms": 10_000,
        "coordinator": {"initial_rebalance_delay_ms": 0},
        "topics": {"t": 2},
        "client_defaults": {"group_id": "g", "topics": ["t"]},
        "clients": {"c": {}},
        "timeline": [{"at_ms": 0, "client": "c", "action": "start"}],
    }
    r = Scenario.from_dict(raw).run()
    assert [kind for kind, _ in callbacks(r, "c")] == ["assigned"]


def test_a_pre_2_4_client_cannot_use_the_cooperative_protocol() -> None:
    from coordinator_core.errors import ConfigError
    from coordinator_core.simulator import Scenario

    raw = {
        "client_defaults": {"group_id": "g", "topics": ["t"], "client_version": "pre-2.4"},
        "clients": {"c": {"assignors": ["cooperative-sticky"]}},
    }
    with pytest.raises(ConfigError, match=r"clients\.c\.assignors"):
        Scenario.from_dict(raw)
    with pytest.raises(ConfigError, match="client_version"):
        Scenario.from_dict({"clients": {"c": {"group_id": "g", "client_version": "0.10"}}})
