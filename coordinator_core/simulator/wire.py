"""Byte encodings the simulator needs: record keys and values, and a fast lane for offset commits.

Rules:
- Records are encoded with the shared codec (``coordinator_core.codec.record_codec``); the
  simulator's modules take consumer-protocol blobs (spec §3-§5) from
  ``coordinator_core.codec.consumer_protocol`` and ``partition_for`` (spec §6) from
  ``coordinator_core.partitioner`` directly: nothing is re-exported here.
- ``OffsetCommitEncoder`` builds offset-commit key/value bytes fast (keys cached per
  (group, topic, partition), values with one precompiled ``struct``). Tests check it against
  ``coordinator_core.codec.record_codec``.
"""

from __future__ import annotations

import struct

from coordinator_core.codec import record_codec as codec
from coordinator_core.codec.modern_records import ModernKey, ModernValue
from coordinator_core.codec.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue


def encode_key(key: OffsetCommitKey | GroupMetadataKey | ModernKey) -> bytes:
    """A record key's bytes (``coordinator_core.codec.record_codec``)."""
    return codec.encode_key(key)


def encode_value(value: OffsetCommitValue | GroupMetadataValue | ModernValue) -> bytes:
    """A record value's bytes (``coordinator_core.codec.record_codec``; never a tombstone here)."""
    out = codec.encode_value(value)
    assert out is not None
    return out


class OffsetCommitEncoder:
    """Fast bytes for offset commits: cached keys, one precompiled ``struct`` per metadata string."""

    __slots__ = ("_keys", "_v1", "_v2", "_v3")

    def __init__(self) -> None:
        self._keys: dict[str, dict[tuple[str, int], bytes]] = {}
        self._v3: dict[str, tuple[struct.Struct, bytes]] = {}
        self._v2: dict[str, tuple[struct.Struct, bytes]] = {}
        self._v1: dict[str, tuple[struct.Struct, bytes]] = {}

    def keys_for(self, group: str) -> dict[tuple[str, int], bytes]:
        """The key cache of one group (``(topic, partition) -> key bytes``), filled lazily."""
        d = self._keys.get(group)
        if d is None:
            d = self._keys[group] = {}
        return d

    def key(self, group: str, topic: str, partition: int) -> bytes:
        d = self.keys_for(group)
        b = d.get((topic, partition))
        if b is None:
            b = d[(topic, partition)] = codec.encode_key(OffsetCommitKey(group, topic, partition))
        return b

    def _struct(
        self, table: dict[str, tuple[struct.Struct, bytes]], metadata: str, fmt: str
    ) -> tuple[struct.Struct, bytes]:
        entry = table.get(metadata)
        if entry is None:
            m = metadata.encode("utf-8")
            entry = table[metadata] = (struct.Struct(fmt.format(n=len(m))), m)
        return entry

    def v3_struct(self, metadata: str) -> tuple[struct.Struct, bytes]:
        """The v3 value struct for a metadata string: (version, offset, epoch, len, meta, ts)."""
        return self._struct(self._v3, metadata, ">hqih{n}sq")

    def value(
        self, offset: int, metadata: str, commit_ts: int, leader_epoch: int | None, expire_ts: int | None, version: int
    ) -> bytes:
        if version == 3:
            st, m = self._struct(self._v3, metadata, ">hqih{n}sq")
            return st.pack(3, offset, -1 if leader_epoch is None else leader_epoch, len(m), m, commit_ts)
        if version == 1:
            st, m = self._struct(self._v1, metadata, ">hqh{n}sqq")
            return st.pack(1, offset, len(m), m, commit_ts, -1 if expire_ts is None else expire_ts)
        st, m = self._struct(self._v2, metadata, ">hqh{n}sq")
        return st.pack(version, offset, len(m), m, commit_ts)
