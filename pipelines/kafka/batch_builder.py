"""confluent-kafka messages -> raw-record Arrow batches (``offsetlake capture`` and the
``offsetlake_kafka`` streaming source build them the same way).

Rules:
- Fields are taken from the messages as they arrive (``extend`` / ``append``) and kept as plain
  columns; the ``Message`` objects are not kept, so a fetch's messages are freed as soon as it
  is read (a file's worth of live, GC-tracked ``Message`` objects made every garbage collection
  walk all of them).
- Fields are read with the unbound C methods mapped over a fetch (``map(Message.key, msgs)``):
  no Python frame per message and field.
- ``to_batch`` builds the Arrow arrays from buffers (numpy, ``pa.Array.from_buffers``), never with
  ``pa.array`` over a Python list: that call imports pandas (~0.4 s, once per process) only to ask
  whether the list is a pandas object. The bytes are the same either way.
- Timestamps: confluent-kafka gives ``(type, ms)`` with type shifted by one against Kafka's ids
  (``TimestampType``: -1 none, 0 CREATE_TIME, 1 LOG_APPEND_TIME); no timestamp is stored as 0.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA

_I32_MAX = 2**31 - 1
_TIMESTAMP_TYPE = RAW_ARROW_SCHEMA.field("timestamp").type


def _binary_array(items: list[bytes | None]) -> pa.Array:
    """``pa.binary()`` array of ``items`` (``None`` = null) built from one data buffer."""
    n = len(items)
    nulls = items.count(None)
    filled = [b"" if v is None else v for v in items] if nulls else items
    data = b"".join(filled)  # type: ignore[arg-type]  # no None left in `filled`
    if len(data) > _I32_MAX:  # beyond int32 offsets: let pyarrow say so, as it always did
        return pa.array(items, pa.binary())
    offsets = np.fromiter(itertools.accumulate(map(len, filled), initial=0), np.int32, n + 1)  # type: ignore[arg-type]
    validity = None
    if nulls:
        valid = np.fromiter(map(operator.is_not, items, itertools.repeat(None)), np.bool_, n)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )


def _fixed_array(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A fixed-width array without nulls over ``values``' memory (same width as ``typ``)."""
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)], null_count=0)


def _repeated_string(text: str, n: int) -> pa.Array:
    """``pa.string()`` array of ``text`` ``n`` times."""
    raw = text.encode()
    if len(raw) * n > _I32_MAX:
        return pa.array([text] * n, pa.string())
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], null_count=0)


class MessageBatchBuilder:
    """Collects the fields of confluent-kafka messages; ``to_batch`` turns them into a
    raw-record batch."""

    __slots__ = ("keys", "offsets", "partitions", "stamps", "topic", "values")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []
        self.stamps: list[int] = []  # flat (confluent type, ms) pairs

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, msg: Any) -> None:
        """Take one message (not an error event)."""
        self.keys.append(msg.key())
        self.values.append(msg.value())
        self.partitions.append(msg.partition())
        self.offsets.append(msg.offset())
        self.stamps.extend(msg.timestamp())

    def extend(
        self, msgs: Sequence[Any], partitions: list[int] | None = None, offsets: list[int] | None = None
    ) -> None:
        """Take the messages of one fetch (no error events); ``partitions``/``offsets`` are
        theirs when the caller already read them."""
        if not msgs:
            return
        cls = type(msgs[0])
        self.keys.extend(map(cls.key, msgs))
        self.values.extend(map(cls.value, msgs))
        self.partitions.extend(partitions if partitions is not None else map(cls.partition, msgs))
        self.offsets.extend(offsets if offsets is not None else map(cls.offset, msgs))
        self.stamps.extend(itertools.chain.from_iterable(map(cls.timestamp, msgs)))

    def to_batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        stamps = np.fromiter(self.stamps, np.int64, 2 * n)
        confluent_type, ms = stamps[0::2], stamps[1::2]
        micros = np.where(confluent_type != 0, ms * 1000, 0)
        return pa.RecordBatch.from_arrays(
            [
                _binary_array(self.keys),
                _binary_array(self.values),
                _repeated_string(self.topic, n),
                _fixed_array(np.fromiter(self.partitions, np.int32, n), pa.int32()),
                _fixed_array(np.fromiter(self.offsets, np.int64, n), pa.int64()),
                _fixed_array(micros, _TIMESTAMP_TYPE),
                _fixed_array((confluent_type - 1).astype(np.int32), pa.int32()),  # Kafka ids: confluent type - 1
            ],
            schema=RAW_ARROW_SCHEMA,
        )

    def clear(self) -> None:
        self.keys, self.values, self.partitions, self.offsets, self.stamps = [], [], [], [], []
