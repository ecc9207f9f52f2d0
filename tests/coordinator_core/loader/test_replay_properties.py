"""Property tests: the streaming condition (one pass == any split into consecutive chunks, with
the state serialised between chunks and expiry timers in between) and at-least-once input."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_core.codec.records import LogRecord
from coordinator_core.loader.replay import ReplayResult, replay
from coordinator_core.loader.snapshot import GroupSnapshot, new_snapshot
from coordinator_core.settings import ReplaySettings
from tests.coordinator_core.replay_builders import GroupLog, member
from tests.coordinator_core.stored import stored

HOUR = 3_600_000
RETENTION = 48 * HOUR

_op = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(["a", "b", "c"]), st.integers(0, 2), st.integers(0, 1000)),
    st.tuples(st.just("tombstone"), st.sampled_from(["a", "b", "c"]), st.integers(0, 2)),
    st.tuples(st.just("stable"), st.integers(1, 3), st.integers(1, 2), st.sampled_from([["a"], ["a", "b"]])),
    st.tuples(st.just("static"), st.integers(0, 100)),
    st.tuples(st.just("empty"), st.integers(1, 2)),
    st.tuples(st.just("group_tombstone")),
    st.tuples(st.just("unknown")),
    st.tuples(st.just("v1commit"), st.sampled_from(["a", "c"]), st.integers(0, 40)),
)


@st.composite
def group_logs(draw: Any) -> list[LogRecord]:
    log = GroupLog()
    gen = 0
    for op in draw(st.lists(_op, min_size=1, max_size=40)):
        log.advance(draw(st.sampled_from([0, 1, 1000, HOUR, 20 * HOUR, 60 * HOUR])))
        kind = op[0]
        if kind == "commit":
            log.commit(op[1], op[2], op[3])
        elif kind == "v1commit":
            log.commit(op[1], 0, 7, expire=log.now + op[2] * HOUR)
        elif kind == "tombstone":
            log.offset_tombstone(op[1], op[2])
        elif kind == "stable":
            gen += op[1]
            n = op[2]
            members = [
                member(f"m{i}-{gen}", topics=op[3], assigned={"a": [i]}, instance="s0" if i == 0 else None)
                for i in range(n)
            ]
            log.stable(gen, members)
        elif kind == "static" and gen > 0:
            log.stable(gen, [member(f"m0-{gen}-{op[1]}", topics=["a"], assigned={"a": [0]}, instance="s0")])
        elif kind == "empty":
            gen += op[1]
            log.empty(gen)
        elif kind == "group_tombstone":
            log.group_tombstone()
        elif kind == "unknown":
            log.unknown(5)
    return log.records


def _rows(results: list[ReplayResult]) -> list[dict[str, Any]]:
    return [e.to_row() | {"kind": e.kind} for r in results for e in r.events]


def _tables(results: list[ReplayResult]) -> dict[tuple[str, str], dict[str, Any]]:
    """What the event tables hold: the last row per (table, event_key) (they MERGE on it), a
    ``withdrawn`` forecast removed."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        for e in r.events:
            row = e.to_row()
            out[(e.kind, row["event_key"])] = row
    return {k: v for k, v in out.items() if v.get("status") != "withdrawn"}


def _chunks(records: list[LogRecord], cuts: list[int]) -> list[list[LogRecord]]:
    points = sorted({c % (len(records) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(records)]:
        out.append(records[prev:p])
        prev = p
    return out


def _stream(
    records: list[LogRecord], cuts: list[int], retention: int | None, end_ms: int | None, with_log_end: bool = False
) -> tuple[GroupSnapshot, list[ReplayResult]]:
    """Streaming: state stored between micro-batches (both forms, ``stored``); with retention a
    timer fires at each batch end at a watermark that does not pass the next record."""
    chunks = _chunks(records, cuts)
    state = new_snapshot("g")
    results = []
    for i, chunk in enumerate(chunks):
        later = [c for c in chunks[i + 1 :] if c]
        watermark = later[0][0].timestamp_ms if later else end_ms
        r = replay(
            state,
            chunk,
            settings=ReplaySettings(retention_ms=retention),
            as_of_ms=watermark,
            log_end_ms=watermark if with_log_end else None,
        )
        results.append(r)
        state = stored(r.snapshot)
    return state, results


@settings(max_examples=150, deadline=None)
@given(group_logs(), st.lists(st.integers(0, 100), max_size=6))
def test_one_pass_equals_any_split_into_consecutive_chunks(records: list[LogRecord], cuts: list[int]) -> None:
    once = replay(new_snapshot("g"), records)
    snap, parts = _stream(records, cuts, None, None)
    assert snap == once.snapshot
    assert _rows(parts) == _rows([once])


@settings(max_examples=150, deadline=None)
@given(group_logs(), st.lists(st.integers(0, 100), max_size=6), st.integers(0, 200))
def test_with_expiry_timers_one_pass_equals_any_split(
    records: list[LogRecord], cuts: list[int], extra_hours: int
) -> None:
    end = (records[-1].timestamp_ms if records else 0) + extra_hours * HOUR
    for with_log_end in (False, True):
        once = replay(
            new_snapshot("g"),
            records,
            settings=ReplaySettings(retention_ms=RETENTION),
            as_of_ms=end,
            log_end_ms=end if with_log_end else None,
        )
        snap, parts = _stream(records, cuts, RETENTION, end, with_log_end)
        assert snap == once.snapshot
        # forecasts are told again by each call and withdrawn when a later one no longer makes
        # them: the tables (last row per key) are what must agree
        assert _tables(parts) == _tables([once])


@settings(max_examples=100, deadline=None)
@given(group_logs(), st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), max_size=4))
def test_duplicates_change_nothing(records: list[LogRecord], redeliveries: list[tuple[int, int]]) -> None:
    once = replay(new_snapshot("g"), records, settings=ReplaySettings(retention_ms=RETENTION))
    # at-least-once: earlier ranges are delivered again, interleaved with new data
    n = len(records)
    fed: list[LogRecord] = []
    pos = 0
    for a, b in redeliveries:
        upto = min(n, pos + 1 + a % 5)
        fed.extend(records[pos:upto])
        pos = upto
        lo = b % (pos + 1)
        fed.extend(records[lo:pos])
    fed.extend(records[pos:])
    again = replay(new_snapshot("g"), fed, settings=ReplaySettings(retention_ms=RETENTION))
    assert again.snapshot == once.snapshot
    assert _rows([again]) == _rows([once])
    assert replay(once.snapshot, records, settings=ReplaySettings(retention_ms=RETENTION)).events == []
