"""Offset expiry forecasts from gold rows, decided by the core (never re-implemented).

Rule: a ``group_state`` row and the group's ``offsets_current`` rows carry everything
``coordinator_core.expiry`` reads for a due time (state, protocol type, current-state
timestamp, subscribed topics, each commit's timestamps); ``due_times`` rebuilds that view and
asks ``offset_due_times``. Used by the ``offsets_at_risk`` view and the HTML report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator_core import ExpiryRules, GroupState, OffsetCommitValue, OffsetState, offset_due_times


def to_ms(v: Any) -> int | None:
    """Epoch ms of a pandas/py datetime (None/NaT -> None)."""
    import pandas as pd

    if v is None:
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return int(pd.Timestamp(v).value // 1_000_000)


@dataclass
class _GoldGroup:
    """``coordinator_core.expiry.GroupView`` built from gold rows."""

    group_id: str
    state: GroupState
    generation: int
    protocol_type: str | None
    current_state_timestamp: int | None
    state_timestamp_ms: int | None
    subscribed_topics: frozenset[str] | None
    offsets: dict[tuple[str, int], OffsetState] = field(default_factory=dict)
    last_offset_removal_ms: int | None = None
    group_type: str = "classic"
    # pending transactional offsets are not in the gold tables: none known here
    pending_txn: dict[int, dict[tuple[str, int], OffsetState]] = field(default_factory=dict)


#: Kafka 4 group states (KIP-848 consumer, KIP-1071 streams) a ``group_state`` row may carry
#: besides the classic ones
_MODERN_LIVE_STATES = frozenset({"Assigning", "Reconciling", "NotReady"})


def due_times(
    state: Mapping[str, Any],
    offsets: Iterable[Mapping[str, Any]],
    retention_ms: int,
    rules: ExpiryRules | str = ExpiryRules.CURRENT,
) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> expiry time in ms (None = cannot expire as the group stands), by the
    rule of the row's ``group_type`` (classic, consumer, share, streams)."""
    subs = state.get("subscribed_topics")
    ptype = state.get("protocol_type")
    gen = state.get("generation")
    raw_state = str(state["state"])
    kind = state.get("group_type")
    if not isinstance(kind, str) or not kind:  # a warehouse written before group_type existed
        kind = "consumer" if raw_state in _MODERN_LIVE_STATES else "classic"
    group = _GoldGroup(
        group_id=str(state["group_id"]),
        # a Kafka 4 group assigning, reconciling or (streams) not ready is a live, non-empty group:
        # its type's expiry rule is the same as when Stable
        state=GroupState.STABLE if raw_state in _MODERN_LIVE_STATES else GroupState(raw_state),
        group_type=kind,
        generation=0 if gen is None or gen != gen else int(gen),
        protocol_type=ptype if isinstance(ptype, str) else None,
        current_state_timestamp=to_ms(state.get("current_state_timestamp")),
        state_timestamp_ms=to_ms(state.get("state_timestamp")),
        subscribed_topics=None if subs is None or isinstance(subs, float) else frozenset(subs),
    )
    for o in offsets:
        value = OffsetCommitValue(
            int(o["offset"]), "", to_ms(o["commit_timestamp"]) or 0, expire_timestamp=to_ms(o.get("expire_timestamp"))
        )
        group.offsets[(str(o["topic"]), int(o["partition"]))] = (value, 0, 0, 0)
    return offset_due_times(group, retention_ms, ExpiryRules(rules))


#: ``offsets_at_risk.expiry_status``: not due (or never) / due, removal forecast / kept past its window
EXPIRY_STATUSES = ("held", "due", "kept_past_due")


def expiry_status(due_ms: int | None, now_ms: int, cleanup_interval_ms: int, evidence_ms: int | None = None) -> str:
    """The ``offsets_at_risk`` rule (``at_risk.at_risk_sql``) on the driver: ``held`` before its due
    time (or never due), ``due`` from its due time until its removal window
    (``coordinator_core.expiry.cleanup_window``) has passed both ``now_ms`` and the evidence
    horizon (``evidence_ms``: ``log_clock.evidence_horizon``), then ``kept_past_due`` (the log shows the broker kept it)."""
    if due_ms is None or due_ms > now_ms:
        return "held"
    end = due_ms + cleanup_interval_ms
    if end < now_ms and end < (now_ms if evidence_ms is None else evidence_ms):
        return "kept_past_due"
    return "due"
