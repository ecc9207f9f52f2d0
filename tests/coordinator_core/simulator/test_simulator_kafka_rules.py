"""Simulator rules checked against Kafka's sources for issue 13: the static follower left pending
(``replaceStaticMember``), the old coordinator's topic deletion killing Empty groups in the same
step (``handleDeletedPartitions`` → ``cleanupGroupMetadata``), and retention checks on a fixed
schedule from a per-broker / per-shard phase (``GroupCoordinatorShard.onLoaded``)."""

from __future__ import annotations

from typing import Any

from coordinator_core.codec.records import GroupMetadataKey
from coordinator_core.simulator import Scenario, ScenarioResult, Simulator
from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.coordinator import CoordinatorConfig


def run(raw: dict[str, Any]) -> ScenarioResult:
    return Scenario.from_dict(raw).run()


def test_a_static_follower_restarting_between_the_leaders_sync_and_its_own_is_left_pending_and_rebalances() -> None:
    r = run(
        {
            "until_ms": 400_000,
            "topics": {"t": 4},
            "client_defaults": {
                "group_id": "g",
                "topics": ["t"],
                "session_timeout_ms": 60_000,
                "enable_auto_commit": False,
            },
            "clients": {"leader": {"group_instance_id": "i-1"}, "follower": {"group_instance_id": "i-2"}},
            "timeline": [
                {"at_ms": 0, "client": "leader", "action": "start"},
                {"at_ms": 0, "client": "follower", "action": "start"},
                # the follower's SyncGroup of generation 1 arrives only after its process restarted
                {
                    "at_ms": 100,
                    "client": "follower",
                    "action": "delay_next_request",
                    "api": "SyncGroup",
                    "delay_ms": 5_000,
                },
                {"at_ms": 7_000, "client": "follower", "action": "crash"},
                {"at_ms": 8_000, "client": "follower", "action": "start"},
            ],
        }
    )
    assert r.states("g")[:4] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"]
    timers = [e for e in r.events if e.kind == "timer" and e.api == "DelayedSync"]
    assert len(timers) == 1 and timers[0].time_ms >= 300_000  # the rebalance timeout after the join
    assert r.states("g")[4:] == ["PreparingRebalance", "CompletingRebalance", "Stable"]
    assert r.sim.coordinator.groups["g"].generation == 2


def _old_coordinator_topic_deletion(coordinator: str) -> ScenarioResult:
    return run(
        {
            "until_ms": 400_000,
            "coordinator": {
                "coordinator": coordinator,
                "initial_rebalance_delay_ms": 0,
                "offsets_retention_check_interval_ms": 300_000,
                "offsets_retention_check_phase_ms": 0,
            },
            "topics": {"t": 2, "u": 2},
            "client_defaults": {"session_timeout_ms": 10_000, "enable_auto_commit": True},
            "clients": {"a": {"group_id": "only-u", "topics": ["u"]}, "b": {"group_id": "only-t", "topics": ["t"]}},
            "timeline": [
                {"at_ms": 0, "client": "a", "action": "start"},
                {"at_ms": 0, "client": "b", "action": "start"},
                {"at_ms": 20_000, "client": "a", "action": "stop"},
                {"at_ms": 60_000, "action": "delete_topic", "topic": "u"},
            ],
        }
    )


def test_with_the_old_coordinator_a_topic_deletion_kills_an_empty_group_left_without_offsets_at_once() -> None:
    r = _old_coordinator_topic_deletion("old")
    assert r.sim.coordinator.deaths == [(60_000, "only-u", "topic_deleted", 2, True)]
    tomb = [x for x in r.records if isinstance(x.key, GroupMetadataKey) and x.value is None]
    assert [x.timestamp_ms for x in tomb] == [60_000]
    assert "only-t" in r.sim.coordinator.groups


def test_with_the_new_coordinator_such_a_group_dies_at_the_next_retention_check() -> None:
    r = _old_coordinator_topic_deletion("new")
    assert r.sim.coordinator.deaths == [(300_000, "only-u", "retention", 2, True)]


def _sim(coordinator: str, phase: int | None, seed: int = 3) -> Simulator:
    cfg = CoordinatorConfig(
        coordinator=coordinator, offsets_retention_check_phase_ms=phase, num_partitions=50, offsets_retention_ms=120_000
    )
    return Simulator(cfg, {"t": 1}, seed=seed, start_ms=1_767_225_600_000)


def test_retention_checks_are_not_aligned_to_the_epoch_and_follow_a_seeded_phase() -> None:
    interval = 600_000
    old = _sim("old", None)
    firsts = {first for sched in old.cleanup_schedule.values() for _, first in sched}
    assert len(firsts) == 1  # one broker, one phase
    (first,) = firsts
    assert first % interval != 0 and 0 <= first - old.start_ms < interval
    assert _sim("old", None).cleanup_schedule == old.cleanup_schedule  # seeded
    assert _sim("old", None, seed=4).cleanup_schedule != old.cleanup_schedule
    new = _sim("new", None)
    shard_firsts = {sched[0][1] for sched in new.cleanup_schedule.values()}
    assert len(shard_firsts) > 40  # a phase per shard (the time it was loaded)
    assert all(0 <= t - new.start_ms < interval for t in shard_firsts)


def test_a_group_dies_on_its_shards_check_after_the_due_time_not_at_the_due_millisecond() -> None:
    sim = _sim("new", None)
    sim.add_client("c", ClientConfig("c", "solo", ("t",), session_timeout_ms=10_000))
    start = sim.start_ms
    sim.at(start, sim.clients["c"].start)
    sim.at(start + 30_000, sim.clients["c"].stop)
    sim.run(start + 3_600_000)
    (death,) = sim.coordinator.deaths
    part = sim.log.partition("solo")
    ((_, first),) = sim.cleanup_schedule[part]
    assert death[2] == "retention"
    assert (death[0] - first) % 600_000 == 0
    empty_at = start + 30_000
    assert empty_at + 120_000 <= death[0] < empty_at + 120_000 + 600_000


def test_a_failover_moves_a_new_coordinator_shards_checks_to_one_interval_after_its_load() -> None:
    sim = _sim("new", None)
    part = 7
    sim.at(sim.start_ms + 1_000_000, lambda: sim.failover_partition(part, 2_000))
    sim.run(sim.start_ms + 1_100_000)
    assert sim.cleanup_schedule[part][-1] == (sim.start_ms + 1_002_000, sim.start_ms + 1_602_000)


def test_a_scenario_can_leave_the_retention_check_phase_to_the_seed() -> None:
    raw = {"seed": 5, "coordinator": {"coordinator": "new", "offsets_retention_check_phase_ms": None}}
    sim = Scenario.from_dict(raw).build()
    firsts = {sched[0][1] for sched in sim.cleanup_schedule.values()}
    assert len(firsts) > 1
