"""What a group-metadata record tells of the rebalance that wrote it (spec §7.3).

Rules:
- Members are matched across records by identity: the static member's ``group.instance.id``
  (KIP-345: it keeps its identity across member ids), else the member id.
- Partition movement is known only for a consumer group whose every member's assignment parses
  (``ConsumerProtocol``, spec §5); otherwise ``assignment_known`` is False and nothing is guessed.
- A rebalance's start (the group leaving Stable or Empty for PreparingRebalance) is not logged.
  ``start_window`` gives the interval it must lie in, from Kafka's rules only, plus a point
  estimate and the name of the method that gave it (an estimate is never a bound):
  - it began after the previous group record (``earliest`` >= that record's time) and before
    the join phase ended (``latest`` <= end of join: the record's ``current_state_timestamp``);
  - a plain join phase (``DelayedJoin``) lasts at most the group's rebalance timeout, the
    largest of its members' (members before or after: a departed member counted when it began);
    this bound is dropped when generations were skipped (several join phases) or when the
    group before had static members (``GroupCoordinator.onCompleteJoin``: when no member
    rejoined, unjoined static members are kept and the join phase re-armed);
  - from Empty (``InitialDelayedJoin``, KIP-134) the join phase lasts at least
    ``group.initial.rebalance.delay.ms`` (it never completes early); it re-arms by one delay
    only when a new member joined during the previous one *and* the group is at generation 0
    (``addMemberAndRebalance`` sets ``newMemberAdded`` only then), so a group coming back from
    Empty at generation > 0 started exactly one delay before its join ended; a new group's join
    lasts at most n delays (n members) and never more than max(delay, rebalance timeout).
    The delay is the replay setting ``initial_rebalance_delay_ms`` (the broker's default, 3 s,
    unless configured): the log does not store the broker's setting. With 0 the join from Empty
    is a plain join phase (Kafka 0.10; at most the rebalance timeout).
  - Offset commits do NOT bound the start: the classic group accepts commits of the current
    generation in PreparingRebalance as in Stable (``ClassicGroup.validateOffsetCommit`` and
    ``GroupCoordinator.handleCommitOffsets`` refuse them only in CompletingRebalance), so a
    commit after T does not show the group was still Stable at T. They are evidence for the
    estimate only: a departed member's last commit (its partitions, from the previous record's
    assignment) and, when its join ended more than a session timeout later, that commit plus
    the session timeout (a commit resets the session timer:
    ``completeAndScheduleNextHeartbeatExpiration``).
- The last rebalance's member maps are cached on the fold (``rb_cache``), keyed by the members
  tuple they describe: the next record's "before" is this record's "after".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from coordinator_core import expiry as _expiry
from coordinator_core.codec.records import GroupMetadataValue, MemberMetadata
from coordinator_core.codec.wire import fast_constructor
from coordinator_core.events import Event, GroupMember, Rebalance
from coordinator_core.loader.snapshot import (
    OffsetState,
    TopicPartition,
    assigned_of,
    member_identity,
    sorted_assigned_of,
    sorted_topics_of,
)
from coordinator_core.settings import DEFAULT_INITIAL_REBALANCE_DELAY_MS, Coordinator

# slot-filling constructors of the frozen event classes (``wire.fast_constructor``)
_new_rebalance = fast_constructor(Rebalance)
_new_member_event = fast_constructor(GroupMember)

#: ``group.initial.rebalance.delay.ms`` default (KIP-134, Kafka 0.11+)
GROUP_INITIAL_REBALANCE_DELAY_MS = DEFAULT_INITIAL_REBALANCE_DELAY_MS
#: the Java consumer's ``heartbeat.interval.ms`` default: members still in the group learn of a
#: rebalance at their next heartbeat (``REBALANCE_IN_PROGRESS``) and rejoin (estimates only)
CONSUMER_HEARTBEAT_INTERVAL_MS = 3_000

# estimate methods (the ``start_method`` / ``estimate_method`` column)
INITIAL_DELAY = "initial_delay"  # from Empty at generation > 0: exactly one delay (a bound, not a guess)
INITIAL_DELAY_REARMED = "initial_delay_rearmed"  # a new group whose members joined together: two delays
DEPARTED_LAST_COMMIT = "departed_last_commit"  # a departed member left right after its last commit
DEPARTED_SESSION_TIMEOUT = "departed_session_timeout"  # a departed member's session expired after its last commit
MEMBERS_REJOIN = "members_rejoin"  # no evidence: the members rejoined within a heartbeat interval

Assignments = dict[str, frozenset[TopicPartition] | None]
#: the last rebalance's member maps, keyed by the members tuple they describe (``rebalance_event``)
RebalanceCache = tuple[tuple[MemberMetadata, ...], dict[str, MemberMetadata], Assignments | None]


class Fold(Protocol):
    """What the rebalance rows read of the group's fold (``group_fold.GroupFold`` is the one):
    the fold's module builds on this one, so this one knows the fold by this interface."""

    group_id: str
    coordinator: Coordinator
    initial_delay: int
    offsets: dict[TopicPartition, OffsetState]
    events: list[Event]
    rb_cache: RebalanceCache | None


class Before(NamedTuple):
    """The group as the previous group record left it (what a rebalance is told against)."""

    members: tuple[MemberMetadata, ...]
    leader: str | None
    protocol: str | None
    protocol_type: str | None
    metadata_timestamp_ms: int | None


class StartWindow(NamedTuple):
    """Where an inferred rebalance start lies: ``earliest`` <= start <= ``latest`` (None: no
    bound the log shows), and the point ``estimate`` inside with its ``method``."""

    earliest: int | None
    latest: int
    estimate: int
    method: str


def start_window(
    before: Sequence[MemberMetadata],
    after: Sequence[MemberMetadata],
    end_join: int,
    prev_meta_ts: int | None,
    prev_gen: int | None,
    skipped: int,
    departed: Sequence[tuple[int, int]] = (),
    delay: int = GROUP_INITIAL_REBALANCE_DELAY_MS,
    rearm_any_generation: bool = False,
) -> StartWindow:
    """The window of a rebalance start (see the module rules). ``departed``: (last commit time
    since the previous record, session timeout) of each member that left, where known;
    ``rearm_any_generation``: Kafka 4's coordinator (the initial delay re-arms from any Empty)."""
    from_empty = not before and delay > 0
    latest = end_join
    earliest: int | None = None
    if not before and delay == 0:
        if skipped == 0:
            earliest = end_join - max((m.effective_rebalance_timeout for m in after), default=0)
    elif from_empty:
        latest = end_join - delay  # InitialDelayedJoin never completes before its delay
        if skipped == 0:
            if prev_gen == 0 or rearm_any_generation:
                longest = max((m.effective_rebalance_timeout for m in after), default=0)
                span = min(delay * max(len(after), 1), max(delay, longest))
            else:
                span = delay
            earliest = end_join - span
    elif skipped == 0 and not any(m.group_instance_id is not None for m in before):
        earliest = end_join - max(m.effective_rebalance_timeout for m in (*before, *after))
    if prev_meta_ts is not None:
        earliest = prev_meta_ts if earliest is None or earliest < prev_meta_ts else earliest
        if latest < prev_meta_ts:
            latest = prev_meta_ts  # a broker delay shorter than the default: stay after the record
    if earliest is not None and earliest > latest:
        earliest = latest
    if not before:
        rearmed = (prev_gen == 0 or rearm_any_generation) and len(after) > 1
        estimate, method = end_join - delay * (2 if rearmed else 1), INITIAL_DELAY_REARMED if rearmed else INITIAL_DELAY
    else:
        estimate, method = end_join - CONSUMER_HEARTBEAT_INTERVAL_MS, MEMBERS_REJOIN
        first: tuple[int, str] | None = None
        for last_commit, session_timeout in departed:
            if end_join - last_commit >= session_timeout:
                cand = (last_commit + session_timeout, DEPARTED_SESSION_TIMEOUT)
            else:
                cand = (last_commit, DEPARTED_LAST_COMMIT)
            if first is None or cand[0] < first[0]:
                first = cand
        if first is not None:
            estimate, method = first
    if estimate > latest:
        estimate = latest
    if earliest is not None and estimate < earliest:
        estimate = earliest
    return StartWindow(earliest, latest, estimate, method)


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


def window_of(w: Fold, v: GroupMetadataValue, prev: Before, prev_gen: int | None, end_join: int) -> StartWindow:
    """The start window of the rebalance that wrote ``v`` (before the fold takes the record)."""
    skipped = 1 if prev_gen is None else max(0, v.generation - prev_gen - 1)
    departed: list[tuple[int, int]] = []
    if prev.members and prev.protocol_type == _expiry.CONSUMER_PROTOCOL_TYPE:
        after = {member_identity(m) for m in v.members}
        since = prev.metadata_timestamp_ms
        for m in prev.members:
            if member_identity(m) in after:
                continue
            last = -1
            for tp in assigned_of(m.assignment) or ():
                entry = w.offsets.get(tp)
                if entry is not None and entry[3] > last:
                    last = entry[3]
            if last >= 0 and (since is None or last >= since):
                departed.append((last, m.session_timeout))
    return start_window(
        prev.members, v.members, end_join, prev.metadata_timestamp_ms, prev_gen, skipped, departed,
        delay=w.initial_delay, rearm_any_generation=w.coordinator is Coordinator.NEW,
    )  # fmt: skip


def rebalance_event(
    w: Fold,
    v: GroupMetadataValue,
    base: str,
    ts: int,
    pos: tuple[int, int],
    prev_gen: int | None,
    prev: Before,
    cause: str,
    window: StartWindow | None,
) -> Rebalance:
    """The ``rebalance`` row of the group record ``v`` (updates the fold's ``rb_cache``);
    ``window``: the inferred start's window (``window_of``), None when the start is not inferred."""
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
    start: int | None
    earliest: int | None = None
    latest: int | None = None
    method: str | None = None
    if cause == "first_record":
        start = None
    elif cause == "static_member_rejoined" or window is None:
        start = ts  # updateStaticMemberAndRebalance: the record is written when it happens
    else:
        start, earliest, latest, method = window.estimate, window.earliest, window.latest, window.method
    skipped: int | None = None
    if prev_gen is not None and v.generation >= prev_gen:
        skipped = max(0, v.generation - prev_gen - 1)
    prev_meta_ts = prev.metadata_timestamp_ms
    return _new_rebalance(  # type: ignore[no-any-return]
        (
            w.group_id, base, v.generation, prev_gen, skipped, start, ts, cst if v.members else None,
            None if prev_meta_ts is None else ts - prev_meta_ts, len(prev.members), len(v.members),
            joined, left, static, v.leader, prev.leader, ptype, v.protocol, prev.protocol, known, moved,
            tuple(gained), tuple(lost), not v.members, cause, pos[0], pos[1], earliest, latest, method,
        )
    )  # fmt: skip


def tell_members(w: Fold, v: GroupMetadataValue, base: str, ts: int, pos: tuple[int, int]) -> None:
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
                    ts, pos[0], pos[1], None, None, None, None, None, None,
                )
            )
        )  # fmt: skip
