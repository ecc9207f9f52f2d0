"""What became of each transactional offset commit (KIP-98), as ``offset_commits`` columns.

Rules:
- ``txn_fates_table``: ``raw_transactions`` rows (``schemas.raw``: transactional records and
  COMMIT/ABORT markers) resolved with the core's rule (``coordinator_core.loader.transactions.
  transaction_fates``: a record's transaction is closed by the first COMMIT/ABORT marker of its
  producer in its partition after it, whatever the group; none: open) into one row per
  transactional record, sorted by position. Transactional records are few next to the log: the
  core's rule is applied as is (a Python pass).
- ``with_txn_fates``: ``offset_commits`` rows get ``producer_id``, ``txn_outcome`` (committed |
  aborted | open) and ``txn_marker_offset`` of the rows a fates table holds, by
  (coordinator_partition, log_offset) (numpy over Arrow); every other row keeps nulls. No row is
  added or removed. The batch decode (``pipelines.batch.decode_txn``) and the segment stream
  (``pipelines.stream.segment_task``, ``segment_txn``) both use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_core import TxnMarker, transaction_fates
from schemas.decoded import OFFSET_COMMITS

if TYPE_CHECKING:
    import pyarrow as pa

_OUTCOMES = {True: "committed", False: "aborted", None: "open"}
#: partitions < 2^19, offsets < 2^44: one sortable int64 per position
_OFFSET_BITS = 44


def _position_keys(part: Any, off: Any) -> Any:
    import numpy as np

    return (np.asarray(part, np.int64) << _OFFSET_BITS) | np.asarray(off, np.int64)


def txn_fates_table(txn: pa.Table) -> pa.Table:
    """``raw_transactions`` rows -> one row per transactional record: (coordinator_partition,
    log_offset, producer_id, txn_outcome, txn_marker_offset), sorted by position (module rules)."""
    import pyarrow as pa

    cols = [txn.column(c).to_pylist() for c in ("partition", "offset", "producer_id", "control_type")]
    records = [(p, o, pid) for p, o, pid, ct in zip(*cols, strict=True) if ct is None]
    # COMMIT (1) / ABORT (0) only: the other control types (KRaft's) close no transaction
    markers = [TxnMarker(p, o, 0, pid, ct == 1) for p, o, pid, ct in zip(*cols, strict=True) if ct in (0, 1)]
    if any(p >= 1 << 19 or o >= 1 << _OFFSET_BITS for p, o, _ in records):
        raise ValueError("raw_transactions: a partition or offset beyond the decode's key range")
    fates = transaction_fates(records, markers)
    records.sort()
    resolved = [fates[(p, o)] for p, o, _ in records]
    schema = OFFSET_COMMITS.arrow_schema()
    names = ("coordinator_partition", "log_offset", "producer_id", "txn_outcome", "txn_marker_offset")
    out = (
        [p for p, _, _ in records],
        [o for _, o, _ in records],
        [pid for _, _, pid in records],
        [_OUTCOMES[f.committed] for f in resolved],
        [f.marker_offset for f in resolved],
    )
    return pa.Table.from_arrays(
        [pa.array(c, schema.field(n).type) for n, c in zip(names, out, strict=True)],
        schema=pa.schema([schema.field(n) for n in names]),
    )


def with_txn_fates(commits: pa.Table, fates: pa.Table | None) -> pa.Table:
    """``offset_commits`` rows with the transaction columns of the rows ``fates`` holds (by
    position; ``txn_fates_table``); the others unchanged."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if fates is None or not fates.num_rows or not commits.num_rows:
        return commits
    keys = _position_keys(fates.column("coordinator_partition"), fates.column("log_offset"))
    mine = _position_keys(commits.column("coordinator_partition"), commits.column("log_offset"))
    at = np.minimum(np.searchsorted(keys, mine), len(keys) - 1)
    hit = keys[at] == mine
    if not hit.any():
        return commits
    take = pa.array(np.where(hit, at, 0), pa.int64())
    for name in ("producer_id", "txn_outcome", "txn_marker_offset"):
        col = pc.if_else(pa.array(hit), fates.column(name).take(take), commits.column(name))
        commits = commits.set_column(commits.schema.get_field_index(name), commits.schema.field(name), col)
    return commits
