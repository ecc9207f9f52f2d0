"""Which raw records have a position that can be trusted, and what a second copy at a position
is: the rules both wings apply before a record is replayed. Arrow and Python only (no Spark): the
batch ingest runs ``refusal_columns`` in its tasks and ``first_difference``'s order in its joins
(``pipelines.batch.positions``); the streaming job runs ``refusal_columns`` and ``judge_copies``
per micro-batch on what its landing source takes (``pipelines.stream.ledger``).

Rules:
- A position is (topic, partition, offset). A record is refused, with a reason and a detail, when
  its position cannot be trusted: ``null_position`` (topic, partition or offset null or missing:
  nothing to de-duplicate or order it by), ``partition_out_of_range`` (outside
  0..``offsets_topic.num_partitions``-1: a group's records are ordered by partition first, so a
  stale record placed in partition 2147483647 would be replayed last), ``negative_offset``.
- Two copies at one position are the same record when ``key``, ``value``, ``timestamp`` and
  ``timestampType`` are equal (``COMPARED``; the first that differs names the conflict). A copy of
  a position already taken (``raw_records``; the stream's earlier micro-batches) is a duplicate
  when it equals the taken copy, else it is refused as ``conflicting_duplicate`` with the taken
  copy as the other one (which stays). At a position new to what was taken, one copy is taken
  when every copy is equal; when the copies disagree, every copy is refused, each with another,
  differing copy (the smallest) as the other one: which copy is right is not defined, so none is
  replayed.
- ``table_ranges_arrow``: per log partition of a table, the offset range, rows and whether an
  offset repeats: disjoint ranges prove a set of files holds no position twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

POSITION = ("topic", "partition", "offset")
#: What makes two copies at a position the same record, in the order a difference is named.
COMPARED = ("key", "value", "timestamp", "timestampType")

NULL_POSITION = "null_position"
PARTITION_OUT_OF_RANGE = "partition_out_of_range"
NEGATIVE_OFFSET = "negative_offset"
CONFLICTING_DUPLICATE = "conflicting_duplicate"

#: Details of a conflict (``part`` is the first ``COMPARED`` column that differs).
DETAIL_VS_TAKEN = "the copy already in {where} has a different {part}"
DETAIL_IN_INPUT = "another copy in the input has a different {part}"


def out_of_range_detail(partition: int, num_partitions: int) -> str:
    return f"partition {partition} outside 0..{num_partitions - 1} (offsets_topic.num_partitions)"


def negative_offset_detail(offset: int) -> str:
    return f"offset {offset} is negative"


def position_in_bounds(partition: int | None, first_offset: int | None, num_partitions: int | None) -> bool:
    """A (partition, smallest offset) is a trusted position (the range form of the rules)."""
    if partition is None or first_offset is None or partition < 0 or first_offset < 0:
        return False
    return num_partitions is None or partition < num_partitions


def refusal_columns(table: pa.Table, num_partitions: int) -> tuple[pa.Array, pa.Array]:
    """(reason, detail) per row of ``table`` (null for a trusted position). A missing
    topic/partition/offset column counts as null in every row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    names = table.column_names
    null = {
        c: (pc.is_null(table.column(c)).to_numpy(zero_copy_only=False) if c in names else np.ones(n, bool))
        for c in POSITION
    }
    null_pos = null["topic"] | null["partition"] | null["offset"]
    part = (
        pc.fill_null(table.column("partition").cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        if "partition" in names
        else np.zeros(n, np.int64)
    )
    off = (
        pc.fill_null(table.column("offset").cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        if "offset" in names
        else np.zeros(n, np.int64)
    )
    oor = ~null_pos & ((part < 0) | (part >= num_partitions))
    neg = ~null_pos & ~oor & (off < 0)
    reasons: list[str | None] = [None] * n
    details: list[str | None] = [None] * n
    for i in np.flatnonzero(null_pos | oor | neg).tolist():
        if null_pos[i]:
            reasons[i] = NULL_POSITION
            details[i] = ", ".join(f"{c} is null" for c in POSITION if null[c][i])
        elif oor[i]:
            reasons[i] = PARTITION_OUT_OF_RANGE
            details[i] = out_of_range_detail(int(part[i]), num_partitions)
        else:
            reasons[i] = NEGATIVE_OFFSET
            details[i] = negative_offset_detail(int(off[i]))
    return pa.array(reasons, pa.string()), pa.array(details, pa.string())


def first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The first ``COMPARED`` column in which copies ``a`` and ``b`` differ (null-safe), else None."""
    for c in COMPARED:
        if a.get(c) != b.get(c):
            return c
    return None


def _version(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in COMPARED)


def _order(v: tuple[Any, ...]) -> tuple[Any, ...]:
    # None-safe ordering of versions (the "smallest other copy", as the batch's min(struct))
    return tuple((x is not None, x) for x in v)


@dataclass
class CopyVerdict:
    """What ``judge_copies`` decided for the candidate copies (indexes into its ``copies``)."""

    take: list[int] = field(default_factory=list)
    duplicate: list[int] = field(default_factory=list)
    #: (index, detail, other copy's row, other copy already taken)
    refused: list[tuple[int, str, Mapping[str, Any], bool]] = field(default_factory=list)


def judge_copies(
    copies: Sequence[Mapping[str, Any]], taken: Mapping[tuple[Any, ...], Sequence[Mapping[str, Any]]], where: str
) -> CopyVerdict:
    """The copy rules (see the module) over ``copies`` (rows with ``POSITION`` + ``COMPARED``, in
    input order) given the copies already ``taken`` per position (``where`` names them in the
    detail). A position whose earlier copies already disagreed refuses every further copy."""
    by_pos: dict[tuple[Any, ...], list[int]] = {}
    for i, row in enumerate(copies):
        by_pos.setdefault(tuple(row[c] for c in POSITION), []).append(i)
    out = CopyVerdict()
    for pos, idx in by_pos.items():
        earlier = {_version(r): r for r in taken.get(pos, ())}
        if earlier:
            first = min(earlier, key=_order)
            for i in idx:
                if len(earlier) == 1 and _version(copies[i]) == first:
                    out.duplicate.append(i)
                else:
                    part = first_difference(copies[i], earlier[first]) or "copy (its earlier copies disagree)"
                    out.refused.append((i, DETAIL_VS_TAKEN.format(where=where, part=part), earlier[first], True))
            continue
        versions = {_version(copies[i]): copies[i] for i in idx}
        if len(versions) == 1:
            out.take.append(idx[0])
            out.duplicate.extend(idx[1:])
            continue
        for i in idx:
            mine = _version(copies[i])
            other = min((v for v in versions if v != mine), key=_order)
            diff = first_difference(copies[i], versions[other])
            out.refused.append((i, DETAIL_IN_INPUT.format(part=diff), versions[other], False))
    return out


def _int64s(column: pa.ChunkedArray | pa.Array) -> Any:
    """A null-free integer column as numpy int64, read straight from its data buffer."""
    import numpy as np
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    arr = arr.cast(pa.int64())
    return np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr), offset=arr.offset * 8)


#: log-partition keys with at most this many values are sorted by a stable radix sort (numpy's
#: ``argsort(kind="stable")`` on a 16-bit key: one pass over the rows, ~15x a 64-bit key's speed)
_SMALL_KEYS = 1 << 16


# long: one numpy pass (segment keys, the sort, the per-segment reductions) reads best unbroken
def table_ranges_arrow(t: pa.Table) -> pa.RecordBatch:
    """Per log partition of ``t`` (topic, partition, offset columns): range, rows, repeats.

    Rows come out ordered by (topic in order of first appearance, partition as unsigned 32 bits).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(t.column(c).null_count for c in POSITION):  # no position to compare: take the exact path
        return pa.RecordBatch.from_pydict(
            {
                "topic": [""],
                "partition": pa.array([-1], pa.int32()),
                "first": pa.array([0], pa.int64()),
                "last": pa.array([0], pa.int64()),
                "rows": pa.array([t.num_rows], pa.int64()),
                "repeats": [True],
            }
        )
    if t.num_rows == 0:
        return pa.RecordBatch.from_pydict(
            {
                "topic": pa.array([], pa.string()),
                "partition": pa.array([], pa.int32()),
                "first": pa.array([], pa.int64()),
                "last": pa.array([], pa.int64()),
                "rows": pa.array([], pa.int64()),
                "repeats": pa.array([], pa.bool_()),
            }
        )
    column = t.column("topic")
    if pc.all(pc.equal(column, column[0])).as_py():  # one topic (__consumer_offsets): no hashing
        topics = pa.array([column[0].as_py()], pa.string())
        codes = np.zeros(t.num_rows, np.int64)
    else:
        enc = column.combine_chunks().dictionary_encode()
        topics = enc.dictionary
        codes = _int64s(enc.indices)
    part = _int64s(t.column("partition"))
    off = _int64s(t.column("offset"))
    upart = part & 0xFFFFFFFF  # the order of partitions as unsigned 32 bits (negatives last)
    low = int(upart.min())
    span = int(upart.max()) - low + 1
    if len(topics) * span <= _SMALL_KEYS:
        seg = (codes * span + (upart - low)).astype(np.uint16)
    else:
        seg = codes * (1 << 32) + upart
    # a stable sort by log partition keeps each partition's rows in file order; when every
    # partition's offsets already increase there is no repeat and no second sort is needed
    order = np.argsort(seg, kind="stable")
    seg_s, off_s = seg[order], off[order]
    inside = np.r_[False, seg_s[1:] == seg_s[:-1]]
    starts = np.flatnonzero(~inside)
    ends = np.r_[starts[1:], len(seg_s)]
    if ((off_s[1:] <= off_s[:-1]) & inside[1:]).any():
        order = np.lexsort((off, seg))
        seg_s, off_s = seg[order], off[order]
    same = inside & np.r_[False, off_s[1:] == off_s[:-1]]
    rep = np.add.reduceat(same.astype(np.int64), starts) > 0
    firsts = np.minimum.reduceat(off_s, starts)
    lasts = np.maximum.reduceat(off_s, starts)
    first_rows = order[starts]
    return pa.RecordBatch.from_pydict(
        {
            "topic": topics.take(pa.array(codes[first_rows])),
            "partition": pa.array(part[first_rows], pa.int32()),
            "first": pa.array(firsts, pa.int64()),
            "last": pa.array(lasts, pa.int64()),
            "rows": pa.array(ends - starts, pa.int64()),
            "repeats": pa.array(rep),
        }
    )
