"""A share group's life (KIP-932) written as Kafka 4's coordinator writes it, for the generator
and tests: the caller decides who joins, heartbeats and leaves; each method returns the records
of one coordinator write, in Kafka's order.

Facts from apache/kafka's group-coordinator module (4.2): ``GroupMetadataManager.
shareGroupHeartbeat`` (subscription, epoch bump, then the target assignment of the changed
members and its epoch, then the member's current assignment), ``shareGroupFenceMember`` (the
member's current-assignment, target and subscription tombstones, then the epoch bump),
``ShareGroup.createGroupTombstoneRecords``, the share-partition state metadata written when the
group's topics are initialized in ``__share_group_state``.

Rules:
- ``join``: the member's ShareGroupMemberMetadata, ShareGroupMetadata (epoch + 1), the
  state-partition metadata when a subscribed topic's share state was not initialized yet, then
  what its heartbeat writes. ``leave``: 14, 13, 10 tombstones and ShareGroupMetadata (epoch + 1);
  the next heartbeat installs the new target.
- ``heartbeat(member)``: when the target assignment is behind the group epoch, the members whose
  target changed (13) then the target epoch (12); then the member's CurrentMemberAssignment (14)
  when its epoch or partitions differ from its target: a share member takes its target at once
  (nothing to revoke: a partition may be shared).
- The assignor stands in for Kafka's ``SimpleAssignor``: per topic, its subscribers in member-id
  order; with no more members than partitions each partition goes to one member (round robin),
  else each member gets one partition and partitions are shared.
- Topic ids are ``consumer_group_writer.topic_id_for``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator_core.codec.modern_records import (
    GroupKey,
    GroupMemberKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    TopicIdPartitions,
    TopicPartitionsInfo,
)
from coordinator_core.codec.records import Record
from coordinator_core.modern.share.model import deletion_records
from coordinator_core.simulator.consumer_group_writer import topic_id_for

Parts = dict[str, tuple[int, ...]]  # topic name -> partitions


class ShareGroupWriter:
    """One share group's records, Kafka's way (see the module rules)."""

    def __init__(self, group_id: str, topics: Mapping[str, int]) -> None:
        self.group_id = group_id
        self.topics = dict(topics)
        self.epoch = 0
        self.target_epoch = 0
        self.subscriptions: dict[str, tuple[str, ...]] = {}
        self.target: dict[str, Parts] = {}
        self.current: dict[str, tuple[int, Parts]] = {}
        self.initialized: set[str] = set()

    @property
    def state(self) -> str:
        return "Stable" if self.subscriptions else "Empty"

    def join(self, member_id: str, topics: Sequence[str], client_host: str = "/10.0.0.20") -> list[Record]:
        subs = tuple(sorted(set(topics)))
        self.subscriptions[member_id] = subs
        out = [
            Record(
                GroupMemberKey(self.group_id, member_id, 10),
                ShareGroupMemberMetadataValue(None, f"share-{member_id}", client_host, subs),
            ),
            self._bump(),
        ]
        new = sorted(t for t in subs if t not in self.initialized and t in self.topics)
        if new:
            self.initialized.update(new)
            infos = tuple(
                TopicPartitionsInfo(topic_id_for(t), t, tuple(range(self.topics[t]))) for t in sorted(self.initialized)
            )
            out.append(Record(GroupKey(self.group_id, 15), ShareGroupStatePartitionMetadataValue((), infos, ())))
        return out + self.heartbeat(member_id)

    def leave(self, member_id: str) -> list[Record]:
        g = self.group_id
        self.subscriptions.pop(member_id, None)
        self.target.pop(member_id, None)
        self.current.pop(member_id, None)
        return [
            Record(GroupMemberKey(g, member_id, 14), None),
            Record(GroupMemberKey(g, member_id, 13), None),
            Record(GroupMemberKey(g, member_id, 10), None),
            self._bump(),
        ]

    def heartbeat(self, member_id: str) -> list[Record]:
        out: list[Record] = []
        if self.target_epoch < self.epoch:
            new = self._assign()
            for mid in sorted(new):
                if new[mid] != self.target.get(mid):
                    out.append(
                        Record(
                            GroupMemberKey(self.group_id, mid, 13),
                            ShareGroupTargetAssignmentMemberValue(_tps(new[mid])),
                        )
                    )
            self.target = new
            self.target_epoch = self.epoch
            out.append(Record(GroupKey(self.group_id, 12), ShareGroupTargetAssignmentMetadataValue(self.epoch)))
        if member_id in self.subscriptions:
            want = (self.target_epoch, self.target.get(member_id, {}))
            old = self.current.get(member_id)
            if old != want:
                prev = old[0] if old is not None else 0
                self.current[member_id] = want
                out.append(
                    Record(
                        GroupMemberKey(self.group_id, member_id, 14),
                        ShareGroupCurrentMemberAssignmentValue(want[0], prev, 0, _tps(want[1])),
                    )
                )
        return out

    def reconcile(self) -> list[list[Record]]:
        """Every member's next heartbeat, one write each (those that write something)."""
        return [w for mid in sorted(self.subscriptions) if (w := self.heartbeat(mid))]

    def delete(self) -> list[Record]:
        """DeleteGroups of an Empty share group."""
        out = deletion_records(self.group_id, sorted(self.subscriptions))
        self.subscriptions, self.target, self.current = {}, {}, {}
        return out

    def _bump(self) -> Record:
        self.epoch += 1
        return Record(GroupKey(self.group_id, 11), ShareGroupMetadataValue(self.epoch, 0))

    def _assign(self) -> dict[str, Parts]:
        out: dict[str, Parts] = {mid: {} for mid in self.subscriptions}
        for topic in sorted({t for ts in self.subscriptions.values() for t in ts}):
            n = self.topics.get(topic, 0)
            subs = sorted(mid for mid, ts in self.subscriptions.items() if topic in ts)
            if not n or not subs:
                continue
            got: dict[str, list[int]] = {mid: [] for mid in subs}
            if len(subs) <= n:
                for p in range(n):
                    got[subs[p % len(subs)]].append(p)
            else:
                for i, mid in enumerate(subs):
                    got[mid].append(i % n)
            for mid, ps in got.items():
                if ps:
                    out[mid][topic] = tuple(ps)
        return out


def _tps(parts: Parts) -> tuple[TopicIdPartitions, ...]:
    return tuple(TopicIdPartitions(topic_id_for(t), ps) for t, ps in sorted(parts.items()))
