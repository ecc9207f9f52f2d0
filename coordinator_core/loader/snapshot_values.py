"""The snapshot as plain values: the form a carried replay keeps its groups in between calls.

A carried replay (the streaming job's state buckets, the batch job's kept groups) reads every
active group's snapshot and writes it back on every call. The byte codec
(``snapshot_codec``) reads ~30 varints per offset in Python; this form is a tuple of Python's
own values (str, int, bytes, None, bool and tuples of them) that the caller pickles with its
bucket, so C does the bytes and this module only rebuilds the objects: ~5–8× cheaper to read
and ~3× to write (``bench/RESULTS.md``, *the snapshot as plain values*), ~1.4× the bytes.

Rules:
- ``snapshot_values(s)`` is ``GroupSnapshot``'s fields in declaration order, each as a plain
  value: the state as its index in ``GROUP_STATES``, mappings as tuples of their items, the members
  and offset values as tuples of their fields in their classes' declaration order, a consumer
  group's fold as ``modern.consumer.model.dump_snapshot``'s bytes, a share/streams group's as
  (kind, ``dump_modern`` bytes). ``snapshot_from_values`` inverts it exactly.
- Its layout is ``VALUES_FORMAT_VERSION``; a later layout may only append fields, and a reader
  gives a shorter tuple's missing fields their defaults (``new_snapshot``'s), as the byte
  codec's tails do. The byte codec stays for what a release before this one kept.
- Bad values raise ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from coordinator_core.codec.records import MemberMetadata, OffsetCommitValue
from coordinator_core.codec.wire import fast_constructor
from coordinator_core.loader.snapshot import (
    EMPTY_OFFSETS,
    EMPTY_PENDING,
    EMPTY_PREDICTED,
    EMPTY_SETTLED,
    EMPTY_TXN_OFFSETS,
    SNAPSHOT_FORMAT_VERSION,
    GroupSnapshot,
    OffsetState,
    TopicPartition,
    new_group_snapshot,
    new_snapshot,
)
from coordinator_core.loader.snapshot_codec import GROUP_STATES, MODERN_CODECS, STATE_INDEX
from coordinator_core.modern.consumer.model import dump_snapshot as dump_consumer_snapshot
from coordinator_core.modern.consumer.model import load_snapshot as load_consumer_snapshot
from coordinator_core.modern.group_epochs import dump_modern, load_modern

#: the layout ``snapshot_values`` writes (a carried group's entry format; 1 and 2 are the byte codec's)
VALUES_FORMAT_VERSION = 3
if VALUES_FORMAT_VERSION <= SNAPSHOT_FORMAT_VERSION:  # pragma: no cover
    raise RuntimeError("a snapshot format number names two forms: give the new one the next free number")

_new_member = fast_constructor(MemberMetadata)
_new_value = fast_constructor(OffsetCommitValue)
#: the number of fields of the current layout (one per ``GroupSnapshot`` field)
_FIELDS = len(GroupSnapshot.__dataclass_fields__)

# the positions of the fields that are not plain values already
_STATE, _MEMBERS, _TOPICS, _OFFSETS, _PREDICTED, _REMOVED, _SETTLED = 1, 8, 12, 13, 19, 22, 24
_CONSUMER, _PENDING, _TXN, _MODERN = 33, 34, 35, 36

OffsetValues = tuple[tuple[TopicPartition, tuple[Any, ...], int, int, int], ...]


def _offsets_values(offsets: Mapping[TopicPartition, OffsetState]) -> OffsetValues:
    return tuple(
        (tp, (v.offset, v.metadata, v.commit_timestamp, v.leader_epoch, v.expire_timestamp, v.version, v.tagged_fields), lp, lo, ts)
        for tp, (v, lp, lo, ts) in offsets.items()
    )  # fmt: skip


def _offsets_from(values: OffsetValues) -> Mapping[TopicPartition, OffsetState]:
    if not values:
        return EMPTY_OFFSETS
    return MappingProxyType({tp: (_new_value(v), lp, lo, ts) for tp, v, lp, lo, ts in values})


def snapshot_values(s: GroupSnapshot) -> tuple[Any, ...]:
    """``s`` as plain values (layout ``VALUES_FORMAT_VERSION``); ``snapshot_from_values`` inverts it."""
    modern = s.modern
    return (
        s.group_id, STATE_INDEX[s.state], s.exists, s.generation, s.protocol_type, s.protocol, s.leader,
        s.current_state_timestamp,
        tuple(
            (m.member_id, m.client_id, m.client_host, m.session_timeout, m.subscription, m.assignment,
             m.rebalance_timeout, m.group_instance_id, m.tagged_fields)
            for m in s.members
        ),
        s.has_metadata, s.metadata_timestamp_ms, s.state_timestamp_ms,
        None if s.subscribed_topics is None else tuple(sorted(s.subscribed_topics)),
        _offsets_values(s.offsets), s.last_position, s.last_timestamp_ms, s.records_applied,
        s.unsupported_records, s.last_offset_removal_ms, tuple(s.predicted_expired.items()),
        s.predicted_death_ms, s.tombstone_run, _offsets_values(s.predicted_removed), s.predicted_death_restore,
        tuple(s.settled.items()), s.settled_death_ms, s.situation_since_ms, s.first_position,
        s.new_coordinator_seen, s.predictions_contradicted, s.pending_contradictions, s.created_by_commit,
        s.group_type, None if s.consumer is None else dump_consumer_snapshot(s.consumer),
        tuple((pid, _offsets_values(p)) for pid, p in s.pending_txn.items()), tuple(s.txn_offsets.items()),
        None if modern is None else (modern.group_type, dump_modern(modern, MODERN_CODECS[modern.group_type])),
    )  # fmt: skip


def snapshot_from_values(values: tuple[Any, ...]) -> GroupSnapshot:
    """The snapshot ``snapshot_values`` gave ``values`` for (any layout up to the current one).

    Raises:
        ValueError: not a snapshot's values.
    """
    if not isinstance(values, tuple) or not values or len(values) > _FIELDS:
        raise ValueError(f"not a snapshot's values of layout {VALUES_FORMAT_VERSION} or before")
    try:
        v = list(values)
        if len(v) < _FIELDS:  # an earlier layout: its missing (appended) fields at their defaults
            v.extend(snapshot_values(new_snapshot(v[0]))[len(v) :])
        v[_STATE] = GROUP_STATES[v[_STATE]]
        v[_MEMBERS] = tuple(map(_new_member, v[_MEMBERS]))
        if v[_TOPICS] is not None:
            v[_TOPICS] = frozenset(v[_TOPICS])
        v[_OFFSETS] = _offsets_from(v[_OFFSETS])
        v[_PREDICTED] = MappingProxyType(dict(v[_PREDICTED])) if v[_PREDICTED] else EMPTY_PREDICTED
        v[_REMOVED] = _offsets_from(v[_REMOVED])
        v[_SETTLED] = MappingProxyType(dict(v[_SETTLED])) if v[_SETTLED] else EMPTY_SETTLED
        if v[_CONSUMER] is not None:
            v[_CONSUMER] = load_consumer_snapshot(v[_CONSUMER])
        v[_PENDING] = (
            MappingProxyType({pid: _offsets_from(p) for pid, p in v[_PENDING]}) if v[_PENDING] else EMPTY_PENDING
        )
        v[_TXN] = MappingProxyType(dict(v[_TXN])) if v[_TXN] else EMPTY_TXN_OFFSETS
        if v[_MODERN] is not None:
            kind, blob = v[_MODERN]
            v[_MODERN] = load_modern(blob, MODERN_CODECS[kind])
    except (IndexError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"corrupt snapshot values: {exc}") from exc
    return new_group_snapshot(v)  # type: ignore[no-any-return]
