"""The report's rebalance parts: durations as intervals, start windows drawn as uncertainty.

Rules (issue 17):
- A classic group's rebalance start is not in the log; the replay gives a window
  (``rebalances.start_earliest_time`` .. ``start_latest_time``, ``group_transitions.timestamp_earliest``
  .. ``timestamp_latest``) and an estimate inside it (``start_time``, ``timestamp``). Totals are
  ranges: the sum of ``duration_min_ms`` .. the sum of ``duration_max_ms`` (unbounded when a
  window has no earliest start); the point estimate (the sum of ``duration_ms``, each start at
  ``start_time`` inside its window) is shown beside the range, labelled an estimate (issue 33),
  never as the total.
- The state timeline draws the window as its own band ("<state> or PreparingRebalance"),
  between the state before and PreparingRebalance, instead of moving the edge to the estimate.
- Tables written before the windows existed (no such columns) read as exact durations
  (``duration_ms`` both ways) and draw no band.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: the colour of a start window band (a pale PreparingRebalance)
WINDOW_COLOR = "#ffe0b2"


def with_duration_range(rebal: pd.DataFrame) -> pd.DataFrame:
    """``rebal`` with ``duration_min_ms``/``duration_max_ms`` (from ``duration_ms`` when absent)."""
    out = rebal.copy()
    for col in ("duration_min_ms", "duration_max_ms"):
        if col not in out.columns:
            out[col] = out["duration_ms"]
    return out


def minutes_range(rows: pd.DataFrame) -> tuple[float, float | None]:
    """(least, most) rebalance minutes of ``rows``; most is None when a window is unbounded."""
    r = with_duration_range(rows)
    lo = float(r["duration_min_ms"].fillna(0).sum()) / 60000
    unbounded = bool((r["duration_max_ms"].isna() & r["duration_ms"].notna()).any())
    hi = None if unbounded else float(r["duration_max_ms"].fillna(0).sum()) / 60000
    return lo, hi


def minutes_text(rows: pd.DataFrame) -> str:
    """``"1.2–8.5"`` (or ``"≥ 1.2"`` when unbounded; one number when exact)."""
    lo, hi = minutes_range(rows)
    if hi is None:
        return f"≥ {lo:,.1f}"
    if round(hi, 1) == round(lo, 1):
        return f"{lo:,.1f}"
    return f"{lo:,.1f}–{hi:,.1f}"


def estimate_minutes(rows: pd.DataFrame) -> float:
    """The point estimate of ``rows``' rebalance minutes: the sum of ``duration_ms`` (inside
    ``minutes_range``: each estimate lies in its window)."""
    return float(rows["duration_ms"].fillna(0).sum()) / 60000


def estimate_text(rows: pd.DataFrame) -> str:
    """``"≈ 1.8"``."""
    return f"≈ {estimate_minutes(rows):,.1f}"


def minutes_per_group(rows: pd.DataFrame) -> pd.DataFrame:
    """Per group: rebalances, least and most minutes (hover data of the top-groups figure)."""
    r = with_duration_range(rows)
    return r.groupby("group_id").agg(
        rebalances=("cause", "size"),
        minutes_min=("duration_min_ms", lambda s: round(s.fillna(0).sum() / 60000, 2)),
        minutes_max=("duration_max_ms", lambda s: round(s.sum() / 60000, 2) if s.notna().all() else None),
    )


def rebalance_minutes_figure(rebal: pd.DataFrame, is_reb: pd.Series) -> Any:
    """Rebalance minutes per hour as a range: the certain part (the shortest the windows allow)
    and, stacked on it, what the windows leave possible (bars one hour wide)."""
    import pandas as pd
    import plotly.graph_objects as go

    reb_t = with_duration_range(rebal[is_reb & rebal["end_time"].notna()])
    if reb_t.empty:
        return go.Figure().update_layout(title="Rebalance minutes per hour (no rebalances)")
    reb_t["hour"] = pd.to_datetime(reb_t["end_time"]).dt.floor("h")
    per_hour = (
        reb_t.groupby("hour")
        .agg(
            least=("duration_min_ms", lambda s: s.fillna(0).sum() / 60000),
            most=("duration_max_ms", lambda s: s.fillna(0).sum() / 60000),
            estimate=("duration_ms", lambda s: s.fillna(0).sum() / 60000),
            rebalances=("cause", "size"),
        )
        .reset_index()
    )
    width, offset = 3_600_000 * 0.8, 3_600_000 * 0.1
    f = go.Figure(
        [
            go.Bar(
                x=per_hour["hour"], y=per_hour["least"], name="at least", marker_color="#ff9800",
                width=width, offset=offset, customdata=per_hour["rebalances"],
                hovertemplate="%{x}<br>at least %{y:.1f} min<br>%{customdata} rebalances<extra></extra>",
            ),
            go.Bar(
                x=per_hour["hour"], y=(per_hour["most"] - per_hour["least"]).clip(lower=0), name="possibly",
                marker={"color": WINDOW_COLOR, "pattern": {"shape": "/"}}, width=width, offset=offset,
                customdata=per_hour["most"],
                hovertemplate="%{x}<br>at most %{customdata:.1f} min<extra></extra>",
            ),
            go.Scatter(
                x=per_hour["hour"] + pd.Timedelta(milliseconds=offset + width / 2), y=per_hour["estimate"],
                name="estimate", mode="markers", marker={"symbol": "diamond", "size": 10, "color": "#1f2937"},
                hovertemplate="%{x}<br>estimate %{y:.1f} min<extra></extra>",
            ),
        ]
    )  # fmt: skip
    f.update_layout(
        barmode="stack",
        title="Rebalance minutes per hour: the estimate (◆) inside the range the log allows (it does not store "
        "when rebalances began)",
        legend={"orientation": "h", "y": -0.2},
    )
    f.update_xaxes(
        range=[per_hour["hour"].min() - pd.Timedelta(hours=1), per_hour["hour"].max() + pd.Timedelta(hours=2)],
        tickformat="%b %d %H:%M",
    )
    return f


def duration_figure(rr: pd.DataFrame) -> Any:
    """Each rebalance's duration: the estimate, with the interval its start window allows."""
    import plotly.graph_objects as go

    r = with_duration_range(rr)
    est = r["duration_ms"].fillna(0) / 1000
    lo = r["duration_min_ms"].fillna(r["duration_ms"]).fillna(0) / 1000
    hi = r["duration_max_ms"].fillna(r["duration_ms"]).fillna(0) / 1000
    f = go.Figure(
        go.Bar(
            x=r["generation"].astype(str),
            y=est,
            marker_color="#ff9800",
            error_y={"type": "data", "array": (hi - est).clip(lower=0), "arrayminus": (est - lo).clip(lower=0)},
            customdata=list(zip(lo, hi, r["cause"], strict=True)),
            hovertemplate="gen %{x}: estimate %{y:.1f} s, between %{customdata[0]:.1f} and %{customdata[1]:.1f} s"
            "<br>%{customdata[2]}<extra></extra>",
        )
    )
    f.update_layout(title="Rebalance duration per generation (s: estimate, bars: what the log allows)")
    f.update_xaxes(type="category", title="generation")
    f.update_yaxes(title="seconds")
    return f


def timeline_rows(t: pd.DataFrame, end: Any) -> pd.DataFrame:
    """A group's transitions (sorted, timed) as timeline spans: ``start``/``finish``/``shown``
    (the state drawn), with each inferred start's window as its own span."""
    import pandas as pd

    t = t.reset_index(drop=True)
    has_window = "timestamp_latest" in t.columns
    spans: list[dict[str, Any]] = []
    for i, row in t.iterrows():
        start = row["timestamp"]
        finish = t["timestamp"].iloc[i + 1] if i + 1 < len(t) else end
        latest = row["timestamp_latest"] if has_window else None
        if latest is not None and not pd.isna(latest) and row["from_state"] is not None:
            earliest = row["timestamp_earliest"]
            lo = spans[-1]["start"] if pd.isna(earliest) and spans else earliest
            if not pd.isna(lo) and lo < latest:  # a window of one instant is no uncertainty
                if spans and spans[-1]["finish"] > lo:
                    spans[-1]["finish"] = lo  # the state before is certain only up to the window
                spans.append(
                    {
                        **row.to_dict(),
                        "start": lo,
                        "finish": latest,
                        "shown": f"{row['from_state']} or {row['to_state']}",
                        "kind": f"window ({row.get('estimate_method')}: estimate {row['timestamp']})",
                    }
                )
                start = latest
        spans.append(
            {
                **row.to_dict(),
                "start": start,
                "finish": finish,
                "shown": row["to_state"],
                "kind": "observed" if row["observed"] else "inferred",
            }
        )
    out = pd.DataFrame(spans)
    out = out[out["finish"] >= out["start"]].copy()
    zero = out["finish"] == out["start"]
    out.loc[zero, "finish"] = out.loc[zero, "start"] + pd.Timedelta(milliseconds=500)
    return out


def rebalances_table_columns(r: pd.DataFrame) -> pd.DataFrame:
    """The rebalances table's time columns: estimated start, its window, duration as a range."""
    import pandas as pd

    show = r[["generation", "start_time"]].copy()
    if "start_latest_time" in r.columns:
        window = [
            "" if pd.isna(hi) else f"{'…' if pd.isna(lo) else str(lo)} .. {hi} ({m})"
            for lo, hi, m in zip(r["start_earliest_time"], r["start_latest_time"], r["start_method"], strict=True)
        ]
        show["start window (estimate method)"] = window
    show["end_time"] = r["end_time"]
    show["duration_ms"] = r["duration_ms"].astype("Int64")
    rr = with_duration_range(r)
    show["duration range ms"] = [
        "" if pd.isna(d) else f"{int(lo) if not pd.isna(lo) else '?'}–{int(hi) if not pd.isna(hi) else '?'}"
        for d, lo, hi in zip(rr["duration_ms"], rr["duration_min_ms"], rr["duration_max_ms"], strict=True)
    ]
    return show
