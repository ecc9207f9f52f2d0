"""Live Kafka ingestion without connector jars (confluent-kafka / librdkafka).

Modules:
- ``client``: librdkafka settings from the config (security from ``kafka.security``, secrets
  from the environment, never logged), connection checks with a clear error.
- ``capture``: ``offsetlake capture`` — ``__consumer_offsets`` into raw-record landing files,
  resumable, exactly once per offset.
- ``source``: a Spark streaming/batch source written with PySpark's Python data source API
  (``format("offsetlake_kafka")``), used when Spark's Kafka connector jar is absent.
- ``end_offsets``: samples log-end offsets into the ``partition_end_offsets`` Delta table.
- ``mock``: librdkafka's built-in mock cluster (real Kafka protocol on 127.0.0.1) for tests
  and benchmarks.

Rule: ``confluent_kafka`` is imported lazily (inside functions) so ``offsetlake --help`` and
machines without the ``kafka`` extra keep working; a missing client is a one-line ``UsageError``.
"""

from __future__ import annotations
