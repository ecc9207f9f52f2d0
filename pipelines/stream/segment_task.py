"""A segment stream task: its partitions' byte ranges -> decoded tables and packed replay input.

Rules (``pipelines.stream.segment_source`` has the whole picture):
- Per partition, every record of its ranges in log order, read once (records outside a
  range's offsets are a rewritten copy's: left out), shaped as the batch job shapes segments
  (``segment_input.item_tables``): data records, ``raw_transactions`` rows, unreadable batches.
- The data records are decoded by the batch job's decode (``decode_batch``), the transactional
  ones' ``offset_commits`` rows get their fate in this micro-batch (``decode_txn.with_txn_fates``
  over the fates the driver settled), the replay-input rows their producer ids and the markers
  of the partition, handed to the groups the batch's own transactional records and the earlier
  micro-batches' open transactions (``prior``) name (``transactions.attach_transactions``).
- Output: the packs (``replay_input.pack_buckets``, one per state bucket and partition); with a
  ``decoded`` prefix the decoded tables, ``raw_transactions``, the unreadable batches (as
  ``ingest_quarantine`` rows without their run columns) and the counts (``COUNTS``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.inputs.segment_log import ByteRange
from pipelines.records.txn_fates import with_txn_fates
from pipelines.uri import table_from_ipc

if TYPE_CHECKING:
    import pyarrow as pa

COUNTS = "_segment_counts"  # a task's counts, among its decoded files


@dataclass
class SegmentPartition:
    """One task: its partitions' byte ranges and the micro-batch's transactions (picklable)."""

    ranges: dict[int, list[ByteRange]]
    fates: bytes | None = None  # Arrow IPC of ``txn_fates_table``
    prior: dict[tuple[int, int], set[str]] = field(default_factory=dict)
    decoded: str | None = None


def read_partitions(part: SegmentPartition, *, buckets: int, lenient: bool = False) -> Iterator[pa.RecordBatch]:
    """The task's packs, partition by partition (module rules)."""
    import pyarrow as pa

    # lazy: pipelines.inputs.segment_input loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.inputs.segment_input import item_tables
    from pipelines.records import replay_input
    from pipelines.records.decode import decode_batch, split_union_arrow
    from pipelines.records.transactions import attach_transactions

    # lazy: pipelines.stream.source loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.stream.source import DecodedFiles

    out = DecodedFiles(part.decoded) if part.decoded is not None else None
    fates = None if part.fates is None else table_from_ipc(part.fates)
    data = controls = 0
    for p in sorted(part.ranges):
        t = item_tables(range_items(part.ranges[p]))
        data += t.data_records
        controls += t.control_records
        union = decode_batch(t.raw.combine_chunks().to_batches()[0], lenient=lenient) if t.raw.num_rows else []
        tables = split_union_arrow(union)
        if "offset_commits" in tables:
            tables["offset_commits"] = with_txn_fates(tables["offset_commits"], fates)
        if out is not None:
            extra = {"raw_transactions": t.transactions, "ingest_quarantine": t.problems}
            out({**tables, **{k: v for k, v in extra.items() if v.num_rows}})
        rows = replay_input.project_tables(tables)
        prior = {k: v for k, v in part.prior.items() if k[0] == p}
        rows = attach_transactions(rows, t.transactions, prior)
        if rows.num_rows:
            yield replay_input.pack_buckets(rows, buckets)
    if out is not None:
        out({COUNTS: pa.table({"data": [data], "controls": [controls]})})
        out.close()


def range_items(ranges: list[Any]) -> list[Any]:
    """The items of one partition's byte ranges (``segment_log.ByteRange``): records from the
    range's offsets, every problem, and the records of overlapping batches as problems."""
    # lazy: pipelines.inputs.segment_files loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.inputs.segment_files import SegmentProblem, overlap_problem, read_segment_range

    items: list[Any] = []
    for r in ranges:
        over = set(r.overlap)
        for i in read_segment_range(r.path, r.start, r.end):
            if isinstance(i, SegmentProblem):
                items.append(i)
            elif i.batch_position in over:
                items.append(overlap_problem(i))
            elif r.min_offset <= i.offset < r.end_offset:
                items.append(i)
    return items


__all__ = ["range_items", "read_partitions"]
