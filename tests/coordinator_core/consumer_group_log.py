"""A consumer group's (KIP-848) records written the way Kafka 4's coordinator writes them.

Every record is built from ``coordinator_core.codec.modern_records`` values, encoded to the bytes a
broker writes (``codec.encode_record``) and decoded back (``decode_record(..., modern=True)``),
so the tests fold bytes, not hand-made objects. ``ConsumerGroupLog`` hands out consecutive log
offsets in one ``__consumer_offsets`` partition; records appended between ``batch()`` calls
share one timestamp, as one coordinator write does.

The scenario methods (``join``, ``leave``, ...) write the record sequences that
``GroupMetadataManagerTest`` asserts (cited per method).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator_core.codec.consumer_protocol import encode_assignment, encode_subscription
from coordinator_core.codec.modern_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupKey,
    GroupMemberKey,
    PartitionMetadata,
    RegularExpressionKey,
    TopicIdPartitions,
    TopicMetadata,
)
from coordinator_core.codec.record_codec import decode_record, encode_record
from coordinator_core.codec.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    RecordValue,
    Subscription,
    TopicPartitions,
)
from coordinator_core.simulator.consumer_group_writer import topic_id_for as topic_id

T0 = 1_760_000_000_000
STABLE, UNREVOKED, UNRELEASED = 0, 1, 2


Parts = Mapping[str, Sequence[int]]  # topic name -> partitions


def tps(parts: Parts | None) -> tuple[TopicIdPartitions, ...]:
    return tuple(TopicIdPartitions(topic_id(t), tuple(ps)) for t, ps in sorted((parts or {}).items()))


class ConsumerGroupLog:
    """One group's records in log order (partition 0 of ``__consumer_offsets``)."""

    def __init__(self, group: str = "cg", *, t0: int = T0, partition: int = 0) -> None:
        self.group = group
        self.now = t0
        self.partition = partition
        self.records: list[LogRecord] = []
        self.epoch = 0

    # -- plumbing ----------------------------------------------------------------------------
    def batch(self, advance_ms: int = 1_000) -> ConsumerGroupLog:
        """The next records are a new coordinator write, ``advance_ms`` later."""
        self.now += advance_ms
        return self

    def add(self, key: RecordKey, value: RecordValue | None) -> LogRecord:
        kb, vb = encode_record(Record(key, value))
        decoded = decode_record(kb, vb, modern=True)
        r = LogRecord(self.partition, len(self.records), self.now, decoded.key, decoded.value)
        self.records.append(r)
        return r

    def write(self, records: Sequence[Record], advance_ms: int = 1_000) -> list[LogRecord]:
        """One coordinator write (a ``ConsumerGroupWriter`` batch), as bytes, ``advance_ms`` later."""
        self.batch(advance_ms)
        return [self.add(r.key, r.value) for r in records]

    def since(self, mark: int) -> list[LogRecord]:
        return self.records[mark:]

    # -- one record each (GroupCoordinatorRecordHelpers) ---------------------------------------
    def member(
        self,
        member_id: str,
        topics: Sequence[str] = (),
        *,
        regex: str | None = None,
        instance: str | None = None,
        rack: str | None = None,
        assignor: str | None = "uniform",
        classic_protocols: Sequence[str] | None = None,
        rebalance_timeout_ms: int = 45_000,
    ) -> LogRecord:
        classic = None
        if classic_protocols is not None:
            sub = encode_subscription(Subscription(tuple(sorted(topics))))
            classic = ClassicMemberMetadata(10_000, tuple(ClassicProtocol(p, sub) for p in classic_protocols))
        return self.add(
            GroupMemberKey(self.group, member_id, 5),
            ConsumerGroupMemberMetadataValue(
                instance_id=instance,
                rack_id=rack,
                client_id=f"client-{member_id}",
                client_host="/10.0.0.7",
                subscribed_topic_names=tuple(topics),
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                rebalance_timeout_ms=rebalance_timeout_ms,
                classic_member_metadata=classic,
            ),
        )

    def member_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 5), None)

    def group_epoch(self, epoch: int, metadata_hash: int = 0) -> LogRecord:
        self.epoch = epoch
        return self.add(GroupKey(self.group, 3), ConsumerGroupMetadataValue(epoch, metadata_hash))

    def group_epoch_tombstone(self) -> LogRecord:
        return self.add(GroupKey(self.group, 3), None)

    def partition_metadata(self, topics: Mapping[str, int]) -> LogRecord:
        return self.add(
            GroupKey(self.group, 4),
            ConsumerGroupPartitionMetadataValue(
                tuple(
                    TopicMetadata(topic_id(t), t, n, tuple(PartitionMetadata(p, ()) for p in range(n)))
                    for t, n in sorted(topics.items())
                )
            ),
        )

    def partition_metadata_tombstone(self) -> LogRecord:
        return self.add(GroupKey(self.group, 4), None)

    def target(self, member_id: str, parts: Parts) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 7), ConsumerGroupTargetAssignmentMemberValue(tps(parts)))

    def target_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 7), None)

    def target_epoch(self, epoch: int) -> LogRecord:
        return self.add(GroupKey(self.group, 6), ConsumerGroupTargetAssignmentMetadataValue(epoch, self.now))

    def target_epoch_tombstone(self) -> LogRecord:
        return self.add(GroupKey(self.group, 6), None)

    def current(
        self,
        member_id: str,
        epoch: int,
        previous: int,
        parts: Parts | None = None,
        *,
        state: int = STABLE,
        revoking: Parts | None = None,
    ) -> LogRecord:
        return self.add(
            GroupMemberKey(self.group, member_id, 8),
            ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, tps(parts), tps(revoking)),
        )

    def current_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 8), None)

    def regex(self, regex: str, topics: Sequence[str], image_version: int = 7) -> LogRecord:
        return self.add(
            RegularExpressionKey(self.group, regex),
            ConsumerGroupRegularExpressionValue(tuple(topics), image_version, self.now),
        )

    def regex_tombstone(self, regex: str) -> LogRecord:
        return self.add(RegularExpressionKey(self.group, regex), None)

    def commit(self, topic: str, partition: int, offset: int) -> LogRecord:
        return self.add(OffsetCommitKey(self.group, topic, partition), OffsetCommitValue(offset, "", self.now))

    def classic_group(
        self,
        generation: int,
        members: Mapping[str, Parts],
        *,
        protocol: str = "range",
        protocol_type: str = "consumer",
        leader: str | None = None,
    ) -> LogRecord:
        ms = tuple(
            MemberMetadata(
                mid,
                f"client-{mid}",
                "/10.0.0.7",
                10_000,
                encode_subscription(Subscription(tuple(sorted(parts)))),
                encode_assignment(Assignment(tuple(TopicPartitions(t, tuple(ps)) for t, ps in sorted(parts.items())))),
                rebalance_timeout=45_000,
            )
            for mid, parts in sorted(members.items())
        )
        first = leader if leader is not None else (ms[0].member_id if ms else None)
        return self.add(
            GroupMetadataKey(self.group),
            GroupMetadataValue(protocol_type, generation, protocol if ms else None, first, ms, self.now),
        )

    def classic_tombstone(self) -> LogRecord:
        return self.add(GroupMetadataKey(self.group), None)

    # -- scenarios (the sequences GroupMetadataManagerTest asserts) ----------------------------
    def join_first(
        self,
        member_id: str,
        parts: Parts,
        *,
        topics: Sequence[str] | None = None,
        assignor: str = "uniform",
        partition_counts: Mapping[str, int] | None = None,
    ) -> list[LogRecord]:
        """``testMemberJoinsEmptyConsumerGroup``: member subscription, subscription metadata,
        epoch 1, target assignment, target epoch 1, current assignment (epoch 1, STABLE)."""
        mark = len(self.records)
        subscribed = list(topics if topics is not None else sorted(parts))
        self.member(member_id, subscribed, assignor=assignor)
        self.partition_metadata(partition_counts or {t: max(ps) + 1 for t, ps in parts.items()})
        self.group_epoch(1)
        self.target(member_id, parts)
        self.target_epoch(1)
        self.current(member_id, 1, 0, parts)
        return self.since(mark)

    def leave(self, member_id: str) -> list[LogRecord]:
        """``testLeavingMemberBumpsGroupEpoch``: the member's current assignment, target
        assignment and subscription tombstones, then the group epoch bump."""
        mark = len(self.records)
        self.current_tombstone(member_id)
        self.target_tombstone(member_id)
        self.member_tombstone(member_id)
        self.group_epoch(self.epoch + 1)
        return self.since(mark)


def kafka4_consumer_group_life(group: str = "cg", *, t0: int = T0) -> ConsumerGroupLog:
    """A Kafka 4 consumer group's log, bytes as a broker writes them, with its offset commits:
    a classic group (generation 3) upgraded online, a consumer-protocol member joining, both
    reconciled and committing (``orders`` subscribed, ``audit`` committed once and no longer
    subscribed), the classic-protocol member leaving, the rest reconciled and committing."""
    from coordinator_core.simulator.consumer_group_writer import ConsumerGroupWriter

    log = ConsumerGroupLog(group, t0=t0)
    w = ConsumerGroupWriter(group, {"orders": 4, "audit": 1})
    log.classic_group(3, {"c1": {"orders": range(4), "audit": [0]}})
    log.commit("audit", 0, 10)
    log.write(
        w.upgrade_from_classic(
            3, {"c1": (["orders", "audit"], frozenset({("orders", p) for p in range(4)} | {("audit", 0)}))}
        )
    )
    log.write(w.join("m2", ["orders"]))
    for b in w.reconcile():
        log.write(b)
    log.batch()
    for p in range(4):
        log.commit("orders", p, 100 + p)
    log.write(w.leave("c1"))
    for b in w.reconcile():
        log.write(b)
    log.batch(60_000)
    for p in range(4):
        log.commit("orders", p, 200 + p)
    return log
