"""A consumer with ``group.protocol=consumer`` (KIP-848) in the simulator, as the Java consumer's
``ConsumerMembershipManager`` / ``HeartbeatRequestManager`` (Kafka 4.0) behave; its broker side is
``simulator.consumer_groups``.

Rules:
- ``start``: a new member id per process (KIP-1082: the client makes it and keeps it across
  rejoins of that process), a heartbeat at epoch 0, then one every ``heartbeat_interval_ms`` the
  broker returns (5 s); a changed assignment is acknowledged at once (``ACK_DELAY_MS`` for the
  callbacks): revoked partitions are committed first (auto-commit) and dropped, new ones taken.
- UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the partitions are lost, the member rejoins at epoch 0
  (same member id); UNRELEASED_INSTANCE_ID and REBALANCE_IN_PROGRESS: retried a second later.
- Auto-commit every ``auto_commit_interval_ms`` of the owned partitions' positions, with the
  member epoch (``commit_changed_only`` clients: only the partitions that moved).
- ``stop``: commit, leave (epoch -1; a static member -2; a classic static member never leaves,
  KIP-345); ``crash``: silent; ``pause`` ``gc``: the process stalls (heartbeats too: a pause past
  the session gets the member removed); ``slow_poll`` longer than ``max.poll.interval.ms``:
  leaves, rejoins when the poll returns.
- ``classic=True``: a classic consumer whose group was converted (a classic-protocol member of
  the consumer group, ``adopt``): the coordinator names it, its heartbeat interval and session
  timeout are its own, it commits with its generation = member epoch, a restart rejoins as a
  classic-protocol member.
- Requests are answered at once (no network delay); timers die with the process (``life``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

from coordinator_core.codec.wire import uuid_to_str
from coordinator_core.modern.consumer.model import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH
from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.consumer_group_writer import Partitions
from coordinator_core.simulator.consumer_groups import (
    ACK_DELAY_MS,
    FENCED_MEMBER_EPOCH,
    RETRY_BACKOFF_MS,
    ConsumerGroupCoordinator,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

TP = tuple[str, int]


class ClientRuntime(Protocol):
    """What a consumer-group client needs from the event loop (``engine.Simulator``)."""

    now: int

    def schedule(self, at_ms: int, fn: Callable[[], None]) -> None: ...

    def position(self, tp: TP, now_ms: int) -> int: ...


def member_id_for(name: str, life: int) -> str:
    """A client-made member id (KIP-1082: a random ``Uuid`` per process; here derived)."""
    return uuid_to_str(hashlib.sha256(f"{name}:{life}".encode()).digest()[:16])


class ConsumerGroupClient:
    """A consumer with ``group.protocol=consumer`` (or, ``classic=True``, a classic consumer
    whose group was converted: a classic-protocol member of the consumer group). Lifecycle
    actions as ``ConsumerClient``'s: ``start``, ``stop`` (commit, leave: epoch -1, static
    members -2), ``crash`` (silent), ``pause`` (``gc``: the process stalls; ``slow_poll``
    longer than ``max.poll.interval.ms``: leaves, rejoins when the poll returns)."""

    def __init__(
        self,
        name: str,
        cfg: ClientConfig,
        sim: ClientRuntime,
        coordinator: ConsumerGroupCoordinator,
        *,
        server_assignor: str | None = None,
        classic: bool = False,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.sim = sim
        self.coordinator = coordinator
        self.server_assignor = server_assignor
        self.classic = classic
        self.running = False
        self.life = 0
        self.member_id = ""
        self.epoch = 0
        self.owned: Partitions = frozenset()
        self.paused_until = -1
        self.poll_blocked_until = -1
        self._committed: dict[TP, int] = {}
        self.history: list[tuple[int, str, tuple[TP, ...]]] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.running:
            return
        self.running = True
        self.life += 1
        self.member_id = "" if self.classic else member_id_for(self.name, self.life)
        self.epoch = 0
        self.owned = frozenset()
        self._timer(self.sim.now, self._heartbeat)
        if self.cfg.enable_auto_commit:
            self._timer(self.sim.now + self.cfg.auto_commit_interval_ms, self._auto_commit)

    def adopt(self, member_id: str, epoch: int, owned: Partitions) -> None:
        """Carry on a classic member that the conversion made a member of the consumer group."""
        self.running = True
        self.life += 1
        self.member_id, self.epoch, self.owned = member_id, epoch, owned
        self._timer(self.sim.now + self.cfg.heartbeat_interval_ms, self._heartbeat)
        if self.cfg.enable_auto_commit:
            self._timer(self.sim.now + self.cfg.auto_commit_interval_ms, self._auto_commit)

    def stop(self) -> None:
        if not self.running:
            return
        if self.cfg.enable_auto_commit:
            self.commit()
        self._leave()
        self._reset()

    def _leave(self) -> None:
        """Leave the group: epoch -1, or -2 for a static consumer-protocol member (a classic
        static member never leaves, KIP-345)."""
        if not self.member_id or self.epoch <= 0:
            return
        if self.cfg.group_instance_id is None:
            self._send(LEAVE_GROUP_MEMBER_EPOCH)
        elif not self.classic:
            self._send(LEAVE_GROUP_STATIC_MEMBER_EPOCH)

    def crash(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.running = False
        self.life += 1
        self.owned = frozenset()
        self.epoch = 0
        self.member_id = ""

    def pause(self, duration_ms: int, kind: str = "gc") -> None:
        end = self.sim.now + duration_ms
        if kind == "gc":
            self.paused_until = max(self.paused_until, end)
            return
        self.poll_blocked_until = max(self.poll_blocked_until, end)
        if duration_ms > self.cfg.max_poll_interval_ms:
            self._timer(self.sim.now + self.cfg.max_poll_interval_ms, self._poll_timeout)

    def _poll_timeout(self) -> None:
        # the background thread leaves the group once max.poll.interval.ms passed without a poll
        # and the consumer rejoins (epoch 0) when the poll returns
        self._leave()
        self.owned, self.epoch = frozenset(), 0
        if self.classic or self.cfg.group_instance_id is not None:
            self.member_id = ""
        self.life += 1  # cancels the heartbeats and commits of this membership
        self._timer(max(self.poll_blocked_until, self.sim.now), self._rejoin)

    def _rejoin(self) -> None:
        if not self.classic and not self.member_id:
            self.member_id = member_id_for(self.name, self.life)
        self._heartbeat()
        if self.cfg.enable_auto_commit:
            self._timer(self.sim.now + self.cfg.auto_commit_interval_ms, self._auto_commit)

    def _timer(self, at: int, fn: Any) -> None:
        life = self.life

        def fire() -> None:
            if self.life != life or not self.running:
                return
            if self.sim.now < self.paused_until:
                self.sim.schedule(self.paused_until, fire)
                return
            fn()

        self.sim.schedule(at, fire)

    # -- requests --------------------------------------------------------------------------
    def _request(self, epoch: int) -> ConsumerGroupHeartbeatRequest:
        cfg = self.cfg
        return ConsumerGroupHeartbeatRequest(
            cfg.group_id,
            self.member_id,
            epoch,
            cfg.group_instance_id,
            tuple(sorted(cfg.topics)),
            None if self.classic else self.server_assignor,
            cfg.max_poll_interval_ms,
            cfg.client_id,
            cfg.client_host,
            self.classic,
            tuple(cfg.assignors),
            cfg.session_timeout_ms,
        )

    def _send(self, epoch: int) -> ConsumerGroupHeartbeatResponse:
        return self.coordinator.heartbeat(self._request(epoch))

    def _heartbeat(self) -> None:
        r = self._send(self.epoch)
        if r.error == p.NONE:
            self.member_id, self.epoch = r.member_id, r.member_epoch
            changed = r.assignment != self.owned
            revoked = self.owned - r.assignment
            if revoked:
                if self.cfg.enable_auto_commit:
                    self.commit(revoked)  # auto-commit before onPartitionsRevoked
                self.history.append((self.sim.now, "revoked", tuple(sorted(revoked))))
            gained = r.assignment - self.owned
            if gained:
                self.history.append((self.sim.now, "assigned", tuple(sorted(gained))))
            self.owned = r.assignment
            # an assignment change is acknowledged at once (ConsumerMembershipManager: ACKNOWLEDGING)
            interval = r.heartbeat_interval_ms if not self.classic else self.cfg.heartbeat_interval_ms
            self._timer(self.sim.now + (ACK_DELAY_MS if changed else interval), self._heartbeat)
            return
        if r.error in (p.UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH):
            if self.owned:
                self.history.append((self.sim.now, "lost", tuple(sorted(self.owned))))
            self.owned, self.epoch = frozenset(), 0
            if self.classic:
                self.member_id = ""
            self._timer(self.sim.now + self.cfg.retry_backoff_ms, self._heartbeat)
            return
        # UNRELEASED_INSTANCE_ID, REBALANCE_IN_PROGRESS (a classic group mid-rebalance): retry
        self._timer(self.sim.now + RETRY_BACKOFF_MS, self._heartbeat)

    def _auto_commit(self) -> None:
        if self.sim.now >= self.poll_blocked_until:
            self.commit()
        self._timer(self.sim.now + self.cfg.auto_commit_interval_ms, self._auto_commit)

    def commit(self, parts: Partitions | None = None) -> None:
        """Commit the positions of the owned partitions (or ``parts``) with the member epoch."""
        tps = sorted(self.owned if parts is None else parts)
        if not tps or not self.member_id or self.epoch <= 0:
            return
        now = self.sim.now
        meta = self.cfg.commit_metadata
        offsets = tuple((tp, self.sim.position(tp, now), meta, self.cfg.leader_epoch) for tp in tps)
        if self.cfg.commit_changed_only:
            offsets = tuple(o for o in offsets if self._committed.get(o[0]) != o[1])
            if not offsets:
                return
        err = self.coordinator.commit(self.cfg.group_id, self.member_id, self.epoch, offsets, self.classic)
        if err == p.NONE and self.cfg.commit_changed_only:
            for o in offsets:
                self._committed[o[0]] = o[1]
