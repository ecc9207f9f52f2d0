"""The log cleaner's view of a compacted partition (``coordinator_core.compaction``)."""

from __future__ import annotations

import pytest

from coordinator_core.compaction import DEFAULT_DELETE_RETENTION_MS, Record, cleaner_points_for_dirty_ratio, compact

DAY = 86_400_000


def _log(*rows: tuple[int, bytes, bytes | None, int], partition: int = 0) -> list[Record]:
    return [(partition, off, key, value, ts) for off, key, value, ts in rows]


def test_only_the_latest_record_per_key_survives_below_the_cleaner_point() -> None:
    log = _log((0, b"a", b"1", 10), (1, b"b", b"1", 11), (2, b"a", b"2", 12), (3, b"b", b"2", 13), (4, b"c", b"1", 14))
    out = compact(log, {0: 5})
    assert [(r[1], r[2], r[3]) for r in out.kept] == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"c", b"1")]
    assert out.removed == [(0, 0), (0, 1)]


def test_offsets_are_kept_as_written_and_gaps_remain() -> None:
    log = _log((0, b"a", b"1", 1), (1, b"a", b"2", 2), (2, b"b", b"1", 3), (3, b"a", b"3", 4))
    out = compact(log, {0: 4})
    assert [r[1] for r in out.kept] == [2, 3]
    assert out.removed_ranges() == {0: [(0, 1)]}


def test_the_dirty_tail_is_untouched_and_does_not_clean_the_head() -> None:
    # b"a" is written again after the cleaner point: the cleaned part keeps its own latest "a".
    log = _log((0, b"a", b"1", 1), (1, b"a", b"2", 2), (2, b"a", b"3", 3), (3, b"a", b"3", 4), (4, b"a", None, 5))
    out = compact(log, {0: 2})
    assert [r[1] for r in out.kept] == [1, 2, 3, 4]
    assert out.removed == [(0, 0)]


def test_a_partition_without_a_cleaner_point_is_never_cleaned() -> None:
    log = _log((0, b"a", b"1", 1), (1, b"a", b"2", 2)) + _log((0, b"a", b"1", 1), (1, b"a", b"2", 2), partition=1)
    out = compact(log, {1: 2})
    assert [(r[0], r[1]) for r in out.kept] == [(0, 0), (0, 1), (1, 1)]


def test_tombstones_are_kept_within_delete_retention_of_the_cleaned_end_and_dropped_after() -> None:
    end = 10 * DAY
    log = _log(
        (0, b"old", b"v", 1),
        (1, b"old", None, end - DAY - 1),  # older than delete.retention.ms before the cleaned end
        (2, b"edge", b"v", 2),
        (3, b"edge", None, end - DAY),  # exactly at the horizon: kept
        (4, b"new", b"v", 3),
        (5, b"new", None, end - 5),
        (6, b"live", b"v", end),
    )
    out = compact(log, {0: 7}, DEFAULT_DELETE_RETENTION_MS)
    assert [r[1] for r in out.kept] == [3, 5, 6]
    assert out.removed_tombstones == [(0, 1)]
    assert sorted(out.removed) == [(0, 0), (0, 1), (0, 2), (0, 4)]


def test_a_tombstone_superseded_by_a_later_value_is_removed_by_the_key_rule() -> None:
    log = _log((0, b"a", None, 1), (1, b"a", b"back", 2))
    out = compact(log, {0: 2}, 0)
    assert [r[1] for r in out.kept] == [1] and out.removed_tombstones == []


def test_records_out_of_offset_order_and_negative_retention_are_rejected() -> None:
    with pytest.raises(ValueError, match="offset order"):
        compact(_log((1, b"a", b"1", 1), (0, b"a", b"1", 1)), {0: 2})
    with pytest.raises(ValueError, match="delete_retention_ms"):
        compact([], {}, -1)


def test_dirty_ratio_leaves_the_last_fraction_of_each_partition_dirty() -> None:
    assert cleaner_points_for_dirty_ratio({0: 100, 1: 3}, {0: 0, 1: 10}, 0.25) == {0: 75, 1: 12}
    assert cleaner_points_for_dirty_ratio({0: 100}, {0: 0}, 0.0) == {0: 100}
    assert cleaner_points_for_dirty_ratio({0: 100}, {0: 0}, 1.0) == {0: 0}
    with pytest.raises(ValueError):
        cleaner_points_for_dirty_ratio({0: 1}, {0: 0}, 1.5)
