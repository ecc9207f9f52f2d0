"""Issue 17 in the HTML report: rebalance minutes are a range, the timeline draws each inferred
start's window as its own band. Gold tables are written straight from the core's rows (delta-rs,
no Spark), on a generated log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from coordinator_core import LogRecord, decode_record, replay_groups
from coordinator_core.simulator.generator import generate
from pipelines.config import Config, load_config


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, dict[str, list[dict[str, Any]]]]:
    from deltalake import write_deltalake

    from pipelines.records.gold import GOLD_SPECS, rows_to_arrow
    from pipelines.records.replay import gold_rows

    log = generate(6, 1.0, seed=2)
    cfg = load_config(overrides={"paths.root": str(tmp_path_factory.mktemp("report"))})
    recs = []
    for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True):
        rec = decode_record(k, v, modern=True)
        recs.append(LogRecord(p, o, ts, rec.key, rec.value))
    names = ("group_state", "rebalances", "group_transitions")
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for result in replay_groups(recs).values():  # the rows the jobs write (pipelines.records.replay)
        for name, part in gold_rows(result, tables=names).items():
            rows[name].extend(part)
    for name in names:
        write_deltalake(cfg.table_path(name), rows_to_arrow(GOLD_SPECS[name], rows[name]))
    return cfg, rows


def test_rebalance_minutes_headline_is_the_range_the_windows_allow(
    warehouse: tuple[Config, dict[str, list[dict[str, Any]]]], tmp_path: Path
) -> None:
    from pipelines.analytics.report import write_report

    cfg, rows = warehouse
    reb = [r for r in rows["rebalances"] if r["cause"] in ("new_generation", "ended_empty", "first_record")]
    assert any(r["duration_min_ms"] != r["duration_max_ms"] for r in reb)
    lo = sum(r["duration_min_ms"] or 0 for r in reb) / 60000
    unbounded = any(r["duration_max_ms"] is None and r["duration_ms"] is not None for r in reb)
    text = write_report(cfg, tmp_path / "r.html").read_text()
    kpi = re.findall(r"<b>([^<]*)</b><span>rebalance minutes \(range[^<]*</span>", text)
    hi = None if unbounded else sum(r["duration_max_ms"] or 0 for r in reb) / 60000
    if hi is None:
        assert kpi == [f"≥ {lo:,.1f}"]
    else:
        assert kpi == [f"{lo:,.1f}–{hi:,.1f}"]
    # the point estimate beside the range (issue 33): the sum of the estimated durations, inside it
    est = sum(r["duration_ms"] or 0 for r in reb) / 60000
    assert any(r["duration_ms"] != r["duration_min_ms"] for r in reb if r["duration_ms"] is not None)
    assert lo < est and (hi is None or est <= hi)
    (shown,) = re.findall(r"<b>≈ ([^<]*)</b><span>rebalance minutes \(estimate, inside the range\)</span>", text)
    assert shown == f"{est:,.1f}"
    # the per-hour figure and the duration figure show the interval, not one number
    assert "at least" in text and "possibly" in text and "what the log allows" in text


def test_rebalance_minutes_figure_marks_each_hours_estimate_inside_its_bars(
    warehouse: tuple[Config, dict[str, list[dict[str, Any]]]],
) -> None:
    import pandas as pd

    from pipelines.analytics.report import _is_rebalance, _read
    from pipelines.analytics.report_rebalances import rebalance_minutes_figure

    cfg, rows = warehouse
    rebal = _read(cfg, "rebalances")
    assert rebal is not None
    fig = rebalance_minutes_figure(rebal, _is_rebalance(rebal))
    least, possibly, estimate = fig.data
    assert (least.name, possibly.name, estimate.name) == ("at least", "possibly", "estimate")
    reb = [r for r in rows["rebalances"] if r["cause"] in ("new_generation", "ended_empty", "first_record")]
    want = sum(r["duration_ms"] or 0 for r in reb if r["end_ms"] is not None) / 60000
    assert sum(estimate.y) == pytest.approx(want)
    for lo, extra, est in zip(least.y, possibly.y, estimate.y, strict=True):
        assert lo - 1e-9 <= est <= lo + extra + 1e-9  # inside the hour's stacked range
    assert all(pd.Timestamp(x).minute == 30 for x in estimate.x)  # drawn at the bar's middle


def test_timeline_draws_each_start_window_as_a_band_between_the_states(
    warehouse: tuple[Config, dict[str, list[dict[str, Any]]]],
) -> None:
    import pandas as pd

    from pipelines.analytics.report import _read
    from pipelines.analytics.report_rebalances import timeline_rows

    cfg, _rows = warehouse
    trans = _read(cfg, "group_transitions")
    assert trans is not None
    checked = 0
    for g, t in trans.groupby("group_id"):
        t = t[t["timestamp"].notna()].sort_values(["timestamp", "log_partition", "log_offset"])
        spans = timeline_rows(t, t["timestamp"].max() + pd.Timedelta(minutes=1)).reset_index(drop=True)
        for i, s in spans.iterrows():
            if " or " not in s["shown"] or pd.isna(s["timestamp_earliest"]):
                continue
            assert s["shown"] in ("Stable or PreparingRebalance", "Empty or PreparingRebalance"), s["shown"]
            assert (s["start"], s["finish"]) == (s["timestamp_earliest"], s["timestamp_latest"])
            # the state before ends where the window begins (a span of one instant is drawn 500 ms
            # wide); PreparingRebalance starts at the window's end
            before, after = spans.iloc[i - 1], spans.iloc[i + 1]
            assert before["finish"] <= s["start"] + pd.Timedelta(milliseconds=500), g
            assert after["shown"] == "PreparingRebalance", g
            assert after["start"] == s["timestamp_latest"], g
            checked += 1
    assert checked > 0
