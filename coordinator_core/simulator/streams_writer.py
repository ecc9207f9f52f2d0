"""A streams group's life (KIP-1071) written as Kafka 4's coordinator writes it, for the generator
and tests: the caller decides which processes join, heartbeat and leave; each method returns
the records of one coordinator write, in Kafka's order.

Facts from apache/kafka's group-coordinator module (4.2): ``GroupMetadataManager.
streamsGroupHeartbeat`` (the topology of a new group, the member's metadata, the epoch bump,
then the target assignment of the changed members and its epoch, then the member's current
assignment), ``streamsGroupFenceMember`` (the member's 22, 21, 19 tombstones, then the epoch
bump), ``streams.CurrentAssignmentBuilder`` (revoke before taking: UNREVOKED_TASKS at the old
epoch, then UNRELEASED_TASKS while another member still holds a target task, then STABLE),
``StreamsGroup.createGroupTombstoneRecords``.

Rules:
- The topology: subtopology 0 reads the source topic and writes a repartition topic,
  subtopology 1 reads it and keeps a store (its changelog); both have one task per source
  partition. The validated topology epoch is 0 (its topics exist).
- The assignor stands in for Kafka's sticky task assignor: active tasks round robin over the
  members in member-id order, each member keeping the tasks it had when that stays balanced;
  with two or more members, a standby of each task on the next member.
- ``reconcile`` runs every member's heartbeat until nothing changes.
"""

from __future__ import annotations

from coordinator_core.codec.modern_records import (
    Endpoint,
    GroupKey,
    GroupMemberKey,
    KeyValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicInfo,
)
from coordinator_core.codec.records import Record
from coordinator_core.streams.model import deletion_records

Task = tuple[str, int]  # (subtopology id, partition)
STABLE, UNREVOKED, UNRELEASED = 1, 2, 3


class StreamsGroupWriter:
    """One streams group's records, Kafka's way (see the module rules)."""

    def __init__(self, group_id: str, source_topic: str, partitions: int) -> None:
        self.group_id = group_id
        self.source = source_topic
        self.partitions = partitions
        self.repartition = f"{group_id}-KSTREAM-REPARTITION-0000000003-repartition"
        self.changelog = f"{group_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000004-changelog"
        self.epoch = 0
        self.target_epoch = 0
        self.topology_written = False
        self.members: dict[str, str] = {}  # member id -> process id
        self.target: dict[str, tuple[frozenset[Task], frozenset[Task]]] = {}  # active, standby
        # member id -> (epoch, state, active, standby, active pending revocation)
        self.current: dict[str, tuple[int, int, frozenset[Task], frozenset[Task], frozenset[Task]]] = {}

    @property
    def state(self) -> str:
        """``StreamsGroup``'s state as these writes leave it (the topology is always validated)."""
        if not self.members:
            return "Empty"
        if self.epoch > self.target_epoch:
            return "Assigning"
        ok = all(
            c is not None and c[0] == self.target_epoch and c[1] == STABLE
            for c in (self.current.get(m) for m in self.members)
        )
        return "Stable" if ok else "Reconciling"

    @property
    def source_topics(self) -> tuple[str, ...]:
        return (self.source, self.repartition)

    def join(self, member_id: str, process_id: str) -> list[Record]:
        out: list[Record] = []
        if not self.topology_written:
            self.topology_written = True
            out.append(Record(GroupKey(self.group_id, 23), self._topology()))
        self.members[member_id] = process_id
        out.append(
            Record(
                GroupMemberKey(self.group_id, member_id, 19),
                StreamsGroupMemberMetadataValue(
                    None,
                    None,
                    f"{process_id}-StreamThread-1-consumer",
                    "/10.0.0.30",
                    0,
                    process_id,
                    Endpoint("localhost", 7070),
                    (KeyValue("zone", "a"),),
                    300_000,
                ),
            )
        )
        out.append(self._bump())
        return out + self.heartbeat(member_id)

    def leave(self, member_id: str) -> list[Record]:
        g = self.group_id
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.current.pop(member_id, None)
        return [
            Record(GroupMemberKey(g, member_id, 22), None),
            Record(GroupMemberKey(g, member_id, 21), None),
            Record(GroupMemberKey(g, member_id, 19), None),
            self._bump(),
        ]

    def heartbeat(self, member_id: str) -> list[Record]:
        out: list[Record] = []
        if self.target_epoch < self.epoch:
            new = self._assign()
            for mid in sorted(new):
                if new[mid] != self.target.get(mid):
                    active, standby = new[mid]
                    out.append(
                        Record(
                            GroupMemberKey(self.group_id, mid, 21),
                            StreamsGroupTargetAssignmentMemberValue(_ids(active), _ids(standby), ()),
                        )
                    )
            self.target = new
            self.target_epoch = self.epoch
            out.append(Record(GroupKey(self.group_id, 20), StreamsGroupTargetAssignmentMetadataValue(self.epoch)))
        if member_id in self.members:
            rec = self._reconcile(member_id)
            if rec is not None:
                out.append(rec)
        return out

    def reconcile(self, max_rounds: int = 10) -> list[list[Record]]:
        """Heartbeats of every member, round after round, until nothing changes."""
        writes: list[list[Record]] = []
        for _ in range(max_rounds):
            round_ = [w for mid in sorted(self.members) if (w := self.heartbeat(mid))]
            if not round_:
                break
            writes.extend(round_)
        return writes

    def delete(self) -> list[Record]:
        """DeleteGroups (or the cleanup) of an Empty streams group."""
        self.topology_written = False
        return deletion_records(self.group_id, sorted(self.members))

    # -- internals ---------------------------------------------------------------------------
    def _topology(self) -> StreamsGroupTopologyValue:
        return StreamsGroupTopologyValue(
            0,
            (
                Subtopology("0", (self.source,), (), (), (self.repartition,), (), ()),
                Subtopology(
                    "1",
                    (),
                    (),
                    (TopicInfo(self.changelog, 0, 0, ()),),
                    (),
                    (TopicInfo(self.repartition, self.partitions, 0, ()),),
                    (),
                ),
            ),
        )

    def _bump(self) -> Record:
        self.epoch += 1
        return Record(GroupKey(self.group_id, 17), StreamsGroupMetadataValue(self.epoch, 0, 0))

    def _assign(self) -> dict[str, tuple[frozenset[Task], frozenset[Task]]]:
        mids = sorted(self.members)
        if not mids:
            return {}
        tasks = [(s, p) for s in ("0", "1") for p in range(self.partitions)]
        cap = -(-len(tasks) // len(mids))
        active: dict[str, set[Task]] = {m: set() for m in mids}
        free = []
        for t in tasks:  # sticky: keep a task where it was while the member is under its share
            owner = next((m for m, (a, _) in self.target.items() if t in a and m in active), None)
            if owner is not None and len(active[owner]) < cap:
                active[owner].add(t)
            else:
                free.append(t)
        for t in free:
            m = min(mids, key=lambda x: (len(active[x]), x))
            active[m].add(t)
        out = {}
        for i, m in enumerate(mids):
            standby: set[Task] = set()
            if len(mids) > 1:
                prev = mids[i - 1]
                standby = set(active[prev])
            out[m] = (frozenset(active[m]), frozenset(standby))
        return out

    def _reconcile(self, mid: str) -> Record | None:
        t_active, t_standby = self.target.get(mid, (frozenset(), frozenset()))
        cur = self.current.get(mid)
        epoch, _, active, standby, _ = cur if cur is not None else (0, STABLE, frozenset(), frozenset(), frozenset())
        revoke = active - t_active
        if revoke:
            new = (epoch, UNREVOKED, active & t_active, standby & t_standby, revoke)
        else:
            held = {t for m, c in self.current.items() if m != mid for t in c[2] | c[4]}
            mine = frozenset(t for t in t_active if t not in held)
            state = UNRELEASED if mine != t_active else STABLE
            new = (self.target_epoch, state, mine, t_standby, frozenset())
        if new == cur:
            return None
        prev = epoch if cur is not None else 0
        self.current[mid] = new
        return Record(
            GroupMemberKey(self.group_id, mid, 22),
            StreamsGroupCurrentMemberAssignmentValue(
                new[0], prev, new[1], _ids(new[2]), _ids(new[3]), (), _ids(new[4]), (), ()
            ),
        )


def _ids(tasks: frozenset[Task]) -> tuple[TaskIds, ...]:
    by: dict[str, list[int]] = {}
    for s, p in tasks:
        by.setdefault(s, []).append(p)
    return tuple(TaskIds(s, tuple(sorted(ps))) for s, ps in sorted(by.items()))
