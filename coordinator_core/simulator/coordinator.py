"""A deterministic model of Kafka's classic group coordinator (seeds 000/001, spec §7/§8).

Rules (each mirrors ``core/.../GroupCoordinator.scala`` / ``GroupMetadata.scala``):
- One request at a time per coordinator (the group lock); time is the runtime's ``now``.
- JoinGroup: unknown member → new member id (``MEMBER_ID_REQUIRED`` round trip for v4+ dynamic
  members, with pending-member expiry after the session timeout); known member per state
  (PreparingRebalance: update and wait; CompletingRebalance: same metadata gets the current
  generation, changed metadata rebalances; Stable: the leader or changed metadata rebalances,
  followers get the current generation); static members replace the member id, stale ids are
  fenced (``FENCED_INSTANCE_ID``); a static member rejoining a Stable group without changing
  the selected protocol rewrites the group record and causes no rebalance; the replaced id stays
  in the pending-sync set (``replaceStaticMember`` leaves it), so a follower that restarts
  between the leader's SyncGroup and its own makes the DelayedSync rebalance the group.
- One delayed join per rebalance, timeout = the largest rebalance timeout; it completes when
  every member has rejoined and no pending member remains; on timeout the dynamic members that
  did not rejoin are removed. A group leaving Empty waits ``initial_rebalance_delay_ms``
  (``InitialDelayedJoin``, extended while new members arrive); 0 means a plain delayed join, as
  in Kafka 0.10 (the book, seed 000).
- Records: the leader's SyncGroup stores the membership + assignments (current_state_timestamp
  = time of entering CompletingRebalance, because the record is built before → Stable); a
  rebalance ending with no members stores the Empty record (generation+1, protocol/leader
  null); offset commits (value v3, or v1 with an explicit retention); tombstones on expiry,
  DeleteGroups and topic deletion; group tombstones only when generation > 0 (old coordinator)
  or for any Empty classic group (new coordinator, which also writes an empty-group record at
  creation).
- Retention checks (``cleanup_expired_offsets``) run per ``__consumer_offsets`` partition on the
  engine's schedule; every group death is kept in ``deaths`` with its cause (retention, admin,
  topic deletion: the old coordinator's ``handleDeletedPartitions`` kills an Empty group left
  without offsets in the same step, the new one leaves it to the next check).
- Heartbeats: one deadline per member (session timeout, or 5 min for a new member awaiting its
  first join); members awaiting join or sync are never expired (``hasSatisfiedHeartbeat``).
- Every transition, request, response, timer and record is traced.
- Kafka 4 consumer groups (KIP-848) live beside the classic ones (``modern``:
  ``simulator.consumer_groups``); a group id is one or the other. A JoinGroup, OffsetCommit or
  DeleteGroups for a consumer group's id goes to it (a JoinGroup replaces an Empty consumer
  group); a conversion to a consumer group takes a classic group out (``surrender``) with its
  offsets; retention checks and topic deletions cover both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from coordinator_core.codec.consumer_protocol import decode_subscription
from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
)
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.log import RecordLog
from coordinator_core.simulator.trace import TraceEvent
from coordinator_core.state import VALID_PREVIOUS_STATES as _STATE_TABLE
from coordinator_core.state import GroupState
from coordinator_core.state import transition as _check_transition

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

#: ``ClassicGroupState`` valid previous states (spec §7): the shared table in ``coordinator_core.state``.
VALID_PREVIOUS_STATES: dict[str, frozenset[str]] = {
    str(target): frozenset(str(x) for x in previous) for target, previous in _STATE_TABLE.items()
}
_CAN_REBALANCE = VALID_PREVIOUS_STATES[PREPARING]

TP = tuple[str, int]
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # GroupCoordinator.NewMemberJoinTimeoutMs
_COMMIT_OK = p.OffsetCommitResponse(p.NONE)


class ModernGroups(Protocol):
    """The consumer groups (KIP-848) beside the classic ones (``simulator.consumer_groups``)."""

    def owns(self, group_id: str) -> bool: ...

    def replace_empty(self, group_id: str) -> dict[tuple[str, int], OffsetEntry] | None: ...

    def commit(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...],
        classic: bool,
    ) -> str: ...

    def cleanup(self, partitions: frozenset[int] | None) -> None: ...

    def delete_topic(self, topic: str) -> None: ...

    def delete_group(self, group_id: str) -> str: ...


class Runtime(Protocol):
    """What the coordinator needs from the event loop."""

    now: int

    def schedule(self, at_ms: int, fn: Callable[[], None]) -> None: ...

    def respond(self, endpoint: p.Endpoint | None, response: p.Response, group_id: str) -> None: ...

    def trace(self, event: TraceEvent) -> None: ...


@dataclass(slots=True)
class CoordinatorConfig:
    """Broker settings that shape the log (defaults = a Kafka 3.x broker)."""

    initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    # When the retention checks run: at start + phase + k * interval for every partition (an int,
    # scenarios' default 0), or (None) from a seeded random phase, as on a real broker: the old
    # coordinator's KafkaScheduler runs "delete-expired-group-metadata" at a fixed rate from the
    # broker's start (one phase per broker; a partition moved by a failover takes its new
    # leader's phase); the new coordinator schedules it per shard, one interval after the shard
    # was loaded (GroupCoordinatorShard.onLoaded / scheduleGroupMetadataExpiration).
    offsets_retention_check_phase_ms: int | None = 0
    offset_value_version: int = 3
    group_value_version: int = 3
    # "old" (Scala GroupCoordinator) | "new" (Kafka 4's group coordinator, classic groups). The
    # protocol scenarios (the book's walkthroughs) model the classic coordinator they describe;
    # the generator and everything that writes sample clusters use SIMULATED_COORDINATOR
    coordinator: str = "old"
    new_group_state: str = EMPTY  # "Stable" reproduces Kafka 0.10.0 (the book: no Empty state yet)
    num_partitions: int = 50
    delayed_sync: bool = True  # DelayedSync (Kafka 3.2+): kick members that never send SyncGroup
    # Offset expiry rules (spec §8.2, the replay's rule-set names): "current" (KAFKA-13636: the
    # consumer rule only while Stable), "2.4-3.1" (the consumer rule in any non-Empty state),
    # "2.1-2.3" (non-Empty groups never expire offsets), "pre-2.1" (v1 values with
    # expire = commit + retention, expiring whatever the group state).
    expiry_rules: str = "current"


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_endpoint: p.Endpoint | None = None
    awaiting_join: bool = False
    sync_endpoint: p.Endpoint | None = None
    awaiting_sync: bool = False
    is_new: bool = False
    hb_deadline: int = 0
    hb_timer_at: int = -1

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member does not support any candidate protocol")


@dataclass(slots=True)
class GroupHistory:
    """What happened to a group over the run (the generator's ``truth.json``)."""

    created_ms: int
    transitions: int = 0
    rebalances: int = 0  # completed rebalances (transitions into Stable)
    went_empty: int = 0
    dead_ms: int | None = None
    final_state: str = EMPTY
    generation: int = 0
    group_records: int = 0
    commits: int = 0
    failovers: int = 0
    offset_tombstones: dict[str, int] = field(default_factory=dict)
    # every entry into PreparingRebalance: (time, generation, state left); the truth a replay's
    # inferred rebalance start is checked against (the log does not store it)
    rebalance_starts: list[tuple[int, int, str]] = field(default_factory=list)


#: A committed offset as the coordinator keeps it (``OffsetAndMetadata`` + commit time), a plain
#: tuple because one is built per committed partition: (offset, metadata, commit_timestamp,
#: expire_timestamp, leader_epoch).
OffsetEntry = tuple[int, str, int, int | None, int | None]
E_OFFSET: Final = 0
E_METADATA: Final = 1
E_COMMIT_TS: Final = 2
E_EXPIRE_TS: Final = 3
E_EPOCH: Final = 4


@dataclass(slots=True)
class Group:
    group_id: str
    state: str
    current_state_timestamp: int | None
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, None] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_op: int = 0  # id of the active delayed join (0 = none)
    join_initial: bool = False
    join_remaining: int = 0
    sync_op: int = 0
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    subscribed_topics: frozenset[str] | None = None
    rebalances: int = 0
    commits: int = 0  # OffsetCommit requests stored (history.commits adds them up at death/unload)
    stored: GroupMetadataValue | None = None  # the last group record written (what a reload sees)

    @property
    def all_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending

    def rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.state == EMPTY or not self.members:  # 0.10.0 checked "no members"
            return bool(protocol_type) and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        n = len(self.members)
        return any(sum(1 for m in self.members.values() if proto in dict(m.protocols)) == n for proto in protocols)

    def select_protocol(self) -> str:
        n = len(self.members)
        counts: dict[str, int] = {}
        for m in self.members.values():
            for name, _ in m.protocols:
                counts[name] = counts.get(name, 0) + 1
        candidates = {name for name, c in counts.items() if c == n}
        votes: dict[str, int] = {}
        for m in self.members.values():
            v = m.vote(candidates)
            votes[v] = votes.get(v, 0) + 1
        # maxBy over a HashMap in Kafka; ties are broken here by first appearance (determinism).
        return max(votes, key=lambda k: votes[k])


class Coordinator:
    """The coordinator for all simulated groups (all ``__consumer_offsets`` partitions)."""

    def __init__(self, runtime: Runtime, log: RecordLog, config: CoordinatorConfig | None = None) -> None:
        self.rt = runtime
        self.log = log
        self.cfg = config or CoordinatorConfig()
        self.groups: dict[str, Group] = {}
        self._op_seq = 0
        self._member_seq = 0
        self._cause: str | p.Request = "init"
        self.tracing: bool = getattr(runtime, "trace_enabled", True)
        self.history: dict[str, GroupHistory] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            p.JoinGroupRequest: self._handle_join,
            p.SyncGroupRequest: self._handle_sync,
            p.HeartbeatRequest: self._handle_heartbeat,
            p.LeaveGroupRequest: self._handle_leave,
            p.OffsetCommitRequest: self._handle_commit,
            p.OffsetFetchRequest: self._handle_fetch,
            p.DeleteGroupsRequest: self._handle_delete_groups,
        }
        self.loading_partitions: set[int] = set()
        self.expired_groups: list[tuple[int, str]] = []  # (time, group) that went Dead by expiry
        self.deleted_groups: list[tuple[int, str]] = []
        # Every death of a group: (time, group, cause, generation, group tombstone written);
        # cause: "retention" | "admin" | "topic_deleted". A group may die and come back.
        self.deaths: list[tuple[int, str, str, int, bool]] = []
        # Topics deleted from the cluster's metadata: KafkaApis answers an OffsetCommit for their
        # partitions with UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees it, so a commit
        # still in flight when the topic goes never re-creates the tombstoned offsets.
        self.deleted_topics: set[str] = set()
        self.modern: ModernGroups | None = None

    # ------------------------------------------------------------------------------------------
    # helpers
    # ------------------------------------------------------------------------------------------
    def _trace(self, group_id: str, kind: str, **kw: object) -> None:
        if self.tracing:
            self.rt.trace(TraceEvent(self.rt.now, group_id, kind, **kw))  # type: ignore[arg-type]

    def _cause_text(self) -> str:
        c = self._cause
        if isinstance(c, str):
            return c
        member = getattr(c, "member_id", None)
        return f"{c.api}({member or (c.endpoint.name if c.endpoint else '?')})"

    def _history(self, group_id: str) -> GroupHistory:
        h = self.history.get(group_id)
        if h is None:
            h = self.history[group_id] = GroupHistory(created_ms=self.rt.now)
        return h

    def _transition(self, g: Group, target: str) -> None:
        _check_transition(g.group_id, GroupState(g.state), GroupState(target))  # raises on an illegal edge
        if self.tracing:
            self._trace(
                g.group_id,
                "transition",
                from_state=g.state,
                to_state=target,
                generation=g.generation,
                cause=self._cause_text(),
            )
        h = self._history(g.group_id)
        h.transitions += 1
        if target == STABLE:
            h.rebalances += 1
        elif target == PREPARING:
            h.rebalance_starts.append((self.rt.now, g.generation, g.state))
        elif target == EMPTY:
            h.went_empty += 1
        elif target == DEAD:
            h.dead_ms = self.rt.now
            h.commits += g.commits
            g.commits = 0
        h.final_state = target
        h.generation = g.generation
        g.state = target
        g.current_state_timestamp = self.rt.now

    def _new_op(self) -> int:
        self._op_seq += 1
        return self._op_seq

    def _respond(self, g_id: str, endpoint: p.Endpoint | None, resp: p.Response, member: str | None) -> None:
        if self.tracing:
            self._trace(
                g_id,
                "response",
                api=resp.api,
                error=resp.error,
                member=member,
                generation=getattr(resp, "generation_id", None),
            )
        self.rt.respond(endpoint, resp, g_id)

    def _generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        self._member_seq += 1
        return f"{instance_id or client_id}-{self._member_seq:08x}-0000-4000-8000-{self._member_seq:012x}"

    def _new_group(self, group_id: str) -> Group:
        g = Group(group_id, self.cfg.new_group_state, self.rt.now)
        self.groups[group_id] = g
        if self.cfg.coordinator == "new":
            # GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord (spec §4.2)
            self._append_group_value(
                g, GroupMetadataValue("", 0, None, None, (), self.rt.now, version=self.cfg.group_value_version)
            )
        return g

    def _is_loading(self, group_id: str) -> bool:
        return bool(self.loading_partitions) and self.log.partition(group_id) in self.loading_partitions

    def commits_of(self, group_id: str) -> int:
        """OffsetCommit requests stored for a group over the run (live and earlier incarnations)."""
        h = self.history.get(group_id)
        g = self.groups.get(group_id)
        return (h.commits if h else 0) + (g.commits if g else 0)

    # ------------------------------------------------------------------------------------------
    # records
    # ------------------------------------------------------------------------------------------
    def _append_group_value(self, g: Group, value: GroupMetadataValue | None) -> None:
        self.log.append(self.rt.now, GroupMetadataKey(g.group_id), value)
        g.stored = value
        self._history(g.group_id).group_records += 1
        self._trace(
            g.group_id,
            "record",
            api="GroupMetadata",
            generation=g.generation,
            detail="tombstone" if value is None else f"members={len(value.members)}",
        )

    def _store_group(self, g: Group, assignment: dict[str, bytes]) -> None:
        v = self.cfg.group_value_version
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=m.session_timeout,
                subscription=m.metadata(g.protocol) if g.protocol else b"",
                assignment=assignment.get(m.member_id, b""),
                rebalance_timeout=m.rebalance_timeout if v >= 1 else None,
                group_instance_id=m.group_instance_id if v >= 3 else None,
            )
            for m in g.members.values()
        )
        value = GroupMetadataValue(
            protocol_type=g.protocol_type or "",
            generation=g.generation,
            protocol=g.protocol,
            leader=g.leader,
            members=members,
            current_state_timestamp=g.current_state_timestamp if v >= 2 else None,
            version=v,
        )
        self._append_group_value(g, value)

    def _store_offsets(
        self, g: Group, offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...], retention_ms: int | None
    ) -> None:
        now = self.rt.now
        version = self.cfg.offset_value_version
        expire: int | None = None
        if self.cfg.expiry_rules == "pre-2.1":
            # 0.9 - 2.0 brokers: v1 always, expire = commit time + (request or broker) retention
            version = 1
            expire = now + (
                retention_ms if retention_ms is not None and retention_ms >= 0 else self.cfg.offsets_retention_ms
            )
        elif retention_ms is not None and retention_ms >= 0:
            version = 1  # spec §4.5: an explicit retention makes the broker write v1
            expire = now + retention_ms
        g.commits += 1
        self.log.append_offset_commits(now, g.group_id, offsets, expire, version)
        store = g.offsets
        keep_epoch = version >= 3
        for tp, offset, metadata, epoch in offsets:
            store[tp] = (offset, metadata, now, expire, epoch if keep_epoch else None)

    def _tombstone_offsets(self, g: Group, tps: Iterable[tuple[str, int]], cause: str) -> None:
        h = self._history(g.group_id)
        for tp in tps:
            g.offsets.pop(tp, None)
            self.log.append(self.rt.now, OffsetCommitKey(g.group_id, tp[0], tp[1]), None)
            h.offset_tombstones[cause] = h.offset_tombstones.get(cause, 0) + 1

    # ------------------------------------------------------------------------------------------
    # heartbeat / delayed operations
    # ------------------------------------------------------------------------------------------
    def _schedule_expiry(self, g: Group, m: Member, timeout_ms: int) -> None:
        """``completeAndScheduleNextExpiration``: a new deadline; a timer only when none is due."""
        m.hb_deadline = self.rt.now + timeout_ms
        if m.hb_timer_at < 0 or m.hb_timer_at > m.hb_deadline:
            self._arm_hb_timer(g, m)

    def _arm_hb_timer(self, g: Group, m: Member) -> None:
        at = m.hb_deadline
        m.hb_timer_at = at
        gid, mid = g.group_id, m.member_id
        self.rt.schedule(at, lambda: self._on_hb_timer(gid, mid, at))

    def _on_hb_timer(self, group_id: str, member_id: str, at: int) -> None:
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            return
        m = g.members.get(member_id)
        if m is None or m.hb_timer_at != at:
            return
        m.hb_timer_at = -1
        if m.hb_deadline > self.rt.now:  # the deadline moved: re-arm lazily
            self._arm_hb_timer(g, m)
            return
        # hasSatisfiedHeartbeat: new members can expire while awaiting join; others awaiting
        # join/sync are satisfied (and get a fresh deadline when the rebalance moves on).
        if not m.is_new and (m.awaiting_join or m.awaiting_sync):
            return
        self._cause = f"DelayedHeartbeat expired ({member_id})"
        self._trace(group_id, "timer", api="DelayedHeartbeat", member=member_id, cause="session timeout")
        self._remove_member_and_update(g, m)

    def _add_pending_expiry(self, g: Group, member_id: str, timeout_ms: int) -> None:
        gid = g.group_id

        def fire() -> None:
            grp = self.groups.get(gid)
            if grp is None or member_id not in grp.pending or grp.state == DEAD:
                return
            self._cause = f"pending member expired ({member_id})"
            self._trace(gid, "timer", api="DelayedHeartbeat", member=member_id, cause="pending member expiry")
            del grp.pending[member_id]
            if grp.state == PREPARING:
                self._check_join(grp)

        self.rt.schedule(self.rt.now + timeout_ms, fire)

    def _prepare_rebalance(self, g: Group) -> None:
        if g.state == COMPLETING:
            self._reset_and_propagate_assignment_error(g, p.REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        g.sync_op = 0
        initial = g.state == EMPTY and self.cfg.initial_rebalance_delay_ms > 0
        self._transition(g, PREPARING)
        g.rebalances += 1
        op = self._new_op()
        g.join_op = op
        g.join_initial = initial
        if initial:
            delay = self.cfg.initial_rebalance_delay_ms
            g.join_remaining = max(g.rebalance_timeout() - delay, 0)
            self._schedule_join_timer(g, op, delay)
        else:
            self._schedule_join_timer(g, op, g.rebalance_timeout())
            self._check_join(g)  # tryCompleteElseWatch

    def _maybe_prepare_rebalance(self, g: Group) -> None:
        if g.state in _CAN_REBALANCE:  # GroupMetadata.canRebalance
            self._prepare_rebalance(g)

    def _schedule_join_timer(self, g: Group, op: int, delay: int) -> None:
        gid = g.group_id
        self.rt.schedule(self.rt.now + delay, lambda: self._on_join_timer(gid, op))

    def _on_join_timer(self, group_id: str, op: int) -> None:
        g = self.groups.get(group_id)
        if g is None or g.join_op != op:
            return
        if g.join_initial:
            # InitialDelayedJoin.onExpire: extend while new members keep arriving.
            if g.new_member_added and g.join_remaining != 0:
                g.new_member_added = False
                delay = min(self.cfg.initial_rebalance_delay_ms, g.join_remaining)
                g.join_remaining = max(g.join_remaining - delay, 0)
                self._cause = "InitialDelayedJoin extended"
                self._trace(group_id, "timer", api="InitialDelayedJoin", cause="new member added; extend")
                new_op = self._new_op()
                g.join_op = new_op
                self._schedule_join_timer(g, new_op, delay)
                return
            self._cause = "InitialDelayedJoin expired"
            self._trace(group_id, "timer", api="InitialDelayedJoin", cause="delay elapsed")
        else:
            self._cause = "DelayedJoin expired"
            self._trace(group_id, "timer", api="DelayedJoin", cause="rebalance timeout")
        g.join_op = 0
        self._on_complete_join(g)

    def _check_join(self, g: Group) -> None:
        """``checkAndComplete`` on the join key: a plain DelayedJoin completes when all joined."""
        if g.join_op and not g.join_initial and g.state == PREPARING and g.all_joined:
            g.join_op = 0
            self._on_complete_join(g)

    def _on_complete_join(self, g: Group) -> None:
        for m in [m for m in g.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            self._remove(g, m.member_id)
        if g.state == DEAD:
            return
        if not self._maybe_elect_new_joined_leader(g) and g.members:
            op = self._new_op()
            g.join_op = op
            g.join_initial = False
            self._schedule_join_timer(g, op, g.rebalance_timeout())
            self._check_join(g)
            return
        g.new_member_added = False
        # initNextGeneration
        g.generation += 1
        if g.members:
            g.protocol = g.select_protocol()
            g.subscribed_topics = self._compute_subscribed_topics(g)
            self._transition(g, COMPLETING)
        else:
            g.protocol = None
            g.leader = None
            g.subscribed_topics = self._compute_subscribed_topics(g)
            self._transition(g, EMPTY)
        g.pending_sync.clear()
        if g.state == EMPTY:
            self._store_group(g, {})
            return
        for m in list(g.members.values()):
            is_leader = g.leader == m.member_id
            resp = p.JoinGroupResponse(
                error=p.NONE,
                member_id=m.member_id,
                generation_id=g.generation,
                protocol_type=g.protocol_type,
                protocol_name=g.protocol,
                leader=g.leader,
                members=self._member_list(g) if is_leader else (),
            )
            self._invoke_join(g, m, resp)
            self._schedule_expiry(g, m, m.session_timeout)
            m.is_new = False
            g.pending_sync.add(m.member_id)
        if not self.cfg.delayed_sync:
            return
        op = self._new_op()
        g.sync_op = op
        gid = g.group_id
        self.rt.schedule(self.rt.now + g.rebalance_timeout(), lambda: self._on_sync_timer(gid, op))

    def _on_sync_timer(self, group_id: str, op: int) -> None:
        """``DelayedSync`` expiry: members that never sent SyncGroup are removed."""
        g = self.groups.get(group_id)
        if g is None or g.sync_op != op or g.state not in (COMPLETING, STABLE) or not g.pending_sync:
            return
        self._cause = "DelayedSync expired"
        self._trace(group_id, "timer", api="DelayedSync", cause=f"no SyncGroup from {sorted(g.pending_sync)}")
        for mid in list(g.pending_sync):
            self._remove(g, mid)
        g.sync_op = 0
        self._prepare_rebalance(g)

    def _member_list(self, g: Group) -> tuple[p.JoinedMember, ...]:
        assert g.protocol is not None
        return tuple(
            p.JoinedMember(m.member_id, m.group_instance_id, m.metadata(g.protocol)) for m in g.members.values()
        )

    def _maybe_elect_new_joined_leader(self, g: Group) -> bool:
        if g.leader is None:
            return False
        leader = g.members.get(g.leader)
        if leader is not None and leader.awaiting_join:
            return True
        for m in g.members.values():
            if m.awaiting_join:
                g.leader = m.member_id
                return True
        return False

    def _compute_subscribed_topics(self, g: Group) -> frozenset[str] | None:
        if g.protocol_type != "consumer":
            return None
        if not g.members:
            return frozenset()
        if g.protocol is None:
            return None
        topics: set[str] = set()
        try:
            for m in g.members.values():
                topics.update(decode_subscription(m.metadata(g.protocol)).topics)
        except Exception:  # the broker parses v0 and gives up on failure (spec §5)
            return None
        return frozenset(topics)

    def _invoke_join(self, g: Group, m: Member, resp: p.JoinGroupResponse) -> None:
        if m.awaiting_join:
            ep = m.join_endpoint
            m.awaiting_join = False
            m.join_endpoint = None
            self._respond(g.group_id, ep, resp, m.member_id)

    def _invoke_sync(self, g: Group, m: Member, resp: p.SyncGroupResponse) -> bool:
        if m.awaiting_sync:
            ep = m.sync_endpoint
            m.awaiting_sync = False
            m.sync_endpoint = None
            self._respond(g.group_id, ep, resp, m.member_id)
            return True
        return False

    def _propagate_assignment(self, g: Group, error: str) -> None:
        for m in list(g.members.values()):
            resp = p.SyncGroupResponse(
                error=error,
                assignment=m.assignment,
                protocol_type=g.protocol_type if error == p.NONE else None,
                protocol_name=g.protocol if error == p.NONE else None,
            )
            if self._invoke_sync(g, m, resp):
                self._schedule_expiry(g, m, m.session_timeout)

    def _reset_and_propagate_assignment_error(self, g: Group, error: str) -> None:
        for m in g.members.values():
            m.assignment = b""
        self._propagate_assignment(g, error)

    def _add(self, g: Group, m: Member) -> None:
        if m.group_instance_id is not None:
            g.static[m.group_instance_id] = m.member_id
        if not g.members:
            g.protocol_type = m.protocol_type
        if g.leader is None:
            g.leader = m.member_id
        g.members[m.member_id] = m
        g.pending.pop(m.member_id, None)

    def _remove(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id, None)
        if m is not None and m.group_instance_id is not None:
            g.static.pop(m.group_instance_id, None)
        if g.leader == member_id:
            g.leader = next(iter(g.members), None)
        g.pending.pop(member_id, None)
        g.pending_sync.discard(member_id)

    def _remove_member_and_update(self, g: Group, m: Member) -> None:
        self._invoke_join(g, m, p.JoinGroupResponse(p.UNKNOWN_MEMBER_ID, ""))
        self._remove(g, m.member_id)
        if g.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(g)
        elif g.state == PREPARING:
            self._check_join(g)

    def _add_member_and_rebalance(self, g: Group, req: p.JoinGroupRequest, member_id: str) -> None:
        m = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        m.is_new = True
        if g.state == PREPARING and g.generation == 0:
            g.new_member_added = True
        self._add(g, m)
        m.awaiting_join = True
        m.join_endpoint = req.endpoint
        self._schedule_expiry(g, m, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(g)

    def _update_member(self, m: Member, req: p.JoinGroupRequest, endpoint: p.Endpoint | None, waiting: bool) -> None:
        m.protocols = req.protocols
        m.rebalance_timeout = req.rebalance_timeout_ms
        m.session_timeout = req.session_timeout_ms
        m.awaiting_join = waiting
        m.join_endpoint = endpoint if waiting else None

    def _update_member_and_rebalance(self, g: Group, m: Member, req: p.JoinGroupRequest) -> None:
        self._update_member(m, req, req.endpoint, True)
        self._maybe_prepare_rebalance(g)

    def _validate_current_member(self, g: Group, member_id: str, instance_id: str | None) -> str | None:
        if instance_id is not None:
            current = g.static.get(instance_id)
            if current is None:
                return p.UNKNOWN_MEMBER_ID
            if current != member_id:
                return p.FENCED_INSTANCE_ID
        if member_id not in g.members:
            return p.UNKNOWN_MEMBER_ID
        return None

    # ------------------------------------------------------------------------------------------
    # request handling
    # ------------------------------------------------------------------------------------------
    def handle(self, req: p.Request) -> None:
        """Handle one request (its response goes to ``req.endpoint`` through the runtime)."""
        self._cause = req
        if self.tracing:
            gid = req.group_ids[0] if isinstance(req, p.DeleteGroupsRequest) else req.group_id
            member = getattr(req, "member_id", None)
            self._trace(
                gid,
                "request",
                api=req.api,
                member=member or None,
                generation=getattr(req, "generation_id", None),
                detail=req.endpoint.name if req.endpoint is not None else None,
            )
        self._handlers[type(req)](req)

    def _handle_join(self, req: p.JoinGroupRequest) -> None:
        gid = req.group_id
        if self._is_loading(gid):
            self._respond(gid, req.endpoint, p.JoinGroupResponse(p.COORDINATOR_LOAD_IN_PROGRESS, req.member_id), None)
            return
        if not (
            self.cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= self.cfg.group_max_session_timeout_ms
        ):
            self._respond(gid, req.endpoint, p.JoinGroupResponse(p.INVALID_SESSION_TIMEOUT, req.member_id), None)
            return
        unknown = req.member_id == ""
        handed: dict[TP, OffsetEntry] | None = None
        if self.modern is not None and self.modern.owns(gid):
            # maybeDeleteEmptyConsumerGroup; a consumer group with members is not modelled
            handed = self.modern.replace_empty(gid) if unknown else None
            if handed is None:
                self._respond(gid, req.endpoint, p.JoinGroupResponse(p.COORDINATOR_NOT_AVAILABLE, req.member_id), None)
                return
        g = self.groups.get(gid)
        if g is None:
            if not unknown:
                self._respond(gid, req.endpoint, p.JoinGroupResponse(p.UNKNOWN_MEMBER_ID, req.member_id), None)
                return
            g = self._new_group(gid)
            if handed:
                g.offsets = handed
        if not self._accept_joining_member(g, req.member_id):
            self._remove(g, req.member_id)
            self._respond(gid, req.endpoint, p.JoinGroupResponse(p.GROUP_MAX_SIZE_REACHED, ""), None)
        elif unknown:
            self._join_new_member(g, req)
        else:
            self._join_current_member(g, req)
        if g.state == PREPARING:
            self._check_join(g)

    def _accept_joining_member(self, g: Group, member_id: str) -> bool:
        if g.state in (EMPTY, DEAD):
            return True
        if g.state == PREPARING:
            m = g.members.get(member_id)
            awaiting = sum(1 for x in g.members.values() if x.awaiting_join)
            return (m is not None and m.awaiting_join) or awaiting < self.cfg.group_max_size
        return member_id in g.members or len(g.members) < self.cfg.group_max_size

    def _join_new_member(self, g: Group, req: p.JoinGroupRequest) -> None:
        if g.state == DEAD:
            self._respond(g.group_id, req.endpoint, p.JoinGroupResponse(p.COORDINATOR_NOT_AVAILABLE, ""), None)
            return
        if not g.supports(req.protocol_type, {n for n, _ in req.protocols}):
            self._respond(g.group_id, req.endpoint, p.JoinGroupResponse(p.INCONSISTENT_GROUP_PROTOCOL, ""), None)
            return
        new_id = self._generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old = g.static.get(req.group_instance_id)
            if old is not None:
                self._update_static_member_and_rebalance(g, old, new_id, req)
            else:
                self._add_member_and_rebalance(g, req, new_id)
        elif req.require_known_member_id:
            g.pending[new_id] = None
            self._add_pending_expiry(g, new_id, req.session_timeout_ms)
            self._respond(g.group_id, req.endpoint, p.JoinGroupResponse(p.MEMBER_ID_REQUIRED, new_id), new_id)
        else:
            self._add_member_and_rebalance(g, req, new_id)

    def _update_static_member_and_rebalance(self, g: Group, old_id: str, new_id: str, req: p.JoinGroupRequest) -> None:
        current_leader = g.leader
        # replaceStaticMember: fence whoever waits under the old id, then re-key.
        m = g.members.pop(old_id)
        self._invoke_join(g, m, p.JoinGroupResponse(p.FENCED_INSTANCE_ID, old_id))
        self._invoke_sync(g, m, p.SyncGroupResponse(p.FENCED_INSTANCE_ID))
        m.member_id = new_id
        g.members[new_id] = m
        if g.leader == old_id:
            g.leader = new_id
        # The pending-sync set is left alone (as replaceStaticMember does): a follower that restarts
        # after the leader's SyncGroup but before its own stays pending under its old member id, so
        # the DelayedSync expires and rebalances the group although the new id synced.
        assert req.group_instance_id is not None
        g.static[req.group_instance_id] = new_id
        m.hb_timer_at = -1
        self._schedule_expiry(g, m, m.session_timeout)
        self._update_member(m, req, req.endpoint, True)
        if g.state == STABLE:
            if g.protocol == g.select_protocol():
                # No rebalance: persist the new member id (same generation) and answer.
                self._store_group(g, {x.member_id: x.assignment for x in g.members.values()})
                resp = p.JoinGroupResponse(
                    error=p.NONE,
                    member_id=new_id,
                    generation_id=g.generation,
                    protocol_type=g.protocol_type,
                    protocol_name=g.protocol,
                    leader=current_leader if req.version < 9 else g.leader,
                    members=self._member_list(g) if (req.version >= 9 and g.leader == new_id) else (),
                    skip_assignment=req.version >= 9 and g.leader == new_id,
                )
                self._invoke_join(g, m, resp)
            else:
                self._maybe_prepare_rebalance(g)
        elif g.state == COMPLETING:
            self._prepare_rebalance(g)

    def _join_current_member(self, g: Group, req: p.JoinGroupRequest) -> None:
        gid = g.group_id
        if g.state == DEAD:
            self._respond(gid, req.endpoint, p.JoinGroupResponse(p.COORDINATOR_NOT_AVAILABLE, req.member_id), None)
            return
        if not g.supports(req.protocol_type, {n for n, _ in req.protocols}):
            self._respond(gid, req.endpoint, p.JoinGroupResponse(p.INCONSISTENT_GROUP_PROTOCOL, req.member_id), None)
            return
        if req.member_id in g.pending:
            self._add_member_and_rebalance(g, req, req.member_id)
            return
        err = self._validate_current_member(g, req.member_id, req.group_instance_id)
        if err is not None:
            self._respond(gid, req.endpoint, p.JoinGroupResponse(err, req.member_id), req.member_id)
            return
        m = g.members[req.member_id]
        if g.state == PREPARING:
            self._update_member_and_rebalance(g, m, req)
        elif g.state == COMPLETING:
            if m.matches(req.protocols):
                self._respond(
                    gid,
                    req.endpoint,
                    self._current_generation_response(g, m.member_id, with_members=g.leader == m.member_id),
                    m.member_id,
                )
            else:
                self._update_member_and_rebalance(g, m, req)
        elif g.state == STABLE:
            if g.leader == m.member_id or not m.matches(req.protocols):
                self._update_member_and_rebalance(g, m, req)
            else:
                self._respond(gid, req.endpoint, self._current_generation_response(g, m.member_id, False), m.member_id)
        else:
            self._respond(gid, req.endpoint, p.JoinGroupResponse(p.UNKNOWN_MEMBER_ID, req.member_id), req.member_id)

    def _current_generation_response(self, g: Group, member_id: str, with_members: bool) -> p.JoinGroupResponse:
        return p.JoinGroupResponse(
            error=p.NONE,
            member_id=member_id,
            generation_id=g.generation,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol,
            leader=g.leader,
            members=self._member_list(g) if with_members else (),
        )

    def _handle_sync(self, req: p.SyncGroupRequest) -> None:
        gid = req.group_id
        if self._is_loading(gid):
            self._respond(gid, req.endpoint, p.SyncGroupResponse(p.REBALANCE_IN_PROGRESS), req.member_id)
            return
        g = self.groups.get(gid)
        if g is None:
            self._respond(gid, req.endpoint, p.SyncGroupResponse(p.UNKNOWN_MEMBER_ID), req.member_id)
            return
        err: str | None
        if g.state == DEAD:
            err = p.COORDINATOR_NOT_AVAILABLE
        else:
            err = self._validate_current_member(g, req.member_id, req.group_instance_id)
            if err is None:
                if req.generation_id != g.generation:
                    err = p.ILLEGAL_GENERATION
                elif (req.protocol_type is not None and req.protocol_type != g.protocol_type) or (
                    req.protocol_name is not None and req.protocol_name != g.protocol
                ):
                    err = p.INCONSISTENT_GROUP_PROTOCOL
        if err is not None:
            self._respond(gid, req.endpoint, p.SyncGroupResponse(err), req.member_id)
            return
        if g.state == EMPTY:
            self._respond(gid, req.endpoint, p.SyncGroupResponse(p.UNKNOWN_MEMBER_ID), req.member_id)
        elif g.state == PREPARING:
            self._respond(gid, req.endpoint, p.SyncGroupResponse(p.REBALANCE_IN_PROGRESS), req.member_id)
        elif g.state == COMPLETING:
            m = g.members[req.member_id]
            m.awaiting_sync = True
            m.sync_endpoint = req.endpoint
            g.pending_sync.discard(req.member_id)
            if g.leader == req.member_id:
                given = dict(req.assignments)
                assignment = {mid: given.get(mid, b"") for mid in g.members}
                self._store_group(g, assignment)
                for x in g.members.values():
                    x.assignment = assignment[x.member_id]
                self._propagate_assignment(g, p.NONE)
                self._transition(g, STABLE)
        else:  # Stable: answer directly with the stored assignment
            g.pending_sync.discard(req.member_id)
            m = g.members[req.member_id]
            self._respond(
                gid, req.endpoint, p.SyncGroupResponse(p.NONE, m.assignment, g.protocol_type, g.protocol), req.member_id
            )
            self._schedule_expiry(g, m, m.session_timeout)

    def _handle_heartbeat(self, req: p.HeartbeatRequest) -> None:
        gid = req.group_id
        if self._is_loading(gid):
            self._respond(gid, req.endpoint, p.HeartbeatResponse(p.NONE), req.member_id)
            return
        g = self.groups.get(gid)
        err: str
        if g is None:
            err = p.UNKNOWN_MEMBER_ID
        elif g.state == DEAD:
            err = p.COORDINATOR_NOT_AVAILABLE
        else:
            v = self._validate_current_member(g, req.member_id, req.group_instance_id)
            if v is not None:
                err = v
            elif req.generation_id != g.generation:
                err = p.ILLEGAL_GENERATION
            elif g.state == EMPTY:
                err = p.UNKNOWN_MEMBER_ID
            else:
                m = g.members[req.member_id]
                self._schedule_expiry(g, m, m.session_timeout)
                err = p.REBALANCE_IN_PROGRESS if g.state == PREPARING else p.NONE
        self._respond(gid, req.endpoint, p.HeartbeatResponse(err), req.member_id)

    def _handle_leave(self, req: p.LeaveGroupRequest) -> None:
        gid = req.group_id
        g = self.groups.get(gid)
        if g is None:
            self._respond(
                gid,
                req.endpoint,
                p.LeaveGroupResponse(p.NONE, tuple((mid, p.UNKNOWN_MEMBER_ID) for mid, _ in req.members)),
                None,
            )
            return
        if g.state == DEAD:
            self._respond(gid, req.endpoint, p.LeaveGroupResponse(p.COORDINATOR_NOT_AVAILABLE), None)
            return
        errors: list[tuple[str, str]] = []
        for member_id, instance_id in req.members:
            if member_id == "":
                current = g.static.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append((member_id, p.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_member_and_update(g, g.members[current])
                    errors.append((member_id, p.NONE))
            elif member_id in g.pending:
                self._remove(g, member_id)
                if g.state == PREPARING:
                    self._check_join(g)
                errors.append((member_id, p.NONE))
            else:
                err = self._validate_current_member(g, member_id, instance_id)
                if err is None:
                    self._remove_member_and_update(g, g.members[member_id])
                    errors.append((member_id, p.NONE))
                else:
                    errors.append((member_id, err))
        first_err = next((e for _, e in errors if e != p.NONE), p.NONE)
        self._respond(gid, req.endpoint, p.LeaveGroupResponse(first_err, tuple(errors)), None)

    def _handle_commit(self, req: p.OffsetCommitRequest) -> None:
        self._commit(
            req.group_id,
            req.member_id,
            req.generation_id,
            req.group_instance_id,
            req.offsets,
            req.retention_time_ms,
            req.endpoint,
        )

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...],
        endpoint: p.Endpoint | None,
    ) -> None:
        """OffsetCommit without building a request object (the generator's fast lane, same rules)."""
        self._cause = "OffsetCommit"
        if self.tracing:
            self._trace(
                group_id,
                "request",
                api="OffsetCommit",
                member=member_id or None,
                generation=generation_id,
                detail=endpoint.name if endpoint is not None else None,
            )
        self._commit(group_id, member_id, generation_id, group_instance_id, offsets, None, endpoint)

    def _commit(
        self,
        gid: str,
        member_id: str,
        generation_id: int,
        instance_id: str | None,
        offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...],
        retention_ms: int | None,
        endpoint: p.Endpoint | None,
    ) -> None:
        if self.loading_partitions and self._is_loading(gid):
            tps = tuple(o[0] for o in offsets)
            self._respond(gid, endpoint, p.OffsetCommitResponse(p.COORDINATOR_LOAD_IN_PROGRESS, tps), member_id)
            return
        if self.modern is not None and self.modern.owns(gid):
            modern_err = self.modern.commit(gid, member_id, generation_id, offsets, True)
            resp = p.OffsetCommitResponse(modern_err, tuple(o[0] for o in offsets))
            self._respond(gid, endpoint, resp, member_id or None)
            return
        if self.deleted_topics:
            kept = tuple(o for o in offsets if o[0][0] not in self.deleted_topics)
            if len(kept) != len(offsets):
                if not kept:
                    tps = tuple(o[0] for o in offsets)
                    self._respond(
                        gid, endpoint, p.OffsetCommitResponse(p.UNKNOWN_TOPIC_OR_PARTITION, tps), member_id or None
                    )
                    return
                offsets = kept
        g = self.groups.get(gid)
        if g is None:
            if generation_id < 0:
                g = Group(gid, EMPTY, self.rt.now)  # a simple group: no record at creation
                self.groups[gid] = g
            else:
                tps = tuple(o[0] for o in offsets)
                self._respond(gid, endpoint, p.OffsetCommitResponse(p.ILLEGAL_GENERATION, tps), member_id)
                return
        err: str | None = None
        state = g.state
        if state == DEAD:
            err = p.COORDINATOR_NOT_AVAILABLE
        elif generation_id < 0 and state == EMPTY:
            err = None
        elif generation_id >= 0 or member_id != "" or instance_id is not None:
            err = self._validate_current_member(g, member_id, instance_id)
            if err is None and generation_id != g.generation:
                err = p.ILLEGAL_GENERATION
        elif state != EMPTY:
            err = p.UNKNOWN_MEMBER_ID
        if err is None and state == COMPLETING:
            err = p.REBALANCE_IN_PROGRESS
        if err is not None:
            tps = tuple(o[0] for o in offsets)
            self._respond(gid, endpoint, p.OffsetCommitResponse(err, tps), member_id or None)
            return
        if state in (STABLE, PREPARING):
            m = g.members[member_id]
            # completeAndScheduleNextHeartbeatExpiration, inlined (hot path)
            m.hb_deadline = deadline = self.rt.now + m.session_timeout
            if m.hb_timer_at < 0 or m.hb_timer_at > deadline:
                self._arm_hb_timer(g, m)
        self._store_offsets(g, offsets, retention_ms)
        self._respond(gid, endpoint, _COMMIT_OK, member_id or None)

    def _handle_fetch(self, req: p.OffsetFetchRequest) -> None:
        g = self.groups.get(req.group_id)
        out: list[tuple[tuple[str, int], int, str]] = []
        if g is not None:
            for tp, e in sorted(g.offsets.items()):
                if req.partitions is None or tp in req.partitions:
                    out.append((tp, e[E_OFFSET], e[E_METADATA]))
        self._respond(req.group_id, req.endpoint, p.OffsetFetchResponse(p.NONE, tuple(out)), None)

    def _handle_delete_groups(self, req: p.DeleteGroupsRequest) -> None:
        errors: list[tuple[str, str]] = []
        for gid in req.group_ids:
            g = self.groups.get(gid)
            if self.modern is not None and self.modern.owns(gid):
                errors.append((gid, self.modern.delete_group(gid)))
            elif g is None or g.state == DEAD:
                errors.append((gid, p.GROUP_ID_NOT_FOUND))
            elif g.state != EMPTY:
                errors.append((gid, p.NON_EMPTY_GROUP))
            else:
                self._transition(g, DEAD)
                self._tombstone_offsets(g, sorted(g.offsets), "group_deleted")
                written = self._write_group_tombstone(g)
                del self.groups[gid]
                self.deleted_groups.append((self.rt.now, gid))
                self.deaths.append((self.rt.now, gid, "admin", g.generation, written))
                errors.append((gid, p.NONE))
        self._respond(
            req.group_ids[0] if req.group_ids else "", req.endpoint, p.DeleteGroupsResponse(tuple(errors)), None
        )

    def _write_group_tombstone(self, g: Group) -> bool:
        # Old coordinator (GroupMetadataManager.cleanupGroupMetadata): no tombstone at generation
        # 0 ("this group is only using Kafka for offset storage"). New coordinator
        # (ClassicGroup.createGroupTombstoneRecords): always, simple groups included.
        if self.cfg.coordinator == "new" or g.generation > 0:
            self._append_group_value(g, None)
            return True
        return False

    # ------------------------------------------------------------------------------------------
    # housekeeping: retention check, topic deletion, failover
    # ------------------------------------------------------------------------------------------
    def cleanup_expired_offsets(self, partitions: Iterable[int] | None = None) -> None:
        """One run of the retention check (``cleanupGroupMetadata``, spec §8): over every loaded
        group, or over the groups of some ``__consumer_offsets`` partitions (the partitions whose
        check is due: per broker in the old coordinator, per shard in Kafka 4's
        ``GroupCoordinatorShard.cleanupGroupMetadata``)."""
        now = self.rt.now
        retention = self.cfg.offsets_retention_ms
        self._cause = "offsets retention check"
        part_of = self.log.partition
        only = None if partitions is None else frozenset(partitions)
        for gid in list(self.groups):
            if only is not None and part_of(gid) not in only:
                continue
            g = self.groups[gid]
            expired: list[tuple[str, int]] = []
            rules = self.cfg.expiry_rules
            consumer_rule_states = (STABLE,) if rules == "current" else (STABLE, PREPARING, COMPLETING)
            if rules == "pre-2.1":
                # @2.0.0 GroupMetadata.removeExpiredOffsets: every offset carries its expire
                # timestamp and expires strictly after it, whatever the group state.
                for tp, e in g.offsets.items():
                    exp = e[E_EXPIRE_TS]
                    if exp is not None and exp < now:
                        expired.append(tp)
            elif g.protocol_type is not None and g.state == EMPTY:
                base_ts = g.current_state_timestamp
                for tp, e in g.offsets.items():
                    if self._expired(e, now, retention, base_ts if base_ts is not None else e[E_COMMIT_TS]):
                        expired.append(tp)
            elif (
                rules != "2.1-2.3"
                and g.protocol_type == "consumer"
                and g.subscribed_topics is not None
                and g.state in consumer_rule_states
            ):
                for tp, e in g.offsets.items():
                    if tp[0] not in g.subscribed_topics and self._expired(e, now, retention, e[E_COMMIT_TS]):
                        expired.append(tp)
            elif g.protocol_type is None:
                for tp, e in g.offsets.items():
                    if self._expired(e, now, retention, e[E_COMMIT_TS]):
                        expired.append(tp)
            if expired:
                self._trace(gid, "timer", api="OffsetExpiration", detail=f"{len(expired)} offsets expired")
            self._tombstone_offsets(g, sorted(expired), "retention")
            if g.state == EMPTY and not g.offsets:
                self._transition(g, DEAD)
                written = self._write_group_tombstone(g)
                del self.groups[gid]
                self.expired_groups.append((now, gid))
                self.deaths.append((now, gid, "retention", g.generation, written))
        if self.modern is not None:
            self.modern.cleanup(only)

    @staticmethod
    def _expired(e: OffsetEntry, now: int, retention: int, base: int) -> bool:
        expire = e[E_EXPIRE_TS]
        if expire is not None:
            return now >= expire
        return now - base >= retention

    def delete_topic(self, topic: str) -> None:
        """``handleDeletedPartitions``: tombstone every group's offsets of the topic.

        The old coordinator does it through ``cleanupGroupMetadata`` over every cached group, so
        an Empty group left without offsets (whether or not it had any of the topic's) goes Dead
        in the same step, with a group tombstone when its generation is > 0. The new coordinator
        (``OffsetMetadataManager.onPartitionsDeleted``) only writes the offset tombstones; such a
        group dies at its shard's next retention check.
        """
        self._cause = f"topic {topic} deleted"
        self.deleted_topics.add(topic)
        for gid, g in list(self.groups.items()):
            tps = sorted(tp for tp in g.offsets if tp[0] == topic)
            if tps:
                self._trace(g.group_id, "timer", api="TopicDeletion", detail=f"{topic}: {len(tps)} offsets")
                self._tombstone_offsets(g, tps, "topic_deleted")
            if self.cfg.coordinator == "old" and g.state == EMPTY and not g.offsets:
                self._transition(g, DEAD)
                written = self._write_group_tombstone(g)
                del self.groups[gid]
                self.deaths.append((self.rt.now, gid, "topic_deleted", g.generation, written))
        if self.modern is not None:
            self.modern.delete_topic(topic)

    def surrender(self, group_id: str) -> dict[TP, OffsetEntry]:
        """The group becomes a consumer group (KIP-848 conversion): it leaves this coordinator
        (Dead here, no death recorded) and hands over its offsets."""
        g = self.groups[group_id]
        self._cause = "converted to a consumer group"
        self._transition(g, DEAD)
        del self.groups[group_id]
        return dict(g.offsets)

    def unload_partition(self, partition: int) -> dict[str, tuple[GroupMetadataValue | None, dict[TP, OffsetEntry]]]:
        """Resignation (``onGroupUnloaded``): groups go Dead, waiting members get NOT_COORDINATOR.

        Returns what the partition's log holds for each group (its last group record and its
        offsets): the same thing a replay of the partition gives (``load_snapshot``).
        """
        self._cause = f"coordinator failover (partition {partition})"
        unloaded: dict[str, tuple[GroupMetadataValue | None, dict[TP, OffsetEntry]]] = {}
        for gid in list(self.groups):
            if self.log.partition(gid) != partition:
                continue
            g = self.groups[gid]
            for m in g.members.values():
                if m.awaiting_join:
                    self._invoke_join(g, m, p.JoinGroupResponse(p.NOT_COORDINATOR, m.member_id))
                if m.awaiting_sync:
                    self._invoke_sync(g, m, p.SyncGroupResponse(p.NOT_COORDINATOR))
            self._transition(g, DEAD)
            h = self._history(gid)
            h.dead_ms = None  # unloaded, not dead: the new coordinator loads it again
            h.failovers += 1
            g.join_op = 0
            g.sync_op = 0
            del self.groups[gid]
            unloaded[gid] = (g.stored, dict(g.offsets))
        self.loading_partitions.add(partition)
        return unloaded

    def load_partition(self, partition: int, records: Iterable[LogRecord]) -> None:
        """The new coordinator loads the partition: each group's records go through the replay
        engine (``coordinator_core.loader.replay``, spec §10) and the result is materialised."""
        by_group: dict[str, list[LogRecord]] = {}
        for r in records:
            if self.modern is not None and r.group is not None and self.modern.owns(r.group):
                continue  # a consumer group: not this coordinator's
            if r.group is not None and isinstance(r.key, (OffsetCommitKey, GroupMetadataKey)):
                by_group.setdefault(r.group, []).append(r)
        groups: dict[str, tuple[GroupMetadataValue | None, dict[TP, OffsetEntry]]] = {}
        for gid, recs in by_group.items():
            snap = replay(new_snapshot(gid), recs, assume_log_start=True, event_kinds=()).snapshot
            offsets: dict[TP, OffsetEntry] = {
                tp: (v.offset, v.metadata, v.commit_timestamp, v.expire_timestamp, v.leader_epoch)
                for tp, (v, _lp, _lo, _ts) in snap.offsets.items()
            }
            value = None
            if snap.exists and snap.has_metadata:
                value = GroupMetadataValue(
                    protocol_type=snap.protocol_type or "",
                    generation=snap.generation,
                    protocol=snap.protocol,
                    leader=snap.leader,
                    members=snap.members,
                    current_state_timestamp=snap.current_state_timestamp,
                    version=self.cfg.group_value_version,
                )
            groups[gid] = (value, offsets)
        self.load_snapshot(partition, groups)

    def load_snapshot(
        self, partition: int, groups: dict[str, tuple[GroupMetadataValue | None, dict[TP, OffsetEntry]]]
    ) -> None:
        """Materialise groups from their last group record and offsets (the loader's end step)."""
        now = self.rt.now
        for gid in sorted(groups):
            value, gofs = groups[gid]
            if value is None and not gofs:
                continue
            if value is None:
                g = Group(gid, EMPTY, None)
            else:
                g = Group(
                    gid,
                    STABLE if value.members else EMPTY,
                    value.current_state_timestamp,
                    generation=value.generation,
                    protocol_type=value.protocol_type or None,
                    protocol=value.protocol,
                    leader=value.leader,
                )
                for mm in value.members:
                    m = Member(
                        mm.member_id,
                        mm.group_instance_id,
                        mm.client_id,
                        mm.client_host,
                        mm.session_timeout,
                        mm.effective_rebalance_timeout,
                        value.protocol_type,
                        ((value.protocol or "", mm.subscription),),
                        assignment=mm.assignment,
                    )
                    g.members[m.member_id] = m
                    if m.group_instance_id is not None:
                        g.static[m.group_instance_id] = m.member_id
                g.subscribed_topics = self._compute_subscribed_topics(g)
            g.offsets = dict(gofs)
            g.stored = value
            self.groups[gid] = g
            h = self._history(gid)
            h.final_state = g.state
            h.generation = g.generation
            self._trace(
                gid,
                "timer",
                api="GroupLoad",
                to_state=g.state,
                generation=g.generation,
                cause=f"coordinator loaded partition {partition}",
            )
            for m in g.members.values():
                m.hb_deadline = now + m.session_timeout
                self._arm_hb_timer(g, m)
        self.loading_partitions.discard(partition)
