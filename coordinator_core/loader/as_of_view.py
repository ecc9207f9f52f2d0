"""The group as of a time ``T``: the loader fold, and what the broker's cleanups have certainly
done by ``T`` (``coordinator_core.expiry`` decides, ``group_fold.GroupFold`` keeps the books; the replay
loop, ``coordinator_core.loader.replay``, calls ``finish`` at the end of every call).

Rules (due is not dead):
- The broker removes expired offsets, and then an Empty group left without offsets, only in its
  periodic cleanup (``offsets.retention.check.interval.ms``) and writes tombstones for what it
  removed. What the rules have due by ``T`` and no tombstone confirmed is a *forecast*, told with
  status ``predicted`` and its window (``expiry.cleanup_window``: due .. due + interval).
- While ``T`` is inside the window the broker may not have run that cleanup yet: the view keeps
  what is due (the offsets stay held, the group stays Empty with its offsets due, ``exists``).
  Once the window has passed the view drops it (offsets, state Dead) and keeps it aside
  (``predicted_removed``, ``predicted_death_restore``) for the next call to restore: the fold
  behind a view never changes but by records.
- What ``log_end`` already contradicts (the log reaches past the cleanup that had to remove it,
  and holds no tombstone) is settled first; forecasts an earlier call told and this one does not
  are withdrawn (a ``withdrawn`` row with the same key).
- ``next_times``: when a replay with no new record would say something else of the group: the
  next judgment (a record after it could contradict a forecast; it depends on how far the log
  reaches) and the next change of the view (a forecast falls due, or its window passes; it
  depends only on ``T``). Streaming arms its timers on both.
"""

from __future__ import annotations

from coordinator_core import expiry as _expiry
from coordinator_core.events import WITHDRAWN
from coordinator_core.loader.group_fold import GroupFold
from coordinator_core.loader.snapshot import GroupSnapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.state import GroupState

_E = GroupState.EMPTY
_D = GroupState.DEAD
_FAR = 1 << 62


def death_window(w: GroupFold, death_ms: int, *, strict: bool) -> tuple[int, int]:
    """``expiry.death_window`` of the fold's group."""
    return _expiry.death_window(death_ms, w.situation_since_ms, w.interval, strict=strict)


def next_times(w: GroupFold, view: GroupSnapshot) -> tuple[int | None, int | None]:
    """(next judgment, next change of the view) of the fold restored from ``view``; None: none."""
    retention = w.retention_ms
    assert retention is not None
    nj = w.next_judgment()
    times: list[int] = []
    interval = w.interval
    sit = _expiry.situation(w, w.rules)
    if w.exists and w.state is _E and not w.offsets:
        if not w.pending_txn and w.group_type != "share":  # a share group's offsets are not here: it never expires
            base = _expiry.death_base(w)
            if base is not None and base != w.settled_death_ms:
                if view.predicted_death_ms is None:
                    times.append(base + 1)
                elif view.predicted_death_restore is None:  # told, its window not yet passed
                    times.append(death_window(w, view.predicted_death_ms, strict=True)[1])
    elif sit != _expiry.SIT_NONE:
        for tp, entry in w.offsets.items():
            if tp in view.predicted_removed:
                continue
            due = _expiry.due_ms(entry[0], tp[0], sit, retention, w)
            if due is not None and w.settled.get(tp) != due:
                e = w.effective_due(due, entry)
                times.append(e if tp not in view.predicted_expired else e + interval)
        if view.predicted_death_ms is not None and view.predicted_death_restore is None:
            times.append(death_window(w, view.predicted_death_ms, strict=False)[1])
    return (nj if nj < _FAR else None), (min(times) if times else None)


def finish(w: GroupFold, as_of: int, log_end: int | None) -> None:
    """Make ``w`` the view as of ``as_of`` (see the module rules)."""
    retention = w.retention_ms
    assert retention is not None
    if log_end is not None:
        w.contradict_by(log_end - w.grace - 1)
    plan = _expiry.plan_expiry(w, as_of, retention, w.rules, w.coordinator, w.settled, w.settled_death_ms)
    for tp, due in plan.expired:
        entry = w.offsets[tp]
        v = entry[0]
        e = w.effective_due(due, entry)
        window = _expiry.cleanup_window(e, w.interval)
        if window[1] <= as_of:
            del w.offsets[tp]
            w.predicted_removed[tp] = entry
        w.predicted_expired[tp] = (v.offset, v.commit_timestamp, e)
        w.stats.predicted_expirations += 1
        w.expiration(tp, v.offset, v.commit_timestamp, "retention", "predicted", e, None, None, window)
    if plan.group_dies and plan.death_ms is not None and w.exists and w.state is not _D:
        _forecast_death(w, as_of, plan)
    for tp, (off, cts, _pms) in w.emitted_exp.items():
        now = w.predicted_expired.get(tp)
        if now is None or now[:2] != (off, cts):
            w.expiration(tp, off, cts, "retention", WITHDRAWN, None, None, None)
    if w.emitted_death is not None and w.emitted_death != w.predicted_death_ms:
        w.deleted(
            f"expiry:{w.emitted_death}",
            WITHDRAWN,
            "offsets_expired",
            generation=w.generation,
            at=None,
            offsets_remaining=len(w.offsets),
        )


def _forecast_death(w: GroupFold, as_of: int, plan: _expiry.ExpiryPlan) -> None:
    """Tell the group's forecast deletion; take it out of the view once its window has passed."""
    assert plan.death_ms is not None
    window = death_window(w, plan.death_ms, strict=not plan.expired)
    death = window[0] - (0 if plan.expired else 1)
    passed = window[1] <= as_of
    w.stats.predicted_deaths += 1
    w.deleted(
        f"expiry:{plan.death_ms}",
        "predicted",
        "offsets_expired",
        generation=w.generation,
        at=death,
        predicted_ms=death,
        group_tombstone=plan.group_tombstone,
        offsets_remaining=0 if passed else len(w.offsets),
        window=window,
    )
    w.predicted_death_ms = plan.death_ms
    if passed:  # else the group is still there: Empty, its offsets due
        w.predicted_death_restore = (w.state_timestamp_ms, w.protocol_type, w.protocol, w.leader, w.has_metadata)
        w.drop_metadata()
        w.state = _D
        w.exists = False
        w.state_timestamp_ms = death


def next_judgment_ms(snapshot: GroupSnapshot, settings: ReplaySettings) -> int | None:
    """The next time a replay with no new record changes what it says of the group: a prediction
    falls due (the as-of view changes) or one is overdue with no tombstone and gets contradicted.
    Streaming arms its event-time timer here (None: nothing to wait for)."""
    times = [t for t in next_times_of(snapshot, settings) if t is not None]
    return min(times) if times else None


def next_times_of(snapshot: GroupSnapshot, settings: ReplaySettings) -> tuple[int | None, int | None]:
    """``next_judgment_ms`` in its two parts (``next_times``): the next judgment (it depends on how
    far the log reaches) and the next change of the view (a forecast falls due or its cleanup
    window passes: it depends only on the as-of)."""
    if settings.retention_ms is None:
        return None, None
    return next_times(GroupFold(snapshot, settings, frozenset()), snapshot)
