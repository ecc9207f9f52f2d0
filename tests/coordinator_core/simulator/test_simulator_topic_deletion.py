"""Topic deletion: the coordinator tombstones every group's offsets of the topic, and a commit
still in flight for it is refused (KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION), so nothing
re-creates the deleted offsets."""

from __future__ import annotations

from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import OffsetCommitKey
from coordinator_core.simulator.generator import generate


def test_no_offset_of_a_deleted_topic_is_committed_after_its_deletion() -> None:
    log = generate(12, 1.0, seed=7, retention_ms=900_000, coordinator="new")
    deleted = {d["topic"]: d["time_ms"] for d in log.truth["deleted_topics"]}
    assert deleted, "the seed must delete a topic for this test to mean anything"
    tombstoned: set[str] = set()
    for key, value, ts in zip(log.keys, log.values, log.timestamps):
        rec = decode_record(key, value)
        if not isinstance(rec.key, OffsetCommitKey) or rec.key.topic not in deleted:
            continue
        if value is None and ts == deleted[rec.key.topic]:
            tombstoned.add(rec.key.topic)
        if value is not None:
            assert ts <= deleted[rec.key.topic], (rec.key, ts)
            assert rec.key.topic not in tombstoned, f"commit for {rec.key.topic} after its deletion"
    assert tombstoned == set(deleted)
