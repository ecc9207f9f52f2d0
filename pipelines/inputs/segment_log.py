"""A broker log dir in log order, as the stream reads it (and the overlapping-segments rule both jobs
follow): per partition what is there to read, where a micro-batch ends, which bytes its tasks read.

Rules:
- Layout: the landing holds ``<topic>-<N>`` partition directories of segment files
  (``pipelines.inputs.segment_files``: Kafka's names, the base offset, so name order is log order).
- A partition's position is ``[next offset, segment base offset, byte]``: the next batch to read
  starts at that byte of that segment. It is resumed there while the segment still has a batch
  starting at that byte (or ends there); otherwise (the copy was replaced: the broker's cleaner
  rewrote it, retention removed it) the partition is read again from its first segment, skipping
  every batch whose last offset is below the next offset: a record is read once, by its offset.
- Batches are known from their headers (``coordinator_core.segments.headers``), walked once per
  file and kept per (path, inode); a file that grew is walked on from where the walk stopped.
  The last segment of a partition is read up to its last whole batch: a batch not all there yet
  waits for the next trigger (the broker, or the copy, is still writing it). In an earlier
  segment what the walk cannot step over (a partial batch, an implausible header) is handed to
  the tasks up to the file's end, where the parser quarantines it (``bad_batch``); such a span
  ends at the next segment's base offset.
- Cut (``cut``): a micro-batch takes, over every partition, the batches whose running newest
  timestamp (per partition, in log order) is below T, T the oldest whose batches no longer fit
  in ``limit`` bytes (when even the oldest timestamp's batches do not fit, those alone):
  partitions advance together in log time, so the watermark never passes a partition's records
  before they are read.
- Available-now (``target``): a run ends at the positions the partitions had when it started.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from coordinator_core import segments as seg
from coordinator_core.segments.headers import walk_headers

log = logging.getLogger("offsetlake.stream")

#: a partition's position: [next offset, segment base offset (-1: none yet), byte]
Pos = tuple[int, int, int]
START: Pos = (0, -1, 0)
#: attributes of a span the walk could not step over (no batch header there to trust)
UNREADABLE = -1
#: attributes of a batch whose offsets an earlier segment of the partition holds (an overlapping
#: copy): its records are quarantined, never followed (their offsets are read already)
OVERLAP = -2


@dataclass(frozen=True)
class Span:
    """Batches of one segment file, columns (numpy): byte start and end, last offset, newest
    timestamp, record count, attributes (``UNREADABLE`` for bytes only the parser can judge)."""

    base: int
    path: str
    start: Any
    end: Any
    last: Any
    max_ts: Any
    count: Any
    attrs: Any

    def __len__(self) -> int:
        return len(self.start)


class ByteRange(NamedTuple):
    """Bytes a task reads: ``path[start:end]``, keeping records from ``min_offset`` up to (not
    including) ``end_offset``."""

    path: str
    start: int
    end: int
    min_offset: int
    end_offset: int
    overlap: tuple[int, ...] = ()  # byte starts of batches whose offsets an earlier segment holds


_WALKS: dict[tuple[str, int], tuple[int, Any, int, str]] = {}  # (path, inode) -> (size, cols, end, stop)


def _walk(path: str) -> tuple[Any, int, str, int]:
    """(header columns, walk end, stop reason, file size) of ``path``, cached and extended."""
    st = os.stat(path)
    key = (path, st.st_ino)
    got = _WALKS.get(key)
    if got is not None and got[0] == st.st_size:
        return got[1], got[2], got[3], st.st_size
    start, old = (got[2], got[1]) if got is not None and got[0] < st.st_size else (0, None)
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    walk = walk_headers(memoryview(data))
    heads = walk.headers
    cols = np.array(
        [
            (start + h.position, start + h.position + h.size, h.last_offset, h.max_timestamp, h.records, h.attributes)
            for h in heads
        ],
        dtype=np.int64,
    ).reshape(-1, 6)
    legacy = [i for i, h in enumerate(heads) if h.records < 0]
    for i in legacy:  # a compressed legacy wrapper: its record count is inside
        cols[i, 4] = _legacy_count(data[heads[i].position : heads[i].position + heads[i].size])
    if old is not None:
        cols = np.concatenate([old, cols])
    for stale in [k for k in _WALKS if k[0] == path and k != key]:  # a replaced file's walk
        del _WALKS[stale]
    _WALKS[key] = (st.st_size, cols, start + walk.end, walk.stop)
    return cols, start + walk.end, walk.stop, st.st_size


def header_columns(path: str) -> Any:
    """The header columns of ``path`` (``Span``'s, as rows: start, end, last offset, newest
    timestamp, count, attributes) as walked so far."""
    return _walk(path)[0]


def _legacy_count(data: bytes) -> int:
    # lazy: pipelines.inputs.segment_files loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.inputs.segment_files import crc32c, decompress

    (item,) = list(seg.iter_batches(data, decompress=decompress, crc32c_fn=crc32c))
    return len(item.records) if isinstance(item, seg.RecordBatch) else 1


def partition_files(root: str, topic: str = "__consumer_offsets") -> dict[int, list[tuple[int, str]]]:
    """partition -> its segment files as (base offset, path), in log order; only ``<topic>-N``
    directories (``kafka.topic``), the others skipped with a warning (once per set)."""
    # lazy: pipelines.inputs.segment_files loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.inputs.segment_files import is_segment_dir

    out: dict[int, list[tuple[int, str]]] = {}
    base = Path(root)
    dirs = [base] if is_segment_dir(base) else [d for d in sorted(base.iterdir()) if is_segment_dir(d)]
    skipped = []
    for d in dirs:
        name, _, num = d.name.rpartition("-")
        if name != topic:
            skipped.append(d.name)
            continue
        files = sorted(f.name for f in d.iterdir() if f.name.endswith(".log") and f.name[:-4].isdigit())
        out[int(num)] = [(int(name[:-4]), str(d / name)) for name in files if len(name) == 24]
    _warn_once(
        ("skipped", root, tuple(skipped)),
        f"segments: {root}: skipped {len(skipped)} partition directories of other topics "
        f"(kafka.topic is {topic}): {', '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''}",
        bool(skipped),
    )
    return out


_WARNED: set[Any] = set()


def _warn_once(key: Any, message: str, when: bool = True) -> None:
    if when and key not in _WARNED:
        _WARNED.add(key)
        log.warning("%s", message)


def _overlaps(files: list[tuple[int, str]]) -> tuple[list[Any], list[int]]:
    """Per file of one partition (in log order): which of its batches are an overlapping copy
    (their last offset is at or below the highest offset of the files before it), and that
    highest offset counting the file itself."""
    masks: list[Any] = []
    covered_at: list[int] = []
    covered = -1
    for _b, path in files:
        cols = _walk(path)[0]
        masks.append(cols[:, 2] <= covered)
        if len(cols):
            covered = max(covered, int(cols[:, 2].max()))
        covered_at.append(covered)
    return masks, covered_at


def overlap_starts(files: list[tuple[int, str]]) -> dict[str, set[int]]:
    """path -> byte starts of its batches whose offsets an earlier file of the partition holds:
    the one rule for overlapping segments of the stream (``pending``) and the batch job
    (``pipelines.inputs.segment_input.landing_tables``). The first copy in log order (base
    offset, then file name) is kept; a later copy's records are quarantined
    (``overlapping_segment``). A live stream cannot take back a copy it read already, so the
    batch job keeps the same one and the two give equal tables on the same log dir."""
    masks, _ = _overlaps(files)
    return {path: {int(x) for x in _walk(path)[0][m, 0]} for (_b, path), m in zip(files, masks, strict=True) if m.any()}


def pending(files: list[tuple[int, str]], pos: Pos, *, final: bool = False) -> list[Span]:
    """The batches of one partition after ``pos``, in log order (see the module rules).
    ``final``: the run ends at what is there now (available-now), so an unreadable tail of the
    last segment is handed to the parser too (the batch job quarantines it); otherwise it waits,
    with one warning."""
    next_offset, at_base, at_byte = pos
    resume = None
    for i, (b, path) in enumerate(files):
        if b == at_base:
            cols, end, _stop, size = _walk(path)
            if at_byte in (end, size) or np.any(cols[:, 0] == at_byte):
                resume = i
            break
    spans: list[Span] = []
    first = resume if resume is not None else 0
    masks, covered_at = _overlaps(files)
    for i, (b, path) in enumerate(files):
        cols, end, stop, size = _walk(path)
        overlap = masks[i]
        covered = covered_at[i]
        if i < first:
            continue
        keep = (cols[:, 2] >= next_offset) | overlap
        if resume is not None and i == first:
            keep &= cols[:, 0] >= at_byte
        cols = cols[keep].copy()
        cols[overlap[keep], 5] = OVERLAP
        last_file = i == len(files) - 1
        if stop != "end" and end < size and (resume is None or i > first or end >= at_byte):
            if not last_file or final:
                # bytes the walk cannot step over, in a segment the broker no longer writes (or
                # at the end of a finite run): the parser reads (and quarantines) them; they end
                # where the next segment begins
                upto = files[i + 1][0] - 1 if not last_file else max(covered, next_offset - 1)
                tail = np.array([[end, size, upto, -(2**63), 0, UNREADABLE]], np.int64)
                cols = np.concatenate([cols, tail])
            else:
                _warn_once(
                    ("stuck", path, end, size),
                    f"segments: {path}: the partition cannot advance past byte {end} of {size} ({stop}); "
                    "waiting for the rest of the batch (a run with trigger available-now quarantines it)",
                )
        if len(cols):
            spans.append(Span(b, path, *(np.ascontiguousarray(cols[:, k]) for k in range(6))))
    return spans


def cut(pend: dict[int, list[Span]], limit_bytes: int) -> dict[int, int]:
    """partition -> how many of its pending batches (over its spans, in order) the micro-batch
    takes (module rules: one time cut over every partition, at most ``limit_bytes``)."""
    running = {p: np.maximum.accumulate(np.concatenate([s.max_ts for s in sp])) for p, sp in pend.items() if sp}
    if not running:
        return {}
    key = np.concatenate(list(running.values()))
    size = np.concatenate([np.concatenate([s.end - s.start for s in pend[p]]) for p in running])
    order = np.argsort(key, kind="stable")
    k = int(np.searchsorted(np.cumsum(size[order]), limit_bytes, side="right"))
    if k >= len(key):
        return {p: len(r) for p, r in running.items()}
    # every batch before the first one that does not fit, in time order; batches sharing a
    # timestamp go together (a running maximum keeps each partition's prefix whole)
    below = key[order[k]]
    take = {p: int(np.count_nonzero(r < below)) for p, r in running.items()}
    if not any(take.values()):  # not even the oldest timestamp's batches fit: those alone
        take = {p: int(np.count_nonzero(r <= below)) for p, r in running.items()}
    return take


def advance(spans: list[Span], take: int, pos: Pos) -> tuple[Pos, int]:
    """The position after the first ``take`` batches of ``spans``, and their record count."""
    records = 0
    left = take
    for s in spans:
        if left <= 0:
            break
        n = min(left, len(s))
        # an overlapping copy (or an unreadable span) never moves the next offset back
        pos = (max(pos[0], int(s.last[:n].max()) + 1), s.base, int(s.end[n - 1]))
        records += int(s.count[:n].sum())
        left -= n
    return pos, records


def ranges_between(files: list[tuple[int, str]], start: Pos, end: Pos, *, final: bool = False) -> list[ByteRange]:
    """The byte ranges of one partition from position ``start`` to ``end`` (a micro-batch)."""
    out: list[ByteRange] = []
    for s in pending(files, start, final=final):
        if s.base > end[1]:
            break
        keep = s.end <= end[2] if s.base == end[1] else np.ones(len(s), bool)
        n = int(np.count_nonzero(keep))
        if n:
            over = tuple(int(x) for x in s.start[:n][s.attrs[:n] == OVERLAP])
            out.append(ByteRange(s.path, int(s.start[0]), int(s.end[n - 1]), start[0], end[0], over))
    return out


__all__ = [
    "OVERLAP",
    "START",
    "ByteRange",
    "Pos",
    "Span",
    "advance",
    "cut",
    "header_columns",
    "overlap_starts",
    "partition_files",
    "pending",
    "ranges_between",
]
