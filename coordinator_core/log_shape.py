"""What a capture of ``__consumer_offsets`` says about its own completeness, per log partition.

Rules:
- Kafka numbers a partition's records with consecutive offsets and never renumbers them. A
  capture of the whole partition therefore holds every offset from its first to its last,
  except where (a) the log cleaner removed records (``cleanup.policy=compact``: only the latest
  record per key survives in the cleaned part; tombstones go after ``delete.retention.ms``) or
  (b) a transaction's control marker (COMMIT/ABORT) took the offset (consumers never see them).
- The cleaner works from the start of the log up to its cleaner point; the tail after it (the
  active segment and the dirty part) is untouched. So the compacted part ends at the last gap:
  ``compacted_until`` is the first offset after the last missing one. What compaction removed
  before it is unknown history: a group whose first record lies before it may have had records
  (rebalances, commits, a creation) that are gone.
- A single missing offset is what a transaction marker leaves; it is counted, but only a
  partition with a gap of more than one offset is called compacted (a transactional partition
  can be compacted too; the counts tell).
- Offsets the input held but that were refused or quarantined (``accounted``: a conflicting
  second copy, every offset of a bad batch: ``bad_batch_last_offset``) are no gap: they are neither the cleaner's work nor a
  marker's, and are counted apart (``accounted_offsets``) before any gap is inferred.

``partition_shape`` is the reference rule over one partition's offsets; the pipelines compute
the same with numpy over whole tables (``pipelines.inputs.log_shape``) and a test holds them equal.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True, slots=True)
class PartitionShape:
    """One log partition as captured.

    Attributes:
        records: records captured.
        first_offset / last_offset: the smallest and largest offset captured.
        missing_offsets: offsets between them that the capture does not hold.
        gaps: runs of missing offsets.
        largest_gap: the longest run of missing offsets.
        compacted_until: the first offset after the last missing one (None: no gap): records
            before it may have lost older records of the same keys to the log cleaner.
    """

    records: int
    first_offset: int
    last_offset: int
    missing_offsets: int
    gaps: int
    largest_gap: int
    compacted_until: int | None
    accounted_offsets: int = 0  # offsets within the range refused or quarantined, not missing

    @property
    def compacted(self) -> bool:
        """The capture shows the cleaner's work (a gap longer than a transaction marker)."""
        return self.largest_gap > 1


def partition_shape(offsets: Sequence[int], accounted: Sequence[int] = ()) -> PartitionShape:
    """The shape of one partition from its captured offsets (any order; repeats count once);
    ``accounted``: offsets the input held that were refused or quarantined (no gap).

    Raises:
        ValueError: no offsets.
    """
    if not offsets:
        raise ValueError("partition_shape needs at least one offset")
    captured = set(offsets)
    lo, hi = min(captured), max(captured)
    known = {o for o in accounted if lo <= o <= hi} - captured
    xs = sorted(captured | known)
    missing = gaps = largest = 0
    until: int | None = None
    for prev, cur in pairwise(xs):
        hole = cur - prev - 1
        if hole > 0:
            missing += hole
            gaps += 1
            largest = max(largest, hole)
            until = cur
    return PartitionShape(len(captured), lo, hi, missing, gaps, largest, until, len(known))


_V2_HEAD = struct.Struct(">qiibIhi")  # baseOffset, length, leader epoch, magic, crc, attributes, lastOffsetDelta
_V2_RECORDS_AT = 57  # the record count's byte in a v2 batch header


def bad_batch_last_offset(data: bytes, base_offset: int | None, next_offset: int | None = None) -> int | None:
    """The last offset a quarantined (unreadable) batch held, so its whole span is accounted
    for, not only its base offset. From the v2 header when it is plausible (its length field
    is the bytes quarantined, ``lastOffsetDelta`` >= 0 and the record count 1..delta+1):
    base + delta; otherwise up to the next batch's base offset (``next_offset`` - 1). Never past
    ``next_offset`` - 1, never below the base; None without a base offset."""
    if base_offset is None:
        return None
    last = base_offset
    plausible = False
    if len(data) >= _V2_RECORDS_AT + 4:
        _base, length, _epoch, magic, _crc, _attrs, delta = _V2_HEAD.unpack_from(data)
        (count,) = struct.unpack_from(">i", data, _V2_RECORDS_AT)
        plausible = magic == 2 and length + 12 == len(data) and delta >= 0 and 1 <= count <= delta + 1
        if plausible:
            last = base_offset + delta
    if next_offset is not None and next_offset > base_offset:
        last = next_offset - 1 if not plausible else min(last, next_offset - 1)
    return last
