"""Transactional offset commits (KIP-98): pending until their producer's COMMIT marker.

Rules (Kafka 4: ``OffsetMetadataManager.replay`` with a producer id, ``replayEndTransactionMarker``,
``cleanupExpiredOffsets``; Kafka 3: ``GroupMetadataManager.doLoadGroupsAndOffsets``' ``pendingOffsets``,
``GroupMetadata.hasOffsets``):
- A commit in a transactional batch (``LogRecord.producer_id`` set) is pending under its producer,
  not visible. A commit into a group that does not exist creates the simple group at once (Kafka 4
  does so before looking at the producer id; Kafka 3's loader makes a group for offsets, pending
  ones included, that have none).
- COMMIT moves the producer's pending offsets into the group, each unless the offset held was
  written later in the log (Kafka 4 compares record offsets, Kafka 3's ``olderThan`` batch offsets:
  the newest write wins); ABORT drops them; a marker of a producer with nothing pending changes
  nothing. The producer of each offset a COMMIT made is kept (``txn_offsets``) until a plain commit
  or a tombstone replaces it.
- An offset tombstone drops the partition's pending offsets under Kafka 4 (``replay`` with a null
  value; ``deleteAllOffsets`` relies on it when a group is deleted). Kafka 3's loader keeps them
  (a plain tombstone touches only ``loadedOffsets``); a transactional tombstone removes its
  producer's pending offset only.
- While a group holds pending offsets it does not die; under Kafka 4 the partition's held offset
  does not expire either (``coordinator_core.expiry``).
- What became of a transactional record (``transaction_fates``): a marker completes every
  pending offset of its producer in its partition, whatever the group (``replayEndTransactionMarker``
  walks the producer's pending groups), so a record's transaction is closed by the first
  COMMIT/ABORT marker of its producer in its partition at a higher offset; none: still open at the
  end of the log. That is the transaction's fate, not the offset's: a committed offset still loses
  to a later-written one, and a Kafka 4 tombstone drops it while pending (the replay decides).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from coordinator_core.codec.records import OffsetCommitValue, TxnMarker
from coordinator_core.events import OffsetCommitted
from coordinator_core.loader.group_fold import GroupFold
from coordinator_core.loader.record_handlers import offset_created_group
from coordinator_core.loader.snapshot import TopicPartition
from coordinator_core.state import GroupState

_D = GroupState.DEAD


def apply_txn_offset_commit(
    w: GroupFold, tp: TopicPartition, value: OffsetCommitValue, ts: int, part: int, off: int, producer_id: int
) -> None:
    """A transactional offset commit: pending under its producer until the COMMIT marker."""
    if not w.exists or w.state is _D:
        # Kafka 4 creates the simple group before looking at the producer id; Kafka 3's loader
        # creates a group for offsets (pending ones included) that have none
        offset_created_group(w, ts, (part, off))
        w.invalidate_expiry()
    pending = w.pending_txn.get(producer_id)
    if pending is None:
        pending = w.pending_txn[producer_id] = {}
    pending[tp] = (value, part, off, ts)
    w.stats.transactional_commits += 1


def apply_txn_marker(w: GroupFold, m: TxnMarker) -> None:
    """A COMMIT or ABORT marker: the producer's pending offsets become the group's (COMMIT, each
    unless a later-written offset is held) or are dropped (ABORT)."""
    pending = w.pending_txn.pop(m.producer_id, None)
    if pending is None:
        return  # nothing pending of this producer (Kafka 4: "Ignoring it")
    w.stats.transactions_committed += m.committed
    w.stats.transactions_aborted += not m.committed
    if m.committed:
        offsets = w.offsets
        for tp, entry in sorted(pending.items(), key=lambda kv: kv[1][2]):
            held = offsets.get(tp)
            if held is not None and held[2] >= entry[2]:
                continue  # a later plain commit wins (the log's newest write)
            if not w.exists or w.state is _D:
                offset_created_group(w, m.timestamp_ms, m.position)
            if w.commit_events:
                w.events.append(
                    OffsetCommitted(
                        w.group_id,
                        tp[0],
                        tp[1],
                        entry[0],
                        None if held is None else held[0],
                        entry[3],
                        entry[1],
                        entry[2],
                    )
                )
            offsets[tp] = entry
            w.txn_offsets[tp] = m.producer_id
            w.settled.pop(tp, None)
    w.invalidate_expiry()


def drop_pending(w: GroupFold, tp: TopicPartition, producer_id: int | None = None) -> None:
    """Remove the pending transactional offsets of ``tp`` (of one producer, or of all)."""
    for pid in [producer_id] if producer_id is not None else list(w.pending_txn):
        pending = w.pending_txn.get(pid)
        if pending is not None and pending.pop(tp, None) is not None and not pending:
            del w.pending_txn[pid]  # nothing left: the transaction no longer holds the group
    w.invalidate_expiry()


@dataclass(frozen=True, slots=True)
class TxnFate:
    """The transaction of a transactional record: ``committed`` True (COMMIT), False (ABORT) or
    None (open: no marker of its producer after it in its partition); ``marker_offset`` is the
    closing marker's offset (None when open)."""

    committed: bool | None
    marker_offset: int | None


def transaction_fates(
    records: Iterable[tuple[int, int, int]], markers: Iterable[TxnMarker]
) -> dict[tuple[int, int], TxnFate]:
    """(partition, offset) -> ``TxnFate`` of each transactional record ``(partition, offset,
    producer_id)``: closed by the first marker of its producer in its partition at a higher
    offset (module rules)."""
    by_producer: dict[tuple[int, int], list[tuple[int, bool]]] = {}
    for m in markers:
        by_producer.setdefault((m.partition, m.producer_id), []).append((m.offset, m.committed))
    open_ = TxnFate(None, None)
    # per (partition, producer): its markers' offsets, and the fate each closes (one object per
    # marker, shared by its records), the last entry: open
    closing: dict[tuple[int, int], tuple[list[int], list[TxnFate]]] = {}
    for k, ms in by_producer.items():
        ms.sort()
        closing[k] = ([o for o, _ in ms], [TxnFate(c, o) for o, c in ms] + [open_])
    out: dict[tuple[int, int], TxnFate] = {}
    for part, off, pid in records:
        at = closing.get((part, pid))
        out[(part, off)] = open_ if at is None else at[1][bisect_right(at[0], off)]
    return out
