"""Realistic multi-group ``__consumer_offsets`` logs built from the simulator (deterministic).

Rules:
- Everything is drawn from one ``random.Random(seed)``: the same config gives the same bytes.
- Group lifecycles run through the real coordinator model (``coordinator_core.simulator``),
  including a few Kafka Connect clusters (protocol type ``connect``, opaque blobs, no commits):
  dynamic consumer groups (range / roundrobin / sticky / cooperative-sticky) with auto-commit,
  rolling deploys, crashes (session timeouts), GC pauses, slow polls and scaling; static-member
  groups (KIP-345) whose restarts cause no rebalance; simple groups committing with generation
  -1; short-lived console consumers that go Empty and expire (or are deleted); topic deletions;
  coordinator failovers (a partition is unloaded and loaded again by the new coordinator).
- The world's shapes (issue 13), each a ``GeneratorConfig`` knob, drawn from a random stream of
  their own so that turning one off leaves the rest of the plan unchanged:
  - ``idle_partitions``: the share of topics where some partitions stop receiving records early
    in the run; ``commit_changed_only``: the share of application groups whose clients commit
    only the partitions they consumed (librdkafka, Kafka Streams), so an idle partition's offset
    is committed once and never again and sits, old, before the group's latest metadata.
  - ``offsetless_groups``: the share of application groups that never commit (membership only:
    consumers storing offsets elsewhere).
  - ``mass_restarts``: the share of application (static too) and Connect groups whose members all restart
    within seconds (a rollout: clean closes; or a kill: crashes), some of them before their first
    commit.
  - ``compaction``: ``none`` (every record as written) or ``cleaned``: what a capture from
    ``earliest`` of the compacted topic reads (``coordinator_core.compaction``: cleaned below a
    per-partition cleaner point leaving the last ``compaction_dirty_ratio`` of each partition's
    records dirty, tombstones kept for ``delete_retention_ms``). The whole log is held in memory
    to clean it.
  - ``retention_check_phase_ms``: None (default) puts the broker's retention checks on a seeded
    phase (per broker for the old coordinator, per shard for the new one); an int pins them to
    start + phase + k * interval.
  Defaults (the realistic mix): idle_partitions 0.3, commit_changed_only 0.3, offsetless_groups
  0.1, mass_restarts 0.2, compaction ``none``, coordinator ``old``.
- Mixed Kafka 4 clusters (issue 14), from a random stream of their own (``k4:<seed>``), so that
  with both shares 0 (the default) the log is byte for byte the classic-only one:
  - ``consumer_groups``: the share of application, static and console groups whose clients use
    ``group.protocol=consumer`` (KIP-848: ``simulator.consumer_groups``; server assignor uniform,
    range, or the broker's default). They live the same lives as classic groups (deploys,
    crashes, GC pauses, slow polls, scaling, mass restarts, static restarts, decommissions,
    idle partitions, offset-less groups, admin deletes) through ConsumerGroupHeartbeat.
  - ``conversions``: the share of dynamic classic application groups redeployed member by
    member with ``group.protocol=consumer`` (the online upgrade: the first new member converts
    the Stable classic group, the old members carry on as classic-protocol members until
    their turn); ``conversions_back``: the share of those redeployed back to classic later
    (all at once: the consumer group empties and the first JoinGroup replaces it).
  Both need ``coordinator: new`` (only Kafka 4's coordinator has consumer groups).
- Records are kept as encoded columns only (``BytesLog``): offset-commit keys are cached per
  (group, topic, partition) and values built with a precompiled ``struct``. Successful commit
  responses skip the event queue (they change nothing in a client).
- ``truth()`` reports what the simulator knows (per group: kind, ``group_type`` (classic,
  consumer, None once gone), ``client_protocol`` (what its clients start with), final state,
  generation (a consumer group's group epoch), ``consumer`` (group and target assignment
  epochs, assignor, members with epochs, state and assignments, offsets), ``conversions``,
  ``consumer_history`` (joins, leaves, session timeouts, static replacements, commits and
  rejected commits), completed rebalances, expiry/deletion times, tombstones by cause, every death with its cause
  and whether a group tombstone was written, traits) plus the retention checks' schedule and,
  with compaction, what the cleaner removed, for tests to use as known answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from coordinator_core.codec.record_codec import decode_key, encode_key, encode_value
from coordinator_core.codec.records import Record
from coordinator_core.compaction import DEFAULT_DELETE_RETENTION_MS, cleaner_points_for_dirty_ratio, compact
from coordinator_core.expiry import SIMULATED_COORDINATOR
from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.coordinator import CoordinatorConfig
from coordinator_core.simulator.engine import Simulator
from coordinator_core.simulator.log import BytesLog, RecordLog
from coordinator_core.simulator.protocol import DeleteGroupsRequest
from coordinator_core.simulator.share_streams import ShareStreamsPlan

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
MINUTE = 60_000

KINDS = (("app", 0.40), ("static", 0.13), ("simple", 0.13), ("ephemeral", 0.29), ("connect", 0.05))
SERVICES = (
    "orders",
    "payments",
    "billing",
    "search",
    "inventory",
    "shipping",
    "fraud",
    "analytics",
    "notifications",
    "users",
    "pricing",
    "ledger",
)
TOPIC_WORDS = ("clicks", "orders", "payments", "audit", "metrics", "logs", "users", "events", "cdc", "alerts")
ASSIGNORS = (
    ("range",),
    ("range",),
    ("roundrobin",),
    ("sticky",),
    ("cooperative-sticky",),
    ("cooperative-sticky", "range"),
)
JOIN_VERSIONS = ((3, 0), (5, 1), (7, 1), (7, 1), (9, 3))  # (JoinGroup version, subscription version)

ProgressFn = Callable[[int, int, int], None]


@dataclass(frozen=True, slots=True)
class GeneratorConfig:
    """What to generate. ``retention_ms`` is short by default so Empty groups expire in-run."""

    groups: int
    hours: float
    seed: int = 0
    start_ms: int = DEFAULT_START_MS
    retention_ms: int | None = None  # None: a quarter of the run (15 min .. 7 days)
    retention_check_interval_ms: int = 600_000
    num_partitions: int = 50
    coordinator: str = SIMULATED_COORDINATOR
    offset_value_version: int = 3
    group_value_version: int = 3
    initial_rebalance_delay_ms: int = 3_000
    chunk_records: int = 250_000
    topic_deletions: bool = True
    churn_per_hour: float = 0.5
    failovers_per_hour: float = 0.2  # __consumer_offsets partition leader moves (coordinator failover)
    expiry_rules: str = "current"  # see CoordinatorConfig.expiry_rules ("pre-2.1" writes v1 + expire)
    retention_check_phase_ms: int | None = None  # None: a seeded phase per broker / shard
    idle_partitions: float = 0.3  # share of topics with partitions that go quiet
    commit_changed_only: float = 0.3  # share of app/static groups committing only consumed partitions
    offsetless_groups: float = 0.1  # share of app groups that never commit (membership only)
    mass_restarts: float = 0.2  # share of app/connect groups whose members all restart at once
    compaction: str = "none"  # "none" | "cleaned"
    compaction_dirty_ratio: float = 0.25  # the dirty (uncleaned) tail of each partition
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    consumer_groups: float = 0.0  # share of app/static/console groups on the consumer protocol
    conversions: float = 0.0  # share of dynamic classic app groups upgraded online to consumer
    conversions_back: float = 0.3  # share of the upgraded groups redeployed back to classic
    share_groups: int = 0  # share groups (KIP-932: ``simulator.share_streams``)
    streams_groups: int = 0  # streams groups (KIP-1071)

    @property
    def effective_retention_ms(self) -> int:
        """``offsets.retention.minutes`` for the run: short enough that Empty groups expire in it."""
        if self.retention_ms is not None:
            return self.retention_ms
        return min(max(int(self.hours * HOUR / 4), 15 * MINUTE), 7 * 24 * HOUR)


@dataclass(slots=True)
class Chunk:
    """Encoded records in log order (per ``__consumer_offsets`` partition)."""

    keys: list[bytes]
    values: list[bytes | None]
    partitions: list[int]
    offsets: list[int]
    timestamps: list[int]

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(slots=True)
class GroupPlan:
    group_id: str
    kind: str
    clients: list[str] = field(default_factory=list)
    topics: tuple[str, ...] = ()
    assignors: tuple[str, ...] = ()
    events: list[str] = field(default_factory=list)
    deleted_by_admin: bool = False
    traits: list[str] = field(default_factory=list)
    protocol: str = "classic"  # the group.protocol its clients start with
    server_assignor: str | None = None  # consumer protocol: group.remote.assignor


class LogGenerator:
    """Plans group lifecycles, runs the simulator and hands out encoded chunks."""

    def __init__(self, config: GeneratorConfig, *, fast: bool = True) -> None:
        """``fast=False`` keeps decoded records and encodes them with ``coordinator_core.codec.record_codec``
        (the straightforward path: the benchmark's baseline and a cross-check of the bytes)."""
        if config.groups < 1 or config.hours <= 0:
            raise ValueError("groups must be >= 1 and hours > 0")
        if config.expiry_rules not in ("current", "2.4-3.1", "2.1-2.3", "pre-2.1"):
            raise ValueError(f"unknown expiry rules {config.expiry_rules!r}")
        if config.coordinator not in ("old", "new"):
            raise ValueError(f"coordinator must be 'old' or 'new', got {config.coordinator!r}")
        if config.compaction not in ("none", "cleaned"):
            raise ValueError(f"compaction must be 'none' or 'cleaned', got {config.compaction!r}")
        for name in (
            "idle_partitions",
            "commit_changed_only",
            "offsetless_groups",
            "mass_restarts",
            "compaction_dirty_ratio",
            "consumer_groups",
            "conversions",
            "conversions_back",
        ):
            if not 0.0 <= getattr(config, name) <= 1.0:
                raise ValueError(f"{name} must be within 0..1, got {getattr(config, name)}")
        if (config.consumer_groups > 0 or config.conversions > 0) and config.coordinator != "new":
            raise ValueError("consumer groups (KIP-848) need coordinator 'new' (Kafka 4's group coordinator)")
        if (config.share_groups or config.streams_groups) and config.coordinator != "new":
            raise ValueError("share and streams groups (KIP-932, KIP-1071) need coordinator 'new'")
        if config.share_groups < 0 or config.streams_groups < 0:
            raise ValueError("share_groups and streams_groups must be >= 0")
        if config.delete_retention_ms < 0:
            raise ValueError(f"delete_retention_ms must be >= 0, got {config.delete_retention_ms}")
        self.cfg = config
        self.fast = fast
        self.rng = random.Random(config.seed)
        # the world's shapes draw from their own stream (see the module rules)
        self.world = random.Random(f"world:{config.seed}")
        self.k4 = random.Random(f"k4:{config.seed}")
        self.start = config.start_ms
        self.end = config.start_ms + int(config.hours * HOUR)
        self.log: RecordLog = BytesLog(config.num_partitions) if fast else RecordLog(config.num_partitions)
        coord = CoordinatorConfig(
            initial_rebalance_delay_ms=config.initial_rebalance_delay_ms,
            offsets_retention_ms=config.effective_retention_ms,
            offsets_retention_check_interval_ms=config.retention_check_interval_ms,
            offset_value_version=config.offset_value_version,
            group_value_version=config.group_value_version,
            coordinator=config.coordinator,
            num_partitions=config.num_partitions,
            expiry_rules=config.expiry_rules,
            offsets_retention_check_phase_ms=config.retention_check_phase_ms,
        )
        self.topics: dict[str, int] = {}
        self.rates: dict[str, float] = {}
        self._make_topics()
        self.sim = Simulator(
            coord,
            self.topics,
            log=self.log,
            trace=False,
            seed=config.seed,
            start_ms=self.start,
            topic_rates=self.rates,
            drop_ok_commit_responses=True,
        )
        self.plans: dict[str, GroupPlan] = {}
        self.deleted_topics: list[tuple[str, int]] = []
        self.failovers: list[tuple[int, int, int]] = []  # (time, partition, load_ms)
        self.idle: dict[tuple[str, int], int] = {}  # partition -> time it went quiet
        self._compaction_truth: dict[str, Any] | None = None
        self._starts: dict[str, int] = {}
        self._removed_by_group: dict[str, list[int]] = {}
        self._make_idle_partitions()
        self._plan()
        self.modern = ShareStreamsPlan(self.sim.at, self._append, self.topics, config.seed, self.start, self.end)
        self.modern.plan_share(config.share_groups)
        self.modern.plan_streams(config.streams_groups)

    def _append(self, records: Iterable[Record]) -> None:
        """One coordinator write of a share or streams group, at the simulator's now."""
        for r in records:
            self.log.append(self.sim.now, r.key, r.value)  # type: ignore[arg-type]

    # ------------------------------------------------------------------------------------------
    # planning
    # ------------------------------------------------------------------------------------------
    def _make_topics(self) -> None:
        n = max(3, self.cfg.groups // 2)
        for j in range(n):
            name = f"{TOPIC_WORDS[j % len(TOPIC_WORDS)]}-{j:03d}"
            # partition counts seen in production clusters (many 12-64 partition topics)
            self.topics[name] = self.rng.choice((1, 3, 6, 10, 12, 12, 24, 32, 48, 64))
            self.rates[name] = self.rng.choice((0.5, 5.0, 20.0, 100.0, 1000.0))

    def _make_idle_partitions(self) -> None:
        """Keyed topics whose keys went quiet: some partitions get no records after a while."""
        w = self.world
        for topic in sorted(self.topics):
            n = self.topics[topic]
            if n < 2 or w.random() >= self.cfg.idle_partitions:
                continue
            quiet = w.sample(range(n), max(1, n // w.choice((2, 3, 4))))
            for q in sorted(quiet):
                # early in the run: committed for a while, then never again by changed-only clients
                self.idle[(topic, q)] = self._at_world(0.02, 0.2)
        self.sim.idle_since.update(self.idle)

    def _at_world(self, lo: float, hi: float) -> int:
        span = self.end - self.start
        return self.start + int(span * (lo + (hi - lo) * self.world.random()))

    def _at(self, lo: float, hi: float) -> int:
        """A time between fractions ``lo`` and ``hi`` of the run."""
        span = self.end - self.start
        return self.start + int(span * (lo + (hi - lo) * self.rng.random()))

    def _plan(self) -> None:
        kinds = [k for k, _ in KINDS]
        weights = [w for _, w in KINDS]
        topic_names = sorted(self.topics)
        for i in range(self.cfg.groups):
            kind = self.rng.choices(kinds, weights)[0]
            if kind == "app":
                gid = f"{self.rng.choice(SERVICES)}-service-{i:04d}"
            elif kind == "static":
                gid = f"{self.rng.choice(SERVICES)}-streams-{i:04d}"
            elif kind == "connect":
                gid = f"connect-cluster-{i:04d}"
            elif kind == "simple":
                gid = f"{self.rng.choice(('spark-batch', 'offset-sync', 'etl-job'))}-{i:04d}"
            else:
                gid = f"console-consumer-{self.rng.randint(10000, 99999)}-{i}"
            plan = GroupPlan(gid, kind)
            self.plans[gid] = plan
            w = self.world
            if kind == "app" and w.random() < self.cfg.offsetless_groups:
                plan.traits.append("offsetless")
            elif kind in ("app", "static") and w.random() < self.cfg.commit_changed_only:
                plan.traits.append("commit_changed_only")
            k4 = self.k4
            if kind in ("app", "static", "ephemeral") and k4.random() < self.cfg.consumer_groups:
                plan.protocol = "consumer"
                plan.server_assignor = k4.choice(("uniform", "uniform", "range", None))
            getattr(self, f"_plan_{kind}")(plan, topic_names)
            if kind in ("app", "static", "connect") and w.random() < self.cfg.mass_restarts:
                self._plan_mass_restarts(plan)
            if kind == "app" and plan.protocol == "classic" and k4.random() < self.cfg.conversions:
                self._plan_conversion(plan)
        if self.cfg.topic_deletions and self.cfg.groups >= 4:
            for _ in range(max(1, self.cfg.groups // 25)):
                topic = self.rng.choice(topic_names)
                if any(t == topic for t, _ in self.deleted_topics):
                    continue
                at = self._at(0.3, 0.8)
                self.deleted_topics.append((topic, at))
                self.sim.at(at, lambda t=topic: self.sim.delete_topic(t))  # type: ignore[misc]
        # Broker restarts move __consumer_offsets partition leaders: the new coordinator loads
        # the partition; rebalances in flight restart, everything else carries on.
        used = sorted({self.log.partition(g) for g in self.plans})
        t = self.start
        while self.cfg.failovers_per_hour > 0:
            t += int(self.rng.expovariate(self.cfg.failovers_per_hour) * HOUR)
            if t >= self.end:
                break
            part = self.rng.choice(used)
            load_ms = self.rng.randint(50, 3_000)
            self.failovers.append((t, part, load_ms))
            self.sim.at(t, lambda q=part, d=load_ms: self.sim.failover_partition(q, d))  # type: ignore[misc]

    def _plan_mass_restarts(self, plan: GroupPlan) -> None:
        """Every member restarts within seconds: a rollout (clean closes: the group goes Empty and
        comes back) or a kill (crashes: the new processes join while the old ones time out). One
        in three happens right after the group formed, before its first auto-commit."""
        w = self.world
        plan.traits.append("mass_restart")
        starts = sorted(self._starts[n] for n in plan.clients if n in self._starts)
        if not starts:
            return
        # never after the application was decommissioned (that would bring it back)
        ends = [int(e.split("@")[1]) for e in plan.events if e.startswith("decommission@")]
        last = min(ends) if ends else self.end
        times: list[tuple[int, str]] = []
        if w.random() < 1 / 3:
            # killed right after the group formed: before its first auto-commit (a crash loop)
            times.append((starts[0] + self.cfg.initial_rebalance_delay_ms + w.randint(4_000, 6_000), "kill"))
        for _ in range(w.randint(1, 2)):
            times.append((self._at_world(0.1, 0.9), w.choice(("rollout", "rollout", "kill"))))
        for t, how in sorted(x for x in times if x[0] < last):
            plan.events.append(f"mass_{how}@{t}")
            down = w.randint(1_000, 10_000)
            for name in plan.clients:
                if self._starts.get(name, t) >= t:
                    continue  # not started yet (scaled out later)
                jitter = w.randint(0, 3_000)
                self._do(t + jitter, name, "stop" if how == "rollout" else "crash")
                self._do(t + down + jitter, name, "start")

    def _plan_conversion(self, plan: GroupPlan) -> None:
        """The online upgrade (KIP-848): the members are redeployed one by one with
        ``group.protocol=consumer``; some groups go back to classic later, all at once."""
        k4 = self.k4
        ends = [int(e.split("@")[1]) for e in plan.events if e.startswith("decommission@")]
        last = min(ends) if ends else self.end
        t = self._at_k4(0.25, 0.5)
        if t >= last:
            return
        plan.server_assignor = k4.choice(("uniform", "range", None))
        plan.traits.append("upgraded")
        plan.events.append(f"upgrade@{t}")
        gap = k4.randint(10_000, 40_000)
        switch = self.sim.switch_protocol
        assignor = plan.server_assignor
        for k, name in enumerate(plan.clients):
            at = t + k * gap
            self.sim.at(at, lambda n=name: switch(n, "consumer", assignor))  # type: ignore[misc]
            if self._starts.get(name, self.end) < at:  # running by then (a later scale-out starts itself)
                self._do(at + k4.randint(1_000, 8_000), name, "start")
        if k4.random() >= self.cfg.conversions_back:
            return
        back = self._at_k4(0.6, 0.85)
        if back >= last or back <= t + len(plan.clients) * gap + 60_000:
            return
        plan.traits.append("downgraded")
        plan.events.append(f"downgrade@{back}")
        restart = back + k4.randint(50_000, 60_000)  # after any crashed member's session (45 s)
        for name in plan.clients:
            self.sim.at(back + k4.randint(0, 2_000), lambda n=name: switch(n, "classic"))  # type: ignore[misc]
            if self._starts.get(name, self.end) < back:
                self._do(restart + k4.randint(0, 3_000), name, "start")

    def _at_k4(self, lo: float, hi: float) -> int:
        span = self.end - self.start
        return self.start + int(span * (lo + (hi - lo) * self.k4.random()))

    def _client(self, plan: GroupPlan, k: int, **kw: Any) -> str:
        name = f"{plan.group_id}#{k}"
        version, sub_version = kw.pop("versions", (7, 1))
        if "offsetless" in plan.traits:
            kw["enable_auto_commit"] = False
        if "commit_changed_only" in plan.traits:
            kw["commit_changed_only"] = True
        cfg = ClientConfig(
            client_id=f"consumer-{plan.group_id}-{k + 1}",
            group_id=plan.group_id,
            topics=plan.topics,
            assignors=plan.assignors or ("range",),
            client_host=f"/10.{sum(plan.group_id.encode()) & 0xFF}.{k // 250}.{k % 250 + 1}",
            join_group_version=version,
            subscription_version=sub_version,
            **kw,
        )
        if plan.protocol == "consumer":
            self.sim.add_consumer_group_client(name, cfg, plan.server_assignor)
        else:
            self.sim.add_client(name, cfg)
        plan.clients.append(name)
        return name

    def _common(self) -> dict[str, Any]:
        rng = self.rng
        session = rng.choice((10_000, 30_000, 45_000, 45_000))
        return {
            "session_timeout_ms": session,
            # heartbeat.interval.ms = session/3 (the documented upper bound): heartbeats never
            # reach the log, only their timing does, and this keeps the event count down.
            "heartbeat_interval_ms": session // 3,
            "auto_commit_interval_ms": rng.choice((5_000, 5_000, 5_000, 1_000, 10_000, 30_000)),
            "leader_epoch": rng.choice((None, 0, 0, 1, 3)),
            "versions": rng.choice(JOIN_VERSIONS),
        }

    def _plan_app(self, plan: GroupPlan, topic_names: list[str], static: bool = False) -> None:
        rng = self.rng
        plan.topics = tuple(sorted(rng.sample(topic_names, rng.choice((1, 1, 1, 2, 3)))))
        plan.assignors = rng.choice(ASSIGNORS)
        n = rng.choice((1, 2, 3, 3, 4, 6))
        common = self._common()
        if static:
            common["session_timeout_ms"] = rng.choice((60_000, 120_000, 300_000))
            common["versions"] = rng.choice(((5, 1), (7, 1), (9, 3)))
        names = []
        for k in range(n):
            kw = dict(common)
            if static:
                kw["group_instance_id"] = f"{plan.group_id}-pod-{k}"
            names.append(self._client(plan, k, **kw))
        t0 = self._at(0.0, 0.05)
        for k, name in enumerate(names):
            self._do(t0 + rng.randint(0, 2_000) + k * rng.choice((0, 0, 500)), name, "start")
        # churn over the run
        t = t0 + 5 * MINUTE
        rate = self.cfg.churn_per_hour
        while rate > 0:
            t += int(rng.expovariate(rate) * HOUR)
            if t >= self.end:
                break
            what = rng.choices(("deploy", "crash", "gc", "slow_poll", "scale"), (4, 3, 2, 1, 1))[0]
            plan.events.append(f"{what}@{t}")
            if what == "deploy":
                gap = rng.randint(10_000, 60_000)
                down = rng.randint(3_000, 30_000)
                for k, name in enumerate(names):
                    self._do(t + k * gap, name, "stop")
                    self._do(t + k * gap + down, name, "start")
            elif what == "crash":
                name = rng.choice(names)
                self._do(t, name, "crash")
                back = rng.choice((20_000, 60_000, 180_000, 600_000))
                self._do(t + back, name, "start")
            elif what == "gc":
                self._do(t, rng.choice(names), "pause", rng.choice((2_000, 15_000, 60_000)), "gc")
            elif what == "slow_poll":
                self._do(t, rng.choice(names), "pause", rng.choice((60_000, 400_000)), "slow_poll")
            else:
                k = len(names)
                kw = dict(common)
                if static:
                    kw["group_instance_id"] = f"{plan.group_id}-pod-{k}"
                name = self._client(plan, k, **kw)
                names.append(name)
                self._do(t, name, "start")
        if not static and rng.random() < 0.15:  # the application is decommissioned
            t_end = self._at(0.4, 0.8)
            plan.events.append(f"decommission@{t_end}")
            for name in names:
                self._do(t_end, name, "stop", late=True)

    def _plan_static(self, plan: GroupPlan, topic_names: list[str]) -> None:
        self._plan_app(plan, topic_names, static=True)

    def _plan_connect(self, plan: GroupPlan, topic_names: list[str]) -> None:
        """A Kafka Connect cluster: protocol type "connect", workers join and leave, no commits."""
        rng = self.rng
        plan.assignors = ("default",)
        n = rng.choice((1, 2, 3))
        common = {
            "session_timeout_ms": 10_000,
            "heartbeat_interval_ms": 3_000,
            "versions": (5, 0),
            "protocol_type": "connect",
            "enable_auto_commit": False,
            "connectors": rng.randint(1, 8),
        }
        names = [self._client(plan, k, **common) for k in range(n)]
        t0 = self._at(0.0, 0.1)
        for k, name in enumerate(names):
            self._do(t0 + k * 1_000, name, "start")
        t = t0 + 10 * MINUTE
        while self.cfg.churn_per_hour > 0:
            t += int(rng.expovariate(self.cfg.churn_per_hour) * HOUR)
            if t >= self.end:
                break
            name = rng.choice(names)
            plan.events.append(f"restart@{t}")
            self._do(t, name, "stop")
            self._do(t + rng.randint(5_000, 60_000), name, "start")

    def _plan_simple(self, plan: GroupPlan, topic_names: list[str]) -> None:
        rng = self.rng
        topic = rng.choice(topic_names)
        plan.topics = (topic,)
        parts = tuple((topic, q) for q in range(self.topics[topic]))
        name = self._client(
            plan,
            0,
            group_management=False,
            assigned_partitions=parts,
            auto_commit_interval_ms=rng.choice((10_000, 30_000, 60_000)),
            leader_epoch=None,
        )
        self._do(self._at(0.0, 0.3), name, "start")
        if rng.random() < 0.4:
            t = self._at(0.3, 0.7)
            plan.events.append(f"stop@{t}")
            self._do(t, name, "stop", late=True)

    def _plan_ephemeral(self, plan: GroupPlan, topic_names: list[str]) -> None:
        rng = self.rng
        plan.topics = (rng.choice(topic_names),)
        plan.assignors = ("range",)
        common = self._common()
        name = self._client(plan, 0, **common)
        t = self._at(0.0, 0.6)
        stop = t + rng.randint(2 * MINUTE, 45 * MINUTE)
        self._do(t, name, "start")
        self._do(stop, name, "stop", late=True)
        plan.events.append(f"run@{t}-{stop}")
        if rng.random() < 0.2:
            plan.deleted_by_admin = True
            gid = plan.group_id
            at = stop + 5 * MINUTE
            self.sim.at(at, lambda: self.sim.coordinator.handle(DeleteGroupsRequest((gid,))))

    def _do(self, at: int, name: str, action: str, duration: int = 0, kind: str = "gc", late: bool = False) -> None:
        if at >= self.end and not late:
            return
        # the process's client is looked up when the action runs: a protocol switch replaces it
        proc = self.sim.process
        if action == "start":
            if name not in self._starts or at < self._starts[name]:
                self._starts[name] = at
            self.sim.at(at, lambda: proc(name).start())
        elif action == "stop":
            self.sim.at(at, lambda: proc(name).stop())
        elif action == "crash":
            self.sim.at(at, lambda: proc(name).crash())
        else:
            self.sim.at(at, lambda: proc(name).pause(duration, kind))

    # ------------------------------------------------------------------------------------------
    # running
    # ------------------------------------------------------------------------------------------
    def chunks(self, progress: ProgressFn | None = None, step_ms: int = MINUTE) -> Iterator[Chunk]:
        """Run the simulation to the end, yielding encoded chunks of about ``chunk_records``
        (with ``compaction: cleaned``, the cleaned log, once the whole run is done)."""
        if self.cfg.compaction == "none":
            yield from self._written_chunks(progress, step_ms)
            return
        whole = Chunk([], [], [], [], [])
        for c in self._written_chunks(progress, step_ms):
            whole.keys.extend(c.keys)
            whole.values.extend(c.values)
            whole.partitions.extend(c.partitions)
            whole.offsets.extend(c.offsets)
            whole.timestamps.extend(c.timestamps)
        cleaned = self._compact(whole)
        limit = self.cfg.chunk_records
        for i in range(0, len(cleaned), limit):
            yield Chunk(
                cleaned.keys[i : i + limit],
                cleaned.values[i : i + limit],
                cleaned.partitions[i : i + limit],
                cleaned.offsets[i : i + limit],
                cleaned.timestamps[i : i + limit],
            )

    def _compact(self, whole: Chunk) -> Chunk:
        """What the log cleaner leaves (``coordinator_core.compaction``), and the truth about it."""
        counts: dict[int, int] = {}
        firsts: dict[int, int] = {}
        for part, off in zip(whole.partitions, whole.offsets):
            counts[part] = counts.get(part, 0) + 1
            firsts.setdefault(part, off)
        points = cleaner_points_for_dirty_ratio(counts, firsts, self.cfg.compaction_dirty_ratio)
        result = compact(
            zip(whole.partitions, whole.offsets, whole.keys, whole.values, whole.timestamps),
            points,
            self.cfg.delete_retention_ms,
        )
        removed = set(result.removed)
        tomb_removed = set(result.removed_tombstones)
        by_group: dict[str, list[int]] = {}
        key_group: dict[bytes, str] = {}
        for part, off, key in zip(whole.partitions, whole.offsets, whole.keys):
            if (part, off) not in removed:
                continue
            gid = key_group.get(key)
            if gid is None:
                gid = key_group[key] = str(decode_key(key).group)
            n = by_group.setdefault(gid, [0, 0])
            n[0] += 1
            if (part, off) in tomb_removed:
                n[1] += 1
        self._removed_by_group = by_group
        self._compaction_truth = {
            "mode": "cleaned",
            "dirty_ratio": self.cfg.compaction_dirty_ratio,
            "delete_retention_ms": self.cfg.delete_retention_ms,
            "cleaner_points": {str(q): off for q, off in sorted(points.items())},
            "records_written": len(whole),
            "records_kept": len(result.kept),
            "removed": len(result.removed),
            "removed_tombstones": len(result.removed_tombstones),
            "removed_offsets": {str(q): [list(r) for r in runs] for q, runs in sorted(result.removed_ranges().items())},
        }
        out = Chunk([], [], [], [], [])
        for part, off, key, value, ts in result.kept:
            out.partitions.append(part)
            out.offsets.append(off)
            out.keys.append(key)
            out.values.append(value)
            out.timestamps.append(ts)
        return out

    def _written_chunks(self, progress: ProgressFn | None, step_ms: int) -> Iterator[Chunk]:
        t = self.start
        total = self.end - self.start
        limit = self.cfg.chunk_records
        while t < self.end:
            t = min(t + step_ms, self.end)
            self.sim.run(t)
            if self._buffered() >= limit:
                yield self._drain()
            if progress is not None:
                progress(t - self.start, total, self.log.count)
        if self._buffered():
            yield self._drain()

    def _buffered(self) -> int:
        log = self.log
        return len(log) if isinstance(log, BytesLog) else len(log.records)

    def _drain(self) -> Chunk:
        log = self.log
        if isinstance(log, BytesLog):
            return Chunk(*log.drain())
        records, log.records = log.records, []
        values: list[bytes | None] = [encode_value(r.value) for r in records]
        return Chunk(
            [encode_key(r.key) for r in records],
            values,
            [r.partition for r in records],
            [r.offset for r in records],
            [r.timestamp_ms for r in records],
        )

    def truth(self) -> dict[str, Any]:
        """What the simulator knows about every group (JSON-ready)."""
        coord = self.sim.coordinator
        expired = {g: t for t, g in coord.expired_groups}
        deleted = {g: t for t, g in coord.deleted_groups}
        deaths: dict[str, list[dict[str, Any]]] = {}
        for t, dead, cause, generation, tombstone in coord.deaths:
            deaths.setdefault(dead, []).append(
                {"time_ms": t, "cause": cause, "generation": generation, "group_tombstone": tombstone}
            )
        groups: dict[str, Any] = {}
        for gid, plan in sorted(self.plans.items()):
            h = coord.history.get(gid)
            g = coord.groups.get(gid)
            groups[gid] = {
                "kind": plan.kind,
                "partition": self.log.partition(gid),
                "topics": list(plan.topics),
                "assignors": list(plan.assignors),
                "clients": len(plan.clients),
                "static": plan.kind == "static",
                "planned_events": plan.events,
                "exists": g is not None,
                "final_state": g.state if g is not None else ("Dead" if h is not None else "NeverCreated"),
                "generation": g.generation if g is not None else (h.generation if h else 0),
                "protocol_type": g.protocol_type if g is not None else None,
                "protocol": g.protocol if g is not None else None,
                "members": len(g.members) if g is not None else 0,
                "live_offsets": len(g.offsets) if g is not None else 0,
                "rebalances": h.rebalances if h else 0,
                # [time_ms, generation, state left] of every entry into PreparingRebalance
                "rebalance_starts": [list(x) for x in h.rebalance_starts] if h else [],
                "went_empty": h.went_empty if h else 0,
                "group_records": h.group_records if h else 0,
                "commits": coord.commits_of(gid),
                "failovers": h.failovers if h else 0,
                "offset_tombstones": dict(h.offset_tombstones) if h else {},
                "expired_ms": expired.get(gid),
                "deleted_ms": deleted.get(gid),
                "deaths": deaths.get(gid, []),
                "traits": list(plan.traits),
                "group_type": "classic" if g is not None else None,
                "client_protocol": plan.protocol,
            }
            self._consumer_truth(gid, groups[gid])
            if self._compaction_truth is not None:
                removed = self._removed_by_group.get(gid, [0, 0])
                groups[gid]["compaction_removed"] = removed[0]
                groups[gid]["compaction_removed_tombstones"] = removed[1]
        used = sorted({self.log.partition(g) for g in self.plans})
        schedule = self.sim.cleanup_schedule
        return {
            "consumer_group_assignors": sorted({p.server_assignor or "uniform" for p in self.plans.values()}),
            "config": asdict(self.cfg),
            "retention_ms": self.cfg.effective_retention_ms,
            "start_ms": self.start,
            "end_ms": self.end,
            # records handed out (after compaction, if any); records_written: what the brokers appended
            "records": self._compaction_truth["records_kept"] if self._compaction_truth else self.log.count,
            "records_written": self.log.count,
            "topics": {t: {"partitions": n, "messages_per_sec": self.rates[t]} for t, n in sorted(self.topics.items())},
            "deleted_topics": [{"topic": t, "time_ms": at} for t, at in self.deleted_topics],
            "failovers": [{"time_ms": t, "partition": q, "load_ms": d} for t, q, d in self.failovers],
            "idle_partitions": [
                {"topic": tp[0], "partition": tp[1], "idle_since_ms": at} for tp, at in sorted(self.idle.items())
            ],
            # the broker's retention checks per __consumer_offsets partition: from ``from_ms`` on
            # they run at ``first_run_ms + k * interval_ms`` (a failover moves a partition)
            "retention_checks": {
                "interval_ms": self.cfg.retention_check_interval_ms,
                "coordinator": self.cfg.coordinator,
                "partitions": {
                    str(q): [{"from_ms": a, "first_run_ms": b} for a, b in schedule.get(q, [])] for q in used
                },
            },
            "compaction": self._compaction_truth or {"mode": "none"},
            "groups": groups,
            "modern_groups": self.modern.truth(),  # share (KIP-932) and streams (KIP-1071) groups
        }

    def _consumer_truth(self, gid: str, entry: dict[str, Any]) -> None:
        """What the KIP-848 side knows: a live consumer group replaces the classic fields."""
        cg = self.sim.consumer_groups
        h = cg.history.get(gid)
        if h is None:
            return
        entry["conversions"] = [{"time_ms": t, "from": a, "to": b} for t, a, b in h.conversions]
        entry["consumer_history"] = {
            "joins": h.joins,
            "leaves": h.leaves,
            "session_timeouts": h.session_timeouts,
            "static_leaves": h.static_leaves,
            "static_replacements": h.static_replacements,
            "commits": h.commits,
            "rejected_commits": h.rejected_commits,
            "offset_tombstones": dict(h.offset_tombstones),
            "deaths": [{"time_ms": t, "cause": c} for t, c in h.deaths],
        }
        entry["commits"] += h.commits
        if not cg.owns(gid):
            if entry["group_type"] is None:  # gone as a consumer group
                entry["final_state"] = "Dead"
                for t, cause in h.deaths:
                    entry["expired_ms" if cause == "retention" else "deleted_ms"] = t
            return
        c = cg.truth_of(gid)
        entry.update(
            group_type="consumer",
            exists=True,
            final_state=c["final_state"],
            generation=c["group_epoch"],
            protocol_type="consumer",
            protocol=c["assignor"],
            members=len(c["members"]),
            live_offsets=len(c["offsets"]),
            consumer=c,
        )


@dataclass(slots=True)
class GeneratedLog:
    """A whole generated log in memory (library use; the CLI streams chunks instead)."""

    keys: list[bytes]
    values: list[bytes | None]
    partitions: list[int]
    offsets: list[int]
    timestamps: list[int]
    truth: dict[str, Any]

    def __len__(self) -> int:
        return len(self.keys)


def generate(groups: int, hours: float, seed: int = 0, *, fast: bool = True, **options: Any) -> GeneratedLog:
    """Generate a log in memory; ``options`` are ``GeneratorConfig`` fields."""
    gen = LogGenerator(GeneratorConfig(groups=groups, hours=hours, seed=seed, **options), fast=fast)
    out = GeneratedLog([], [], [], [], [], {})
    for chunk in gen.chunks():
        out.keys.extend(chunk.keys)
        out.values.extend(chunk.values)
        out.partitions.extend(chunk.partitions)
        out.offsets.extend(chunk.offsets)
        out.timestamps.extend(chunk.timestamps)
    out.truth = gen.truth()
    return out
