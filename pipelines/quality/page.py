"""offsetlake's own data-docs page: one self-contained HTML file per ``paths.dq_docs`` folder.

Rules:
- The page is ``index.html`` of ``paths.dq_docs`` (what a user opens first); GX's own site index
  is kept beside it as ``gx-index.html`` with its validation pages, linked from the page. GX's
  pages load bootstrap/jquery/font-awesome/vega from CDNs and do not render offline; this one
  does: inline CSS, no script, no external URL (no ``http://`` or ``https://`` anywhere).
- It shows what the runner already has, nothing recomputed: the run (id, time, PASS/FAIL), one
  row per evaluated expectation (table/target, column, check, blocking or warning, result,
  unexpected count and examples or the observed value, error) and the recent runs as the
  ``dq_results`` table holds them (one ``RunSummary`` per run, newest first).
- Pure: rendering takes values and returns text (``render_page``); writing is ``write_page``.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipelines.quality.report import DqReport, Outcome

PAGE_NAME = "index.html"
GX_INDEX_NAME = "gx-index.html"
HISTORY_RUNS = 20

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem;color:#1d2330}
h1{font-size:1.4rem;margin:0 0 .4rem}h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
table{border-collapse:collapse;width:100%;font-size:.85rem}
th,td{border:1px solid #d6dae2;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f1f3f7}tr.fail td{background:#fdecec}tr.warn td{background:#fff7e0}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.8rem;word-break:break-all}
.verdict{display:inline-block;padding:.15rem .6rem;border-radius:.3rem;font-weight:600;color:#fff}
.PASS{background:#2e7d32}.FAIL{background:#c62828}.muted{color:#5f6b7a}
"""


@dataclass(frozen=True)
class RunSummary:
    """One quality run as the ``dq_results`` table records it."""

    run_id: str
    run_timestamp: dt.datetime
    expectations: int
    passed: int
    blocking_failures: int
    warnings: int

    @property
    def verdict(self) -> str:
        return "FAIL" if self.blocking_failures else "PASS"


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _column(kwargs: str) -> str:
    """The column(s) an expectation is about, from its kwargs JSON (``column``,
    ``column_list``, ``column_A``/``column_B``); empty for table-wide checks."""
    try:
        args = json.loads(kwargs) if kwargs else {}
    except ValueError:
        return ""
    if not isinstance(args, dict):
        return ""
    if args.get("column") is not None:
        return str(args["column"])
    if args.get("column_list"):
        return ", ".join(str(c) for c in args["column_list"])
    pair = [str(args[k]) for k in ("column_A", "column_B") if args.get(k) is not None]
    return ", ".join(pair)


def _result_detail(o: Outcome) -> tuple[str, str]:
    """(unexpected count, examples or observed value) as the page shows them."""
    if o.error:
        return "", f"error: {o.error}"
    observed: Any = None
    if o.observed_value is not None:
        try:
            observed = json.loads(o.observed_value)
        except ValueError:
            observed = o.observed_value
    if o.unexpected_count is not None:
        count = f"{o.unexpected_count}/{o.element_count}" if o.element_count is not None else str(o.unexpected_count)
        if isinstance(observed, dict) and "unexpected_count" not in observed:  # a summary target's row
            return count, json.dumps(observed, default=str)
        sample = observed.get("sample") if isinstance(observed, dict) else None
        return count, (json.dumps(sample, default=str) if sample else "")
    if observed is None:
        return "", ""
    return "", observed if isinstance(observed, str) else json.dumps(observed, default=str)


def _outcome_row(o: Outcome) -> str:
    cls = "" if o.success else (' class="fail"' if o.blocking else ' class="warn"')
    count, detail = _result_detail(o)
    return (
        f'<tr{cls} data-expectation="{_e(o.suite)}.{_e(o.expectation)}">'
        f"<td>{_e(o.target)}</td><td>{_e(_column(o.kwargs))}</td>"
        f'<td>{_e(o.suite)}.{_e(o.expectation)}<br><span class="muted">{_e(o.expectation_type)}</span></td>'
        f"<td>{'blocking' if o.blocking else 'warning'}</td>"
        f"<td>{'PASS' if o.success else 'FAIL'}</td>"
        f"<td>{_e(count)}</td><td><code>{_e(detail)}</code></td></tr>"
    )


def _history_rows(history: Sequence[RunSummary], current: str) -> str:
    rows = []
    for r in history:
        mark = " (this run)" if r.run_id == current else ""
        rows.append(
            f"<tr><td>{_e(r.run_id)}{mark}</td><td>{_e(_ts(r.run_timestamp))}</td>"
            f'<td><span class="verdict {r.verdict}">{r.verdict}</span></td>'
            f"<td>{r.expectations}</td><td>{r.passed}</td><td>{r.blocking_failures}</td><td>{r.warnings}</td></tr>"
        )
    return "\n".join(rows)


def _ts(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return f"{value:%Y-%m-%d %H:%M:%S} UTC"


def render_page(report: DqReport, history: Sequence[RunSummary], *, gx_index: str | None = None) -> str:
    """The self-contained HTML page of one run plus the recent runs (newest first).

    Args:
        report: the run, as ``run_quality`` returns it.
        history: recent runs from ``dq_results`` (may include this one; empty when not recorded).
        gx_index: relative path of GX's own site index to link to, if it was built.
    """
    verdict = "PASS" if report.success else "FAIL"
    ordered = sorted(report.outcomes, key=lambda o: (o.success, not o.blocking, o.suite, o.target, o.expectation))
    outcome_rows = "\n".join(_outcome_row(o) for o in ordered)
    passed = sum(o.success for o in report.outcomes)
    gx = (
        f'<p class="muted">Great Expectations\' own pages: <a href="{_e(gx_index)}">{_e(gx_index)}</a> '
        "(they load their styles and scripts from CDNs and need a network connection).</p>"
        if gx_index
        else ""
    )
    history_html = (
        "<table><thead><tr><th>run</th><th>time</th><th>result</th><th>expectations</th><th>passed</th>"
        f"<th>blocking failures</th><th>warnings</th></tr></thead><tbody>\n{_history_rows(history, report.run_id)}"
        "\n</tbody></table>"
        if history
        else '<p class="muted">No runs recorded in dq_results yet.</p>'
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>offsetlake data quality: {_e(report.run_id)} {verdict}</title>
<style>{_CSS}</style></head>
<body>
<h1>offsetlake data quality</h1>
<section id="run">
<p>Run <code id="run-id">{_e(report.run_id)}</code> at {_e(_ts(report.run_timestamp))}:
<span class="verdict {verdict}" id="verdict">{verdict}</span></p>
<p>{len(report.outcomes)} expectations, {passed} passed, {len(report.blocking_failures)} blocking failure(s),
{len(report.warnings)} warning(s).</p>
{gx}
</section>
<section id="expectations">
<h2>Expectations</h2>
<table><thead><tr><th>table</th><th>column</th><th>expectation</th><th>kind</th><th>result</th>
<th>unexpected</th><th>examples / observed</th></tr></thead><tbody>
{outcome_rows}
</tbody></table>
</section>
<section id="history">
<h2>Recent runs</h2>
{history_html}
</section>
</body></html>
"""


def write_page(docs_dir: str, report: DqReport, history: Sequence[RunSummary], *, gx_index: str | None) -> str:
    """Write ``index.html`` into ``docs_dir`` (temp name + rename); returns its path."""
    os.makedirs(docs_dir, exist_ok=True)
    path = os.path.join(docs_dir, PAGE_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render_page(report, history, gx_index=gx_index))
    os.replace(tmp, path)
    return path
