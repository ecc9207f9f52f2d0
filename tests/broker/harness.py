"""Driving real groups on a real broker and recording the truth from outside offsetlake.

- ``Member``: one consumer process (``member.py``) whose stdout is the client's own account
  (assign/revoke/lost with the generation it saw, commits); ``kill()`` is a real SIGKILL.
- ``Recorder``: the broker's own answers (Admin API ``describe_consumer_groups``,
  ``list_consumer_group_offsets``) at recorded wall-clock moments, kept as plain dicts.
- ``Feeder``: a background producer so members always have something to consume and commit.

Every wait is bounded and says what it waited for when it gives up.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MEMBER = Path(__file__).resolve().parent / "member.py"


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_until(what: str, check: Callable[[], Any], timeout_s: float = 45.0, every_s: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")


class Member:
    """A consumer-group member in its own process."""

    def __init__(self, workdir: Path, bootstrap: str, group: str, topics: list[str], client_id: str, **opts: Any):
        self.client_id = client_id
        self.instance_id = opts.get("instance_id")
        self.out = workdir / f"{group}.{client_id}.{now_ms()}.jsonl"
        settings = {"bootstrap": bootstrap, "group": group, "topics": topics, "client_id": client_id, **opts}
        self._fh = open(self.out, "w")  # noqa: SIM115 (the member writes it for its whole life)
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), json.dumps(settings)], stdout=self._fh, stderr=subprocess.DEVNULL
        )

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.out.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by SIGKILL
        return out

    def assigned(self) -> set[tuple[str, int]]:
        """The partitions the client holds by its own callbacks (eager and incremental alike)."""
        held: set[tuple[str, int]] = set()
        for e in self.events():
            if e["event"] == "assign":
                held |= {(t, p) for t, p in e["partitions"]}
            elif e["event"] in ("revoke", "lost"):
                held -= {(t, p) for t, p in e["partitions"]}
        return held

    def generations(self) -> set[int]:
        return {e["generation"] for e in self.events() if e.get("generation") is not None and e["generation"] >= 0}

    def member_ids(self) -> set[str]:
        return {e["member_id"] for e in self.events() if e.get("member_id")}

    def wait_committed(self, timeout_s: float = 30.0) -> dict[str, Any]:
        return wait_until(
            f"{self.client_id} to commit", lambda: [e for e in self.events() if e["event"] == "commit"], timeout_s
        )[-1]

    def kill(self) -> int:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        return now_ms()

    def term(self, timeout_s: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"{self.client_id} did not close within {timeout_s:.0f} s") from None
        return now_ms()

    def stop_quietly(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._fh.close()


class Recorder:
    """The broker's answers about groups at recorded moments."""

    def __init__(self, bootstrap: str):
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        self.moments: list[dict[str, Any]] = []

    def describe(self, group: str) -> dict[str, Any]:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

        t0 = now_ms()
        fut = self.admin.describe_consumer_groups([group], request_timeout=10)[group]
        try:
            d = fut.result(timeout=15)
        except KafkaException as exc:
            return {"group": group, "error": str(exc.args[0])}
        t1 = now_ms()
        members = []
        for m in d.members:
            parts = sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else []))
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "instance_id": m.group_instance_id,
                    "assignment": parts,
                }
            )
        offsets: dict[tuple[str, int], tuple[int, str]] = {}
        try:
            req = [ConsumerGroupTopicPartitions(group)]
            res = self.admin.list_consumer_group_offsets(req, request_timeout=10)[group].result(timeout=15)
            for tp in res.topic_partitions:
                if tp.offset >= 0:
                    offsets[(tp.topic, tp.partition)] = (tp.offset, tp.metadata or "")
        except KafkaException:
            pass
        return {
            "group": group,
            "t0": t0,  # the describe was asked at t0 and answered by t1; the offsets by t
            "t1": t1,
            "t": now_ms(),
            "state": d.state.name if hasattr(d.state, "name") else str(d.state),
            "assignor": d.partition_assignor,
            "simple": d.is_simple_consumer_group,
            "members": sorted(members, key=lambda m: m["member_id"]),
            "offsets": offsets,
        }

    def moment(self, label: str, group: str) -> dict[str, Any]:
        """The broker's description of ``group`` now: its state and members held at some instant
        in [t0, t1], its committed offsets at some instant in [t1, t]."""
        d = self.describe(group)
        d["label"] = label
        self.moments.append(d)
        return d

    def wait_stable(self, group: str, members: int, timeout_s: float = 45.0) -> dict[str, Any]:
        def ok() -> dict[str, Any] | None:
            d = self.describe(group)
            if (
                d.get("state") == "STABLE"
                and len(d["members"]) == members
                and all(m["assignment"] for m in d["members"])
            ):
                return d
            return None

        return wait_until(f"{group} Stable with {members} members", ok, timeout_s, 0.3)

    def wait_state(self, group: str, state: str, timeout_s: float = 45.0) -> dict[str, Any]:
        return wait_until(f"{group} in {state}", lambda: self.describe(group).get("state") == state, timeout_s, 0.3)

    def groups(self) -> set[str]:
        res = self.admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        return {g.group_id for g in res.valid}

    def create_topics(self, names: Iterable[str], partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        for fut in self.admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
            fut.result(timeout=30)


class Feeder:
    """Writes one record to every partition of ``topics`` every ``every_s`` until stopped."""

    def __init__(self, bootstrap: str, topics: dict[str, int], every_s: float = 0.4):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
        self.topics = topics
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for topic, parts in self.topics.items():
                for p in range(parts):
                    self.producer.produce(topic, f"{n}".encode(), partition=p)
            self.producer.poll(0)
            n += 1
            self._stop.wait(self.every_s)
        self.producer.flush(10)

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
