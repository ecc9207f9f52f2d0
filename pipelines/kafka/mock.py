"""librdkafka's built-in mock cluster: real Kafka protocol brokers on 127.0.0.1, in-process.

Rules:
- A client created with ``test.mock.num.brokers`` starts the brokers; they live as long as that
  client does, so ``MockKafkaCluster`` keeps it until ``close()``. Other clients (in this or any
  other process, e.g. an ``offsetlake capture`` subprocess or Spark's Python workers) connect to
  ``bootstrap_servers`` like to any cluster.
- The mock auto-creates a topic on first use with ``MOCK_PARTITIONS`` (4) partitions and rejects
  CreateTopics (it has no controller), so records are produced to ``partition_for(group, 4)``.
  ``partitions=N`` creates ``topic`` with N partitions before any client sees it (Kafka's default
  for ``__consumer_offsets`` is 50, ``offsets.topic.num.partitions``) through librdkafka's own
  mock API (``rd_kafka_mock_topic_create``, called with ctypes on the library confluent-kafka
  loaded: the Python binding does not expose it).
- The mock keeps a bounded log per partition (~40-50k records of this project's sizes): whoever
  produces more must check the watermarks (``bench/kafka_source.py`` refuses a truncated log).
- It keeps record timestamps (CREATE_TIME) and null values (tombstones) byte-exactly (checked by
  the tests, not assumed).
Used by tests and ``bench/capture.py`` only; production code never starts a mock.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Iterable
from typing import Any

from pipelines.kafka.client import LIBRDKAFKA_LOGGER, OFFSETS_TOPIC, KafkaSettings, require_confluent_kafka, watermarks

MOCK_PARTITIONS = 4


class _NativeMock:
    """A mock cluster owned by a librdkafka handle made through ctypes, so that its topic can be
    created with a partition count (``rd_kafka_mock_topic_create``) before any client
    auto-creates it with the mock's default."""

    def __init__(self, num_brokers: int, topic: str, partitions: int) -> None:
        ck = require_confluent_kafka()
        libs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ck.__file__))), "confluent_kafka.libs")
        found = sorted(glob.glob(os.path.join(libs, "librdkafka*.so*")))
        if not found:
            raise RuntimeError(f"mock: no librdkafka next to confluent-kafka ({libs}) to create {topic}")
        lib = ctypes.CDLL(found[0])
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.rd_kafka_conf_new.restype = vp
        lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
        lib.rd_kafka_new.restype = vp
        lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
        lib.rd_kafka_handle_mock_cluster.restype = vp
        lib.rd_kafka_handle_mock_cluster.argtypes = [vp]
        lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_cluster_bootstraps.restype = cp
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
        lib.rd_kafka_destroy.argtypes = [vp]
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for k, v in (("test.mock.num.brokers", str(num_brokers)), ("log_level", "3")):
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), err, len(err)) != 0:
                raise RuntimeError(f"mock: {k}: {err.value.decode()}")
        self._lib = lib
        self._rk = lib.rd_kafka_new(1, conf, err, len(err))  # RD_KAFKA_CONSUMER: never produces
        if not self._rk:
            raise RuntimeError(f"mock: {err.value.decode()}")
        cluster = lib.rd_kafka_handle_mock_cluster(self._rk)
        code = lib.rd_kafka_mock_topic_create(cluster, topic.encode(), partitions, min(3, num_brokers))
        if code != 0:
            self.close()
            raise RuntimeError(f"mock: creating {topic} with {partitions} partitions failed (error {code})")
        self.bootstrap_servers = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()

    def close(self) -> None:
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None


class MockKafkaCluster:
    """A running mock cluster. Use as a context manager or call ``close()``.

    Args:
        num_brokers: brokers to start (each listens on its own 127.0.0.1 port).
        topic: topic to create (auto-created by a metadata request) at start.
        partitions: create ``topic`` with this many partitions (else the mock's default, 4).
    """

    def __init__(self, num_brokers: int = 3, topic: str = OFFSETS_TOPIC, partitions: int | None = None) -> None:
        ck = require_confluent_kafka()
        self._native: _NativeMock | None = None
        self._owner: Any = None
        if partitions is not None:
            self._native = _NativeMock(num_brokers, topic, partitions)
            self.bootstrap_servers = self._native.bootstrap_servers
        else:
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

    def watermarks(self, topic: str | None = None) -> dict[int, tuple[int, int]]:
        """partition -> (low, high) watermark of ``topic`` now."""
        from confluent_kafka import Consumer

        probe = Consumer(KafkaSettings(self.bootstrap_servers).consumer_conf())
        try:
            return watermarks(probe, topic or self.topic, self.partitions(topic), 10.0)
        finally:
            probe.close()

    def kept(self, topic: str | None = None) -> int:
        """How many records ``topic`` holds now: the mock keeps ~5 MiB per partition and drops
        older records beyond that."""
        return sum(hi - lo for lo, hi in self.watermarks(topic).values())

    def close(self) -> None:
        """Stop the brokers (by dropping the client that owns them)."""
        self._producer.flush(5)
        del self._producer
        self._owner = None
        if self._native is not None:
            self._native.close()

    def __enter__(self) -> MockKafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
