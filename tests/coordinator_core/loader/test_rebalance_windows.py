"""Issue 17: an inferred rebalance start is a window that holds the truth.

The generator's simulator knows when each group entered PreparingRebalance (its truth's
``rebalance_starts``); the log does not. On generated worlds (Kafka 3's and Kafka 4's
coordinator, crashes, rolling deploys, static members, members restarting together, coordinator
failovers, churn) every inferred start's window [earliest, latest] must contain the true start,
the estimate must lie inside its window, and a window must be narrower than the rebalance
timeout where the log allows it (the old fixed guess put every start at the timeout's edge).
Known answers with hand-built logs pin each rule of ``coordinator_core.loader.rebalance.start_window``.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from coordinator_core.events import Rebalance, StateTransition
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.generator import generate
from coordinator_core.simulator.rebalance_truth import WindowCheck, check_windows
from tests.coordinator_core.replay_builders import GroupLog, member

WORLDS: list[tuple[int, dict[str, Any]]] = [
    (0, {"coordinator": "old"}),
    (1, {"coordinator": "new"}),
    (2, {"coordinator": "old", "mass_restarts": 0.7, "failovers_per_hour": 3.0, "churn_per_hour": 3.0}),
    (4, {"coordinator": "new", "mass_restarts": 0.7, "churn_per_hour": 3.0}),
]


def _checks(seed: int, options: dict[str, Any]) -> tuple[list[WindowCheck], dict[str, Any]]:
    log = generate(groups=12, hours=1.0, seed=seed, **options)
    return check_windows(log.keys, log.values, log.partitions, log.offsets, log.timestamps, log.truth), log.truth


@pytest.mark.slow
def test_every_inferred_rebalance_window_holds_the_true_start_on_generated_worlds() -> None:
    checks: list[WindowCheck] = []
    planned: dict[str, list[str]] = {}
    traits: dict[str, list[str]] = {}
    for seed, options in WORLDS:
        got, truth = _checks(seed, options)
        for c in got:
            planned[c.group_id] = truth["groups"][c.group_id]["planned_events"]
            traits[c.group_id] = truth["groups"][c.group_id]["traits"]
        missed = [c for c in got if not c.contains]
        assert not missed, (seed, missed[:5])
        checks += got
    assert len(checks) > 150
    for c in checks:
        assert (c.earliest_ms is None or c.earliest_ms <= c.estimate_ms) and c.estimate_ms <= c.latest_ms, c
    # the worlds hold what the issue names: crashes, rolling deploys, static members, mass restarts
    groups = {c.group_id for c in checks}
    assert any(any(e.startswith("crash@") for e in planned[g]) for g in groups)
    assert any(any(e.startswith("deploy@") for e in planned[g]) for g in groups)
    assert any(c.kind == "static" for c in checks)
    assert any("mass_restart" in traits[g] for g in groups)
    assert {"departed_session_timeout", "departed_last_commit", "initial_delay", "members_rejoin"} <= {
        c.method for c in checks
    }
    # the windows say something: most are far narrower than the 5-minute rebalance timeout
    widths = [c.width_ms for c in checks if c.width_ms is not None]
    assert statistics.median(widths) < 60_000


def test_a_crash_rebalance_window_reaches_back_to_the_rebalance_timeout_and_ends_at_the_join() -> None:
    # a dynamic member vanishes; the others rejoin; the record says when the join ended. The log
    # cannot tell the crash from a slow rejoin: the window is [end - rebalance timeout, end], and
    # the estimate is the departed member's last commit + its session timeout (the commit reset
    # its session timer), not the window's edge (the old guess: end - rebalance timeout)
    log = GroupLog()
    log.stable(1, [member("a", assigned={"t": [0]}), member("b", assigned={"t": [1]})])
    log.advance(600_000)
    log.commit("t", 1, 20)
    log.commit("t", 0, 10)
    crash = log.now
    log.advance(20_000)
    end_join = log.now
    log.stable(2, [member("b", assigned={"t": [0, 1]})], at=end_join + 50, cst=end_join)
    res = replay(new_snapshot("g"), log.records)
    rb = [e for e in res.events if isinstance(e, Rebalance)][-1]
    assert (rb.start_earliest_ms, rb.start_latest_ms) == (end_join - 30_000, end_join)  # member()'s timeout
    assert rb.start_method == "departed_session_timeout"
    assert rb.start_ms == crash + 10_000  # member()'s session timeout
    assert (rb.duration_min_ms, rb.duration_max_ms) == (50, 30_050)
    pr = [e for e in res.events if isinstance(e, StateTransition) and e.to_state == "PreparingRebalance"][-1]
    assert (pr.timestamp_earliest_ms, pr.timestamp_latest_ms, pr.timestamp_ms) == (
        end_join - 30_000,
        end_join,
        crash + 10_000,
    )
    assert pr.estimate_method == "departed_session_timeout" and not pr.observed


def test_a_member_leaving_right_after_its_last_commit_is_estimated_at_that_commit() -> None:
    log = GroupLog()
    log.stable(1, [member("a", assigned={"t": [0]}), member("b", assigned={"t": [1]})])
    log.advance(600_000)
    log.commit("t", 0, 10)
    left = log.now
    log.advance(2_000)
    log.stable(2, [member("b", assigned={"t": [0, 1]})], at=log.now + 10, cst=log.now)
    rb = [e for e in replay(new_snapshot("g"), log.records).events if isinstance(e, Rebalance)][-1]
    assert (rb.start_method, rb.start_ms) == ("departed_last_commit", left)


def test_a_window_never_reaches_before_the_previous_group_record() -> None:
    log = GroupLog()
    log.stable(1, [member("a"), member("b")])
    prev = log.now
    log.advance(20_000)
    end_join = log.now
    log.stable(2, [member("a"), member("b"), member("c")], at=end_join + 10, cst=end_join)
    rb = [e for e in replay(new_snapshot("g"), log.records).events if isinstance(e, Rebalance)][-1]
    assert rb.start_earliest_ms == prev and rb.start_latest_ms == end_join
    assert rb.start_method == "members_rejoin"


def test_static_members_or_skipped_generations_leave_the_window_open_to_the_previous_record() -> None:
    # onCompleteJoin re-arms the join phase while unjoined static members remain: no
    # rebalance-timeout bound; skipped generations are several join phases: none either
    for members, generation in (([member("a", instance="s-a"), member("b", instance="s-b")], 2), ([member("a")], 4)):
        log = GroupLog()
        log.stable(1, members)
        prev = log.now
        log.advance(3_600_000)
        log.stable(generation, members, at=log.now + 10, cst=log.now)
        rb = [e for e in replay(new_snapshot("g"), log.records).events if isinstance(e, Rebalance)][-1]
        assert rb.start_earliest_ms == prev, generation
        assert rb.duration_max_ms == rb.end_ms - prev


def test_the_initial_delay_setting_bounds_a_rebalance_from_empty() -> None:
    # group.initial.rebalance.delay.ms is the broker's, not the log's: the replay setting says it
    log = GroupLog()
    log.stable(1, [member("m0")])
    log.empty(2, at=log.now + 60_000)
    log.advance(60_000)
    end_join = log.now
    log.stable(3, [member("n0"), member("n1")], at=end_join + 100, cst=end_join)

    def window(delay: int) -> tuple[int | None, int | None]:
        settings = ReplaySettings(retention_ms=None, initial_rebalance_delay_ms=delay)
        rb = [e for e in replay(new_snapshot("g"), log.records, settings=settings).events if isinstance(e, Rebalance)]
        return rb[-1].start_earliest_ms, rb[-1].start_latest_ms

    assert window(3_000) == (end_join - 3_000, end_join - 3_000)
    assert window(10_000) == (end_join - 10_000, end_join - 10_000)
    # 0: a plain join phase (Kafka 0.10), at most the rebalance timeout, ending any time
    assert window(0) == (end_join - 30_000, end_join)
