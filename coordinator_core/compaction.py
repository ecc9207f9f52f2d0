"""What Kafka's log cleaner leaves of a compacted topic (``__consumer_offsets``), as a pure function.

Rules (``kafka.log.LogCleaner`` / ``Cleaner.cleanSegments``, ``cleanup.policy=compact``):
- Per log partition, the cleaner has cleaned everything below its *cleaner point* (the first
  dirty offset, ``LogCleanerManager``'s checkpoint); the records at and after it (the dirty part
  and the active segment) are exactly as written.
- In the cleaned part a record survives only when it is the latest record of its key among the
  records below the cleaner point (the offset map is built from the dirty section only, so a
  key written again after the cleaner point does not remove its cleaned record).
- A tombstone (value ``None``) that survives the key rule is kept only while it is within
  ``delete.retention.ms`` of the end of the cleaned range (its timestamp >= the largest
  timestamp below the cleaner point - ``delete_retention_ms``); older tombstones are gone, and
  their key with them.
- Offsets are never renumbered: the surviving records keep their offsets (gaps remain), and
  their order within a partition is unchanged.
- Keys are compared as bytes, as the cleaner does (two encodings of the same group key are two
  keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: Kafka's ``delete.retention.ms`` default (1 day), also ``__consumer_offsets``' default.
DEFAULT_DELETE_RETENTION_MS = 86_400_000

#: One record of a log: (partition, offset, key, value or None for a tombstone, timestamp ms).
Record = tuple[int, int, bytes, bytes | None, int]


@dataclass(slots=True)
class CompactionResult:
    """The surviving records (input order) and what the cleaner removed."""

    kept: list[Record]
    #: (partition, offset) of every removed record, in input order.
    removed: list[tuple[int, int]] = field(default_factory=list)
    #: removed tombstones (a subset of ``removed``): the delete-retention rule, not the key rule.
    removed_tombstones: list[tuple[int, int]] = field(default_factory=list)

    def removed_ranges(self) -> dict[int, list[tuple[int, int]]]:
        """Removed offsets per partition as inclusive ``(first, last)`` runs of consecutive offsets."""
        out: dict[int, list[tuple[int, int]]] = {}
        for part, off in sorted(self.removed):
            runs = out.setdefault(part, [])
            if runs and runs[-1][1] == off - 1:
                runs[-1] = (runs[-1][0], off)
            else:
                runs.append((off, off))
        return out


def compact(
    records: Iterable[Record], cleaner_points: Mapping[int, int], delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
) -> CompactionResult:
    """Apply one cleaning state to a log (see the module rules).

    ``cleaner_points`` maps a partition to its first dirty offset; a partition not in it has never
    been cleaned. Records may come in any interleaving of partitions; within a partition they
    must be in offset order.
    """
    if delete_retention_ms < 0:
        raise ValueError(f"delete_retention_ms must be >= 0, got {delete_retention_ms}")
    recs = list(records)
    # The offset map of each partition's cleaned range: key -> the latest offset below the point,
    # and the end of the cleaned range in time (the delete horizon's base).
    latest: dict[tuple[int, bytes], int] = {}
    cleaned_end_ts: dict[int, int] = {}
    last_offset: dict[int, int] = {}
    for part, off, key, _value, ts in recs:
        prev = last_offset.get(part)
        if prev is not None and off <= prev:
            raise ValueError(f"partition {part}: offset {off} after {prev} (records must be in offset order)")
        last_offset[part] = off
        point = cleaner_points.get(part)
        if point is None or off >= point:
            continue
        latest[(part, key)] = off
        cleaned_end_ts[part] = max(ts, cleaned_end_ts.get(part, ts))
    result = CompactionResult([])
    for rec in recs:
        part, off, key, value, ts = rec
        point = cleaner_points.get(part)
        if point is None or off >= point:
            result.kept.append(rec)
            continue
        if latest[(part, key)] != off:
            result.removed.append((part, off))
            continue
        if value is None and ts < cleaned_end_ts[part] - delete_retention_ms:
            result.removed.append((part, off))
            result.removed_tombstones.append((part, off))
            continue
        result.kept.append(rec)
    return result


def cleaner_points_for_dirty_ratio(
    counts: Mapping[int, int], first_offsets: Mapping[int, int], dirty_ratio: float
) -> dict[int, int]:
    """Cleaner points that leave the last ``dirty_ratio`` of each partition's records dirty.

    ``counts[p]`` records starting at ``first_offsets[p]`` (dense, as written); ratio 0 cleans
    the whole partition, 1 cleans nothing. A partition's dirty tail is never empty unless the
    ratio is 0 (``ceil``), like the active segment the cleaner never touches.
    """
    if not 0.0 <= dirty_ratio <= 1.0:
        raise ValueError(f"dirty_ratio must be within 0..1, got {dirty_ratio}")
    out: dict[int, int] = {}
    for part, n in counts.items():
        dirty = -int(-n * dirty_ratio // 1)  # ceil
        out[part] = first_offsets.get(part, 0) + n - dirty
    return out
