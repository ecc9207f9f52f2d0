"""``log_partitions`` (Spark) equals ``coordinator_core.log_shape.partition_shape`` per partition."""

from __future__ import annotations

import random
from typing import Any

import pytest

from coordinator_core import partition_shape

pytestmark = pytest.mark.spark


def test_log_partitions_equal_the_core_rule_on_compacted_and_whole_partitions(spark: Any) -> None:
    from pipelines.inputs.log_shape import log_partitions
    from tests.pipelines.pipeline_helpers import partition_stats
    from tests.pipelines.test_replay_job import raw_df

    rng = random.Random(7)
    log = []
    kept: dict[int, list[int]] = {}
    for part in range(4):
        offsets = list(range(1000, 1400))
        if part == 1:  # compacted prefix: most of the first 300 offsets gone
            offsets = [o for o in offsets if o >= 1300 or rng.random() < 0.2]
        if part == 2:  # transaction markers: single offsets
            offsets = [o for o in offsets if o % 50 != 7]
        kept[part] = offsets
        log += [(b"k", b"v", part, o, 1_700_000_000_000 + o) for o in offsets]
    raw = raw_df(spark, log)
    rows = {r["log_partition"]: r for r in log_partitions(lambda: raw, partition_stats(raw))}
    assert set(rows) == set(kept)
    for part, offsets in kept.items():
        want = partition_shape(offsets)
        got = rows[part]
        assert (
            got["records"],
            got["first_offset"],
            got["last_offset"],
            got["missing_offsets"],
            got["gaps"],
            got["largest_gap"],
            got["compacted_until"],
            got["compacted"],
        ) == (
            want.records,
            want.first_offset,
            want.last_offset,
            want.missing_offsets,
            want.gaps,
            want.largest_gap,
            want.compacted_until,
            want.compacted,
        ), part
    assert rows[1]["compacted"] and not rows[2]["compacted"] and rows[0]["compacted_until"] is None


def test_the_clocks_fast_path_agrees_with_the_full_clock_and_steps_aside_for_outliers(spark: Any) -> None:
    from pipelines.log_clock import clock_from_stats, log_clock
    from tests.pipelines.pipeline_helpers import partition_stats
    from tests.pipelines.test_replay_job import raw_df

    day = 86_400_000
    t0 = 1_700_000_000_000
    clean = [(b"k", b"v", p, o, t0 + 1000 * o + p) for p in range(3) for o in range(50)]
    raw = raw_df(spark, clean)
    fast = clock_from_stats(partition_stats(raw), day, wall_ms=t0 + day)
    assert fast is not None and fast.now_ms == log_clock(raw, day, wall_ms=t0 + day).now_ms == t0 + 49_002
    hostile = [*clean, (b"k", b"v", 1, 50, 253_402_300_799_000), (b"k", b"v", 1, 51, t0 + 51_000)]  # 9999
    raw = raw_df(spark, hostile)
    assert clock_from_stats(partition_stats(raw), day, wall_ms=t0 + day) is None
    full = log_clock(raw, day, wall_ms=t0 + day)
    assert full.now_ms == t0 + 51_000 and [o.offset for o in full.outliers] == [50]


def test_the_decode_passs_per_partition_figures_equal_the_aggregate(spark: Any) -> None:
    """The figures the decode tasks report beside the spool (no Spark job) equal
    ``partition_stats``' aggregate, whatever way the records are cut into batches and tasks."""
    import pyarrow as pa

    from pipelines.inputs.log_shape import StatsAccumulator, combine
    from tests.pipelines.pipeline_helpers import partition_stats
    from tests.pipelines.test_replay_job import raw_df

    rng = random.Random(3)
    t0 = 1_700_000_000_000
    log = [(b"k", b"v", p, o, t0 + rng.randrange(10**7)) for p in range(4) for o in range(0, 3000, rng.choice((1, 2)))]
    raw = raw_df(spark, log)
    want = sorted(partition_stats(raw), key=lambda r: r["partition"])
    table = raw.toArrow()
    entries = []
    for start in range(0, table.num_rows, 700):  # "tasks" of uneven shapes
        acc = StatsAccumulator()
        for b in table.slice(start, 700).to_batches(max_chunksize=250):
            acc.add(pa.Table.from_batches([b]))
        entries += acc.entries()
    got = combine(entries)
    keys = ("topic", "partition", "records", "first_offset", "last_offset", "newest_ms", "last_record_ms")
    assert [{k: r[k] for k in keys} for r in got] == [{k: r[k] for k in keys} for r in want]
