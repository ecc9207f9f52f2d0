"""The bulk path (``replay_runs`` over ``compress_commit_runs``) equals the per-record replay.

Compressed replay must give the same snapshot (and bytes), the same events in the same order
and the same counters as ``replay`` over every record — across rule sets, both coordinators,
retentions short enough that offsets expire inside and between runs, Empty groups (base
``current_state_timestamp``), explicit v1 expire timestamps, tombstones, group deletion, and a
replay onto an existing snapshot whose input overlaps positions already applied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord, OffsetCommitKey
from coordinator_core.expiry import COORDINATORS, RULE_SETS
from coordinator_core.loader.commit_runs import CommitRun, RunCounters, compress_commit_runs
from coordinator_core.loader.group_fold import ALL_EVENT_KINDS
from coordinator_core.loader.replay import ReplayResult, replay, replay_runs
from coordinator_core.loader.snapshot import GroupSnapshot, new_snapshot
from coordinator_core.loader.snapshot_codec import serialize_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.generator import generate
from tests.coordinator_core.replay_builders import GroupLog, member
from tests.coordinator_core.stored import stored

MINUTE = 60_000
HOUR = 60 * MINUTE
NO_COMMIT_EVENTS = tuple(sorted(ALL_EVENT_KINDS - {"offset_commit"}))


def _rows(result: ReplayResult) -> list[dict[str, Any]]:
    return [e.to_row() | {"kind": e.kind} for e in result.events]


def assert_same(full: ReplayResult, bulk: ReplayResult) -> None:
    assert bulk.snapshot == full.snapshot
    assert serialize_snapshot(bulk.snapshot) == serialize_snapshot(full.snapshot)
    assert _rows(bulk) == _rows(full)
    assert bulk.events == full.events
    assert bulk.stats.as_dict() == full.stats.as_dict()


def settings_kw(kw: dict[str, Any]) -> dict[str, Any]:
    """The replay keywords with the broker settings among them folded into ``settings=``."""
    keys = ("retention_ms", "rules", "coordinator", "cleanup_interval_ms")
    given = {k: kw[k] for k in keys if k in kw}
    return {
        **{k: v for k, v in kw.items() if k not in keys},
        "settings": ReplaySettings(**{"retention_ms": None, **given}),
    }


def both(
    snapshot: GroupSnapshot, records: list[LogRecord], *, max_span_ms: int | None = None, **kw: Any
) -> tuple[ReplayResult, ReplayResult, RunCounters]:
    kw = settings_kw(kw)
    full = replay(snapshot, records, **kw)
    counters = RunCounters()
    bulk = replay_runs(snapshot, compress_commit_runs(records, max_span_ms=max_span_ms), counters=counters, **kw)
    assert_same(full, bulk)
    return full, bulk, counters


# ---------------------------------------------------------------------------------------------
# A strategy: bursts of commits over few keys, group records, tombstones, odd timestamps
# ---------------------------------------------------------------------------------------------
_STEPS = [0, 0, 1, 1000, 5 * MINUTE, 20 * MINUTE, HOUR, 3 * HOUR, 30 * HOUR]
_burst = st.tuples(st.just("burst"), st.integers(1, 14), st.integers(0, 10**6))
_op = st.one_of(
    _burst,
    _burst,
    _burst,
    st.tuples(st.just("v1commit"), st.sampled_from(["a", "c"]), st.integers(-3, 40)),
    st.tuples(st.just("old_commit"), st.sampled_from(["a", "b"]), st.integers(0, 50)),
    st.tuples(st.just("tombstone"), st.sampled_from(["a", "b", "c"]), st.integers(0, 1)),
    st.tuples(st.just("stable"), st.integers(1, 3), st.integers(1, 2), st.sampled_from([["a"], ["a", "b"]])),
    st.tuples(st.just("static"), st.integers(0, 100)),
    st.tuples(st.just("empty"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("connect"), st.integers(1, 2)),
    st.tuples(st.just("group_tombstone")),
    st.tuples(st.just("delete_group")),
    st.tuples(st.just("unknown")),
    st.tuples(st.just("back_in_time"), st.integers(1, 90)),
)


@st.composite
def bulk_logs(draw: Any) -> list[LogRecord]:
    log = GroupLog()
    gen = 0
    keys = [("a", 0), ("a", 1), ("b", 0), ("c", 0), ("c", 2)]
    offsets = dict.fromkeys(keys, 0)
    for op in draw(st.lists(_op, min_size=4, max_size=30)):
        log.advance(draw(st.sampled_from(_STEPS)))
        kind = op[0]
        if kind == "burst":
            n, seed = op[1], op[2]
            for i in range(n):
                tp = keys[(seed >> (3 * (i % 6))) % len(keys)] if i % 4 else keys[seed % len(keys)]
                offsets[tp] += 1 + (seed + i) % 7
                log.advance([0, 1, 1000, 7 * MINUTE][(seed + 3 * i) % 4])
                log.commit(tp[0], tp[1], offsets[tp])
        elif kind == "v1commit":
            log.commit(op[1], 0, 7, expire=log.now + op[2] * 5 * MINUTE)
        elif kind == "old_commit":  # a commit timestamp older than the record (base = commit)
            log.commit(op[1], 1, 3, commit_ts=log.now - op[2] * 10 * MINUTE)
        elif kind == "tombstone":
            log.offset_tombstone(op[1], op[2])
        elif kind == "stable":
            gen += op[1]
            members = [
                member(f"m{i}-{gen}", topics=op[3], assigned={"a": [i]}, instance="s0" if i == 0 else None)
                for i in range(op[2])
            ]
            log.stable(gen, members)
        elif kind == "static" and gen > 0:
            log.stable(gen, [member(f"m0-{gen}-{op[1]}", topics=["a"], assigned={"a": [0]}, instance="s0")])
        elif kind == "empty":
            gen += op[1]
            log.empty(gen, cst=log.now - op[2] * 20 * MINUTE)
        elif kind == "connect":
            gen += op[1]
            log.stable(gen, [member(f"w{gen}", topics=["x"])], protocol_type="connect")
        elif kind == "group_tombstone":
            log.group_tombstone()
        elif kind == "delete_group":  # DeleteGroups: offset tombstones + group tombstone, one instant
            for t, p in keys[:3]:
                log.offset_tombstone(t, p)
            log.group_tombstone()
        elif kind == "unknown":
            log.unknown(5)
        elif kind == "back_in_time":  # a record timestamp earlier than the one before
            log.now -= op[1] * MINUTE
            log.commit("a", 0, 1)
    return log.records


_settings = st.fixed_dictionaries(
    {
        "retention_ms": st.sampled_from([None, 10 * MINUTE, 45 * MINUTE, 2 * HOUR, 48 * HOUR]),
        "rules": st.sampled_from(RULE_SETS),
        "coordinator": st.sampled_from(COORDINATORS),
        "assume_log_start": st.booleans(),
    }
)


@settings(max_examples=400, deadline=None)
@given(bulk_logs(), _settings, st.sampled_from([None, 0, 1, 2 * HOUR]), st.sampled_from([None, MINUTE, HOUR]))
def test_compressed_replay_equals_full_replay(
    records: list[LogRecord], opts: dict[str, Any], as_of_extra: int | None, span: int | None
) -> None:
    as_of = None if as_of_extra is None or not records else max(r.timestamp_ms for r in records) + as_of_extra
    both(new_snapshot("g"), records, max_span_ms=span, as_of_ms=as_of, event_kinds=NO_COMMIT_EVENTS, **opts)


@settings(max_examples=150, deadline=None)
@given(bulk_logs(), _settings, st.integers(0, 200), st.integers(0, 200))
def test_compressed_replay_onto_an_existing_snapshot_with_overlapping_input_equals_full(
    records: list[LogRecord], opts: dict[str, Any], cut: int, back: int
) -> None:
    """The stream's case: the snapshot already holds a prefix; the next input re-delivers part of
    it (duplicates, possibly in the middle of a run) before new records."""
    cut %= len(records) + 1
    start = cut - back % (cut + 1)
    before = replay(new_snapshot("g"), records[:cut], event_kinds=NO_COMMIT_EVENTS, **settings_kw(opts)).snapshot
    before = stored(before)
    end = max((r.timestamp_ms for r in records), default=0)
    full, _, _ = both(before, records[start:], as_of_ms=end, event_kinds=NO_COMMIT_EVENTS, **opts)
    assert full.stats.duplicates_skipped == cut - start


@settings(max_examples=60, deadline=None)
@given(bulk_logs(), _settings)
def test_with_every_event_kind_runs_are_replayed_record_by_record(
    records: list[LogRecord], opts: dict[str, Any]
) -> None:
    _, _, counters = both(new_snapshot("g"), records, **opts)
    assert counters.compressed == 0
    assert counters.expanded == counters.runs


# ---------------------------------------------------------------------------------------------
# The reducer
# ---------------------------------------------------------------------------------------------
def test_reducer_keeps_the_first_commit_and_the_last_per_partition() -> None:
    log = GroupLog()
    log.stable(1, [member("m", topics=["t"], assigned={"t": [0, 1]})])
    first = log.commit("t", 0, 1)
    log.advance(1000).commit("t", 1, 1)
    log.advance(1000).commit("t", 0, 2)
    last_t1 = log.advance(1000).commit("t", 1, 3)
    last_t0 = log.advance(1000).commit("t", 0, 4, expire=log.now + HOUR)
    tomb = log.offset_tombstone("t", 0)
    items = compress_commit_runs(log.records)
    assert items[0] is log.records[0] and items[-1] is tomb and len(items) == 3
    run = items[1]
    assert isinstance(run, CommitRun)
    assert list(run.kept) == [first, last_t1, last_t0]
    assert run.count == 5 and run.first_position == first.position
    assert run.max_timestamp_ms == last_t0.timestamp_ms
    assert run.min_commit_timestamp_ms == first.timestamp_ms
    assert run.min_expire_timestamp_ms == log.now + HOUR
    assert list(run.expand()) == log.records[1:6]


def test_reducer_cuts_runs_at_positions_that_do_not_increase_and_at_span_buckets() -> None:
    log = GroupLog()
    recs = [log.advance(MINUTE).commit("t", 0, i) for i in range(6)]
    dup = recs[2]
    items = compress_commit_runs([*recs[:4], dup, *recs[4:]], max_span_ms=None)
    runs = [i for i in items if isinstance(i, CommitRun)]
    assert [r.count for r in runs] == [4, 2 + 1] or [r.count for r in runs] == [4]
    # the re-delivered record starts a new run; nothing is lost
    flat = [x for i in items for x in (i.expand() if isinstance(i, CommitRun) else [i])]
    assert flat == [*recs[:4], dup, *recs[4:]]
    bucketed = compress_commit_runs(recs, max_span_ms=3 * MINUTE)
    assert all(
        isinstance(i, LogRecord) or len({r.timestamp_ms // (3 * MINUTE) for r in i.expand()}) == 1 for i in bucketed
    )


# ---------------------------------------------------------------------------------------------
# When a run is (not) compressed, and that it still comes out the same
# ---------------------------------------------------------------------------------------------
def _stable_burst(retention: int | None, n: int = 30, step: int = MINUTE) -> GroupLog:
    log = GroupLog()
    log.stable(1, [member("m", topics=["t"], assigned={"t": [0, 1, 2]})])
    for i in range(n):
        log.advance(step).commit("t", i % 3, i)
    log.advance(step).empty(2)
    return log


def test_a_run_with_nothing_due_is_applied_from_its_survivors() -> None:
    log = _stable_burst(None)
    _, bulk, counters = both(new_snapshot("g"), log.records, retention_ms=48 * HOUR, event_kinds=NO_COMMIT_EVENTS)
    assert counters.runs == counters.compressed == 1 and counters.commits_skipped == 30 - 4  # first + last of 3 keys
    assert bulk.stats.offset_commits == 30 and bulk.snapshot.records_applied == len(log.records)


def test_a_run_inside_which_an_offset_expires_is_replayed_record_by_record() -> None:
    """A simple group (no protocol type: base = commit time) committing one partition once and
    another for longer than the retention: the first expires inside the run."""
    log = GroupLog()
    log.commit("lonely", 0, 1)
    for i in range(40):
        log.advance(MINUTE).commit("t", 0, i)
    full, _, counters = both(new_snapshot("g"), log.records, retention_ms=20 * MINUTE, event_kinds=NO_COMMIT_EVENTS)
    assert counters.expanded == 1 and counters.expanded_by_reason == {"expiry": 1}
    # the lonely offset was due inside the run; the group kept committing and no tombstone came
    # (a group with offsets only: counted once a first group record shows that phase was real)
    assert full.snapshot.pending_contradictions == 1
    assert full.snapshot.to_state_row()["predictions_contradicted"] == 1
    assert not any(e.kind == "offset_expiration" for e in full.events)


def test_short_spans_keep_runs_compressible_under_a_short_retention() -> None:
    log = GroupLog()
    for i in range(60):
        log.advance(MINUTE).commit("t", i % 2, i)
    _, _, counters = both(
        new_snapshot("g"), log.records, max_span_ms=5 * MINUTE, retention_ms=20 * MINUTE, event_kinds=NO_COMMIT_EVENTS
    )
    assert counters.compressed >= 10 and counters.expanded == 0


def test_an_empty_groups_offsets_expire_from_the_state_timestamp_even_while_committing() -> None:
    """Empty group: the base is current_state_timestamp, so fresh commits do not push expiry out."""
    log = GroupLog()
    log.stable(1, [member("m", topics=["t"], assigned={"t": [0]})])
    log.advance(1000).commit("t", 0, 0)
    log.advance(MINUTE).empty(2)
    for i in range(30):
        log.advance(MINUTE).commit("t", 0, i)
    full, _, counters = both(new_snapshot("g"), log.records, retention_ms=10 * MINUTE, event_kinds=NO_COMMIT_EVENTS)
    assert counters.expanded_by_reason == {"expiry": 1}
    assert full.stats.predictions_contradicted >= 1
    assert not [e for e in full.events if e.kind == "offset_expiration"]


def test_a_run_that_creates_the_group_tells_it_at_the_first_commit() -> None:
    log = GroupLog()
    first = log.commit("t", 0, 1)
    for i in range(5):
        log.advance(1000).commit("t", 0, i + 2)
    full, _, counters = both(new_snapshot("g"), log.records, retention_ms=HOUR, event_kinds=NO_COMMIT_EVENTS)
    assert counters.compressed == 1
    created = [e for e in full.events if e.kind == "group_lifecycle" and e.to_row()["event"] == "group_created"]
    assert len(created) == 1 and created[0].to_row()["log_offset"] == first.offset


def test_a_run_redelivered_onto_a_snapshot_that_holds_part_of_it_is_replayed_record_by_record() -> None:
    log = _stable_burst(48 * HOUR)
    before = replay(new_snapshot("g"), log.records[:10], settings=ReplaySettings(retention_ms=48 * HOUR)).snapshot
    _, _, counters = both(before, log.records[5:], retention_ms=48 * HOUR, event_kinds=NO_COMMIT_EVENTS)
    assert counters.expanded_by_reason == {"duplicates": 1}


# ---------------------------------------------------------------------------------------------
# Realistic logs: the generator and the simulator scenarios
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def generated_groups() -> dict[str, list[LogRecord]]:
    log = generate(groups=8, hours=1.0, seed=9)
    by_group: dict[str, list[LogRecord]] = {}
    for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True):
        rec = decode_record(k, v)
        if rec.key.group is not None:
            by_group.setdefault(rec.key.group, []).append(LogRecord(p, o, ts, rec.key, rec.value))
    for recs in by_group.values():
        recs.sort(key=lambda r: r.position)
    return by_group


@pytest.mark.parametrize("retention_ms", [None, 2 * MINUTE, 10 * MINUTE, 7 * 24 * HOUR])
@pytest.mark.parametrize("coordinator", COORDINATORS)
def test_generator_log_compressed_equals_full(
    generated_groups: dict[str, list[LogRecord]], retention_ms: int | None, coordinator: str
) -> None:
    total = RunCounters()
    for gid, recs in generated_groups.items():
        as_of = recs[-1].timestamp_ms + HOUR
        kw: dict[str, Any] = {
            "retention_ms": retention_ms,
            "as_of_ms": as_of if retention_ms else None,
            "coordinator": coordinator,
            "event_kinds": NO_COMMIT_EVENTS,
            "assume_log_start": True,
        }
        kw = settings_kw(kw)
        full = replay(new_snapshot(gid), recs, **kw)
        bulk = replay_runs(new_snapshot(gid), compress_commit_runs(recs, max_span_ms=MINUTE), counters=total, **kw)
        assert_same(full, bulk)
    assert total.compressed > 0 and total.commits_skipped > 0


def test_scenario_logs_compressed_equal_full() -> None:
    from pipelines.inputs.scenario_files import load_scenario, shipped_scenarios

    paths: list[Path] = list(shipped_scenarios())
    assert paths
    for path in paths:
        result = load_scenario(str(path)).run()
        by_group: dict[str, list[LogRecord]] = {}
        for r in result.records:
            if r.group is not None:
                by_group.setdefault(r.group, []).append(r)
        for gid, recs in by_group.items():
            for retention in (None, 5_000, 60_000):
                both(
                    new_snapshot(gid),
                    recs,
                    retention_ms=retention,
                    event_kinds=NO_COMMIT_EVENTS,
                    assume_log_start=True,
                    as_of_ms=recs[-1].timestamp_ms + 120_000 if retention else None,
                )


def test_replay_runs_of_plain_records_is_replay() -> None:
    log = _stable_burst(None, n=5)
    log.offset_tombstone("t", 0)
    assert all(not isinstance(r.key, OffsetCommitKey) or True for r in log.records)
    full = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=HOUR))
    assert_same(full, replay_runs(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=HOUR)))


def test_the_working_state_freezes_every_field_in_place() -> None:
    """``GroupFold.freeze`` and ``new_snapshot`` fill the snapshot's slots positionally: every field
    must land where it belongs (distinct values everywhere)."""
    import dataclasses
    from types import MappingProxyType

    from coordinator_core.codec.records import OffsetCommitValue
    from coordinator_core.loader.group_fold import GroupFold
    from coordinator_core.settings import FACTS_ONLY
    from coordinator_core.state import GroupState

    s = GroupSnapshot(
        group_id="g",
        state=GroupState.STABLE,
        exists=True,
        generation=3,
        protocol_type="consumer",
        protocol="range",
        leader="m0",
        current_state_timestamp=5,
        members=(member("m0"),),
        has_metadata=True,
        metadata_timestamp_ms=6,
        state_timestamp_ms=7,
        subscribed_topics=frozenset({"t"}),
        offsets=MappingProxyType({("t", 0): (OffsetCommitValue(1, "", 2), 7, 8, 9)}),
        last_position=(7, 8),
        last_timestamp_ms=10,
        records_applied=11,
        unsupported_records=12,
        last_offset_removal_ms=13,
        tombstone_run=(("t", 2, 1, 2, 3, 4),),
        settled=MappingProxyType({("t", 0): 15}),
        settled_death_ms=16,
        situation_since_ms=17,
        first_position=(7, 1),
        new_coordinator_seen=True,
        predictions_contradicted=18,
    )  # the view's forecast fields are recomputed by every call that has an as_of (finish)
    frozen = GroupFold(s, FACTS_ONLY, frozenset()).freeze()
    for f in dataclasses.fields(GroupSnapshot):
        assert getattr(frozen, f.name) == getattr(s, f.name), f.name
    fresh = new_snapshot("x")
    for f in dataclasses.fields(GroupSnapshot):
        assert getattr(fresh, f.name) == getattr(GroupSnapshot("x"), f.name), f.name
