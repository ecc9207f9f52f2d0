"""Which records a live ``__consumer_offsets`` reader may see (no broker needed; the real-broker case
is ``tests/broker/test_classic_scenarios.py::test_transactional_offsets_committed_apply_and_aborted_do_not``).

A client never receives the COMMIT/ABORT markers Kafka's own loader applies (KIP-98), so a reader
must not see aborted transactional records at all: a real Kafka 3.9 broker showed a
read_uncommitted capture replaying an aborted ``send_offsets_to_transaction`` as a commit.
"""

from __future__ import annotations

from pipelines.kafka.client import KafkaSettings


def test_offsets_topic_readers_read_committed_only() -> None:
    settings = KafkaSettings("127.0.0.1:9092")
    assert settings.consumer_conf()["isolation.level"] == "read_committed"
    # a caller may still ask for the high watermark (end-offset sampling of users' topics does)
    assert settings.consumer_conf(**{"isolation.level": "read_uncommitted"})["isolation.level"] == "read_uncommitted"
