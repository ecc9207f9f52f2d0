"""The event loop: a time-ordered queue of requests, responses and timers.

Rules:
- Events are ordered by (time, sequence number): events at the same millisecond run in the
  order they were scheduled (FIFO), which is how "the coordinator handles consumer-3's
  JoinGroup first" is expressed. No clocks; randomness only from the seeded ``random.Random``.
- The coordinator handles one request at a time (the group lock); a response reaches its client
  after the client's ``network_delay_ms``.
- The offsets retention check runs every ``offsets_retention_check_interval_ms`` per
  ``__consumer_offsets`` partition, from a phase (``CoordinatorConfig.offsets_retention_check_phase_ms``:
  fixed, or seeded random per broker (old coordinator) / per shard load (new coordinator)); a
  failover moves the partition to a schedule of its new leader (old: another broker's phase;
  new: one interval after the load). ``cleanup_schedule`` records every (from, first run) pair.
- Kafka 4 consumer groups (KIP-848) are handled by ``consumer_groups`` (the same log, clock and
  retention checks). ``processes`` names every simulated consumer process, whichever protocol it
  speaks now: a conversion makes a classic member a classic-protocol member of the consumer
  group (``adopt_classic_member``), a redeploy with the other ``group.protocol`` swaps the
  process's client (``switch_protocol``).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.client import ClientConfig, ConsumerClient
from coordinator_core.simulator.consumer_group_client import ConsumerGroupClient
from coordinator_core.simulator.consumer_groups import ConsumerGroupCoordinator
from coordinator_core.simulator.coordinator import Coordinator, CoordinatorConfig
from coordinator_core.simulator.log import RecordLog
from coordinator_core.simulator.trace import TraceEvent


class Simulator:
    """A coordinator, its clients, the topics, the log and the trace."""

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        topics: dict[str, int] | None = None,
        *,
        log: RecordLog | None = None,
        trace: bool = True,
        seed: int = 0,
        start_ms: int = 0,
        topic_rates: dict[str, float] | None = None,
        retention_checks: bool = True,
        drop_ok_commit_responses: bool = False,
    ) -> None:
        self.cfg = config or CoordinatorConfig()
        self.now = start_ms
        self.start_ms = start_ms
        self.topics: dict[str, int] = dict(topics or {})
        self.topic_rates: dict[str, float] = dict(topic_rates or {})
        # Partitions that stop receiving records at a time (keyed topics whose keys went quiet):
        # their position stays where it was from then on (``position``).
        self.idle_since: dict[tuple[str, int], int] = {}
        self.log = log if log is not None else RecordLog(self.cfg.num_partitions)
        self.events: list[TraceEvent] = []
        self.trace_enabled = trace
        # The generator's fast path: a successful OffsetCommit response changes nothing in a
        # client, so it need not travel through the queue.
        self.drop_ok_commit_responses = drop_ok_commit_responses
        self.random = random.Random(seed)
        self.coordinator = Coordinator(self, self.log, self.cfg)
        self.consumer_groups = ConsumerGroupCoordinator(self, self.coordinator)
        self.coordinator.modern = self.consumer_groups
        self.clients: dict[str, ConsumerClient] = {}
        self.processes: dict[str, ConsumerClient | ConsumerGroupClient] = {}
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        # partition -> [(from_ms, first_run_ms)]: the retention check's schedule (the truth's phase)
        self.cleanup_schedule: dict[int, list[tuple[int, int]]] = {}
        self._cleanup_epoch: dict[int, int] = {}
        self._cleanup_due: dict[int, list[tuple[int, int]]] = {}
        # a stream of its own, so that phases never shift the other seeded draws
        self._phase_rng = random.Random(f"retention-check-phase:{seed}")
        self.retention_checks = retention_checks
        if retention_checks:
            self._start_cleanup_schedule()

    # runtime interface -----------------------------------------------------------------------
    def schedule(self, at_ms: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` at ``at_ms`` (never earlier than now)."""
        self._seq += 1
        if at_ms < self.now:
            at_ms = self.now
        heapq.heappush(self._queue, (at_ms, self._seq, fn))

    def send(self, request: p.Request, delay_ms: int) -> None:
        """A client's request reaches the coordinator after ``delay_ms``."""
        coordinator = self.coordinator
        if self.drop_ok_commit_responses and delay_ms == 0 and request.api == "OffsetCommit":
            # fast path (generator): nothing can run between "now" and "now", handle it inline
            coordinator.handle(request)
            return
        self.schedule(self.now + delay_ms, lambda: coordinator.handle(request))

    def commit(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...],
        endpoint: p.Endpoint | None,
    ) -> bool:
        """The generator's commit fast lane (no request object, no queue); False when off."""
        if not self.drop_ok_commit_responses:
            return False
        self.coordinator.commit_offsets(group_id, member_id, generation_id, group_instance_id, offsets, endpoint)
        return True

    def respond(self, endpoint: p.Endpoint | None, response: p.Response, group_id: str) -> None:
        """Deliver a response to its client after the client's network delay."""
        if endpoint is None:
            return
        if self.drop_ok_commit_responses and response.api == "OffsetCommit" and response.error == "NONE":
            return
        delay = getattr(getattr(endpoint, "cfg", None), "network_delay_ms", 0)
        self.schedule(self.now + delay, lambda: endpoint.on_response(response))

    def trace(self, event: TraceEvent) -> None:
        if self.trace_enabled:
            self.events.append(event)

    def rate_per_ms(self, tp: tuple[str, int]) -> float:
        """Messages per millisecond consumed from a partition (partitions differ a little)."""
        return self.topic_rates.get(tp[0], 10.0) * (1.0 + (tp[1] % 5) / 10.0) / 1000.0

    def elapsed_cap(self, tp: tuple[str, int]) -> float:
        """How long a partition has records for, from the start (infinite unless it goes idle)."""
        idle = self.idle_since.get(tp)
        return float("inf") if idle is None else max(idle - self.start_ms, 0)

    def position(self, tp: tuple[str, int], now_ms: int) -> int:
        """The consumed offset of a partition at a time (monotonic, shared by every consumer)."""
        return int(self.rate_per_ms(tp) * min(max(now_ms - self.start_ms, 0), self.elapsed_cap(tp)))

    # clients and actions ---------------------------------------------------------------------
    def add_client(self, name: str, config: ClientConfig) -> ConsumerClient:
        client = ConsumerClient(name, config, self)
        self.clients[name] = client
        self.processes[name] = client
        return client

    def add_consumer_group_client(
        self, name: str, config: ClientConfig, server_assignor: str | None = None
    ) -> ConsumerGroupClient:
        """A consumer with ``group.protocol=consumer`` (KIP-848)."""
        client = ConsumerGroupClient(name, config, self, self.consumer_groups, server_assignor=server_assignor)
        self.processes[name] = client
        return client

    def process(self, name: str) -> ConsumerClient | ConsumerGroupClient:
        """The client a process runs now."""
        return self.processes[name]

    def adopt_classic_member(
        self, group_id: str, member_id: str, generation: int, owned: frozenset[tuple[str, int]]
    ) -> ConsumerGroupClient | None:
        """A converted group's classic member carries on as a classic-protocol member of the
        consumer group (its process keeps running; its classic client goes quiet)."""
        for name, c in self.processes.items():
            if isinstance(c, ConsumerClient) and c.running and c.cfg.group_id == group_id and c.member_id == member_id:
                c.crash()  # silent: nothing more is sent by the classic state machine
                proxy = ConsumerGroupClient(name, c.cfg, self, self.consumer_groups, classic=True)
                proxy.adopt(member_id, generation, owned)
                self.processes[name] = proxy
                return proxy
        return None

    def switch_protocol(self, name: str, protocol: str, server_assignor: str | None = None) -> None:
        """A redeploy of the process with ``group.protocol`` = ``protocol`` (``consumer`` or
        ``classic``): the running client stops (commit, leave), the new one is started later."""
        old = self.processes[name]
        old.stop()
        cfg = old.cfg
        if protocol == "consumer":
            self.add_consumer_group_client(name, cfg, server_assignor)
        else:
            self.clients[name] = self.processes[name] = ConsumerClient(name, cfg, self)

    def at(self, at_ms: int, fn: Callable[[], None]) -> None:
        """Schedule a scenario action."""
        self.schedule(at_ms, fn)

    def delete_topic(self, topic: str) -> None:
        """The topic disappears: offsets are tombstoned; subscribed leaders rejoin."""
        self.topics.pop(topic, None)
        self.coordinator.delete_topic(topic)
        self._metadata_changed(topic)

    def set_partitions(self, topic: str, partitions: int) -> None:
        """Create a topic or change its partition count; subscribed leaders rejoin."""
        self.topics[topic] = partitions
        self.coordinator.deleted_topics.discard(topic)  # re-created
        self._metadata_changed(topic)

    def _metadata_changed(self, topic: str) -> None:
        # ConsumerCoordinator: the leader watches its subscribed topics' metadata and rejoins.
        for c in self.clients.values():
            if c.running and c.is_leader and c.state == "STABLE" and topic in c.cfg.topics:
                c._request_rejoin(f"metadata of {topic} changed")
            elif c.running and not c.cfg.group_management:
                c.assignment = [tp for tp in c.assignment if tp[0] in self.topics]

    def failover(self, group_id: str, load_ms: int = 0) -> None:
        """The group's coordinator moves: unload, then load the partition (see ``failover_partition``)."""
        self.failover_partition(self.log.partition(group_id), load_ms)

    def failover_partition(self, partition: int, load_ms: int = 0) -> None:
        """A ``__consumer_offsets`` partition changes leader: unload it, load it ``load_ms`` later.

        With a ``RecordLog`` the new coordinator replays the partition's records (spec §10); a
        ``BytesLog`` keeps no decoded records, so the load uses what the old coordinator held
        for the log (each group's last group record and its offsets), which is the same state.
        """
        snapshot = self.coordinator.unload_partition(partition)
        coordinator = self.coordinator
        if type(self.log) is RecordLog:
            records = list(self.log.records_for_partition(partition))

            def load() -> None:
                coordinator.load_partition(partition, records)
                self._on_partition_loaded(partition)
        else:

            def load() -> None:
                coordinator.load_snapshot(partition, snapshot)
                self._on_partition_loaded(partition)

        self.schedule(self.now + load_ms, load)

    def _start_cleanup_schedule(self) -> None:
        interval = self.cfg.offsets_retention_check_interval_ms
        phase = self.cfg.offsets_retention_check_phase_ms
        n = self.cfg.num_partitions
        if phase is not None:
            firsts = dict.fromkeys(range(n), self.start_ms + phase)
        elif self.cfg.coordinator == "old":
            broker_phase = self._phase_rng.randrange(interval)
            firsts = dict.fromkeys(range(n), self.start_ms + broker_phase)
        else:
            # each shard was loaded some time before the run started; its first check is one
            # interval after that load
            firsts = {q: self.start_ms + self._phase_rng.randrange(interval) for q in range(n)}
        for q, first in firsts.items():
            self._set_cleanup(q, first)

    def _set_cleanup(self, partition: int, first_ms: int) -> None:
        epoch = self._cleanup_epoch.get(partition, 0) + 1
        self._cleanup_epoch[partition] = epoch
        self.cleanup_schedule.setdefault(partition, []).append((self.now, first_ms))
        self._add_cleanup(partition, epoch, first_ms)

    def _add_cleanup(self, partition: int, epoch: int, at: int) -> None:
        # Partitions due at the same millisecond share one event (one pass over the groups).
        due = self._cleanup_due.get(at)
        if due is None:
            due = self._cleanup_due[at] = []
            self.schedule(at, lambda: self._run_cleanup(at))
        due.append((partition, epoch))

    def _run_cleanup(self, at: int) -> None:
        due = self._cleanup_due.pop(at, [])
        live = [(q, e) for q, e in due if self._cleanup_epoch.get(q) == e]
        if not live:
            return
        parts = {q for q, _ in live}
        self.coordinator.cleanup_expired_offsets(None if len(parts) == self.cfg.num_partitions else parts)
        nxt = at + self.cfg.offsets_retention_check_interval_ms
        for q, e in live:
            self._add_cleanup(q, e, nxt)

    def _on_partition_loaded(self, partition: int) -> None:
        """A failover's load finished: the partition's retention checks follow its new leader."""
        if not self.retention_checks:
            return
        interval = self.cfg.offsets_retention_check_interval_ms
        if self.cfg.coordinator == "new":
            self._set_cleanup(partition, self.now + interval)  # GroupCoordinatorShard.onLoaded
        elif self.cfg.offsets_retention_check_phase_ms is None:
            self._set_cleanup(partition, self.now + 1 + self._phase_rng.randrange(interval))

    # the loop --------------------------------------------------------------------------------
    def run(self, until_ms: int) -> None:
        """Process every event up to and including ``until_ms``; then ``now = until_ms``."""
        q = self._queue
        pop = heapq.heappop
        while q and q[0][0] <= until_ms:
            t, _, fn = pop(q)
            self.now = t
            fn()
        self.now = max(self.now, until_ms)

    def state_of(self, group_id: str) -> str:
        g = self.coordinator.groups.get(group_id)
        return g.state if g is not None else "Dead"
