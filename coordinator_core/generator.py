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
- Records are kept as encoded columns only (``BytesLog``): offset-commit keys are cached per
  (group, topic, partition) and values built with a precompiled ``struct``. Successful commit
  responses skip the event queue (they change nothing in a client).
- ``truth()`` reports what the simulator knows (per group: kind, final state, generation,
  completed rebalances, expiry/deletion times, tombstones by cause) for tests to use as known
  answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.coordinator import CoordinatorConfig
from coordinator_core.simulator.engine import Simulator
from coordinator_core.simulator.log import BytesLog, RecordLog
from coordinator_core.simulator.protocol import DeleteGroupsRequest

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
MINUTE = 60_000

KINDS = (("app", 0.40), ("static", 0.13), ("simple", 0.13), ("ephemeral", 0.29), ("connect", 0.05))
SERVICES = ("orders", "payments", "billing", "search", "inventory", "shipping", "fraud", "analytics",
            "notifications", "users", "pricing", "ledger")
TOPIC_WORDS = ("clicks", "orders", "payments", "audit", "metrics", "logs", "users", "events", "cdc", "alerts")
ASSIGNORS = (("range",), ("range",), ("roundrobin",), ("sticky",), ("cooperative-sticky",),
             ("cooperative-sticky", "range"))
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
    coordinator: str = "old"
    offset_value_version: int = 3
    group_value_version: int = 3
    initial_rebalance_delay_ms: int = 3_000
    chunk_records: int = 250_000
    topic_deletions: bool = True
    churn_per_hour: float = 0.5
    failovers_per_hour: float = 0.2  # __consumer_offsets partition leader moves (coordinator failover)
    expiry_rules: str = "current"  # see CoordinatorConfig.expiry_rules ("pre-2.1" writes v1 + expire)


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


class LogGenerator:
    """Plans group lifecycles, runs the simulator and hands out encoded chunks."""

    def __init__(self, config: GeneratorConfig, *, fast: bool = True) -> None:
        """``fast=False`` keeps decoded records and encodes them with ``coordinator_core.codec``
        (the straightforward path: the benchmark's baseline and a cross-check of the bytes)."""
        if config.groups < 1 or config.hours <= 0:
            raise ValueError("groups must be >= 1 and hours > 0")
        if config.expiry_rules not in ("current", "2.4-3.1", "2.1-2.3", "pre-2.1"):
            raise ValueError(f"unknown expiry rules {config.expiry_rules!r}")
        self.cfg = config
        self.fast = fast
        self.rng = random.Random(config.seed)
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
        )
        self.topics: dict[str, int] = {}
        self.rates: dict[str, float] = {}
        self._make_topics()
        self.sim = Simulator(coord, self.topics, log=self.log, trace=False, seed=config.seed,
                             start_ms=self.start, topic_rates=self.rates, drop_ok_commit_responses=True)
        self.plans: dict[str, GroupPlan] = {}
        self.deleted_topics: list[tuple[str, int]] = []
        self.failovers: list[tuple[int, int, int]] = []  # (time, partition, load_ms)
        self._plan()

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
            getattr(self, f"_plan_{kind}")(plan, topic_names)
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

    def _client(self, plan: GroupPlan, k: int, **kw: Any) -> str:
        name = f"{plan.group_id}#{k}"
        version, sub_version = kw.pop("versions", (7, 1))
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
        common = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 3_000, "versions": (5, 0),
                  "protocol_type": "connect", "enable_auto_commit": False, "connectors": rng.randint(1, 8)}
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
        name = self._client(plan, 0, group_management=False, assigned_partitions=parts,
                            auto_commit_interval_ms=rng.choice((10_000, 30_000, 60_000)), leader_epoch=None)
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
        c = self.sim.clients[name]
        if action == "start":
            self.sim.at(at, c.start)
        elif action == "stop":
            self.sim.at(at, c.stop)
        elif action == "crash":
            self.sim.at(at, c.crash)
        else:
            self.sim.at(at, lambda: c.pause(duration, kind))

    # ------------------------------------------------------------------------------------------
    # running
    # ------------------------------------------------------------------------------------------
    def chunks(self, progress: ProgressFn | None = None, step_ms: int = MINUTE) -> Iterator[Chunk]:
        """Run the simulation to the end, yielding encoded chunks of about ``chunk_records``."""
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
        from coordinator_core import codec

        records, log.records = log.records, []
        values: list[bytes | None] = [codec.encode_value(r.value) for r in records]
        return Chunk([codec.encode_key(r.key) for r in records], values, [r.partition for r in records],
                     [r.offset for r in records], [r.timestamp_ms for r in records])

    def truth(self) -> dict[str, Any]:
        """What the simulator knows about every group (JSON-ready)."""
        coord = self.sim.coordinator
        expired = {g: t for t, g in coord.expired_groups}
        deleted = {g: t for t, g in coord.deleted_groups}
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
                "went_empty": h.went_empty if h else 0,
                "group_records": h.group_records if h else 0,
                "commits": coord.commits_of(gid),
                "failovers": h.failovers if h else 0,
                "offset_tombstones": dict(h.offset_tombstones) if h else {},
                "expired_ms": expired.get(gid),
                "deleted_ms": deleted.get(gid),
            }
        return {
            "config": asdict(self.cfg),
            "retention_ms": self.cfg.effective_retention_ms,
            "start_ms": self.start,
            "end_ms": self.end,
            "records": self.log.count,
            "topics": {t: {"partitions": n, "messages_per_sec": self.rates[t]} for t, n in sorted(self.topics.items())},
            "deleted_topics": [{"topic": t, "time_ms": at} for t, at in self.deleted_topics],
            "failovers": [{"time_ms": t, "partition": q, "load_ms": d} for t, q, d in self.failovers],
            "groups": groups,
        }


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
