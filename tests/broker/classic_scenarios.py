"""The Kafka 3.9 classic-coordinator scenarios: real groups, the truth recorded from outside offsetlake.

``run_all(broker, workdir)`` drives every scenario in turn on one broker (distinct group ids and
topics, prefix ``c39-``) and returns ``Truth``: the broker's Admin API answers at labelled
wall-clock moments, each member's own callback log, and the groups the broker deleted.
``offsetlake capture`` follows the topic the whole time (``landing_live``), so offsetlake sees every
record before the log cleaner compacts it; the cleaner runs throughout (3 s segment rolls).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.kafka import kafka_tools
from tests.broker.harness import Feeder, Member, Recorder, now_ms, wait_until

PARTITIONS = 6
GROUPS = {
    "lifecycle": "c39-lifecycle",  # one by one, graceful leave, SIGKILL + session expiry, Empty, expiry
    "atonce": "c39-atonce",  # three members at once (roundrobin)
    "static": "c39-static",  # static members restarted within the session timeout, a rolling restart
    "coop": "c39-coop",  # cooperative-sticky incremental rebalances
    "admin": "c39-admin",  # admin offset deletion and offset alteration on an Empty group
    "admindel": "c39-admindel",  # admin group deletion
    "simple": "c39-simple",  # an assign-only consumer committing
    "txn": "c39-txn",  # transactional offset commits, committed and aborted
    "keeper": "c39-keeper",  # stays Stable to the end (the final state is not all Dead)
}


@dataclass
class Truth:
    bootstrap: str
    moments: list[dict[str, Any]] = field(default_factory=list)
    members: dict[str, list[list[dict[str, Any]]]] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)  # group -> first moment the broker no longer knew it
    marks: dict[str, int] = field(default_factory=dict)
    txn: dict[str, Any] = field(default_factory=dict)

    def moment(self, label: str) -> dict[str, Any]:
        return next(m for m in self.moments if m["label"] == label)

    def dump(self, path: Path) -> None:
        def enc(o: Any) -> Any:
            if isinstance(o, dict):
                return {(k if isinstance(k, str) else json.dumps(k)): enc(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return [enc(v) for v in o]
            return o

        import dataclasses

        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        path.write_text(json.dumps(enc(data), indent=1))


def topic(name: str) -> str:
    return f"{GROUPS[name]}-t"


def start_capture(bootstrap: str, landing: Path, log: Path) -> subprocess.Popen[bytes]:
    """``offsetlake capture`` following the topic (no ``--until-end``) until SIGTERM."""
    cmd = [sys.executable, "-m", "pipelines", "capture", "--bootstrap-servers", bootstrap, "--from", "earliest"]
    cmd += ["--out", str(landing), "--flush-interval", "1", "--no-progress"]
    return subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT)


def stop_capture(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("offsetlake capture did not stop within 60 s of SIGTERM") from None
    assert proc.returncode == 0, f"offsetlake capture exited {proc.returncode}"


def run_all(broker: Any, workdir: Path, after_scenarios: Any = None) -> Truth:
    """Every scenario, in turn; then wait for the broker to expire and delete the Empty groups."""
    rec = Recorder(broker.bootstrap)
    truth = Truth(broker.bootstrap, moments=rec.moments)
    rec.create_topics([topic(n) for n in GROUPS], PARTITIONS)
    members: list[Member] = []
    landing = workdir / "landing_live"
    cap = start_capture(broker.bootstrap, landing, workdir / "capture_live.log")

    def member(name: str, client: str, **opts: Any) -> Member:
        m = Member(workdir, broker.bootstrap, GROUPS[name], [topic(name)], client, **opts)
        m.group = GROUPS[name]  # type: ignore[attr-defined]
        members.append(m)
        return m

    keeper: list[Member] = []
    ok = False
    try:
        with Feeder(broker.bootstrap, {topic(n): PARTITIONS for n in GROUPS}):
            keeper += [member("keeper", "keep-1", instance_id="keep-static-1", session_ms=20000)]
            keeper += [member("keeper", "keep-2")]
            _lifecycle(rec, truth, member)
            _at_once(rec, member)
            _static(rec, member)
            _cooperative(rec, member)
            _admin(rec, truth, member, broker.bootstrap, broker.bundle)
            _simple(rec, truth, broker.bootstrap)
            _transactions(rec, truth, broker.bootstrap)
            rec.wait_stable(GROUPS["keeper"], 2)
            for m in keeper:
                m.wait_committed()
            time.sleep(1.5)  # the last positions committed
        truth.marks["feeder_stopped"] = now_ms()
        time.sleep(1.5)
        rec.moment("keeper-final", GROUPS["keeper"])
        if after_scenarios is not None:
            after_scenarios()
        _wait_deleted(rec, truth, [g for k, g in GROUPS.items() if k != "keeper"])
        rec.moment("keeper-end", GROUPS["keeper"])
        time.sleep(2.0)
        ok = True
    finally:
        if not ok:
            for m in members:
                m.stop_quietly()
        if cap.poll() is None:
            stop_capture(cap)
        for m in members:
            truth.members.setdefault(m.group, []).append(m.events())  # type: ignore[attr-defined]
    truth.marks["end"] = now_ms()
    truth.keeper = keeper  # type: ignore[attr-defined]
    return truth


def _lifecycle(rec: Recorder, truth: Truth, member: Any) -> None:
    g = GROUPS["lifecycle"]
    m1 = member("lifecycle", "life-1", session_ms=3000)
    rec.wait_stable(g, 1)
    m1.wait_committed()
    rec.moment("lifecycle-1", g)
    m2 = member("lifecycle", "life-2", session_ms=3000)
    rec.wait_stable(g, 2)
    rec.moment("lifecycle-2", g)
    m3 = member("lifecycle", "life-3", session_ms=3000)
    rec.wait_stable(g, 3)
    m3.wait_committed()
    rec.moment("lifecycle-3", g)
    m3.term()  # graceful: LeaveGroup
    rec.wait_stable(g, 2)
    rec.moment("lifecycle-after-leave", g)
    truth.marks["lifecycle-kill"] = m2.kill()  # no LeaveGroup: the session must expire
    rec.moment("lifecycle-killed-in-session", g)
    rec.wait_stable(g, 1, timeout_s=30)
    rec.moment("lifecycle-after-expiry", g)
    time.sleep(1.0)
    m1.term()
    rec.wait_state(g, "EMPTY")
    rec.moment("lifecycle-empty", g)


def _at_once(rec: Recorder, member: Any) -> None:
    g = GROUPS["atonce"]
    ms = [member("atonce", f"once-{i}", assignor="roundrobin") for i in (1, 2, 3)]
    rec.wait_stable(g, 3)
    for m in ms:
        m.wait_committed()
    rec.moment("atonce-3", g)
    for m in ms:
        m.term()
    rec.wait_state(g, "EMPTY")
    rec.moment("atonce-empty", g)


def _static(rec: Recorder, member: Any) -> None:
    g = GROUPS["static"]
    s1 = member("static", "stat-1", instance_id="static-1", session_ms=15000)
    s2 = member("static", "stat-2", instance_id="static-2", session_ms=15000)
    rec.wait_stable(g, 2)
    s1.wait_committed()
    rec.moment("static-2", g)
    s1.kill()  # a crash: the static member's id stays in the group for the session timeout
    s1b = member("static", "stat-1", instance_id="static-1", session_ms=15000)  # back within the session
    wait_until("static-1 restarted and assigned", lambda: s1b.assigned(), 30)
    rec.wait_stable(g, 2)
    s1b.wait_committed()
    rec.moment("static-restarted", g)
    s2.term()  # rolling restart: a static member's close sends no LeaveGroup
    s2b = member("static", "stat-2", instance_id="static-2", session_ms=15000)
    wait_until("static-2 restarted and assigned", lambda: s2b.assigned(), 30)
    rec.wait_stable(g, 2)
    s2b.wait_committed()
    rec.moment("static-rolled", g)
    s1b.term()
    s2b.term()
    rec.wait_state(g, "EMPTY", timeout_s=40)  # after the 15 s session timeouts
    rec.moment("static-empty", g)


def _cooperative(rec: Recorder, member: Any) -> None:
    g = GROUPS["coop"]
    ms = []
    for i in (1, 2, 3):
        ms.append(member("coop", f"coop-{i}", assignor="cooperative-sticky", session_ms=6000))
        rec.wait_stable(g, i)
        ms[-1].wait_committed()
        time.sleep(0.5)
        rec.moment(f"coop-{i}", g)
    ms[0].term()
    rec.wait_stable(g, 2)
    rec.moment("coop-after-leave", g)
    for m in ms[1:]:
        m.term()
    rec.wait_state(g, "EMPTY")
    rec.moment("coop-empty", g)


def _admin(rec: Recorder, truth: Truth, member: Any, bootstrap: str, bundle: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    g, gd = GROUPS["admin"], GROUPS["admindel"]
    a = member("admin", "adm-1")
    d = member("admindel", "del-1")
    rec.wait_stable(g, 1)
    rec.wait_stable(gd, 1)
    a.wait_committed()
    d.wait_committed()
    a.term()
    d.term()
    rec.wait_state(g, "EMPTY")
    rec.wait_state(gd, "EMPTY")
    rec.moment("admin-empty", g)
    t = topic("admin")
    # confluent-kafka has no DeleteConsumerGroupOffsets: Kafka's own tool sends it
    args = ["--bootstrap-server", bootstrap, "--delete-offsets", "--group", g, "--topic", f"{t}:0"]
    kafka_tools.run_tool(bundle, kafka_tools.CONSUMER_GROUP_COMMAND, args)
    truth.marks["admin-offset-deleted"] = now_ms()
    rec.moment("admin-offset-deleted", g)
    alter = [ConsumerGroupTopicPartitions(g, [TopicPartition(t, 1, 3, metadata="set-by-admin")])]
    rec.admin.alter_consumer_group_offsets(alter)[g].result(timeout=15)
    rec.moment("admin-offset-altered", g)
    rec.moment("admindel-before", gd)
    rec.admin.delete_consumer_groups([gd], request_timeout=15)[gd].result(timeout=15)
    truth.deleted[gd] = now_ms()
    rec.moment("admindel-deleted", gd)


def _simple(rec: Recorder, truth: Truth, bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    g, t = GROUPS["simple"], topic("simple")
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": g,
            "client.id": "simple-1",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        c.assign([TopicPartition(t, 0), TopicPartition(t, 2)])
        c.commit(offsets=[TopicPartition(t, 0, 4, metadata="simple-a"), TopicPartition(t, 2, 6)], asynchronous=False)
        rec.moment("simple-1", g)
        time.sleep(1.0)
        c.commit(offsets=[TopicPartition(t, 0, 5, metadata="simple-b")], asynchronous=False)
        rec.moment("simple-2", g)
    finally:
        c.close()


def _transactions(rec: Recorder, truth: Truth, bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    g, t = GROUPS["txn"], topic("txn")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": g, "enable.auto.commit": False, "log_level": 3})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "c39-txn-producer", "log_level": 3})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(t, b"committed", partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(t, 0, 5), TopicPartition(t, 1, 7)], c.consumer_group_metadata(), 30
        )
        p.commit_transaction(30)
        truth.txn["committed"] = {"t": now_ms(), "offsets": [[t, 0, 5], [t, 1, 7]]}
        # the COMMIT marker reaches __consumer_offsets after EndTxn returns: the offsets show then
        wait_until("the committed transaction's offsets", lambda: len(rec.describe(g)["offsets"]) == 2, 30)
        rec.moment("txn-committed", g)
        p.begin_transaction()
        p.produce(t, b"aborted", partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(t, 0, 9), TopicPartition(t, 2, 3)], c.consumer_group_metadata(), 30
        )
        time.sleep(0.5)
        p.abort_transaction(30)
        truth.txn["aborted"] = {"t": now_ms(), "offsets": [[t, 0, 9], [t, 2, 3]]}
        rec.moment("txn-aborted", g)
    finally:
        c.close()


def _wait_deleted(rec: Recorder, truth: Truth, groups: list[str], timeout_s: float = 150.0) -> None:
    """The broker expires the Empty groups' offsets (retention 1 min) and then deletes each group."""
    deadline = time.monotonic() + timeout_s
    left = [g for g in groups if g not in truth.deleted]
    while left and time.monotonic() < deadline:
        known = rec.groups()
        for g in list(left):
            if g not in known:
                truth.deleted[g] = now_ms()
                rec.moment(f"{g}-deleted", g)
                left.remove(g)
        time.sleep(0.5)
    assert not left, f"the broker did not delete {left} within {timeout_s:.0f} s"
