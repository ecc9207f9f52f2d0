"""Where the simulated coordinator appends its records (the ``__consumer_offsets`` log).

Rules:
- Each record goes to ``partition_for(group)`` and gets that partition's next offset; its
  timestamp is the simulated time of the append (CREATE_TIME).
- Kafka 4 consumer-group records (KIP-848, ``coordinator_core.codec.modern_records``) go through the
  same ``append`` (one coordinator write = consecutive offsets, one timestamp).
- ``RecordLog`` keeps decoded ``LogRecord`` objects (tests, ``offsetlake simulate``, failover
  replay). ``BytesLog`` keeps only encoded columns (the generator's fast path) and hands them out
  in chunks; it never builds per-record dataclasses for offset commits.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator_core.codec.modern_records import ModernKey, ModernValue
from coordinator_core.codec.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    OffsetCommitKey,
    OffsetCommitValue,
)
from coordinator_core.partitioner import partition_for
from coordinator_core.simulator.wire import OffsetCommitEncoder, encode_key, encode_value

#: What the simulated coordinators append: classic and KIP-848 keys and values.
LogKey = OffsetCommitKey | GroupMetadataKey | ModernKey
LogValue = OffsetCommitValue | GroupMetadataValue | ModernValue


class RecordLog:
    """Collects ``LogRecord``s; the base class of every sink."""

    def __init__(self, num_partitions: int = 50) -> None:
        self.num_partitions = num_partitions
        self.records: list[LogRecord] = []
        self._next_offset: dict[int, int] = {}
        self._partition_cache: dict[str, int] = {}
        self.count = 0

    def partition(self, group: str) -> int:
        p = self._partition_cache.get(group)
        if p is None:
            p = partition_for(group, self.num_partitions)
            self._partition_cache[group] = p
        return p

    def _next(self, partition: int) -> int:
        off = self._next_offset.get(partition, 0)
        self._next_offset[partition] = off + 1
        self.count += 1
        return off

    def append(self, ts: int, key: LogKey, value: LogValue | None) -> None:
        """Append one record (a tombstone when ``value`` is None)."""
        p = self.partition(key.group)
        self.records.append(LogRecord(p, self._next(p), ts, key, value))

    def append_offset_commit(
        self,
        ts: int,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        metadata: str,
        leader_epoch: int | None,
        expire_ts: int | None,
        version: int,
    ) -> None:
        """Append one offset commit (commit timestamp = ``ts``)."""
        self.append(
            ts,
            OffsetCommitKey(group, topic, partition),
            OffsetCommitValue(
                offset=offset,
                metadata=metadata,
                commit_timestamp=ts,
                leader_epoch=leader_epoch if version >= 3 else None,
                expire_timestamp=expire_ts if version == 1 else None,
                version=version,
            ),
        )

    def append_offset_commits(
        self,
        ts: int,
        group: str,
        offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...],
        expire_ts: int | None,
        version: int,
    ) -> None:
        """Append one OffsetCommit request's records: ``(tp, offset, metadata, leader_epoch)``."""
        for tp, offset, metadata, epoch in offsets:
            self.append_offset_commit(ts, group, tp[0], tp[1], offset, metadata, epoch, expire_ts, version)

    def records_for_partition(self, partition: int) -> list[LogRecord]:
        """Every collected record of one ``__consumer_offsets`` partition, in offset order."""
        return [r for r in self.records if r.partition == partition]


class BytesLog(RecordLog):
    """Keeps encoded columns only: key, value (None = tombstone), partition, offset, timestamp."""

    def __init__(self, num_partitions: int = 50) -> None:
        super().__init__(num_partitions)
        self.keys: list[bytes] = []
        self.values: list[bytes | None] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.encoder = OffsetCommitEncoder()
        st, m = self.encoder.v3_struct("")
        self._v3_last: tuple[str, Callable[..., bytes], bytes] = ("", st.pack, m)

    def append(self, ts: int, key: LogKey, value: LogValue | None) -> None:
        p = self.partition(key.group)
        self.keys.append(encode_key(key))
        self.values.append(None if value is None else encode_value(value))
        self.partitions.append(p)
        self.offsets.append(self._next(p))
        self.timestamps.append(ts)

    def append_offset_commit(
        self,
        ts: int,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        metadata: str,
        leader_epoch: int | None,
        expire_ts: int | None,
        version: int,
    ) -> None:
        p = self.partition(group)
        enc = self.encoder
        self.keys.append(enc.key(group, topic, partition))
        self.values.append(enc.value(offset, metadata, ts, leader_epoch, expire_ts, version))
        self.partitions.append(p)
        off = self._next_offset.get(p, 0)
        self._next_offset[p] = off + 1
        self.count += 1
        self.offsets.append(off)
        self.timestamps.append(ts)

    def append_offset_commits(
        self,
        ts: int,
        group: str,
        offsets: tuple[tuple[tuple[str, int], int, str, int | None], ...],
        expire_ts: int | None,
        version: int,
    ) -> None:
        p = self.partition(group)
        n = len(offsets)
        off = self._next_offset.get(p, 0)
        self._next_offset[p] = off + n
        self.count += n
        self.partitions.extend([p] * n)
        self.offsets.extend(range(off, off + n))
        self.timestamps.extend([ts] * n)
        enc = self.encoder
        cache = enc.keys_for(group)
        keys = self.keys
        values = self.values
        if version != 3:
            value = enc.value
            for tp, offset, metadata, epoch in offsets:
                k = cache.get(tp)
                keys.append(k if k is not None else enc.key(group, tp[0], tp[1]))
                values.append(value(offset, metadata, ts, epoch, expire_ts, version))
            return
        last_meta, pack, m = self._v3_last
        for tp, offset, metadata, epoch in offsets:
            k = cache.get(tp)
            keys.append(k if k is not None else enc.key(group, tp[0], tp[1]))
            if metadata != last_meta:
                st, m = enc.v3_struct(metadata)
                pack = st.pack
                last_meta = metadata
                self._v3_last = (last_meta, pack, m)
            values.append(pack(3, offset, -1 if epoch is None else epoch, len(m), m, ts))

    def __len__(self) -> int:
        return len(self.keys)

    def drain(self) -> tuple[list[bytes], list[bytes | None], list[int], list[int], list[int]]:
        """Hand out the buffered columns and start new ones."""
        out = (self.keys, self.values, self.partitions, self.offsets, self.timestamps)
        self.keys, self.values, self.partitions, self.offsets, self.timestamps = [], [], [], [], []
        return out
