"""Due is not dead, judged by real Kafka brokers (3.9's classic coordinator, 4's new one; issue 33).

A broker with a long cleanup interval (offsets expire after 1 minute, the retention check runs
every 30 s): a group commits and goes Empty; its offsets fall due one retention later, but the
broker removes them (and the group) only at its next cleanup. At moments recorded before the
due time, between the due time and the cleanup, and after it, the broker's own answer (the Admin
API's describe) is compared with the replay of its ``__consumer_offsets`` segments as of that
moment (``snapshot_as_of``, the rule every view uses): the states must be equal at every moment,
and between due and cleanup the replay carries the deletion as a forecast whose window contains
the broker's actual removal (its group tombstone). The segments copied after the broker stops
hold the same records at the same positions as the copy taken just before, and replay to the same
final state.

Reproduce: ``.venv/bin/python -m pytest tests/broker/test_due_is_not_dead.py -m broker``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.kafka.local_broker import BrokerFailed, LocalBroker
from tests.broker.conftest import jars_or_skip

pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]

RETENTION_MS = 60_000
INTERVAL_MS = 30_000
GROUP, TOPIC = "due-not-dead", "due-not-dead-t"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _broker_state(admin: Any, group: str) -> str:
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return str(desc.state.name).title()  # EMPTY -> Empty, DEAD -> Dead


def _records(root: Path) -> list[Any]:
    from coordinator_core import LogRecord, decode_record
    from coordinator_core.segments import iter_records

    out = []
    for part_dir in sorted(root.glob("__consumer_offsets-*")):
        part = int(part_dir.name.rsplit("-", 1)[1])
        for seg in sorted(part_dir.glob("*.log")):
            for item in iter_records(seg.read_bytes()):
                if not isinstance(item, tuple):
                    continue
                _batch, rec = item
                if rec.control is not None or rec.key is None:
                    continue
                dec = decode_record(rec.key, rec.value)
                if dec.key.group == GROUP:
                    out.append(LogRecord(part, rec.offset, rec.timestamp_ms, dec.key, dec.value))
    return sorted(out, key=lambda r: (r.partition, r.offset))


def _the_stopped_copy_tells_what_the_live_copy_told(live: list[Any], stopped: list[Any], coordinator: str) -> None:
    """The segments copied after ``broker.stop()`` hold the live copy's records at the same positions
    (the cleaner may since have dropped a record only for a later one of the same key), and their
    replay ends in the same state."""
    from coordinator_core import ReplaySettings, snapshot_as_of

    assert live and stopped
    at = {(r.partition, r.offset): r for r in stopped}
    for r in live:
        if (r.partition, r.offset) in at:
            assert at[(r.partition, r.offset)] == r
        else:  # compacted away: superseded by a later record of the same key
            assert any(o.partition == r.partition and o.offset > r.offset and o.key == r.key for o in stopped), r
    live_at = {(r.partition, r.offset) for r in live}
    last = {p: max(o for q, o in live_at if q == p) for p, _ in live_at}
    assert all(r.offset > last.get(r.partition, -1) for r in stopped if (r.partition, r.offset) not in live_at)
    settings = ReplaySettings(retention_ms=RETENTION_MS, cleanup_interval_ms=INTERVAL_MS, coordinator=coordinator)
    end = max(r.timestamp_ms for r in live + stopped) + 1
    final = [
        snapshot_as_of(rs, group_id=GROUP, as_of_ms=end, settings=settings, log_end_ms=end) for rs in (live, stopped)
    ]
    assert [s.exists for s in final] == [False, False]  # the broker removed the group: both say so
    # the same state; what each copy's replay read differs by the records the cleaner dropped in
    # between (a superseded record, checked above: e.g. the group's first metadata record at 0)
    read = {"records_applied", "first_log_offset"}
    rows = [{k: v for k, v in s.to_state_row(settings=settings).items() if k not in read} for s in final]
    assert rows[0] == rows[1]
    dropped = len(live_at - {(r.partition, r.offset) for r in stopped})
    assert final[0].records_applied - final[1].records_applied <= dropped


@pytest.mark.parametrize(("bundle", "coordinator"), [("kafka-3.9", "old"), ("kafka-4", "new")])
def test_a_due_group_is_empty_until_the_brokers_cleanup_removes_it(  # long: one scenario
    bundle: str, coordinator: str, tmp_path: Path
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from coordinator_core import ReplaySettings, snapshot_as_of

    jars_or_skip(bundle)
    broker = LocalBroker(
        bundle,
        tmp_path / "broker",
        {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": str(INTERVAL_MS)},
    )
    try:
        broker.start()
    except BrokerFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    admin: Any = None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for fut in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            fut.result(timeout=60)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        try:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 60
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(0.5)
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 9)], asynchronous=False)
        finally:
            consumer.close()  # leaves: the group is Empty, its offsets due one retention later
        moments: list[tuple[int, str]] = []
        deadline = time.monotonic() + RETENTION_MS / 1000 + 2 * INTERVAL_MS / 1000 + 60
        while time.monotonic() < deadline:
            t = _now_ms()
            state = _broker_state(admin, GROUP)
            moments.append((t, state))
            if state == "Dead":
                break
            time.sleep(2)
        assert moments[-1][1] == "Dead", moments[-3:]
        broker.copy_offsets_segments(tmp_path / "seg")  # while the broker runs
        admin = None
        broker.stop()  # controlled shutdown
        broker.copy_offsets_segments(tmp_path / "seg_stopped")  # the files the stopped broker left
    finally:
        # librdkafka's client goes now, not when the garbage collector frees a failure's traceback:
        # destroyed from there it waited forever (seen in a failed run)
        admin = None
        broker.stop()

    records = _records(tmp_path / "seg")
    _the_stopped_copy_tells_what_the_live_copy_told(records, _records(tmp_path / "seg_stopped"), coordinator)
    tombstones = [r.timestamp_ms for r in records if r.value is None and r.key.__class__.__name__ == "GroupMetadataKey"]
    assert tombstones, "the broker's cleanup wrote the group tombstone"
    removed = tombstones[-1]
    settings = ReplaySettings(retention_ms=RETENTION_MS, cleanup_interval_ms=INTERVAL_MS, coordinator=coordinator)
    due_seen = 0
    for t, broker_state in moments:
        if abs(t - removed) < 2_000:
            continue  # the describe and the tombstone raced within the same instant
        snap = snapshot_as_of(records, group_id=GROUP, as_of_ms=t, settings=settings, log_end_ms=t)
        row = snap.to_state_row(settings=settings)
        ours = row["state"] if snap.exists else "Dead"
        assert ours == broker_state, (t, ours, broker_state, removed)
        if row["death_forecast_from_ms"] is not None:
            due_seen += 1  # due, not dead: the broker agrees, and its removal is in the window
            assert row["death_forecast_from_ms"] <= removed <= row["death_forecast_to_ms"], (row, removed)
            assert row["offsets_due"] == 2 and snap.offset_count == 2
    assert due_seen > 0, "moments between the due time and the cleanup were recorded"
