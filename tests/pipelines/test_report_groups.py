"""The HTML report tells every group type and the present tense truly (issues 35 and 33), and
shows the rebalance estimate beside its bounds. No Spark: the gold tables are the jobs' Arrow
replay (``pipelines_helpers.arrow_gold``) written with delta-rs, ``offset_commits`` decoded from
the same raw records.

- The mixed Kafka 4 cluster of ``mixed_log`` (classic, consumer, share and streams groups): the
  header counts groups by type, each section names its type, a streams group's members show
  their tasks by role and process, a share group's section says its positions are in
  ``__share_group_state`` (not read), and a share group keeps a section when the report is capped.
- A generated world (``coordinator_core.simulator.generator``) replayed up to 1 ms before the
  broker deleted a group: the group is due, not dead, and the report says so.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipelines.config import Config, load_config
from tests.pipelines.mixed_log import SHARE_GROUP, STREAMS_GROUP, mixed_log
from tests.pipelines.pipeline_helpers import write_gold_warehouse
from tests.pipelines.test_kafka4_jobs import DAY, raw_table

MINUTE = 60_000


def _warehouse(root: Path, raw: pa.Table, **cfg_overrides: Any) -> tuple[Config, dict[str, pa.Table]]:
    """The gold tables of ``raw`` (and its decoded ``offset_commits``) written with delta-rs."""
    cfg = load_config(overrides={"paths.root": str(root), **cfg_overrides})
    return cfg, write_gold_warehouse(cfg, raw)


def _section(text: str, group: str) -> str:
    m = re.search(rf'<section id="g-{re.escape(group)}" class="group">.*?</section>', text, re.S)
    assert m is not None, group
    return m[0]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, dict[str, pa.Table]]:
    return _warehouse(tmp_path_factory.mktemp("report_mixed"), raw_table(mixed_log()), **{"replay.retention_ms": DAY})


def test_every_group_type_is_counted_named_and_shown_as_its_kind(
    mixed: tuple[Config, dict[str, pa.Table]], tmp_path: Path
) -> None:
    from collections import Counter

    from pipelines.analytics.report import write_report

    cfg, gold = mixed
    state = gold["group_state"].to_pylist()
    types = Counter(r["group_type"] for r in state)
    assert set(types) == {"classic", "consumer", "share", "streams"}
    text = write_report(cfg, tmp_path / "r.html").read_text()
    header = re.search(r"<header>.*?</header>", text, re.S)
    assert header is not None and "consumer groups" not in header[0]
    by_type = " · ".join(f"{types[t]} {t}" for t in ("classic", "consumer", "share", "streams"))
    assert f"{len(state)} groups ({by_type})" in header[0]
    for r in state:  # every section names its group's type
        assert f'<p class="muted">{r["group_type"]} group · ' in _section(text, r["group_id"]), r["group_id"]

    # a streams group's members: process and tasks by role, as group_members' latest rows say
    streams = _section(text, STREAMS_GROUP)
    members = [m for m in gold["group_members"].to_pylist() if m["group_id"] == STREAMS_GROUP]
    (st,) = [r for r in state if r["group_id"] == STREAMS_GROUP]
    assert st["member_count"] == 2
    for cur in st["members"]:
        latest = max((m for m in members if m["member_id"] == cur["member_id"]), key=lambda m: m["generation"])
        cells = {}
        for role in ("active", "standby", "warmup"):
            by: dict[str, list[int]] = {}
            for t in latest["assigned_tasks"] or []:
                if t["role"] == role:
                    by.setdefault(t["subtopology_id"], []).append(t["partition"])
            cells[role] = "; ".join(f"{s}:[{','.join(map(str, sorted(p)))}]" for s, p in sorted(by.items()))
        assert cells["active"]  # every current member runs active tasks in this log
        row = re.search(rf"<td>{re.escape(cur['member_id'])}</td>\s*<td>(.*?)</td>.*?</tr>", streams, re.S)
        assert row is not None and row[1] == latest["process_id"], cur["member_id"]
        tds = re.findall(r"<td>(.*?)</td>", row[0])
        assert tds[4:7] == [cells["active"], cells["standby"], cells["warmup"]], (cur["member_id"], tds)
    assert "process-b" in streams and "1:[0]" in streams  # b's standby task

    # a share group: its positions are elsewhere, said in its lag and expiry parts
    share = _section(text, SHARE_GROUP)
    assert "no committed offsets held (or no retention configured)" not in share
    assert share.count("__share_group_state") >= 3  # the summary line, lag and expiry
    assert "offsetlake does not read" in share and "0 offsets" not in share


def test_a_capped_report_keeps_a_section_for_every_group_type_and_names_the_rest(
    mixed: tuple[Config, dict[str, pa.Table]], tmp_path: Path
) -> None:
    from pipelines.analytics.report import write_report

    cfg, gold = mixed
    state = gold["group_state"].to_pylist()
    text = write_report(cfg, tmp_path / "capped.html", max_groups=4).read_text()
    shown = re.findall(r'<section id="g-([^"]*)" class="group">', text)
    assert len(shown) == 4
    kind = {r["group_id"]: r["group_type"] for r in state}
    assert {kind[g] for g in shown} == {"classic", "consumer", "share", "streams"}
    assert SHARE_GROUP in shown  # a share group commits no offsets: without its group records it ranked last
    rest = re.search(r"Groups without a section here:.*?</ul>", text, re.S)
    assert rest is not None
    for g in kind:  # every group without a section is still named, under its type
        if g not in shown and g:
            assert html.escape(g) in rest[0], g
    counts = {t: sum(1 for g in kind if g not in shown and kind[g] == t) for t in set(kind.values())}
    for t, n in counts.items():
        if n:
            assert f"<li>{n} {t}: " in rest[0], t


@pytest.fixture(scope="module")
def due_world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, dict[str, pa.Table], str, int]:
    """A generated world replayed up to 1 ms before the broker's first group deletion: that group
    is due, its cleanup has not run (the tombstones come 1 ms later)."""
    from coordinator_core.simulator.generator import generate

    log = generate(groups=12, hours=1.5, seed=3, coordinator="new", retention_ms=20 * MINUTE)
    death, group = min((d["time_ms"], g) for g, t in log.truth["groups"].items() for d in t["deaths"])
    at = death - 1
    rows = [
        r for r in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True) if r[4] <= at
    ]
    cfg, gold = _warehouse(
        tmp_path_factory.mktemp("report_due"),
        raw_table(rows),
        **{
            "replay.retention_ms": 20 * MINUTE,
            "replay.as_of_ms": at,
            "replay.cleanup_interval_ms": log.truth["retention_checks"]["interval_ms"],
        },
    )
    return cfg, gold, group, at


def test_a_group_whose_deletion_is_due_reads_as_empty_with_its_forecast_and_due_offsets(
    due_world: tuple[Config, dict[str, pa.Table], str, int], tmp_path: Path
) -> None:
    from pipelines.analytics.report import write_report
    from pipelines.analytics.report_html import fmt_time

    cfg, gold, group, _at = due_world
    (st,) = [r for r in gold["group_state"].to_pylist() if r["group_id"] == group]
    lo, hi = st["death_forecast_from_time"], st["death_forecast_to_time"]
    assert st["exists"] and st["state"] == "Empty" and lo is not None and st["offsets_due"] == st["offset_count"] > 0
    text = write_report(cfg, tmp_path / "due.html").read_text()
    section = _section(text, group)
    assert ">Empty</span>" in section and ">Dead<" not in section
    n_due = sum(1 for r in gold["group_state"].to_pylist() if r["death_forecast_from_time"] is not None)
    assert f"<b>{n_due}</b><span>deletion due (a forecast: still Empty, offsets committed)</span>" in text
    assert (
        f"Empty — deletion due between {fmt_time(lo)} and {fmt_time(hi)} (a forecast, no tombstone yet); "
        f"{st['offset_count']} offsets still committed"
    ) in section
    # the expiry table: every held offset is due, labelled with its removal window (the gold
    # forecast's), none listed as an expiry time in the past
    forecast = section.split("<h3>Expiry forecast</h3>", 1)[1]
    predicted = [
        r for r in gold["offset_expirations"].to_pylist() if r["group_id"] == group and r["status"] == "predicted"
    ]
    assert len(predicted) == st["offset_count"]
    for r in predicted:
        label = f"due, removal between {fmt_time(r['forecast_from_time'])} and {fmt_time(r['forecast_to_time'])}"
        row = f"<td>{html.escape(r['topic'])}</td>\n      <td>{r['partition']}</td>\n      <td>{r['offset']}</td>"
        assert row in forecast and label in forecast, r
    assert f"({st['offset_count']} already due, still committed)" in forecast
    assert "expires " not in forecast
    # due forecasts are not removals
    removed = forecast.split("<h3>Offsets removed</h3>", 1)
    assert len(removed) == 1 or "predicted" not in removed[1]


def test_plotly_inline_by_default_or_from_its_cdn_at_the_installed_version(
    mixed: tuple[Config, dict[str, pa.Table]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from plotly.offline import get_plotlyjs_version

    from pipelines.cli import main

    cfg, _gold = mixed
    conf = tmp_path / "c.yaml"
    conf.write_text(f"paths:\n  root: {Path(cfg.paths.warehouse).parent}\nreplay:\n  retention_ms: {DAY}\n")
    inline, cdn = tmp_path / "inline.html", tmp_path / "cdn.html"
    assert main(["report", "--conf", str(conf), "--out", str(inline)]) == 0
    assert main(["report", "--conf", str(conf), "--plotly", "cdn", "--out", str(cdn)]) == 0
    capsys.readouterr()
    big, small = inline.read_text(), cdn.read_text()
    # the default: plotly.js inside the file (opens offline), the size it costs
    assert not re.search(r"<script[^>]+src=", big) and big.count("window.PlotlyConfig") == 1
    assert inline.stat().st_size > 1_000_000
    # cdn: one script tag to the installed plotly's own plotly.js version, the same figures
    url = f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"
    assert re.findall(r'<script[^>]+src="([^"]+)"', small) == [url]
    assert cdn.stat().st_size < 1_000_000 and cdn.stat().st_size < inline.stat().st_size / 5
    assert small.count('class="plotly-graph-div"') == big.count('class="plotly-graph-div"') > 0
    with pytest.raises(SystemExit) as bad:
        main(["report", "--conf", str(conf), "--plotly", "web", "--out", str(tmp_path / "x.html")])
    assert bad.value.code == 2 and "--plotly" in capsys.readouterr().err and not (tmp_path / "x.html").exists()
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert (
        "plotly.js, inlined so the file opens offline, is ~4.8 MB" in helptext and "--plotly {inline,cdn}" in helptext
    )
