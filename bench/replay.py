"""Benchmark: the pure-Python replay (``coordinator_core.loader.replay``) on a generated log.

What it measures (one core, records already decoded — the codec has its own benchmark):
- baseline: the cheapest possible Python loop over the same records (store each commit in a
  per-group dict), measured in the same run; every replay number is reported against it;
- replay, state only (``event_kinds=()``), with every event, and with every event plus offset
  expiry (7-day retention, decided before every record and at the end);
- snapshot serialisation / deserialisation, bytes and memory per group, the byte codec's and
  the plain values' a carried replay keeps (pickled);
- ``--bulk``: the bulk path (``compress_commit_runs`` + ``replay_runs``: a run of offset commits
  applied from its survivors when that is exact) against ``replay`` on the same records;
- ``--arrow PATH``: the pipeline's batch replay stage (``pipelines.records.replay.
  replay_sorted_batches``) on a replay-input Parquet file sorted by (group, partition, offset),
  bulk path vs the per-record path (``bulk=False``) in the same run, with a stage breakdown and
  a row-for-row equality check (``--arrow generate`` builds that input from this log).

The log: ``--groups`` consumer groups over 50 ``__consumer_offsets`` partitions, >95 % offset
commits (auto-commit cadence over each member's partitions), a rebalance (new generation,
members joining/leaving, partitions moving) every ~``--rebalance-every`` records of a group,
some static members, offset tombstones, groups going Empty; deterministic from ``--seed``.

    .venv/bin/python bench/replay.py --records 1000000 --groups 10000
    .venv/bin/python bench/replay.py --bulk-only --arrow /tmp/bulk/sorted-input.parquet
"""

from __future__ import annotations

import argparse
import gc
import pickle
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator_core import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupSnapshot,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    ReplaySettings,
    Subscription,
    TopicPartitions,
    deserialize_snapshot,
    encode_assignment,
    encode_subscription,
    new_snapshot,
    replay,
    serialize_snapshot,
    snapshot_from_values,
    snapshot_values,
)

WEEK = 7 * 86_400_000
T0 = 1_767_225_600_000


def _partition_for(group: str, n: int = 50) -> int:
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return (0 if h == -0x80000000 else abs(h)) % n


def _members(
    rng: random.Random, gid: str, gen: int, topics: list[tuple[str, int]], n: int, static: bool
) -> tuple[MemberMetadata, ...]:
    tps = [(t, p) for t, parts in topics for p in range(parts)]
    rng.shuffle(tps)
    sub = encode_subscription(Subscription(tuple(sorted(t for t, _ in topics)), version=1))
    out = []
    for i in range(n):
        mine: dict[str, list[int]] = {}
        for t, p in tps[i::n]:
            mine.setdefault(t, []).append(p)
        asg = encode_assignment(
            Assignment(tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(mine.items())))
        )
        out.append(
            MemberMetadata(
                member_id=f"consumer-{gid}-{i}-{gen}-{rng.randrange(10**6)}",
                client_id=f"consumer-{gid}-{i}",
                client_host=f"/10.{i}.{gen % 250}.{rng.randrange(250)}",
                session_timeout=45_000,
                subscription=sub,
                assignment=asg,
                rebalance_timeout=300_000,
                group_instance_id=f"{gid}-pod-{i}" if static else None,
            )
        )
    return tuple(out)


def generate(records: int, groups: int, seed: int, rebalance_every: int) -> tuple[dict[str, list[LogRecord]], int]:
    """Per-group record lists (log order) and the total number of records."""
    rng = random.Random(seed)
    per_group = max(4, records // groups)
    next_offset = [0] * 50
    out: dict[str, list[LogRecord]] = {}
    total = 0
    for g in range(groups):
        gid = f"svc-{g:05d}"
        part = _partition_for(gid)
        recs: list[LogRecord] = []

        def add(key: Any, value: Any, ts: int, recs: list[LogRecord] = recs, part: int = part) -> None:
            recs.append(LogRecord(part, next_offset[part], ts, key, value))
            next_offset[part] += 1

        topics = [(f"topic-{rng.randrange(200)}", rng.choice((1, 3, 6, 12))) for _ in range(rng.choice((1, 1, 2)))]
        tps = [(t, p) for t, n in topics for p in range(n)]
        static = rng.random() < 0.15
        now = T0 + rng.randrange(3_600_000)
        gen = 1
        n_members = min(len(tps), rng.choice((1, 2, 3, 4)))
        add(
            GroupMetadataKey(gid),
            GroupMetadataValue(
                "consumer", gen, "range", None, _members(rng, gid, gen, topics, n_members, static), now - 40
            ),
            now,
        )
        offs = {tp: rng.randrange(10**6) for tp in tps}
        keys = {tp: OffsetCommitKey(gid, tp[0], tp[1]) for tp in tps}
        while len(recs) < per_group:
            now += 5_000
            for tp in tps:
                offs[tp] += rng.randrange(1, 500)
                add(keys[tp], OffsetCommitValue(offs[tp], "", now, None, None, 3), now)
            if rng.random() < len(tps) / rebalance_every:
                gen += 1 + (rng.random() < 0.1)
                now += 3_000
                n_members = max(1, min(len(tps), n_members + rng.choice((-1, 0, 1))))
                members = _members(rng, gid, gen, topics, n_members, static)
                add(
                    GroupMetadataKey(gid),
                    GroupMetadataValue("consumer", gen, "range", members[0].member_id, members, now - 40),
                    now,
                )
            if rng.random() < 0.002:
                add(keys[tps[0]], None, now)
        if rng.random() < 0.05:
            gen += 1
            now += 10_000
            add(GroupMetadataKey(gid), GroupMetadataValue("consumer", gen, None, None, (), now), now)
        out[gid] = recs
        total += len(recs)
    return out, total


WALL: dict[str, float] = {}


def _timed(fn: Callable[[], Any], repeat: int, name: str = "") -> tuple[float, Any]:
    """Best-of-N CPU seconds of this process (the machine is shared: wall time is noted too)."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        w = time.perf_counter()
        result = fn()
        cpu = time.process_time() - t
        if cpu < best:
            best = cpu
            WALL[name] = time.perf_counter() - w
    return best, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rebalance-every", type=int, default=2_000, help="mean records of a group between rebalances")
    ap.add_argument("--repeat", type=int, default=2, help="best of N")
    ap.add_argument("--bulk", action="store_true", help="also measure replay_runs over compressed runs")
    ap.add_argument("--bulk-only", action="store_true", help="only the bulk-path comparisons")
    ap.add_argument(
        "--arrow",
        metavar="PATH",
        help="replay-input Parquet sorted by (group_id, coordinator_partition, log_offset), or 'generate'",
    )
    ap.add_argument("--batch-rows", type=int, default=10_000, help="Arrow batch size for --arrow")
    args = ap.parse_args(argv)
    if args.arrow and args.arrow != "generate":
        return arrow_bench(args.arrow, args.batch_rows, args.repeat)

    t = time.perf_counter()
    logs, total = generate(args.records, args.groups, args.seed, args.rebalance_every)
    gen_s = time.perf_counter() - t
    commits = sum(1 for recs in logs.values() for r in recs if type(r.key) is OffsetCommitKey and r.value is not None)
    meta = sum(1 for recs in logs.values() for r in recs if type(r.key) is GroupMetadataKey)
    print(
        f"generated {total:,} records over {len(logs):,} groups in {gen_s:.1f}s "
        f"({commits / total:.1%} offset commits, {meta:,} group-metadata records)"
    )

    def baseline() -> int:
        n = 0
        for recs in logs.values():
            state: dict[tuple[str, int], Any] = {}
            for r in recs:
                k = r.key
                if type(k) is OffsetCommitKey:
                    state[(k.topic, k.partition)] = r.value
                n += 1
        return n

    def run(kinds: Any, retention: int | None) -> dict[str, GroupSnapshot]:
        out = {}
        for gid, recs in logs.items():
            end = recs[-1].timestamp_ms if retention is not None else None
            out[gid] = replay(
                new_snapshot(gid),
                recs,
                event_kinds=kinds,
                settings=ReplaySettings(retention_ms=retention),
                as_of_ms=end,
            ).snapshot
        return out

    def count_events() -> int:
        return sum(len(replay(new_snapshot(g), recs).events) for g, recs in logs.items())

    results: list[tuple[str, float]] = []
    base_s, _ = _timed(baseline, args.repeat, "baseline dict-store loop")
    results.append(("baseline dict-store loop", base_s))
    if args.bulk or args.bulk_only:
        bulk_bench(logs, total, base_s, args.repeat)
        if args.arrow == "generate":
            path = str(Path("/tmp") / f"bench-replay-input-{args.records}-{args.seed}.parquet")
            write_replay_input(logs, path)
            arrow_bench(path, args.batch_rows, args.repeat)
        if args.bulk_only:
            return 0
    state_s, snaps = _timed(lambda: run((), None), args.repeat, "replay, state only")
    results.append(("replay, state only", state_s))
    ev_s, _ = _timed(lambda: run(None, None), args.repeat, "replay, all events")
    results.append(("replay, all events", ev_s))
    exp_s, _ = _timed(lambda: run(None, WEEK), args.repeat, "replay, all events + expiry (7 d)")
    results.append(("replay, all events + expiry (7 d)", exp_s))
    n_events = count_events()

    blobs: list[bytes] = []
    ser_s, blobs = _timed(lambda: [serialize_snapshot(s) for s in snaps.values()], args.repeat)
    de_s, back = _timed(lambda: [deserialize_snapshot(b) for b in blobs], args.repeat)
    assert back == list(snaps.values())
    # as a carried replay keeps them (the stream's state buckets): plain values, pickled together
    val_ser_s, pickled = _timed(
        lambda: pickle.dumps([snapshot_values(s) for s in snaps.values()], protocol=pickle.HIGHEST_PROTOCOL),
        args.repeat,
    )
    val_de_s, back = _timed(lambda: [snapshot_from_values(v) for v in pickle.loads(pickled)], args.repeat)
    assert back == list(snaps.values())
    n_offsets = sum(s.offset_count for s in snaps.values())

    # memory held by the snapshots (state only), measured separately
    del back
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = run((), None)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_group = (after - before) / len(held)
    n_held = len(held)
    del held
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    owned = [deserialize_snapshot(b) for b in blobs]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_group_owned = (after - before) / len(owned)

    print(f"\nPython {platform.python_version()}, {platform.machine()}, one core; best of {args.repeat}")
    print(f"{'what':40s} {'CPU s':>8s} {'records/s':>12s} {'vs baseline':>12s} {'wall s':>8s}")
    for name, secs in results:
        print(f"{name:40s} {secs:8.2f} {total / secs:12,.0f} {secs / base_s:11.1f}x {WALL.get(name, 0):8.2f}")
    print(f"events produced (all kinds): {n_events:,} ({n_events / total:.2f} per record)")
    print(
        f"serialise {len(blobs):,} snapshots: {ser_s:.2f}s ({len(blobs) / ser_s:,.0f}/s); "
        f"deserialise: {de_s:.2f}s ({len(blobs) / de_s:,.0f}/s)"
    )
    print(
        f"as plain values, pickled (what a carried replay keeps): serialise {val_ser_s:.2f}s "
        f"({val_ser_s / ser_s:.2f}x the bytes'), deserialise {val_de_s:.2f}s ({val_de_s / de_s:.2f}x), "
        f"{len(pickled) / len(blobs):,.0f} bytes/group"
    )
    total_bytes = sum(len(b) for b in blobs)
    print(
        f"serialised size: {total_bytes / len(blobs):,.0f} bytes/group, {total_bytes / max(1, n_offsets):.1f} bytes/offset "
        f"({n_offsets / len(blobs):.1f} offsets/group)"
    )
    print(
        f"memory per group: {per_group:,.0f} bytes held by replayed snapshots ({n_held:,} groups; record values "
        f"shared with the input), {per_group_owned:,.0f} bytes for a deserialised snapshot owning everything "
        f"({per_group_owned * len(owned) / 2**20:,.0f} MiB for {len(owned):,} groups)"
    )
    return 0


# ---------------------------------------------------------------------------------------------
# The bulk path
# ---------------------------------------------------------------------------------------------
BULK_KINDS = ("group_lifecycle", "group_member", "offset_expiration", "rebalance", "state_transition")


def bulk_bench(logs: dict[str, list[LogRecord]], total: int, base_s: float, repeat: int) -> None:
    """``replay`` vs ``compress_commit_runs`` + ``replay_runs`` (the gold tables' event kinds,
    7-day retention, expiry at the end), same records, results compared."""
    from coordinator_core import RunCounters, compress_commit_runs, replay_runs

    def full() -> list[Any]:
        return [
            replay(
                new_snapshot(g),
                recs,
                event_kinds=BULK_KINDS,
                settings=ReplaySettings(retention_ms=WEEK),
                as_of_ms=recs[-1].timestamp_ms,
            )
            for g, recs in logs.items()
        ]

    def reduce() -> list[Any]:
        return [compress_commit_runs(recs, max_span_ms=WEEK // 4) for recs in logs.values()]

    counters = RunCounters()

    def bulk(items: list[Any]) -> list[Any]:
        return [
            replay_runs(
                new_snapshot(g),
                its,
                event_kinds=BULK_KINDS,
                settings=ReplaySettings(retention_ms=WEEK),
                as_of_ms=recs[-1].timestamp_ms,
                counters=counters,
            )
            for (g, recs), its in zip(logs.items(), items, strict=True)
        ]

    full_s, want = _timed(full, repeat, "full")
    red_s, items = _timed(reduce, repeat, "reduce")
    bulk_s, got = _timed(lambda: bulk(items), repeat, "bulk")
    for a, b in zip(want, got, strict=True):
        assert a.snapshot == b.snapshot and a.events == b.events and a.stats == b.stats
    print(f"\nbulk path (pure core, gold event kinds, 7-day retention), best of {repeat}; results identical")
    print(f"{'what':52s} {'CPU s':>8s} {'records/s':>12s} {'vs replay':>10s}")
    for name, secs in (
        ("replay (every record)", full_s),
        ("compress_commit_runs (pure-Python reducer)", red_s),
        ("replay_runs (survivors + run summaries)", bulk_s),
        ("reducer + replay_runs", red_s + bulk_s),
    ):
        print(f"{name:52s} {secs:8.2f} {total / secs:12,.0f} {full_s / secs:9.1f}x")
    print(
        f"runs {counters.runs // repeat:,}, compressed {counters.compressed // repeat:,}, "
        f"expanded {counters.expanded // repeat:,} "
        f"{ {k: v // repeat for k, v in counters.expanded_by_reason.items()} }, "
        f"commits skipped {counters.commits_skipped // repeat:,} (baseline loop {base_s:.2f}s)"
    )


def write_replay_input(logs: dict[str, list[LogRecord]], path: str) -> None:
    """This log as the pipeline's replay input (``REPLAY_INPUT_DDL``), sorted by group and
    position: encoded with the core codec, decoded by ``pipelines.records.decode`` (numpy)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from coordinator_core import encode_key, encode_value
    from pipelines.records.decode import UNION_SCHEMA, decode_batch
    from schemas.base import parse_type, to_arrow_type
    from schemas.shapes import REPLAY_INPUT

    REPLAY_INPUT_DDL = [(c.name, c.type) for c in REPLAY_INPUT.columns]

    recs = [r for rs in logs.values() for r in rs]
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([encode_key(r.key) for r in recs], pa.binary()),
            "value": pa.array([None if r.value is None else encode_value(r.value) for r in recs], pa.binary()),
            "partition": pa.array(np.array([r.partition for r in recs], np.int32)),
            "offset": pa.array([r.offset for r in recs], pa.int64()),
            "timestamp": pa.array([r.timestamp_ms * 1000 for r in recs], pa.timestamp("us", tz="UTC")),
        }
    )
    u = pa.Table.from_batches(decode_batch(batch), schema=UNION_SCHEMA)
    u = u.filter(pc.less_equal(u["kind"], 1))

    def ms(c: str) -> Any:
        return pc.divide(u[c].cast(pa.int64()), 1000)

    fields = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout",
        "session_timeout",
        "subscription",
        "assignment",
    )
    members = pa.array(
        [None if m is None else [{k: x[k] for k in fields} for x in m] for m in u["members"].to_pylist()],
        to_arrow_type(parse_type(dict(REPLAY_INPUT_DDL)["members"])),
    )
    cols = {
        "log_timestamp_ms": ms("log_timestamp"),
        "rec_kind": u["kind"],
        "commit_timestamp_ms": ms("commit_timestamp"),
        "expire_timestamp_ms": ms("expire_timestamp"),
        "current_state_timestamp_ms": ms("current_state_timestamp"),
        "members": members,
    }
    t = pa.table({name: cols[name] if name in cols else u[name] for name, _ in REPLAY_INPUT_DDL})
    t = t.take(
        pc.sort_indices(
            t, [("group_id", "ascending"), ("coordinator_partition", "ascending"), ("log_offset", "ascending")]
        )
    )
    pq.write_table(t, path)
    print(f"\nwrote the replay input of this log ({t.num_rows:,} rows) to {path}")


def per_record(table: Any, *, tables: Any, num_partitions: int, settings: Any, as_of_ms: int | None) -> Any:
    """The reference the bulk path is timed against: every row a ``LogRecord``, the core's
    ``replay`` once per group, the same gold conversion."""
    import pyarrow as pa

    from coordinator_core import new_snapshot, replay
    from pipelines.records.gold import GOLD_SPECS, rows_to_arrow, to_union
    from pipelines.records.log_records import records_from_arrow
    from pipelines.records.replay import event_kinds_for, gold_rows

    out: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    gids = table.column("group_id").to_pylist()
    start = 0
    while start < len(gids):
        end = start
        while end < len(gids) and gids[end] == gids[start]:
            end += 1
        result = replay(
            new_snapshot(gids[start]),
            records_from_arrow(table.slice(start, end - start)),
            settings=settings,
            as_of_ms=as_of_ms,
            event_kinds=event_kinds_for(tables),
        )
        for name, rows in gold_rows(result, tables=tables, settings=settings, num_partitions=num_partitions).items():
            out[name].extend(rows)
        start = end
    return pa.concat_tables([to_union(n, rows_to_arrow(GOLD_SPECS[n], rs)) for n, rs in out.items() if rs])


def arrow_bench(path: str, batch_rows: int, repeat: int) -> int:
    """The pipeline's replay stage on Arrow batches: bulk vs per-record, same run, same rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from coordinator_core import RunCounters, replay_runs
    from pipelines.records import replay as rj
    from pipelines.records.gold import DEFAULT_TABLES

    table = pq.read_table(path)
    batches = table.to_batches(max_chunksize=batch_rows)
    n = table.num_rows
    commits = pc.sum(pc.and_(pc.equal(table["rec_kind"], 0), pc.invert(table["is_tombstone"]))).as_py()
    groups = len(pc.unique(table["group_id"]))
    as_of = pc.max(table["log_timestamp_ms"]).as_py()
    opts: dict[str, Any] = {
        "settings": ReplaySettings(retention_ms=WEEK, coordinator="new"),
        "as_of_ms": as_of,
        "tables": DEFAULT_TABLES,
        "num_partitions": 50,
    }
    print(f"{path}: {n:,} rows, {groups:,} groups, {commits:,} offset commits; batches of {batch_rows:,} rows")

    counters = RunCounters()
    old_s, old = _timed(lambda: per_record(table, **opts), repeat)
    new_s, new = _timed(lambda: pa.concat_tables(rj.replay_sorted_batches(batches, counters=counters, **opts)), repeat)
    assert new.schema == old.schema and new.num_rows == old.num_rows
    # the same rows (their order follows the conversion units)
    assert sorted(map(repr, new.to_pylist())) == sorted(map(repr, old.to_pylist())), "bulk rows differ"

    # stage breakdown (one pass each): Arrow rows -> replay items, replay, gold rows, Arrow
    kinds = rj.event_kinds_for(DEFAULT_TABLES)
    span = rj.default_max_span_ms(WEEK)
    stage = {"rows -> records/items": [0.0, 0.0], "core replay": [0.0, 0.0], "gold rows + Arrow": [0.0, 0.0]}
    for bulk in (False, True):
        col = 1 if bulk else 0
        for start in range(0, n, 100_000):
            # slices cut groups at their edges; each piece is replayed as a whole (timing only)
            work = table.slice(start, 100_000)
            t = time.process_time()
            items = list(rj._items_by_group(work, compress=bulk, max_span_ms=span))
            t1 = time.process_time()
            res = [
                replay_runs(
                    new_snapshot(g),
                    its,
                    settings=ReplaySettings(retention_ms=WEEK, coordinator="new"),
                    as_of_ms=as_of,
                    event_kinds=kinds,
                )
                if bulk
                else replay(
                    new_snapshot(g),
                    its,
                    settings=ReplaySettings(retention_ms=WEEK, coordinator="new"),
                    as_of_ms=as_of,
                    event_kinds=kinds,
                )
                for g, its in items
            ]
            t2 = time.process_time()
            out: dict[str, list[dict[str, Any]]] = {name: [] for name in DEFAULT_TABLES}
            for r in res:
                for name, rows in rj.gold_rows(
                    r, tables=DEFAULT_TABLES, settings=ReplaySettings(retention_ms=WEEK)
                ).items():
                    out[name].extend(rows)
            rj._union_table(out)
            t3 = time.process_time()
            stage["rows -> records/items"][col] += t1 - t
            stage["core replay"][col] += t2 - t1
            stage["gold rows + Arrow"][col] += t3 - t2
    per_m = 1e6 / n
    print(f"\nreplay_sorted_batches, CPU s of this process (best of {repeat}); gold rows identical: {new.num_rows:,}")
    print(f"{'what':34s} {'per-record':>11s} {'bulk':>8s} {'ratio':>7s}")
    print(f"{'end to end':34s} {old_s:11.2f} {new_s:8.2f} {old_s / new_s:6.1f}x")
    print(f"{'end to end, per 1M records':34s} {old_s * per_m:11.2f} {new_s * per_m:8.2f}")
    print(f"{'records/s (one core)':34s} {n / old_s:11,.0f} {n / new_s:8,.0f}")
    for name, (a, b) in stage.items():
        print(f"{'  ' + name:34s} {a:11.2f} {b:8.2f} {a / b:6.1f}x")
    a = stage["rows -> records/items"][0] + stage["core replay"][0]
    b = stage["rows -> records/items"][1] + stage["core replay"][1]
    print(f"{'  rows -> replayed (no gold)':34s} {a:11.2f} {b:8.2f} {a / b:6.1f}x")
    print(
        f"runs {counters.runs // repeat:,}: compressed {counters.compressed // repeat:,}, expanded "
        f"{counters.expanded // repeat:,} { ({k: v // repeat for k, v in counters.expanded_by_reason.items()}) }; "
        f"commits skipped "
        f"{counters.commits_skipped // repeat:,} of {commits:,}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
