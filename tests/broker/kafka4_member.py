"""One group member as its own process (``python -m tests.broker.kafka4_member ...``), so a
SIGKILL is a real crash: librdkafka (confluent-kafka) with ``group.protocol=consumer`` (KIP-848)
or ``classic``, recording what the client itself saw as JSON lines, each with the wall-clock
time in epoch ms:

- ``start`` (its settings), ``assign`` / ``revoke`` / ``lost`` (the rebalance callbacks with the
  partitions they carried, the member id the client held at that moment and its ``epoch``: the
  generation of ``consumer_group_metadata()``, which librdkafka sets to the member epoch under
  ``group.protocol=consumer``), ``commit`` (the
  offsets and metadata it committed, synchronously, and the broker's answer), ``closed`` (after a
  graceful ``close()``: the member left the group).
- SIGTERM: the member commits once more and closes (a graceful leave). SIGKILL: nothing is
  written, the broker finds out when the member's session expires.
- KIP-848 members never set ``session.timeout.ms``, ``heartbeat.interval.ms`` or
  ``partition.assignment.strategy`` (the broker owns them); classic members set them.
- Commits are explicit (``enable.auto.commit=false``) every ``--commit-every-ms`` while the
  member holds partitions, at its position, with the metadata ``<client id>#<n>``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any


def now_ms() -> int:
    return int(time.time() * 1000)


class Recorder:
    def __init__(self, path: str) -> None:
        self.out = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def write(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, "t": now_ms(), **fields}, sort_keys=True) + "\n")


def _parts(partitions: list[Any]) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in partitions)


def build_conf(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "group.protocol": args.protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.protocol == "classic":
        conf["session.timeout.ms"] = args.session_timeout_ms
        conf["heartbeat.interval.ms"] = max(100, args.session_timeout_ms // 6)
        conf["partition.assignment.strategy"] = args.assignor
    elif args.remote_assignor:
        conf["group.remote.assignor"] = args.remote_assignor
    return conf


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from tests.broker.member import generation

    rec = Recorder(args.events)
    stopping = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.__setitem__("flag", True))
    consumer = Consumer(build_conf(args))
    held: set[tuple[str, int]] = set()

    def on_assign(c: Any, partitions: list[Any]) -> None:
        held.update((tp.topic, tp.partition) for tp in partitions)
        rec.write("assign", partitions=_parts(partitions), member_id=c.memberid(), epoch=generation(c))

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        held.difference_update((tp.topic, tp.partition) for tp in partitions)
        rec.write("revoke", partitions=_parts(partitions), member_id=c.memberid(), epoch=generation(c))

    def on_lost(c: Any, partitions: list[Any]) -> None:
        held.difference_update((tp.topic, tp.partition) for tp in partitions)
        rec.write("lost", partitions=_parts(partitions), member_id=c.memberid(), epoch=generation(c))

    consumer.subscribe(args.topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    rec.write("start", conf=build_conf(args), pid=_pid())
    n = 0
    last_commit = time.monotonic()

    def commit() -> None:
        nonlocal n
        if not held:
            return
        positions = consumer.position([TopicPartition(t, p) for t, p in sorted(held)])
        offsets = [tp for tp in positions if tp.offset >= 0]
        if not offsets:
            return
        n += 1
        meta = f"{args.client_id}#{n}"
        wanted = [TopicPartition(tp.topic, tp.partition, tp.offset, metadata=meta) for tp in offsets]
        try:
            done = consumer.commit(offsets=wanted, asynchronous=False) or []
            errors = [str(tp.error) for tp in done if tp.error is not None]
        except KafkaException as exc:
            errors = [str(exc.args[0]) if exc.args else repr(exc)]
        committed = [[tp.topic, tp.partition, tp.offset] for tp in wanted]
        rec.write(
            "commit",
            offsets=committed,
            metadata=meta,
            errors=errors,
            member_id=consumer.memberid(),
            epoch=generation(consumer),
        )

    deadline = time.monotonic() + args.max_seconds
    while not stopping["flag"] and time.monotonic() < deadline:
        consumer.poll(0.1)
        if time.monotonic() - last_commit >= args.commit_every_ms / 1000:
            commit()
            last_commit = time.monotonic()
    commit()
    member_id = consumer.memberid()
    consumer.close()
    rec.write("closed", member_id=member_id)
    return 0


def _pid() -> int:
    import os

    return os.getpid()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topics", required=True, help="comma-separated topics to subscribe to")
    p.add_argument("--protocol", choices=("consumer", "classic"), default="consumer")
    p.add_argument("--client-id", required=True)
    p.add_argument("--instance-id", default=None)
    p.add_argument("--assignor", default="range", help="classic only: partition.assignment.strategy")
    p.add_argument("--remote-assignor", default=None, help="consumer only: group.remote.assignor")
    p.add_argument("--session-timeout-ms", type=int, default=6000, help="classic only")
    p.add_argument("--commit-every-ms", type=int, default=1000)
    p.add_argument("--max-seconds", type=float, default=1200.0, help="a bound: the member never outlives the test")
    p.add_argument("--events", required=True, help="JSON-lines file the member appends its events to")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
