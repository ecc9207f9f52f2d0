"""What a group-metadata record tells of the rebalance that wrote it (spec §7.3).

Rules:
- Members are matched across records by identity: the static member's ``group.instance.id``
  (KIP-345: it keeps its identity across member ids), else the member id.
- Partition movement is known only for a consumer group whose every member's assignment parses
  (``ConsumerProtocol``, spec §5); otherwise ``assignment_known`` is False and nothing is guessed.
- A rebalance's start is not logged: ``start_estimate`` gives the earliest possible start, from
  the members' rebalance timeouts (``DelayedJoin``) and, from Empty, the initial delay
  (``InitialDelayedJoin``, KIP-134); never before the previous group record.
- The last rebalance's member maps are cached on the fold (``rb_cache``), keyed by the members
  tuple they describe: the next record's "before" is this record's "after".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from coordinator_core import expiry as _expiry
from coordinator_core.events import GroupMember, Rebalance
from coordinator_core.records import GroupMetadataValue, MemberMetadata
from coordinator_core.snapshot import TopicPartition, assigned_of, member_identity, sorted_assigned_of, sorted_topics_of
from coordinator_core.wire import fast_constructor

if TYPE_CHECKING:
    from coordinator_core.group_fold import GroupFold

# slot-filling constructors of the frozen event classes (``wire.fast_constructor``)
_new_rebalance = fast_constructor(Rebalance)
_new_member_event = fast_constructor(GroupMember)

#: ``group.initial.rebalance.delay.ms`` default (KIP-134, Kafka 0.11+)
GROUP_INITIAL_REBALANCE_DELAY_MS = 3_000

Assignments = dict[str, frozenset[TopicPartition] | None]


class Before(NamedTuple):
    """The group as the previous group record left it (what a rebalance is told against)."""

    members: tuple[MemberMetadata, ...]
    leader: str | None
    protocol: str | None
    protocol_type: str | None
    metadata_timestamp_ms: int | None


def start_estimate(members: Sequence[MemberMetadata], end_join: int, prev_meta_ts: int | None, from_empty: bool) -> int:
    """Earliest possible start of a rebalance: the join phase lasts at most the largest
    rebalance timeout (DelayedJoin). From Empty, ``InitialDelayedJoin`` waits
    ``group.initial.rebalance.delay.ms`` and re-arms (by at most that delay) only while new members
    keep arriving, each re-arm for a member that joined during the previous delay: with n members
    the join phase lasts at most n delays, and never more than max(delay, rebalance timeout). It
    began after the previous group record."""
    longest = max((m.effective_rebalance_timeout for m in members), default=0)
    if from_empty:
        delay = GROUP_INITIAL_REBALANCE_DELAY_MS
        longest = min(max(longest, delay), delay * max(len(members), 1))
    start = end_join - longest
    if prev_meta_ts is not None and prev_meta_ts > start:
        start = prev_meta_ts
    return min(start, end_join)


def _assignment_diff(
    before: dict[str, MemberMetadata], after: dict[str, MemberMetadata], a_before: Assignments, a_after: Assignments
) -> tuple[int, list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """(partitions that changed owner, (member, topic, partition) gained, and lost)."""
    gained: list[tuple[str, str, int]] = []
    lost: list[tuple[str, str, int]] = []
    owner_before: dict[TopicPartition, str] = {}
    for i, parts in a_before.items():
        for tp in parts or ():
            owner_before[tp] = i
    moved = 0
    for i, parts in a_after.items():
        new = parts or frozenset()
        old = a_before.get(i) or frozenset()
        mid = after[i].member_id
        gained.extend((mid, t, p) for t, p in sorted(new - old))
        for tp in new:
            ob = owner_before.get(tp)
            if ob is not None and ob != i:
                moved += 1
    for i, parts in a_before.items():
        old = parts or frozenset()
        new = a_after.get(i) or frozenset()
        mid = before[i].member_id
        lost.extend((mid, t, p) for t, p in sorted(old - new))
    return moved, gained, lost


def rebalance_event(
    w: GroupFold,
    v: GroupMetadataValue,
    base: str,
    ts: int,
    pos: tuple[int, int],
    prev_gen: int | None,
    prev: Before,
    cause: str,
) -> Rebalance:
    """The ``rebalance`` row of the group record ``v`` (updates the fold's ``rb_cache``)."""
    cache = w.rb_cache
    a_before: Assignments | None = None
    if cache is not None and cache[0] is prev.members:
        before, a_before = cache[1], cache[2]
    else:
        before = {member_identity(m): m for m in prev.members}
    after = {member_identity(m): m for m in v.members}
    joined = tuple(sorted(after[i].member_id for i in after.keys() - before.keys()))
    left = tuple(sorted(before[i].member_id for i in before.keys() - after.keys()))
    static = tuple(
        sorted(
            after[i].group_instance_id or ""
            for i in after.keys() & before.keys()
            if i.startswith("i:") and after[i].member_id != before[i].member_id
        )
    )
    ptype = v.protocol_type or None
    consumer = ptype == _expiry.CONSUMER_PROTOCOL_TYPE or (
        not v.members and prev.protocol_type == _expiry.CONSUMER_PROTOCOL_TYPE
    )
    gained: list[tuple[str, str, int]] = []
    lost: list[tuple[str, str, int]] = []
    moved: int | None = None
    known = False
    a_after: Assignments | None = None
    if consumer:
        if a_before is None:
            a_before = {i: assigned_of(m.assignment) for i, m in before.items()}
        a_after = {i: assigned_of(m.assignment) for i, m in after.items()}
        known = all(x is not None for x in a_before.values()) and all(x is not None for x in a_after.values())
        if known:
            moved, gained, lost = _assignment_diff(before, after, a_before, a_after)
    w.rb_cache = (v.members, after, a_after)
    cst = v.current_state_timestamp
    end_join = cst if cst is not None else ts
    start: int | None
    if cause == "first_record":
        start = None
    elif cause == "static_member_rejoined":
        start = ts
    else:
        start = start_estimate(v.members or prev.members, end_join, prev.metadata_timestamp_ms, not prev.members)
    skipped: int | None = None
    if prev_gen is not None and v.generation >= prev_gen:
        skipped = max(0, v.generation - prev_gen - 1)
    prev_meta_ts = prev.metadata_timestamp_ms
    return _new_rebalance(  # type: ignore[no-any-return]
        (
            w.group_id, base, v.generation, prev_gen, skipped, start, ts, cst if v.members else None,
            None if prev_meta_ts is None else ts - prev_meta_ts, len(prev.members), len(v.members),
            joined, left, static, v.leader, prev.leader, ptype, v.protocol, prev.protocol, known, moved,
            tuple(gained), tuple(lost), not v.members, cause, pos[0], pos[1],
        )
    )  # fmt: skip


def tell_members(w: GroupFold, v: GroupMetadataValue, base: str, ts: int, pos: tuple[int, int]) -> None:
    """One ``group_member`` row per member of the record."""
    consumer = (v.protocol_type or None) == _expiry.CONSUMER_PROTOCOL_TYPE
    events = w.events
    for m in v.members:
        events.append(
            _new_member_event(
                (
                    w.group_id, f"{base}:{m.member_id}", v.generation, m.member_id, m.group_instance_id,
                    m.client_id, m.client_host, m.session_timeout, m.effective_rebalance_timeout,
                    m.member_id == v.leader, v.protocol,
                    sorted_topics_of(m.subscription) if consumer else None,
                    sorted_assigned_of(m.assignment) if consumer else None,
                    ts, pos[0], pos[1], None, None, None,
                )
            )
        )  # fmt: skip
