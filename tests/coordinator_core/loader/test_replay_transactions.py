"""Transactional offset commits (KIP-98) in the replay: Kafka's scenarios.

Facts from Kafka 4's ``OffsetMetadataManager`` (``replay`` with a producer id,
``replayEndTransactionMarker``, ``cleanupExpiredOffsets``, ``deleteAllOffsets``) and its
``OffsetMetadataManagerTest`` (``testReplayTransactionEndMarkerWithCommit``/``WithAbort``/
``KeepsTheMostRecentCommittedOffset``/``WithNonExistingTransaction``,
``testCleanupExpiredOffsetsWithPendingTransactionalOffsets``), and Kafka 3's loader
(``GroupMetadataManager.doLoadGroupsAndOffsets``, ``GroupMetadata.hasOffsets``).
"""

from __future__ import annotations

from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    ReplayItem,
    TxnMarker,
)
from coordinator_core.loader.commit_runs import compress_commit_runs
from coordinator_core.loader.replay import replay, replay_groups, replay_runs
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.settings import Coordinator, ReplaySettings
from coordinator_core.state import GroupState
from tests.coordinator_core.stored import stored

T0 = 1_700_000_000_000
PID = 4242


class TxnLog:
    """One ``__consumer_offsets`` partition's records and markers, in log order."""

    def __init__(self, partition: int = 7, first_offset: int = 100) -> None:
        self.partition = partition
        self.next_offset = first_offset
        self.now = T0
        self.items: list[ReplayItem] = []

    def _pos(self, at: int | None) -> tuple[int, int]:
        if at is not None:
            self.now = at
        off = self.next_offset
        self.next_offset += 1
        return off, self.now

    def commit(
        self, topic: str, part: int, offset: int, *, group: str = "g", pid: int | None = None, at: int | None = None
    ) -> None:
        off, ts = self._pos(at)
        value = OffsetCommitValue(offset, "", ts, None, None, 3)
        self.items.append(LogRecord(self.partition, off, ts, OffsetCommitKey(group, topic, part), value, pid))

    def tombstone(self, topic: str, part: int, *, group: str = "g", at: int | None = None) -> None:
        off, ts = self._pos(at)
        self.items.append(LogRecord(self.partition, off, ts, OffsetCommitKey(group, topic, part), None))

    def new_group(self, *, group: str = "g", at: int | None = None) -> None:
        """Kafka 4's empty-group record at a classic group's creation (generation 0)."""
        off, ts = self._pos(at)
        value = GroupMetadataValue("consumer", 0, None, None, (), ts)
        self.items.append(LogRecord(self.partition, off, ts, GroupMetadataKey(group), value))

    def group_tombstone(self, *, group: str = "g", at: int | None = None) -> None:
        off, ts = self._pos(at)
        self.items.append(LogRecord(self.partition, off, ts, GroupMetadataKey(group), None))

    def marker(self, committed: bool, *, pid: int = PID, at: int | None = None) -> None:
        off, ts = self._pos(at)
        self.items.append(TxnMarker(self.partition, off, ts, pid, committed))


def _offsets(snap: object) -> dict[tuple[str, int], int]:
    return {tp: e[0].offset for tp, e in snap.offsets.items()}  # type: ignore[attr-defined]


def test_transactional_commit_is_pending_until_the_commit_marker_then_applies() -> None:
    log = TxnLog()
    log.commit("t", 0, 10)
    log.commit("t", 0, 20, pid=PID)
    log.commit("t", 1, 7, pid=PID)
    before = replay(new_snapshot("g"), log.items).snapshot
    assert _offsets(before) == {("t", 0): 10}  # not visible while pending
    assert before.pending_transactional_offsets == 2
    log.marker(True)
    after = replay(new_snapshot("g"), log.items).snapshot
    assert _offsets(after) == {("t", 0): 20, ("t", 1): 7}
    assert not after.pending_txn
    assert [r["transactional_producer_id"] for r in after.offset_rows()] == [PID, PID]
    assert after.records_applied == 3  # the marker is no record of the group


def test_aborted_transaction_offsets_are_dropped() -> None:
    log = TxnLog()
    log.commit("t", 0, 10)
    log.commit("t", 0, 20, pid=PID)
    log.commit("t", 1, 7, pid=PID)
    log.marker(False)
    snap = replay(new_snapshot("g"), log.items).snapshot
    assert _offsets(snap) == {("t", 0): 10}
    assert not snap.pending_txn
    assert [r["transactional_producer_id"] for r in snap.offset_rows()] == [None]


def test_pending_offset_blocks_expiry_of_its_partition_and_the_group_death_under_kafka_4() -> None:
    log = TxnLog()
    log.new_group()  # Kafka 4 wrote this log
    log.commit("t", 0, 10, at=T0 + 10)
    log.commit("t", 1, 11, at=T0 + 10)
    log.commit("t", 0, 12, pid=PID, at=T0 + 20)
    settings = ReplaySettings(retention_ms=1_000, cleanup_interval_ms=10_000)  # window passed by as_of
    snap = replay(new_snapshot("g"), log.items, settings=settings, as_of_ms=T0 + 60_000).snapshot
    # t-1 expires, t-0 waits for its transaction; the group stays (an open transaction)
    assert _offsets(snap) == {("t", 0): 10}
    assert snap.exists and snap.state is GroupState.EMPTY
    log.marker(False, at=T0 + 70_000)
    later = replay(new_snapshot("g"), log.items, settings=settings, as_of_ms=T0 + 200_000).snapshot
    assert _offsets(later) == {}
    assert not later.exists  # nothing pending any more: the Empty group dies


def test_kafka_3_expires_the_offset_of_a_pending_partition_but_keeps_the_group() -> None:
    log = TxnLog()
    log.commit("t", 0, 10, at=T0 + 10)
    log.commit("t", 0, 12, pid=PID, at=T0 + 20)
    settings = ReplaySettings(retention_ms=1_000, coordinator=Coordinator.OLD, cleanup_interval_ms=10_000)
    snap = replay(new_snapshot("g"), log.items, settings=settings, as_of_ms=T0 + 60_000).snapshot
    assert _offsets(snap) == {}  # getExpiredOffsets skips only in-flight plain commits
    assert snap.exists  # hasOffsets counts pendingTransactionalOffsetCommits
    assert snap.pending_transactional_offsets == 1


def test_plain_commit_during_an_open_transaction_is_visible_and_the_newer_write_wins() -> None:
    log = TxnLog()
    log.commit("t", 0, 20, pid=PID)  # record offset 100
    log.commit("t", 0, 30)  # record offset 101: written later
    assert _offsets(replay(new_snapshot("g"), log.items).snapshot) == {("t", 0): 30}
    log.marker(True)
    snap = replay(new_snapshot("g"), log.items).snapshot
    assert _offsets(snap) == {("t", 0): 30}  # the commit marker keeps the most recent offset
    assert snap.offset_rows()[0]["transactional_producer_id"] is None
    # the other order: the transaction's offset is the newer write and replaces the plain one
    log2 = TxnLog()
    log2.commit("t", 0, 30)
    log2.commit("t", 0, 20, pid=PID)
    log2.marker(True)
    assert _offsets(replay(new_snapshot("g"), log2.items).snapshot) == {("t", 0): 20}


def test_marker_of_a_producer_with_nothing_pending_changes_nothing() -> None:
    log = TxnLog()
    log.commit("t", 0, 10)
    log.commit("t", 1, 5, pid=PID)
    base = replay(new_snapshot("g"), log.items).snapshot
    log.marker(True, pid=PID + 1)
    log.marker(False, pid=PID + 2)
    res = replay(base, log.items[2:])
    assert res.events == []
    assert res.snapshot.offsets == base.offsets and res.snapshot.pending_txn == base.pending_txn
    assert res.snapshot.records_applied == base.records_applied
    assert res.stats.txn_markers == 2 and res.stats.transactions_committed == 0


def test_group_deleted_while_pending_drops_the_pending_offsets_under_kafka_4() -> None:
    log = TxnLog()
    log.new_group()
    log.commit("t", 0, 10)
    log.commit("t", 1, 7, pid=PID)
    # DeleteGroups (deleteAllOffsets): tombstones for held and pending-only partitions, then the group's
    log.tombstone("t", 0, at=T0 + 100)
    log.tombstone("t", 1, at=T0 + 100)
    log.group_tombstone(at=T0 + 100)
    log.marker(True, at=T0 + 200)
    snap = replay(new_snapshot("g"), log.items).snapshot
    assert not snap.exists and _offsets(snap) == {} and not snap.pending_txn


def test_kafka_3_loader_keeps_pending_offsets_a_plain_tombstone_does_not_name() -> None:
    log = TxnLog()
    log.commit("t", 1, 7, pid=PID)
    log.tombstone("t", 1, at=T0 + 100)
    log.marker(True, at=T0 + 200)
    snap = replay(new_snapshot("g"), log.items, settings=ReplaySettings(coordinator=Coordinator.OLD)).snapshot
    assert _offsets(snap) == {("t", 1): 7}  # the loader's pendingOffsets survive a plain tombstone


def test_a_marker_applies_to_every_group_of_its_partition_with_offsets_of_its_producer() -> None:
    log = TxnLog(partition=7)
    log.commit("t", 0, 1, group="a", pid=PID)
    log.commit("t", 0, 2, group="b", pid=PID)
    log.commit("t", 0, 3, group="c", pid=PID + 1)
    other = TxnLog(partition=8, first_offset=500)
    other.commit("t", 0, 4, group="d", pid=PID)
    log.marker(True)
    out = replay_groups([*log.items, *other.items])
    assert _offsets(out["a"].snapshot) == {("t", 0): 1}
    assert _offsets(out["b"].snapshot) == {("t", 0): 2}
    assert _offsets(out["c"].snapshot) == {} and out["c"].snapshot.pending_transactional_offsets == 1
    assert _offsets(out["d"].snapshot) == {}  # another partition's marker is not its own


def test_pending_and_transactional_offsets_survive_the_snapshot_bytes_and_resume() -> None:
    log = TxnLog()
    log.commit("t", 0, 10, pid=PID)
    log.marker(True)
    log.commit("t", 1, 11, pid=PID + 1)
    mid = replay(new_snapshot("g"), log.items).snapshot
    back = stored(mid)
    assert back == mid
    log.marker(True, pid=PID + 1)
    assert replay(back, log.items).snapshot == replay(new_snapshot("g"), log.items).snapshot
    assert _offsets(replay(back, log.items).snapshot) == {("t", 0): 10, ("t", 1): 11}


def test_bulk_path_splits_commit_runs_at_transactional_records_and_equals_the_full_replay() -> None:
    log = TxnLog()
    for i in range(20):
        log.commit("t", i % 3, 100 + i)
    log.commit("t", 0, 500, pid=PID)
    for i in range(20):
        log.commit("t", i % 3, 200 + i)  # plain commits while the transaction is open
    log.marker(True)
    log.commit("t", 4, 9, pid=PID)
    for i in range(10):
        log.commit("t", 5, 300 + i)
    log.marker(False)
    settings = ReplaySettings(retention_ms=10**9)
    full = replay(new_snapshot("g"), log.items, settings=settings, event_kinds=())
    items = compress_commit_runs(log.items)
    bulk = replay_runs(new_snapshot("g"), items, settings=settings, event_kinds=())
    assert bulk.snapshot == full.snapshot
    assert _offsets(full.snapshot)[("t", 0)] == 218  # the plain commit written after the txn's wins
    assert ("t", 4) not in full.snapshot.offsets


def test_transaction_fate_is_the_first_marker_of_its_producer_after_it_in_its_partition() -> None:
    from coordinator_core.loader.transactions import TxnFate, transaction_fates

    log = TxnLog(partition=7, first_offset=0)
    log.marker(True)  # 0: before any record of PID: closes nothing
    log.commit("t", 0, 1, group="a", pid=PID)  # 1: committed at 5
    log.commit("t", 0, 2, group="b", pid=PID + 1)  # 2: aborted at 4
    log.commit("t", 1, 3, group="b", pid=PID)  # 3: committed at 5 (another group, same producer)
    log.marker(False, pid=PID + 1)  # 4
    log.marker(True)  # 5
    log.commit("t", 0, 4, group="a", pid=PID)  # 6: the producer's next transaction: aborted at 7
    log.marker(False)  # 7
    log.commit("t", 0, 5, group="a", pid=PID)  # 8: open
    other = TxnLog(partition=9, first_offset=0)
    other.commit("t", 0, 6, group="c", pid=PID + 1)  # 0: open: partition 7's markers do not close it
    items = log.items + other.items
    records = [(r.partition, r.offset, r.producer_id) for r in items if isinstance(r, LogRecord) and r.producer_id]
    markers = [m for m in items if isinstance(m, TxnMarker)]
    assert transaction_fates(records, reversed(markers)) == {
        (7, 1): TxnFate(True, 5),
        (7, 2): TxnFate(False, 4),
        (7, 3): TxnFate(True, 5),
        (7, 6): TxnFate(False, 7),
        (7, 8): TxnFate(None, None),
        (9, 0): TxnFate(None, None),
    }
    # the replay agrees: the committed ones are the current offsets their producer committed, the
    # open ones still pending
    out = replay_groups(items)
    assert _offsets(out["a"].snapshot) == {("t", 0): 1} and _offsets(out["b"].snapshot) == {("t", 1): 3}
    assert out["a"].snapshot.pending_transactional_offsets == 1
    assert out["c"].snapshot.pending_transactional_offsets == 1
