"""Coordinator and client rules beyond the seed walk-throughs (GroupCoordinator.scala)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_core.codec import record_codec as codec
from coordinator_core.codec.records import GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from coordinator_core.errors import ConfigError
from coordinator_core.simulator import CoordinatorConfig, Scenario, ScenarioResult, Simulator
from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.client import ClientConfig


def scenario(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "until_ms": 30_000,
        "coordinator": {"initial_rebalance_delay_ms": 0},
        "topics": {"t": 4},
        "client_defaults": {
            "group_id": "g",
            "topics": ["t"],
            "session_timeout_ms": 10_000,
            "enable_auto_commit": False,
        },
        "clients": {"c1": {}, "c2": {}},
        "timeline": [{"at_ms": 0, "client": "c1", "action": "start"}, {"at_ms": 0, "client": "c2", "action": "start"}],
    }
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = {**base[k], **v}
        else:
            base[k] = v
    return base


def run(**overrides: Any) -> ScenarioResult:
    return Scenario.from_dict(scenario(**overrides)).run()


def errors(r: ScenarioResult, api: str) -> list[str | None]:
    return [e.error for e in r.events if e.kind == "response" and e.api == api]


def test_v4_dynamic_members_get_member_id_required_first_and_then_join_with_it() -> None:
    r = run(client_defaults={"join_group_version": 4})
    join_errors = errors(r, "JoinGroup")
    assert join_errors[:2] == ["MEMBER_ID_REQUIRED", "MEMBER_ID_REQUIRED"]
    assert set(join_errors[2:]) == {"NONE"}
    assert r.sim.state_of("g") == "Stable"


def test_a_pending_member_that_never_rejoins_expires_after_its_session_timeout() -> None:
    r = run(
        client_defaults={"join_group_version": 5},
        clients={"c1": {}, "ghost": {"manual": True}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 5000, "client": "ghost", "action": "request", "api": "JoinGroup"},
        ],
    )
    expiry = [e for e in r.events if e.kind == "timer" and e.cause == "pending member expiry"]
    assert [e.time_ms for e in expiry] == [15_000]
    assert r.sim.coordinator.groups["g"].pending == {}


def test_a_pending_member_holds_the_delayed_join_until_it_expires() -> None:
    # c2 joins (PreparingRebalance); a pending member exists; the join completes only when it expires.
    r = run(
        client_defaults={"join_group_version": 5, "heartbeat_interval_ms": 1000},
        clients={"c1": {}, "c2": {}, "ghost": {"manual": True}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 5000, "client": "ghost", "action": "request", "api": "JoinGroup"},
            {"at_ms": 6000, "client": "c2", "action": "start"},
        ],
    )
    completing = [e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "CompletingRebalance"]
    assert completing[-1] == 15_000


def test_initial_rebalance_delay_gathers_members_joining_an_empty_group_into_one_rebalance() -> None:
    r = run(
        coordinator={"initial_rebalance_delay_ms": 3000},
        clients={"c1": {}, "c2": {}, "c3": {}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 1000, "client": "c2", "action": "start"},
            {"at_ms": 2500, "client": "c3", "action": "start"},
        ],
    )
    assert r.states("g") == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"]
    # delay 3 s, extended once because new members arrived during the first 3 s
    completing = next(e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "CompletingRebalance")
    assert completing == 6000


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed() -> None:
    r = run(
        client_defaults={"max_poll_interval_ms": 8000, "session_timeout_ms": 30_000, "heartbeat_interval_ms": 1000},
        clients={"c1": {}, "c2": {}, "c3": {}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 0, "client": "c2", "action": "start"},
            {"at_ms": 4000, "client": "c2", "action": "pause", "duration_ms": 20_000, "kind": "gc"},
            {"at_ms": 5000, "client": "c3", "action": "start"},
        ],
        until_ms=16_000,
    )
    timeout = next(e for e in r.events if e.kind == "timer" and e.api == "DelayedJoin")
    assert timeout.time_ms == 5000 + 8000
    assert len(r.sim.coordinator.groups["g"].members) == 2


def test_static_member_with_a_new_process_fences_the_old_one() -> None:
    r = run(
        client_defaults={"session_timeout_ms": 30_000},
        clients={"old": {"group_instance_id": "i1"}, "new": {"group_instance_id": "i1"}},
        timeline=[
            {"at_ms": 0, "client": "old", "action": "start"},
            {"at_ms": 5000, "client": "new", "action": "start"},
        ],
    )
    assert "FENCED_INSTANCE_ID" in errors(r, "Heartbeat")
    assert not r.sim.clients["old"].running and r.sim.clients["new"].running
    # no rebalance: the group record is rewritten at the same generation
    assert r.completed_rebalances("g") == 1
    assert [x.value.generation for x in r.records if isinstance(x.value, GroupMetadataValue)] == [1, 1]


def test_a_different_protocol_is_inconsistent_with_the_group() -> None:
    r = run(
        clients={"c1": {}, "c2": {"assignors": ["roundrobin"]}},
        timeline=[{"at_ms": 0, "client": "c1", "action": "start"}, {"at_ms": 1000, "client": "c2", "action": "start"}],
    )
    assert "INCONSISTENT_GROUP_PROTOCOL" in errors(r, "JoinGroup")


def test_protocol_selection_is_by_vote_among_protocols_every_member_supports() -> None:
    r = run(
        clients={
            "c1": {"assignors": ["roundrobin", "range"]},
            "c2": {"assignors": ["range", "roundrobin"]},
            "c3": {"assignors": ["range"]},
        },
        timeline=[{"at_ms": 0, "client": c, "action": "start"} for c in ("c1", "c2", "c3")],
    )
    assert r.sim.coordinator.groups["g"].protocol == "range"


def test_a_full_group_rejects_new_members() -> None:
    r = run(coordinator={"group_max_size": 1})
    assert "GROUP_MAX_SIZE_REACHED" in errors(r, "JoinGroup")
    assert len(r.sim.coordinator.groups["g"].members) == 1


def test_joining_an_unknown_group_with_a_member_id_gets_unknown_member_id() -> None:
    sim = Simulator(CoordinatorConfig(initial_rebalance_delay_ms=0), {"t": 1})
    c = sim.add_client("c", ClientConfig("c", "g", ("t",), manual=True))
    c.running = True
    c.member_id = "stale"
    c.send_join()
    sim.run(10)
    assert [e.error for e in sim.events if e.kind == "response"] == ["UNKNOWN_MEMBER_ID"]


def test_sync_with_an_old_generation_is_illegal_and_commits_in_completing_rebalance_are_refused() -> None:
    sim = Simulator(CoordinatorConfig(initial_rebalance_delay_ms=0, new_group_state="Empty"), {"t": 2})
    c = sim.add_client("c", ClientConfig("c", "g", ("t",), manual=True, join_group_version=3))
    c.running = True
    c.send_join()
    sim.run(1)
    assert sim.state_of("g") == "CompletingRebalance"
    c.assignment = [("t", 0)]
    c.commit()
    c.generation = 0
    c.send_sync()
    sim.run(2)
    got = [(e.api, e.error) for e in sim.events if e.kind == "response"]
    assert got[1:] == [("OffsetCommit", "REBALANCE_IN_PROGRESS"), ("SyncGroup", "ILLEGAL_GENERATION")]


def test_simple_consumers_commit_with_generation_minus_one_and_get_no_group_record() -> None:
    r = run(
        clients={
            "s": {"group_management": False, "assigned_partitions": [["t", 0], ["t", 1]], "enable_auto_commit": True}
        },
        timeline=[{"at_ms": 0, "client": "s", "action": "start"}],
        until_ms=20_000,
    )
    assert [x.key.version for x in r.records] == [1] * 8  # 4 auto-commits × 2 partitions
    g = r.sim.coordinator.groups["g"]
    assert (g.state, g.protocol_type, g.generation) == ("Empty", None, 0)


def test_empty_groups_offsets_expire_and_the_group_dies_with_a_tombstone() -> None:
    r = run(
        coordinator={"offsets_retention_ms": 3_600_000},
        client_defaults={"enable_auto_commit": True},
        clients={"c1": {}},
        timeline=[{"at_ms": 0, "client": "c1", "action": "start"}, {"at_ms": 60_000, "client": "c1", "action": "stop"}],
        until_ms=5 * 3_600_000,
    )
    assert "g" not in r.sim.coordinator.groups
    tombstones = [x for x in r.records if x.value is None]
    assert {type(x.key).__name__ for x in tombstones} == {"OffsetCommitKey", "GroupMetadataKey"}
    empty_at = next(e.time_ms for e in r.events if e.kind == "transition" and e.to_state == "Empty")
    # the first retention check (every 10 minutes) at or after Empty + retention
    check = 600_000
    expected = -(-(empty_at + 3_600_000) // check) * check
    assert {x.timestamp_ms for x in tombstones} == {expected}
    assert r.sim.coordinator.expired_groups == [(expected, "g")]


def test_old_coordinator_writes_no_group_tombstone_for_a_generation_zero_group_but_the_new_one_does() -> None:
    simple = {"s": {"group_management": False, "assigned_partitions": [["t", 0]], "enable_auto_commit": True}}
    common = {
        "clients": simple,
        "until_ms": 3_000_000,
        "timeline": [
            {"at_ms": 0, "client": "s", "action": "start"},
            {"at_ms": 10_000, "client": "s", "action": "stop"},
        ],
    }
    old = run(coordinator={"offsets_retention_ms": 1_000_000}, **common)
    new = run(coordinator={"offsets_retention_ms": 1_000_000, "coordinator": "new"}, **common)
    assert [x for x in old.records if x.key.version == 2] == []
    assert [x.value for x in new.records if x.key.version == 2] == [None]


def test_the_new_coordinator_writes_an_empty_group_record_when_a_join_creates_the_group() -> None:
    r = run(coordinator={"coordinator": "new"})
    first = r.records[0].value
    assert isinstance(first, GroupMetadataValue)
    assert (first.protocol_type, first.generation, first.members) == ("", 0, ())


def test_delete_groups_refuses_a_live_group_and_tombstones_an_empty_one() -> None:
    r = run(
        client_defaults={"enable_auto_commit": True},
        clients={"c1": {}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 6000, "action": "delete_group", "group": "g"},
            {"at_ms": 7000, "client": "c1", "action": "stop"},
            {"at_ms": 8000, "action": "delete_group", "group": "g"},
        ],
    )
    assert errors(r, "DeleteGroups") == ["NON_EMPTY_GROUP", "NONE"]
    tail = r.records[-5:]
    assert [type(x.key).__name__ for x in tail] == ["OffsetCommitKey"] * 4 + ["GroupMetadataKey"]
    assert all(x.value is None for x in tail)


def test_deleting_a_topic_tombstones_its_offsets_and_the_leader_rebalances() -> None:
    r = run(
        topics={"t": 2, "u": 2},
        client_defaults={"topics": ["t", "u"], "enable_auto_commit": True},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 0, "client": "c2", "action": "start"},
            {"at_ms": 6000, "action": "delete_topic", "topic": "u"},
        ],
        until_ms=20_000,
    )
    tomb = [x.key for x in r.records if x.value is None]
    assert tomb and all(isinstance(k, OffsetCommitKey) and k.topic == "u" for k in tomb)
    later = [
        x.key for x in r.records if x.timestamp_ms > 6000 and x.value is not None and isinstance(x.key, OffsetCommitKey)
    ]
    assert later and all(k.topic == "t" for k in later)
    assert r.completed_rebalances("g") == 2


def test_a_slow_poll_past_max_poll_interval_leaves_the_group_and_rejoins_after_the_poll() -> None:
    r = run(
        client_defaults={"max_poll_interval_ms": 10_000, "heartbeat_interval_ms": 1000},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 0, "client": "c2", "action": "start"},
            {"at_ms": 5000, "client": "c2", "action": "pause", "duration_ms": 20_000, "kind": "slow_poll"},
        ],
        until_ms=40_000,
    )
    leave = [e.time_ms for e in r.events if e.kind == "request" and e.api == "LeaveGroup"]
    assert leave == [15_000]
    rejoin = [e.time_ms for e in r.events if e.kind == "request" and e.api == "JoinGroup" and e.detail == "c2"]
    assert rejoin[-1] == 25_000
    assert r.completed_rebalances("g") == 3 and len(r.sim.coordinator.groups["g"].members) == 2


def test_cooperative_sticky_revokes_before_reassigning_so_no_partition_has_two_owners() -> None:
    r = run(
        client_defaults={"assignors": ["cooperative-sticky"], "heartbeat_interval_ms": 1000},
        clients={"c1": {}, "c2": {}, "c3": {}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 0, "client": "c2", "action": "start"},
            {"at_ms": 5000, "client": "c3", "action": "start"},
        ],
    )
    owners: dict[tuple[str, int], str] = {}
    events = sorted(
        (t, kind == "assigned", name, tps) for name, c in r.sim.clients.items() for t, kind, tps in c.history
    )
    for _t, is_assign, name, tps in events:
        for tp in tps:
            if is_assign:
                assert tp not in owners, f"{tp} owned by {owners.get(tp)} and {name}"
                owners[tp] = name
            else:
                owners.pop(tp, None)
    assert sorted(len(c.assignment) for c in r.sim.clients.values()) == [1, 1, 2]
    assert r.completed_rebalances("g") >= 3  # the follow-up rebalance after revocation


def test_failover_reloads_the_groups_from_the_log_and_the_consumers_carry_on() -> None:
    r = run(
        client_defaults={"enable_auto_commit": True},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 0, "client": "c2", "action": "start"},
            {"at_ms": 10_000, "action": "failover", "group": "g", "load_ms": 500},
        ],
        until_ms=30_000,
    )
    load = next(e for e in r.events if e.api == "GroupLoad")
    assert (load.time_ms, load.to_state, load.generation) == (10_500, "Stable", 1)
    g = r.sim.coordinator.groups["g"]
    assert g.state == "Stable" and len(g.members) == 2 and g.generation == 1
    assert max(x.timestamp_ms for x in r.records) >= 25_000  # commits continue after the load


def test_same_scenario_same_trace_and_records() -> None:
    a = run(client_defaults={"enable_auto_commit": True})
    b = run(client_defaults={"enable_auto_commit": True})
    assert [e.to_dict() for e in a.events] == [e.to_dict() for e in b.events]
    assert a.records == b.records


@pytest.mark.parametrize("offset_version", [1, 2, 3])
@pytest.mark.parametrize("group_version", [0, 1, 2, 3])
def test_every_record_encodes_with_the_shared_codec_and_decodes_back(offset_version: int, group_version: int) -> None:
    r = run(
        coordinator={"offset_value_version": offset_version, "group_value_version": group_version},
        client_defaults={"enable_auto_commit": True},
    )
    assert {x.value.version for x in r.records if isinstance(x.value, OffsetCommitValue)} == {offset_version}
    for x in r.records:
        k = codec.encode_key(x.key)
        v = codec.encode_value(x.value)
        decoded = codec.decode_record(k, v)
        assert decoded.key == x.key and decoded.value == x.value


def test_the_fast_offset_commit_encoder_matches_the_codec() -> None:
    from coordinator_core.simulator.wire import OffsetCommitEncoder

    enc = OffsetCommitEncoder()
    assert enc.key("g", "t", 3) == codec.encode_key(OffsetCommitKey("g", "t", 3))
    for version, epoch, expire in [(3, 7, None), (3, None, None), (2, None, None), (1, None, 99), (1, None, None)]:
        value = OffsetCommitValue(42, "meta", 1000, epoch if version >= 3 else None, expire, version)
        assert enc.value(42, "meta", 1000, epoch, expire, version) == codec.encode_value(value)


def test_explicit_retention_makes_the_broker_write_v1_with_an_expire_timestamp() -> None:
    sim = Simulator(CoordinatorConfig(), {"t": 1})
    sim.now = 5000
    sim.coordinator.handle(p.OffsetCommitRequest("g", "", -1, ((("t", 0), 10, "", None),), retention_time_ms=1000))
    v = sim.log.records[0].value
    assert isinstance(v, OffsetCommitValue) and (v.version, v.expire_timestamp) == (1, 6000)


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"tpoics": {}}, "scenario.tpoics"),
        ({"clients": {"c": {"group_id": "g", "sesion_timeout_ms": 1}}}, "scenario.clients.c.sesion_timeout_ms"),
        (
            {"clients": {"c": {"group_id": "g"}}, "timeline": [{"action": "strat", "client": "c"}]},
            "scenario.timeline[0].action",
        ),
        (
            {"clients": {"c": {"group_id": "g"}}, "timeline": [{"action": "pause", "client": "c", "duraton_ms": 1}]},
            "scenario.timeline[0].duraton_ms",
        ),
        ({"coordinator": {"coordinator": "newest"}}, "scenario.coordinator.coordinator"),
        ({"clients": {"c": {}}}, "scenario.clients.c.group_id"),
    ],
)
def test_bad_scenarios_name_the_offending_key_path(raw: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Scenario.from_dict(raw)
    assert str(exc.value).startswith(path + ":")


def test_a_restarted_process_never_receives_responses_meant_for_its_previous_life() -> None:
    r = run(
        client_defaults={"join_group_version": 3},
        clients={"c1": {}, "c2": {}, "c3": {}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 0, "client": "c2", "action": "start"},
            {"at_ms": 10_000, "client": "c3", "action": "start"},
            {"at_ms": 10_001, "client": "c3", "action": "crash"},
            {"at_ms": 10_002, "client": "c3", "action": "start"},
        ],
        until_ms=40_000,
    )
    joined = [
        e.member
        for e in r.events
        if e.kind == "response"
        and e.api == "JoinGroup"
        and e.error == "NONE"
        and e.member
        and e.member.startswith("c3")
    ]
    first_life, second_life = joined[0], joined[-1]
    assert first_life != second_life
    c3 = r.sim.clients["c3"]
    assert c3.member_id == second_life
    # the dead process's JoinGroup response went nowhere: nobody synced with that member id
    assert [e for e in r.events if e.kind == "request" and e.api == "SyncGroup" and e.member == first_life] == []
    g = r.sim.coordinator.groups["g"]
    # the orphan of the first life was expired by its session timeout; the group settled with three
    assert first_life not in g.members and second_life in g.members and len(g.members) == 3


class _Inbox:
    name = "inbox"

    def __init__(self) -> None:
        self.got: list[p.Response] = []

    def on_response(self, response: p.Response) -> None:
        self.got.append(response)


def test_requests_reaching_a_dead_group_get_coordinator_not_available() -> None:
    sim = Simulator(CoordinatorConfig(initial_rebalance_delay_ms=0), {"t": 1})
    c = sim.add_client("c", ClientConfig("c", "g", ("t",), join_group_version=3))
    sim.at(0, c.start)
    sim.run(100)
    member = c.member_id
    sim.coordinator.groups["g"].state = "Dead"  # the instant between dying and being removed
    inbox = _Inbox()
    sim.coordinator.handle(
        p.JoinGroupRequest("g", member, 10_000, 10_000, "consumer", (("range", b""),), endpoint=inbox)
    )
    sim.coordinator.handle(p.HeartbeatRequest("g", 1, member, endpoint=inbox))
    sim.coordinator.handle(p.SyncGroupRequest("g", 1, member, endpoint=inbox))
    sim.coordinator.handle(p.LeaveGroupRequest("g", ((member, None),), endpoint=inbox))
    sim.run(200)
    assert [r.error for r in inbox.got] == ["COORDINATOR_NOT_AVAILABLE"] * 4


def test_offset_fetch_returns_the_latest_committed_offsets() -> None:
    r = run(client_defaults={"enable_auto_commit": True}, until_ms=12_000)
    inbox = _Inbox()
    r.sim.coordinator.handle(p.OffsetFetchRequest("g", endpoint=inbox))
    r.sim.run(r.sim.now + 1)
    (resp,) = inbox.got
    assert isinstance(resp, p.OffsetFetchResponse)
    latest = {}
    for x in r.records:
        if isinstance(x.key, OffsetCommitKey) and isinstance(x.value, OffsetCommitValue):
            latest[(x.key.topic, x.key.partition)] = x.value.offset
    assert {tp: off for tp, off, _meta in resp.offsets} == latest


def test_loading_from_the_old_coordinators_memory_equals_replaying_the_partition() -> None:
    r = run(
        client_defaults={"enable_auto_commit": True},
        clients={
            "c1": {},
            "c2": {},
            "s": {"group_id": "simple", "group_management": False, "assigned_partitions": [["t", 0]]},
        },
        timeline=[{"at_ms": 0, "client": c, "action": "start"} for c in ("c1", "c2", "s")]
        + [{"at_ms": 9_000, "client": "c2", "action": "stop"}],
        until_ms=20_000,
    )
    sim = r.sim
    partitions = {sim.log.partition(g) for g in ("g", "simple")}
    for partition in partitions:
        records = sim.log.records_for_partition(partition)
        snapshot = sim.coordinator.unload_partition(partition)
        from_memory = Simulator(CoordinatorConfig(), {"t": 4})
        from_log = Simulator(CoordinatorConfig(), {"t": 4})
        from_memory.coordinator.load_snapshot(partition, snapshot)
        from_log.coordinator.load_partition(partition, records)

        def view(s: Simulator) -> dict[str, Any]:
            return {
                gid: (
                    g.state,
                    g.generation,
                    g.leader,
                    g.protocol,
                    sorted((m.member_id, m.assignment) for m in g.members.values()),
                    sorted(g.offsets.items()),
                )
                for gid, g in s.coordinator.groups.items()
            }

        assert view(from_memory) == view(from_log) != {}


@pytest.mark.parametrize(("rules", "expected_tombstone_ms"), [("pre-2.1", 4_200_000), ("current", None)])
def test_pre_2_1_brokers_expire_a_stable_groups_offsets_by_their_expire_timestamp(
    rules: str, expected_tombstone_ms: int | None
) -> None:
    r = run(
        coordinator={"offsets_retention_ms": 3_600_000, "expiry_rules": rules},
        clients={"c1": {}},
        timeline=[{"at_ms": 0, "client": "c1", "action": "start"}, {"at_ms": 5000, "client": "c1", "action": "commit"}],
        until_ms=2 * 3_600_000,
    )
    commits = [x.value for x in r.records if isinstance(x.value, OffsetCommitValue)]
    if rules == "pre-2.1":
        assert {(v.version, v.expire_timestamp) for v in commits} == {(1, 5000 + 3_600_000)}
    else:
        assert {v.version for v in commits} == {3}
    tombstones = [x.timestamp_ms for x in r.records if x.value is None]
    assert tombstones == ([expected_tombstone_ms] * len(commits) if expected_tombstone_ms else [])
    assert r.sim.state_of("g") == "Stable"


def test_the_consumer_rule_expires_unsubscribed_topics_only_while_stable_under_current_rules() -> None:
    def tombstones(rules: str) -> list[int]:
        r = run(
            coordinator={"offsets_retention_ms": 600_000, "expiry_rules": rules},
            topics={"t": 1, "u": 1},
            clients={"c1": {"topics": ["t", "u"]}},
            timeline=[
                {"at_ms": 0, "client": "c1", "action": "start"},
                {"at_ms": 5000, "client": "c1", "action": "commit"},
                {"at_ms": 6000, "client": "c1", "action": "subscribe", "topics": ["t"]},
            ],
            until_ms=1_300_000,
        )
        return [x.timestamp_ms for x in r.records if x.value is None]

    assert tombstones("current") == [1_200_000]  # u-0 committed at 5 s, unsubscribed: expired while Stable
    assert tombstones("2.4-3.1") == [1_200_000]
    assert tombstones("2.1-2.3") == []  # non-Empty groups never expire offsets


def test_connect_workers_form_a_connect_group_with_opaque_blobs_and_no_commits() -> None:
    r = run(client_defaults={"protocol_type": "connect", "join_group_version": 5}, clients={"w1": {}, "w2": {}})
    values = [x.value for x in r.records]
    assert values and all(isinstance(v, GroupMetadataValue) for v in values)
    last = values[-1]
    assert isinstance(last, GroupMetadataValue)
    assert (last.protocol_type, last.protocol, len(last.members)) == ("connect", "default", 2)
    # ConnectProtocol blobs: version 0, then the worker URL / the leader's id
    assert all(m.subscription.startswith(b"\x00\x00") and b":8083/" in m.subscription for m in last.members)
    assert all(last.leader is not None and last.leader.encode() in m.assignment for m in last.members)
    assert r.sim.coordinator.groups["g"].subscribed_topics is None  # not a consumer group


def test_a_scripted_offset_fetch_is_answered_with_the_groups_offsets() -> None:
    r = run(
        client_defaults={"enable_auto_commit": True},
        clients={"c1": {}, "f": {"manual": True}},
        timeline=[
            {"at_ms": 0, "client": "c1", "action": "start"},
            {"at_ms": 11_000, "client": "f", "action": "request", "api": "OffsetFetch"},
        ],
        until_ms=12_000,
    )
    assert errors(r, "OffsetFetch") == ["NONE"]
