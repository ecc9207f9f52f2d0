"""Broker log segments as input of the batch job and of the core's replay.

Rules:
- ``landing_tables`` gives the batch job's ingest three parts of segment files (each in a
  ``<topic>-<N>`` partition directory, else one ``UsageError`` line): the data records as
  ``raw_records`` rows, ``raw_transactions`` rows (``schemas.raw``: one per record of a
  transactional batch and one per control record) and the unreadable batches as
  ``ingest_quarantine`` rows (reason ``bad_batch``, their bytes, file and byte position).
  Counts: data records + control records = records read; every problem is one quarantine row.
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


def _ms_timestamps(values: list[int]) -> pa.Array:
    return pa.array([v * 1000 for v in values], pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def landing_tables(files: list[Path]) -> LandingTables:
    """Every record of ``files`` (segment files in partition directories) in the three shapes."""
    items: list[SegmentRecord | SegmentProblem] = []
    for f in files:
        _topic, partition = partition_of(f)
        if partition is None:
            raise UsageError(
                f"{f}: cannot tell the partition of this segment: keep it in its directory "
                f"(e.g. {OFFSETS_TOPIC}-7/{f.name}) so its records get their log positions"
            )
        items.extend(read_segment_file(f))
    return item_tables(items)


def item_tables(items: list[SegmentRecord | SegmentProblem]) -> LandingTables:
    """Segment items (``pipelines.inputs.segment_files``) in the three shapes (module rules)."""

    raw: list[SegmentRecord] = []
    txn: list[SegmentRecord] = []
    probs: list[SegmentProblem] = []
    controls = 0
    for item in items:
        if isinstance(item, SegmentProblem):
            probs.append(item)
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
                [f"{p.source_file} byte {p.position} ({p.length} bytes): {p.reason}" for p in probs], pa.string()
            ),
            "other_key": pa.array([None] * len(probs), pa.binary()),
            "other_value": pa.array([None] * len(probs), pa.binary()),
            "other_in_raw_records": pa.array([None] * len(probs), pa.bool_()),
            "source_file": pa.array([p.source_file for p in probs], pa.string()),
        }
    )
    return LandingTables(raw_t, txn_t, prob_t, len(raw), controls)


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


__all__ = ["LandingTables", "item_tables", "landing_tables", "producer_of", "replay_items", "txn_marker"]
