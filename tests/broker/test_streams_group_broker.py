"""A streams group (KIP-1071) on a real Kafka 4.4 broker, driven by Kafka Streams 4.4 itself
(``streams_app/G4WordCount.java``: the shape of Kafka's WordCountDemo, whose examples jar is not
on Maven Central; ``group.protocol=streams``): one process starts, a second joins (tasks move),
the first leaves. At each settled moment Kafka's
``StreamsGroupCommand --describe --state --members --verbose`` answers; offsetlake's replay of
``__consumer_offsets`` as captured must give the same state, group and target-assignment epochs,
members, processes, member epochs and tasks (issue 35). The broker is the judge."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.kafka import kafka_tools
from pipelines.kafka.local_broker import LocalBroker, java_binary
from tests.broker.test_share_group_broker import _Capture

pytestmark = [pytest.mark.broker, pytest.mark.timeout(1200)]

STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
WORD_COUNT = Path(__file__).resolve().parent / "streams_app" / "G4WordCount.java"
APP, INPUT = "g4-wordcount", "streams-plaintext-input"
WAIT_S = 240.0


def _describe(broker: LocalBroker, what: str) -> list[dict[str, str]]:
    args = ["--bootstrap-server", broker.bootstrap, "--describe", "--group", APP, f"--{what}", "--verbose"]
    try:
        rows = kafka_tools.parse_table(kafka_tools.run_tool(broker.bundle, STREAMS_GROUP_COMMAND, args))
    except kafka_tools.KafkaToolFailed as exc:
        if "GroupIdNotFoundException" in str(exc):
            return []  # the first process has not joined yet
        raise
    return [r for r in rows if "MESSAGE" not in r]


def _tasks(text: str) -> set[tuple[str, str, int]]:
    """``ACTIVE: 0:[0,1]; 1:[0]; STANDBY: ...`` (Kafka's printing; the table's cell lost its last
    space) as (role, subtopology, partition)."""
    out = set()
    for role, body in re.findall(
        r"(TARGET-ACTIVE|TARGET-STANDBY|TARGET-WARMUP|ACTIVE|STANDBY|WARMUP): ((?:[^:;\s]+:\[[^\]]*\];\s*)*)", text
    ):
        for sub, parts in re.findall(r"([^:;\s]+):\[([^\]]*)\]", body):
            out.update((role, sub, int(p)) for p in parts.split(",") if p.strip())
    return out


def _moment(broker: LocalBroker, settled: Callable[[dict[str, str], list[dict[str, str]]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    last: Any = None
    while time.monotonic() < deadline:
        states = _describe(broker, "state")
        members = _describe(broker, "members") if states else []
        last = (states, members)
        if len(states) == 1 and settled(states[0], members):
            at = int(time.time() * 1000)
            if (_describe(broker, "state"), _describe(broker, "members")) == (states, members):
                return {"at": at, "state": states[0], "members": members}
        time.sleep(1.0)
    raise AssertionError(f"the streams group did not settle in {WAIT_S:.0f} s: {last}")


def _stable_with(n: int) -> Callable[[dict[str, str], list[dict[str, str]]], bool]:
    def ok(state: dict[str, str], members: list[dict[str, str]]) -> bool:
        return state["STATE"] == "Stable" and int(state["#MEMBERS"]) == n and len(members) == n

    return ok


@pytest.fixture
def apps() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)


def _start(broker: LocalBroker, name: str, work: Path) -> subprocess.Popen[bytes]:
    props = work / f"{name}.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={APP}",
                f"bootstrap.servers={broker.bootstrap}",
                "group.protocol=streams",
                f"state.dir={work / name}",
                f"client.id={APP}-{name}",
                "commit.interval.ms=500",
                "num.stream.threads=1",
            ]
        )
    )
    cmd = [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", broker.classpath()]
    with open(work / f"{name}.log", "ab") as out:
        return subprocess.Popen(
            [*cmd, str(WORD_COUNT), str(props)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _as_kafka_describes(snap: Any, part: int) -> tuple[dict[str, str], dict[str, tuple[Any, ...]]]:
    from pipelines.analytics.inspect_modern import streams_description

    d = streams_description(snap.modern, part)
    state = {
        "STATE": d["state"],
        "GROUP-EPOCH": str(d["group_epoch"]),
        "TARGET-ASSIGNMENT-EPOCH": str(d["target_assignment_epoch"]),
        "#MEMBERS": str(d["member_count"]),
    }
    members = {
        m["member_id"]: (m["process_id"], m["client_id"], str(m["member_epoch"]), _tasks(m["assignments"]))
        for m in d["members"]
    }
    return state, members


def test_a_streams_group_replayed_equals_what_the_broker_describes(
    kafka4: LocalBroker, apps: dict[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.test_share_group_broker import _replayed

    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    for topic in (INPUT, "streams-wordcount-output"):
        for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
            fut.result(timeout=60)
    producer = Producer({"bootstrap.servers": kafka4.bootstrap})
    for i in range(20):
        producer.produce(INPUT, f"all streams lead to kafka {i}".encode(), partition=i % 2)
    producer.flush(30)

    capture = _Capture(kafka4.bootstrap, len(kafka4.offsets_dirs()) or 3)
    capture.start()
    moments = []
    try:
        apps["p1"] = _start(kafka4, "p1", tmp_path)
        moments.append(_moment(kafka4, _stable_with(1)))
        apps["p2"] = _start(kafka4, "p2", tmp_path)
        moments.append(_moment(kafka4, _stable_with(2)))
        apps["p1"].terminate()  # KafkaStreams.close(): the member leaves the group
        apps["p1"].wait(timeout=120)
        moments.append(_moment(kafka4, _stable_with(1)))
        time.sleep(2)
    finally:  # a failed wait must not leave the capture's consumer polling a stopped broker
        capture.done.set()
        capture.join(timeout=30)

    for i, mo in enumerate(moments):
        snap, records = _replayed(kafka4, capture, tmp_path / f"segments-{i}", mo["at"], APP)
        state, members = _as_kafka_describes(snap, records[0].partition)
        want_state = {k: mo["state"][k] for k in ("STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")}
        want_members = {
            m["MEMBER"]: (m["PROCESS"], m["CLIENT-ID"], m["MEMBER-EPOCH"], _tasks(m["ASSIGNMENTS"]))
            for m in mo["members"]
        }
        assert (state, members) == (want_state, want_members), f"moment {i}"
        row = snap.to_state_row()
        assert (row["group_type"], row["protocol_type"]) == ("streams", "streams")
        assert {r.key.version for r in records} <= {0, 1, 17, 19, 20, 21, 22, 23}
