"""Refused or quarantined positions are no gap (issue 37, item 8): neither the log cleaner's
work nor a transaction marker."""

from __future__ import annotations

from coordinator_core.log_shape import partition_shape


def test_refused_offsets_fill_their_gap_before_compaction_is_inferred() -> None:
    captured = [o for o in range(100) if not 40 <= o < 45]  # 40..44: both copies refused
    alone = partition_shape(captured)
    assert alone.compacted and alone.missing_offsets == 5  # what the summary called compaction
    shape = partition_shape(captured, accounted=range(40, 45))
    assert not shape.compacted and (shape.missing_offsets, shape.gaps, shape.accounted_offsets) == (0, 0, 5)
    assert (shape.records, shape.first_offset, shape.last_offset) == (95, 0, 99)


def test_a_refused_offset_is_no_transaction_marker_and_real_gaps_stay() -> None:
    captured = [o for o in range(100) if o not in (10, 60) and not 70 <= o < 80]
    shape = partition_shape(captured, accounted=[10, 200, -3])  # outside the range: not counted
    assert (shape.missing_offsets, shape.gaps, shape.largest_gap, shape.accounted_offsets) == (11, 2, 10, 1)
    assert shape.compacted and shape.compacted_until == 80
