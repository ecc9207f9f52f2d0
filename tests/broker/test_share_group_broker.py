"""A share group (KIP-932) on a real Kafka 4.4 broker, driven by Kafka's own console share
consumer (``kafka-console-share-consumer``, from the same jars): two consumers join, one leaves,
the other leaves. At each settled moment Kafka's ``ShareGroupCommand --describe --state
--members --verbose`` answers; offsetlake's replay of the broker's ``__consumer_offsets``
segments as of that moment must give the same state, group and assignment epochs, members,
member epochs and assignments (issue 35). The broker is the judge."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.kafka import kafka_tools
from pipelines.kafka.local_broker import LocalBroker, java_binary

pytestmark = [pytest.mark.broker, pytest.mark.timeout(900)]

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
GROUP, TOPIC = "g4-share", "g4-share-orders"
WAIT_S = 180.0


def _describe(broker: LocalBroker, what: str) -> list[dict[str, str]]:
    args = ["--bootstrap-server", broker.bootstrap, "--describe", "--group", GROUP, f"--{what}", "--verbose"]
    try:
        rows = kafka_tools.parse_table(kafka_tools.run_tool(broker.bundle, SHARE_GROUP_COMMAND, args))
    except kafka_tools.KafkaToolFailed as exc:
        if "GroupIdNotFoundException" in str(exc) or "does not exist" in str(exc):
            return []  # the first member has not joined yet
        raise
    return [r for r in rows if "MESSAGE" not in r]


def _moment(broker: LocalBroker, settled: Callable[[dict[str, str], list[dict[str, str]]], bool]) -> dict[str, Any]:
    """Poll Kafka's describe until ``settled``; then the answer and the moment it was true."""
    deadline = time.monotonic() + WAIT_S
    last: Any = None
    while time.monotonic() < deadline:
        states = _describe(broker, "state")
        members = _describe(broker, "members")
        last = (states, members)
        # before the first member's heartbeat the group does not exist yet: no row, poll again
        if len(states) == 1 and settled(states[0], members):
            state = states[0]
            # the answer again after the moment: nothing moved in between (heartbeats of a
            # settled share group write no records)
            at = int(time.time() * 1000)
            if (_describe(broker, "state"), _describe(broker, "members")) == ([state], members):
                return {"at": at, "state": state, "members": members}
        time.sleep(0.5)
    raise AssertionError(f"the share group did not settle in {WAIT_S:.0f} s: {last}")


def _all_on_epoch(n: int) -> Callable[[dict[str, str], list[dict[str, str]]], bool]:
    def ok(state: dict[str, str], members: list[dict[str, str]]) -> bool:
        if int(state["#MEMBERS"]) != n or len(members) != n:
            return False
        epoch = state["ASSIGNMENT-EPOCH"]
        return state["GROUP-EPOCH"] == epoch and all(m["MEMBER-EPOCH"] == epoch for m in members)

    return ok


@pytest.fixture
def consumers(kafka4: LocalBroker, tmp_path: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


def _start(broker: LocalBroker, client_id: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [java_binary(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", broker.classpath()]
    cmd += [CONSOLE_SHARE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", TOPIC, "--group", GROUP]
    cmd += ["--command-property", f"client.id={client_id}"]
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=out, start_new_session=True)


def _stop(p: subprocess.Popen[bytes]) -> None:
    p.terminate()  # the console consumer closes its share consumer: it leaves the group
    p.wait(timeout=60)


class _Capture(threading.Thread):
    """``__consumer_offsets`` read as it is written (the fixture's broker compacts it within
    seconds: a copy of its segments later would hold only each key's latest record)."""

    def __init__(self, bootstrap: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.partitions = bootstrap, partitions
        self.seen: dict[tuple[int, int], tuple[int, bytes, bytes | None]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "g4-capture", "enable.auto.commit": False})
        c.assign([TopicPartition("__consumer_offsets", p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self.done.is_set():
                for m in c.consume(500, 0.1):
                    if m.error() is None and m.key() is not None:
                        self.seen[(m.partition(), m.offset())] = (m.timestamp()[1], m.key(), m.value())
        finally:
            c.close()


def _replayed(broker: LocalBroker, capture: _Capture, dest: Path, at_ms: int, group: str = GROUP) -> Any:
    """offsetlake's core on what the capture read (and the segments hold), ``group`` as of ``at_ms``."""
    from coordinator_core import LogRecord, decode_record, snapshot_as_of
    from pipelines.inputs.segment_files import SegmentRecord, read_segment_items

    raw = dict(capture.seen)
    for d in sorted(broker.copy_offsets_segments(dest).iterdir()):
        part = int(d.name.rsplit("-", 1)[1])
        for item in read_segment_items(d):
            if isinstance(item, SegmentRecord) and item.control_type is None:  # not a cut batch, not a marker
                raw.setdefault((part, item.offset), (item.timestamp_ms, item.key, item.value))
    records = []
    for (part, off), (ts, key, value) in sorted(raw.items()):
        rec = decode_record(key, value, modern=True)
        if rec.key.group == group:
            records.append(LogRecord(part, off, ts, rec.key, rec.value))
    assert records, f"no record of group {group} in __consumer_offsets"
    return snapshot_as_of(records, group_id=group, as_of_ms=at_ms), records


def _as_kafka_describes(snap: Any, part: int) -> tuple[dict[str, str], list[dict[str, str]]]:
    from pipelines.analytics.inspect_modern import share_description

    d = share_description(snap.modern, part)
    state = {
        "STATE": d["state"],
        "GROUP-EPOCH": str(d["group_epoch"]),
        "ASSIGNMENT-EPOCH": str(d["assignment_epoch"]),
        "#MEMBERS": str(d["member_count"]),
    }
    members = [
        {
            "CONSUMER-ID": m["member_id"],
            "HOST": m["client_host"],
            "CLIENT-ID": m["client_id"],
            "#PARTITIONS": str(m["partitions"]),
            "MEMBER-EPOCH": str(m["member_epoch"]),
            "ASSIGNMENT": m["assignment"],
        }
        for m in d["members"]
    ]
    return state, members


def test_a_share_group_replayed_equals_what_the_broker_describes(
    kafka4: LocalBroker, consumers: dict[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, 4, 1)]).values():
        fut.result(timeout=60)
    producer = Producer({"bootstrap.servers": kafka4.bootstrap})
    for i in range(40):
        producer.produce(TOPIC, f"order-{i}".encode(), partition=i % 4)
    producer.flush(30)

    capture = _Capture(kafka4.bootstrap, len(kafka4.offsets_dirs()) or 3)
    capture.start()
    moments = []
    try:
        consumers["a"] = _start(kafka4, "share-a", tmp_path / "a.log")
        moments.append(_moment(kafka4, _all_on_epoch(1)))
        consumers["b"] = _start(kafka4, "share-b", tmp_path / "b.log")
        moments.append(_moment(kafka4, _all_on_epoch(2)))
        _stop(consumers["a"])
        moments.append(_moment(kafka4, _all_on_epoch(1)))
        _stop(consumers["b"])
        moments.append(_moment(kafka4, lambda s, m: s["STATE"] == "Empty" and not m))
        time.sleep(2)  # the capture reads the last write
    finally:  # a failed wait must not leave the capture's consumer polling a stopped broker
        capture.done.set()
        capture.join(timeout=30)

    kinds = []
    for i, mo in enumerate(moments):
        snap, records = _replayed(kafka4, capture, tmp_path / f"segments-{i}", mo["at"])
        want_state = {k: mo["state"][k] for k in ("STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")}
        want_members = sorted(
            ({k: m[k] for k in ("CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")}
             for m in mo["members"]),
            key=lambda m: m["CONSUMER-ID"],
        )  # fmt: skip
        state, members = _as_kafka_describes(snap, records[0].partition)
        told = [(r.key.version, r.offset, r.timestamp_ms - mo["at"], r.value is None) for r in records]
        assert (state, members) == (want_state, want_members), f"moment {i}: {told}"
        row = snap.to_state_row()
        assert (row["group_type"], row["offsets_kept_in"], row["offset_count"]) == ("share", "__share_group_state", 0)
        kinds.append({r.key.version for r in records})
    # the records Kafka wrote for it: share-group types only (10-15), nothing in __consumer_offsets' commit keys
    assert set().union(*kinds) <= {10, 11, 12, 13, 14, 15} and {10, 11, 12, 13, 14} <= set().union(*kinds)
