"""The pipeline's bulk replay (numpy-reduced commit runs + ``replay_runs``) equals the per-record
replay (``records_from_arrow`` + ``replay``) — no Spark needed.

The replay input is built from encoded logs by the vectorised decoder (``replay_input_arrow``
of the Spark test module, no Spark): a multi-group hand-written log and the simulator's log.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from coordinator_core import (
    ALL_EVENT_KINDS,
    CommitRun,
    ReplaySettings,
    RunCounters,
    compress_commit_runs,
    deserialize_snapshot,
    new_snapshot,
    replay,
    serialize_snapshot,
)
from coordinator_core.simulator.generator import generate
from pipelines.records.commit_runs import default_max_span_ms, items_by_group
from pipelines.records.log_records import records_from_arrow
from pipelines.records.replay import replay_sorted_batches, replay_table
from tests.pipelines.test_replay_job import DAY, build_log, replay_input_arrow

MINUTE = 60_000
NO_COMMIT_EVENTS = tuple(sorted(ALL_EVENT_KINDS - {"offset_commit"}))


def _sorted(table: pa.Table) -> pa.Table:
    return table.take(
        pc.sort_indices(
            table, [("group_id", "ascending"), ("coordinator_partition", "ascending"), ("log_offset", "ascending")]
        )
    )


@pytest.fixture(scope="module")
def story_input() -> pa.Table:
    return _sorted(replay_input_arrow(build_log(n_groups=14, seed=11)))


@pytest.fixture(scope="module")
def sim_input() -> pa.Table:
    g = generate(8, 0.25, seed=7)
    log = list(zip(g.keys, g.values, g.partitions, g.offsets, g.timestamps, strict=True))
    return _sorted(replay_input_arrow(log))


def _groups(table: pa.Table) -> dict[str, pa.Table]:
    return {g: table.filter(pc.equal(table["group_id"], g)) for g in sorted(set(table["group_id"].to_pylist()))}


def _rows(result: Any) -> list[dict[str, Any]]:
    return [e.to_row() | {"kind": e.kind} for e in result.events]


@pytest.mark.parametrize("span", [None, MINUTE, 10 * MINUTE])
@pytest.mark.parametrize("which", ["story_input", "sim_input"])
def test_vectorised_reduction_equals_the_core_reducer(which: str, span: int | None, request: Any) -> None:
    table: pa.Table = request.getfixturevalue(which)
    got = dict(items_by_group(table, compress=True, max_span_ms=span))
    runs = 0
    for gid, part in _groups(table).items():
        want = compress_commit_runs(records_from_arrow(part), max_span_ms=span)
        assert got[gid] == want, gid
        for a, b in zip(got[gid], want, strict=True):
            if isinstance(a, CommitRun):
                assert isinstance(b, CommitRun)
                assert list(a.expand()) == list(b.expand())
                runs += 1
    assert runs > 0


def test_records_from_arrow_of_chosen_rows_equals_the_same_rows_of_all(story_input: pa.Table) -> None:
    every = records_from_arrow(story_input)
    rng = np.random.default_rng(3)
    rows = np.sort(rng.choice(story_input.num_rows, size=story_input.num_rows // 3, replace=False))
    assert records_from_arrow(story_input, rows) == [every[i] for i in rows.tolist()]


@pytest.mark.parametrize("retention_ms", [None, 30 * MINUTE, 3 * DAY])
@pytest.mark.parametrize("coordinator", ["old", "new"])
@pytest.mark.parametrize("which", ["story_input", "sim_input"])
def test_replay_table_equals_replay_of_every_record(
    which: str, retention_ms: int | None, coordinator: str, request: Any
) -> None:
    table: pa.Table = request.getfixturevalue(which)
    counters = RunCounters()
    for gid, part in _groups(table).items():
        as_of = pc.max(part["log_timestamp_ms"]).as_py() + DAY if retention_ms else None
        kw: dict[str, Any] = {
            "settings": ReplaySettings(retention_ms=retention_ms, coordinator=coordinator),
            "as_of_ms": as_of,
            "event_kinds": NO_COMMIT_EVENTS,
        }
        full = replay(new_snapshot(gid), records_from_arrow(part), **kw)
        # rows in any order: replay_table sorts them by position
        shuffled = part.take(pa.array(np.random.default_rng(1).permutation(part.num_rows)))
        bulk = replay_table(new_snapshot(gid), shuffled, counters=counters, min_rows_to_compress=0, **kw)
        assert bulk.snapshot == full.snapshot
        assert _rows(bulk) == _rows(full)
        assert bulk.stats.as_dict() == full.stats.as_dict()
    assert counters.compressed > 0


def test_replay_table_onto_a_snapshot_with_redelivered_rows_equals_replay(sim_input: pa.Table) -> None:
    """The stream's call: state from earlier micro-batches, input overlapping what it applied."""
    for gid, part in _groups(sim_input).items():
        n = part.num_rows
        first = replay(
            new_snapshot(gid),
            records_from_arrow(part.slice(0, n // 2)),
            settings=ReplaySettings(retention_ms=20 * MINUTE),
        )
        state = deserialize_snapshot(serialize_snapshot(first.snapshot))
        again = part.slice(n // 4)
        full = replay(
            state,
            records_from_arrow(again),
            settings=ReplaySettings(retention_ms=20 * MINUTE),
            event_kinds=NO_COMMIT_EVENTS,
        )
        bulk = replay_table(
            state,
            again,
            settings=ReplaySettings(retention_ms=20 * MINUTE),
            event_kinds=NO_COMMIT_EVENTS,
            min_rows_to_compress=0,
        )
        assert serialize_snapshot(bulk.snapshot) == serialize_snapshot(full.snapshot)
        assert _rows(bulk) == _rows(full) and bulk.stats == full.stats


def test_replay_table_with_commit_events_replays_every_record(story_input: pa.Table) -> None:
    gid, part = next(iter(_groups(story_input).items()))
    counters = RunCounters()
    bulk = replay_table(new_snapshot(gid), part, counters=counters, min_rows_to_compress=0)
    full = replay(new_snapshot(gid), records_from_arrow(part))
    assert bulk.events == full.events and counters.compressed == 0


def test_replay_table_rejects_rows_of_another_group(story_input: pa.Table) -> None:
    with pytest.raises(ValueError, match="given to the replay of group"):
        replay_table(new_snapshot("not-this-one"), story_input.slice(0, 3))


@pytest.mark.parametrize(
    ("which", "chunk", "per_replay"),
    [
        ("story_input", 1, 1),
        ("story_input", 7, 30),
        ("story_input", 7, 100_000),
        ("sim_input", 3000, 1),
        ("sim_input", 1000, 5000),
        ("sim_input", 1_000_000, 100_000),
    ],
)
@pytest.mark.parametrize("retention_ms", [None, 20 * MINUTE])
def test_sorted_batches_bulk_equals_per_record_path(
    which: str, chunk: int, per_replay: int, retention_ms: int | None, request: Any
) -> None:
    """Groups spanning batches (down to one row per batch) are carried as Arrow rows; complete
    groups are replayed together once enough rows are collected."""
    table: pa.Table = request.getfixturevalue(which)
    batches = table.to_batches(max_chunksize=chunk)
    as_of = pc.max(table["log_timestamp_ms"]).as_py() if retention_ms else None
    counters = RunCounters()
    bulk = pa.concat_tables(
        replay_sorted_batches(
            batches,
            settings=ReplaySettings(retention_ms=retention_ms),
            as_of_ms=as_of,
            counters=counters,
            rows_per_replay=per_replay,
        )
    )
    old = _per_record(table, retention_ms=retention_ms, as_of_ms=as_of)
    assert bulk.num_rows == old.num_rows > 0
    assert bulk.schema == old.schema
    # the same rows; their order follows the conversion units (tables within a unit)
    assert sorted(map(repr, bulk.to_pylist())) == sorted(map(repr, old.to_pylist()))
    assert counters.compressed > 0


@pytest.mark.parametrize("which", ["story_input", "sim_input"])
@pytest.mark.parametrize("per_replay", [1, 500, 1_000_000])
@pytest.mark.parametrize("retention_ms", [None, 20 * MINUTE])
def test_replay_of_shuffled_rows_in_replay_order_is_the_per_record_replay(
    which: str, per_replay: int, retention_ms: int | None, request: Any
) -> None:
    """The batch job's bucket path: rows in any order (split in chunks, as a bucket read from many
    files), never gathered into order; the same gold rows as the core's replay of every record."""
    from pipelines.records.replay import replay_ordered
    from pipelines.records.replay_input import replay_order_and_groups

    table: pa.Table = request.getfixturevalue(which)
    shuffled = table.take(pa.array(np.random.default_rng(3).permutation(table.num_rows)))
    shuffled = pa.concat_tables([shuffled.slice(0, 100), shuffled.slice(100)])
    order, starts = replay_order_and_groups(shuffled)
    assert shuffled.take(pa.array(order)).equals(table)
    assert (
        starts.tolist()
        == np.flatnonzero(
            np.r_[True, np.array(table["group_id"].to_pylist()[1:]) != np.array(table["group_id"].to_pylist()[:-1])]
        ).tolist()
    )
    as_of = pc.max(table["log_timestamp_ms"]).as_py() if retention_ms else None
    counters = RunCounters()
    bulk = pa.concat_tables(
        replay_ordered(
            shuffled,
            order,
            starts,
            settings=ReplaySettings(retention_ms=retention_ms),
            as_of_ms=as_of,
            counters=counters,
            rows_per_replay=per_replay,
        )
    )
    old = _per_record(table, retention_ms=retention_ms, as_of_ms=as_of)
    assert bulk.num_rows == old.num_rows > 0
    assert sorted(map(repr, bulk.to_pylist())) == sorted(map(repr, old.to_pylist()))
    assert counters.compressed > 0


def test_replay_of_shuffled_rows_with_every_commit_replayed_is_the_sorted_replay(sim_input: pa.Table) -> None:
    """With ``offset_commits_replayed`` every record is replayed (no run reduction): the ordered
    path gathers every row in replay order, the same gold rows as the sorted batches'."""
    from pipelines.records.gold import GOLD_SPECS
    from pipelines.records.replay import replay_ordered
    from pipelines.records.replay_input import replay_order_and_groups

    tables = tuple(GOLD_SPECS)
    assert "offset_commits_replayed" in tables
    shuffled = sim_input.take(pa.array(np.random.default_rng(5).permutation(sim_input.num_rows)))
    got = pa.concat_tables(
        replay_ordered(shuffled, *replay_order_and_groups(shuffled), tables=tables, rows_per_replay=300)
    )
    want = pa.concat_tables(replay_sorted_batches(sim_input.to_batches(max_chunksize=300), tables=tables))
    assert got.num_rows == want.num_rows > 0
    assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist()))


@pytest.mark.parametrize("seed", range(4))
def test_packed_sort_is_numpys_lexsort(seed: int) -> None:
    from pipelines.records.replay_input import sort_packed

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    keys = [rng.integers(0, hi, n) for hi in ([3, 40, 5000], [1, 1, 2], [1000], [7, 1 << 20, 9])[seed]]
    assert sort_packed(keys).tolist() == np.lexsort((np.arange(n), *reversed(keys))).tolist()
    assert sort_packed([rng.integers(0, 1 << 62, n), rng.integers(0, 4, n)]) is None  # does not fit


def _per_record(table: pa.Table, *, retention_ms: int | None, as_of_ms: int | None) -> pa.Table:
    """The reference: every row a ``LogRecord``, the core's ``replay`` once per group."""
    from pipelines.records.gold import DEFAULT_TABLES, GOLD_SPECS, rows_to_arrow, to_union
    from pipelines.records.replay import event_kinds_for, gold_rows

    out: dict[str, list[dict[str, Any]]] = {t: [] for t in DEFAULT_TABLES}
    for gid, part in _groups(table).items():
        settings = ReplaySettings(retention_ms=retention_ms)
        result = replay(
            new_snapshot(gid),
            records_from_arrow(part),
            settings=settings,
            as_of_ms=as_of_ms,
            event_kinds=event_kinds_for(DEFAULT_TABLES),
        )
        for name, rows in gold_rows(result, tables=DEFAULT_TABLES, settings=settings).items():
            out[name].extend(rows)
    return pa.concat_tables([to_union(n, rows_to_arrow(GOLD_SPECS[n], rs)) for n, rs in out.items() if rs])


def test_default_span_is_a_quarter_of_the_retention() -> None:
    assert default_max_span_ms(None) is None
    assert default_max_span_ms(4 * DAY) == DAY


def test_replay_table_without_rows_is_the_timer_call(sim_input: pa.Table) -> None:
    expired = 0
    for gid, part in _groups(sim_input).items():
        state = replay(new_snapshot(gid), records_from_arrow(part)).snapshot
        later = pc.max(part["log_timestamp_ms"]).as_py() + DAY
        want = replay(state, [], settings=ReplaySettings(retention_ms=MINUTE), as_of_ms=later)
        for empty in (None, part.slice(0, 0)):
            got = replay_table(state, empty, settings=ReplaySettings(retention_ms=MINUTE), as_of_ms=later)
            assert got.snapshot == want.snapshot and got.events == want.events
        expired += any(e.kind == "offset_expiration" for e in want.events)
    assert expired > 0


def test_replay_table_replays_a_few_rows_as_plain_records(story_input: pa.Table) -> None:
    gid, part = next(iter(_groups(story_input).items()))
    assert part.num_rows < 64
    counters = RunCounters()
    bulk = replay_table(new_snapshot(gid), part, event_kinds=NO_COMMIT_EVENTS, counters=counters)
    full = replay(new_snapshot(gid), records_from_arrow(part), event_kinds=NO_COMMIT_EVENTS)
    assert counters.runs == 0 and bulk.snapshot == full.snapshot and bulk.events == full.events


def test_sorted_batches_leave_the_garbage_collector_as_they_found_it(story_input: pa.Table) -> None:
    import gc

    batches = story_input.to_batches(max_chunksize=50)
    assert gc.isenabled()
    for out in replay_sorted_batches(batches, rows_per_replay=50):
        assert gc.isenabled() and out.num_rows > 0  # enabled whenever the caller runs
    gc.disable()
    try:
        list(replay_sorted_batches(batches))
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("seed", range(6))
def test_replay_order_is_arrows_stable_sort_on_group_partition_offset(seed: int) -> None:
    from pipelines.records.replay_input import replay_order

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    names = [f"g-{i}" for i in rng.permutation(40)] + ["ü-grp", "", "G"]
    group = [None if rng.random() < 0.02 else names[int(i)] for i in rng.integers(0, len(names), n)]
    part = rng.integers(0, [3, 50, 4096][seed % 3], n)
    # offsets spanning a small range pack into one int64 key; a span near 2^62 takes the
    # lexsort path; few distinct offsets repeat positions: the order stays stable
    off = rng.integers(0, 2_000 if seed % 2 else 50, n)
    if seed >= 3:
        off[rng.random(n) < 0.5] += (1 << 62) - 10_000
    table = pa.table(
        {
            "group_id": pa.array(group, pa.string()),
            "coordinator_partition": pa.array(part, pa.int32()),
            "log_offset": pa.array(off, pa.int64()),
            "row": pa.array(np.arange(n)),
        }
    )
    if seed == 5:
        table = pa.concat_tables([table.slice(0, n // 2), table.slice(n // 2)])  # chunked columns
    expected = pc.sort_indices(
        table, [("group_id", "ascending"), ("coordinator_partition", "ascending"), ("log_offset", "ascending")]
    ).to_numpy()
    assert replay_order(table).tolist() == expected.tolist()
    assert replay_order(table.slice(0, 0)).tolist() == []


def test_group_buckets_are_a_stable_hash_spread_over_all_buckets() -> None:
    from pipelines.records.replay_input import bucket_of, string_hash64

    names = ["", "a", "b", "ab", "ba", "g-1", "é-grp", "x" * 5000, None]
    arr = pa.array(names, pa.string())
    h = string_hash64(arr)
    assert len(set(h.tolist())) == len(names) - 1  # only None and "" collide (a null hashes as "")
    assert h[0] == h[-1]
    # the same value whatever the chunking, offset or string type, and in every run (pinned)
    chunked = pa.chunked_array([arr.slice(0, 4), arr.slice(4)])
    assert string_hash64(chunked).tolist() == h.tolist()
    assert string_hash64(arr.slice(3, 2)).tolist() == h[3:5].tolist()
    assert string_hash64(arr.cast(pa.large_string())).tolist() == h.tolist()
    assert int(string_hash64(pa.array(["consumer-group-7"]))[0]) == 0xA736_A79B_5C98_C9BC
    groups = pa.array([f"group-{i}" for i in range(20_000)])
    per_bucket = np.bincount(bucket_of(groups, 16), minlength=16)
    assert per_bucket.min() > 1000 and per_bucket.max() < 1500  # ~1250 each
    rows = pa.chunked_array([groups.slice(0, 7), groups.slice(7)])
    assert bucket_of(rows, 16).tolist() == bucket_of(groups, 16).tolist()
