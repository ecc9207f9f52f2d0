"""One consumer-group member as its own process, so a test can SIGKILL it for real.

    python tests/broker/member.py '<json settings>'

settings: ``bootstrap``, ``group``, ``topics`` (list), ``client_id``; optional ``instance_id``
(a static member, KIP-345), ``assignor`` (librdkafka ``partition.assignment.strategy``),
``session_ms``, ``protocol`` (``classic``/``consumer``), ``commit_every_s`` (commit the positions
consumed so far, synchronously, with ``metadata``), ``extra`` (more librdkafka settings).

Every line on stdout is one JSON event with the wall-clock ``t`` (epoch ms) and what the client
itself saw: ``assign`` / ``revoke`` / ``lost`` with the partitions and the generation read from
``consumer_group_metadata()`` (librdkafka's serialised form: ``CGMDv2:`` then the generation as a
native int32), ``commit`` with the offsets the broker accepted, ``closed`` after a graceful close.
SIGTERM closes the consumer (a LeaveGroup for a dynamic member); SIGKILL leaves the group to the
broker's session timeout.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"t": int(time.time() * 1000), "event": event, **fields}), flush=True)


def generation(consumer: Consumer) -> int | None:
    try:
        raw = consumer.consumer_group_metadata()
    except KafkaException:
        return None
    if not isinstance(raw, bytes) or not raw.startswith(b"CGMDv2:") or len(raw) < 11:
        return None
    return int.from_bytes(raw[7:11], sys.byteorder, signed=True)


def parts(tps: list[TopicPartition]) -> list[list[object]]:
    return sorted([tp.topic, tp.partition] for tp in tps)


def main() -> int:
    cfg = json.loads(sys.argv[1])
    conf: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg["client_id"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }
    if cfg.get("protocol", "classic") == "classic":
        conf["session.timeout.ms"] = cfg.get("session_ms", 6000)
        conf["heartbeat.interval.ms"] = max(200, int(cfg.get("session_ms", 6000)) // 6)
        if cfg.get("assignor"):
            conf["partition.assignment.strategy"] = cfg["assignor"]
    else:
        conf["group.protocol"] = "consumer"
    if cfg.get("instance_id"):
        conf["group.instance.id"] = cfg["instance_id"]
    conf.update(cfg.get("extra", {}))
    consumer = Consumer(conf)
    stop = {"now": False}

    def on_term(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)

    def on_assign(c: Consumer, tps: list[TopicPartition]) -> None:
        emit("assign", partitions=parts(tps), generation=generation(c), member_id=c.memberid())

    def on_revoke(c: Consumer, tps: list[TopicPartition]) -> None:
        emit("revoke", partitions=parts(tps), generation=generation(c), member_id=c.memberid())

    def on_lost(c: Consumer, tps: list[TopicPartition]) -> None:
        emit("lost", partitions=parts(tps), generation=generation(c), member_id=c.memberid())

    consumer.subscribe(cfg["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    emit("started", client_id=cfg["client_id"], instance_id=cfg.get("instance_id"))
    every = float(cfg.get("commit_every_s", 0.5))
    metadata = cfg.get("metadata", f"by-{cfg['client_id']}")
    positions: dict[tuple[str, int], int] = {}
    committed: dict[tuple[str, int], int] = {}
    last = time.monotonic()
    while not stop["now"]:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            positions[(msg.topic(), msg.partition())] = msg.offset() + 1
        if time.monotonic() - last >= every:
            last = time.monotonic()
            owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            todo = {k: v for k, v in positions.items() if k in owned and committed.get(k) != v}
            if todo:
                offsets = [TopicPartition(t, p, o, metadata=metadata) for (t, p), o in sorted(todo.items())]
                try:
                    done = consumer.commit(offsets=offsets, asynchronous=False) or []
                    committed.update(todo)
                    emit(
                        "commit",
                        offsets=[[tp.topic, tp.partition, tp.offset] for tp in done],
                        generation=generation(consumer),
                        member_id=consumer.memberid(),
                    )
                except KafkaException as exc:
                    emit("commit_failed", error=str(exc.args[0]))
    consumer.close()
    emit("closed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
