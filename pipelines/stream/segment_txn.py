"""Transactions across the micro-batches of a segment stream (KIP-98).

Rules (the core applies the semantics: ``coordinator_core.loader.transactions``):
- A COMMIT/ABORT marker applies to every group of its partition holding pending offsets of its
  producer (Kafka's ``replayEndTransactionMarker``); in a stream those offsets may have been read
  by any earlier micro-batch, and the micro-batch that reads the marker must hand it to their
  groups. So the source keeps the open transactions: per (partition, producer id) the
  ``offset_commits`` rows of the transactional records no marker has closed yet
  (``OpenTransactions``), as of each micro-batch's end, in a file of the replay checkpoint
  (``segment_txn/<end>.pickle``, the newest ``KEEP`` kept: a micro-batch run again after a
  crash finds the state at its start). A state that is not there (removed, an older checkpoint)
  is rebuilt from the log: the same scan from the first offset to that position.
- Per micro-batch the driver reads the transactional and control batches of its byte ranges
  only (``scan``: their headers say which) and ``settle`` gives:
  ``fates``: each of the batch's transactional records' fate within the batch (the core's
  ``transaction_fates``: committed/aborted by its producer's next marker in its partition, else
  open), which the tasks write into ``offset_commits``; ``prior``: the groups of the open
  transactions at the batch's start, per (partition, producer), which the tasks add to the
  groups a marker of the batch reaches (``pipelines.records.transactions.attach_transactions``);
  ``closed``: the ``offset_commits`` rows of earlier micro-batches that a marker of this batch
  closed, with their outcome and marker offset (the sink MERGEs them: the table says what
  became of every transactional commit, whichever micro-batch read its marker); and the open
  transactions at the batch's end.
- Transactional records are few next to the log: the scan decodes them on the driver with the
  decode the tasks use (``pipelines.records.decode``), and the state holds only their rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.records.txn_fates import txn_fates_table, with_txn_fates
from pipelines.uri import table_from_ipc, table_to_ipc
from schemas.decoded import OFFSET_COMMITS

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.inputs.segment_log import ByteRange

#: how many end states are kept (a re-run micro-batch needs the state at its start)
KEEP = 4
_TXN_OR_CONTROL = 0x10 | 0x20  # the v2 attributes' transactional and control bits


@dataclass
class OpenTransactions:
    """(partition, producer id) -> ``offset_commits`` rows of its records no marker closed yet."""

    rows: dict[tuple[int, int], pa.Table] = field(default_factory=dict)

    def groups(self) -> dict[tuple[int, int], set[str]]:
        return {k: set(t.column("group_id").to_pylist()) for k, t in self.rows.items()}


@dataclass(frozen=True)
class Settled:
    """A micro-batch's transactions (see the module rules)."""

    fates: pa.Table | None
    prior: dict[tuple[int, int], set[str]]
    closed: pa.Table | None
    open: OpenTransactions


def scan(ranges: list[ByteRange]) -> tuple[pa.Table, pa.Table]:
    """(``raw_transactions`` rows, ``offset_commits`` rows of the transactional records) of the
    transactional and control batches inside ``ranges`` (their headers say which:
    ``segment_log.header_columns``)."""
    import numpy as np

    # lazy: pipelines.inputs.segment_files loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.inputs.segment_files import SegmentRecord, read_segment_range
    from pipelines.inputs.segment_input import item_tables
    from pipelines.inputs.segment_log import header_columns
    from pipelines.records.decode import decode_batch, split_union_arrow

    items: list[Any] = []
    for r in ranges:
        cols = header_columns(r.path)
        hit = (
            (cols[:, 0] >= r.start) & (cols[:, 1] <= r.end) & (cols[:, 5] >= 0) & ((cols[:, 5] & _TXN_OR_CONTROL) != 0)
        )
        for start, end in cols[np.flatnonzero(hit), :2]:
            # the tasks quarantine what cannot be read; here only the records count
            items.extend(
                item
                for item in read_segment_range(r.path, int(start), int(end))
                if isinstance(item, SegmentRecord) and r.min_offset <= item.offset < r.end_offset
            )
    t = item_tables(items)  # t.raw: the transactional batches' data records
    union = decode_batch(t.raw.combine_chunks().to_batches()[0]) if t.raw.num_rows else []
    tables = split_union_arrow(union)
    commits = tables.get(OFFSET_COMMITS.name)
    return t.transactions, commits if commits is not None else OFFSET_COMMITS.arrow_schema().empty_table()


def settle(before: OpenTransactions, txn: pa.Table, commits: pa.Table) -> Settled:
    """The micro-batch's transactions from its ``raw_transactions`` rows and the
    ``offset_commits`` rows of its transactional records (``scan``; module rules)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    prior = before.groups()
    fates = txn_fates_table(txn) if txn.num_rows else None
    commits = with_txn_fates(commits, fates)
    marks = txn.filter(pc.is_in(txn.column("control_type"), pa.array([0, 1], pa.int32()))) if txn.num_rows else txn
    first: dict[tuple[int, int], tuple[int, bool]] = {}
    for p, o, pid, ct in zip(
        *(marks.column(c).to_pylist() for c in ("partition", "offset", "producer_id", "control_type")), strict=True
    ):
        if (p, pid) not in first or o < first[(p, pid)][0]:
            first[(p, pid)] = (o, ct == 1)
    closed: list[pa.Table] = []
    after: dict[tuple[int, int], pa.Table] = {}
    for key, rows in before.rows.items():
        m = first.get(key)
        if m is None:
            after[key] = rows
            continue
        n = rows.num_rows
        closed.append(
            rows.set_column(
                rows.schema.get_field_index("txn_outcome"),
                "txn_outcome",
                pa.array(["committed" if m[1] else "aborted"] * n, pa.string()),
            ).set_column(
                rows.schema.get_field_index("txn_marker_offset"), "txn_marker_offset", pa.array([m[0]] * n, pa.int64())
            )
        )
    still = (
        commits.filter(pc.fill_null(pc.equal(commits.column("txn_outcome"), "open"), False))
        if commits.num_rows
        else commits
    )
    if still.num_rows:
        keys = list(
            zip(still.column("coordinator_partition").to_pylist(), still.column("producer_id").to_pylist(), strict=True)
        )
        for key in sorted(set(keys)):
            mine = still.filter(pa.array([k == key for k in keys]))
            after[key] = pa.concat_tables([after[key], mine]) if key in after else mine
    return Settled(fates, prior, pa.concat_tables(closed) if closed else None, OpenTransactions(after))


class StateFiles:
    """``OpenTransactions`` per end position, in ``directory`` (module rules)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def _path(self, position: dict[str, Any]) -> str:
        key = hashlib.sha256(json.dumps(position, sort_keys=True).encode()).hexdigest()[:32]
        return os.path.join(self.directory, f"{key}.pickle")

    def load(self, position: dict[str, Any]) -> OpenTransactions | None:
        try:
            with open(self._path(position), "rb") as fh:
                blob = pickle.load(fh)
        except FileNotFoundError:
            return None
        return OpenTransactions({k: table_from_ipc(v) for k, v in blob.items()})

    def save(self, position: dict[str, Any], state: OpenTransactions) -> None:
        os.makedirs(self.directory, exist_ok=True)
        path = self._path(position)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            pickle.dump({k: table_to_ipc(v) for k, v in state.rows.items()}, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        kept = sorted(
            (e for e in os.scandir(self.directory) if e.name.endswith(".pickle")),
            key=lambda e: e.stat().st_mtime_ns,
            reverse=True,
        )
        for old in kept[KEEP:]:
            if old.path != path:
                os.remove(old.path)


__all__ = ["KEEP", "OpenTransactions", "Settled", "StateFiles", "scan", "settle"]
