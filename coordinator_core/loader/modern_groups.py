"""Share groups (KIP-932) and streams groups (KIP-1071) in the replay of a group id: their
records go to the group's share or streams fold, the classic fields mirror the live group (so
the expiry decider and the state row read one group), their deletion takes the group
tombstone's path, their events become the gold rows.

Rules:
- A record of types 10-15 (share) or 17, 19-23 (streams), decoded with ``modern=True``, goes to
  the group's fold of that kind (``coordinator_core.modern.share.fold``,
  ``coordinator_core.streams.fold``). Kafka keeps one group per id:
  ``getOrMaybeCreatePersisted{Share,Streams}Group`` throws ``IllegalStateException`` ("Group X
  is not a share/streams group") for a record of a group that exists with another type, and the
  partition does not load; the log of a real broker deletes the old group first (e.g. the
  GroupMetadata tombstone of an empty classic group a streams group replaces). Here such a
  record is an anomaly, counted (``ReplayStats.type_conflicts``) and applied as it intends: the
  group becomes a group of the record's type (a fold of the other kind is replaced). Another type
  means a live group with group records of its own (classic with its GroupMetadata, consumer,
  share or streams); a group only offsets created is no group of another type, as for consumer
  groups (``getOrMaybeCreatePersistedConsumerGroup`` replaces a simple classic group).
- Mirror (``mirror_modern``): state Empty or Stable (any other live state is a non-empty
  group), generation = group epoch, protocol type ``share`` / ``streams`` (Kafka's
  ``PROTOCOL_TYPE``s), protocol = the broker's assignor, subscribed topics = what
  ``isSubscribedToTopic`` answers (share: the members' topics; streams: the topology's source
  topics, none while Empty), no classic members.
- Offsets: a streams group's offsets follow the streams rule in ``coordinator_core.expiry``; a
  share group has none here and never expires (``shouldExpire`` false).
- Rows: a state change other than to Dead is a ``group_transitions`` row (Dead: the tombstone's
  row), each rebalance telling a ``rebalances`` row (protocol type = the group's kind), and the
  members are ``group_members`` rows each time a rebalance settles.
"""

from __future__ import annotations

import dataclasses

from coordinator_core.codec.records import LogRecord
from coordinator_core.loader.group_fold import GroupFold
from coordinator_core.loader.record_handlers import apply_group_tombstone
from coordinator_core.modern.consumer.events import ConsumerRebalance, ConsumerStateChange
from coordinator_core.modern.consumer.rows import as_rebalance, as_transition
from coordinator_core.modern.group_epochs import ModernGroupFold
from coordinator_core.modern.share import rows as share_rows
from coordinator_core.modern.share.fold import ShareGroupFold
from coordinator_core.modern.share.model import SHARE_RECORD_TYPES
from coordinator_core.settings import Coordinator
from coordinator_core.state import GroupState
from coordinator_core.streams import rows as streams_rows
from coordinator_core.streams.fold import StreamsGroupFold
from coordinator_core.streams.model import STREAMS_RECORD_TYPES, subscribed_topics

#: the record types this module folds (decoded with ``modern=True``)
MODERN_FOLDED_TYPES = SHARE_RECORD_TYPES | STREAMS_RECORD_TYPES


def apply_modern_record(w: GroupFold, rec: LogRecord) -> None:
    """A share or streams record of the group: fold it, mirror the group, tell the rows."""
    kind = "share" if rec.key.version in SHARE_RECORD_TYPES else "streams"
    if w.exists and w.has_metadata and w.group_type != kind:
        w.stats.type_conflicts += 1  # Kafka's loader refuses it (see the module rules)
    f = w.modern
    if f is None or f.kind != kind:
        f = w.modern = ShareGroupFold(w.group_id) if kind == "share" else StreamsGroupFold(w.group_id)
    was_live = f.exists
    told = f.apply(rec)
    ts, pos = rec.timestamp_ms, (rec.partition, rec.offset)
    w.stats.group_records += 1
    w.new_coordinator_seen = True  # only Kafka 4's group coordinator writes these
    if w.coordinator_setting is Coordinator.AUTO:
        w.coordinator = Coordinator.NEW
    if f.exists:
        mirror_modern(w, f, ts)
    elif was_live:
        apply_group_tombstone(w, ts, pos)  # the group's tombstones removed it
    kinds = w.kinds
    rows = share_rows if kind == "share" else streams_rows
    for e in told:
        if isinstance(e, ConsumerStateChange):
            if "state_transition" in kinds and e.to_state != "Dead":
                w.events.append(as_transition(e))
        elif isinstance(e, ConsumerRebalance):
            if "rebalance" in kinds:
                w.events.append(dataclasses.replace(as_rebalance(e), protocol_type=kind))
            if "group_member" in kinds and e.reconciled_ms is not None:
                w.events.extend(rows.member_events(f.snapshot(), pos[0], pos[1], ts))


def mirror_modern(w: GroupFold, f: ModernGroupFold, ts: int) -> None:
    """The classic fields of a live share or streams group (see the module rules)."""
    live = f.state
    state = GroupState.EMPTY if live == "Empty" else GroupState.STABLE
    if not w.exists or w.state is not state:
        w.situation_since_ms = ts
    w.exists = True
    w.state = state
    w.generation = f.group_epoch
    w.protocol_type = f.kind
    w.protocol = f.assignor()
    w.leader = None
    w.members = ()
    w.has_metadata = True
    if isinstance(f, StreamsGroupFold):
        w.subscribed_topics = subscribed_topics(live, f.details)
    else:
        w.subscribed_topics = frozenset(t for m in f.members.values() for t in m.subscribed_topic_names)
    w.current_state_timestamp = None
    w.state_timestamp_ms = f.state_timestamp_ms
    w.metadata_timestamp_ms = ts
    w.invalidate_expiry()
