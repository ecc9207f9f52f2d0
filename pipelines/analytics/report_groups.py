"""The report's words for every group type and for the present tense (``pipelines.analytics.report``
places them).

Rules:
- Every group type Kafka 4 runs is a group (issue 35): the header counts groups by
  ``group_type`` (classic, consumer, share, streams), each section names its type, and the
  sections are chosen so that every type present keeps at least one (the most active groups by
  records; a share group commits no offsets, so its group records count too); groups left out
  are still named on one line per type.
- A streams group's members own tasks, not partitions (``group_members.assigned_tasks`` /
  ``pending_revocation_tasks``, role active/standby/warmup, with ``process_id``): shown as
  ``kafka-streams-groups.sh --describe --members`` does (``<subtopology>:[<partitions>]``).
- A share group's positions live in ``__share_group_state`` (``group_state.offsets_kept_in``),
  which offsetlake does not read: its section says so instead of an empty offsets, expiry or lag
  part.
- Due is not dead (issue 33): a group whose deletion is only due (``death_forecast_from_time`` ..
  ``death_forecast_to_time``) is the state it is in (Empty) with the forecast beside it and its
  offsets still committed; an offset whose expiry is due by the stated now is listed as due, with
  the window its removal lies in (the gold forecast's, else due .. due + cleanup interval), never
  as a future expiry time.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pipelines.analytics.report_html import fmt_time, html_table

if TYPE_CHECKING:
    import pandas as pd

GROUP_TYPES = ("classic", "consumer", "share", "streams")
#: where a share group's positions are (``group_state.offsets_kept_in``)
SHARE_STATE_TOPIC = "__share_group_state"
SHARE_NOTE = (
    f"a share group's positions live in {SHARE_STATE_TOPIC} (share-partition start offsets and in-flight "
    "records), which offsetlake does not read: no committed offsets, expiry or lag here"
)
#: task columns of a streams member, in ``kafka-streams-groups.sh``'s order
TASK_ROLES = ("active", "standby", "warmup")
MAX_NAMES_PER_TYPE = 20


def _lst(x: Any) -> list[Any]:
    """A list from an Arrow/pandas list cell (None/NaN -> [])."""
    return [] if x is None or isinstance(x, float) else list(x)


def group_types(state: pd.DataFrame) -> pd.Series:
    """Each ``group_state`` row's type (rows written before ``group_type`` existed: classic)."""
    import pandas as pd

    if "group_type" not in state.columns:
        return pd.Series("classic", index=state.index)
    return state["group_type"].fillna("classic")


def groups_text(state: pd.DataFrame) -> str:
    """``"14 groups (7 classic · 5 consumer · 1 share · 1 streams)"``."""
    counts = group_types(state).value_counts().to_dict()
    order = [t for t in GROUP_TYPES if t in counts] + sorted(t for t in counts if t not in GROUP_TYPES)
    by_type = " · ".join(f"{counts[t]:,} {html.escape(str(t))}" for t in order)
    return f"{len(state):,} groups" + (f" ({by_type})" if by_type else "")


def pick_groups(state: pd.DataFrame, activity: pd.Series, groups: list[str] | None, max_groups: int) -> list[str]:
    """The groups that get a section: ``groups`` (those that exist), else the most active by
    ``activity``, with the most active group of every type present kept in (replacing the least
    active of the others)."""
    if groups:
        known = set(state["group_id"])
        return [g for g in groups if g in known]
    ranked = list(activity.sort_values(ascending=False, kind="stable").index)
    shown = ranked[:max_groups]
    if len(shown) == len(ranked) or max_groups <= 0:
        return shown
    kind = dict(zip(state["group_id"], group_types(state), strict=True))
    missing = [t for t in dict.fromkeys(kind[g] for g in ranked) if t not in {kind[g] for g in shown}]
    for t in missing:
        best = next(g for g in ranked if kind[g] == t)
        # the least active shown group of a type that keeps another shown group
        counts: dict[str, int] = {}
        for g in shown:
            counts[kind[g]] = counts.get(kind[g], 0) + 1
        out = next((g for g in reversed(shown) if counts[kind[g]] > 1), None)
        if out is None:
            break
        shown[shown.index(out)] = best
    return sorted(shown, key=ranked.index)


def not_detailed(state: pd.DataFrame, shown: list[str]) -> str:
    """One line per type of the groups without a section (empty when every group has one)."""
    rest = state[~state["group_id"].isin(shown)]
    if rest.empty:
        return ""
    lines = []
    types = group_types(rest)
    for t in [x for x in GROUP_TYPES if x in set(types)] + sorted(set(types) - set(GROUP_TYPES)):
        names = sorted(rest.loc[types == t, "group_id"])
        more = f", … and {len(names) - MAX_NAMES_PER_TYPE:,} more" if len(names) > MAX_NAMES_PER_TYPE else ""
        lines.append(
            f"<li>{len(names):,} {html.escape(str(t))}: "
            + ", ".join(html.escape(n) for n in names[:MAX_NAMES_PER_TYPE])
            + more
            + "</li>"
        )
    return f'<p class="muted">Groups without a section here:</p><ul class="muted">{"".join(lines)}</ul>'


def keeps_offsets_elsewhere(st: Any) -> bool:
    """A share group: its positions are not in ``__consumer_offsets``."""
    kept = st.get("offsets_kept_in") if hasattr(st, "get") else None
    if isinstance(kept, str):
        return kept == SHARE_STATE_TOPIC
    return bool(st.get("group_type") == "share")


def head_line(st: Any) -> str:
    """The section's one-line summary under the title."""
    gtype = st.get("group_type") or "classic"
    offsets = (
        f"offsets in {SHARE_STATE_TOPIC} (not read)" if keeps_offsets_elsewhere(st) else f"{st['offset_count']} offsets"
    )
    return (
        f"{html.escape(str(gtype))} group · generation {st['generation']} · protocol "
        f"{html.escape(str(st['protocol_type'] or '-'))}/{html.escape(str(st['protocol'] or '-'))} · "
        f"{st['member_count']} members · {offsets} · coordinator partition {st['coordinator_partition']} · "
        f"last record {fmt_time(st['last_timestamp'])}"
    )


def _ms(v: Any) -> int | None:
    from pipelines.analytics.forecast import to_ms

    return to_ms(v)


def due_text(st: Any, now_ms: int | None) -> str:
    """Due is not dead: a deletion or offset removals that are due, as forecasts (empty when none)."""
    lo, hi = _ms(st.get("death_forecast_from_time")), _ms(st.get("death_forecast_to_time"))
    n_due = st.get("offsets_due")
    n_due = 0 if n_due is None or n_due != n_due else int(n_due)
    held = int(st["offset_count"] or 0)
    if lo is not None and hi is not None:
        passed = (
            " (the window has passed at the stated now; the log read holds no tombstone yet)"
            if now_ms is not None and now_ms > hi
            else ""
        )
        return (
            f"{html.escape(str(st['state']))} — deletion due between {fmt_time(_ts(lo))} and {fmt_time(_ts(hi))} "
            f"(a forecast, no tombstone yet){passed}; {held} offsets still committed"
        )
    if n_due:
        return (
            f"{n_due} of {held} offsets due for removal at the broker's next cleanup (a forecast, no tombstone "
            "yet; still committed)"
        )
    return ""


def _ts(ms: int) -> Any:
    import pandas as pd

    return pd.Timestamp(ms, unit="ms")


def _tasks(tasks: Any, role: str | None = None) -> str:
    """``"0:[1,2]; 1:[0]"`` of a member's tasks (of one role when given)."""
    by: dict[str, list[int]] = {}
    for t in _lst(tasks):
        if role is None or t["role"] == role:
            by.setdefault(str(t["subtopology_id"]), []).append(int(t["partition"]))
    return "; ".join(f"{s}:[{','.join(map(str, sorted(ps)))}]" for s, ps in sorted(by.items()))


def members_table(st: Any, members: pd.DataFrame | None) -> str:
    """The group's current members (from its ``group_state`` row); a streams group's with their
    process and tasks by role (their latest ``group_members`` row)."""
    import pandas as pd

    current = _lst(st["members"])
    if st.get("group_type") == "streams":
        latest: dict[str, Any] = {}
        if members is not None and "assigned_tasks" in members.columns:
            mine = members[members["group_id"] == st["group_id"]].sort_values(["generation", "timestamp"])
            latest = {r["member_id"]: r for r in mine.to_dict("records")}
        rows = []
        for m in current:
            r = latest.get(m["member_id"], {})
            rows.append(
                {
                    "member_id": m["member_id"],
                    "process": r.get("process_id"),
                    "client_id": m["client_id"],
                    "host": m["client_host"],
                    **{role: _tasks(r.get("assigned_tasks"), role) for role in TASK_ROLES},
                    "pending revocation": _tasks(r.get("pending_revocation_tasks")),
                }
            )
        return html_table(pd.DataFrame(rows))
    cur = pd.DataFrame(
        [
            {
                "member_id": m["member_id"],
                "instance": m["group_instance_id"],
                "client_id": m["client_id"],
                "host": m["client_host"],
                "assigned": ", ".join(f"{p['topic']}-{p['partition']}" for p in _lst(m["assigned_partitions"])),
            }
            for m in current
        ]
    )
    return html_table(cur)


def forecast_rows(
    due: dict[tuple[str, int], int | None],
    offsets: pd.DataFrame,
    predicted: pd.DataFrame | None,
    now_ms: int | None,
    interval_ms: int,
) -> list[dict[str, Any]]:
    """The expiry forecast's rows (offsets that will expire, soonest first): ``expires`` for a
    due time after now, ``due, removal between A and B`` for one at or before it (the gold
    forecast's window when ``offset_expirations`` holds one for that offset)."""
    windows: dict[tuple[str, int, int], tuple[Any, Any]] = {}
    if predicted is not None and not predicted.empty:
        for r in predicted.to_dict("records"):
            windows[(r["topic"], int(r["partition"]), int(r["offset"]))] = (
                r.get("forecast_from_time"),
                r.get("forecast_to_time"),
            )
    held = {(r["topic"], int(r["partition"])): int(r["offset"]) for r in offsets.to_dict("records")}
    rows = []
    for (topic, part), d in sorted(due.items(), key=lambda kv: (kv[1] or 0, kv[0])):
        if d is None:
            continue
        told = windows.get((topic, part, held.get((topic, part), -1)))
        lo, hi = (_ms(told[0]), _ms(told[1])) if told else (None, None)
        if (lo is not None and hi is not None) or (now_ms is not None and d <= now_ms):
            lo, hi = (lo, hi) if lo is not None and hi is not None else (d, d + interval_ms)
            when = f"due, removal between {fmt_time(_ts(lo))} and {fmt_time(_ts(hi))}"
            if now_ms is not None and now_ms > hi:
                when += " (that window passed by the stated now with no tombstone in the log read; still committed)"
            else:
                when += " (a forecast, no tombstone yet; still committed)"
        else:
            left = "" if now_ms is None else f" (in {(d - now_ms) / 3_600_000:,.2f} h)"
            when = f"expires {fmt_time(_ts(d))}{left}"
        rows.append({"topic": topic, "partition": part, "offset": held.get((topic, part)), "expiry": when})
    return rows
