"""The report's HTML pieces every section uses: a time as text, a DataFrame as a table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def fmt_time(ts: Any) -> str:
    """``YYYY-MM-DD HH:MM:SS``, or ``-`` for no time."""
    import pandas as pd

    if ts is None or (not isinstance(ts, (list, tuple)) and pd.isna(ts)):
        return "-"
    return str(pd.Timestamp(ts).strftime("%Y-%m-%d %H:%M:%S"))


def html_table(df: pd.DataFrame, max_rows: int = 30) -> str:
    """At most ``max_rows`` rows as an HTML table (times as ``fmt_time``; ``none`` when empty)."""
    import pandas as pd

    if df is None or df.empty:
        return '<p class="muted">none</p>'
    df = df.head(max_rows).copy()
    for col in df.columns:
        if pd.api.types.is_datetime64_any_dtype(df[col]):
            df[col] = df[col].map(fmt_time)
        else:
            df[col] = df[col].map(lambda v: "-" if v is None or (isinstance(v, float) and pd.isna(v)) else v)
    return str(df.to_html(index=False, border=0, escape=True, na_rep="-"))
