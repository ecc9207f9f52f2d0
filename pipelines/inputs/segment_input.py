"""Broker log segments as input of the batch job and of the core's replay.

Rules:
- ``landing_tables`` gives the batch job's ingest three parts of segment files (each in a
  ``<topic>-<N>`` partition directory, else one ``UsageError`` line): the data records as
  ``raw_records`` rows, ``raw_transactions`` rows (``schemas.raw``: one per record of a
  transactional batch and one per control record) and the unreadable batches as
  ``ingest_quarantine`` rows (reason ``bad_batch``, their bytes, file and byte position; ``detail``
  ends with ``; offsets B..L`` when the batch held more than its base offset B:
  ``coordinator_core.log_shape.bad_batch_last_offset``).
  Counts: data records + control records = records read; every problem is one quarantine row.
  Overlapping segments follow the stream's rule (``pipelines.inputs.segment_log.overlap_starts``):
  the first copy of an offset in log order (base offset, then file name) is read, a later
  copy's records are quarantined (``overlapping_segment``, one row per record with its bytes).
- ``replay_items`` gives the core's replay input: records with their producer id when their
  batch is transactional, COMMIT/ABORT markers as ``TxnMarker``s.
- Reading is ``pipelines.inputs.segment_files``'; nothing here applies transaction semantics.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from coordinator_core import CorruptRecordError, LogRecord, TxnMarker, decode_record
from coordinator_core import segments as seg
from pipelines.errors import UsageError
from pipelines.inputs.segment_files import (
    OFFSETS_TOPIC,
    OVERLAPPING,
    SegmentProblem,
    SegmentRecord,
    partition_of,
    read_segment_file,
    read_segment_items,
)
from schemas.raw import RAW_RECORDS, RAW_TRANSACTIONS


class LandingTables(NamedTuple):
    """Segments as ingest input: ``raw_records`` rows, ``raw_transactions`` rows, quarantine rows."""

    raw: pa.Table
    transactions: pa.Table
    problems: pa.Table
    data_records: int
    control_records: int
    bad_batch_offsets: int = 0  # the offsets the unreadable batches held (base..last: their spans)


def _ms_timestamps(values: list[int]) -> pa.Array:
    return pa.array([v * 1000 for v in values], pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def landing_tables(files: list[Path]) -> LandingTables:
    """Every record of ``files`` (segment files in partition directories) in the three shapes."""
    from pipelines.inputs.segment_files import overlap_problem
    from pipelines.inputs.segment_log import overlap_starts

    parts: dict[tuple[str, int], list[Path]] = {}
    for f in files:
        topic, partition = partition_of(f)
        if partition is None:
            raise UsageError(
                f"{f}: cannot tell the partition of this segment: keep it in its directory "
                f"(e.g. {OFFSETS_TOPIC}-7/{f.name}) so its records get their log positions"
            )
        parts.setdefault((topic, partition), []).append(f)
    items: list[SegmentRecord | SegmentProblem] = []
    for fs in parts.values():
        # the stream's rule for overlapping segments (``segment_log.overlap_starts``): the first
        # copy in log order is read, a later copy's records are quarantined
        ordered = sorted(fs, key=lambda f: (_base_offset(f), f.name))
        over = overlap_starts([(_base_offset(f), str(f)) for f in ordered])
        for f in ordered:
            starts = over.get(str(f), set())
            for item in read_segment_file(f):
                if starts and isinstance(item, SegmentRecord) and item.batch_position in starts:
                    items.append(overlap_problem(item))
                else:
                    items.append(item)
    return item_tables(items)


def _base_offset(f: Path) -> int:
    """A segment file's base offset, from its Kafka name (``%020d.log``; 0 for another name)."""
    stem = f.name.removesuffix(".log")
    return int(stem) if stem.isdigit() else 0


def item_tables(items: list[SegmentRecord | SegmentProblem]) -> LandingTables:
    """Segment items (``pipelines.inputs.segment_files``) in the three shapes (module rules)."""

    raw: list[SegmentRecord] = []
    txn: list[SegmentRecord] = []
    probs: list[SegmentProblem] = []
    spans: list[str] = []
    bad_offsets = 0
    controls = 0
    for n, item in enumerate(items):
        if isinstance(item, SegmentProblem):
            probs.append(item)
            span, count = _bad_batch_span(items, n, item)
            spans.append(span)
            bad_offsets += count
            continue
        if item.control_type is not None:
            controls += 1
            txn.append(item)
            continue
        raw.append(item)
        if item.is_transactional:
            txn.append(item)
    raw_t = pa.Table.from_arrays(
        [
            pa.array([r.key for r in raw], pa.binary()),
            pa.array([r.value for r in raw], pa.binary()),
            pa.array([r.topic for r in raw], pa.string()),
            pa.array([r.partition for r in raw], pa.int32()),
            pa.array([r.offset for r in raw], pa.int64()),
            _ms_timestamps([r.timestamp_ms for r in raw]),
            pa.array([r.timestamp_type for r in raw], pa.int32()),
        ],
        schema=RAW_RECORDS.arrow_schema(),
    )
    txn_t = pa.Table.from_arrays(
        [
            pa.array([r.topic for r in txn], pa.string()),
            pa.array([r.partition for r in txn], pa.int32()),
            pa.array([r.offset for r in txn], pa.int64()),
            _ms_timestamps([r.timestamp_ms for r in txn]),
            pa.array([r.producer_id for r in txn], pa.int64()),
            pa.array([r.producer_epoch for r in txn], pa.int32()),
            pa.array([r.control_type for r in txn], pa.int32()),
            pa.array([r.coordinator_epoch for r in txn], pa.int32()),
            pa.array([r.source_file for r in txn], pa.string()),
        ],
        schema=RAW_TRANSACTIONS.arrow_schema(),
    )
    prob_t = pa.table(
        {
            "key": pa.array([p.key for p in probs], pa.binary()),
            "value": pa.array([p.data for p in probs], pa.binary()),
            "topic": pa.array([p.topic for p in probs], pa.string()),
            "partition": pa.array([p.partition for p in probs], pa.int32()),
            "offset": pa.array([p.offset if p.offset is not None else p.base_offset for p in probs], pa.int64()),
            "timestamp": pa.array([None] * len(probs), pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([None] * len(probs), pa.int32()),
            "reason": pa.array(
                ["overlapping_segment" if p.reason.startswith(OVERLAPPING) else "bad_batch" for p in probs], pa.string()
            ),
            "detail": pa.array(
                [
                    f"{p.source_file} byte {p.position} ({p.length} bytes): {p.reason}{span}"
                    for p, span in zip(probs, spans, strict=True)
                ],
                pa.string(),
            ),
            "other_key": pa.array([None] * len(probs), pa.binary()),
            "other_value": pa.array([None] * len(probs), pa.binary()),
            "other_in_raw_records": pa.array([None] * len(probs), pa.bool_()),
            "source_file": pa.array([p.source_file for p in probs], pa.string()),
        }
    )
    return LandingTables(raw_t, txn_t, prob_t, len(raw), controls, bad_offsets)


def _bad_batch_span(items: list[SegmentRecord | SegmentProblem], n: int, item: SegmentProblem) -> tuple[str, int]:
    """A bad batch's whole span of offsets (its ``detail`` suffix, how many offsets), so the
    log-shape inference does not take its other offsets for the log cleaner's work; ("", 0) for
    a problem that is not a bad batch (an overlapping copy's record has its own offset)."""
    from coordinator_core import bad_batch_last_offset

    base = item.base_offset
    if item.offset is not None or base is None:
        return "", 0
    last = bad_batch_last_offset(item.data, base, _next_offset(items, n))
    last = base if last is None else last
    return (f"; offsets {base}..{last}" if last > base else ""), last - base + 1


def _next_offset(items: list[SegmentRecord | SegmentProblem], n: int) -> int | None:
    """The first offset after item ``n`` in the same file (None: none known)."""
    here = items[n].source_file
    for item in items[n + 1 :]:
        if item.source_file != here:
            return None
        off = (
            item.offset
            if isinstance(item, SegmentRecord)
            else (item.offset if item.offset is not None else item.base_offset)
        )
        if off is not None:
            return off
    return None


#: ``detail``'s span of a bad batch's offsets (``pipelines.inputs.log_shape`` reads it back)
BAD_BATCH_SPAN = r"; offsets (\d+)\.\.(\d+)$"


def replay_items(path: str | os.PathLike[str], *, modern: bool = True) -> Iterator[Any]:
    """The core's replay input of the segments under ``path``: each data record decoded (with its
    producer id when its batch is transactional), each COMMIT/ABORT as a ``TxnMarker``; other
    control records, problems and corrupt records are left out (``read_segment_items`` shows them)."""

    for item in read_segment_items(path):
        if isinstance(item, SegmentProblem) or item.partition is None:
            continue
        if item.control_type is not None:
            marker = txn_marker(item)
            if marker is not None:
                yield marker
            continue
        try:
            rec = decode_record(item.key, item.value, modern=modern)
        except CorruptRecordError:
            continue
        yield LogRecord(item.partition, item.offset, item.timestamp_ms, rec.key, rec.value, producer_of(item))


def txn_marker(item: Any) -> Any:
    """A segment's COMMIT/ABORT control record as the core's ``TxnMarker`` (None for anything
    else: data records, other control records, records without a partition)."""

    if item.partition is None or item.control_type not in (seg.CONTROL_ABORT, seg.CONTROL_COMMIT):
        return None
    committed = item.control_type == seg.CONTROL_COMMIT
    return TxnMarker(item.partition, item.offset, item.timestamp_ms, item.producer_id, committed)


def producer_of(item: Any) -> int | None:
    """The producer id of a data record's batch when the batch is transactional (a plain batch
    carries NO_PRODUCER_ID or an idempotent producer's id: neither makes a commit pending)."""
    return int(item.producer_id) if item.is_transactional else None


__all__ = [
    "BAD_BATCH_SPAN",
    "LandingTables",
    "item_tables",
    "landing_tables",
    "producer_of",
    "replay_items",
    "txn_marker",
]
