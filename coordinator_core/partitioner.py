"""Which ``__consumer_offsets`` partition coordinates a group (spec §6).

Rules:
- ``partitionFor(groupId) = Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``
  (``GroupMetadataManager.partitionFor``, ``GroupCoordinatorService.partitionFor``).
- ``String.hashCode`` runs over UTF-16 code units (a character outside the BMP counts as two
  surrogate units), wrapping to a signed 32-bit int.
- ``Utils.abs(Integer.MIN_VALUE)`` is 0 (not ``n & 0x7fffffff``, not ``abs``).
- The default partition count is 50 (``offsets.topic.num.partitions``).
"""

from __future__ import annotations

from typing import Final

DEFAULT_NUM_PARTITIONS: Final = 50
_MIN_INT: Final = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if n == _MIN_INT else abs(n)


def partition_for(group_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``.

    Raises:
        ValueError: ``num_partitions`` is not positive.
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
