"""What Kafka 4's share groups (KIP-932) and streams groups (KIP-1071) share in a replay: a
group epoch whose bumps are rebalances, a target assignment installed per epoch, members with
a member epoch, a state derived after every record. ``ModernGroupFold`` is the base of
``coordinator_core.modern.share.fold.ShareGroupFold`` and ``coordinator_core.streams.fold.
StreamsGroupFold``; ``ModernGroupSnapshot`` is what they freeze into.

Facts from apache/kafka's group-coordinator module (4.2-4.4): ``GroupMetadataManager.replay``
for the share records (10-15) and the streams records (17, 19-23),
``getOrMaybeCreatePersistedShareGroup`` / ``getOrMaybeCreatePersistedStreamsGroup``,
``removeGroup``.

Rules:
- A value record creates the group when no group of the id exists; a tombstone never creates
  one (a tombstone for a missing group or member is ignored). Kafka refuses (``IllegalState-
  Exception``: "Group X is not a share/streams group") a record of one type for a group of
  another; a fold only sees its own type's records, and the replay glue
  (``coordinator_core.loader.modern_groups``) counts such a record as an anomaly
  (``ReplayStats.type_conflicts``) and applies it as it intends.
- The group-epoch tombstone removes the group (state Dead, ``deleted``); Kafka refuses it
  while members, target assignments or a target assignment epoch other than -1 remain: told as
  an anomaly, applied anyway.
- Rebalances: each new group epoch is a ``ConsumerRebalance`` (the event class is shared with
  consumer groups: members in/out since the last bump, matched by instance id when the type
  has one), told again under the same key when the target assignment of that epoch is
  installed (the units moved between the previous and the new target assignment: partitions
  for share groups, active tasks for streams groups), and when the group is settled at that
  epoch (``reconciled_ms``: each type says what settled means, ``settled``).
- The state is derived after every record and a change is told as a ``ConsumerStateChange``
  (cause: the record type that changed it), the state's name Kafka's (``ShareGroupState``,
  ``StreamsGroupState``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from coordinator_core.codec.records import LogRecord, record_type_name
from coordinator_core.events import MemberPartition
from coordinator_core.modern.consumer.events import (
    ConsumerAnomaly,
    ConsumerEvent,
    ConsumerRebalance,
    ConsumerStateChange,
)

#: one unit of an assignment: (topic id, partition) for share groups, (subtopology id,
#: partition) - a task - for streams groups
Unit = tuple[str, int]
DEAD = "Dead"


def _frozen() -> Mapping[Any, Any]:
    return MappingProxyType({})


def position(r: LogRecord) -> str:
    """``<partition>:<offset>``: the event key of what a record tells."""
    return f"{r.partition}:{r.offset}"


@dataclass(frozen=True, slots=True)
class ModernGroupSnapshot:
    """One share or streams group id as its fold left it (an immutable value).

    ``exists`` is False before the first record and after the group-epoch tombstone
    (``deleted``). ``members`` hold the type's member values (``ShareMember``,
    ``StreamsMember``), ``target_assignment`` the type's assignment per member, ``details``
    what only the type has (share: the share-partition state metadata and topic names;
    streams: the topology). The fields after ``last_timestamp_ms`` are the fold's bookkeeping.
    """

    group_id: str
    group_type: str
    exists: bool = False
    deleted: bool = False
    group_epoch: int = 0
    target_assignment_epoch: int = 0
    metadata_hash: int = 0
    members: Mapping[str, Any] = field(default_factory=_frozen)
    target_assignment: Mapping[str, Any] = field(default_factory=_frozen)
    details: Any = None
    state: str = DEAD
    created_ms: int | None = None
    state_timestamp_ms: int | None = None
    last_timestamp_ms: int | None = None
    epoch_known: bool = False
    epoch_members: Mapping[str, str | None] = field(default_factory=_frozen)
    last_bump_ms: int | None = None
    last_assignor: str | None = None
    installed_target: Mapping[str, Any] = field(default_factory=_frozen)
    pending_rebalance: ConsumerRebalance | None = None
    removed_ms: int | None = None


class ModernGroupFold:
    """The mutable working state of one share or streams group; ``apply`` one record at a time.

    A subclass gives ``kind``, ``handlers`` (record type -> handler), ``default_assignor``,
    ``derive_state``, ``settled`` (the group is settled at its target epoch), ``units`` (the
    units of one member's target assignment that rebalances count), ``new_details``, and may
    override ``member_changed`` (derived indexes)."""

    kind: ClassVar[str] = ""
    handlers: ClassVar[Mapping[int, Callable[[Any, LogRecord], None]]] = MappingProxyType({})
    default_assignor: ClassVar[str] = ""

    def __init__(self, group_id: str, snapshot: ModernGroupSnapshot | None = None) -> None:
        s = snapshot if snapshot is not None else ModernGroupSnapshot(group_id, self.kind, details=self.new_details())
        self.group_id = group_id
        self.exists, self.deleted = s.exists, s.deleted
        self.group_epoch, self.target_epoch, self.metadata_hash = (
            s.group_epoch,
            s.target_assignment_epoch,
            s.metadata_hash,
        )
        self.members: dict[str, Any] = dict(s.members)
        self.target: dict[str, Any] = dict(s.target_assignment)
        self.details: Any = s.details
        self.created_ms, self.state_timestamp_ms, self.last_timestamp_ms = (
            s.created_ms,
            s.state_timestamp_ms,
            s.last_timestamp_ms,
        )
        self.epoch_known = s.epoch_known
        self.epoch_members: dict[str, str | None] = dict(s.epoch_members)
        self.last_bump_ms, self.last_assignor = s.last_bump_ms, s.last_assignor
        self.installed_target: dict[str, Any] = dict(s.installed_target)
        self.pending: ConsumerRebalance | None = s.pending_rebalance
        self.removed_ms = s.removed_ms
        self._events: list[ConsumerEvent] = []
        self._record: LogRecord | None = None
        self._state = self.state

    # -- what a type says ------------------------------------------------------------------
    def new_details(self) -> Any:
        return None

    def derive_state(self) -> str:
        raise NotImplementedError

    def settled(self) -> bool:
        raise NotImplementedError

    def units(self, assignment: Any) -> Iterable[Unit]:
        raise NotImplementedError

    def assignor(self) -> str:
        return self.default_assignor

    # -- freezing --------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self.derive_state() if self.exists else DEAD

    def snapshot(self) -> ModernGroupSnapshot:
        return ModernGroupSnapshot(
            group_id=self.group_id,
            group_type=self.kind,
            exists=self.exists,
            deleted=self.deleted,
            group_epoch=self.group_epoch,
            target_assignment_epoch=self.target_epoch,
            metadata_hash=self.metadata_hash,
            members=MappingProxyType(dict(sorted(self.members.items()))),
            target_assignment=MappingProxyType(dict(sorted(self.target.items()))),
            details=self.details,
            state=self.state,
            created_ms=self.created_ms,
            state_timestamp_ms=self.state_timestamp_ms,
            last_timestamp_ms=self.last_timestamp_ms,
            epoch_known=self.epoch_known,
            epoch_members=MappingProxyType(dict(sorted(self.epoch_members.items()))),
            last_bump_ms=self.last_bump_ms,
            last_assignor=self.last_assignor,
            installed_target=MappingProxyType(dict(sorted(self.installed_target.items()))),
            pending_rebalance=self.pending,
            removed_ms=self.removed_ms,
        )

    # -- the loop --------------------------------------------------------------------------
    def apply(self, record: LogRecord) -> list[ConsumerEvent]:
        """Apply one record of this group (one of ``handlers``' types); the events it tells.

        Raises:
            ValueError: a record of another group or of a type this fold does not handle.
        """
        handler = self.handlers.get(record.key.version)
        if handler is None or record.group != self.group_id:
            raise ValueError(
                f"{self.kind}-group fold of {self.group_id!r} cannot apply "
                f"{record_type_name(record.key.version)} of group {record.group!r}"
            )
        self._events = []
        self._record = record
        before = self._state
        handler(self, record)
        after = self._state = self.state
        pending = self.pending
        if (
            after != DEAD
            and pending is not None
            and pending.assignment_epoch == self.target_epoch == pending.group_epoch
            and self.settled()
        ):
            self.tell(dataclasses.replace(pending, reconciled_ms=record.timestamp_ms))
            self.pending = None
        if after != before:
            self.tell(
                ConsumerStateChange(
                    self.group_id,
                    position(record),
                    None if before == DEAD and after != DEAD else before,
                    after,
                    self.group_epoch,
                    self.target_epoch,
                    record.timestamp_ms,
                    record_type_name(record.key.version),
                )
            )
            self.state_timestamp_ms = record.timestamp_ms
        self.last_timestamp_ms = record.timestamp_ms
        return self._events

    # -- the handlers' API -----------------------------------------------------------------
    def tell(self, event: ConsumerEvent) -> None:
        self._events.append(event)

    def anomaly(self, reason: str, detail: str) -> None:
        r = self._record
        assert r is not None
        self.tell(ConsumerAnomaly(self.group_id, position(r), reason, detail, r.timestamp_ms))

    def group(self, record: LogRecord, create: bool) -> bool:
        """``getOrMaybeCreatePersisted{Share,Streams}Group``: True when the record applies (the
        group exists, or was created because ``create``)."""
        if self.exists:
            return True
        if not create:
            return False
        self.exists, self.deleted = True, False
        self.group_epoch = self.target_epoch = self.metadata_hash = 0
        self.members, self.target, self.details = {}, {}, self.new_details()
        self.created_ms = record.timestamp_ms
        self.epoch_known, self.epoch_members, self.installed_target, self.pending = False, {}, {}, None
        self.last_bump_ms, self.last_assignor = None, None
        self.member_changed(None, None)
        return True

    def remove(self, record: LogRecord) -> None:
        """``removeGroup``: the group is gone (Dead)."""
        self.exists, self.deleted, self.removed_ms = False, True, record.timestamp_ms
        self.members, self.target = {}, {}
        self.epoch_members, self.installed_target, self.pending = {}, {}, None

    def member_changed(self, old: Any, new: Any) -> None:
        """A member was replaced (``old`` -> ``new``; None: absent): keep derived indexes.
        Both None: the group was (re)created."""

    def put_member(self, old: Any, new: Any) -> None:
        if old is not None:
            del self.members[old.member_id]
        if new is not None:
            self.members[new.member_id] = new
        self.member_changed(old, new)

    def identity(self, member: Any) -> str | None:
        """A member's instance id (static membership), if its type has one."""
        return getattr(member, "instance_id", None)

    # -- rebalances ------------------------------------------------------------------------
    def bump(self, record: LogRecord, epoch: int) -> None:
        previous = self.group_epoch if self.epoch_known else None
        self.group_epoch, self.epoch_known = epoch, True
        if previous is not None and epoch == previous:
            return
        before = self.epoch_members
        after = {m.member_id: self.identity(m) for m in self.members.values()}
        old_ids = {i or mid for mid, i in before.items()}
        new_ids = {i or mid for mid, i in after.items()}
        back = sorted(i for mid, i in after.items() if i is not None and i in old_ids and mid not in before)
        joined = tuple(sorted(mid for mid, i in after.items() if (i or mid) not in old_ids))
        left = tuple(sorted(mid for mid, i in before.items() if (i or mid) not in new_ids))
        if previous is None:
            cause = "group_created"
        elif joined and left:
            cause = "members_changed"
        else:
            cause = "members_joined" if joined else "members_left" if left else "subscription_or_metadata"
        assignor = self.assignor()
        ts = record.timestamp_ms
        self.pending = ConsumerRebalance(
            self.group_id,
            position(record),
            epoch,
            previous,
            ts,
            len(before),
            len(after),
            joined,
            left,
            tuple(back),
            assignor,
            cause,
            self.last_assignor,
            None if self.last_bump_ms is None else ts - self.last_bump_ms,
        )
        self.epoch_members, self.last_bump_ms, self.last_assignor = after, ts, assignor
        self.tell(self.pending)

    def apply_target_metadata(self, r: LogRecord) -> None:
        """A share or streams group's target-assignment metadata record (types 12, 20): Kafka's
        replay of ``{Share,Streams}GroupTargetAssignmentMetadata`` is the same for both kinds."""
        value = r.value
        if not self.group(r, create=value is not None):
            return
        if value is None:
            if self.target:
                self.anomaly(
                    "target_epoch_tombstone_not_empty",
                    (
                        f"Received a tombstone record to delete target assignment of {self.group_id} but the "
                        f"assignment still has {len(self.target)} members."
                    ),
                )
            self.target_epoch = -1
            return
        epoch = getattr(value, "assignment_epoch")  # noqa: B009 (the share and streams values both carry it)
        assert isinstance(epoch, int)
        self.target_epoch = epoch
        self.install_target(r, epoch)

    def install_target(self, record: LogRecord, epoch: int) -> None:
        """A target assignment epoch installed: the pending rebalance of that epoch learns what
        moved (per member: units gained and lost; ``partitions_moved``: units held before and
        after whose holders changed)."""
        pending = self.pending
        if pending is not None and pending.group_epoch == epoch and pending.assignment_epoch is None:
            before = self._holders(self.installed_target)
            after = self._holders(self.target)
            label = self.unit_label
            gained: list[MemberPartition] = sorted(
                (mid, label(u[0]), u[1]) for u, hs in after.items() for mid in hs - before.get(u, frozenset())
            )
            lost: list[MemberPartition] = sorted(
                (mid, label(u[0]), u[1]) for u, hs in before.items() for mid in hs - after.get(u, frozenset())
            )
            moved = sum(1 for u, hs in after.items() if u in before and before[u] != hs)
            self.pending = dataclasses.replace(
                pending,
                assignment_epoch=epoch,
                assigned_ms=record.timestamp_ms,
                partitions_moved=moved,
                partitions_gained=tuple(gained),
                partitions_lost=tuple(lost),
            )
            self.tell(self.pending)
        self.installed_target = dict(self.target)

    def unit_label(self, unit_id: str) -> str:
        return unit_id

    def _holders(self, target: Mapping[str, Any]) -> dict[Unit, frozenset[str]]:
        out: dict[Unit, set[str]] = {}
        for mid, a in target.items():
            for u in self.units(a):
                out.setdefault(u, set()).add(mid)
        return {u: frozenset(hs) for u, hs in out.items()}


# ---------------------------------------------------------------------------------------------
# Serialized form (the replay's snapshot codec and streaming state): a version byte, then
# compact JSON; each type gives its member/assignment/details codecs
# ---------------------------------------------------------------------------------------------
SNAPSHOT_DUMP_VERSION = 1


@dataclass(frozen=True, slots=True)
class TypeCodec:
    """How one group type's values become JSON lists and back."""

    member_to: Callable[[Any], list[Any]]
    member_from: Callable[[list[Any]], Any]
    assignment_to: Callable[[Any], Any]
    assignment_from: Callable[[Any], Any]
    details_to: Callable[[Any], Any]
    details_from: Callable[[Any], Any]


def _rebalance_to(r: ConsumerRebalance | None) -> list[Any] | None:
    if r is None:
        return None
    return [
        [
            list(map(list, v))
            if f.name in ("partitions_gained", "partitions_lost")
            else list(v)
            if isinstance(v, tuple)
            else v
        ]
        for f in dataclasses.fields(r)
        for v in (getattr(r, f.name),)
    ]


def _rebalance_from(v: list[Any] | None) -> ConsumerRebalance | None:
    if v is None:
        return None
    args: list[Any] = []
    for f, (x,) in zip(dataclasses.fields(ConsumerRebalance), v, strict=True):
        if f.name in ("partitions_gained", "partitions_lost"):
            x = tuple(tuple(p) for p in x)
        elif isinstance(x, list):
            x = tuple(x)
        args.append(x)
    return ConsumerRebalance(*args)


def dump_modern(s: ModernGroupSnapshot, c: TypeCodec) -> bytes:
    """``s`` as bytes; ``load_modern`` with the same codec inverts it exactly."""
    doc = [
        s.group_id,
        s.group_type,
        s.exists,
        s.deleted,
        s.group_epoch,
        s.target_assignment_epoch,
        s.metadata_hash,
        [c.member_to(m) for m in s.members.values()],
        [[mid, c.assignment_to(a)] for mid, a in s.target_assignment.items()],
        c.details_to(s.details),
        s.state,
        s.created_ms,
        s.state_timestamp_ms,
        s.last_timestamp_ms,
        s.epoch_known,
        [[k, v] for k, v in s.epoch_members.items()],
        s.last_bump_ms,
        s.last_assignor,
        [[mid, c.assignment_to(a)] for mid, a in s.installed_target.items()],
        _rebalance_to(s.pending_rebalance),
        s.removed_ms,
    ]
    return bytes([SNAPSHOT_DUMP_VERSION]) + json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def load_modern(data: bytes, c: TypeCodec) -> ModernGroupSnapshot:
    """Inverse of ``dump_modern``.

    Raises:
        ValueError: not a dump of a known version.
    """
    if not data or data[0] != SNAPSHOT_DUMP_VERSION:
        raise ValueError(f"not a share/streams group snapshot dump of version {SNAPSHOT_DUMP_VERSION}")
    d = json.loads(data[1:].decode())
    members = [c.member_from(m) for m in d[7]]
    return ModernGroupSnapshot(
        group_id=d[0],
        group_type=d[1],
        exists=d[2],
        deleted=d[3],
        group_epoch=d[4],
        target_assignment_epoch=d[5],
        metadata_hash=d[6],
        members=MappingProxyType({m.member_id: m for m in members}),
        target_assignment=MappingProxyType({mid: c.assignment_from(a) for mid, a in d[8]}),
        details=c.details_from(d[9]),
        state=d[10],
        created_ms=d[11],
        state_timestamp_ms=d[12],
        last_timestamp_ms=d[13],
        epoch_known=d[14],
        epoch_members=MappingProxyType(dict(d[15])),
        last_bump_ms=d[16],
        last_assignor=d[17],
        installed_target=MappingProxyType({mid: c.assignment_from(a) for mid, a in d[18]}),
        pending_rebalance=_rebalance_from(d[19]),
        removed_ms=d[20],
    )
