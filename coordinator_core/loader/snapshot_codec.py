"""The snapshot's bytes: compact, versioned (the streaming state store holds them; spec §10).

Rules:
- Layout v1: one format-version byte, then the fields of ``GroupSnapshot`` in declaration order.
  Integers are zigzag varints; optional values add 1 (0 = None); strings/bytes are
  ``uvarint(len + 1) + data`` (0 = None, Kafka's ``COMPACT_NULLABLE_BYTES``); offsets use a
  topic table. v2 appends the fold behind the as-of view and the judged predictions, then
  (only for a group that is not plain classic, so classic bytes stay v2's exactly) the Kafka 4
  tail: the group type and the consumer group's fold (``modern.consumer.model.dump_snapshot``);
  a reader that stops before the tail reads the group as classic. After it, only for a group
  with transactional state (so every other group's bytes stay as they were), the transactional
  tail: the pending transactional offsets by producer id, then the producer id of each held
  offset a COMMIT made; the Kafka 4 tail is then written even for a classic group. After it,
  only for a share or streams group (KIP-932, KIP-1071), the share/streams tail: the group's
  kind and its fold (``modern.group_epochs.dump_modern``); the tails before it are then written
  (empty when they hold nothing).
- A reader reads every format version up to ``SNAPSHOT_FORMAT_VERSION``; new versions may only
  append fields. Format v1 and v2 bytes are frozen (the golden test): the encoding must not change.
- Every primitive is ``coordinator_core.codec.wire``'s (varlongs, zigzag, compact bytes): there is no
  second varint implementation here; this module only composes them.
- Bad bytes raise ``ValueError`` (never ``IndexError`` or ``WireError``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType

from coordinator_core.codec.records import MemberMetadata, OffsetCommitValue
from coordinator_core.codec.wire import (
    WireError,
    append_compact_nullable_bytes,
    append_uvarlong,
    append_varlong,
    read_compact_nullable_bytes,
    read_uvarlong,
    read_varlong,
    unzigzag,
    zigzag,
)
from coordinator_core.loader.snapshot import (
    EMPTY_OFFSETS,
    EMPTY_PENDING,
    EMPTY_PREDICTED,
    EMPTY_SETTLED,
    EMPTY_TXN_OFFSETS,
    SNAPSHOT_FORMAT_VERSION,
    DeathRestore,
    GroupSnapshot,
    OffsetState,
    PredictedExpiry,
    TopicPartition,
)
from coordinator_core.modern.consumer.model import dump_snapshot as dump_consumer_snapshot
from coordinator_core.modern.consumer.model import load_snapshot as load_consumer_snapshot
from coordinator_core.modern.group_epochs import TypeCodec, dump_modern, load_modern
from coordinator_core.modern.share.model import SHARE_CODEC
from coordinator_core.state import GroupState
from coordinator_core.streams.model import STREAMS_CODEC

#: what both snapshot forms (these bytes, ``snapshot_values``) share: a share or streams group's
#: fold codec by its kind, a classic group's state by its index
MODERN_CODECS: dict[str, TypeCodec] = {"share": SHARE_CODEC, "streams": STREAMS_CODEC}
GROUP_STATES: tuple[GroupState, ...] = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
STATE_INDEX = {s: i for i, s in enumerate(GROUP_STATES)}


class _Writer:
    """The snapshot's field encodings, each one ``wire`` primitive or a composition of them."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def u(self, n: int) -> None:
        append_uvarlong(self.buf, n)

    def i(self, n: int) -> None:
        append_varlong(self.buf, n)

    def oi(self, n: int | None) -> None:
        append_uvarlong(self.buf, 0 if n is None else zigzag(n) + 1)

    def b(self, data: bytes | None) -> None:
        append_compact_nullable_bytes(self.buf, data)

    def s(self, text: str | None) -> None:
        append_compact_nullable_bytes(self.buf, None if text is None else text.encode("utf-8"))

    def opt_pos(self, p: tuple[int, int] | None) -> None:
        """An optional (partition, offset): 0, or 1 and the two integers."""
        if p is None:
            self.u(0)
        else:
            self.u(1)
            self.i(p[0])
            self.i(p[1])

    def tagged(self, fields: tuple[tuple[int, bytes], ...]) -> None:
        self.u(len(fields))
        for tag, data in fields:
            self.u(tag)
            self.b(data)


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)

    def u(self) -> int:
        n, self.pos = read_uvarlong(self.data, self.pos, self.end)
        return n

    def i(self) -> int:
        n, self.pos = read_varlong(self.data, self.pos, self.end)
        return n

    def oi(self) -> int | None:
        n, self.pos = read_uvarlong(self.data, self.pos, self.end)
        return None if n == 0 else unzigzag(n - 1)

    def b(self) -> bytes | None:
        out, self.pos = read_compact_nullable_bytes(self.data, self.pos, self.end)
        return out

    def rb(self) -> bytes:
        out = self.b()
        if out is None:
            raise ValueError("corrupt snapshot: null where bytes were expected")
        return out

    def s(self) -> str | None:
        raw = self.b()
        return None if raw is None else raw.decode("utf-8")

    def rs(self) -> str:
        return self.rb().decode("utf-8")

    def opt_pos(self) -> tuple[int, int] | None:
        return (self.i(), self.i()) if self.u() else None

    def tagged(self) -> tuple[tuple[int, bytes], ...]:
        return tuple((self.u(), self.rb()) for _ in range(self.u()))


def serialize_snapshot(s: GroupSnapshot) -> bytes:
    """Encode a snapshot (format ``SNAPSHOT_FORMAT_VERSION``); ``deserialize_snapshot`` inverts it."""
    w = _Writer()
    w.buf.append(SNAPSHOT_FORMAT_VERSION)
    w.s(s.group_id)
    w.u(STATE_INDEX[s.state] | (s.exists << 3) | (s.has_metadata << 4))
    w.i(s.generation)
    w.s(s.protocol_type)
    w.s(s.protocol)
    w.s(s.leader)
    w.oi(s.current_state_timestamp)
    w.u(len(s.members))
    for m in s.members:
        w.s(m.member_id)
        w.s(m.group_instance_id)
        w.s(m.client_id)
        w.s(m.client_host)
        w.i(m.session_timeout)
        w.oi(m.rebalance_timeout)
        w.b(m.subscription)
        w.b(m.assignment)
        w.tagged(m.tagged_fields)
    w.oi(s.metadata_timestamp_ms)
    w.oi(s.state_timestamp_ms)
    if s.subscribed_topics is None:
        w.u(0)
    else:
        w.u(len(s.subscribed_topics) + 1)
        for t in sorted(s.subscribed_topics):
            w.s(t)
    _write_offsets(w, s.offsets, s.last_timestamp_ms or 0)
    w.opt_pos(s.last_position)
    w.oi(s.last_timestamp_ms)
    w.u(s.records_applied)
    w.u(s.unsupported_records)
    w.oi(s.last_offset_removal_ms)
    w.u(len(s.predicted_expired))
    for (topic, partition), (off, cts, pms) in sorted(s.predicted_expired.items()):
        w.s(topic)
        w.i(partition)
        w.i(off)
        w.i(cts)
        w.i(pms)
    w.oi(s.predicted_death_ms)
    w.u(len(s.tombstone_run))
    for topic, partition, off, cts, lo, ts in s.tombstone_run:
        w.s(topic)
        w.i(partition)
        w.i(off)
        w.i(cts)
        w.i(lo)
        w.i(ts)
    # v2
    _write_offsets(w, s.predicted_removed, s.last_timestamp_ms or 0)
    if s.predicted_death_restore is None:
        w.u(0)
    else:
        w.u(1)
        st_ms, r_ptype, r_protocol, r_leader, r_meta = s.predicted_death_restore
        w.oi(st_ms)
        w.s(r_ptype)
        w.s(r_protocol)
        w.s(r_leader)
        w.u(int(r_meta))
    w.u(len(s.settled))
    for (topic, partition), due in sorted(s.settled.items()):
        w.s(topic)
        w.i(partition)
        w.i(due)
    w.oi(s.settled_death_ms)
    w.oi(s.situation_since_ms)
    w.opt_pos(s.first_position)
    w.u(int(s.new_coordinator_seen))
    w.u(s.predictions_contradicted)
    w.u(s.pending_contradictions)
    w.opt_pos(s.created_by_commit)
    txn = bool(s.pending_txn or s.txn_offsets)
    modern = s.modern
    if s.group_type != "classic" or s.consumer is not None or txn or modern is not None:
        # the Kafka 4 tail (optional, so a classic group's bytes are v2's exactly)
        w.s(s.group_type)
        w.b(None if s.consumer is None else dump_consumer_snapshot(s.consumer))
    if txn or modern is not None:
        # the transactional tail (optional, after the Kafka 4 tail)
        w.u(len(s.pending_txn))
        for pid, pending in sorted(s.pending_txn.items()):
            w.i(pid)
            _write_offsets(w, pending, s.last_timestamp_ms or 0)
        w.u(len(s.txn_offsets))
        for (topic, partition), pid in sorted(s.txn_offsets.items()):
            w.s(topic)
            w.i(partition)
            w.i(pid)
    if modern is not None:
        # the share/streams tail (optional, after the transactional tail)
        w.s(modern.group_type)
        w.b(dump_modern(modern, MODERN_CODECS[modern.group_type]))
    return bytes(w.buf)


def _write_offsets(w: _Writer, offsets: Mapping[TopicPartition, OffsetState], base: int) -> None:
    items = sorted(offsets.items())
    topics = sorted({tp[0] for tp, _ in items})
    tindex = {t: i for i, t in enumerate(topics)}
    w.u(len(topics))
    for t in topics:
        w.s(t)
    # timestamps as deltas: commit vs a base, record time vs commit (usually 0)
    w.i(base)
    w.u(len(items))
    for (topic, partition), (v, lp, lo, ts) in items:
        w.u(tindex[topic])
        w.i(partition)
        w.i(v.offset)
        w.oi(v.leader_epoch)
        w.s(v.metadata)
        w.i(base - v.commit_timestamp)
        w.oi(v.expire_timestamp)
        w.u(v.version)
        w.tagged(v.tagged_fields)
        w.i(lp)
        w.i(lo)
        w.i(ts - v.commit_timestamp)


def _read_offsets(r: _Reader) -> dict[TopicPartition, OffsetState]:
    topics = [r.rs() for _ in range(r.u())]
    offsets: dict[TopicPartition, OffsetState] = {}
    u, i, oi = r.u, r.i, r.oi  # bound once: a dozen reads per offset
    base = i()
    for _ in range(u()):
        topic = topics[u()]
        partition = i()
        off = i()
        epoch = oi()
        metadata = r.rs()
        cts = base - i()
        exp = oi()
        vver = u()
        tagged = r.tagged()
        value = OffsetCommitValue(off, metadata, cts, epoch, exp, vver, tagged)
        offsets[(topic, partition)] = (value, i(), i(), cts + i())
    return offsets


def _read_members(r: _Reader) -> tuple[MemberMetadata, ...]:
    members = []
    for _ in range(r.u()):
        member_id = r.rs()
        iid = r.s()
        client_id = r.rs()
        client_host = r.rs()
        session = r.i()
        rebalance = r.oi()
        sub = r.rb()
        asg = r.rb()
        members.append(MemberMetadata(member_id, client_id, client_host, session, sub, asg, rebalance, iid, r.tagged()))
    return tuple(members)


#: format v2's fields: the fold behind the view, the judged predictions, the group's history
_V2 = tuple[
    dict[TopicPartition, OffsetState],
    DeathRestore | None,
    dict[TopicPartition, int],
    int | None,
    int | None,
    tuple[int, int] | None,
    bool,
    int,
    int,
    tuple[int, int] | None,
]
#: what a v1 snapshot reads as for them
_V2_ABSENT: _V2 = ({}, None, {}, None, None, None, False, 0, 0, None)


def _read_v2(r: _Reader) -> _V2:
    removed = _read_offsets(r)
    restore: DeathRestore | None = (r.oi(), r.s(), r.s(), r.s(), bool(r.u())) if r.u() else None
    settled: dict[TopicPartition, int] = {}
    for _ in range(r.u()):
        tp = (r.rs(), r.i())
        settled[tp] = r.i()
    return (removed, restore, settled, r.oi(), r.oi(), r.opt_pos(), bool(r.u()), r.u(), r.u(), r.opt_pos())


def deserialize_snapshot(data: bytes) -> GroupSnapshot:  # long: one read per field, in the format's order
    """Decode bytes from ``serialize_snapshot`` (any format version up to the current one).

    Raises:
        ValueError: unknown (newer) format version or corrupt bytes.
    """
    if not data:
        raise ValueError("empty snapshot bytes")
    version = data[0]
    if version < 1 or version > SNAPSHOT_FORMAT_VERSION:
        raise ValueError(f"snapshot format version {version} is not supported (max {SNAPSHOT_FORMAT_VERSION})")
    r = _Reader(data, 1)
    try:
        group_id = r.rs()
        flags = r.u()
        state = GROUP_STATES[flags & 0x7]
        generation = r.i()
        protocol_type = r.s()
        protocol = r.s()
        leader = r.s()
        cst = r.oi()
        members = _read_members(r)
        meta_ts = r.oi()
        state_ts = r.oi()
        n_subs = r.u()
        subs = None if n_subs == 0 else frozenset(r.rs() for _ in range(n_subs - 1))
        offsets = _read_offsets(r)
        last_position = r.opt_pos()
        last_ts = r.oi()
        applied = r.u()
        unsupported = r.u()
        removal = r.oi()
        predicted: dict[TopicPartition, PredictedExpiry] = {}
        for _ in range(r.u()):
            tp = (r.rs(), r.i())
            predicted[tp] = (r.i(), r.i(), r.i())
        death = r.oi()
        run = tuple((r.rs(), r.i(), r.i(), r.i(), r.i(), r.i()) for _ in range(r.u()))
        v2 = _read_v2(r) if version >= 2 else _V2_ABSENT
        (removed, restore, settled, settled_death, since, first, new_seen, contradicted, pending, created) = v2
        group_type, consumer = "classic", None
        if version >= 2 and r.pos < r.end:  # the Kafka 4 tail
            group_type = r.rs()
            blob = r.b()
            consumer = None if blob is None else load_consumer_snapshot(blob)
        pending_txn: dict[int, Mapping[TopicPartition, OffsetState]] = {}
        txn_offsets: dict[TopicPartition, int] = {}
        if version >= 2 and r.pos < r.end:  # the transactional tail
            for _ in range(r.u()):
                pid = r.i()
                pending_txn[pid] = MappingProxyType(_read_offsets(r))
            for _ in range(r.u()):
                tp = (r.rs(), r.i())
                txn_offsets[tp] = r.i()
        modern = None
        if version >= 2 and r.pos < r.end:  # the share/streams tail
            codec = MODERN_CODECS[r.rs()]
            modern = load_modern(r.rb(), codec)
        if version < 2 and (predicted or death is not None):
            # a v1 snapshot's view had already removed its predictions (and their values are
            # gone): keep it as the fold, with nothing outstanding to confirm or withdraw
            predicted, death = {}, None
    except (IndexError, UnicodeDecodeError, WireError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt snapshot bytes: {exc}") from exc
    return GroupSnapshot(
        group_id=group_id,
        state=state,
        exists=bool(flags & 0x8),
        generation=generation,
        protocol_type=protocol_type,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=cst,
        members=members,
        has_metadata=bool(flags & 0x10),
        metadata_timestamp_ms=meta_ts,
        state_timestamp_ms=state_ts,
        subscribed_topics=subs,
        offsets=MappingProxyType(offsets) if offsets else EMPTY_OFFSETS,
        last_position=last_position,
        last_timestamp_ms=last_ts,
        records_applied=applied,
        unsupported_records=unsupported,
        last_offset_removal_ms=removal,
        predicted_expired=MappingProxyType(predicted) if predicted else EMPTY_PREDICTED,
        predicted_death_ms=death,
        tombstone_run=run,
        predicted_removed=MappingProxyType(removed) if removed else EMPTY_OFFSETS,
        predicted_death_restore=restore,
        settled=MappingProxyType(settled) if settled else EMPTY_SETTLED,
        settled_death_ms=settled_death,
        situation_since_ms=since,
        first_position=first,
        new_coordinator_seen=new_seen,
        predictions_contradicted=contradicted,
        pending_contradictions=pending,
        created_by_commit=created,
        group_type=group_type,
        consumer=consumer,
        pending_txn=MappingProxyType(pending_txn) if pending_txn else EMPTY_PENDING,
        txn_offsets=MappingProxyType(txn_offsets) if txn_offsets else EMPTY_TXN_OFFSETS,
        modern=modern,
    )
