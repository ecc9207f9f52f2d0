"""Share groups' (KIP-932) and streams groups' (KIP-1071) records written the way Kafka 4's
coordinator writes them, as broker bytes.

Every record is built from ``coordinator_core.codec.modern_records`` values, encoded to the bytes a
broker writes (``codec.encode_record``, byte-exact to Kafka 4.4's vectors) and decoded back
(``decode_record(..., modern=True)``), so the tests fold bytes. The scenario methods write the
record sequences ``GroupMetadataManager`` writes (``shareGroupHeartbeat``,
``shareGroupFenceMember``, ``streamsGroupHeartbeat``, ``streamsGroupFenceMember``,
``{Share,Streams}Group.createGroupTombstoneRecords``), as ``GroupMetadataManagerTest`` asserts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator_core.codec.modern_records import (
    Endpoint,
    GroupKey,
    GroupMemberKey,
    KeyValue,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicInfo,
    TopicPartitionsInfo,
)
from coordinator_core.codec.records import LogRecord
from coordinator_core.modern.share.model import deletion_records as share_deletion
from coordinator_core.simulator.consumer_group_writer import topic_id_for as topic_id
from coordinator_core.streams.model import deletion_records as streams_deletion
from tests.coordinator_core.consumer_group_log import T0, ConsumerGroupLog, Parts, tps

#: streams MemberState ids (``streams.MemberState``)
S_STABLE, S_UNREVOKED = 1, 2
#: tasks of one role: subtopology id -> partitions
TaskMap = Mapping[str, Sequence[int]]


def tasks(m: TaskMap | None) -> tuple[TaskIds, ...]:
    return tuple(TaskIds(s, tuple(ps)) for s, ps in sorted((m or {}).items()))


class ShareGroupLog(ConsumerGroupLog):
    """One share group's records in log order."""

    def __init__(self, group: str = "sg", *, t0: int = T0, partition: int = 0) -> None:
        super().__init__(group, t0=t0, partition=partition)

    def member(self, member_id: str, topics: Sequence[str] = (), **_: object) -> LogRecord:  # type: ignore[override]
        return self.add(
            GroupMemberKey(self.group, member_id, 10),
            ShareGroupMemberMetadataValue(None, f"client-{member_id}", "/10.0.0.9", tuple(topics)),
        )

    def member_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 10), None)

    def group_epoch(self, epoch: int, metadata_hash: int = 0) -> LogRecord:
        self.epoch = epoch
        return self.add(GroupKey(self.group, 11), ShareGroupMetadataValue(epoch, metadata_hash))

    def target(self, member_id: str, parts: Parts) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 13), ShareGroupTargetAssignmentMemberValue(tps(parts)))

    def target_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 13), None)

    def target_epoch(self, epoch: int) -> LogRecord:
        return self.add(GroupKey(self.group, 12), ShareGroupTargetAssignmentMetadataValue(epoch))

    def current(self, member_id: str, epoch: int, parts: Parts, previous: int | None = None, **_: object) -> LogRecord:  # type: ignore[override]
        prev = epoch - 1 if previous is None else previous
        return self.add(
            GroupMemberKey(self.group, member_id, 14),
            ShareGroupCurrentMemberAssignmentValue(epoch, prev, 0, tps(parts)),
        )

    def current_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 14), None)

    def state_metadata(self, initialized: Mapping[str, Sequence[int]]) -> LogRecord:
        return self.add(
            GroupKey(self.group, 15),
            ShareGroupStatePartitionMetadataValue(
                (), tuple(TopicPartitionsInfo(topic_id(t), t, tuple(ps)) for t, ps in sorted(initialized.items())), ()
            ),
        )

    # -- scenarios ---------------------------------------------------------------------------
    def join(self, member_id: str, topics: Sequence[str], targets: Mapping[str, Parts]) -> list[LogRecord]:
        """``shareGroupHeartbeat`` of a new member: its subscription, the epoch bump, the new
        target assignment, the member's current assignment (one write)."""
        mark = len(self.records)
        self.batch()
        self.member(member_id, topics)
        epoch = self.epoch + 1
        self.group_epoch(epoch)
        for mid, parts in sorted(targets.items()):
            self.target(mid, parts)
        self.target_epoch(epoch)
        self.current(member_id, epoch, targets.get(member_id, {}), previous=0)
        return self.since(mark)

    def assign(self, targets: Mapping[str, Parts]) -> list[LogRecord]:
        """The next heartbeat after a bump: the new target assignment of the current epoch."""
        mark = len(self.records)
        self.batch()
        for mid, parts in sorted(targets.items()):
            self.target(mid, parts)
        self.target_epoch(self.epoch)
        return self.since(mark)

    def heartbeat(self, member_id: str, parts: Parts) -> list[LogRecord]:
        """A member's heartbeat picking up the target assignment of the current epoch."""
        mark = len(self.records)
        self.batch()
        self.current(member_id, self.epoch, parts)
        return self.since(mark)

    def leave(self, member_id: str) -> list[LogRecord]:
        """``shareGroupFenceMember``: the member's three tombstones, then the epoch bump."""
        mark = len(self.records)
        self.batch()
        self.current_tombstone(member_id)
        self.target_tombstone(member_id)
        self.member_tombstone(member_id)
        self.group_epoch(self.epoch + 1)
        return self.since(mark)

    def delete(self, member_ids: Sequence[str] = ()) -> list[LogRecord]:
        """DeleteGroups: ``ShareGroup.createGroupTombstoneRecords``."""
        self.batch()
        return [self.add(r.key, r.value) for r in share_deletion(self.group, member_ids)]


class StreamsGroupLog(ConsumerGroupLog):
    """One streams group's records in log order."""

    def __init__(self, group: str = "app", *, t0: int = T0, partition: int = 0) -> None:
        super().__init__(group, t0=t0, partition=partition)

    def topology(self, epoch: int = 0) -> LogRecord:
        """Two subtopologies: 0 reads ``input`` and writes the repartition topic, 1 reads it
        and keeps a store (changelog)."""
        rep = f"{self.group}-KSTREAM-REPARTITION-repartition"
        return self.add(
            GroupKey(self.group, 23),
            StreamsGroupTopologyValue(
                epoch,
                (
                    Subtopology("0", ("input",), (), (), (rep,), (), ()),
                    Subtopology(
                        "1",
                        (),
                        (),
                        (TopicInfo(f"{self.group}-store-changelog", 0, 0, ()),),
                        (),
                        (TopicInfo(rep, 0, 0, ()),),
                        (),
                    ),
                ),
            ),
        )

    def topology_tombstone(self) -> LogRecord:
        return self.add(GroupKey(self.group, 23), None)

    def member(
        self, member_id: str, topics: Sequence[str] = (), *, instance: str | None = None, process: str = "", **_: object
    ) -> LogRecord:  # type: ignore[override]
        return self.add(
            GroupMemberKey(self.group, member_id, 19),
            StreamsGroupMemberMetadataValue(
                instance,
                None,
                f"{self.group}-{member_id}-StreamThread-1-consumer",
                "/10.0.0.5",
                0,
                process or f"process-{member_id}",
                Endpoint("localhost", 7070),
                (KeyValue("zone", "a"),),
                30_000,
            ),
        )

    def member_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 19), None)

    def group_epoch(self, epoch: int, metadata_hash: int = 0, validated: int | None = 0) -> LogRecord:  # type: ignore[override]
        self.epoch = epoch
        return self.add(GroupKey(self.group, 17), StreamsGroupMetadataValue(epoch, metadata_hash, validated))

    def target(  # type: ignore[override]
        self, member_id: str, active: TaskMap, standby: TaskMap | None = None, warmup: TaskMap | None = None
    ) -> LogRecord:
        return self.add(
            GroupMemberKey(self.group, member_id, 21),
            StreamsGroupTargetAssignmentMemberValue(tasks(active), tasks(standby), tasks(warmup)),
        )

    def target_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 21), None)

    def target_epoch(self, epoch: int) -> LogRecord:
        return self.add(GroupKey(self.group, 20), StreamsGroupTargetAssignmentMetadataValue(epoch))

    def current(  # type: ignore[override]
        self,
        member_id: str,
        epoch: int,
        active: TaskMap,
        *,
        previous: int | None = None,
        standby: TaskMap | None = None,
        warmup: TaskMap | None = None,
        state: int = S_STABLE,
        pending: TaskMap | None = None,
    ) -> LogRecord:
        prev = epoch - 1 if previous is None else previous
        return self.add(
            GroupMemberKey(self.group, member_id, 22),
            StreamsGroupCurrentMemberAssignmentValue(
                epoch, prev, state, tasks(active), tasks(standby), tasks(warmup), tasks(pending), (), ()
            ),
        )

    def current_tombstone(self, member_id: str) -> LogRecord:
        return self.add(GroupMemberKey(self.group, member_id, 22), None)

    # -- scenarios ---------------------------------------------------------------------------
    def join(
        self,
        member_id: str,
        targets: Mapping[str, TaskMap],
        *,
        first: bool = False,
        standby: Mapping[str, TaskMap] | None = None,
    ) -> list[LogRecord]:
        """``streamsGroupHeartbeat`` of a new member: (the topology, for a new group,) its
        metadata, the epoch bump, the new target assignment, its current assignment."""
        mark = len(self.records)
        self.batch()
        if first:
            self.topology()
        self.member(member_id)
        epoch = self.epoch + 1
        self.group_epoch(epoch)
        for mid, active in sorted(targets.items()):
            self.target(mid, active, (standby or {}).get(mid))
        self.target_epoch(epoch)
        self.current(member_id, epoch, targets.get(member_id, {}), previous=0, standby=(standby or {}).get(member_id))
        return self.since(mark)

    def leave(self, member_id: str) -> list[LogRecord]:
        """``streamsGroupFenceMember``: the member's three tombstones, then the epoch bump."""
        mark = len(self.records)
        self.batch()
        self.current_tombstone(member_id)
        self.target_tombstone(member_id)
        self.member_tombstone(member_id)
        self.group_epoch(self.epoch + 1)
        return self.since(mark)

    def delete(self, member_ids: Sequence[str] = ()) -> list[LogRecord]:
        """``StreamsGroup.createGroupTombstoneRecords`` (DeleteGroups, or the cleanup)."""
        self.batch()
        return [self.add(r.key, r.value) for r in streams_deletion(self.group, member_ids)]
