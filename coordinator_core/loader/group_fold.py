"""A group's working state during one replay call: the loader fold (spec §7, §8).

Rules:
- ``GroupFold`` is a mutable copy of a ``GroupSnapshot``, private to one replay call; ``freeze``
  makes the next snapshot. The record handlers (``coordinator_core.loader.record_handlers``) change it;
  every state change goes through ``transition`` (Kafka's ``ClassicGroupState`` table,
  ``coordinator_core.state``) and is told as an event of the kinds asked for.
- Restoring: a snapshot is the group *as of* its call's ``as_of_ms``; the fold restores what
  that view's final cleanup removed (``predicted_removed``, ``predicted_death_restore``) and
  remembers the forecasts told (``emitted_exp``, ``emitted_death``) to confirm or withdraw them.
- Expiry judgment (``coordinator_core.expiry`` decides, this class keeps the books): a prediction
  the log shows the broker did not carry out (``due + grace`` passed without its tombstone) is
  settled as contradicted (``judge``, ``contradict_by``); ``next_check`` is a lower bound of the
  next time that can happen (-1: unknown), so the loop judges only when it may matter; ``finish``
  is done by ``coordinator_core.loader.as_of_view`` (the view as of ``as_of``).
- ``quiet_through``/``skip_commits``/``emits_commit_events`` are the whole interface the
  commit-run bulk path (``coordinator_core.loader.commit_runs``, typed by ``expiry.BulkFold``) uses.
- Coordinator ``auto`` resolves per group: ``new`` once the group's records show Kafka 4 wrote
  them (``new_coordinator_seen``), else ``old``.
- Transactions (KIP-98, ``coordinator_core.loader.transactions``): ``pending_txn`` (open ones, by producer
  id), ``txn_offsets`` (who committed each held offset); a group with pending offsets cannot die.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from coordinator_core import expiry as _expiry
from coordinator_core.codec.records import OffsetCommitValue
from coordinator_core.codec.wire import fast_constructor
from coordinator_core.events import Event, GroupLifecycle, OffsetExpiration, ReplayStats, StateTransition
from coordinator_core.loader.modern_folds import restore_modern
from coordinator_core.loader.rebalance import RebalanceCache, StartWindow
from coordinator_core.loader.snapshot import (
    EMPTY_OFFSETS,
    EMPTY_PENDING,
    EMPTY_PREDICTED,
    EMPTY_SETTLED,
    EMPTY_TXN_OFFSETS,
    DeathRestore,
    GroupSnapshot,
    OffsetState,
    PredictedExpiry,
    TopicPartition,
    new_group_snapshot,
)
from coordinator_core.modern.consumer.fold import ConsumerGroupFold
from coordinator_core.settings import Coordinator, ReplaySettings
from coordinator_core.state import GroupState
from coordinator_core.state import transition as _state_transition

# slot-filling constructor of the frozen event class (``wire.fast_constructor``): the same
# objects at a fraction of a dataclass ``__init__`` (events are built by the hundred thousand)
new_transition = fast_constructor(StateTransition)

_E = GroupState.EMPTY
_D = GroupState.DEAD
_OLD = Coordinator.OLD
_NEW = Coordinator.NEW
_AUTO = Coordinator.AUTO

STATE_VALUE: dict[GroupState, str] = {s: s.value for s in GroupState}

_SIT_NONE = _expiry.SIT_NONE
_SIT_UNSUBSCRIBED = _expiry.SIT_UNSUBSCRIBED
_FAR = 1 << 62

ALL_EVENT_KINDS: frozenset[str] = frozenset(
    {"state_transition", "rebalance", "group_member", "offset_commit", "offset_expiration", "group_lifecycle"}
)


class GroupFold:
    """Mutable working copy of a snapshot, private to one ``replay`` call (see the module rules)."""

    __slots__ = (
        "commit_events", "confirmed_death", "consumer", "coordinator", "coordinator_setting", "created_by_commit",
        "current_state_timestamp", "emitted_death", "emitted_exp", "events", "exists", "first_position",
        "generation", "grace", "group_id", "has_metadata", "initial_delay", "interval", "kinds", "last_offset_removal_ms",
        "last_position", "last_timestamp_ms", "leader", "log_start", "members", "metadata_timestamp_ms", "modern",
        "new_coordinator_seen", "next_check", "offsets", "other_type", "pending_contradictions", "pending_txn",
        "predicted_death_ms",
        "predicted_death_restore", "predicted_expired", "predicted_removed", "predictions_contradicted",
        "protocol", "protocol_type", "rb_cache", "records_applied", "retention_ms", "rules", "settled",
        "settled_death_ms", "sit", "situation_since_ms", "skipped_commits", "state", "state_timestamp_ms",
        "stats", "subscribed_topics", "tombstone_run", "txn_offsets", "type_marks", "unsupported_records",
    )  # fmt: skip

    def __init__(
        self, s: GroupSnapshot, settings: ReplaySettings, kinds: frozenset[str], log_start: bool = False
    ) -> None:  # long: one assignment per slot, restoring the fold behind the snapshot's view
        coordinator = settings.coordinator
        retention_ms = settings.retention_ms
        self.log_start = log_start
        self.coordinator_setting = coordinator
        self.new_coordinator_seen = s.new_coordinator_seen
        self.coordinator = coordinator if coordinator != _AUTO else (_NEW if s.new_coordinator_seen else _OLD)
        self.grace = _expiry.judgment_delay_ms(settings.cleanup_interval_ms)
        self.interval = settings.cleanup_interval_ms
        self.initial_delay = settings.initial_rebalance_delay_ms
        self.group_id = s.group_id
        self.state = s.state
        self.exists = s.exists
        self.generation = s.generation
        self.protocol_type = s.protocol_type
        self.protocol = s.protocol
        self.leader = s.leader
        self.current_state_timestamp = s.current_state_timestamp
        self.members = s.members
        self.has_metadata = s.has_metadata
        self.metadata_timestamp_ms = s.metadata_timestamp_ms
        self.state_timestamp_ms = s.state_timestamp_ms
        self.subscribed_topics = s.subscribed_topics
        self.offsets: dict[TopicPartition, OffsetState] = dict(s.offsets)
        self.last_position = s.last_position
        self.last_timestamp_ms = s.last_timestamp_ms
        self.records_applied = s.records_applied
        self.unsupported_records = s.unsupported_records
        self.last_offset_removal_ms = s.last_offset_removal_ms
        # the snapshot is the as-of view: restore the loader fold behind it (what its final
        # cleanup removed), and remember which forecasts it told, to confirm or withdraw them
        self.offsets.update(s.predicted_removed)
        if s.predicted_death_ms is not None and s.predicted_death_restore is not None:
            self.state = _E
            self.exists = True
            (self.state_timestamp_ms, self.protocol_type, self.protocol, self.leader, self.has_metadata) = (
                s.predicted_death_restore
            )
        self.emitted_exp: dict[TopicPartition, PredictedExpiry] = dict(s.predicted_expired)
        self.emitted_death: int | None = s.predicted_death_ms
        self.predicted_expired: dict[TopicPartition, PredictedExpiry] = {}
        self.predicted_removed: dict[TopicPartition, OffsetState] = {}
        self.predicted_death_ms: int | None = None
        self.predicted_death_restore: DeathRestore | None = None
        self.confirmed_death: int | None = None
        self.settled: dict[TopicPartition, int] = dict(s.settled)
        self.settled_death_ms = s.settled_death_ms
        self.situation_since_ms = s.situation_since_ms
        self.first_position = s.first_position
        self.predictions_contradicted = s.predictions_contradicted
        self.pending_contradictions = s.pending_contradictions
        self.created_by_commit = s.created_by_commit
        self.tombstone_run: list[tuple[str, int, int, int, int, int]] = list(s.tombstone_run)
        # Kafka 4 group types: the consumer group's own fold (KIP-848), share/streams seen
        self.consumer = None if s.consumer is None else ConsumerGroupFold(s.group_id, s.consumer)
        self.other_type = s.group_type if s.group_type in ("share", "streams") and s.modern is None else None
        self.modern = restore_modern(s.modern)  # a share or streams group's fold (KIP-932, KIP-1071)
        self.pending_txn: dict[int, dict[TopicPartition, OffsetState]] = {k: dict(p) for k, p in s.pending_txn.items()}
        self.txn_offsets: dict[TopicPartition, int] = dict(s.txn_offsets)
        self.retention_ms = retention_ms
        self.rules = settings.rules
        self.kinds = kinds
        self.commit_events = "offset_commit" in kinds
        self.skipped_commits = 0  # commits of compressed runs this call did not see one by one
        self.events: list[Event] = []
        self.stats = ReplayStats()
        # a lower bound of the next time a record can contradict a prediction (due + grace);
        # -1 = unknown (judge at the next record that is not a tombstone)
        self.next_check: int | None = -1 if retention_ms is not None else None
        self.sit: int | None = None
        # the last rebalance's member maps, keyed by the members tuple they describe: the next
        # record's "before" is this record's "after" (``_rebalance``)
        self.rb_cache: RebalanceCache | None = None
        # (event index, group type): the kind of group the events from that index on are about
        # (``ReplayResult.event_group_types``)
        self.type_marks: list[tuple[int, str]] = [(0, self.group_type)]

    def freeze(self) -> GroupSnapshot:
        # positional, in GroupSnapshot's field order (checked at import: _SNAPSHOT_FIELDS)
        return new_group_snapshot(  # type: ignore[no-any-return]
            (
                self.group_id,
                self.state,
                self.exists,
                self.generation,
                self.protocol_type,
                self.protocol,
                self.leader,
                self.current_state_timestamp,
                self.members,
                self.has_metadata,
                self.metadata_timestamp_ms,
                self.state_timestamp_ms,
                self.subscribed_topics,
                MappingProxyType(self.offsets) if self.offsets else EMPTY_OFFSETS,
                self.last_position,
                self.last_timestamp_ms,
                self.records_applied,
                self.unsupported_records,
                self.last_offset_removal_ms,
                MappingProxyType(self.predicted_expired) if self.predicted_expired else EMPTY_PREDICTED,
                self.predicted_death_ms,
                tuple(self.tombstone_run),
                MappingProxyType(self.predicted_removed) if self.predicted_removed else EMPTY_OFFSETS,
                self.predicted_death_restore,
                MappingProxyType(self.settled) if self.settled else EMPTY_SETTLED,
                self.settled_death_ms,
                self.situation_since_ms,
                self.first_position,
                self.new_coordinator_seen,
                self.predictions_contradicted,
                self.pending_contradictions,
                self.created_by_commit,
                self.group_type,
                None if self.consumer is None else self.consumer.snapshot(),
                MappingProxyType({k: MappingProxyType(p) for k, p in self.pending_txn.items()}) or EMPTY_PENDING,
                MappingProxyType(self.txn_offsets) if self.txn_offsets else EMPTY_TXN_OFFSETS,
                None if self.modern is None else self.modern.snapshot(),
            )
        )

    @property
    def group_type(self) -> str:
        """classic, consumer (a live KIP-848 group), share or streams (records seen)."""
        c = self.consumer
        if c is not None and c.group_type == "consumer":
            return "consumer"
        m = self.modern
        if m is not None and m.exists:
            return m.kind
        return self.other_type or "classic"

    # -- events ------------------------------------------------------------------------------
    def transition(
        self,
        target: GroupState,
        *,
        key: str,
        ts: int | None,
        source: str,
        observed: bool,
        cause: str,
        pos: tuple[int, int] | None,
        generation: int | None = None,
        window: StartWindow | None = None,
    ) -> None:
        frm: GroupState | None = self.state if self.exists else None
        if frm is not None:
            self.state = _state_transition(self.group_id, frm, target)
        else:
            self.state = target
            self.exists = True
        if "state_transition" in self.kinds:
            self.events.append(
                new_transition(
                    (
                        self.group_id,
                        key,
                        None if frm is None else STATE_VALUE[frm],
                        STATE_VALUE[target],
                        self.generation if generation is None else generation,
                        ts,
                        source,
                        observed,
                        cause,
                        None if pos is None else pos[0],
                        None if pos is None else pos[1],
                        None if window is None else window.earliest,
                        None if window is None else window.latest,
                        None if window is None else window.method,
                    )
                )
            )

    def lifecycle(self, event: str, **kw: Any) -> None:
        if "group_lifecycle" in self.kinds:
            self.events.append(GroupLifecycle(self.group_id, event=event, **kw))

    def deleted(
        self,
        key: str,
        status: str,
        cause: str,
        *,
        generation: int | None,
        at: int | None,
        predicted_ms: int | None = None,
        observed_ms: int | None = None,
        group_tombstone: bool = False,
        offsets_remaining: int = 0,
        pos: tuple[int, int] | None = None,
        window: tuple[int, int] | None = None,
    ) -> None:
        """Tell the group's deletion: observed, confirmed, predicted (a forecast: its window) or withdrawn."""
        self.lifecycle(
            "group_deleted",
            event_key=key,
            generation=generation,
            timestamp_ms=at,
            observed=status in ("observed", "confirmed"),
            status=status,
            cause=cause,
            predicted_ms=predicted_ms,
            observed_ms=observed_ms,
            group_tombstone=group_tombstone,
            offsets_remaining=offsets_remaining,
            log_partition=None if pos is None else pos[0],
            log_offset=None if pos is None else pos[1],
            forecast_from_ms=None if window is None else window[0],
            forecast_to_ms=None if window is None else window[1],
        )

    def create(self, ts: int, cause: str, pos: tuple[int, int] | None, key: str) -> None:
        """A new group object (Kafka: ``new GroupMetadata(groupId, Empty, time)``)."""
        self.exists = False
        self.state = _E
        self.generation = 0
        self.protocol_type = None
        self.protocol = None
        self.leader = None
        self.members = ()
        self.has_metadata = False
        self.subscribed_topics = None
        self.current_state_timestamp = ts
        self.state_timestamp_ms = ts
        self.situation_since_ms = ts
        self.settled_death_ms = None
        self.transition(_E, key=key, ts=ts, source="record", observed=False, cause=cause, pos=pos)
        self.lifecycle(
            "group_created",
            event_key=key,
            generation=0,
            timestamp_ms=ts,
            observed=False,
            status="observed",
            cause=cause,
            offsets_remaining=len(self.offsets),
            log_partition=None if pos is None else pos[0],
            log_offset=None if pos is None else pos[1],
        )

    # -- offsets -----------------------------------------------------------------------------
    def effective_due(self, due: int, entry: OffsetState) -> int:
        """When the broker could first act on ``due``: not before the group entered its current
        situation (a cleanup judges the state of its moment). A newer value of the same key does
        not move it: an Empty group's offsets stay due (base: current_state_timestamp) however
        often they are re-committed. Known limit: a key first committed to a group already past
        its due time is taken as due since the situation began, not since that commit."""
        since = self.situation_since_ms
        return due if since is None or since <= due else since

    def offset_due(self, tp: TopicPartition, entry: OffsetState) -> int | None:
        retention = self.retention_ms
        if retention is None:
            return None
        sit = _expiry.situation(self, self.rules)
        return _expiry.due_ms(entry[0], tp[0], sit, retention, self)

    def expiration(
        self,
        tp: TopicPartition,
        off: int,
        cts: int,
        cause: str,
        status: str,
        predicted_ms: int | None,
        observed_ms: int | None,
        pos: tuple[int, int] | None,
        window: tuple[int, int] | None = None,
    ) -> None:
        if "offset_expiration" in self.kinds:
            self.events.append(
                OffsetExpiration(
                    self.group_id,
                    f"{tp[0]}:{tp[1]}:{off}:{cts}",
                    tp[0],
                    tp[1],
                    off,
                    cts,
                    cause,
                    status,
                    predicted_ms,
                    observed_ms,
                    self.rules.value if predicted_ms is not None else None,
                    None if pos is None else pos[0],
                    None if pos is None else pos[1],
                    None if window is None else window[0],
                    None if window is None else window[1],
                )
            )

    def judge(self, ts: int) -> None:
        """Before a record at ``ts``: whatever the rules had due so long ago that the broker's
        cleanup has certainly run since (``due + grace < ts``), and that no tombstone confirmed,
        the broker did not remove. Settle it as contradicted: a tombstone that comes later still
        is another removal (DeleteOffsets, DeleteGroups), not that cleanup's."""
        self.contradict_by(ts - self.grace - 1)
        self.next_check = self.next_judgment()
        self.sit = None

    def contradict_by(self, horizon: int) -> None:
        retention = self.retention_ms
        assert retention is not None
        plan = _expiry.plan_expiry(
            self, horizon, retention, self.rules, self.coordinator, self.settled, self.settled_death_ms
        )
        all_overdue = True
        offsets_only = self.metadata_timestamp_ms is None  # no group record seen yet
        for tp, due in plan.expired:
            if self.effective_due(due, self.offsets[tp]) <= horizon:
                self.settled[tp] = due
                if offsets_only:
                    self.pending_contradictions += 1
                else:
                    self.predictions_contradicted += 1
                    self.stats.predictions_contradicted += 1
            else:
                all_overdue = False
        if plan.group_dies and all_overdue and plan.death_ms is not None:
            since = self.situation_since_ms
            if since is None or since <= horizon:
                self.settled_death_ms = plan.death_ms  # not counted: the counter is of offsets

    def next_judgment(self) -> int:
        """The earliest time a record could contradict an outstanding prediction (exact)."""
        retention = self.retention_ms
        assert retention is not None
        grace = self.grace
        best = _FAR
        if self.exists and self.state is _E and not self.offsets:
            if self.pending_txn or self.group_type == "share":
                return best  # an open transaction keeps the group (it cannot die)
            base = _expiry.death_base(self)
            death = base if base is not None else -1
            if death != self.settled_death_ms:
                since = self.situation_since_ms
                best = max(death + 1, since if since is not None else death) + grace + 1
            return best
        sit = _expiry.situation(self, self.rules)
        if sit == _SIT_NONE:
            return best
        settled = self.settled
        for tp, entry in self.offsets.items():
            due = _expiry.due_ms(entry[0], tp[0], sit, retention, self)
            if due is not None and settled.get(tp) != due:
                t = self.effective_due(due, entry) + grace + 1
                if t < best:
                    best = t
        return best

    def invalidate_expiry(self) -> None:
        if self.retention_ms is not None:
            self.next_check = -1
            self.sit = None

    def lower_next_check(self, v: OffsetCommitValue, topic: str) -> None:
        """Keep ``next_check`` a lower bound of every judgment time after a commit (cheap: the
        group situation is cached until the next state change)."""
        retention = self.retention_ms
        if retention is None:
            return
        sit = self.sit
        if sit is None:
            sit = self.sit = _expiry.situation(self, self.rules)
        if sit == _SIT_NONE:
            return
        if sit == _SIT_UNSUBSCRIBED and v.expire_timestamp is None:
            subs = self.subscribed_topics
            if subs is not None and topic in subs:
                return  # a subscribed topic never expires while the group is Stable
        due = _expiry.due_ms(v, topic, sit, retention, self)
        if due is not None and self.next_check is not None:
            since = self.situation_since_ms
            e = (due if since is None or since <= due else since) + self.grace + 1  # effective_due
            if e < self.next_check:
                self.next_check = e

    def drop_metadata(self) -> None:
        self.protocol_type = None
        self.protocol = None
        self.leader = None
        self.members = ()
        self.has_metadata = False
        self.subscribed_topics = None

    # -- the commit-run bulk path's interface (``expiry.BulkFold``) ---------------------------
    @property
    def emits_commit_events(self) -> bool:
        return self.commit_events

    def quiet_through(
        self, t_max: int, min_commit_timestamp_ms: int | None, min_expire_timestamp_ms: int | None
    ) -> bool:
        """Nothing of the group can be judged, and no commit known by these aggregates can be
        due (plus grace), up to ``t_max``: then expiry checks inside a run up to ``t_max`` all
        find nothing (see ``coordinator_core.loader.commit_runs``)."""
        retention = self.retention_ms
        if retention is None:
            return True
        nc = self.next_check
        assert nc is not None
        if nc < 0 or nc <= t_max:
            nc = self.next_judgment()
            self.next_check = nc  # exact, so a valid lower bound (as ``judge`` leaves it)
            if nc <= t_max:
                return False
        if not self.exists or self.state is _D:
            # the run's first commit creates a group without protocol type (base: commit time);
            # the least of every rule set's due times (pre-2.1 only adds 1)
            sit = _expiry.SIT_ALL_BASE_COMMIT
        else:
            sit = self.sit if self.sit is not None else _expiry.situation(self, self.rules)
        bound = _expiry.min_due_ms(sit, self, retention, min_commit_timestamp_ms, min_expire_timestamp_ms)
        return bound is None or bound + self.grace >= t_max

    def skip_commits(self, n: int) -> None:
        self.skipped_commits += n
