"""Kafka 4 consumer groups (KIP-848, ``group.protocol=consumer``) in the simulator: the broker's
side of ``ConsumerGroupHeartbeat`` (``ConsumerGroupCoordinator``); the client that heartbeats is
``simulator.consumer_group_client``.

Facts from apache/kafka's group-coordinator module (4.0): ``GroupMetadataManager.
consumerGroupHeartbeat`` / ``consumerGroupLeave`` / ``consumerGroupStaticMemberGroupLeave`` /
``getOrMaybeCreatePersistedConsumerGroup`` (``maybeDeleteEmptyClassicGroup``,
``validateOnlineUpgrade``, ``convertToConsumerGroup``), ``classicGroupJoinToClassicGroup``
(``maybeDeleteEmptyConsumerGroup``), ``OffsetMetadataManager`` (commit validation, offset
expiry, ``deleteAllOffsets``), ``GroupCoordinatorShard.cleanupGroupMetadata``.

Rules:
- The records of a group are written by one ``ConsumerGroupWriter`` (Kafka's record order; the
  group's preferred server assignor, ``uniform`` or ``range``, sticky on the current target);
  each request's records are one coordinator write (one timestamp, consecutive offsets).
- Requests are handled when sent and answered at once (no network delay, nothing lost).
- ``heartbeat``: member epoch 0 joins (a new member; a static member whose instance id left
  with epoch -2 replaces it without an epoch bump; an instance id still held:
  UNRELEASED_INSTANCE_ID, retried); the member's epoch renews its session and takes one
  reconciliation step (its heartbeat after a revocation acknowledges it); epoch -1 leaves
  (tombstones, epoch bump); -2 (static) leaves for a while (epoch -2, assignment kept). An
  unknown member or another epoch: UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH; the client drops its
  partitions (lost) and rejoins at epoch 0. A subscribed topic deleted bumps the epoch at the
  next heartbeat (the subscription metadata refresh).
- Sessions: ``group.consumer.session.timeout.ms`` (45 s) for consumer-protocol members, the
  JoinGroup session timeout for classic-protocol members; a member silent that long is removed
  as on a leave (a static member that left with -2 too).
- Creating a group: a missing group is created; an Empty classic group (simple groups too) is
  replaced, its GroupMetadata tombstone first (``maybeDeleteEmptyClassicGroup``); a Stable
  classic group of protocol type ``consumer`` is converted online (``convertToConsumerGroup``:
  generation = group epoch, members keep their assignments) and its clients carry on as
  classic-protocol members of the consumer group (``ConsumerGroupClient(classic=True)``: a
  heartbeat is their JoinGroup/SyncGroup round, one reconciliation step; their session is their
  JoinGroup session timeout; commits carry their generation = member epoch). Model choice: a classic group in the middle of a rebalance is
  not converted yet (the heartbeat is answered REBALANCE_IN_PROGRESS and retried a second
  later); Kafka converts it at once.
- A classic JoinGroup for an Empty consumer group replaces it: the consumer group's tombstones,
  then the classic group (``maybeDeleteEmptyConsumerGroup``: the offline downgrade). A classic
  JoinGroup for a consumer group with members (Kafka: a classic member joins it) is not
  modelled: it is answered COORDINATOR_NOT_AVAILABLE and retried.
- Offsets: commits are validated as ``OffsetMetadataManager`` does for consumer groups (an
  unknown member: UNKNOWN_MEMBER_ID; a consumer-protocol member's epoch other than its own:
  STALE_MEMBER_EPOCH; a classic-protocol member's generation other than its epoch:
  ILLEGAL_GENERATION; deleted topics: UNKNOWN_TOPIC_OR_PARTITION) and written as the classic
  coordinator writes them. The retention check removes what ``modern.consumer.model.plan_cleanup``
  says (subscribed topics never expire; others at commit + retention) and deletes an Empty group
  left without offsets; DeleteGroups of an Empty group writes the offset tombstones, then the
  group's. Topic deletion tombstones the topic's offsets. Failovers do not touch consumer groups
  (their state is the same after a reload; requests during a load are not refused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from coordinator_core.codec.consumer_protocol import decode_assignment, decode_subscription
from coordinator_core.codec.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from coordinator_core.modern.consumer.model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupSnapshot,
    ConsumerGroupState,
    ConsumerMember,
    deletion_records,
    derive_state,
    plan_cleanup,
)
from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.consumer_group_writer import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroupWriter,
    Partitions,
)
from coordinator_core.simulator.coordinator import E_COMMIT_TS, E_EPOCH, E_EXPIRE_TS, E_METADATA, E_OFFSET, OffsetEntry

if TYPE_CHECKING:
    from coordinator_core.simulator.coordinator import Coordinator, Group

TP = tuple[str, int]


class AdoptedMember(Protocol):
    """A classic member that carries on in a converted group (the engine's client)."""

    @property
    def cfg(self) -> ClientConfig: ...


class Runtime(Protocol):
    """What the consumer-group coordinator needs from the event loop (``engine.Simulator``)."""

    now: int
    topics: dict[str, int]

    def schedule(self, at_ms: int, fn: Callable[[], None]) -> None: ...

    def adopt_classic_member(
        self, group_id: str, member_id: str, generation: int, owned: frozenset[TP]
    ) -> AdoptedMember | None: ...


#: ``group.consumer.heartbeat.interval.ms`` / ``group.consumer.session.timeout.ms`` defaults.
HEARTBEAT_INTERVAL_MS: Final = 5_000
SESSION_TIMEOUT_MS: Final = 45_000
#: How long the client takes to run its rebalance callbacks before acknowledging (a heartbeat).
ACK_DELAY_MS: Final = 20
RETRY_BACKOFF_MS: Final = 1_000
STALE_MEMBER_EPOCH: Final = "STALE_MEMBER_EPOCH"
FENCED_MEMBER_EPOCH: Final = "FENCED_MEMBER_EPOCH"
UNRELEASED_INSTANCE_ID: Final = "UNRELEASED_INSTANCE_ID"
MEMBER_STATES: Final = {
    STABLE: "STABLE",
    UNREVOKED_PARTITIONS: "UNREVOKED_PARTITIONS",
    UNRELEASED_PARTITIONS: "UNRELEASED_PARTITIONS",
}


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    """``ConsumerGroupHeartbeatRequest`` (the fields the model uses); ``classic``: a
    classic-protocol member's JoinGroup/Heartbeat/LeaveGroup (its epoch is its generation)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    client_id: str = ""
    client_host: str = "/127.0.0.1"
    classic: bool = False
    classic_protocols: tuple[str, ...] = ()
    session_timeout_ms: int = SESSION_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error: str
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    assignment: Partitions = frozenset()


@dataclass(slots=True)
class ConsumerGroupHistory:
    """What happened to a consumer group over the run (the generator's truth)."""

    created_ms: int
    joins: int = 0
    leaves: int = 0
    session_timeouts: int = 0
    static_leaves: int = 0
    static_replacements: int = 0
    commits: int = 0
    rejected_commits: int = 0
    conversions: list[tuple[int, str, str]] = field(default_factory=list)  # (time, from, to)
    deaths: list[tuple[int, str]] = field(default_factory=list)  # (time, cause)
    offset_tombstones: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class ConsumerGroupRuntime:
    """One live consumer group: its writer, offsets and member sessions."""

    writer: ConsumerGroupWriter
    offsets: dict[TP, OffsetEntry] = field(default_factory=dict)
    deadlines: dict[str, int] = field(default_factory=dict)
    timers: dict[str, int] = field(default_factory=dict)  # member -> time its session check runs


class ConsumerGroupCoordinator:
    """The KIP-848 side of the simulated group coordinator (see the module rules)."""

    def __init__(self, sim: Runtime, classic: Coordinator) -> None:
        self.sim = sim
        self.classic = classic
        self.log = classic.log
        self.groups: dict[str, ConsumerGroupRuntime] = {}
        self.history: dict[str, ConsumerGroupHistory] = {}

    # -- helpers ---------------------------------------------------------------------------
    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

    def _history(self, group_id: str) -> ConsumerGroupHistory:
        h = self.history.get(group_id)
        if h is None:
            h = self.history[group_id] = ConsumerGroupHistory(self.sim.now)
        return h

    def _write(self, records: Iterable[Record]) -> None:
        now = self.sim.now
        for r in records:
            self.log.append(now, r.key, r.value)  # type: ignore[arg-type]

    def _new_group(self, group_id: str) -> ConsumerGroupRuntime:
        w = ConsumerGroupWriter(group_id, self.sim.topics, server_side_assignors=True)
        g = self.groups[group_id] = ConsumerGroupRuntime(w)
        self._history(group_id)
        return g

    def snapshot(self, group_id: str) -> ConsumerGroupSnapshot:
        """The group as ``modern.consumer.model`` values (what a replay of its records gives)."""
        w = self.groups[group_id].writer
        members = {
            mid: ConsumerMember(
                mid,
                instance_id=m.instance_id,
                subscribed_topic_names=m.topics,
                server_assignor=m.assignor,
                member_epoch=m.epoch,
                previous_member_epoch=m.previous_epoch,
                state=MEMBER_STATES[m.state],
            )
            for mid, m in w.members.items()
        }
        return ConsumerGroupSnapshot(
            group_id,
            group_type="consumer",
            group_epoch=w.group_epoch,
            target_assignment_epoch=w.target_epoch,
            members=MappingProxyType(members),
            subscribed_topics=frozenset(t for m in w.members.values() for t in m.topics),
        )

    def state_of(self, group_id: str) -> ConsumerGroupState:
        s = self.snapshot(group_id)
        return derive_state(s.members.values(), s.group_epoch, s.target_assignment_epoch)

    # -- sessions --------------------------------------------------------------------------
    def _touch(self, g: ConsumerGroupRuntime, member_id: str, timeout_ms: int) -> None:
        deadline = self.sim.now + timeout_ms
        g.deadlines[member_id] = deadline
        armed = g.timers.get(member_id)
        if armed is None or armed > deadline:
            self._arm(g.writer.group_id, member_id, deadline)

    def _arm(self, group_id: str, member_id: str, at: int) -> None:
        self.groups[group_id].timers[member_id] = at
        self.sim.schedule(at, lambda: self._session_check(group_id, member_id, at))

    def _session_check(self, group_id: str, member_id: str, at: int) -> None:
        g = self.groups.get(group_id)
        if g is None or g.timers.get(member_id) != at:
            return
        deadline = g.deadlines.get(member_id)
        if deadline is None or member_id not in g.writer.members:
            g.timers.pop(member_id, None)
            return
        if deadline > self.sim.now:
            self._arm(group_id, member_id, deadline)
            return
        h = self._history(group_id)
        h.session_timeouts += 1
        self._remove_member(g, member_id)

    def _remove_member(self, g: ConsumerGroupRuntime, member_id: str) -> None:
        g.deadlines.pop(member_id, None)
        g.timers.pop(member_id, None)
        self._history(g.writer.group_id).leaves += 1
        self._write(g.writer.leave(member_id))

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------
    def heartbeat(self, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        """One ConsumerGroupHeartbeat (or a classic-protocol member's join/heartbeat/leave)."""
        gid = req.group_id
        g = self.groups.get(gid)
        if req.member_epoch == 0:
            if g is None:
                created = self._create(gid)
                if isinstance(created, str):
                    return ConsumerGroupHeartbeatResponse(created, req.member_id)
                g = created
            return self._join(g, req)
        if g is None or req.member_id not in g.writer.members:
            return ConsumerGroupHeartbeatResponse(p.UNKNOWN_MEMBER_ID, req.member_id)
        m = g.writer.members[req.member_id]
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and m.instance_id is not None:
                self._history(gid).static_leaves += 1
                self._write(g.writer.static_leave(req.member_id))
            else:
                self._remove_member(g, req.member_id)
            return ConsumerGroupHeartbeatResponse(p.NONE, req.member_id, req.member_epoch)
        if req.member_epoch != m.epoch:
            return ConsumerGroupHeartbeatResponse(FENCED_MEMBER_EPOCH, req.member_id)
        self._touch(g, req.member_id, self._session_timeout(req))
        records = g.writer.refresh_subscription() + g.writer.heartbeat(req.member_id)
        self._write(records)
        return self._response(g, req.member_id)

    def _session_timeout(self, req: ConsumerGroupHeartbeatRequest) -> int:
        return req.session_timeout_ms if req.classic else SESSION_TIMEOUT_MS

    def _response(self, g: ConsumerGroupRuntime, member_id: str) -> ConsumerGroupHeartbeatResponse:
        m = g.writer.members[member_id]
        return ConsumerGroupHeartbeatResponse(p.NONE, member_id, m.epoch, HEARTBEAT_INTERVAL_MS, m.assigned)

    def _join(self, g: ConsumerGroupRuntime, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        w = g.writer
        gid = w.group_id
        h = self._history(gid)
        member_id = req.member_id
        if req.classic:  # the coordinator names classic members (JoinGroup)
            member_id = self.classic._generate_member_id(req.client_id, req.instance_id)
        elif member_id in w.members:
            # a rejoin at epoch 0 with the same id (after fencing): it starts over as a new member
            self._remove_member(g, member_id)
        held = next((m for m in w.members.values() if req.instance_id and m.instance_id == req.instance_id), None)
        if held is not None:
            if held.epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                return ConsumerGroupHeartbeatResponse(UNRELEASED_INSTANCE_ID, member_id)
            g.deadlines.pop(held.member_id, None)
            g.timers.pop(held.member_id, None)
            h.static_replacements += 1
            records = w.replace_static(held.member_id, member_id, client_id=req.client_id or None)
        else:
            h.joins += 1
            records = w.join(
                member_id,
                req.subscribed_topic_names,
                instance_id=req.instance_id,
                assignor=req.server_assignor,
                client_id=req.client_id or None,
                client_host=req.client_host,
                rebalance_timeout_ms=req.rebalance_timeout_ms,
                classic_protocols=req.classic_protocols if req.classic else None,
                session_timeout_ms=req.session_timeout_ms,
            )
        self._write(records)
        self._touch(g, member_id, self._session_timeout(req))
        return self._response(g, member_id)

    # -- creation and conversions ----------------------------------------------------------
    def _create(self, group_id: str) -> ConsumerGroupRuntime | str:
        """A consumer group for ``group_id``, or the error the joining heartbeat gets."""
        c = self.classic.groups.get(group_id)
        if c is None:
            g = self._new_group(group_id)
            return g
        if c.state == "Empty":
            # maybeDeleteEmptyClassicGroup: the classic group's tombstone, the offsets stay
            g = self._new_group(group_id)
            g.offsets = self.classic.surrender(group_id)
            self._write([Record(GroupMetadataKey(group_id), None)])
            self._history(group_id).conversions.append((self.sim.now, "classic", "consumer"))
            return g
        if c.protocol_type != "consumer" or c.state != "Stable":
            return p.REBALANCE_IN_PROGRESS  # model choice: converted at a Stable moment only
        return self._convert(c)

    def _convert(self, c: Group) -> ConsumerGroupRuntime:
        """``convertToConsumerGroup``: the classic members carry on as classic-protocol members."""
        gid = c.group_id
        members: dict[str, tuple[tuple[str, ...], Partitions]] = {}
        clients: dict[str, tuple[str, str, int, int]] = {}
        protocol = c.protocol or "range"
        for mid, cm in c.members.items():
            topics = decode_subscription(cm.metadata(protocol)).topics
            assignment = decode_assignment(cm.assignment) if cm.assignment else None
            parts = frozenset(
                (tp.topic, q) for tp in (assignment.assigned_partitions if assignment else ()) for q in tp.partitions
            )
            members[mid] = (tuple(topics), parts)
            clients[mid] = (cm.client_id, cm.client_host, cm.session_timeout, cm.rebalance_timeout)
        generation = c.generation
        g = self._new_group(gid)
        g.offsets = self.classic.surrender(gid)
        self._write(g.writer.upgrade_from_classic(generation, members, protocol, clients))
        self._history(gid).conversions.append((self.sim.now, "classic", "consumer"))
        for mid in sorted(members):
            client = self.sim.adopt_classic_member(gid, mid, generation, members[mid][1])
            self._touch(g, mid, client.cfg.session_timeout_ms if client is not None else SESSION_TIMEOUT_MS)
        return g

    def replace_empty(self, group_id: str) -> dict[TP, OffsetEntry] | None:
        """A classic JoinGroup for this consumer group: when Empty, its tombstones are written
        and its offsets handed over (``maybeDeleteEmptyConsumerGroup``); None when it has members."""
        g = self.groups[group_id]
        if g.writer.members:
            return None
        self._write(deletion_records(self.snapshot(group_id)))
        del self.groups[group_id]
        self._history(group_id).conversions.append((self.sim.now, "consumer", "classic"))
        return g.offsets

    # -- offsets ---------------------------------------------------------------------------
    def commit(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        offsets: tuple[tuple[TP, int, str, int | None], ...],
        classic: bool,
    ) -> str:
        """An OffsetCommit for a consumer group; the error (``NONE`` when stored)."""
        g = self.groups.get(group_id)
        h = self._history(group_id)
        err = p.NONE
        if g is None:
            err = p.GROUP_ID_NOT_FOUND
        elif member_id == "" and epoch < 0:
            err = p.NONE if not g.writer.members else p.UNKNOWN_MEMBER_ID  # an admin commit
        elif member_id not in g.writer.members:
            err = p.UNKNOWN_MEMBER_ID
        elif g.writer.members[member_id].epoch != epoch:
            err = p.ILLEGAL_GENERATION if classic else STALE_MEMBER_EPOCH
        if err == p.NONE and self.classic.deleted_topics:
            offsets = tuple(o for o in offsets if o[0][0] not in self.classic.deleted_topics)
            if not offsets:
                err = p.UNKNOWN_TOPIC_OR_PARTITION
        if err != p.NONE or g is None:
            h.rejected_commits += 1
            return err
        now = self.sim.now
        version = self.classic.cfg.offset_value_version
        self.log.append_offset_commits(now, group_id, offsets, None, version)
        for tp, offset, metadata, leader_epoch in offsets:
            g.offsets[tp] = (offset, metadata, now, None, leader_epoch)
        h.commits += 1
        return p.NONE

    def _tombstone(self, group_id: str, tps: list[TP], cause: str) -> None:
        g = self.groups[group_id]
        h = self._history(group_id)
        for tp in tps:
            g.offsets.pop(tp, None)
        if tps:
            h.offset_tombstones[cause] = h.offset_tombstones.get(cause, 0) + len(tps)

    def cleanup(self, partitions: frozenset[int] | None) -> None:
        """The retention check of the consumer groups of some ``__consumer_offsets`` partitions."""
        now = self.sim.now
        retention = self.classic.cfg.offsets_retention_ms
        for gid in sorted(self.groups):
            if partitions is not None and self.log.partition(gid) not in partitions:
                continue
            g = self.groups[gid]
            values = {tp: _value(e) for tp, e in g.offsets.items()}
            plan = plan_cleanup(self.snapshot(gid), values, now, retention)
            if not plan.records:
                continue
            self._tombstone(gid, [tp for tp, _ in plan.expired], "retention")
            self._write(plan.records)
            if plan.group_deleted:
                self._history(gid).deaths.append((now, "retention"))
                del self.groups[gid]

    def delete_topic(self, topic: str) -> None:
        """``OffsetMetadataManager.onPartitionsDeleted``: the topic's offsets are tombstoned."""
        for gid in sorted(self.groups):
            g = self.groups[gid]
            tps = sorted(tp for tp in g.offsets if tp[0] == topic)
            if tps:
                self._tombstone(gid, tps, "topic_deleted")
                self._write([Record(OffsetCommitKey(gid, tp[0], tp[1]), None) for tp in tps])

    def delete_group(self, group_id: str) -> str:
        """DeleteGroups: an Empty group's offset tombstones, then the group's."""
        g = self.groups[group_id]
        if g.writer.members:
            return p.NON_EMPTY_GROUP
        tps = sorted(g.offsets)
        self._tombstone(group_id, tps, "group_deleted")
        self._write([Record(OffsetCommitKey(group_id, tp[0], tp[1]), None) for tp in tps])
        self._write(deletion_records(self.snapshot(group_id)))
        self._history(group_id).deaths.append((self.sim.now, "admin"))
        del self.groups[group_id]
        return p.NONE

    # -- truth -----------------------------------------------------------------------------
    def truth_of(self, group_id: str) -> dict[str, Any]:
        """The live group as the generator's truth reports it."""
        g = self.groups[group_id]
        w = g.writer
        return {
            "group_type": "consumer",
            "final_state": self.state_of(group_id).value,
            "group_epoch": w.group_epoch,
            "target_assignment_epoch": w.target_epoch,
            "assignor": w.assignor,
            "members": {
                mid: {
                    "instance_id": m.instance_id,
                    "member_epoch": m.epoch,
                    "previous_member_epoch": m.previous_epoch,
                    "state": MEMBER_STATES[m.state],
                    "classic": m.classic_protocols is not None,
                    "subscribed_topics": list(m.topics),
                    "assigned": sorted([t, q] for t, q in m.assigned),
                    "pending_revocation": sorted([t, q] for t, q in m.revoking),
                    "target": sorted([t, q] for t, q in w.target.get(mid, ())),
                }
                for mid, m in sorted(w.members.items())
            },
            "offsets": {f"{t}:{q}": e[E_OFFSET] for (t, q), e in sorted(g.offsets.items())},
        }


def _value(e: OffsetEntry) -> OffsetCommitValue:
    return OffsetCommitValue(
        offset=e[E_OFFSET],
        metadata=e[E_METADATA],
        commit_timestamp=e[E_COMMIT_TS],
        leader_epoch=e[E_EPOCH],
        expire_timestamp=e[E_EXPIRE_TS],
        version=3,
    )
