"""Scenarios: topics, client configs and a timeline of actions, from a plain dict.

Rules:
- ``Scenario.from_dict`` validates strictly: an unknown key or a bad value raises
  ``ConfigError`` naming the key path (``timeline[2].acton``). YAML parsing lives in
  ``pipelines.inputs.scenario_files`` (the core has no third-party imports).
- Top-level keys: ``name``, ``description``, ``until_ms``, ``seed``, ``coordinator`` (fields of
  ``CoordinatorConfig``), ``topics`` (name → partitions, or ``{partitions, messages_per_sec}``),
  ``client_defaults`` and ``clients`` (fields of ``ClientConfig``; ``client_version: pre-2.4``
  makes the consumers behave as the seeds' pre-KIP-429 clients), ``timeline``, ``expect``.
- Timeline actions: ``start``, ``stop``, ``crash``, ``pause`` (``duration_ms``, ``kind``: gc |
  slow_poll), ``subscribe`` (``topics``), ``commit``, ``drop_next_response`` (``api``,
  ``count``), ``delay_next_request`` (``api``, ``delay_ms``), ``request`` (manual clients:
  ``api`` JoinGroup | SyncGroup | Heartbeat | LeaveGroup | OffsetCommit), ``delete_topic`` /
  ``set_partitions`` (``topic``, ``partitions``), ``delete_group`` (``group``),
  ``failover`` (``group``, ``load_ms``), ``partition_leader_change`` (``topic``: seed 004, a
  no-op for the group protocol).
- ``run()`` returns a ``ScenarioResult`` (trace, records, the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from coordinator_core.codec.records import LogRecord
from coordinator_core.errors import ConfigError
from coordinator_core.simulator import protocol as p
from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.coordinator import CoordinatorConfig
from coordinator_core.simulator.engine import Simulator
from coordinator_core.simulator.trace import TraceEvent, state_sequence

TOP_KEYS = {
    "name",
    "description",
    "until_ms",
    "seed",
    "coordinator",
    "topics",
    "client_defaults",
    "clients",
    "timeline",
    "expect",
}
ACTIONS: dict[str, set[str]] = {
    "start": set(),
    "stop": set(),
    "crash": set(),
    "pause": {"duration_ms", "kind"},
    "subscribe": {"topics"},
    "commit": set(),
    "drop_next_response": {"api", "count"},
    "delay_next_request": {"api", "delay_ms"},
    "request": {"api"},
    "delete_topic": {"topic"},
    "set_partitions": {"topic", "partitions"},
    "delete_group": {"group"},
    "failover": {"group", "load_ms"},
    "partition_leader_change": {"topic"},
}
CLIENT_ACTIONS = {
    "start",
    "stop",
    "crash",
    "pause",
    "subscribe",
    "commit",
    "drop_next_response",
    "delay_next_request",
    "request",
}
EXPECT_KEYS = {"group", "states", "rebalances", "generation", "final_state", "records", "group_records"}
APIS = {"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch"}


def _fail(path: str, msg: str) -> ConfigError:
    return ConfigError(f"{path}: {msg}")


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected a mapping, got {type(value).__name__}")
    return value


def _int(value: Any, path: str, minimum: int | None = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise _fail(path, f"must be >= {minimum}, got {value}")
    return value


def _dataclass_kwargs(cls: type, raw: dict[str, Any], path: str, skip: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    known = {f.name: f for f in fields(cls)}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k not in known or k in skip:
            raise _fail(f"{path}.{k}", f"unknown key (known: {', '.join(sorted(set(known) - skip))})")
        f = known[k]
        t = str(f.type)
        if t.startswith("tuple") and isinstance(v, list):
            if "TP" in t or "tuple[str, int]" in t:
                v = tuple((str(x[0]), int(x[1])) for x in v)
            else:
                v = tuple(v)
        if v is None and "None" in t:
            out[k] = v  # an optional setting left unset (e.g. a seeded retention check phase)
            continue
        if "int" in t and t.split("|")[0].strip() == "int" and not isinstance(v, int):
            raise _fail(f"{path}.{k}", f"expected an integer, got {v!r}")
        if t == "bool" and not isinstance(v, bool):
            raise _fail(f"{path}.{k}", f"expected true/false, got {v!r}")
        if t == "str" and not isinstance(v, str):
            raise _fail(f"{path}.{k}", f"expected a string, got {v!r}")
        out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    at_ms: int
    action: str
    client: str | None = None
    args: tuple[tuple[str, Any], ...] = ()

    def arg(self, name: str, default: Any = None) -> Any:
        return dict(self.args).get(name, default)


@dataclass(slots=True)
class Scenario:
    """A validated scenario (see module docstring)."""

    name: str
    description: str
    until_ms: int
    seed: int
    coordinator: CoordinatorConfig
    topics: dict[str, int]
    topic_rates: dict[str, float]
    clients: dict[str, ClientConfig]
    timeline: list[TimelineEntry]
    expect: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Any, path: str = "scenario") -> Scenario:
        """Validate a plain dict (e.g. parsed YAML); raises ``ConfigError`` with the key path."""
        data = _mapping(raw, path)
        for k in data:
            if k not in TOP_KEYS:
                raise _fail(f"{path}.{k}", f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
        name = str(data.get("name", "scenario"))
        until = _int(data.get("until_ms", 60_000), f"{path}.until_ms")
        seed = _int(data.get("seed", 0), f"{path}.seed", None)
        coord = CoordinatorConfig(
            **_dataclass_kwargs(
                CoordinatorConfig, _mapping(data.get("coordinator", {}), f"{path}.coordinator"), f"{path}.coordinator"
            )
        )
        if coord.coordinator not in ("old", "new"):
            raise _fail(f"{path}.coordinator.coordinator", "must be 'old' or 'new'")
        if coord.expiry_rules not in ("current", "2.4-3.1", "2.1-2.3", "pre-2.1"):
            raise _fail(f"{path}.coordinator.expiry_rules", "must be one of current, 2.4-3.1, 2.1-2.3, pre-2.1")
        if coord.new_group_state not in ("Empty", "Stable"):
            raise _fail(f"{path}.coordinator.new_group_state", "must be 'Empty' or 'Stable'")
        topics: dict[str, int] = {}
        rates: dict[str, float] = {}
        for t, spec in _mapping(data.get("topics", {}), f"{path}.topics").items():
            tp = f"{path}.topics.{t}"
            if isinstance(spec, dict):
                for k in spec:
                    if k not in ("partitions", "messages_per_sec"):
                        raise _fail(f"{tp}.{k}", "unknown key (known: messages_per_sec, partitions)")
                topics[t] = _int(spec.get("partitions", 1), f"{tp}.partitions", 1)
                rates[t] = float(spec.get("messages_per_sec", 10.0))
            else:
                topics[t] = _int(spec, tp, 1)
        defaults = _mapping(data.get("client_defaults", {}), f"{path}.client_defaults")
        default_kwargs = _dataclass_kwargs(ClientConfig, defaults, f"{path}.client_defaults", {"client_id"})
        clients: dict[str, ClientConfig] = {}
        for cname, craw in _mapping(data.get("clients", {}), f"{path}.clients").items():
            cpath = f"{path}.clients.{cname}"
            kwargs = dict(default_kwargs)
            kwargs.update(_dataclass_kwargs(ClientConfig, _mapping(craw or {}, cpath), cpath))
            kwargs.setdefault("client_id", cname)
            if "group_id" not in kwargs:
                raise _fail(f"{cpath}.group_id", "missing (set it here or in client_defaults)")
            version = kwargs.get("client_version", "2.4+")
            if version not in ("2.4+", "pre-2.4"):
                raise _fail(f"{cpath}.client_version", f"must be '2.4+' or 'pre-2.4', got {version!r}")
            if version == "pre-2.4" and "cooperative-sticky" in kwargs.get("assignors", ()):
                raise _fail(f"{cpath}.assignors", "cooperative-sticky needs a 2.4+ client (KIP-429)")
            clients[cname] = ClientConfig(**kwargs)
        timeline: list[TimelineEntry] = []
        raw_timeline = data.get("timeline", [])
        if not isinstance(raw_timeline, list):
            raise _fail(f"{path}.timeline", "expected a list")
        for i, e in enumerate(raw_timeline):
            ep = f"{path}.timeline[{i}]"
            entry = _mapping(e, ep)
            action = entry.get("action")
            if action not in ACTIONS:
                raise _fail(f"{ep}.action", f"unknown action {action!r} (known: {', '.join(sorted(ACTIONS))})")
            allowed = {"at_ms", "action", "client"} | ACTIONS[action]
            for k in entry:
                if k not in allowed:
                    raise _fail(f"{ep}.{k}", f"unknown key for action {action} (known: {', '.join(sorted(allowed))})")
            at = _int(entry.get("at_ms", 0), f"{ep}.at_ms")
            client = entry.get("client")
            if action in CLIENT_ACTIONS and client not in clients:
                raise _fail(f"{ep}.client", f"unknown client {client!r}")
            if "api" in entry and entry["api"] not in APIS:
                raise _fail(f"{ep}.api", f"unknown api {entry['api']!r} (known: {', '.join(sorted(APIS))})")
            if action in ("delete_topic", "set_partitions", "partition_leader_change") and "topic" not in entry:
                raise _fail(f"{ep}.topic", "missing")
            args = tuple(sorted((k, v) for k, v in entry.items() if k not in ("at_ms", "action", "client")))
            timeline.append(TimelineEntry(at, action, client, args))
        expect = _mapping(data.get("expect", {}), f"{path}.expect")
        for k in expect:
            if k not in EXPECT_KEYS:
                raise _fail(f"{path}.expect.{k}", f"unknown key (known: {', '.join(sorted(EXPECT_KEYS))})")
        return cls(
            name, str(data.get("description", "")), until, seed, coord, topics, rates, clients, timeline, dict(expect)
        )

    def build(self, trace: bool = True) -> Simulator:
        """A simulator with the clients added and the timeline scheduled."""
        sim = Simulator(self.coordinator, self.topics, trace=trace, seed=self.seed, topic_rates=self.topic_rates)
        for name, cfg in self.clients.items():
            sim.add_client(name, ClientConfig(**{f.name: getattr(cfg, f.name) for f in fields(ClientConfig)}))
        for entry in self.timeline:
            sim.at(entry.at_ms, _action(sim, entry))
        return sim

    def run(self, trace: bool = True) -> ScenarioResult:
        """Build, run until ``until_ms`` and collect the results."""
        sim = self.build(trace)
        sim.run(self.until_ms)
        return ScenarioResult(self, sim)


def _action(sim: Simulator, e: TimelineEntry) -> Any:
    def run() -> None:
        c = sim.clients[e.client] if e.client is not None and e.client in sim.clients else None
        a = e.action
        if c is not None:
            if a == "start":
                c.start()
            elif a == "stop":
                c.stop()
            elif a == "crash":
                c.crash()
            elif a == "pause":
                c.pause(int(e.arg("duration_ms", 0)), str(e.arg("kind", "gc")))
            elif a == "subscribe":
                c.subscribe(tuple(e.arg("topics", ())))
            elif a == "commit":
                c.commit()
            elif a == "drop_next_response":
                api = str(e.arg("api"))
                c.drop_next[api] = c.drop_next.get(api, 0) + int(e.arg("count", 1))
            elif a == "delay_next_request":
                c.delay_next[str(e.arg("api"))] = int(e.arg("delay_ms", 0))
            elif a == "request":
                _manual_request(c, str(e.arg("api")))
            return
        if a == "delete_topic":
            sim.delete_topic(str(e.arg("topic")))
        elif a == "set_partitions":
            sim.set_partitions(str(e.arg("topic")), int(e.arg("partitions", 1)))
        elif a == "delete_group":
            sim.coordinator.handle(p.DeleteGroupsRequest((str(e.arg("group")),)))
        elif a == "failover":
            sim.failover(str(e.arg("group")), int(e.arg("load_ms", 0)))
        elif a == "partition_leader_change":
            # Seed 004: consumers switch fetch brokers; the group protocol sees nothing.
            sim.trace(TraceEvent(sim.now, "*", "timer", api="PartitionLeaderChange", detail=str(e.arg("topic"))))

    return run


def _manual_request(c: Any, api: str) -> None:
    if not c.running:
        c.running = True
    if api == "JoinGroup":
        c.send_join()
    elif api == "SyncGroup":
        c.send_sync()
    elif api == "Heartbeat":
        c.send_heartbeat()
    elif api == "LeaveGroup":
        c.send_leave()
    elif api == "OffsetCommit":
        c.commit()
    elif api == "OffsetFetch":
        c.send_fetch()


@dataclass(slots=True)
class ScenarioResult:
    scenario: Scenario
    sim: Simulator

    @property
    def events(self) -> list[TraceEvent]:
        return self.sim.events

    @property
    def records(self) -> list[LogRecord]:
        return self.sim.log.records

    def states(self, group_id: str) -> list[str]:
        return state_sequence(self.sim.events, group_id)

    def completed_rebalances(self, group_id: str) -> int:
        """Rebalances that ended with an assignment (transitions into Stable)."""
        return sum(
            1 for e in self.sim.events if e.kind == "transition" and e.group_id == group_id and e.to_state == "Stable"
        )

    def check(self) -> list[str]:
        """Compare with the scenario's ``expect`` block; returns the mismatches (empty = ok)."""
        exp = self.scenario.expect
        if not exp:
            return []
        gid = str(exp.get("group", ""))
        problems = []
        if "states" in exp and self.states(gid) != list(exp["states"]):
            problems.append(f"states: expected {exp['states']}, got {self.states(gid)}")
        g = self.sim.coordinator.groups.get(gid)
        if "rebalances" in exp:
            got = self.completed_rebalances(gid)
            if got != exp["rebalances"]:
                problems.append(f"rebalances: expected {exp['rebalances']}, got {got}")
        if "generation" in exp:
            gen = g.generation if g is not None else None
            if gen != exp["generation"]:
                problems.append(f"generation: expected {exp['generation']}, got {gen}")
        if "final_state" in exp and self.sim.state_of(gid) != exp["final_state"]:
            problems.append(f"final_state: expected {exp['final_state']}, got {self.sim.state_of(gid)}")
        if "records" in exp and len(self.records) != exp["records"]:
            problems.append(f"records: expected {exp['records']}, got {len(self.records)}")
        if "group_records" in exp:
            n = sum(1 for r in self.records if r.key.version == 2)
            if n != exp["group_records"]:
                problems.append(f"group_records: expected {exp['group_records']}, got {n}")
        return problems
