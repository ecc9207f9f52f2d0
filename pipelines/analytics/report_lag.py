"""The report's lag, status and at-risk parts (``pipelines.analytics.report`` places them).

Rules:
- Read through the analytics views' one definition, answered by DuckDB (no JVM):
  ``group_status_now`` (total/max lag, max time lag, Burrow's group status),
  ``partition_status_now`` (per partition: log end, lag, time lag, status, above the log end) and
  ``offsets_at_risk`` (the core's expiry forecast). Owners come from ``group_state``'s members.
- The at-risk summary lists only offsets that WILL expire (a predicted time, not yet kept past
  due), soonest first; offsets that never expire as their group stands are counted, not listed.
- Without ``partition_end_offsets`` the lag parts say how to get samples instead of showing
  empty tables.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.analytics.duck import DuckDBSession
from pipelines.analytics.report_html import html_table
from pipelines.analytics.transpile import to_duckdb
from pipelines.analytics.views import view_closure
from pipelines.tableio import TableIO

if TYPE_CHECKING:
    import pandas as pd

    from pipelines.config import Config

STATUS_COLORS = {
    "OK": "#16a34a",
    "WARN": "#f59e0b",
    "ERR": "#dc2626",
    "STOP": "#dc2626",
    "STALL": "#dc2626",
    "REWIND": "#dc2626",
    "UNKNOWN": "#94a3b8",
}
MAX_AT_RISK_ROWS = 50


@dataclass
class LagData:
    """What the report shows of lag and status, read once."""

    sampled: bool
    groups: pd.DataFrame
    partitions: pd.DataFrame
    at_risk: pd.DataFrame
    never: int
    owners: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)


def read_lag(cfg: Config, state: pd.DataFrame) -> LagData:
    """Query the views once (DuckDB)."""

    io = TableIO(cfg, None, engine="rust")
    s = DuckDBSession(io)
    s.register(view_closure(["group_status_now", "offsets_at_risk"], cfg, replayed_commits=s.replayed_commits))

    def df(sql: str) -> pd.DataFrame:
        return s.query(to_duckdb(sql)).to_pandas()

    due = df(
        "SELECT group_id, topic, partition, offset, predicted_expiry_timestamp AS expires, hours_until_expiry, "
        "at_risk, kept_past_due FROM offsets_at_risk"
    )
    will = due[due["expires"].notna() & ~due["kept_past_due"].fillna(False).astype(bool)]
    owners = {
        (g, a["topic"], int(a["partition"])): m
        for g, members in zip(state["group_id"], state["members"])
        for m in (members if members is not None and not isinstance(members, float) else [])
        for a in (m["assigned_partitions"] if m["assigned_partitions"] is not None else [])
    }
    return LagData(
        sampled=io.exists("partition_end_offsets"),
        groups=df("SELECT * FROM group_status_now ORDER BY group_id"),
        partitions=df(
            "SELECT p.group_id, p.topic, p.partition, p.last_offset, p.log_end_offset, p.current_lag, p.lag_ms, "
            "p.status, p.ahead_of_end, p.last_commit FROM partition_status_now p JOIN offsets_current o "
            "ON o.group_id = p.group_id AND o.topic = p.topic AND o.partition = p.partition "
            "ORDER BY p.group_id, p.topic, p.partition"
        ),
        at_risk=will.sort_values(["expires", "group_id", "topic", "partition"]).drop(columns=["kept_past_due"]),
        never=int(due["expires"].isna().sum()),
        owners=owners,
    )


def _badge(status: str) -> str:
    color = STATUS_COLORS.get(status, "#607d8b")
    # white text set inline: the KPI tiles colour their spans (a badge there was red on red)
    return f'<span class="state" style="background:{color};color:#fff">{html.escape(status)}</span>'


def _seconds(ms: Any) -> str:
    import pandas as pd

    return "-" if ms is None or pd.isna(ms) else f"{float(ms) / 1000:,.1f} s"


def _num(v: Any) -> str:
    import pandas as pd

    return "-" if v is None or pd.isna(v) else f"{int(v):,}"


def overview_section(data: LagData) -> str:
    """The cluster's lag and status: groups per status, then the groups, worst first."""
    if not data.sampled:
        body = (
            '<p class="muted">no end-offset samples in this warehouse: lag and status need them '
            "(run <code>offsetlake capture-end-offsets --conf ...</code>); every status is UNKNOWN.</p>"
        )
        return f'<section id="lag"><h2>Lag and status</h2>{body}</section>'
    g = data.groups
    order = {"ERR": 0, "WARN": 1, "OK": 2, "UNKNOWN": 3}
    counts = g["status"].value_counts().to_dict() if not g.empty else {}
    kpis = "".join(
        f'<div class="kpi"><b>{counts.get(s, 0):,}</b><span>{_badge(s)}</span></div>'
        for s in ("ERR", "WARN", "OK", "UNKNOWN")
    )
    rows = "".join(
        f"<tr><td><a href='#g-{html.escape(r.group_id)}'>{html.escape(r.group_id)}</a></td><td>{_badge(r.status)}</td>"
        f"<td>{_num(r.total_lag)}</td><td>{_num(r.max_lag)}</td><td>{_seconds(r.max_lag_ms)}</td>"
        f"<td>{_num(r.partitions_with_lag)} / {_num(r.partitions)}</td><td>{_num(r.offsets_ahead_of_end)}</td></tr>"
        for r in sorted(g.itertuples(), key=lambda r: (order.get(r.status, 9), -(r.total_lag or 0), r.group_id))
    )
    table = (
        "<table><tr><th>group</th><th>status</th><th>total lag</th><th>max lag</th><th>max time lag</th>"
        f"<th>partitions with lag</th><th>offsets above log end</th></tr>{rows}</table>"
    )
    note = (
        '<p class="muted">Burrow\'s rules: a partition is OK unless its lag is above 0 at every one of its last 10 '
        "commits; then STOP (no commit for longer than the window spans), STALL (offset not moving), REWIND "
        "(offset went back) or WARN (lag never falling). A group is ERR if any partition is STOP, STALL or REWIND, "
        "else WARN if any is WARN. Lag is the newest end-offset sample minus the committed offset.</p>"
    )
    return f'<section id="lag"><h2>Lag and status</h2><div class="kpis">{kpis}</div>{note}{table}</section>'


def at_risk_section(data: LagData, retention_ms: int | None, rules: str) -> str:
    """Offsets that will expire, soonest first (only those: the module rules)."""

    if retention_ms is None:
        return '<section id="at-risk"><h2>Offsets at risk</h2><p class="muted">no retention configured</p></section>'
    r = data.at_risk
    soon = int(r["at_risk"].sum()) if not r.empty else 0
    head = (
        f'<p class="muted">retention {retention_ms / 3_600_000:g} h, rules {rules}: {len(r):,} offsets will expire '
        f"({soon:,} within 24 h); {data.never:,} never expire as their groups stand (not listed).</p>"
    )
    shown = r.head(MAX_AT_RISK_ROWS)
    more = f'<p class="muted">… and {len(r) - len(shown):,} more</p>' if len(r) > len(shown) else ""
    return f'<section id="at-risk"><h2>Offsets at risk</h2>{head}{html_table(shown, MAX_AT_RISK_ROWS)}{more}</section>'


def group_lag_table(g: str, data: LagData) -> str:
    """One group's partitions: owner, offsets, lag, time lag, status (``kafka-consumer-groups --describe``)."""
    if not data.sampled:
        return '<p class="muted">no end-offset samples: lag unknown</p>'
    p = data.partitions[data.partitions["group_id"] == g]
    if p.empty:
        return '<p class="muted">no committed offsets held</p>'
    grow = data.groups[data.groups["group_id"] == g]
    summary = ""
    if not grow.empty:
        r = grow.iloc[0]
        summary = (
            f"<p>{_badge(str(r['status']))} total lag {_num(r['total_lag'])} · max lag {_num(r['max_lag'])} · "
            f"max time lag {_seconds(r['max_lag_ms'])}</p>"
        )
    rows = []
    for x in p.itertuples():
        owner = data.owners.get((g, x.topic, int(x.partition)))
        ahead = " (above log end)" if x.ahead_of_end else ""
        rows.append(
            f"<tr><td>{html.escape(x.topic)}</td><td>{x.partition}</td><td>{_num(x.last_offset)}</td>"
            f"<td>{_num(x.log_end_offset)}</td><td>{_num(x.current_lag)}{ahead}</td><td>{_seconds(x.lag_ms)}</td>"
            f"<td>{_badge(x.status)}</td><td>{html.escape(str(owner['member_id'])) if owner else '-'}</td>"
            f"<td>{html.escape(str(owner['client_host'] or '-')) if owner else '-'}</td></tr>"
        )
    head = (
        "<tr><th>topic</th><th>partition</th><th>current offset</th><th>log end</th><th>lag</th>"
        "<th>time lag</th><th>status</th><th>consumer id</th><th>host</th></tr>"
    )
    return f"{summary}<table>{head}{''.join(rows[:100])}</table>"
