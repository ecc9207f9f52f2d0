"""A Kafka 4 share group (KIP-932) as values: its members, what its share-partition state
metadata says, the rules Kafka applies to it (state, deletion, no offsets here).

Facts from apache/kafka's group-coordinator module (4.2-4.4): ``ShareGroup``,
``ShareGroupMember`` (``Builder`` defaults and ``updateWith``), ``ModernGroup``,
``GroupCoordinatorRecordHelpers``, ``GroupMetadataManager.replay`` for ShareGroup* records.

Rules:
- State (``ShareGroup.maybeUpdateGroupState``): Empty without members, else Stable; Dead once
  removed. There is no Assigning/Reconciling: a share partition may be assigned to several
  members at once, and a member consumes as soon as it has an assignment.
- A member first seen starts from ``ShareGroupMember.Builder``'s defaults: member epoch 0,
  previous epoch -1, state STABLE, no rack, empty client id/host, nothing subscribed or
  assigned. Its subscribed topic names are kept sorted (Kafka keeps a set).
- Offsets: a share group commits nothing to ``__consumer_offsets``. Its delivery state (the
  share-partition start offset, in-flight records) lives in ``__share_group_state``
  (``OFFSETS_KEPT_IN``); ShareGroupStatePartitionMetadata (15) only says which topic-partitions
  have that state initialized, initializing or being deleted.
- Expiry: never. ``ShareGroup.shouldExpire`` is false (the periodic cleanup skips share groups)
  and ``offsetExpirationCondition`` is unsupported; a share group goes only by DeleteGroups.
- Deletion (``ShareGroup.createGroupTombstoneRecords``): current assignments, target
  assignment members, the target assignment epoch, member subscriptions, the share-partition
  state metadata, then the group epoch (``deletion_records``).
- The assignor is the broker's (``group.share.assignors``, default ``simple``); records do not
  name it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from coordinator_core.codec.modern_records import GroupKey, GroupMemberKey, TopicIdPartitions
from coordinator_core.codec.records import Record
from coordinator_core.modern.group_epochs import TypeCodec

#: where a share group's consumption positions live (not ``__consumer_offsets``)
OFFSETS_KEPT_IN: Final = "__share_group_state"
#: ``group.share.assignors`` default (``SimpleAssignor.name()``)
DEFAULT_SHARE_ASSIGNOR: Final = "simple"
#: ``group.share.session.timeout.ms`` default: a share member's session timeout (not in the records)
DEFAULT_SHARE_SESSION_TIMEOUT_MS: Final = 45_000
SHARE_RECORD_TYPES: Final = frozenset({10, 11, 12, 13, 14, 15})

#: ``((topic_id, (partition, ...)), ...)``, sorted (Kafka's Map<Uuid, Set<Integer>>)
Assignment: TypeAlias = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ShareMember:
    """``ShareGroupMember``; ``state`` is the MemberState name (share members are always
    STABLE in practice: they have nothing to revoke)."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = "STABLE"
    assigned_partitions: Assignment = ()


@dataclass(frozen=True, slots=True)
class ShareStateTopics:
    """A ShareGroupStatePartitionMetadata value: the topic-partitions whose share state (in
    ``__share_group_state``) is initialized, being initialized, or being deleted."""

    initializing: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    initialized: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    deleting: tuple[tuple[str, str], ...] = ()


def _frozen() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ShareDetails:
    """What only a share group has: its share-partition state metadata (None: no record, or
    tombstoned) and the topic names the records taught (a topic id names one topic forever)."""

    state_topics: ShareStateTopics | None = None
    topic_names: Mapping[str, str] = field(default_factory=_frozen)


def assignment(tps: Iterable[TopicIdPartitions]) -> Assignment:
    merged: dict[str, set[int]] = {}
    for tp in tps:
        merged.setdefault(tp.topic_id, set()).update(tp.partitions)
    return tuple((tid, tuple(sorted(ps))) for tid, ps in sorted(merged.items()) if ps)


def pairs(a: Assignment) -> Iterable[tuple[str, int]]:
    for tid, ps in a:
        for p in ps:
            yield (tid, p)


def derive_state(members: Mapping[str, ShareMember]) -> str:
    """``ShareGroup.maybeUpdateGroupState``."""
    return "Stable" if members else "Empty"


def deletion_records(group_id: str, member_ids: Iterable[str]) -> list[Record]:
    """``ShareGroup.createGroupTombstoneRecords``: the tombstones deleting a share group."""
    mids = list(member_ids)
    out = [Record(GroupMemberKey(group_id, m, 14), None) for m in mids]
    out += [Record(GroupMemberKey(group_id, m, 13), None) for m in mids]
    out.append(Record(GroupKey(group_id, 12), None))
    out += [Record(GroupMemberKey(group_id, m, 10), None) for m in mids]
    out += [Record(GroupKey(group_id, 15), None), Record(GroupKey(group_id, 11), None)]
    return out


# -- serialized form (``group_epochs.dump_modern``) ---------------------------------------------
def _a_to(a: Assignment) -> list[Any]:
    return [[t, list(ps)] for t, ps in a]


def _a_from(v: list[Any]) -> Assignment:
    return tuple((t, tuple(ps)) for t, ps in v)


def _member_to(m: ShareMember) -> list[Any]:
    return [
        m.member_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        list(m.subscribed_topic_names),
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        _a_to(m.assigned_partitions),
    ]


def _member_from(v: list[Any]) -> ShareMember:
    return ShareMember(v[0], v[1], v[2], v[3], tuple(v[4]), v[5], v[6], v[7], _a_from(v[8]))


def _details_to(d: ShareDetails) -> list[Any]:
    st = d.state_topics
    topics = None
    if st is not None:
        topics = [
            [[i, n, list(ps)] for i, n, ps in st.initializing],
            [[i, n, list(ps)] for i, n, ps in st.initialized],
            [[i, n] for i, n in st.deleting],
        ]
    return [topics, [[k, v] for k, v in d.topic_names.items()]]


def _details_from(v: list[Any]) -> ShareDetails:
    st = None
    if v[0] is not None:
        ing, ed, dl = v[0]
        st = ShareStateTopics(
            tuple((i, n, tuple(ps)) for i, n, ps in ing),
            tuple((i, n, tuple(ps)) for i, n, ps in ed),
            tuple((i, n) for i, n in dl),
        )
    return ShareDetails(st, MappingProxyType(dict(v[1])))


SHARE_CODEC: Final = TypeCodec(_member_to, _member_from, _a_to, _a_from, _details_to, _details_from)
