"""Byte encodings the simulator needs, with fallbacks until the shared codecs land.

Rules:
- ``partition_for`` is Kafka's ``Utils.abs(groupId.hashCode) % partitions`` (spec §6); the shared
  ``coordinator_core.partitioner`` is used when present.
- Embedded consumer-protocol blobs (spec §5) are encoded with ``coordinator_core.consumer_protocol``
  when present, else with the local encoders here (same layout: int16 version, non-flexible).
- ``OffsetCommitEncoder`` builds offset-commit key/value bytes fast (keys cached per
  (group, topic, partition), values with one precompiled ``struct``). Tests check it against
  ``coordinator_core.codec``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from coordinator_core.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Subscription,
    TopicPartitions,
)


def _java_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _local_partition_for(group_id: str, num_partitions: int = 50) -> int:
    h = _java_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


try:  # the codecs helper's module, when it has landed
    from coordinator_core.partitioner import partition_for as partition_for
except Exception:  # pragma: no cover - fallback while the shared module is missing or broken
    partition_for = _local_partition_for


# ---------------------------------------------------------------------------------------------
# primitive writers
# ---------------------------------------------------------------------------------------------
def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _nstr(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def _nbytes(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else _bytes(b)


def _topic_partitions(tps: Sequence[TopicPartitions]) -> bytes:
    out = [struct.pack(">i", len(tps))]
    for tp in tps:
        out.append(_str(tp.topic))
        out.append(struct.pack(">i", len(tp.partitions)))
        out.append(b"".join(struct.pack(">i", p) for p in tp.partitions))
    return b"".join(out)


def _local_encode_subscription(sub: Subscription) -> bytes:
    out = [struct.pack(">h", sub.version), struct.pack(">i", len(sub.topics))]
    out.extend(_str(t) for t in sub.topics)
    out.append(_nbytes(sub.user_data))
    if sub.version >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if sub.version >= 2:
        out.append(struct.pack(">i", -1 if sub.generation_id is None else sub.generation_id))
    if sub.version >= 3:
        out.append(_nstr(sub.rack_id))
    return b"".join(out)


def _local_encode_assignment(a: Assignment) -> bytes:
    return struct.pack(">h", a.version) + _topic_partitions(a.assigned_partitions) + _nbytes(a.user_data)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = struct.unpack_from(">h", self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def nbytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def tps(self) -> tuple[TopicPartitions, ...]:
        out = []
        for _ in range(self.i32()):
            t = self.string() or ""
            out.append(TopicPartitions(t, tuple(self.i32() for _ in range(self.i32()))))
        return tuple(out)


def _local_decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    data = bytes(data)
    r = _Reader(data)
    version = r.i16()
    topics = tuple(r.string() or "" for _ in range(r.i32()))
    user_data = r.nbytes()
    owned: tuple[TopicPartitions, ...] = ()
    generation: int | None = None
    rack: str | None = None
    if version >= 1 and r.pos < len(data):
        owned = r.tps()
    if version >= 2 and r.pos < len(data):
        generation = r.i32()
    if version >= 3 and r.pos < len(data):
        rack = r.string()
    return Subscription(topics, user_data, owned, generation, rack, version)


def _local_decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    r = _Reader(bytes(data))
    version = r.i16()
    tps = r.tps()
    return Assignment(tps, r.nbytes(), version)


try:
    from coordinator_core.consumer_protocol import (
        decode_assignment as decode_assignment,
    )
    from coordinator_core.consumer_protocol import (
        decode_subscription as decode_subscription,
    )
    from coordinator_core.consumer_protocol import (
        encode_assignment as encode_assignment,
    )
    from coordinator_core.consumer_protocol import (
        encode_subscription as encode_subscription,
    )
except Exception:  # pragma: no cover - fallback while the shared module is missing or broken
    encode_subscription = _local_encode_subscription
    encode_assignment = _local_encode_assignment
    decode_subscription = _local_decode_subscription
    decode_assignment = _local_decode_assignment


# ---------------------------------------------------------------------------------------------
# record encoders (spec §3, §4)
# ---------------------------------------------------------------------------------------------
def local_encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return struct.pack(">h", key.version) + _str(key.group) + _str(key.topic) + struct.pack(">i", key.partition)
    return struct.pack(">h", key.version) + _str(key.group)


def _member_bytes(m: MemberMetadata, version: int) -> bytes:
    out = [_str(m.member_id)]
    if version >= 3:
        out.append(_nstr(m.group_instance_id))
    out.append(_str(m.client_id))
    out.append(_str(m.client_host))
    if version >= 1:
        out.append(struct.pack(">i", -1 if m.rebalance_timeout is None else m.rebalance_timeout))
    out.append(struct.pack(">i", m.session_timeout))
    out.append(_bytes(m.subscription))
    out.append(_bytes(m.assignment))
    return b"".join(out)


def local_encode_value(value: OffsetCommitValue | GroupMetadataValue) -> bytes:
    v = value.version
    if isinstance(value, OffsetCommitValue):
        head = struct.pack(">hq", v, value.offset)
        if v == 0:
            return head + _str(value.metadata) + struct.pack(">q", value.commit_timestamp)
        if v == 1:
            exp = -1 if value.expire_timestamp is None else value.expire_timestamp
            return head + _str(value.metadata) + struct.pack(">qq", value.commit_timestamp, exp)
        if v == 2:
            return head + _str(value.metadata) + struct.pack(">q", value.commit_timestamp)
        if v == 3:
            epoch = -1 if value.leader_epoch is None else value.leader_epoch
            return head + struct.pack(">i", epoch) + _str(value.metadata) + struct.pack(">q", value.commit_timestamp)
        raise ValueError(f"local encoder does not write offset commit value v{v}")
    if v > 3:
        raise ValueError(f"local encoder does not write group metadata value v{v}")
    out = [struct.pack(">h", v), _str(value.protocol_type), struct.pack(">i", value.generation)]
    out.append(_nstr(value.protocol))
    out.append(_nstr(value.leader))
    if v >= 2:
        cst = -1 if value.current_state_timestamp is None else value.current_state_timestamp
        out.append(struct.pack(">q", cst))
    out.append(struct.pack(">i", len(value.members)))
    out.extend(_member_bytes(m, v) for m in value.members)
    return b"".join(out)


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    """Encode a key with the shared codec when present, else locally."""
    try:
        from coordinator_core import codec
    except ImportError:  # pragma: no cover
        return local_encode_key(key)
    return codec.encode_key(key)


def encode_value(value: OffsetCommitValue | GroupMetadataValue) -> bytes:
    """Encode a value with the shared codec when present, else locally."""
    try:
        from coordinator_core import codec
    except ImportError:  # pragma: no cover
        return local_encode_value(value)
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
            b = d[(topic, partition)] = local_encode_key(OffsetCommitKey(group, topic, partition))
        return b

    def _struct(self, table: dict[str, tuple[struct.Struct, bytes]], metadata: str, fmt: str) -> tuple[struct.Struct, bytes]:
        entry = table.get(metadata)
        if entry is None:
            m = metadata.encode("utf-8")
            entry = table[metadata] = (struct.Struct(fmt.format(n=len(m))), m)
        return entry

    def v3_struct(self, metadata: str) -> tuple[struct.Struct, bytes]:
        """The v3 value struct for a metadata string: (version, offset, epoch, len, meta, ts)."""
        return self._struct(self._v3, metadata, ">hqih{n}sq")

    def value(
        self,
        offset: int,
        metadata: str,
        commit_ts: int,
        leader_epoch: int | None,
        expire_ts: int | None,
        version: int,
    ) -> bytes:
        if version == 3:
            st, m = self._struct(self._v3, metadata, ">hqih{n}sq")
            return st.pack(3, offset, -1 if leader_epoch is None else leader_epoch, len(m), m, commit_ts)
        if version == 1:
            st, m = self._struct(self._v1, metadata, ">hqh{n}sqq")
            return st.pack(1, offset, len(m), m, commit_ts, -1 if expire_ts is None else expire_ts)
        st, m = self._struct(self._v2, metadata, ">hqh{n}sq")
        return st.pack(version, offset, len(m), m, commit_ts)
