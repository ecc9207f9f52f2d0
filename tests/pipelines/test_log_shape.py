"""``log_partitions`` (Spark) equals ``coordinator_core.log_shape.partition_shape`` per partition."""

from __future__ import annotations

import random
from typing import Any

import pytest

from coordinator_core.log_shape import partition_shape

pytestmark = pytest.mark.spark


def test_log_partitions_equal_the_core_rule_on_compacted_and_whole_partitions(spark: Any) -> None:
    from pipelines.log_shape import log_partitions
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
    rows = {r["log_partition"]: r for r in log_partitions(raw_df(spark, log))}
    assert set(rows) == set(kept)
    for part, offsets in kept.items():
        want = partition_shape(offsets)
        got = rows[part]
        assert (got["records"], got["first_offset"], got["last_offset"], got["missing_offsets"], got["gaps"],
                got["largest_gap"], got["compacted_until"], got["compacted"]) == (
            want.records, want.first_offset, want.last_offset, want.missing_offsets, want.gaps,
            want.largest_gap, want.compacted_until, want.compacted), part
    assert rows[1]["compacted"] and not rows[2]["compacted"] and rows[0]["compacted_until"] is None
