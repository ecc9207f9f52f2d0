"""Transactions in the replay input: producer ids on the rows, COMMIT/ABORT markers per group.

Rules (KIP-98; the core applies them: ``coordinator_core.loader.transactions``):
- Input: replay-input rows of whole groups (``pipelines.records.replay_input``) and the
  ``raw_transactions`` rows (``schemas.raw``: a row per record of a transactional batch and per
  control record of broker segments). Arrow and numpy only.
- A row whose (coordinator_partition, log_offset) is a transactional batch's record gets its
  producer id (``producer_id``); every other row keeps null (a plain record).
- A COMMIT/ABORT marker applies to every group of its partition holding pending offsets of its
  producer (Kafka's ``replayEndTransactionMarker``): it becomes one row (``rec_kind`` 4,
  ``REC_TXN_MARKER``) for each group of the input with a transactional row of that producer in
  that partition. A marker for a group with nothing pending is a no-op in the core, so handing it
  to a group whose transaction it does not close changes nothing; other control types (KRaft)
  are no transaction markers and are left out.
- A stream's micro-batch passes ``prior``: per (partition, producer id) the groups whose pending
  offsets of that producer earlier micro-batches took (``pipelines.stream.segment_txn``); its
  markers reach those groups too.
- The result has the input's rows (same order, ``producer_id`` filled) followed by the marker
  rows; the caller sorts (``replay_input.replay_order``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.records.replay_input import REC_OFFSET_COMMIT, REC_TXN_MARKER, as_numpy, schema

#: Kafka's ControlRecordType codes of the transaction markers
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def _keys(part: Any, off: Any) -> Any:
    """One sortable int64 per (partition, offset): partitions < 2^19, offsets < 2^44."""
    return (part.astype(np.int64) << 44) | off.astype(np.int64)


def attach_transactions(
    rows: pa.Table, txn: pa.Table | None, prior: dict[tuple[int, int], set[str]] | None = None
) -> pa.Table:
    """``rows`` with producer ids set and the markers of their groups appended (module rules)."""
    if txn is None or txn.num_rows == 0 or (rows.num_rows == 0 and not prior):
        return rows
    ctype = txn.column("control_type")
    data = txn.filter(pc.is_null(ctype))
    marks = txn.filter(pc.is_in(ctype, pa.array([CONTROL_ABORT, CONTROL_COMMIT], pa.int32())))
    rows = _with_producer_ids(rows, data)
    extra = _marker_rows(rows, marks, prior or {})
    return pa.concat_tables([rows, extra]) if extra.num_rows else rows


def _with_producer_ids(rows: pa.Table, data: pa.Table) -> pa.Table:
    if data.num_rows == 0:
        return rows
    t_part = as_numpy(data.column("partition"), 0)
    t_off = as_numpy(data.column("offset"), 0)
    if int(t_off.max(initial=0)) >= 1 << 44 or int(t_part.max(initial=0)) >= 1 << 19:
        raise ValueError("raw_transactions: a partition or offset beyond the replay's key range")
    t_key = _keys(t_part, t_off)
    order = np.argsort(t_key, kind="stable")
    t_key, t_pid = t_key[order], as_numpy(data.column("producer_id"), -1)[order]
    r_key = _keys(as_numpy(rows.column("coordinator_partition"), 0), as_numpy(rows.column("log_offset"), 0))
    at = np.minimum(np.searchsorted(t_key, r_key), len(t_key) - 1)
    hit = (t_key[at] == r_key) & (as_numpy(rows.column("rec_kind"), -1) == REC_OFFSET_COMMIT)
    if not hit.any():
        return rows
    pid = pa.array(np.where(hit, t_pid[at], 0), pa.int64(), mask=~hit)
    return rows.set_column(rows.schema.get_field_index("producer_id"), "producer_id", pid)


def _marker_rows(rows: pa.Table, marks: pa.Table, prior: dict[tuple[int, int], set[str]]) -> pa.Table:
    shape = schema()
    if marks.num_rows == 0:
        return shape.empty_table()
    txn_rows = rows.filter(pc.is_valid(rows.column("producer_id")))
    groups: dict[tuple[int, int], set[str]] = {k: set(v) for k, v in prior.items()}
    for g, p, pid in zip(
        txn_rows.column("group_id").to_pylist(),
        txn_rows.column("coordinator_partition").to_pylist(),
        txn_rows.column("producer_id").to_pylist(),
        strict=True,
    ):
        groups.setdefault((p, pid), set()).add(g)
    out: dict[str, list[Any]] = {
        "group_id": [],
        "coordinator_partition": [],
        "log_offset": [],
        "log_timestamp_ms": [],
        "producer_id": [],
        "txn_committed": [],
    }
    ts_ms = pc.divide(marks.column("timestamp").cast(pa.int64()), 1000).to_pylist()
    for p, off, ts, pid, ct in zip(
        marks.column("partition").to_pylist(),
        marks.column("offset").to_pylist(),
        ts_ms,
        marks.column("producer_id").to_pylist(),
        marks.column("control_type").to_pylist(),
        strict=True,
    ):
        for g in sorted(groups.get((p, pid), ())):
            for name, v in zip(out, (g, p, off, ts, pid, ct == CONTROL_COMMIT), strict=True):
                out[name].append(v)
    n = len(out["group_id"])
    cols = {name: pa.array(vals, shape.field(name).type) for name, vals in out.items()}
    cols["rec_kind"] = pa.array([REC_TXN_MARKER] * n, shape.field("rec_kind").type)
    return pa.Table.from_arrays([cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in shape], schema=shape)
