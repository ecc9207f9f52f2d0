"""The HTML report: a cluster overview and one section per group, in ONE self-contained file.

Rules:
- Gold tables are read on the driver (``TableIO.read_arrow``, delta-rs) into pandas: they are small (one row per group, per
  group-partition or per event), so no Spark is needed. ``offset_commits`` (the big decoded
  table) is read with only the columns the plots need, for the groups shown.
- Per-group detail is capped (default: the 50 most active groups by records) unless ``groups``
  is given; the overview covers every group.
- plotly.js is inlined by default (``include_plotlyjs`` once, in the first figure): the file opens
  with no network access, and plotly.js is most of its size (~4.8 MB of ~5 MB, whatever the
  window). ``plotly="cdn"`` references instead the CDN copy of the installed plotly's own
  plotly.js version (``https://cdn.plot.ly/plotly-<version>.min.js``, with its integrity hash): the
  file is then a few hundred KB but needs the network to draw. Every figure is a
  ``<div class="plotly-graph-div">``.
- The expiry forecast of a shown group's current offsets is the core's
  (``pipelines.analytics.forecast.due_times`` -> ``coordinator_core.expiry.offset_due_times``);
  only offsets that will expire are listed (those that never do are counted).
- Lag, Burrow status and the at-risk summary: ``pipelines.analytics.report_lag`` (the views'
  one definition, answered by DuckDB).
- A time window (``since_ms`` / ``until_ms``, epoch ms, either open) keeps the history shown
  (rebalances by end, transitions, commits, removed offsets) inside it; the current state, lag
  and forecasts are as of the warehouse's now.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines import log_clock
from pipelines.analytics import report_groups, report_lag
from pipelines.analytics.forecast import due_times
from pipelines.analytics.reads import driver_io
from pipelines.analytics.report_html import fmt_time, html_table
from pipelines.analytics.report_rebalances import (
    WINDOW_COLOR,
    duration_figure,
    estimate_text,
    minutes_per_group,
    minutes_text,
    rebalance_minutes_figure,
    rebalances_table_columns,
    timeline_rows,
)
from pipelines.analytics.views import MODERN_GROUP_TYPES, REBALANCE_CAUSES
from pipelines.errors import UsageError
from pipelines.tableio import TableIO

if TYPE_CHECKING:
    import pandas as pd

    from pipelines.config import Config

DEFAULT_MAX_GROUPS = 50
STATE_COLORS = {
    "Empty": "#9e9e9e",
    "PreparingRebalance": "#ff9800",
    "CompletingRebalance": "#ffc107",
    "Stable": "#4caf50",
    "Dead": "#424242",
}

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;background:#f5f6f8;color:#222}
header{background:#1f2937;color:#fff;padding:18px 32px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;color:#cbd5e1;font-size:13px}
main{padding:16px 32px;max-width:1320px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.08);margin:16px 0;padding:16px 20px}
h2{font-size:18px;margin:4px 0 12px} h3{font-size:14px;margin:12px 0 6px;color:#374151}
.kpis{display:flex;gap:12px;flex-wrap:wrap}
.kpi{background:#f1f5f9;border-radius:6px;padding:8px 14px;min-width:110px}
.kpi b{display:block;font-size:20px} .kpi span{font-size:12px;color:#64748b}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
table{border-collapse:collapse;font-size:12px;width:100%} th,td{padding:4px 8px;border-bottom:1px solid #e5e7eb;text-align:left}
th{background:#f8fafc} .state{display:inline-block;padding:2px 8px;border-radius:10px;color:#fff;font-size:12px}
nav{font-size:12px;line-height:1.8} nav a{margin-right:10px;color:#2563eb;text-decoration:none}
.muted{color:#64748b;font-size:12px} .due{color:#9a3412;font-size:13px;margin:4px 0}
"""


def _read(cfg: Config, name: str, columns: list[str] | None = None, filt: Any = None) -> pd.DataFrame | None:
    """A Delta table as pandas (delta-rs), or None when it does not exist."""

    table = TableIO(cfg, None, engine="rust").read_arrow(name, columns)
    if table is None:
        return None
    if filt is not None:  # filtered after the read: pushdown of string predicates dropped rows (delta-rs stats)
        table = table.filter(filt)
    return table.to_pandas()


def _lst(x: Any) -> list[Any]:
    """A list from an Arrow/pandas list cell (None/NaN -> [])."""
    return [] if x is None or isinstance(x, float) else list(x)


PLOTLY_MODES = ("inline", "cdn")


class _Figures:
    """Collects figure HTML; the first one carries plotly.js (inline, or its CDN script tag)."""

    def __init__(self, plotly: str = "inline") -> None:
        self.count = 0
        self.plotly: bool | str = True if plotly == "inline" else "cdn"

    def html(self, fig: Any, height: int = 320) -> str:
        fig.update_layout(
            height=height, margin={"l": 40, "r": 20, "t": 40, "b": 40}, template="plotly_white", font={"size": 11}
        )
        out = fig.to_html(
            full_html=False, include_plotlyjs=self.plotly if self.count == 0 else False, config={"displaylogo": False}
        )
        self.count += 1
        return str(out)


def _in_window(df: pd.DataFrame | None, col: str, since_ms: int | None, until_ms: int | None) -> pd.DataFrame | None:
    """Rows of ``df`` whose ``col`` lies in [since, until] (rows without a time are dropped when a bound is set)."""
    import pandas as pd

    if df is None or (since_ms is None and until_ms is None) or col not in df.columns:
        return df
    t = pd.to_datetime(df[col], utc=True)
    keep = t.notna()
    if since_ms is not None:
        keep &= t >= pd.Timestamp(since_ms, unit="ms", tz="UTC")
    if until_ms is not None:
        keep &= t <= pd.Timestamp(until_ms, unit="ms", tz="UTC")
    return df[keep]


def build_report(
    cfg: Config,
    *,
    groups: list[str] | None = None,
    max_groups: int = DEFAULT_MAX_GROUPS,
    since_ms: int | None = None,
    until_ms: int | None = None,
    plotly: str = "inline",
) -> str:
    """The report's HTML (see the module rules)."""
    import pandas as pd
    import pyarrow.dataset as pds

    if plotly not in PLOTLY_MODES:
        raise UsageError(f"plotly: expected one of {', '.join(PLOTLY_MODES)}, got {plotly!r}")
    state = _read(cfg, "group_state")
    if state is None:
        raise UsageError(f"no group_state table under {cfg.paths.warehouse} (run: offsetlake run batch)")
    rebal = _read(cfg, "rebalances")
    trans = _read(cfg, "group_transitions")
    members = _read_members(cfg)
    offsets = _read(cfg, "offsets_current")
    expir = _read(cfg, "offset_expirations")
    commits_cols = ["coordinator_partition", "group_id", "is_tombstone"]
    load = _read(cfg, "offset_commits", commits_cols)
    gm = _read(cfg, "group_metadata", ["coordinator_partition", "group_id"])
    figs = _Figures(plotly)
    rebal = rebal if rebal is not None else pd.DataFrame(columns=["group_id", "cause", "end_time", "duration_ms"])
    shown = _shown_groups(state, load, rebal, groups, max_groups)
    rebal = _in_window(rebal, "end_time", since_ms, until_ms)
    trans = _in_window(trans, "timestamp", since_ms, until_ms)
    predicted = None if expir is None else expir[expir["status"] == "predicted"]  # forecasts: never windowed
    expir = _in_window(expir, "predicted_time", since_ms, until_ms)
    lag = report_lag.read_lag(cfg, state)

    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    now_ms, stated = _stated_now(cfg)
    n_groups = len(state)
    capped = "" if groups or len(state) <= max_groups else f" (top {max_groups} of {n_groups} by records)"
    parts = [_overview(state, rebal, offsets, load, gm, figs)]
    nav = "".join(f'<a href="#g-{html.escape(g)}">{html.escape(g)}</a>' for g in shown)
    rest = "" if groups else report_groups.not_detailed(state, shown)
    parts.append(f"<h3>Groups in this report{capped}</h3><nav>{nav}</nav>{rest}</section>")
    parts.append(report_lag.overview_section(lag))
    parts.append(report_lag.at_risk_section(lag, cfg.replay.retention_ms, cfg.replay.rules))

    # ---- per-group sections -----------------------------------------------------------------
    detail_commits = None
    if shown:
        detail_commits = _read(
            cfg,
            "offset_commits",
            ["group_id", "topic", "partition", "commit_timestamp", "committed_offset", "is_tombstone"],
            pds.field("group_id").isin(shown),
        )
        detail_commits = _in_window(detail_commits, "commit_timestamp", since_ms, until_ms)
    for g in shown:
        section = _group_section(
            g, cfg, state, rebal, trans, members, offsets, (expir, predicted), detail_commits, figs, now_ms
        )
        lag_part = "<h3>Lag and status</h3>" + _lag_table(g, state, lag)
        parts.append(section.replace("<h3>Expiry forecast</h3>", lag_part + "<h3>Expiry forecast</h3>", 1))

    title = "offsetlake report"
    window = _window_text(since_ms, until_ms)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>{_CSS}</style></head>"
        f"<body><header><h1>{title}</h1><p>{report_groups.groups_text(state)} · warehouse {html.escape(str(cfg.paths.warehouse))}"
        f"{window} · statuses and countdowns as of {stated} · generated {now}</p></header><main>{''.join(parts)}</main></body></html>"
    )


def _lag_table(g: str, state: Any, lag: Any) -> str:
    """A group's lag table; a share group's positions are not in ``__consumer_offsets``: said so."""
    st = state[state["group_id"] == g].iloc[0]
    if report_groups.keeps_offsets_elsewhere(st):
        return f'<p class="muted">{report_groups.SHARE_NOTE}</p>'
    return str(report_lag.group_lag_table(g, lag))


def _window_text(since_ms: int | None, until_ms: int | None) -> str:
    """The header's history window ("" when the whole history is shown)."""
    if since_ms is None and until_ms is None:
        return ""
    start = fmt_time(_ts(since_ms)) if since_ms is not None else "the start"
    end = fmt_time(_ts(until_ms)) if until_ms is not None else "the end"
    return f" · history from {start} to {end}"


def _ts(ms: int) -> Any:
    import pandas as pd

    return pd.Timestamp(ms, unit="ms")


def _is_rebalance(rebal: pd.DataFrame) -> pd.Series:
    """Rows of ``rebalances`` that are rebalances (``views.IS_REBALANCE_SQL``: a generation
    change, or a consumer, share or streams group's epoch bump; not the other causes the table records)."""

    is_reb = rebal["cause"].isin(list(REBALANCE_CAUSES))
    if "group_type" in rebal.columns:  # absent from a warehouse written before it existed
        is_reb = is_reb | rebal["group_type"].isin(list(MODERN_GROUP_TYPES))
    return is_reb


def _read_members(cfg: Config) -> pd.DataFrame | None:
    """``group_members``' columns the sections show (a streams member's process and tasks too,
    when the table has them: a warehouse written before they existed has not)."""
    import pyarrow as pa

    base = ["group_id", "generation", "member_id", "group_instance_id", "timestamp"]
    try:
        return _read(
            cfg, "group_members", [*base, "group_type", "process_id", "assigned_tasks", "pending_revocation_tasks"]
        )
    except pa.ArrowInvalid:  # no such column in this table
        return _read(cfg, "group_members", base)


def _shown_groups(
    state: pd.DataFrame, load: pd.DataFrame | None, rebal: pd.DataFrame, groups: list[str] | None, max_groups: int
) -> list[str]:
    """The groups that get a section (``report_groups.pick_groups``): activity is offset-commit
    records plus rebalances (a share group commits no offsets; its epoch bumps count)."""
    import pandas as pd

    activity = pd.Series(0, index=state["group_id"], dtype="int64")
    if load is not None and not load.empty:
        activity = activity.add(load.groupby("group_id").size(), fill_value=0)
    if not rebal.empty:
        activity = activity.add(rebal.groupby("group_id").size(), fill_value=0)
    activity = activity.reindex(state["group_id"]).fillna(0)  # only groups the state knows get a section
    return report_groups.pick_groups(state, activity, groups, max_groups)


def _overview(
    state: pd.DataFrame,
    rebal: pd.DataFrame,
    offsets: pd.DataFrame | None,
    load: pd.DataFrame | None,
    gm: pd.DataFrame | None,
    figs: _Figures,
) -> str:
    """The cluster overview: KPIs and four figures (the section is closed by the caller's nav)."""
    import plotly.express as px

    is_reb = _is_rebalance(rebal)
    kpis = [
        (f"{len(state):,}", "groups"),
        (f"{int((state['state'] == 'Stable').sum()):,}", "Stable"),
        (f"{int(is_reb.sum()):,}", "rebalances"),
        (minutes_text(rebal[is_reb]), "rebalance minutes (range: starts are inferred)"),
        (estimate_text(rebal[is_reb]), "rebalance minutes (estimate, inside the range)"),
        (f"{0 if offsets is None else len(offsets):,}", "committed offsets"),
        (f"{0 if load is None else len(load):,}", "offset-commit records"),
    ]
    if "death_forecast_from_time" in state.columns:  # due is not dead: still there, counted apart
        due = int(state["death_forecast_from_time"].notna().sum())
        if due:
            kpis.insert(2, (f"{due:,}", "deletion due (a forecast: still Empty, offsets committed)"))
    parts = [
        '<section id="overview"><h2>Cluster overview</h2><div class="kpis">'
        + "".join(f'<div class="kpi"><b>{v}</b><span>{k}</span></div>' for v, k in kpis)
        + "</div>"
    ]
    by_state = state.groupby("state").size().reset_index(name="groups")
    f1 = px.bar(
        by_state, x="state", y="groups", color="state", color_discrete_map=STATE_COLORS, title="Groups by state"
    )
    f1.update_layout(showlegend=False)
    top = minutes_per_group(rebal[is_reb])
    top = top.sort_values("rebalances", ascending=False).head(15).reset_index()
    f2 = px.bar(
        top,
        x="rebalances",
        y="group_id",
        orientation="h",
        title="Top rebalancing groups",
        hover_data=["minutes_min", "minutes_max"],
    )
    f2.update_layout(yaxis={"autorange": "reversed", "title": None})
    parts.append('<div class="grid">' + figs.html(f1) + figs.html(f2) + "</div>")
    f3 = rebalance_minutes_figure(rebal, is_reb)
    f4 = _coordinator_load_figure(load, gm)
    parts.append('<div class="grid">' + figs.html(f3) + figs.html(f4) + "</div>")
    return "".join(parts)


def _coordinator_load_figure(load: pd.DataFrame | None, gm: pd.DataFrame | None) -> Any:
    """Records (offset commits + group metadata) per ``__consumer_offsets`` partition."""
    import pandas as pd
    import plotly.express as px
    import plotly.graph_objects as go

    if load is None or load.empty:
        return go.Figure().update_layout(title="Coordinator load (no offset commits)")
    both = pd.concat(
        [load[["coordinator_partition", "group_id"]], gm[["coordinator_partition", "group_id"]]]
        if gm is not None
        else [load[["coordinator_partition", "group_id"]]]
    )
    cl = both.groupby("coordinator_partition").agg(records=("group_id", "size"), groups=("group_id", "nunique"))
    cl = cl.reset_index().sort_values("records", ascending=False)
    cl["partition"] = cl["coordinator_partition"].astype(str)
    f4 = px.bar(
        cl,
        x="partition",
        y="records",
        hover_data=["groups"],
        title="Coordinator load: records per __consumer_offsets partition",
    )
    f4.update_xaxes(type="category")
    return f4


def _stated_now(cfg: Config) -> tuple[int | None, str]:
    """The one "now" the report's statuses and countdowns are evaluated at (``pipelines.log_clock``):
    epoch ms (None for an empty warehouse) and its text."""

    ms, source = log_clock.now_ms(cfg, driver_io(cfg).read_arrow)
    return ms, "unknown (empty warehouse)" if ms is None else html.escape(f"{fmt_time(_ts(ms))} ({source})")


def _group_section(
    g: str,
    cfg: Config,
    state: pd.DataFrame,
    rebal: pd.DataFrame,
    trans: pd.DataFrame | None,
    members: pd.DataFrame | None,
    offsets: pd.DataFrame | None,
    expirations: tuple[pd.DataFrame | None, pd.DataFrame | None],
    commits: pd.DataFrame | None,
    figs: _Figures,
    now_ms: int | None,
) -> str:
    st = state[state["group_id"] == g].iloc[0]
    color = STATE_COLORS.get(st["state"], "#607d8b")
    due = report_groups.due_text(st, now_ms)
    head = (
        f'<section id="g-{html.escape(g)}" class="group"><h2>{html.escape(g)} '
        f'<span class="state" style="background:{color}">{html.escape(str(st["state"]))}</span></h2>'
        + (f'<p class="due"><b>{due}</b></p>' if due else "")
        + f'<p class="muted">{report_groups.head_line(st)}</p>'
    )
    out = [head]
    # timeline of states (Gantt-like) with generation labels
    timeline = _state_timeline(g, trans, st["last_timestamp"], figs)
    if timeline is not None:
        out.append(timeline)
    r = rebal[rebal["group_id"] == g].sort_values("end_time")
    row = _member_change_figures(r, figs) if not r.empty else []
    heatmap = _commits_heatmap(g, commits, figs) if commits is not None else None
    if heatmap is not None:
        row.append(heatmap)
    if row:
        out.append('<div class="grid">' + "".join(row) + "</div>")
    # members now, expiry forecast, rebalance table
    if members is not None and st["member_count"]:
        out.append("<h3>Current members</h3>" + report_groups.members_table(st, members))
    if not r.empty:
        out.append("<h3>Rebalances (latest 15)</h3>" + _rebalances_table(r))
    out.append("<h3>Expiry forecast</h3>" + _expiry_table(g, cfg, st, offsets, expirations, now_ms))
    out.append("</section>")
    return "".join(out)


def _state_timeline(g: str, trans: pd.DataFrame | None, end: Any, figs: _Figures) -> str | None:
    """The group's states over time from ``group_transitions`` (None when it has none timed)."""
    import pandas as pd
    import plotly.express as px

    t = (
        trans[trans["group_id"] == g].sort_values(["timestamp", "log_partition", "log_offset"])
        if trans is not None
        else None
    )
    if t is None or t.empty or not t["timestamp"].notna().any():
        return None
    t = timeline_rows(t[t["timestamp"].notna()], pd.Timestamp(end) if end is not None else None)
    windows = sorted(x for x in t["shown"].unique() if x not in STATE_COLORS)
    f = px.timeline(
        t,
        x_start="start",
        x_end="finish",
        y="shown",
        color="shown",
        color_discrete_map={**STATE_COLORS, **dict.fromkeys(windows, WINDOW_COLOR)},
        hover_data=["generation", "kind", "cause"],
        title="State timeline (inferred spans are hindsight from the next record; pale bands: when a rebalance "
        "began is only known to lie in that window)",
        category_orders={"shown": [*list(STATE_COLORS)[:1], *windows, *list(STATE_COLORS)[1:]]},
    )
    f.update_layout(showlegend=False, yaxis_title=None)
    return figs.html(f, 260)


def _member_change_figures(r: pd.DataFrame, figs: _Figures) -> list[str]:
    """Members joining/leaving per rebalance and rebalance durations, from the group's rebalances."""
    import pandas as pd
    import plotly.graph_objects as go

    r2 = r.copy()
    r2["joined_n"] = r2["joined"].map(lambda x: 0 if x is None else len(x))
    r2["left_n"] = -r2["left"].map(lambda x: 0 if x is None else len(x))
    r2["at"] = "gen " + r2["generation"].astype(str) + " · " + pd.to_datetime(r2["end_time"]).dt.strftime("%m-%d %H:%M")
    r2["static_n"] = r2["static_rejoined"].map(lambda x: len(_lst(x)))
    fm = go.Figure(
        [
            go.Bar(x=r2["at"], y=r2["joined_n"], name="joined", marker_color="#2563eb"),
            go.Bar(x=r2["at"], y=r2["left_n"], name="left", marker_color="#dc2626"),
            go.Bar(x=r2["at"], y=r2["static_n"], name="static rejoin (no rebalance)", marker_color="#7c3aed"),
        ]
    )
    fm.update_layout(
        title="Members joining / leaving per rebalance", barmode="relative", legend={"orientation": "h", "y": -0.25}
    )
    fm.update_xaxes(type="category")
    rr = r2[_is_rebalance(r2)]
    if rr.empty:  # only static rejoins (e.g. in a --window): no durations to draw
        return [figs.html(fm, 280)]
    fd = duration_figure(rr)
    return [figs.html(fm, 280), figs.html(fd, 280)]


def _commits_heatmap(g: str, commits: pd.DataFrame, figs: _Figures) -> str | None:
    """Commits per minute of the group's 30 busiest partitions (None without commits)."""
    import pandas as pd
    import plotly.graph_objects as go

    c = commits[(commits["group_id"] == g) & (~commits["is_tombstone"])].copy()
    if c.empty:
        return None
    c["tp"] = c["topic"] + "-" + c["partition"].astype(str)
    c["minute"] = pd.to_datetime(c["commit_timestamp"]).dt.floor("min")
    per = c.groupby(["tp", "minute"]).size().rename("commits").reset_index()
    keep = per.groupby("tp")["commits"].sum().sort_values(ascending=False).index[:30]
    grid = per[per["tp"].isin(keep)].pivot(index="tp", columns="minute", values="commits").fillna(0)
    grid = grid.reindex(sorted(grid.index, key=lambda x: (x.rsplit("-", 1)[0], int(x.rsplit("-", 1)[1]))))
    fc = go.Figure(
        go.Heatmap(
            z=grid.values, x=list(grid.columns), y=list(grid.index), colorscale="Blues", colorbar={"title": "commits"}
        )
    )
    fc.update_layout(title=f"Commits per minute, top {len(grid)} partitions")
    return figs.html(fc, 280)


def _rebalances_table(r: pd.DataFrame) -> str:
    """The group's latest 15 rebalances, newest first."""
    show = rebalances_table_columns(r)
    for col in ("cause", "partitions_moved", "protocol"):
        show[col] = r[col]
    show["partitions_moved"] = show["partitions_moved"].astype("Int64")
    show["joined"] = r["joined"].map(lambda x: ", ".join(x) if x is not None else "")
    show["left"] = r["left"].map(lambda x: ", ".join(x) if x is not None else "")
    return html_table(show.tail(15).iloc[::-1])


def _expiry_table(
    g: str,
    cfg: Config,
    st: Any,
    offsets: pd.DataFrame | None,
    expirations: tuple[pd.DataFrame | None, pd.DataFrame | None],
    now_ms: int | None,
) -> str:
    """Predicted expiry of the group's current offsets (core rules; due ones as due: the module
    ``report_groups``' rules) + the last removals seen."""
    import pandas as pd

    expir, predicted = expirations
    retention = cfg.replay.retention_ms
    parts = []
    o = offsets[offsets["group_id"] == g] if offsets is not None else None
    if report_groups.keeps_offsets_elsewhere(st):
        parts.append(f'<p class="muted">{report_groups.SHARE_NOTE}</p>')
    elif retention is not None and o is not None and not o.empty:
        due = due_times(st.to_dict(), o.to_dict("records"), int(retention), cfg.replay.rules)
        mine = None if predicted is None else predicted[predicted["group_id"] == g]
        rows = report_groups.forecast_rows(due, o, mine, now_ms, cfg.replay.cleanup_interval_ms)
        n_due = sum(1 for r in rows if r["expiry"].startswith("due"))
        never = sum(1 for d in due.values() if d is None)
        parts.append(
            f'<p class="muted">retention {retention / 3_600_000:g} h, rules {cfg.replay.rules}: {len(rows)} offsets '
            f"will expire ({n_due} already due, still committed), {never} never expire as the group stands "
            "(not listed)</p>" + (html_table(pd.DataFrame(rows), 20) if rows else "")
        )
    elif retention is None:
        parts.append('<p class="muted">no retention configured (replay.retention_ms): no expiry forecast</p>')
    else:
        parts.append('<p class="muted">no committed offsets held</p>')
    if expir is not None:
        e = expir[(expir["group_id"] == g) & (expir["status"] != "predicted")]  # forecasts are listed above
        if not e.empty:
            parts.append(
                "<h3>Offsets removed</h3>"
                + html_table(
                    e[["topic", "partition", "offset", "cause", "status", "predicted_time", "observed_time"]]
                    .sort_values(["predicted_time", "topic", "partition"])
                    .tail(20)
                )
            )
    return "".join(parts)


def write_report(
    cfg: Config,
    out: str | Path,
    *,
    groups: list[str] | None = None,
    max_groups: int = DEFAULT_MAX_GROUPS,
    since_ms: int | None = None,
    until_ms: int | None = None,
    plotly: str = "inline",
) -> Path:
    """Build the report and write it to ``out``; returns the path."""
    path = Path(out)
    # first: a refusal creates no directory
    text = build_report(cfg, groups=groups, max_groups=max_groups, since_ms=since_ms, until_ms=until_ms, plotly=plotly)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
