"""A consumer that behaves like the Java client's ``ConsumerCoordinator`` (seeds 000, 002, 003).

Rules:
- join → (the leader runs the selected assignor) → sync → heartbeat every
  ``heartbeat_interval_ms`` → commit (auto-commit cadence, before rejoining, on close) → rejoin
  on REBALANCE_IN_PROGRESS or member errors. Eager assignors revoke everything before joining;
  ``cooperative-sticky`` revokes only what moves, then rejoins (KIP-429).
- ``onPartitionsRevoked`` / ``onPartitionsAssigned`` are recorded in the trace (kind ``client``)
  and in ``history``.
- ``client_version``: ``2.4+`` (KIP-429 clients: an eager member revokes what it owns before
  rejoining, a member kicked out of the group loses its partitions, ``onPartitionsLost``) or
  ``pre-2.4`` (the seed walk-throughs' clients: ``onJoinPrepare`` runs once per rebalance the
  member takes part in, calling ``onPartitionsRevoked`` with whatever it holds, an empty set on
  the first join; a retried JoinGroup of the same rebalance does not call it again; eager only).
- close: commit, revoke, LeaveGroup (dynamic members only: static members never leave, KIP-345);
  crash: silent; pause ``gc``: silent for a while (responses wait); pause ``slow_poll``: the
  heartbeat thread keeps going but leaves the group once ``max_poll_interval_ms`` passes
  without a poll, and the consumer rejoins after the poll returns.
- A ``manual`` client sends nothing by itself: a scenario drives it request by request.
- Consumed offsets are a pure function of (topic, partition, time), so every consumer of a
  partition commits monotonic offsets without sharing state; a partition may go idle (no more
  records from a time on). ``commit_changed_only`` clients (librdkafka, Kafka Streams) commit only
  the partitions consumed since their last commit, so an idle partition is committed once more
  and then never again; Java clients commit every assigned partition on each auto-commit.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from coordinator_core.codec.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from coordinator_core.codec.records import Assignment, Subscription, TopicPartitions
from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.assignors import (
    COOPERATIVE,
    MemberSubscription,
    assign,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    member_data,
)
from coordinator_core.simulator.trace import TraceEvent

TP = tuple[str, int]


class ClientRuntime(Protocol):
    now: int
    topics: dict[str, int]

    def schedule(self, at_ms: int, fn: Callable[[], None]) -> None: ...

    def send(self, request: p.Request, delay_ms: int) -> None: ...

    def trace(self, event: TraceEvent) -> None: ...

    start_ms: int

    def position(self, tp: TP, now_ms: int) -> int: ...

    def rate_per_ms(self, tp: TP) -> float: ...

    def elapsed_cap(self, tp: TP) -> float: ...

    def commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: tuple[tuple[TP, int, str, int | None], ...],
        endpoint: p.Endpoint | None,
    ) -> bool: ...


@dataclass(slots=True)
class ClientConfig:
    """Consumer settings (Kafka's names, ``.`` → ``_``)."""

    client_id: str
    group_id: str
    topics: tuple[str, ...] = ()
    assignors: tuple[str, ...] = ("range",)
    group_instance_id: str | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    join_group_version: int = 7
    subscription_version: int = 1
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    network_delay_ms: int = 0
    client_host: str = "/127.0.0.1"
    manual: bool = False
    group_management: bool = True
    assigned_partitions: tuple[TP, ...] = ()  # for group_management = False (assign())
    commit_metadata: str = ""
    leader_epoch: int | None = None
    # "consumer" (ConsumerProtocol blobs) or "connect": a Kafka Connect worker (ConnectProtocol
    # v0 "default": opaque-to-the-broker worker state and connector assignments, no commits)
    protocol_type: str = "consumer"
    connectors: int = 3
    # librdkafka / Kafka Streams style: commit only the partitions consumed since the last commit
    # (an idle partition's offset is committed once and then never again); the Java client
    # commits every assigned partition's position on each auto-commit.
    commit_changed_only: bool = False
    client_version: str = "2.4+"  # "2.4+" | "pre-2.4" (see the module rules)


class Connection:
    """One process lifetime's connection: responses to a dead process are never delivered."""

    __slots__ = ("cfg", "client", "life", "name")

    def __init__(self, client: ConsumerClient, life: int) -> None:
        self.client = client
        self.life = life
        self.name = client.name
        self.cfg = client.cfg

    def on_response(self, response: p.Response) -> None:
        if self.client.life == self.life and self.client.running:
            self.client.on_response(response)


class ConsumerClient:
    """One simulated consumer (see module docstring)."""

    def __init__(self, name: str, config: ClientConfig, runtime: ClientRuntime) -> None:
        self.name = name
        self.cfg = config
        self.rt = runtime
        self.member_id = ""
        self.generation = -1
        self.state = "UNJOINED"  # UNJOINED | JOINING | SYNCING | STABLE | CLOSED | CRASHED
        self.running = False
        self.assignment: list[TP] = []
        self.protocol: str | None = None
        self.is_leader = False
        self.epoch = 0  # bumps cancel this client's timers
        self.life = 0  # bumps on start/stop/crash: cancels even durable timers
        self.conn = Connection(self, self.life)
        self.paused_until = -1
        self.poll_blocked_until = -1
        self.drop_next: dict[str, int] = {}
        self.delay_next: dict[str, int] = {}
        self.history: list[tuple[int, str, tuple[TP, ...]]] = []
        self.join_count = 0
        self.last_join: p.JoinGroupResponse | None = None
        self.rejoin_needed = False
        self.fenced = False
        self._commit_cache: tuple[list[TP], list[tuple[TP, float, float]]] = ([], [])
        self._committed: dict[TP, int] = {}  # commit_changed_only: the last offset known committed
        # The assignor objects' memory (they live as long as the process): StickyAssignor's
        # memberAssignment + generation, CooperativeStickyAssignor's generation; set by
        # onAssignment for the protocol the group selected only.
        self.sticky_assignment: list[TP] | None = None
        self.needs_join_prepare = True  # pre-2.4 AbstractCoordinator.needsJoinPrepare
        self.sticky_generation = -1
        self.cooperative_generation = -1

    # ------------------------------------------------------------------------------------------
    def _trace(self, api: str, detail: str | None = None, error: str | None = None) -> None:
        self.rt.trace(
            TraceEvent(
                self.rt.now,
                self.cfg.group_id,
                "client",
                member=self.member_id or None,
                api=api,
                detail=f"{self.name}: {detail}" if detail else self.name,
                error=error,
            )
        )

    def _send(self, req: p.Request) -> None:
        delay = self.cfg.network_delay_ms
        if self.delay_next:
            delay += self.delay_next.pop(req.api, 0)
        self.rt.send(req, delay)

    def _timer(self, at: int, fn: Callable[[], None], durable: bool = False) -> None:
        """Run ``fn`` at ``at`` unless the client restarted (``durable``) or moved on (epoch)."""
        epoch = self.epoch
        life = self.life

        def fire() -> None:
            if (not durable and self.epoch != epoch) or self.life != life or not self.running:
                return
            if self.rt.now < self.paused_until:
                self.rt.schedule(self.paused_until, fire)
                return
            fn()

        self.rt.schedule(at, fire)

    @property
    def pre_2_4(self) -> bool:
        return self.cfg.client_version == "pre-2.4"

    @property
    def cooperative(self) -> bool:
        if self.pre_2_4:
            return False  # RebalanceProtocol.COOPERATIVE came with KIP-429 (2.4)
        return self.protocol in COOPERATIVE if self.protocol else all(a in COOPERATIVE for a in self.cfg.assignors)

    # ------------------------------------------------------------------------------------------
    # lifecycle actions
    # ------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Subscribe and poll: the first JoinGroup (or, without group management, commits)."""
        if self.running:
            return
        self.running = True
        self.fenced = False
        self.epoch += 1
        self.life += 1
        self.conn = Connection(self, self.life)
        self.needs_join_prepare = True
        if not self.cfg.group_management:
            self.assignment = list(self.cfg.assigned_partitions)
            self.state = "STABLE"
            self._schedule_auto_commit()
            return
        if not self.cfg.manual:
            self._join()

    def stop(self) -> None:
        """``KafkaConsumer.close()``: commit, revoke, leave (dynamic members only)."""
        if not self.running:
            return
        if self.cfg.enable_auto_commit and self.assignment:
            self.commit()
        if self.assignment:
            self._revoked(list(self.assignment))
        if self.cfg.group_management and self.cfg.group_instance_id is None and self.member_id and not self.fenced:
            self._send(p.LeaveGroupRequest(self.cfg.group_id, ((self.member_id, None),), endpoint=self.conn))
        self._reset(closed=True)

    def crash(self) -> None:
        """The process dies: no more requests, nothing sent."""
        self._reset(closed=False)
        self.state = "CRASHED"

    def _reset(self, closed: bool) -> None:
        self.running = False
        self.epoch += 1
        self.life += 1
        self.state = "CLOSED" if closed else "CRASHED"
        self.assignment = []
        self.member_id = ""
        self.generation = -1
        self.is_leader = False

    def pause(self, duration_ms: int, kind: str = "gc") -> None:
        """``gc``: the whole process stalls; ``slow_poll``: only the poll loop is stuck."""
        end = self.rt.now + duration_ms
        if kind == "gc":
            self.paused_until = max(self.paused_until, end)
            self._trace("pause", f"gc pause for {duration_ms} ms")
            return
        self.poll_blocked_until = max(self.poll_blocked_until, end)
        self._trace("pause", f"slow poll for {duration_ms} ms")
        deadline = self.rt.now + self.cfg.max_poll_interval_ms
        if duration_ms > self.cfg.max_poll_interval_ms:
            self._timer(deadline, self._poll_timeout, durable=True)
        self._timer(end, self._poll_returns, durable=True)

    def _poll_timeout(self) -> None:
        # AbstractCoordinator.HeartbeatThread: "consumer poll timeout has expired" → leave.
        self._trace("pollTimeout", "max.poll.interval.ms exceeded")
        if self.cfg.group_instance_id is None and self.member_id:
            self._send(p.LeaveGroupRequest(self.cfg.group_id, ((self.member_id, None),), endpoint=self.conn))
        self.member_id = ""
        self.generation = -1
        self.state = "UNJOINED"
        self.rejoin_needed = True

    def _poll_returns(self) -> None:
        if self.rejoin_needed and self.state in ("UNJOINED", "STABLE"):
            self._join()

    def subscribe(self, topics: tuple[str, ...]) -> None:
        """Change the subscription: the next poll rejoins with the new metadata."""
        self.cfg.topics = tuple(sorted(topics))
        if self.running and self.state == "STABLE":
            self._request_rejoin("subscription changed")

    def _poll_blocked(self) -> bool:
        return self.rt.now < self.poll_blocked_until

    # ------------------------------------------------------------------------------------------
    # requests
    # ------------------------------------------------------------------------------------------
    def _metadata(self, protocol: str = "range") -> bytes:
        if self.cfg.protocol_type == "connect":
            # ConnectProtocol CONFIG_STATE_V0: version, url, config offset
            url = f"http://{self.cfg.client_host.lstrip('/')}:8083/".encode()
            return struct.pack(">hh", 0, len(url)) + url + struct.pack(">q", 0)
        owned: tuple[TopicPartitions, ...] = ()
        if self.cooperative and self.assignment:
            by_topic: dict[str, list[int]] = {}
            for t, part in sorted(self.assignment):
                by_topic.setdefault(t, []).append(part)
            owned = tuple(TopicPartitions(t, tuple(ps)) for t, ps in sorted(by_topic.items()))
        v = self.cfg.subscription_version
        user_data: bytes | None = None
        if protocol == "sticky" and self.sticky_assignment is not None:
            user_data = encode_sticky_user_data(self.sticky_assignment, self.sticky_generation)
        elif protocol == "cooperative-sticky":
            user_data = encode_cooperative_user_data(self.cooperative_generation)
        return encode_subscription(
            Subscription(
                topics=tuple(sorted(self.cfg.topics)),
                user_data=user_data,
                owned_partitions=owned if v >= 1 else (),
                generation_id=self.generation if v >= 2 else None,
                version=v,
            )
        )

    def join_request(self) -> p.JoinGroupRequest:
        connect = self.cfg.protocol_type == "connect"
        return p.JoinGroupRequest(
            group_id=self.cfg.group_id,
            member_id=self.member_id,
            session_timeout_ms=self.cfg.session_timeout_ms,
            rebalance_timeout_ms=self.cfg.max_poll_interval_ms,
            protocol_type=self.cfg.protocol_type,
            # one metadata blob per assignor, each with that assignor's user data
            protocols=(("default", self._metadata()),)
            if connect
            else tuple((a, self._metadata(a)) for a in self.cfg.assignors),
            group_instance_id=self.cfg.group_instance_id,
            client_id=self.cfg.client_id,
            client_host=self.cfg.client_host,
            version=self.cfg.join_group_version,
            endpoint=self.conn,
        )

    def _join(self) -> None:
        """``onJoinPrepare`` then JoinGroup."""
        self.rejoin_needed = False
        if self.pre_2_4:
            if self.needs_join_prepare:
                # onJoinPrepare: commit, then onPartitionsRevoked(assigned) even when empty
                if self.state == "STABLE" and self.assignment and self.cfg.enable_auto_commit:
                    self.commit()
                self._revoked(list(self.assignment))
                self.assignment = []
                self.needs_join_prepare = False
        elif self.state == "STABLE" and self.assignment:
            if self.cfg.enable_auto_commit:
                self.commit()
            if not self.cooperative:
                self._revoked(list(self.assignment))
                self.assignment = []
        self.epoch += 1  # stop heartbeats / auto-commit of the old generation
        self.state = "JOINING"
        self.join_count += 1
        self._send(self.join_request())
        # ConsumerCoordinator: JoinGroup waits max(request.timeout.ms, rebalance timeout + 5 s).
        timeout = max(self.cfg.request_timeout_ms, self.cfg.max_poll_interval_ms + 5_000)
        self._timer(self.rt.now + timeout, self._join_timeout)

    def _join_timeout(self) -> None:
        if self.state == "JOINING":
            self._trace("requestTimeout", "JoinGroup response not received; retrying")
            self._join()

    def send_join(self) -> None:
        """Manual step: send JoinGroup now."""
        self.state = "JOINING"
        self.join_count += 1
        self._send(self.join_request())

    def send_sync(self) -> None:
        """Manual step: SyncGroup for the last JoinGroup response (the leader assigns)."""
        resp = self.last_join
        if resp is None:
            return
        self.state = "SYNCING"
        assignments: tuple[tuple[str, bytes], ...] = ()
        if resp.leader == self.member_id and resp.members and not resp.skip_assignment:
            assignments = self._compute_assignment(resp)
        self._send(
            p.SyncGroupRequest(
                self.cfg.group_id,
                self.generation,
                self.member_id,
                assignments,
                self.cfg.group_instance_id,
                self.cfg.protocol_type,
                resp.protocol_name,
                endpoint=self.conn,
            )
        )

    def send_heartbeat(self) -> None:
        self._send(
            p.HeartbeatRequest(
                self.cfg.group_id, self.generation, self.member_id, self.cfg.group_instance_id, endpoint=self.conn
            )
        )

    def send_fetch(self) -> None:
        """Manual step: OffsetFetch for the whole group."""
        self._send(p.OffsetFetchRequest(self.cfg.group_id, endpoint=self.conn))

    def send_leave(self) -> None:
        self._send(
            p.LeaveGroupRequest(self.cfg.group_id, ((self.member_id, self.cfg.group_instance_id),), endpoint=self.conn)
        )

    def commit(self) -> None:
        """Commit the positions of the assigned partitions (OffsetCommit)."""
        if not self.assignment:
            return
        cache = self._commit_cache
        if cache[0] is not self.assignment:
            cache = self._commit_cache = (
                self.assignment,
                [(tp, self.rt.rate_per_ms(tp), self.rt.elapsed_cap(tp)) for tp in sorted(self.assignment)],
            )
        elapsed = max(self.rt.now - self.rt.start_ms, 0)
        meta = self.cfg.commit_metadata
        epoch = self.cfg.leader_epoch
        offsets = tuple([(tp, int(r * (elapsed if elapsed < cap else cap)), meta, epoch) for tp, r, cap in cache[1]])
        cfg = self.cfg
        if cfg.commit_changed_only:
            done = self._committed
            offsets = tuple([o for o in offsets if done.get(o[0]) != o[1]])
            if not offsets:
                return
            for o in offsets:
                done[o[0]] = o[1]
        managed = cfg.group_management
        member, generation = (self.member_id, self.generation) if managed else ("", -1)
        instance = cfg.group_instance_id if managed else None
        if (
            not cfg.network_delay_ms
            and not self.delay_next
            and self.rt.commit(cfg.group_id, member, generation, instance, offsets, self.conn)
        ):
            return
        self._send(p.OffsetCommitRequest(cfg.group_id, member, generation, offsets, instance, endpoint=self.conn))

    def _compute_assignment(self, resp: p.JoinGroupResponse) -> tuple[tuple[str, bytes], ...]:
        if self.cfg.protocol_type == "connect":
            return self._connect_assignment(resp)
        subs: dict[str, MemberSubscription] = {}
        protocol = resp.protocol_name or "range"
        for jm in resp.members:
            try:
                s = decode_subscription(jm.metadata)
            except Exception:
                s = Subscription(())
            md = member_data(protocol, s)
            subs[jm.member_id] = MemberSubscription(
                md.topics, md.owned_partitions, jm.group_instance_id, md.generation, md.subscription_generation
            )
        topics = {t: n for t, n in self.rt.topics.items() if n > 0}
        result = assign(protocol, topics, subs)
        out = []
        for mid, tps in result.items():
            by_topic: dict[str, list[int]] = {}
            for t, part in tps:
                by_topic.setdefault(t, []).append(part)
            a = Assignment(
                tuple(TopicPartitions(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
                version=min(self.cfg.subscription_version, 3),
            )
            out.append((mid, encode_assignment(a)))
        return tuple(out)

    def _connect_assignment(self, resp: p.JoinGroupResponse) -> tuple[tuple[str, bytes], ...]:
        """ConnectProtocol ASSIGNMENT_V0: connectors dealt round-robin over the sorted workers."""
        members = sorted(jm.member_id for jm in resp.members)
        leader = self.member_id.encode()
        url = f"http://{self.cfg.client_host.lstrip('/')}:8083/".encode()
        out = []
        for i, mid in enumerate(members):
            mine = [f"connector-{c}".encode() for c in range(self.cfg.connectors) if c % len(members) == i]
            body = [
                struct.pack(">hhh", 0, 0, len(leader)),
                leader,
                struct.pack(">h", len(url)),
                url,
                struct.pack(">qi", 0, len(mine)),
            ]
            for name in mine:
                body.append(struct.pack(">h", len(name)) + name + struct.pack(">ii", 1, 0))
            out.append((mid, b"".join(body)))
        return tuple(out)

    # ------------------------------------------------------------------------------------------
    # responses
    # ------------------------------------------------------------------------------------------
    def on_response(self, response: p.Response) -> None:
        n = self.drop_next.get(response.api, 0)
        if n:
            self.drop_next[response.api] = n - 1
            self._trace("responseLost", f"{response.api} response lost")
            return
        if self.rt.now < self.paused_until:
            until = self.paused_until
            self.rt.schedule(until, lambda: self.on_response(response))
            return
        if isinstance(response, p.JoinGroupResponse):
            self._on_join(response)
        elif isinstance(response, p.SyncGroupResponse):
            self._on_sync(response)
        elif isinstance(response, p.HeartbeatResponse):
            self._on_heartbeat(response)
        elif isinstance(response, p.OffsetCommitResponse) and response.error in (
            p.UNKNOWN_MEMBER_ID,
            p.ILLEGAL_GENERATION,
            p.FENCED_INSTANCE_ID,
        ):
            self._on_member_error(response.error)

    def _on_join(self, r: p.JoinGroupResponse) -> None:
        if not self.running:
            return
        if r.error == p.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            if self.cfg.manual:
                return
            self._send(self.join_request())
            return
        if r.error == p.NONE:
            self.member_id = r.member_id
            self.generation = r.generation_id
            self.protocol = r.protocol_name
            self.is_leader = r.leader == self.member_id
            self.last_join = r
            if self.cfg.manual:
                self.state = "JOINED"
                return
            self.send_sync()
            return
        self._on_member_error(r.error)

    def _on_sync(self, r: p.SyncGroupResponse) -> None:
        if not self.running:
            return
        if r.error != p.NONE:
            self._on_member_error(r.error)
            return
        new = []
        if r.assignment and self.cfg.protocol_type == "consumer":
            try:
                a = decode_assignment(r.assignment)
                new = [(tp.topic, q) for tp in a.assigned_partitions for q in tp.partitions]
            except Exception:
                new = []
        old = set(self.assignment)
        revoked = sorted(old - set(new))
        added = sorted(set(new) - old)
        if revoked:
            self._revoked(revoked)
        if self.cfg.commit_changed_only:
            # the fetched committed offset is where the previous owner stopped: nothing consumed yet
            now = self.rt.now
            self._committed = {
                tp: self._committed.get(tp, self.rt.position(tp, now)) if tp in old else self.rt.position(tp, now)
                for tp in new
            }
        self.assignment = sorted(new)
        self.needs_join_prepare = True  # the join completed: the next rebalance prepares again
        # ConsumerCoordinator.onJoinComplete → the selected assignor's onAssignment
        if self.protocol == "sticky":
            self.sticky_assignment = list(new)
            self.sticky_generation = self.generation
        elif self.protocol == "cooperative-sticky":
            self.cooperative_generation = self.generation
        self.state = "STABLE"
        self._trace("onPartitionsAssigned", ",".join(f"{t}-{q}" for t, q in added))
        self.history.append((self.rt.now, "assigned", tuple(added)))
        if self.cfg.manual:
            return
        self.epoch += 1
        self._schedule_heartbeat()
        self._schedule_auto_commit()
        if self.cooperative and revoked:
            self._request_rejoin("cooperative revocation")
        elif self.rejoin_needed:
            self._request_rejoin("rejoin requested during rebalance")

    def _revoked(self, tps: list[TP]) -> None:
        self._trace("onPartitionsRevoked", ",".join(f"{t}-{q}" for t, q in sorted(tps)))
        self.history.append((self.rt.now, "revoked", tuple(sorted(tps))))

    def _on_heartbeat(self, r: p.HeartbeatResponse) -> None:
        if not self.running or self.state != "STABLE":
            return
        if r.error == p.REBALANCE_IN_PROGRESS:
            self._request_rejoin("REBALANCE_IN_PROGRESS")
        elif r.error != p.NONE:
            self._on_member_error(r.error)

    def _on_member_error(self, error: str) -> None:
        if not self.running or self.cfg.manual:
            return
        if error == p.FENCED_INSTANCE_ID:
            self._trace("fenced", "FENCED_INSTANCE_ID: shutting down", error)
            self.fenced = True
            self._reset(closed=True)
            return
        if error in (p.UNKNOWN_MEMBER_ID,):
            self.member_id = ""
            self.generation = -1
        elif error == p.ILLEGAL_GENERATION:
            self.generation = -1
        elif error in (p.COORDINATOR_NOT_AVAILABLE, p.NOT_COORDINATOR, p.COORDINATOR_LOAD_IN_PROGRESS):
            self.epoch += 1
            self.state = "UNJOINED"
            self._timer(self.rt.now + self.cfg.retry_backoff_ms, self._join)
            return
        elif error in (p.INCONSISTENT_GROUP_PROTOCOL, p.GROUP_MAX_SIZE_REACHED, p.INVALID_SESSION_TIMEOUT):
            self._trace("fatal", error, error)
            self._reset(closed=True)
            return
        if self.state == "STABLE" and self.assignment and error != p.REBALANCE_IN_PROGRESS and not self.pre_2_4:
            # partitions are lost, not revoked: no commit is possible with a stale member id
            # (before 2.4 there is no onPartitionsLost: the next onJoinPrepare revokes them)
            self._trace("onPartitionsLost", ",".join(f"{t}-{q}" for t, q in self.assignment))
            self.assignment = []
        self._request_rejoin(error)

    def _request_rejoin(self, reason: str) -> None:
        if self._poll_blocked():
            self.rejoin_needed = True
            return
        self._join()

    # ------------------------------------------------------------------------------------------
    # timers
    # ------------------------------------------------------------------------------------------
    def _schedule_heartbeat(self) -> None:
        self._timer(self.rt.now + self.cfg.heartbeat_interval_ms, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        if self.state != "STABLE":
            return
        self.send_heartbeat()
        self._schedule_heartbeat()

    def _schedule_auto_commit(self) -> None:
        if self.cfg.enable_auto_commit:
            self._timer(self.rt.now + self.cfg.auto_commit_interval_ms, self._auto_commit_tick)

    def _auto_commit_tick(self) -> None:
        if self.state != "STABLE":
            return
        if not self._poll_blocked():
            self.commit()
        self._schedule_auto_commit()
