"""A mixed Kafka 4 cluster's ``__consumer_offsets`` as raw records, for the job tests.

Classic groups (``test_replay_job.build_log``: consumer/connect/simple groups, tombstones, an
unsupported record type, a corrupt offset commit) plus Kafka 4 consumer groups written by
``coordinator_core.simulator.consumer_group_writer`` (encoded to the bytes a broker writes): one that
stays Stable with members, one converted online from classic (``kafka4_consumer_group_life``),
one that empties, one deleted; a share group and a streams group (folded: members, epochs, tasks);
and the Kafka 4 records that must not reach the replay: a consumer-group key that does not
parse, a corrupt consumer-group value (quarantine), a value version Kafka 4 cannot read
(unsupported). Every record is (key, value, partition, offset, timestamp_ms), in log order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coordinator_core import (
    GroupKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    encode_key,
    encode_value,
    partition_for,
)
from coordinator_core.simulator.consumer_group_writer import ConsumerGroupWriter
from tests.coordinator_core.consumer_group_log import kafka4_consumer_group_life
from tests.coordinator_core.modern_group_log import S_UNREVOKED, ShareGroupLog, StreamsGroupLog
from tests.pipelines.test_replay_job import BASE_MS, build_log

RawLog = list[tuple[bytes, bytes | None, int, int, int]]
HOUR = 3_600_000
#: the consumer groups of the mixed log, and what each must end as
CONSUMER_GROUPS = {"cg-orders": "Stable", "cg-converted": "Stable", "cg-empty": "Empty"}
DELETED_CONSUMER_GROUP = "cg-deleted"
SHARE_GROUP, STREAMS_GROUP = "share-app", "streams-app"


class _Writes:
    """Records stamped (timestamp, sequence): one coordinator write shares a timestamp."""

    def __init__(self) -> None:
        self.stamped: list[tuple[int, int, bytes, bytes | None, str]] = []

    def write(self, at: int, records: Sequence[Record]) -> None:
        for r in records:
            self.raw(at, encode_key(r.key), None if r.value is None else encode_value(r.value), r.key.group or "")

    def raw(self, at: int, key: bytes, value: bytes | None, group: str) -> None:
        self.stamped.append((at, len(self.stamped), key, value, group))

    def commit(self, at: int, group: str, topic: str, partition: int, offset: int) -> None:
        self.write(at, [Record(OffsetCommitKey(group, topic, partition), OffsetCommitValue(offset, "", at))])


def _consumer_groups(w: _Writes, t0: int) -> None:
    # a group that stays Stable: three members join, reconcile, commit; one leaves; the rest reconcile
    g = ConsumerGroupWriter("cg-orders", {"orders": 6, "payments": 2})
    t = t0
    for i, topics in enumerate((["orders"], ["orders", "payments"], ["orders"])):
        t += 2_000
        w.write(t, g.join(f"m{i}", topics))
        for batch in g.reconcile():
            t += 500
            w.write(t, batch)
    for p in range(6):
        t += 100
        w.commit(t, "cg-orders", "orders", p, 1_000 + p)
    t += 60_000
    w.write(t, g.leave("m1"))
    for batch in g.reconcile():
        t += 500
        w.write(t, batch)
    for p in range(6):
        t += 100
        w.commit(t, "cg-orders", "orders", p, 2_000 + p)
    # converted online from a classic group (classic generation 3 -> consumer), then reconciled
    for r in kafka4_consumer_group_life("cg-converted", t0=t0 + HOUR).records:
        w.write(r.timestamp_ms, [Record(r.key, r.value)])
    # one that empties (its offsets stay until they expire by commit time) and one deleted
    e = ConsumerGroupWriter("cg-empty", {"events": 2})
    w.write(t0 + 2 * HOUR, e.join("e1", ["events"]))
    for batch in e.reconcile():
        w.write(t0 + 2 * HOUR + 1_000, batch)
    w.commit(t0 + 2 * HOUR + 2_000, "cg-empty", "events", 0, 42)
    w.write(t0 + 2 * HOUR + 3_000, e.leave("e1"))
    d = ConsumerGroupWriter(DELETED_CONSUMER_GROUP, {"events": 1})
    w.write(t0 + 3 * HOUR, d.join("d1", ["events"]))
    w.write(t0 + 3 * HOUR + 1_000, d.leave("d1"))
    w.write(t0 + 3 * HOUR + 2_000, d.delete())


def _share_and_streams_groups(w: _Writes, t0: int) -> None:
    """A share group (KIP-932: two members, one leaves; no offsets in __consumer_offsets) and a
    streams group (KIP-1071: two processes, tasks revoked and moved, offsets committed), written
    as Kafka 4's coordinator writes them (``tests.coordinator_core.modern_group_log``)."""
    share = ShareGroupLog(SHARE_GROUP, t0=t0)
    share.join("s1", ["orders"], {"s1": {"orders": [0, 1, 2, 3]}})
    share.batch()
    share.state_metadata({"orders": [0, 1, 2, 3]})
    share.join("s2", ["orders"], {"s1": {"orders": [0, 1, 2]}, "s2": {"orders": [2, 3]}})
    share.heartbeat("s1", {"orders": [0, 1, 2]})
    share.leave("s1")
    share.assign({"s2": {"orders": [0, 1, 2, 3]}})
    share.heartbeat("s2", {"orders": [0, 1, 2, 3]})
    streams = StreamsGroupLog(STREAMS_GROUP, t0=t0 + 10_000)
    streams.join("a", {"a": {"0": [0, 1], "1": [0, 1]}}, first=True)
    streams.join("b", {"a": {"0": [0], "1": [0]}, "b": {"0": [1], "1": [1]}}, standby={"b": {"1": [0]}})
    streams.batch()
    streams.current("a", 2, {"0": [0], "1": [0]}, previous=1, state=S_UNREVOKED, pending={"0": [1], "1": [1]})
    streams.batch()
    streams.current("a", 2, {"0": [0], "1": [0]}, previous=1)
    for log in (share, streams):
        for r in log.records:
            w.write(r.timestamp_ms, [Record(r.key, r.value)])
    for p in range(2):
        w.commit(streams.now + 1_000, STREAMS_GROUP, "input", p, 100 + p)
    w.commit(streams.now + 1_000, STREAMS_GROUP, f"{STREAMS_GROUP}-KSTREAM-REPARTITION-repartition", 0, 7)


def _kafka4_odd_records(w: _Writes, t0: int) -> None:
    """Share and streams groups, and what must not reach the replay."""
    _share_and_streams_groups(w, t0)
    good_key = encode_key(GroupKey("cg-orders", 3))
    # a consumer-group key that does not parse (its GroupId length runs past the end)
    w.raw(t0 + 3_000, b"\x00\x05\x00\x40cg-orders", b"\x00\x00", "cg-orders")
    # a ConsumerGroupMetadata value cut short (no tagged-field section): corrupt
    w.raw(t0 + 3_000, good_key, b"\x00\x00\x00\x00\x00\x07", "cg-orders")
    # a value version Kafka 4 cannot read: unsupported, never folded
    w.raw(t0 + 3_000, good_key, b"\x00\x01\x00\x00\x00\x07\x00", "cg-orders")


def mixed_log(n_classic: int = 8, seed: int = 11) -> RawLog:
    """The mixed cluster's raw records, in log order (offsets consecutive per partition)."""
    w = _Writes()
    for key, value, _part, _off, ts in build_log(n_groups=n_classic, seed=seed):
        w.raw(ts, key, value, "")
    _consumer_groups(w, BASE_MS + 4 * HOUR)
    _kafka4_odd_records(w, BASE_MS + 5 * HOUR)
    # the classic records' partition is recomputed from their group: decode with the core
    from coordinator_core import CoordinatorError, decode_record

    next_offset: dict[int, int] = {}
    out: RawLog = []
    for ts, _seq, key, value, group in sorted(w.stamped):
        gid = group
        if not gid:
            try:
                rec: Any = decode_record(key, value, modern=True)
                gid = rec.key.group if rec.key.group is not None else "group-02"
            except CoordinatorError:
                gid = "group-02"
        part = partition_for(gid)
        off = next_offset.get(part, 0)
        next_offset[part] = off + 1
        out.append((key, value, part, off, ts))
    return out
