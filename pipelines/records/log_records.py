"""Replay-input rows -> the core's ``LogRecord``s (the one place pipelines rebuild core records).

Rules:
- Rows of every kind become the core's own record classes, built with the core's slot-filling
  constructors (``wire.fast_constructor``), in the table's row order; unsupported rows and Kafka 4
  group records are decoded by the core codec from their raw bytes with ``modern=True`` (the
  consumer-group fold reads the KIP-848 records' fields). The result equals decoding the raw
  records with ``coordinator_core.codec.record_codec.decode_record(..., modern=True)`` (the tests compare them).
  An offset commit of a transactional batch keeps its producer id; a transaction-marker row
  becomes the core's ``TxnMarker``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from coordinator_core import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    TxnMarker,
    decode_record,
    fast_constructor,
)
from pipelines.records.replay_input import (
    REC_GROUP_METADATA,
    REC_OFFSET_COMMIT,
    REC_TXN_MARKER,
    REC_UNSUPPORTED,
    as_numpy,
)

if TYPE_CHECKING:
    from coordinator_core import ReplayItem


@functools.cache
def _fast(cls: type) -> Callable[[Sequence[Any]], Any]:
    """The core's slot-filling constructor for ``cls`` (generated once per class)."""

    return fast_constructor(cls)


# long: the per-row conversion binds every column once and runs one tight loop (no call per field)
def records_from_arrow(table: pa.Table, rows: Any = None) -> list[ReplayItem]:
    """Rebuild the core's ``LogRecord``s from replay-input rows, in the table's row order.

    Offset commits and group metadata are rebuilt from their decoded columns (the decode
    proved them equal to the core codec's values); unsupported and Kafka 4 group records are
    decoded by the core codec from their raw bytes (``modern=True``). ``rows`` (optional, a
    numpy index array): only these rows, in this order. Each kind reads only its own columns;
    members come from the flattened struct columns (no per-member dicts).
    """
    import numpy as np

    if rows is None:
        rows = np.arange(table.num_rows)
    n = len(rows)
    if n == 0:
        return []
    # the whole table: every column read once, no ``take`` (small tables: the stream's calls)
    whole = n == table.num_rows and bool(rows[0] == 0 and np.all(np.diff(rows) == 1))
    take_all = None if whole else pa.array(rows)

    def col(name: str, at: Any = None) -> list[Any]:
        c = table.column(name)
        if at is not None:
            c = c.take(at)
        elif take_all is not None:
            c = c.take(take_all)
        return list(c.to_pylist())

    def of_kind(pos: Any) -> tuple[Any, list[int], Any]:
        """(take indices or None, per-kind column index per row, output index per row)."""
        out_idx = pos.tolist()
        if whole:
            return None, out_idx, out_idx
        return pa.array(rows[pos]), list(range(len(out_idx))), out_idx

    kinds_np = as_numpy(table.column("rec_kind"), REC_UNSUPPORTED)[rows]
    group = col("group_id")
    part = col("coordinator_partition")
    off = col("log_offset")
    ts = col("log_timestamp_ms")
    kver = col("key_version")
    tomb = col("is_tombstone")
    vver = col("value_version")
    out: list[Any] = [None] * n
    # slot-filling constructors of the core (``coordinator_core.codec.wire.fast_constructor``): the same
    # frozen dataclasses, about half the construction cost of their ``__init__``
    new_log = _fast(LogRecord)

    oc_pos = np.flatnonzero(kinds_np == REC_OFFSET_COMMIT)
    if len(oc_pos):
        at, src, dst = of_kind(oc_pos)
        topic, partition, coff, epoch, meta, cts, ets, pid = (
            col(name, at)
            for name in (
                "topic",
                "partition",
                "committed_offset",
                "leader_epoch",
                "metadata",
                "commit_timestamp_ms",
                "expire_timestamp_ms",
                "producer_id",
            )
        )
        keys: dict[tuple[Any, ...], OffsetCommitKey] = {}
        new_value = _fast(OffsetCommitValue)
        for j, i in zip(src, dst, strict=True):
            kk = (group[i], topic[j], partition[j], kver[i])
            key = keys.get(kk)
            if key is None:
                key = keys[kk] = OffsetCommitKey(group[i], topic[j], partition[j], kver[i])
            value: Any = None
            if not tomb[i]:
                value = new_value((coff[j], meta[j], cts[j], epoch[j], ets[j], vver[i], ()))
            out[i] = new_log((part[i], off[i], ts[i], key, value, pid[j]))

    gm_pos = np.flatnonzero(kinds_np == REC_GROUP_METADATA)
    if len(gm_pos):
        at, src, dst = of_kind(gm_pos)
        ptype, gen, proto, leader, csts = (
            col(name, at)
            for name in ("protocol_type", "generation", "protocol", "leader", "current_state_timestamp_ms")
        )
        lists = table.column("members") if at is None else table.column("members").take(at)
        lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
        counts = as_numpy(pc.list_value_length(lists), 0).astype(np.int64)
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        flat = lists.flatten()
        new_member = _fast(MemberMetadata)
        fields = (
            [
                flat.field(name).to_pylist()
                for name in (
                    "member_id",
                    "client_id",
                    "client_host",
                    "session_timeout",
                    "subscription",
                    "assignment",
                    "rebalance_timeout",
                    "group_instance_id",
                )
            ]
            if len(flat)
            else []
        )
        # fast_constructor fills every slot: the (empty) tagged fields come last
        members_all = [new_member((*f, ())) for f in zip(*fields, strict=True)] if fields else []
        gkeys: dict[tuple[Any, ...], GroupMetadataKey] = {}
        for j, i in zip(src, dst, strict=True):
            gk = (group[i], kver[i])
            gkey = gkeys.get(gk)
            if gkey is None:
                gkey = gkeys[gk] = GroupMetadataKey(group[i], kver[i])
            gvalue = None
            if not tomb[i]:
                gvalue = GroupMetadataValue(
                    ptype[j],
                    gen[j],
                    proto[j],
                    leader[j],
                    tuple(members_all[bounds[j] : bounds[j + 1]]),
                    csts[j],
                    vver[i],
                )
            out[i] = LogRecord(part[i], off[i], ts[i], gkey, gvalue)

    tm_pos = np.flatnonzero(kinds_np == REC_TXN_MARKER)
    if len(tm_pos):
        at, src, dst = of_kind(tm_pos)
        mpid, committed = col("producer_id", at), col("txn_committed", at)
        for j, i in zip(src, dst, strict=True):
            out[i] = TxnMarker(part[i], off[i], ts[i], mpid[j], bool(committed[j]))

    un_pos = np.flatnonzero(
        (kinds_np != REC_OFFSET_COMMIT) & (kinds_np != REC_GROUP_METADATA) & (kinds_np != REC_TXN_MARKER)
    )
    if len(un_pos):
        at, src, dst = of_kind(un_pos)
        rkey, rval = col("raw_key", at), col("raw_value", at)
        for j, i in zip(src, dst, strict=True):
            rec = decode_record(rkey[j], rval[j], modern=True)
            out[i] = LogRecord(part[i], off[i], ts[i], rec.key, rec.value)
    return out
