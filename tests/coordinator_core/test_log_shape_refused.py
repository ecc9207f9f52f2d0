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


def _batch(base: int, n: int) -> bytes:
    from coordinator_core import segments as S
    from tests.pipelines.test_batch_segments import _commit

    return S.encode_batch_v2([_commit(o, "g", 0, o) for o in range(base, base + n)])


def test_a_bad_batch_accounts_its_whole_span_from_a_plausible_header() -> None:
    from coordinator_core.log_shape import bad_batch_last_offset

    bad = bytearray(_batch(5, 5))
    bad[-1] ^= 0xFF  # the CRC no longer matches; the header still says 5 records, delta 4
    assert bad_batch_last_offset(bytes(bad), 5) == 9
    assert bad_batch_last_offset(bytes(bad), 5, next_offset=8) == 7  # never past the next batch
    # an implausible header (its length is not the bytes quarantined): up to the next batch
    assert bad_batch_last_offset(bytes(bad[:-3]), 5, next_offset=12) == 11
    assert bad_batch_last_offset(bytes(bad[:-3]), 5) == 5
    assert bad_batch_last_offset(b"\x00" * 10, None, 7) is None
    shape = partition_shape([*range(5), *range(10, 15)], accounted=range(5, 10))
    assert not shape.compacted and shape.missing_offsets == 0 and shape.accounted_offsets == 5
