"""librdkafka's built-in mock cluster: real Kafka protocol brokers on 127.0.0.1, in-process.

Rules:
- A client created with ``test.mock.num.brokers`` starts the brokers; they live as long as that
  client does, so ``MockKafkaCluster`` keeps it until ``close()``. Other clients (in this or any
  other process, e.g. an ``offsetlake capture`` subprocess or Spark's Python workers) connect to
  ``bootstrap_servers`` like to any cluster.
- The mock auto-creates a topic on first use with ``MOCK_PARTITIONS`` (4) partitions and rejects
  CreateTopics (it has no controller), so records are produced to ``partition_for(group, 4)``.
- It keeps record timestamps (CREATE_TIME) and null values (tombstones) byte-exactly (checked by
  the tests, not assumed).
Used by tests and ``bench/capture.py`` only; production code never starts a mock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipelines.kafka.client import LIBRDKAFKA_LOGGER, OFFSETS_TOPIC, require_confluent_kafka

MOCK_PARTITIONS = 4


class MockKafkaCluster:
    """A running mock cluster. Use as a context manager or call ``close()``.

    Args:
        num_brokers: brokers to start (each listens on its own 127.0.0.1 port).
        topic: topic to create (auto-created by a metadata request) at start.
    """

    def __init__(self, num_brokers: int = 3, topic: str = OFFSETS_TOPIC) -> None:
        ck = require_confluent_kafka()
        self._owner = ck.Producer({"test.mock.num.brokers": num_brokers, "logger": LIBRDKAFKA_LOGGER})
        md = self._owner.list_topics(timeout=10)
        self.bootstrap_servers = ",".join(f"{b.host}:{b.port}" for _, b in sorted(md.brokers.items()))
        self.topic = topic
        self._producer = ck.Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "linger.ms": 5,
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 1_000_000,
                "acks": "all",
                "logger": LIBRDKAFKA_LOGGER,
            }
        )
        self.num_partitions = len(self.partitions(topic))

    def partitions(self, topic: str | None = None) -> list[int]:
        """Partition ids of ``topic`` (auto-creating it)."""
        md = self._producer.list_topics(topic or self.topic, timeout=10)
        return sorted(md.topics[topic or self.topic].partitions)

    def produce(
        self, records: Iterable[tuple[bytes, bytes | None, int, int]], topic: str | None = None
    ) -> list[tuple[int, int]]:
        """Produce ``(key, value, partition, timestamp_ms)`` records in order and wait for them.

        Returns:
            ``(partition, offset)`` of every record, in the order given.

        Raises:
            RuntimeError: a record was not acknowledged.
        """
        results: list[tuple[int, int] | None] = []
        errors: list[str] = []

        def on_delivery(idx: int) -> Any:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    results[idx] = (msg.partition(), msg.offset())

            return cb

        for key, value, partition, ts in records:
            results.append(None)
            cb = on_delivery(len(results) - 1)
            while True:
                try:
                    self._producer.produce(
                        topic or self.topic, key=key, value=value, partition=partition, timestamp=ts, on_delivery=cb
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)
            self._producer.poll(0)
        left = self._producer.flush(30)
        if left or errors or any(r is None for r in results):
            raise RuntimeError(f"mock produce failed: {left} unflushed, errors {errors[:3]}")
        return [r for r in results if r is not None]

    def close(self) -> None:
        """Stop the brokers (by dropping the client that owns them)."""
        self._producer.flush(5)
        del self._producer
        del self._owner

    def __enter__(self) -> MockKafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
