"""A small world of real consumer groups on a real broker: what ``offsetlake quickstart --kafka real`` runs.

Rules:
- Every group is driven by real clients (confluent-kafka) against a ``LocalBroker``: the records in
  ``__consumer_offsets`` are written by Kafka's own coordinator, never by offsetlake.
- The world (about 90 s, most of it waiting for one group's offsets to expire):
  ``orders-service`` (classic, range: three members join one by one, one leaves gracefully),
  ``payments-service`` (classic, cooperative-sticky: two members at once), ``audit-archiver`` (a
  static member, ``group.instance.id``, restarted within its session timeout), ``billing-reconciler``
  (a simple consumer: ``assign()`` and commits, no membership), ``ledger-txn`` (offsets committed
  in a transaction, one committed and one aborted), ``reports-legacy`` (commits, leaves, its offsets
  expire after ``offsets.retention.minutes`` and the broker deletes the group) and, on Kafka 4,
  ``fraud-service`` (the KIP-848 consumer protocol).
- The truth comes from the broker, not from offsetlake: ``broker_groups`` is the Admin API's
  ``describe_consumer_groups`` and ``list_consumer_group_offsets`` answers taken at ``truth_ms``
  (wall clock), with the live groups still running; deleted groups are those the broker no longer
  lists. The caller captures the topic right after, so the log ends at about that moment.
- Every wait is bounded; every client is closed on the way out, whatever happened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pipelines.kafka.client import require_confluent_kafka

TOPICS = {"orders": 6, "payments": 4, "audit": 2, "ledger": 2, "reports": 2, "fraud": 4}
EXPIRING_GROUP = "reports-legacy"
#: how long the expiring group's offsets may take to go (retention 60 s + the cleanup tick + slack)
EXPIRY_WAIT_S = 120.0


@dataclass
class BrokerGroup:
    """What the broker said of one group at ``WorldRun.truth_ms``."""

    group_id: str
    state: str
    group_type: str
    members: list[dict[str, Any]]
    offsets: dict[tuple[str, int], int]


@dataclass
class WorldRun:
    groups: list[str]
    truth_ms: int = 0
    broker_groups: dict[str, BrokerGroup] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    moments: list[tuple[str, int]] = field(default_factory=list)


class _Member(threading.Thread):
    """One consumer polling and committing synchronously until told to stop."""

    def __init__(self, ck: Any, conf: dict[str, Any], topics: list[str], *, commit: bool = True) -> None:
        super().__init__(daemon=True)
        self.consumer = ck.Consumer(conf)
        self.topics, self.commit, self.stop_event = topics, commit, threading.Event()
        self.errors: list[str] = []
        self.leave_on_close = True

    def run(self) -> None:
        self.consumer.subscribe(self.topics)
        while not self.stop_event.is_set():
            msgs = self.consumer.consume(num_messages=200, timeout=0.3)
            if msgs and self.commit:
                try:
                    self.consumer.commit(asynchronous=False)
                except Exception as exc:  # a commit during a rebalance: the next poll commits again
                    self.errors.append(str(exc))
        self.consumer.close()

    def finish(self, timeout_s: float = 20.0) -> None:
        self.stop_event.set()
        self.join(timeout_s)


def _conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"{group}-client",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if extra.get("group.protocol") != "consumer":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    conf.update(extra)
    return conf


def _produce(ck: Any, bootstrap: str, per_partition: int) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for topic, parts in TOPICS.items():
        for p in range(parts):
            for i in range(per_partition):
                producer.produce(topic, value=f"{topic}-{p}-{i}".encode(), partition=p)
    producer.flush(30)


def _create_topics(ck: Any, admin: Any) -> None:
    new_topic = ck.admin.NewTopic
    futures = admin.create_topics([new_topic(t, n, 1) for t, n in TOPICS.items()], operation_timeout=30)
    for fut in futures.values():
        fut.result(30)


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    raise TimeoutError(f"the real world did not settle: {what} within {timeout_s:.0f} s")


def _listed(admin: Any) -> set[str]:
    res = admin.list_consumer_groups(request_timeout=10).result(15)
    return {g.group_id for g in res.valid}


def _transactional_commits(ck: Any, bootstrap: str) -> None:
    """``ledger-txn``: offsets sent in a transaction, the first committed, the second aborted."""
    from confluent_kafka import TopicPartition

    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ledger-writer"})
    consumer = ck.Consumer(_conf(bootstrap, "ledger-txn"))
    try:
        producer.init_transactions(30)
        for offset, outcome in ((50, "commit"), (90, "abort")):
            producer.begin_transaction()
            producer.produce("ledger", value=b"entry", partition=0)
            offsets = [TopicPartition("ledger", 0, offset), TopicPartition("ledger", 1, offset)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
    finally:
        consumer.close()
        producer.flush(10)


def _simple_commits(ck: Any, bootstrap: str) -> None:
    """``billing-reconciler``: assign() only, commits without ever joining the group."""
    from confluent_kafka import TopicPartition

    consumer = ck.Consumer(_conf(bootstrap, "billing-reconciler"))
    try:
        consumer.assign([TopicPartition("payments", p, 0) for p in range(TOPICS["payments"])])
        consumer.commit(offsets=[TopicPartition("payments", p, 40 + p) for p in range(4)], asynchronous=False)
    finally:
        consumer.close()


@contextmanager
def _members() -> Iterator[list[_Member]]:
    running: list[_Member] = []
    try:
        yield running
    finally:
        for m in running:
            m.finish()


def drive(
    bootstrap: str,
    *,
    kip848: bool,
    while_live: Callable[[WorldRun], None],
    echo: Callable[[str], None] = lambda m: None,
) -> WorldRun:
    """Run the world on the broker at ``bootstrap``; returns the broker's own answers (the truth).

    ``while_live(run)`` runs right after the truth was taken, with every live member still in its
    group (the capture goes there: once the members close, their groups go Empty).
    """
    ck = require_confluent_kafka()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    run = WorldRun(groups=["orders-service", "payments-service", "audit-archiver", "billing-reconciler", "ledger-txn"])
    run.groups += [EXPIRING_GROUP] + (["fraud-service"] if kip848 else [])
    _create_topics(ck, admin)
    _produce(ck, bootstrap, per_partition=100)

    def start(group: str, topics: list[str], **extra: Any) -> _Member:
        member = _Member(ck, _conf(bootstrap, group, **extra), topics)
        member.start()
        running.append(member)
        return member

    with _members() as running:
        # a group that commits, leaves and is forgotten: first, so its offsets expire while the rest runs
        reports = start(EXPIRING_GROUP, ["reports"])
        _wait(lambda: EXPIRING_GROUP in _listed(admin), 30, f"{EXPIRING_GROUP} to appear")
        time.sleep(3)
        reports.finish()
        running.remove(reports)
        run.moments.append((f"{EXPIRING_GROUP} left (Empty)", int(time.time() * 1000)))
        echo(f"[real] {EXPIRING_GROUP} committed and left: its offsets expire in ~60 s")
        for _ in range(3):  # three members join one by one
            start("orders-service", ["orders"], **{"partition.assignment.strategy": "range"})
            time.sleep(2)
        for _ in range(2):  # two at once, incremental
            start("payments-service", ["payments"], **{"partition.assignment.strategy": "cooperative-sticky"})
        static = start("audit-archiver", ["audit"], **{"group.instance.id": "audit-0"})
        if kip848:
            for _ in range(2):
                start("fraud-service", ["fraud"], **{"group.protocol": "consumer"})
        _simple_commits(ck, bootstrap)
        _transactional_commits(ck, bootstrap)
        time.sleep(4)
        running[0].finish()  # an orders-service member leaves gracefully
        running.pop(0)
        run.moments.append(("orders-service member left", int(time.time() * 1000)))
        static.finish()  # the static member restarts within its session timeout (6 s)
        running.remove(static)
        time.sleep(2)
        start("audit-archiver", ["audit"], **{"group.instance.id": "audit-0"})
        run.moments.append(("audit-archiver static member back", int(time.time() * 1000)))
        _produce(ck, bootstrap, per_partition=20)  # some lag for the live groups
        echo("[real] waiting for the broker to expire and delete reports-legacy (offsets.retention.minutes=1)")
        _wait(lambda: EXPIRING_GROUP not in _listed(admin), EXPIRY_WAIT_S, f"the broker to delete {EXPIRING_GROUP}")
        time.sleep(3)  # the live groups commit what they consumed
        run.truth_ms = int(time.time() * 1000)
        run.broker_groups = describe(admin, [g for g in run.groups if g != EXPIRING_GROUP])
        run.deleted = [g for g in run.groups if g not in _listed(admin)]
        while_live(run)
    return run


def describe(admin: Any, groups: list[str]) -> dict[str, BrokerGroup]:
    """The broker's answers for ``groups``: Admin API describe + committed offsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    out: dict[str, BrokerGroup] = {}
    described = admin.describe_consumer_groups(groups, request_timeout=15)
    for group, fut in described.items():
        desc = fut.result(20)
        offsets_fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
        tps = next(iter(offsets_fut.values())).result(20).topic_partitions or []
        members = [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "group_instance_id": m.group_instance_id,
                "partitions": sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])),
            }
            for m in desc.members
        ]
        state = getattr(desc.state, "name", str(desc.state))
        gtype = getattr(getattr(desc, "type", None), "name", "UNKNOWN")
        out[group] = BrokerGroup(
            group, state, gtype, members, {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
        )
    return out
