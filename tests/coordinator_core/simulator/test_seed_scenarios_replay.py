"""The seed walk-throughs (seeds 000 and 001), replayed from the records they would write.

Seed 000 (Kafka技术内幕, the consumer-group state machine) describes three ways three consumers
join one group and what the group goes through; seed 001 (GroupCoordinator source walk-through)
describes offset-only groups and the Empty -> Dead path. Each test writes the records the
coordinator stores in each case (only the leader's SyncGroup and the Empty generation are
persisted) and checks the generations, the inferred states and the final state.

The second half replays the coordinator simulator's versions of the same scenarios
(``conf/scenarios/book_*.yaml`` and friends) and compares with the simulator's own trace.
The book's broker (before 0.10.1) created groups in Stable instead of Empty; the simulator
reproduces that with ``new_group_state: Stable``, so the first state is compared separately.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator_core.events import GroupLifecycle, Rebalance, StateTransition
from coordinator_core.loader.replay import ReplayResult, replay, replay_groups
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.state import GroupState
from tests.coordinator_core.replay_builders import GroupLog, member

SCENARIOS = Path(__file__).resolve().parents[3] / "conf" / "scenarios"


def _states(result: ReplayResult) -> list[str]:
    out: list[str] = []
    for e in result.events:
        if isinstance(e, StateTransition):
            if not out and e.from_state is not None:
                out.append(e.from_state)
            out.append(e.to_state)
    return out


def _participation(log: GroupLog) -> dict[str, int]:
    result = replay(new_snapshot("book-group"), log.records, assume_log_start=True)
    seen: dict[str, int] = {}
    gens: dict[int, set[str]] = {}
    for e in result.events:
        if e.kind == "group_member":
            gens.setdefault(e.generation, set()).add(e.member_id)  # type: ignore[union-attr]
    for members in gens.values():
        for m in members:
            seen[m] = seen.get(m, 0) + 1
    return seen


def test_three_consumers_at_once_one_rebalance_two_generations() -> None:
    # consumer-3 joins first and completes a generation alone (CompletingRebalance, gen 1);
    # consumer-2 and consumer-1 join before its SyncGroup: back to PreparingRebalance; gen 2
    # completes with all three. Only generation 2 is written. Then the application stops.
    log = GroupLog("book-group")
    log.stable(
        2,
        [
            member("consumer-3", assigned={"topic-a": [0]}),
            member("consumer-2", assigned={"topic-a": [1]}),
            member("consumer-1", assigned={"topic-a": [2]}),
        ],
        leader="consumer-3",
    )
    log.empty(3, at=log.now + 60_000)
    result = replay(new_snapshot("book-group"), log.records, assume_log_start=True)
    assert _states(result)[:6] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
    ]
    rebalances = [e for e in result.events if isinstance(e, Rebalance)]
    first = rebalances[0]
    assert (first.generation, first.skipped_generations, first.leader) == (2, 1, "consumer-3")
    assert sorted(first.joined) == ["consumer-1", "consumer-2", "consumer-3"]
    # one assignment: every consumer gets one partition, once
    assert sorted((m, p) for m, _, p in first.partitions_gained) == [
        ("consumer-1", 2),
        ("consumer-2", 1),
        ("consumer-3", 0),
    ]
    # closing the application: all three removed, the group is Empty (generation 3)
    assert _states(result)[-2:] == ["PreparingRebalance", "Empty"]
    assert (result.snapshot.state, result.snapshot.generation) == (GroupState.EMPTY, 3)
    # with no offsets the next cleanup removes the group (Empty -> Dead): until its window (one
    # cleanup interval) has passed it is a forecast and the group is still Empty
    settings = ReplaySettings(retention_ms=7 * 86_400_000)
    due = replay(result.snapshot, [], settings=settings, as_of_ms=log.now + 600_000)
    assert due.snapshot.state is GroupState.EMPTY and due.snapshot.exists
    dead = replay(result.snapshot, [], settings=settings, as_of_ms=log.now + 2 * 600_000)
    assert dead.snapshot.state is GroupState.DEAD


def test_three_consumers_one_second_apart_two_rebalances() -> None:
    log = GroupLog("book-group")
    log.stable(1, [member("consumer-1", assigned={"topic-a": [0, 1, 2]})])
    log.stable(
        2,
        [
            member("consumer-1", assigned={"topic-a": [0]}),
            member("consumer-2", assigned={"topic-a": [1]}),
            member("consumer-3", assigned={"topic-a": [2]}),
        ],
        at=log.now + 1500,
    )
    result = replay(new_snapshot("book-group"), log.records, assume_log_start=True)
    assert _states(result) == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
    ]
    second = [e for e in result.events if isinstance(e, Rebalance)][1]
    assert (second.previous_generation, second.generation, second.skipped_generations) == (1, 2, 0)
    assert second.partitions_moved == 2
    assert sorted(second.partitions_lost) == [("consumer-1", "topic-a", 1), ("consumer-1", "topic-a", 2)]
    # consumer-1 took part in two rebalances, consumer-2 and consumer-3 in one
    assert _participation(log) == {"consumer-1": 2, "consumer-2": 1, "consumer-3": 1}


def test_three_consumers_three_rebalances() -> None:
    log = GroupLog("book-group")
    log.stable(1, [member("consumer-1", assigned={"topic-a": [0, 1, 2]})])
    log.stable(
        2,
        [member("consumer-1", assigned={"topic-a": [0, 1]}), member("consumer-2", assigned={"topic-a": [2]})],
        at=log.now + 1000,
    )
    log.stable(
        3,
        [
            member("consumer-1", assigned={"topic-a": [0]}),
            member("consumer-2", assigned={"topic-a": [1]}),
            member("consumer-3", assigned={"topic-a": [2]}),
        ],
        at=log.now + 2000,
    )
    result = replay(new_snapshot("book-group"), log.records, assume_log_start=True)
    assert _states(result) == ["Empty"] + ["PreparingRebalance", "CompletingRebalance", "Stable"] * 3
    assert [e.generation for e in result.events if isinstance(e, Rebalance)] == [1, 2, 3]
    assert _participation(log) == {"consumer-1": 3, "consumer-2": 2, "consumer-3": 1}


def test_follower_missing_its_join_response_writes_no_new_generation() -> None:
    # the follower rejoins while the group is Stable and gets the current generation at once
    log = GroupLog("book-group")
    members = [member(f"consumer-{i}", assigned={"topic-a": [i - 1]}) for i in (1, 2, 3)]
    log.stable(1, members)
    result = replay(new_snapshot("book-group"), log.records, assume_log_start=True)
    assert _states(result) == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"]
    assert len([e for e in result.events if isinstance(e, Rebalance)]) == 1


def test_offsets_of_an_unknown_group_create_an_empty_group_that_dies_with_its_last_offset() -> None:
    # seed 001: handleCommitOffsets with generationId < 0 for an unknown group adds
    # new GroupMetadata(groupId, Empty); "Empty -> Dead: the last offset was deleted"
    log = GroupLog("standalone")
    log.commit("t", 0, 42)
    result = replay(new_snapshot("standalone"), log.records)
    snap = result.snapshot
    assert (snap.state, snap.protocol_type, snap.generation) == (GroupState.EMPTY, None, 0)
    week = 7 * 86_400_000
    # once its cleanup window (due .. due + 10 min) has passed
    expired = replay(snap, [], settings=ReplaySettings(retention_ms=week), as_of_ms=log.now + week + 600_000)
    assert expired.snapshot.state is GroupState.DEAD and expired.snapshot.offset_count == 0
    (death,) = [e for e in expired.events if isinstance(e, GroupLifecycle) and e.event == "group_deleted"]
    assert not death.group_tombstone  # generation 0: "only using Kafka for offset storage"


def test_preparing_rebalance_to_empty_when_every_consumer_leaves() -> None:
    log = GroupLog("g")
    log.stable(4, [member("a"), member("b")])
    log.empty(5, at=log.now + 2000)
    result = replay(new_snapshot("g"), log.records)
    assert _states(result)[-3:] == ["Stable", "PreparingRebalance", "Empty"]
    assert result.snapshot.generation == 5


# --------------------------------------------------------------------------------------------
# The simulator's runs of the same scenarios
# --------------------------------------------------------------------------------------------
def _scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("path", _scenario_files(), ids=lambda p: p.stem)
def test_replaying_the_simulators_log_gives_its_generations_and_states(path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    from coordinator_core.simulator import Scenario

    scenario = Scenario.from_dict(yaml.safe_load(path.read_text()))
    run = scenario.run()
    group = str(scenario.expect.get("group", ""))
    sim_states = run.states(group)
    # the broker's group.initial.rebalance.delay.ms is not in the log: the replay is told it
    delay = ReplaySettings(
        retention_ms=None, initial_rebalance_delay_ms=scenario.coordinator.initial_rebalance_delay_ms
    )
    replayed = replay_groups(run.records, assume_log_start=True, settings=delay)[group]
    states = _states(replayed)
    assert states[0] == "Empty"
    assert states[1:] == sim_states[1:]
    sim_group = run.sim.coordinator.groups.get(group)
    assert sim_group is not None
    assert replayed.snapshot.generation == sim_group.generation
    if "generation" in scenario.expect:
        assert replayed.snapshot.generation == scenario.expect["generation"]
    if "final_state" in scenario.expect:
        assert replayed.snapshot.state.value == scenario.expect["final_state"]
    sim_edges = [
        (e.from_state, e.to_state, e.generation, e.time_ms)
        for e in run.events
        if e.kind == "transition" and e.group_id == group
    ]
    transitions = [e for e in replayed.events if isinstance(e, StateTransition)]
    # what the replay calls observed happened exactly then (current_state_timestamp, record time)
    for t in transitions:
        if t.observed and t.from_state is not None:
            assert (t.from_state, t.to_state, t.generation, t.timestamp_ms) in sim_edges, t
    # an estimated rebalance start comes with a window that holds the real one (issue 17: the
    # estimate itself is no longer the earliest possible start)
    for t in transitions:
        if t.to_state == "PreparingRebalance" and t.timestamp_source == "estimate":
            real = [at for _, to, g, at in sim_edges if to == "PreparingRebalance" and g == t.generation]
            lo, hi = t.timestamp_earliest_ms, t.timestamp_latest_ms
            assert t.timestamp_ms is not None and hi is not None, t
            assert any((lo is None or lo <= at) and at <= hi for at in real), (t, real)
            assert (lo is None or lo <= t.timestamp_ms) and t.timestamp_ms <= hi, t
