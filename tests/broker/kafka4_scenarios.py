"""Real groups on a Kafka 4.4 broker, driven by real clients, with the broker's truth recorded.

Members are separate processes (``tests.broker.kafka4_member``: librdkafka, KIP-848
``group.protocol=consumer`` or ``classic``), so SIGTERM is a graceful leave and SIGKILL a crash
the broker learns of only when the member's session expires. At each moment a scenario calls
``observe``: the broker's answer through the Admin API (``describe_consumer_groups``,
``list_consumer_group_offsets``) and, for the epochs the Python Admin API does not carry,
Kafka's own ``kafka-consumer-groups --describe --state/--members --verbose`` from the same jars,
each with the wall-clock times around it (``t_before``, ``t_after``, epoch ms). Every wait is
bounded; a scenario that cannot reach a state raises with what it saw.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOPIC = "k4-orders"  # 6 partitions, shared by the scenarios (each has its own group ids)
SHARE_TOPIC = "k4-share-orders"
REGEX_TOPICS = ("k4-rx-a", "k4-rx-b")  # 2 partitions each; k4-rx-b is created mid-scenario
PARTITIONS = 6
WAIT_S = 120.0  # generous: the machine running the suite may be loaded
REPO = Path(__file__).resolve().parents[2]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Observation:
    """What the broker said about one group at one moment."""

    scenario: str
    group: str
    label: str
    t_before: int
    t_after: int
    description: dict[str, Any] | None  # Admin API; None: the broker does not know the group
    offsets: dict[str, tuple[int, str]]  # "topic-partition" -> (offset, metadata)
    state_rows: list[dict[str, str]] = field(default_factory=list)  # kafka-consumer-groups --state
    member_rows: list[dict[str, str]] = field(default_factory=list)  # kafka-consumer-groups --members
    t_admin: int = 0  # when the Admin API's answers were in (the tools answered after it)


class Members:
    """Member processes of every scenario, their event files; all killed at the end."""

    def __init__(self, bootstrap: str, folder: Path) -> None:
        self.bootstrap = bootstrap
        self.folder = folder
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()

    def start(self, name: str, group: str, *, protocol: str = "consumer", **opts: Any) -> None:
        events = self.folder / f"{name}.jsonl"
        cmd = [sys.executable, "-m", "tests.broker.kafka4_member", "--bootstrap", self.bootstrap]
        cmd += ["--group", group, "--topics", opts.pop("topics", TOPIC), "--protocol", protocol]
        cmd += ["--client-id", opts.pop("client_id", name), "--events", str(events)]
        for k, v in opts.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        with self.lock:
            self.procs[name] = proc

    def term(self, name: str, wait_s: float = 20.0) -> None:
        """A graceful leave: SIGTERM, then wait for the member to close."""
        proc = self.procs[name]
        proc.terminate()
        proc.wait(timeout=wait_s)

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        proc.kill()
        proc.wait(timeout=10)

    def events(self, name: str) -> list[dict[str, Any]]:
        path = self.folder / f"{name}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def member_id(self, name: str) -> str | None:
        ids = [e["member_id"] for e in self.events(name) if e.get("member_id")]
        return ids[-1] if ids else None

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def _tp(tp: Any) -> str:
    return f"{tp.topic}-{tp.partition}"


def describe(admin: Any, group: str) -> dict[str, Any] | None:
    """``describe_consumer_groups`` as plain data (None when the broker has no such group)."""
    from confluent_kafka import KafkaException

    try:
        d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    except KafkaException as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return None
        raise
    state = d.state.name
    if state == "DEAD":
        return None
    members = []
    for m in d.members:
        target = m.target_assignment.topic_partitions if m.target_assignment is not None else None
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "group_instance_id": m.group_instance_id,
                "assignment": sorted(_tp(tp) for tp in m.assignment.topic_partitions),
                "target_assignment": None if target is None else sorted(_tp(tp) for tp in target),
            }
        )
    return {
        "type": d.type.name,
        "state": state,
        "assignor": d.partition_assignor,
        "members": sorted(members, key=lambda m: m["member_id"]),
    }


def committed(admin: Any, group: str) -> dict[str, tuple[int, str]]:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

    try:
        fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10)[group]
        result = fut.result(timeout=15)
    except KafkaException as exc:
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return {}
        raise
    return {_tp(tp): (tp.offset, tp.metadata or "") for tp in result.topic_partitions if tp.offset >= 0}


@dataclass
class Ctx:
    """What a scenario needs: the broker, its members, the truth it records."""

    bootstrap: str
    bundle: str
    admin: Any
    members: Members
    observations: list[Observation] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, scenario: str, group: str, label: str, *, tools: bool = True) -> Observation:
        from pipelines.kafka.kafka_tools import describe_group

        t_before = now_ms()
        desc = describe(self.admin, group)
        offsets = committed(self.admin, group)
        obs = Observation(scenario, group, label, t_before, now_ms(), desc, offsets)
        obs.t_admin = obs.t_after
        if tools and desc is not None:
            obs.state_rows = describe_group(self.bundle, self.bootstrap, group, "state")
            if desc["type"] == "CONSUMER":
                obs.member_rows = describe_group(self.bundle, self.bootstrap, group, "members")
            obs.t_after = now_ms()  # every answer came inside [t_before, t_after]
        with self.lock:
            self.observations.append(obs)
        return obs

    def wait(self, what: str, check: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.25)
        raise AssertionError(f"waited {timeout_s:.0f} s for {what}")

    def wait_members(self, group: str, n: int, *, type_: str | None = None, timeout_s: float = WAIT_S) -> None:
        """Until the group has ``n`` members, Stable, every partition owned, each member's
        assignment its target (consumer groups), and (if given) of that type."""

        def ok() -> bool:
            d = describe(self.admin, group)
            if d is None or len(d["members"]) != n or d["state"] != "STABLE":
                return False
            if type_ is not None and d["type"] != type_:
                return False
            owned = sorted(p for m in d["members"] for p in m["assignment"])
            if owned != sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS)):
                return False
            return all(m["target_assignment"] in (None, m["assignment"]) for m in d["members"])

        self.wait(f"{group}: {n} members, stable" + (f", {type_}" if type_ else ""), ok, timeout_s)

    def wait_gone(self, group: str, timeout_s: float) -> tuple[int, int]:
        """Until the broker holds no offsets of the group and no group: (last time it still held
        something, first time it held nothing), epoch ms."""
        last_seen = now_ms()

        def gone() -> bool:
            nonlocal last_seen
            t = now_ms()
            if committed(self.admin, group) or describe(self.admin, group) is not None:
                last_seen = t
                return False
            return True

        self.wait(f"{group}: offsets expired and group deleted", gone, timeout_s)
        return last_seen, now_ms()


# ---------------------------------------------------------------------------------------------
# Scenarios (each in its own thread, its own group ids)
# ---------------------------------------------------------------------------------------------
EXPIRY_WAIT_S = 150.0  # offsets.retention.minutes=1 after the last commit, checked every second


def wait_state(ctx: Ctx, group: str, state: str) -> None:
    ctx.wait(f"{group}: {state}", lambda: (describe(ctx.admin, group) or {}).get("state") == state)


def consumer_lifecycle(ctx: Ctx) -> None:
    """KIP-848: joins one by one and at once, a graceful leave, a SIGKILL (session expiry), the
    group emptied, its offsets expired and the group deleted by the broker."""
    g, m, s = "k4-cg", ctx.members, "consumer"
    m.start("cg-a", g)
    ctx.wait_members(g, 1, type_="CONSUMER")
    ctx.observe(s, g, "first member")
    m.start("cg-b", g)
    ctx.wait_members(g, 2)
    ctx.observe(s, g, "second member joined")
    m.start("cg-c", g)
    m.start("cg-d", g)
    ctx.wait_members(g, 4)
    ctx.observe(s, g, "two joined at once")
    m.term("cg-b")
    ctx.wait_members(g, 3)
    ctx.observe(s, g, "graceful leave")
    m.kill("cg-c")
    ctx.notes["cg-c killed"] = now_ms()
    ctx.wait_members(g, 2)
    ctx.observe(s, g, "killed member's session expired")
    m.term("cg-a")
    m.term("cg-d")
    wait_state(ctx, g, "EMPTY")
    ctx.observe(s, g, "empty")
    ctx.notes[g] = ctx.wait_gone(g, EXPIRY_WAIT_S)
    ctx.observe(s, g, "expired and deleted", tools=False)


def static_members(ctx: Ctx) -> None:
    """Static membership under the consumer protocol, a rolling restart: each static member in
    turn closed (a static leave, member epoch -2: its partitions stay reserved) and restarted
    within the session timeout takes its instance id back under a new member id with the same
    partitions. (A SIGKILLed static member's instance id stays held until its session expires: a
    restart before that is refused with UNRELEASED_INSTANCE_ID, fatal to librdkafka.)"""
    g, m, s = "k4-static", ctx.members, "static"
    m.start("st-1", g, instance_id="inst-1", client_id="st-1")
    m.start("st-2", g, instance_id="inst-2", client_id="st-2")
    ctx.wait_members(g, 2, type_="CONSUMER")
    ctx.observe(s, g, "two static members")
    # a rolling restart: each static member closed and restarted in turn, under its instance id
    for name, inst, label in (
        ("st-1", "inst-1", "static member restarted"),
        ("st-2", "inst-2", "rolling restart done"),
    ):
        m.term(name)
        ctx.notes[f"{name} left"] = now_ms()
        m.start(f"{name}b", g, instance_id=inst, client_id=name)
        ctx.wait(
            f"{g}: {inst} back under a new member id",
            lambda inst=inst, new=f"{name}b": any(
                x["group_instance_id"] == inst and x["member_id"] == m.member_id(new)
                for x in (describe(ctx.admin, g) or {"members": []})["members"]
            ),
        )
        ctx.wait_members(g, 2)
        ctx.observe(s, g, label)
    m.term("st-1b")
    m.term("st-2b")
    wait_state(ctx, g, "EMPTY")
    ctx.observe(s, g, "static members left")


def online_upgrade(ctx: Ctx) -> None:
    """A classic group (librdkafka's classic protocol, range) upgraded online to a consumer group
    when a KIP-848 member joins, then downgraded when that member leaves."""
    g, m, s = "k4-upgrade", ctx.members, "upgrade"
    m.start("up-1", g, protocol="classic", assignor="range")
    m.start("up-2", g, protocol="classic", assignor="range")
    ctx.wait_members(g, 2, type_="CLASSIC")
    ctx.observe(s, g, "classic group")
    m.start("up-3", g)
    ctx.wait_members(g, 3, type_="CONSUMER")
    ctx.observe(s, g, "upgraded to consumer")
    m.term("up-3")
    ctx.wait_members(g, 2, type_="CLASSIC")
    ctx.observe(s, g, "downgraded to classic")
    m.term("up-1")
    m.term("up-2")
    wait_state(ctx, g, "EMPTY")
    ctx.observe(s, g, "empty")


def classic_group(ctx: Ctx) -> None:
    """The classic protocol served by the new coordinator: cooperative-sticky joins and a leave."""
    g, m, s = "k4-classic", ctx.members, "classic"
    m.start("cl-1", g, protocol="classic", assignor="cooperative-sticky")
    m.start("cl-2", g, protocol="classic", assignor="cooperative-sticky")
    ctx.wait_members(g, 2, type_="CLASSIC")
    ctx.observe(s, g, "two members")
    m.start("cl-3", g, protocol="classic", assignor="cooperative-sticky")
    ctx.wait_members(g, 3)
    ctx.observe(s, g, "third joined")
    m.term("cl-2")
    ctx.wait_members(g, 2)
    ctx.observe(s, g, "graceful leave")
    m.term("cl-1")
    m.term("cl-3")
    wait_state(ctx, g, "EMPTY")
    ctx.observe(s, g, "empty")


def admin_deletions(ctx: Ctx) -> None:
    """An admin offset deletion (kafka-consumer-groups --delete-offsets) and an admin group
    deletion (``delete_consumer_groups``) of an empty consumer group."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    from pipelines.kafka.kafka_tools import CONSUMER_GROUP_COMMAND, run_tool

    g, m, s = "k4-admin", ctx.members, "admin"
    m.start("ad-1", g)
    ctx.wait_members(g, 1, type_="CONSUMER")
    ctx.wait(f"{g}: a commit", lambda: len(committed(ctx.admin, g)) == PARTITIONS)
    m.term("ad-1")
    wait_state(ctx, g, "EMPTY")
    ctx.observe(s, g, "empty", tools=False)  # quickly: its offsets expire a minute after the last commit
    # while the tool's JVM starts (a minute on a loaded machine), the Admin API commits the offsets
    # again every few seconds (fresh commit times): the empty group's offsets must not expire first
    again = [TopicPartition(TOPIC, p, off) for p, off in sorted(_by_partition(committed(ctx.admin, g)).items())]
    done = threading.Event()

    def refresh() -> None:
        while not done.is_set():
            ctx.admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, again)])[g].result(timeout=15)
            ctx.notes["admin re-committed"] = now_ms()
            done.wait(5.0)

    refresher = threading.Thread(target=refresh, daemon=True)
    refresher.start()
    args = ["--bootstrap-server", ctx.bootstrap, "--delete-offsets", "--group", g, "--topic", f"{TOPIC}:0"]
    try:
        ctx.wait("a fresh commit", lambda: "admin re-committed" in ctx.notes)
        again = [tp for tp in again if tp.partition != 0]  # the refresher keeps the others only
        ctx.notes["delete-offsets output"] = run_tool(ctx.bundle, CONSUMER_GROUP_COMMAND, args)
    finally:
        done.set()
        refresher.join(timeout=30)
    ctx.observe(s, g, "offset deleted", tools=False)
    ctx.admin.delete_consumer_groups([g], request_timeout=10)[g].result(timeout=15)
    ctx.observe(s, g, "group deleted", tools=False)


def _by_partition(offsets: dict[str, tuple[int, str]]) -> dict[int, int]:
    return {int(tp.rsplit("-", 1)[1]): off for tp, (off, _) in offsets.items() if tp.startswith(f"{TOPIC}-")}


def regex_subscription(ctx: Ctx) -> None:
    """A KIP-848 member subscribed by regular expression (ConsumerGroupRegularExpression records,
    type 16): the regex matches k4-rx-a, on which it commits (its commits name the topic id);
    then k4-rx-b is created and matched, holding nothing to commit, so no commit names its id:
    Kafka 4.4 writes no PartitionMetadata, the broker names it from its metadata, offsetlake by
    elimination (``modern.consumer.model.names_by_elimination``); a second member splits them."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    g, m, s = "k4-regex", ctx.members, "regex"
    a, b = REGEX_TOPICS
    producer = Producer({"bootstrap.servers": ctx.bootstrap, "log_level": 3})
    for p in range(2):
        producer.produce(a, b"rx", partition=p)
    producer.flush(15)
    m.start("rx-1", g, topics="^k4-rx-.*")

    def stable(n: int, parts: set[str]) -> Callable[[], bool]:
        def ok() -> bool:
            d = describe(ctx.admin, g)
            if d is None or d["state"] != "STABLE" or len(d["members"]) != n:
                return False
            owned = {p for x in d["members"] for p in x["assignment"]}
            return owned == parts and all(x["target_assignment"] in (None, x["assignment"]) for x in d["members"])

        return ok

    ctx.wait(
        f"{g}: rx-1 on {a}, committed", lambda: stable(1, {f"{a}-0", f"{a}-1"})() and len(committed(ctx.admin, g)) == 2
    )
    ctx.observe(s, g, "one topic matched")
    for fut in ctx.admin.create_topics([NewTopic(b, 2, 1)]).values():
        fut.result(timeout=30)
    both = {f"{t}-{p}" for t in REGEX_TOPICS for p in range(2)}
    ctx.wait(f"{g}: {b} matched", stable(1, both))
    ctx.observe(s, g, "new topic matched")
    m.start("rx-2", g, topics="^k4-rx-.*")
    ctx.wait(f"{g}: two members", stable(2, both))
    ctx.observe(s, g, "second member")
    m.term("rx-1")
    m.term("rx-2")


def share_group(ctx: Ctx) -> None:
    """A KIP-932 share group driven by Kafka's own console share consumer (same jars), so the
    log holds share-group records (types 10-15)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from pipelines.kafka.kafka_tools import run_tool

    g = "k4-share"
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, g, incremental_configs=[entry])
    for fut in ctx.admin.incremental_alter_configs([resource]).values():
        fut.result(timeout=15)
    producer = Producer({"bootstrap.servers": ctx.bootstrap})
    for i in range(10):
        producer.produce(SHARE_TOPIC, key=str(i), value=f"share-{i}")
    producer.flush(15)
    args = ["--bootstrap-server", ctx.bootstrap, "--topic", SHARE_TOPIC, "--group", g]
    args += ["--max-messages", "10", "--timeout-ms", "30000"]
    out = run_tool(ctx.bundle, "org.apache.kafka.tools.consumer.ConsoleShareConsumer", args, timeout_s=90)
    ctx.notes["share consumed"] = [ln for ln in out.splitlines() if ln.startswith("share-")]


def simple_consumer(ctx: Ctx) -> None:
    """An assign-only (simple) consumer commits twice without ever joining: the new coordinator
    keeps a classic group with no members (Empty) holding its offsets."""
    from confluent_kafka import Consumer, TopicPartition

    g, s = "k4-simple", "simple"
    c = Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": g, "client.id": "simple-1", "log_level": 3})
    try:
        c.assign([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 2)])
        c.commit(
            offsets=[TopicPartition(TOPIC, 0, 4, metadata="simple-a"), TopicPartition(TOPIC, 2, 6)], asynchronous=False
        )
        ctx.observe(s, g, "first commit")
        c.commit(offsets=[TopicPartition(TOPIC, 0, 5, metadata="simple-b")], asynchronous=False)
        ctx.observe(s, g, "second commit")
    finally:
        c.close()


TXN_COMMITTED = {0: 5, 1: 7}  # k4-txn's offsets sent in the transaction that commits
TXN_ABORTED = {0: 9, 2: 3}  # and in the one that aborts


def transactions(ctx: Ctx) -> None:
    """Offsets committed in transactions (``send_offsets_to_transaction``) for a KIP-848 consumer
    group's member (its member id and epoch, ``consumer_group_metadata``): one transaction
    commits, the next aborts; offsetlake reads ``__consumer_offsets`` read_committed."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    g, s = "k4-txn", "txn"
    conf = {"bootstrap.servers": ctx.bootstrap, "group.id": g, "client.id": "txn-1", "group.protocol": "consumer"}
    c = Consumer({**conf, "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3})
    p = Producer({"bootstrap.servers": ctx.bootstrap, "transactional.id": "k4-txn-producer", "log_level": 3})
    try:
        c.subscribe([TOPIC])

        def assigned() -> bool:
            c.poll(0.1)
            return len(c.assignment()) == PARTITIONS and describe(ctx.admin, g) is not None

        ctx.wait(f"{g}: its member assigned", assigned)
        ctx.wait_members(g, 1, type_="CONSUMER")
        p.init_transactions(30)
        for outcome, offsets in (("committed", TXN_COMMITTED), ("aborted", TXN_ABORTED)):
            c.poll(0.1)
            p.begin_transaction()
            p.produce(TOPIC, b"txn", partition=0)
            tps = [TopicPartition(TOPIC, part, off) for part, off in offsets.items()]
            p.send_offsets_to_transaction(tps, c.consumer_group_metadata(), 30)
            if outcome == "committed":
                p.commit_transaction(30)
                # the COMMIT marker reaches __consumer_offsets after EndTxn returns: the offsets show then
                ctx.wait(f"{g}: the committed offsets", lambda: len(committed(ctx.admin, g)) == len(TXN_COMMITTED))
            else:
                p.abort_transaction(30)
            ctx.notes[f"txn {outcome}"] = now_ms()
            ctx.observe(s, g, f"transaction {outcome}")
    finally:
        c.close()
        p.flush(10)
    wait_state(ctx, g, "EMPTY")
    ctx.observe(s, g, "member left", tools=False)


SCENARIOS: tuple[Callable[[Ctx], None], ...] = (
    consumer_lifecycle,
    static_members,
    online_upgrade,
    classic_group,
    admin_deletions,
    regex_subscription,
    share_group,
    simple_consumer,
    transactions,
)


def run_all(ctx: Ctx) -> dict[str, str]:
    """Every scenario in its own thread (they share the broker, not their groups); the error of
    each that failed, by name."""
    errors: dict[str, str] = {}

    def one(fn: Callable[[Ctx], None]) -> None:
        try:
            fn(ctx)
        except Exception as exc:
            errors[fn.__name__] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=one, args=(fn,), name=fn.__name__, daemon=True) for fn in SCENARIOS]
    for t in threads:
        t.start()
    deadline = time.monotonic() + EXPIRY_WAIT_S + 8 * WAIT_S
    for t in threads:
        t.join(timeout=max(deadline - time.monotonic(), 0.1))
        if t.is_alive():
            errors[t.name] = "still running when the run's time was up"
    return errors


def producer_loop(bootstrap: str, stop: threading.Event, every_s: float = 0.5) -> None:
    """Keeps the topic moving so the members' positions (and commits) move."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    i = 0
    while not stop.is_set():
        for p in range(PARTITIONS):
            producer.produce(TOPIC, key=str(i), value=b"x", partition=p)
        i += 1
        producer.poll(0)
        stop.wait(every_s)
    producer.flush(10)


def create_topics(admin: Any) -> None:
    from confluent_kafka.admin import NewTopic

    futures = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 1), NewTopic(SHARE_TOPIC, 2, 1), NewTopic(REGEX_TOPICS[0], 2, 1)]
    )
    for fut in futures.values():
        fut.result(timeout=30)
