"""A Kafka 4 streams group (KIP-1071) as values: its topology, its members (processes and their
active, standby and warm-up tasks), the rules Kafka applies to it (state, offset expiry,
deletion).

Facts from apache/kafka's group-coordinator module (4.2-4.4): ``StreamsGroup``,
``StreamsGroupMember`` (``Builder``, ``updateWith``, ``isReconciledTo``), ``TasksTuple``,
``StreamsTopology`` (``fromRecord``, ``requiredTopics``, ``sourceTopicMap``),
``StreamsCoordinatorRecordHelpers``, ``OffsetMetadataManager.cleanupExpiredOffsets``.

Rules:
- State (``StreamsGroup.maybeUpdateGroupState``): Empty without members; NotReady while there
  is no topology or its epoch is not the validated topology epoch (StreamsGroupMetadata's
  ValidatedTopologyEpoch, -1 when absent, 0 before any); Assigning when the group epoch is ahead of the
  target assignment epoch; Reconciling while a member is not STABLE at the target assignment
  epoch; else Stable. Dead once removed.
- A member first seen through MemberMetadata or CurrentMemberAssignment is uninitialized
  (``getOrCreateUninitializedMember``): no epochs, no state - never reconciled - until its
  CurrentMemberAssignment. Tasks are (subtopology id, partition) by role: active, standby,
  warm-up; the same for the tasks pending revocation.
- Offsets: a streams group commits offsets to ``__consumer_offsets`` like any group. They
  expire (``offsetExpirationCondition``: base = commit timestamp, an explicit expire timestamp
  instead) unless the group is subscribed to the topic: ``isSubscribedToTopic`` is false while
  Empty (or Dead) and otherwise true for the topology's source topics and repartition source
  topics (``sourceTopicMap``) - changelog topics are not subscribed. An Empty streams group
  left without offsets is deleted by the cleanup.
- Deletion (``StreamsGroup.createGroupTombstoneRecords``): current assignments, target
  assignment members, the target assignment epoch, members, the group epoch, then the
  topology (``deletion_records``).
- The assignor is the broker's (``group.streams.assignors``, default ``sticky``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from coordinator_core.codec.modern_records import GroupKey, GroupMemberKey, StreamsGroupTopologyValue, TaskIds
from coordinator_core.codec.records import Record
from coordinator_core.modern.group_epochs import TypeCodec

#: ``group.streams.assignors`` default (``StickyTaskAssignor.name()``)
DEFAULT_STREAMS_ASSIGNOR: Final = "sticky"
#: ``group.streams.session.timeout.ms`` default (not in the records)
DEFAULT_STREAMS_SESSION_TIMEOUT_MS: Final = 45_000
STREAMS_RECORD_TYPES: Final = frozenset({17, 19, 20, 21, 22, 23})
TASK_ROLES: Final = ("active", "standby", "warmup")

#: ``((subtopology_id, (partition, ...)), ...)``, sorted: one role's tasks
TaskSet: TypeAlias = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Tasks:
    """``TasksTuple``: active, standby and warm-up tasks."""

    active: TaskSet = ()
    standby: TaskSet = ()
    warmup: TaskSet = ()

    def by_role(self) -> Iterable[tuple[str, str, int]]:
        """Each task as (role, subtopology id, partition), roles in Kafka's order."""
        for role, ts in zip(TASK_ROLES, (self.active, self.standby, self.warmup), strict=True):
            for sub, ps in ts:
                for p in ps:
                    yield (role, sub, p)


NO_TASKS: Final = Tasks()


@dataclass(frozen=True, slots=True)
class StreamsMember:
    """``StreamsGroupMember``; ``state`` is the streams MemberState name (STABLE,
    UNREVOKED_TASKS, UNRELEASED_TASKS, UNKNOWN), None (with the epochs) while uninitialized;
    ``user_endpoint`` is ``host:port`` (interactive queries), ``client_tags`` sorted pairs."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int | None = None
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: str | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int | None = None
    previous_member_epoch: int | None = None
    state: str | None = None
    assigned_tasks: Tasks = NO_TASKS
    tasks_pending_revocation: Tasks = NO_TASKS

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state == "STABLE" and self.member_epoch == target_assignment_epoch


@dataclass(frozen=True, slots=True)
class SubtopologyInfo:
    """One subtopology of a StreamsGroupTopology record, topics by name."""

    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    repartition_source_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    state_changelog_topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Topology:
    """``StreamsTopology``: its epoch and subtopologies (by id)."""

    epoch: int
    subtopologies: tuple[SubtopologyInfo, ...]

    @property
    def source_topics(self) -> frozenset[str]:
        """``sourceTopicMap``'s keys: source and repartition source topics (what the group is
        subscribed to while not Empty)."""
        return frozenset(t for s in self.subtopologies for t in (*s.source_topics, *s.repartition_source_topics))

    @property
    def required_topics(self) -> frozenset[str]:
        """``requiredTopics``: source, repartition source and changelog topics."""
        return self.source_topics | {t for s in self.subtopologies for t in s.state_changelog_topics}


def topology_from_record(v: StreamsGroupTopologyValue) -> Topology:
    subs = tuple(
        SubtopologyInfo(
            s.subtopology_id,
            tuple(s.source_topics),
            tuple(s.source_topic_regex),
            tuple(t.name for t in s.repartition_source_topics),
            tuple(s.repartition_sink_topics),
            tuple(t.name for t in s.state_changelog_topics),
        )
        for s in sorted(v.subtopologies, key=lambda s: s.subtopology_id)
    )
    return Topology(v.epoch, subs)


@dataclass(frozen=True, slots=True)
class StreamsDetails:
    """What only a streams group has: its topology (None: no record, or tombstoned), the
    validated topology epoch (0 until a StreamsGroupMetadata sets it: the loader's
    ``TimelineInteger`` starts at 0; a record without the field sets -1) and the assignment
    configs of the last assignment."""

    topology: Topology | None = None
    validated_topology_epoch: int = 0
    last_assignment_configs: tuple[tuple[str, str], ...] = ()


def task_set(ids: Iterable[TaskIds]) -> TaskSet:
    merged: dict[str, set[int]] = {}
    for t in ids:
        merged.setdefault(t.subtopology_id, set()).update(t.partitions)
    return tuple((s, tuple(sorted(ps))) for s, ps in sorted(merged.items()) if ps)


def derive_state(members: Mapping[str, StreamsMember], details: StreamsDetails, group_epoch: int, target: int) -> str:
    """``StreamsGroup.maybeUpdateGroupState``."""
    if not members:
        return "Empty"
    t = details.topology
    if t is None or t.epoch != details.validated_topology_epoch:
        return "NotReady"
    if group_epoch > target:
        return "Assigning"
    if all(m.is_reconciled_to(target) for m in members.values()):
        return "Stable"
    return "Reconciling"


def subscribed_topics(state: str, details: StreamsDetails) -> frozenset[str]:
    """``StreamsGroup.isSubscribedToTopic`` as a set: none while Empty or Dead."""
    if state in ("Empty", "Dead") or details.topology is None:
        return frozenset()
    return details.topology.source_topics


def deletion_records(group_id: str, member_ids: Iterable[str]) -> list[Record]:
    """``StreamsGroup.createGroupTombstoneRecords``: the tombstones deleting a streams group."""
    mids = list(member_ids)
    out = [Record(GroupMemberKey(group_id, m, 22), None) for m in mids]
    out += [Record(GroupMemberKey(group_id, m, 21), None) for m in mids]
    out.append(Record(GroupKey(group_id, 20), None))
    out += [Record(GroupMemberKey(group_id, m, 19), None) for m in mids]
    out += [Record(GroupKey(group_id, 17), None), Record(GroupKey(group_id, 23), None)]
    return out


# -- serialized form (``group_epochs.dump_modern``) ---------------------------------------------
def _ts_to(t: TaskSet) -> list[Any]:
    return [[s, list(ps)] for s, ps in t]


def _ts_from(v: list[Any]) -> TaskSet:
    return tuple((s, tuple(ps)) for s, ps in v)


def _tasks_to(t: Tasks) -> list[Any]:
    return [_ts_to(t.active), _ts_to(t.standby), _ts_to(t.warmup)]


def _tasks_from(v: list[Any]) -> Tasks:
    return Tasks(_ts_from(v[0]), _ts_from(v[1]), _ts_from(v[2]))


def _member_to(m: StreamsMember) -> list[Any]:
    return [
        m.member_id,
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        m.topology_epoch,
        m.process_id,
        m.user_endpoint,
        [list(kv) for kv in m.client_tags],
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        _tasks_to(m.assigned_tasks),
        _tasks_to(m.tasks_pending_revocation),
    ]


def _member_from(v: list[Any]) -> StreamsMember:
    return StreamsMember(
        v[0],
        v[1],
        v[2],
        v[3],
        v[4],
        v[5],
        v[6],
        v[7],
        v[8],
        tuple((k, x) for k, x in v[9]),
        v[10],
        v[11],
        v[12],
        _tasks_from(v[13]),
        _tasks_from(v[14]),
    )


def _details_to(d: StreamsDetails) -> list[Any]:
    t = d.topology
    topo = None
    if t is not None:
        topo = [
            t.epoch,
            [
                [
                    s.subtopology_id,
                    list(s.source_topics),
                    list(s.source_topic_regex),
                    list(s.repartition_source_topics),
                    list(s.repartition_sink_topics),
                    list(s.state_changelog_topics),
                ]
                for s in t.subtopologies
            ],
        ]
    return [topo, d.validated_topology_epoch, [list(kv) for kv in d.last_assignment_configs]]


def _details_from(v: list[Any]) -> StreamsDetails:
    topo = None
    if v[0] is not None:
        epoch, subs = v[0]
        topo = Topology(epoch, tuple(SubtopologyInfo(s[0], *(tuple(x) for x in s[1:])) for s in subs))
    return StreamsDetails(topo, v[1], tuple((k, x) for k, x in v[2]))


STREAMS_CODEC: Final = TypeCodec(_member_to, _member_from, _tasks_to, _tasks_from, _details_to, _details_from)
