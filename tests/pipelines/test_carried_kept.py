"""The carried replay's kept snapshots (``pipelines.records.carried._KEPT``): a worker that
replays a group it replayed last takes the snapshot it made instead of reading the bucket's bytes.
What must hold: the same groups, bytes, timers and gold rows as reading every snapshot from its
bytes, whether the kept snapshots are current, stale (another worker replayed the group since) or
absent; and every kept snapshot is what its bytes read back to."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator_core import ReplaySettings
from coordinator_core.simulator.generator import GeneratedLog, generate

DELAY_MS = 5_000
CHUNK = 400


COORDINATOR = {"kafka4-mixed": "new", "kafka3-compacted": "old"}


def _world(kind: str) -> GeneratedLog:
    if kind == "kafka4-mixed":  # classic, KIP-848 consumer, share and streams groups; conversions
        return generate(
            6,
            0.5,
            seed=5,
            coordinator="new",
            consumer_groups=0.5,
            conversions=0.5,
            share_groups=2,
            streams_groups=2,
            retention_ms=10 * 60_000,
        )
    return generate(groups=10, hours=1.0, seed=13, coordinator="old", compaction="cleaned", retention_ms=10 * 60_000)


def _chunks(log: GeneratedLog) -> list[tuple[Any, int]]:
    """The log in log-order chunks of replay-input rows (the project's decoder), each with the
    watermark the stream would have after it."""
    import pyarrow as pa

    from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA
    from pipelines.records import replay_input
    from pipelines.records.decode import decode_batch, split_union_arrow

    n = len(log.keys)
    raw = pa.RecordBatch.from_arrays(
        [
            pa.array(log.keys, pa.binary()),
            pa.array(log.values, pa.binary()),
            pa.array(["__consumer_offsets"] * n, pa.string()),
            pa.array(log.partitions, pa.int32()),
            pa.array(log.offsets, pa.int64()),
            pa.array(log.timestamps, pa.int64())
            .cast(pa.timestamp("ms", tz="UTC"))
            .cast(RAW_ARROW_SCHEMA.field("timestamp").type),
            pa.array([0] * n, pa.int32()),
        ],
        schema=RAW_ARROW_SCHEMA,
    )
    order = sorted(range(n), key=lambda i: log.timestamps[i])
    out = []
    chunk = max(CHUNK, n // 40)
    for lo in range(0, n, chunk):
        part = order[lo : lo + chunk]
        tables = [split_union_arrow(u) for u in decode_batch(raw.take(pa.array(part)))]
        rows = pa.concat_tables([replay_input.project_tables(t) for t in tables])
        out.append((rows, max(log.timestamps[i] for i in part) - DELAY_MS))
    return out


def _run(log: GeneratedLog, coordinator: str, chunks: list[tuple[Any, int]], kept: str) -> list[Any]:
    """Every call's (groups, changed rows, timer): ``kept`` = "current" (one worker), "stale"
    (before each call the kept snapshots are those of two calls back: another worker replayed the
    groups since) or "none" (every snapshot read from its bytes)."""
    from pipelines.records import carried
    from pipelines.records.carried import BucketReplayer
    from pipelines.records.gold import DEFAULT_TABLES

    retention = log.truth["retention_ms"]
    settings = ReplaySettings(retention_ms=retention, coordinator=coordinator)  # type: ignore[arg-type]
    fn = BucketReplayer(settings, tuple(DEFAULT_TABLES), 50, DELAY_MS, keep_snapshots=True)
    carried._KEPT.clear()
    bound = carried.KEPT_SNAPSHOTS
    carried.KEPT_SNAPSHOTS = 0 if kept == "none" else bound
    calls, earlier, groups, wm = [], dict(carried._KEPT), {}, 0
    try:
        for rows, next_wm in [*chunks, (None, max(log.timestamps) + 2 * retention)]:
            if kept == "stale":
                older = dict(carried._KEPT)
                carried._KEPT.clear()
                carried._KEPT.update(earlier)
                earlier = older
            groups, out, timer = fn.replay_bucket(groups, rows, wm)
            calls.append((dict(groups), out, timer))
            wm = max(wm, next_wm)
    finally:
        carried.KEPT_SNAPSHOTS = bound
    return calls


@pytest.mark.parametrize("kind", ["kafka4-mixed", "kafka3-compacted"])
def test_kept_snapshots_change_nothing_current_stale_or_absent(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import coordinator_core
    from pipelines.records import carried

    log = _world(kind)
    chunks = _chunks(log)
    assert len(chunks) >= 5
    reads = [0]
    deserialize = coordinator_core.deserialize_snapshot

    def counted(blob: bytes) -> Any:
        reads[0] += 1
        return deserialize(blob)

    monkeypatch.setattr(coordinator_core, "deserialize_snapshot", counted)
    want = _run(log, COORDINATOR[kind], chunks, "none")
    read_all, reads[0] = reads[0], 0
    current = _run(log, COORDINATOR[kind], chunks, "current")
    read_current, reads[0] = reads[0], 0
    stale = _run(log, COORDINATOR[kind], chunks, "stale")
    read_stale = reads[0]
    assert current == want
    assert stale == want
    assert read_all > 100 and read_current == 0  # one worker: every carried group was kept
    assert read_stale >= read_all // 2  # stale kept snapshots are never taken
    # every kept snapshot is what its bytes read back to (the property the shortcut rests on)
    assert len(carried._KEPT) >= 5
    for blob, snapshot in carried._KEPT.values():
        assert deserialize(blob) == snapshot


def test_the_kept_snapshots_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from coordinator_core import new_snapshot, serialize_snapshot
    from pipelines.records import carried

    monkeypatch.setattr(carried, "KEPT_SNAPSHOTS", 3)
    carried._KEPT.clear()
    for g in ["a", "b", "c", "d", "b", "e"]:
        snap = new_snapshot(g)
        carried._keep(g, serialize_snapshot(snap), snap)
    assert list(carried._KEPT) == ["d", "b", "e"]  # the least recently replayed dropped first
    carried._KEPT.clear()
