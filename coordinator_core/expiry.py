"""Offset expiry and group death: the decider (spec §8).

Rules:
- A decider *returns* what Kafka would write (offset tombstones, a group tombstone); it never
  changes a snapshot. ``replay`` applies the plan through the same paths as logged tombstones.
- Time is an argument (``now_ms``). Every removal carries its *computed* due time (base +
  retention, or the explicit v1 ``expire_timestamp``), so evaluating at an earlier time and
  again later yields the same removals as evaluating once at the end (split invariance).
- Which offsets are eligible depends on the group situation and the selected rule set
  (``GroupMetadata.removeExpiredOffsets``, ``ClassicGroup.offsetExpirationCondition``,
  ``OffsetExpirationConditionImpl``):

  | rules | Empty + protocol_type | Stable consumer group | no protocol_type | other |
  |---|---|---|---|---|
  | current (KAFKA-13636, 2.8.2/3.0.1/3.1.1/3.2+) | all, base current_state_timestamp (else commit) | unsubscribed topics, base commit | all, base commit | none |
  | 2.4-3.1 | same | consumer rule in any non-Empty state | same | none |
  | 2.1-2.3 | same | none | same | none |
  | pre-2.1 | every offset in any state: expires when ``expire_timestamp < now`` (strict); a commit without one gets ``commit_timestamp + retention`` | | | |

  A replay only materialises Empty, Stable and Dead (PreparingRebalance/CompletingRebalance are
  never persisted), so "2.4-3.1" predicts the same as "current" here; it differs on a live broker.
  An explicit ``expire_timestamp`` (v1 value) replaces ``base + retention`` for an eligible
  offset only; it never makes an ineligible offset expire (except under pre-2.1).
- ``subscribed_topics`` (consumer protocol, each member's subscription parsed as v0) unknown
  means nothing of a Stable consumer group expires.
- A Kafka 4 consumer group (``group_type`` ``consumer``, KIP-848; ``coordinator_core.
  consumer_group``) follows its own rule whatever the rule set: in every state but Dead, the
  offsets of topics it subscribes to (members' names and resolved regexes) never expire, the
  others at ``commit_timestamp + retention`` (never the Empty-state base of classic groups).
  A Kafka 4 streams group (KIP-1071) follows the same rule, subscribed to its topology's source
  and repartition source topics while not Empty, to nothing while Empty. A share group
  (KIP-932) never expires and never dies by the cleanup (``ShareGroup.shouldExpire`` is false).
- Group death (``cleanupGroupMetadata``): after the removal, an Empty group without offsets
  becomes Dead; the old coordinator writes a group tombstone only when ``generation > 0``. A
  group the log itself left Empty without offsets dies at the first cleanup strictly after
  that instant (records of the same instant, such as DeleteGroups' batch, are applied first);
  its computed death time is the instant it became so. A
  group that is already Dead (a logged group tombstone, offsets kept) expires its offsets like
  a group without protocol type and does not die again.
- The broker acts only in its periodic cleanup (``offsets.retention.check.interval.ms``, 10
  minutes by default): something due at ``d`` is removed by the first cleanup in
  ``[d, d + interval)``, and the broker writes a tombstone for it. So *due is not dead*: as of
  a time ``T`` in that window (``cleanup_window``) the removal is a forecast, the offsets are
  still held and a group whose offsets are due is still Empty (``exists``); only once the
  window has passed (``T >= d + interval``) does the as-of view drop them (still a forecast
  until a tombstone confirms it). ``judgment_ms`` is the time
  after which a record of the group that is not that tombstone shows it was NOT removed
  (``due + interval + CLEANUP_SLACK_MS``: the new coordinator re-arms its timer after each run,
  so runs drift by their own duration). The replay settles such a prediction as contradicted
  (``settled``: ``{(topic, partition): due}``, ``settled_death_ms``): the broker kept it, so
  it is never judged again and never removed, until the group's state gives it another due time.
- Pending transactional offsets (KIP-98, ``GroupView.pending_txn``: offsets of transactions
  whose COMMIT/ABORT marker has not been replayed) block the group's death under both
  coordinators (Kafka 3: ``GroupMetadata.hasOffsets`` counts ``pendingTransactionalOffsetCommits``;
  Kafka 4: ``OffsetMetadataManager.cleanupExpiredOffsets`` returns false while the group has open
  transactions). Kafka 4 also keeps an expired offset of a partition with a pending transactional
  offset (``hasPendingTransactionalOffsets``); Kafka 3's ``getExpiredOffsets`` skips only the
  in-flight plain commits (``pendingOffsetCommits``), which a log replay never sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from coordinator_core.codec.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from coordinator_core.settings import DEFAULT_CLEANUP_INTERVAL_MS as DEFAULT_CLEANUP_INTERVAL_MS
from coordinator_core.settings import Coordinator, ExpiryRules, parse_choice
from coordinator_core.state import GroupState

RULE_SETS: tuple[str, ...] = tuple(r.value for r in ExpiryRules)

#: Which group coordinator's deletion rule to predict (spec §4.3, §8.3): the old Scala
#: ``GroupCoordinator`` writes a group tombstone only when ``generation > 0``; the new
#: ``group-coordinator`` module (Kafka 4.0's only one) writes it for any Empty classic group.
COORDINATORS: tuple[str, ...] = (Coordinator.OLD.value, Coordinator.NEW.value)
#: What the replay accepts: ``auto`` takes ``new`` for a group whose own records show the new
#: coordinator wrote them (a generation-0 group-metadata record: the empty-group record Kafka 4
#: writes when a classic group is created), else ``old``.
REPLAY_COORDINATORS: tuple[str, ...] = tuple(c.value for c in Coordinator)
#: The one default of the whole project for reading a log (config, CLI, replay API) ...
DEFAULT_COORDINATOR = Coordinator.AUTO
#: ... and for writing a sample cluster's: the generator, ``offsetlake generate`` and the
#: quickstart model Kafka 4's coordinator, the only one in Kafka 4.0+ (the protocol scenarios,
#: the book's walkthroughs, keep the classic coordinator they describe).
SIMULATED_COORDINATOR = Coordinator.NEW
#: How late a cleanup run may be before its absence counts as evidence (timer drift, a busy
#: broker): a minute, or half the interval when that is shorter.
CLEANUP_SLACK_MS = 60_000

CONSUMER_PROTOCOL_TYPE = "consumer"

# enum members bound once (a class attribute lookup on an Enum is not free)
_DEAD = GroupState.DEAD
_EMPTY = GroupState.EMPTY
_STABLE = GroupState.STABLE

_NEVER = None

#: One stored offset: ``(value, log_partition, log_offset, record_timestamp_ms)``.
OffsetState = tuple[OffsetCommitValue, int, int, int]


class GroupView(Protocol):
    """What the decider reads (a ``GroupSnapshot`` or the replay's working state)."""

    @property
    def group_id(self) -> str: ...
    @property
    def state(self) -> GroupState: ...
    @property
    def generation(self) -> int: ...
    @property
    def protocol_type(self) -> str | None: ...
    @property
    def current_state_timestamp(self) -> int | None: ...
    @property
    def state_timestamp_ms(self) -> int | None: ...
    @property
    def subscribed_topics(self) -> frozenset[str] | None: ...
    @property
    def offsets(self) -> Mapping[tuple[str, int], OffsetState]: ...
    @property
    def last_offset_removal_ms(self) -> int | None: ...
    @property
    def group_type(self) -> str: ...
    @property
    def pending_txn(self) -> Mapping[int, Mapping[tuple[str, int], OffsetState]]: ...


def pending_partitions(group: GroupView) -> frozenset[tuple[str, int]]:
    """The (topic, partition)s with a pending transactional offset of any producer."""
    return frozenset(tp for pending in group.pending_txn.values() for tp in pending)


@dataclass(frozen=True, slots=True)
class ExpiryPlan:
    """What Kafka's cleanup would do at ``now_ms``.

    Attributes:
        expired: ``((topic, partition), due_ms)`` for each offset to remove, in key order.
        group_dies: the group becomes Dead (Empty and no offsets left).
        death_ms: computed time of death (when it became Empty without offsets).
        group_tombstone: Kafka writes a GroupMetadata tombstone (old coordinator: generation > 0).
    """

    expired: tuple[tuple[tuple[str, int], int], ...]
    group_dies: bool
    death_ms: int | None
    group_tombstone: bool


def check_rules(rules: str) -> ExpiryRules:
    """``rules`` as an ``ExpiryRules`` if it names a rule set, else raise ``ValueError``."""
    return parse_choice(ExpiryRules, rules, "expiry rule set")


# Situations: how every offset of the group is judged.
_NONE = 0  # nothing expires
_ALL_BASE_STATE = 1  # every offset, base = current_state_timestamp (or commit)
_ALL_BASE_COMMIT = 2  # every offset, base = commit_timestamp
_UNSUBSCRIBED = 3  # offsets of topics no member subscribes to, base = commit
_PRE_21 = 4  # every offset, expire_timestamp (or commit + retention), strict
SIT_NONE = _NONE
SIT_UNSUBSCRIBED = _UNSUBSCRIBED
SIT_ALL_BASE_COMMIT = _ALL_BASE_COMMIT


_PRE_2_1 = ExpiryRules.PRE_2_1
_CURRENT = ExpiryRules.CURRENT
_V2_4 = ExpiryRules.V2_4_TO_3_1


def situation(group: GroupView, rules: ExpiryRules) -> int:
    """Classify the group for the expiry rules (an opaque small int used by ``due_ms``)."""
    state = group.state
    kind = group.group_type
    if (kind == "consumer" or kind == "streams") and state is not _DEAD:
        # Kafka 4 consumer group (KIP-848) or streams group (KIP-1071): its own rule in every
        # state, whatever rule set the classic groups follow ({Consumer,Streams}Group.
        # offsetExpirationCondition + isSubscribedToTopic; a streams group subscribes to nothing
        # while Empty)
        return _UNSUBSCRIBED
    if kind == "share" and state is not _DEAD:
        return _NONE  # a share group holds no offsets here and never expires (shouldExpire false)
    if rules == _PRE_2_1:
        return _PRE_21
    ptype = group.protocol_type
    if state is _DEAD or not ptype:
        # no protocol type: a simple group; a Dead group keeping offsets loads as one
        return _ALL_BASE_COMMIT
    if state is _EMPTY:
        return _ALL_BASE_STATE
    if ptype == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None:
        if rules == _CURRENT and state is _STABLE:
            return _UNSUBSCRIBED
        if rules == _V2_4:
            return _UNSUBSCRIBED
    return _NONE


def due_ms(value: OffsetCommitValue, topic: str, sit: int, retention_ms: int, group: GroupView) -> int | None:
    """The time at which one offset expires in situation ``sit``, or None (never, as things stand)."""
    if sit == _NONE:
        return _NEVER
    exp = value.expire_timestamp
    if sit == _PRE_21:
        # GroupMetadata@2.0: expired when expireTimestamp < now (strict)
        return (exp if exp is not None else value.commit_timestamp + retention_ms) + 1
    if sit == _UNSUBSCRIBED:
        subs = group.subscribed_topics
        if subs is not None and topic in subs:
            return _NEVER
    if exp is not None:
        return exp
    if sit == _ALL_BASE_STATE:
        cst = group.current_state_timestamp
        base = cst if cst is not None else value.commit_timestamp
    else:
        base = value.commit_timestamp
    return base + retention_ms


def min_due_ms(
    sit: int,
    group: GroupView,
    retention_ms: int,
    min_commit_timestamp_ms: int | None,
    min_expire_timestamp_ms: int | None,
) -> int | None:
    """A lower bound of ``due_ms`` over a set of commits known only by two aggregates.

    ``min_commit_timestamp_ms`` is the least commit timestamp of the commits without an explicit
    expire timestamp, ``min_expire_timestamp_ms`` the least explicit one (None: no such commit).
    Conservative where ``due_ms`` looks at the topic (``_UNSUBSCRIBED``: every topic is taken as
    unsubscribed) and under pre-2.1 (the strict ``+ 1`` is left out). None: none can expire.
    """
    if sit == _NONE:
        return _NEVER
    best: int | None = min_expire_timestamp_ms
    if min_commit_timestamp_ms is not None:
        cst = group.current_state_timestamp
        base = cst if sit == _ALL_BASE_STATE and cst is not None else min_commit_timestamp_ms
        due = base + retention_ms
        if best is None or due < best:
            best = due
    return best


def death_base(group: GroupView) -> int | None:
    became = group.state_timestamp_ms
    removed = group.last_offset_removal_ms
    if became is None:
        return removed
    if removed is None:
        return became
    return max(became, removed)


def check_coordinator(coordinator: str, *, allow_auto: bool = False) -> Coordinator:
    """``coordinator`` as a ``Coordinator`` if it is ``old`` or ``new`` (or ``auto`` where
    allowed), else raise ``ValueError``."""
    allowed = REPLAY_COORDINATORS if allow_auto else COORDINATORS
    if coordinator not in allowed:
        raise ValueError(f"unknown coordinator {coordinator!r}; choose one of {', '.join(allowed)}")
    return Coordinator(coordinator)


def judgment_delay_ms(cleanup_interval_ms: int) -> int:
    """From a due time to the moment a record that is not its tombstone contradicts it."""
    return cleanup_interval_ms + min(CLEANUP_SLACK_MS, cleanup_interval_ms // 2)


def cleanup_window(effective_due: int, cleanup_interval_ms: int) -> tuple[int, int]:
    """When the broker removes something due at ``effective_due``: its next cleanup of the
    group's partition, in ``[due, due + interval]`` (the tick's phase unknown). Until a tombstone
    confirms the removal it is a forecast with this window; the group keeps what is due (an
    Empty group whose offsets are due is Empty, not Dead) until the window has passed."""
    return effective_due, effective_due + cleanup_interval_ms


def death_window(death_ms: int, since_ms: int | None, cleanup_interval_ms: int, *, strict: bool) -> tuple[int, int]:
    """The cleanup window of a group death computed at ``death_ms`` (``ExpiryPlan.death_ms``;
    not before the group entered its current situation, ``since_ms``): the cleanup that removes
    its last due offsets, or, for a group the log itself left Empty without offsets
    (``strict``), the first one strictly after."""
    death = death_ms if since_ms is None or since_ms <= death_ms else since_ms
    return cleanup_window(death + 1 if strict else death, cleanup_interval_ms)


def plan_expiry(
    group: GroupView,
    now_ms: int,
    retention_ms: int,
    rules: ExpiryRules = ExpiryRules.CURRENT,
    coordinator: Coordinator = Coordinator.OLD,
    settled: Mapping[tuple[str, int], int] | None = None,
    settled_death_ms: int | None = None,
) -> ExpiryPlan:
    """Decide what Kafka's cleanup would remove at ``now_ms``.

    Args:
        group: a snapshot (or the replay's working state).
        now_ms: the cleanup time.
        retention_ms: ``offsets.retention.minutes`` in ms.
        rules: one of ``RULE_SETS``.
        coordinator: ``old`` (group tombstone only when generation > 0) or ``new`` (always).
        settled: predictions the log contradicted (``{tp: due}``): those offsets stay.
        settled_death_ms: a death the log contradicted: the group does not die at that time.

    Returns:
        The plan; empty when nothing is due.
    """
    rules = check_rules(rules)
    coordinator = check_coordinator(coordinator)
    sit = situation(group, rules)
    expired: list[tuple[tuple[str, int], int]] = []
    offsets = group.offsets
    open_txn = bool(group.pending_txn)
    # Kafka 4 keeps an offset while its partition has a pending transactional offset
    blocked = pending_partitions(group) if open_txn and coordinator == Coordinator.NEW else frozenset()
    if sit != _NONE:
        for tp in sorted(offsets):
            if tp in blocked:
                continue
            due = due_ms(offsets[tp][0], tp[0], sit, retention_ms, group)
            if due is not None and due <= now_ms and (settled is None or settled.get(tp) != due):
                expired.append((tp, due))
    # an open transaction keeps the group (hasOffsets / cleanupExpiredOffsets)
    dies = group.state is _EMPTY and len(expired) == len(offsets) and not open_txn and group.group_type != "share"
    death_ms: int | None = None
    if dies:
        base = death_base(group)
        dues = [d for _, d in expired]
        if base is not None:
            dues.append(base)
        death_ms = max(dues) if dues else now_ms
        if death_ms > now_ms:  # became Empty without offsets only after now (as_of in the past)
            dies, death_ms = False, None
        elif not expired and base is not None and base >= now_ms:
            # the log made it Empty without offsets at this very instant (e.g. DeleteGroups writes
            # the offset tombstones and the group tombstone in one batch): the cleanup task runs
            # strictly later, so records of the same instant are applied first
            dies, death_ms = False, None
    if dies and death_ms is not None and death_ms == settled_death_ms:
        dies, death_ms = False, None
    tombstone = dies and (coordinator == Coordinator.NEW or group.generation > 0)
    return ExpiryPlan(tuple(expired), dies, death_ms, tombstone)


def next_expiry_ms(
    group: GroupView,
    retention_ms: int | None,
    rules: ExpiryRules = ExpiryRules.CURRENT,
    settled: Mapping[tuple[str, int], int] | None = None,
    settled_death_ms: int | None = None,
) -> int | None:
    """The earliest time anything in the group can expire (an offset, or the group's death).

    Streaming sets its event-time timer from this. None means nothing can expire until a new
    record changes the group (or ``retention_ms`` is None). Settled (contradicted) predictions
    are left out: the broker kept them.
    """
    rules = check_rules(rules)
    if retention_ms is None or (group.group_type == "share" and group.state is not _DEAD):
        return None  # a share group never expires
    if group.state is _EMPTY and not group.offsets:
        if group.pending_txn:
            return None  # an open transaction keeps the group
        base = death_base(group)
        death = base if base is not None else -1
        if settled_death_ms is not None and death == settled_death_ms:
            return None
        return death + 1  # the first cleanup strictly after
    sit = situation(group, rules)
    if sit == _NONE:
        return None
    best: int | None = None
    for tp, entry in group.offsets.items():
        due = due_ms(entry[0], tp[0], sit, retention_ms, group)
        if due is not None and (best is None or due < best) and (settled is None or settled.get(tp) != due):
            best = due
    return best


def expire_offsets(
    snapshot: GroupView,
    now_ms: int,
    retention_ms: int,
    rules: ExpiryRules = ExpiryRules.CURRENT,
    coordinator: Coordinator = Coordinator.OLD,
) -> list[Record]:
    """The tombstones Kafka would write at ``now_ms``: offset tombstones in key order, then the
    group tombstone if the group dies (old coordinator: only with ``generation > 0``,
    ``cleanupGroupMetadata``; new coordinator: always, ``maybeDeleteGroup``)."""
    plan = plan_expiry(snapshot, now_ms, retention_ms, rules, coordinator)
    out = [Record(OffsetCommitKey(snapshot.group_id, t, p), None) for (t, p), _ in plan.expired]
    if plan.group_tombstone:
        out.append(Record(GroupMetadataKey(snapshot.group_id), None))
    return out


def offset_due_times(
    group: GroupView, retention_ms: int, rules: ExpiryRules = ExpiryRules.CURRENT
) -> dict[tuple[str, int], int | None]:
    """Each held offset's expiry time as the group stands (None = cannot expire as things stand).

    The same ``due_ms`` the cleanup uses, for forecasts (``offsets_at_risk``, ``inspect``): a
    later record (a member leaving, a new commit) can change it.
    """
    rules = check_rules(rules)
    sit = situation(group, rules)
    return {tp: due_ms(entry[0], tp[0], sit, retention_ms, group) for tp, entry in sorted(group.offsets.items())}


class BulkFold(Protocol):
    """What the commit-run fast path (``coordinator_core.loader.commit_runs``) may ask of a replay's
    working state (``coordinator_core.loader.group_fold.GroupFold``), and nothing more.

    A run of offset commits may be applied from its survivors only when no expiry judgment can
    fall inside it (see ``commit_runs``): that question is the decider's, so the fold answers it
    (``quiet_through``) with its own state, and the run path never reads or writes that state.
    """

    @property
    def emits_commit_events(self) -> bool:
        """Whether every commit is told (``offset_commit`` events): then no run is compressed."""
        ...

    @property
    def last_position(self) -> tuple[int, int] | None:
        """The last applied (partition, offset) when the call began."""
        ...

    def quiet_through(
        self, t_max: int, min_commit_timestamp_ms: int | None, min_expire_timestamp_ms: int | None
    ) -> bool:
        """True when nothing of the group, nor any commit of a run known by these aggregates, can
        be due or judged up to ``t_max`` (may tighten the fold's own lower bounds)."""
        ...

    def skip_commits(self, n: int) -> None:
        """Count ``n`` commits of a compressed run applied then replaced (never seen one by one)."""
        ...
