"""Analytics views on a generated log with known answers: the real batch job runs once on a
small simulator log (``coordinator_core.simulator.generator``); views are checked against the
simulator's truth (rebalances, static rejoins, members, coordinator partitions), against the
core (offset expiry forecasts) and against the Burrow reference (statuses over real windows
with hand-made end-offset samples). The HTML report on the same warehouse is checked too."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from coordinator_core import LogRecord, OffsetCommitKey, ReplaySettings, decode_record  # noqa: E402
from coordinator_core.simulator.generator import generate  # noqa: E402
from pipelines.analytics.burrow import Commit, evaluate  # noqa: E402
from pipelines.config import Config, load_config  # noqa: E402

SEED = 2  # 6 groups: static groups (one with static rejoins), dynamic apps, ephemeral groups that expire


class World:
    cfg: Config
    truth: dict[str, Any]
    records: list[LogRecord]
    samples: list[dict[str, Any]]
    lag_tp: tuple[str, str, int]


@pytest.fixture(scope="module")
def world(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> World:
    import datetime as dt

    from deltalake import write_deltalake

    from pipelines.analytics.views import register_analytics_views
    from pipelines.commands.sql import register_views
    from pipelines.inputs.raw_files import RawRecord, write_raw_records
    from pipelines.jobs.batch import run_batch
    from pipelines.records.gold import rows_to_arrow
    from schemas import get as get_spec

    log = generate(6, 1.0, seed=SEED)
    w = World()
    w.truth = log.truth
    root = tmp_path_factory.mktemp("analytics")
    w.cfg = load_config(overrides={"paths.root": str(root), "replay.retention_ms": log.truth["retention_ms"]})
    raw = [
        RawRecord(k, v, "__consumer_offsets", p, o, t)
        for k, v, p, o, t in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True)
    ]
    write_raw_records(raw, w.cfg.paths.landing)
    w.records = []
    for r in raw:
        rec = decode_record(r.key, r.value, modern=True)
        w.records.append(LogRecord(r.partition, r.offset, r.timestamp_ms, rec.key, rec.value))
    run_batch(w.cfg, spark)

    # end-offset samples for one busy (group, topic, partition): 1 ms before each commit, with a
    # lag that grows for the first 12 commits (Burrow WARN) and then drops to 0 (OK)
    per_tp: Counter[tuple[str, str, int]] = Counter(
        (r.key.group, r.key.topic, r.key.partition)
        for r in w.records
        if isinstance(r.key, OffsetCommitKey) and r.value is not None
    )
    w.lag_tp = per_tp.most_common(1)[0][0]
    _, topic, part = w.lag_tp
    mine = [
        r
        for r in w.records
        if isinstance(r.key, OffsetCommitKey)
        and r.value is not None
        and (r.key.group, r.key.topic, r.key.partition) == w.lag_tp
    ]
    w.samples = []
    for i, r in enumerate(mine[:40]):
        lag = 5 + i if i < 12 else (0 if i % 7 == 0 else 3)
        w.samples.append(
            {
                "sampled_at": dt.datetime.fromtimestamp((r.value.commit_timestamp - 1) / 1000, dt.UTC),  # type: ignore[union-attr]
                "topic": topic,
                "partition": part,
                "log_start_offset": 0,
                "log_end_offset": r.value.offset + lag,  # type: ignore[union-attr]
                "group_id": None,
                "committed_offset": None,
                "lag_offsets": None,
                "committed_record_timestamp": None,
                "bootstrap_servers": "test:9092",
            }
        )
    spec = get_spec("partition_end_offsets")
    import pyarrow as pa

    write_deltalake(
        w.cfg.table_path("partition_end_offsets"), pa.Table.from_pylist(w.samples, schema=spec.arrow_schema())
    )
    del rows_to_arrow
    register_views(spark, w.cfg)
    register_analytics_views(spark, w.cfg)
    return w


def _rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.sql(sql).collect()]


def test_rebalance_counts_per_group_match_the_simulator(spark: Any, world: World) -> None:
    daily = {
        r["group_id"]: r
        for r in _rows(
            spark,
            "SELECT group_id, sum(rebalances) AS n, sum(ended_empty) AS e, "
            "sum(rebalance_minutes) AS m FROM rebalances_daily GROUP BY group_id",
        )
    }
    hourly = {
        r["group_id"]: r["n"]
        for r in _rows(spark, "SELECT group_id, sum(rebalances) AS n FROM rebalances_hourly GROUP BY group_id")
    }
    for gid, t in world.truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        # a completed rebalance = a new generation; a group going Empty = a rebalance ending empty
        assert daily[gid]["n"] == t["rebalances"] + t["went_empty"], gid
        assert daily[gid]["e"] == t["went_empty"], gid
        assert hourly[gid] == daily[gid]["n"], gid
        assert daily[gid]["m"] >= 0


def test_static_rejoins_without_rebalance_match_the_simulator(spark: Any, world: World) -> None:
    rows = {r["group_id"]: r for r in _rows(spark, "SELECT * FROM static_membership")}
    static = {g for g, t in world.truth["groups"].items() if t["static"] and t["final_state"] != "NeverCreated"}
    assert static and static == set(rows)
    # Kafka 4's coordinator writes a generation-0 record when it creates a classic group
    created = {
        r["group_id"]: r["n"]
        for r in _rows(
            spark,
            "SELECT group_id, count(*) AS n FROM group_metadata WHERE generation = 0 AND NOT is_tombstone "
            "GROUP BY group_id",
        )
    }
    rejoins = 0
    for gid in static:
        t = world.truth["groups"][gid]
        # every group record that is neither a creation, a new generation nor an emptying is a
        # static rejoin
        expected = t["group_records"] - t["rebalances"] - t["went_empty"] - created.get(gid, 0)
        assert rows[gid]["static_rejoins_without_rebalance"] == expected, gid
        assert rows[gid]["rebalances_avoided"] == expected
        assert rows[gid]["static_members"] >= t["members"]
        rejoins += expected
    assert rejoins > 0  # the seed has a group whose restarts caused no rebalance


def test_member_lifetimes_and_churn_agree_with_current_members(spark: Any, world: World) -> None:
    cur = {
        r["group_id"]: r["n"]
        for r in _rows(spark, "SELECT group_id, count_if(current_member) AS n FROM member_lifetimes GROUP BY group_id")
    }
    for gid, t in world.truth["groups"].items():
        if t["exists"] and t["members"]:
            assert cur[gid] == t["members"], gid
    bad = _rows(spark, "SELECT * FROM member_lifetimes WHERE lifetime_ms < 0 OR first_seen > last_seen")
    assert bad == []
    churn = {
        r["group_id"]: r
        for r in _rows(
            spark,
            "SELECT group_id, sum(joined) AS j, sum(`left`) AS l, "
            "sum(static_rejoined) AS s FROM membership_churn GROUP BY group_id",
        )
    }
    for gid, t in world.truth["groups"].items():
        if t["exists"] and t["final_state"] == "Stable":
            # members now = joined - left over the whole history (identity = instance id or member id)
            assert churn[gid]["j"] - churn[gid]["l"] == t["members"], gid


def test_assignor_stickiness_covers_the_assignors_used(spark: Any, world: World) -> None:
    rows = _rows(spark, "SELECT * FROM assignor_stickiness")
    used = {a for t in world.truth["groups"].values() for a in t["assignors"]}
    assert rows and {r["protocol"] for r in rows} <= used
    for r in rows:
        assert 0.0 <= r["stickiness"] <= 1.0
        assert r["partitions_moved"] <= r["partitions_assigned"] or r["partitions_assigned"] == 0


def test_coordinator_load_counts_every_record_of_each_partition(spark: Any, world: World) -> None:
    rows = {r["coordinator_partition"]: r for r in _rows(spark, "SELECT * FROM coordinator_load")}
    per_part = Counter(r.partition for r in world.records)
    groups = defaultdict(set)
    for r in world.records:
        groups[r.partition].add(r.key.group)
    assert {p: r["records"] for p, r in rows.items()} == dict(per_part)
    assert {p: r["groups"] for p, r in rows.items()} == {p: len(g) for p, g in groups.items()}
    for gid, t in world.truth["groups"].items():
        if t["final_state"] != "NeverCreated":
            assert (
                gid in {x["group_id"] for x in rows[t["partition"]]["top_groups"]} or rows[t["partition"]]["groups"] > 3
            )


def test_commit_cadence_counts_every_commit(spark: Any, world: World) -> None:
    rows = {(r["group_id"], r["topic"], r["partition"]): r for r in _rows(spark, "SELECT * FROM commit_cadence")}
    expected = Counter(
        (r.key.group, r.key.topic, r.key.partition)
        for r in world.records
        if isinstance(r.key, OffsetCommitKey) and r.value is not None
    )
    assert {k: r["commits"] for k, r in rows.items()} == dict(expected)
    for r in rows.values():
        if r["commits"] > 1:
            assert 0 <= r["p50_interval_ms"] <= r["p95_interval_ms"] <= r["max_interval_ms"]


def test_offsets_at_risk_uses_the_cores_expiry_forecast(spark: Any, world: World) -> None:
    from coordinator_core import offset_due_times, replay_groups

    retention = world.truth["retention_ms"]
    end = max(r.timestamp_ms for r in world.records)
    snaps = replay_groups(world.records, settings=ReplaySettings(retention_ms=retention), as_of_ms=end, log_end_ms=end)
    want = {}
    for gid, res in snaps.items():
        for (topic, part), due in offset_due_times(res.snapshot, retention).items():
            want[(gid, topic, part)] = due
    rows = _rows(
        spark,
        "SELECT group_id, topic, partition, unix_millis(predicted_expiry_timestamp) AS due, "
        "hours_until_expiry, at_risk, kept_past_due, due AS is_due, expiry_status, "
        "unix_millis(removal_by_timestamp) AS removal_by, unix_millis(as_of) AS as_of FROM offsets_at_risk",
    )
    got = {(r["group_id"], r["topic"], r["partition"]): r["due"] for r in rows}
    assert got == want
    assert got  # (this seed's live groups are Stable consumers: their subscribed offsets never expire)
    interval = world.cfg.replay.cleanup_interval_ms
    horizon = end - world.cfg.stream.watermark_delay_ms  # log_clock.evidence_horizon
    for r in rows:  # retention is 15 min: whatever can expire is within 24 h
        assert r["as_of"] == end
        assert r["removal_by"] == (None if r["due"] is None else r["due"] + interval)
        # due is not dead: due at as_of and its cleanup window not yet passed in the log -> due, at risk;
        # kept past due only when the whole window passed before the log's evidence horizon
        kept = r["due"] is not None and r["due"] + interval < min(end, horizon)
        due = r["due"] is not None and r["due"] <= end and not kept
        assert r["kept_past_due"] == kept and r["is_due"] == due
        assert r["expiry_status"] == ("kept_past_due" if kept else "due" if due else "held")
        assert r["at_risk"] == (r["due"] is not None and not kept)


def _expected_lag(world: World) -> list[tuple[int, int, int | None]]:
    """(commit time, offset, lag) of the sampled partition's commits, by the pure reference
    (``pipelines.analytics.lag``: the log end interpolated between the samples around the commit;
    the oldest sample before the first one, an upper bound)."""
    from pipelines.analytics.lag import Sample, lag_offsets, log_end_at

    samples = [Sample(int(s["sampled_at"].timestamp() * 1000), s["log_end_offset"]) for s in world.samples]
    out = []
    for r in world.records:
        if (
            isinstance(r.key, OffsetCommitKey)
            and r.value is not None
            and (r.key.group, r.key.topic, r.key.partition) == world.lag_tp
        ):
            t, o = r.value.commit_timestamp, r.value.offset
            found = log_end_at(samples, t)
            out.append((t, o, lag_offsets(None if found is None else found[0], o)))
    return out


def test_consumer_lag_interpolates_the_log_end_between_the_samples_around_each_commit(spark: Any, world: World) -> None:
    # issue 17: was "the latest sample at or before each commit", which left every commit made
    # before the first sample (the live flow: capture, batch, then capture-end-offsets) without lag
    g, topic, part = world.lag_tp
    rows = _rows(
        spark,
        f"SELECT unix_millis(commit_timestamp) AS t, offset, lag_offsets FROM consumer_lag "
        f"WHERE group_id = '{g}' AND topic = '{topic}' AND partition = {part} "
        "ORDER BY commit_timestamp, log_partition, log_offset",
    )
    want = _expected_lag(world)
    assert [(r["t"], r["offset"], r["lag_offsets"]) for r in rows] == want
    assert all(lag is not None for _, _, lag in want)  # before the first sample too (an upper bound)
    other = _rows(spark, f"SELECT count(*) AS n FROM consumer_lag WHERE topic <> '{topic}' AND lag_offsets IS NOT NULL")
    assert other[0]["n"] == 0


def test_partition_status_at_each_commit_and_at_any_time_agree_with_the_reference(spark: Any, world: World) -> None:
    from pipelines.analytics.lag import Sample, log_end_at
    from pipelines.analytics.views import partition_status_at

    g, topic, part = world.lag_tp
    rows = _rows(
        spark,
        f"SELECT status FROM partition_status WHERE group_id = '{g}' AND topic = '{topic}' "
        f"AND partition = {part} ORDER BY commit_timestamp, log_partition, log_offset",
    )
    commits = [Commit(o, t, lag) for t, o, lag in _expected_lag(world)]
    want = [evaluate(commits[max(0, i - 9) : i + 1], c.time_ms) for i, c in enumerate(commits)]
    assert [r["status"] for r in rows] == want
    assert {"WARN", "OK"} <= set(want)
    # at a time between two commits, with the current lag from the latest sample
    for i in (5, 11, 20):
        at = commits[i].time_ms + 1
        win = [c for c in commits if c.time_ms <= at][-10:]
        found = log_end_at(
            [Sample(int(s["sampled_at"].timestamp() * 1000), s["log_end_offset"]) for s in world.samples], at
        )
        assert found is not None
        cur = max(found[0] - win[-1].offset, 0)
        got = (
            partition_status_at(spark, at)
            .where(f"group_id = '{g}' AND topic = '{topic}' AND partition = {part}")
            .collect()
        )
        assert [r["status"] for r in got] == [evaluate(win, at, cur)], i


def test_every_view_exists_even_without_optional_tables(spark: Any, world: World) -> None:
    from pipelines.analytics.views import VIEW_NAMES

    for name in VIEW_NAMES:
        spark.table(name).limit(1).collect()


def test_report_is_self_contained_with_a_section_per_group(world: World, tmp_path: Path) -> None:
    from pipelines.analytics.report import write_report

    out = write_report(world.cfg, tmp_path / "r.html")
    text = out.read_text()
    assert not re.search(r"<script[^>]+src=", text)  # every script inline (plotly.js too): opens offline
    live = [g for g, t in world.truth["groups"].items() if t["final_state"] != "NeverCreated"]
    for gid in live:
        assert f'id="g-{gid}"' in text
    n_divs = text.count('class="plotly-graph-div"')
    assert n_divs >= 4 + 2 * len(live)  # 4 overview figures + at least a timeline and one more per group
    assert text.count("plotly.js") >= 1 and len(text) > 1_000_000  # plotly.js inlined
    one = write_report(world.cfg, tmp_path / "one.html", groups=[live[0]])
    assert one.read_text().count('class="group"') == 1


def test_rebalances_daily_day_is_a_date_in_utc(spark: Any, world: World) -> None:
    from pyspark.sql.types import DateType

    assert isinstance(spark.table("rebalances_daily").schema["day"].dataType, DateType)
    # every day's count is the count of that UTC day's hours
    per_day = {(r["group_id"], r["day"]): r["rebalances"] for r in _rows(spark, "SELECT * FROM rebalances_daily")}
    by_hours = _rows(
        spark,
        "SELECT group_id, to_date(hour) AS d, sum(rebalances) AS n FROM rebalances_hourly "
        "GROUP BY group_id, to_date(hour)",
    )
    assert per_day and per_day == {(r["group_id"], r["d"]): r["n"] for r in by_hours}


def test_report_shows_lag_and_status_lists_only_offsets_that_will_expire_and_keeps_a_time_window(
    spark: Any, world: World, tmp_path: Path
) -> None:
    from pipelines.analytics.report import write_report

    text = write_report(world.cfg, tmp_path / "lag.html").read_text()
    assert text.count("window.PlotlyConfig") == 1  # plotly.js once per page
    lag = re.search(r'<section id="lag">.*?</section>', text, re.S)
    assert lag is not None
    groups = _rows(spark, "SELECT group_id, status, total_lag FROM group_status_now")
    assert groups
    for st in groups:  # every group with its Burrow status and total lag, as the view says
        g = st["group_id"]
        row = re.search(
            rf"<tr><td><a href='#g-{re.escape(g)}'>{re.escape(g)}</a></td><td>(.*?)</td><td>(.*?)</td>", lag[0]
        )
        total = "-" if st["total_lag"] is None else f"{st['total_lag']:,}"
        assert row is not None and f">{st['status']}<" in row[1] and row[2] == total, g
    g = groups[0]["group_id"]
    at_risk = re.search(r'<section id="at-risk">.*?</section>', text, re.S)
    assert at_risk is not None
    will = _rows(
        spark,
        "SELECT count(*) AS n FROM offsets_at_risk WHERE predicted_expiry_timestamp IS NOT NULL AND NOT kept_past_due",
    )[0]["n"]
    never = _rows(spark, "SELECT count(*) AS n FROM offsets_at_risk WHERE predicted_expiry_timestamp IS NULL")[0]["n"]
    assert f"{will:,} offsets will expire" in at_risk[0] and f"{never:,} never expire" in at_risk[0]
    assert at_risk[0].count("<tr>") == min(will, 50)  # only the offsets that will expire (pandas' header: styled)
    assert "never (as the group stands)" not in text
    # the group's own section: per-partition lag and status, owner columns
    section = re.search(rf'<section id="g-{re.escape(g)}" class="group">.*?</section>', text, re.S)
    assert section is not None and "<h3>Lag and status</h3>" in section[0] and "consumer id" in section[0]
    # a window after the last rebalance keeps no rebalance history, and says so in the header
    end_ms = world.truth["end_ms"]
    late = write_report(world.cfg, tmp_path / "late.html", since_ms=end_ms + 1).read_text()
    assert "history from" in late and "<h3>Rebalances (latest 15)</h3>" not in late
    assert "<h3>Rebalances (latest 15)</h3>" in text


def test_report_window_option_is_checked_before_anything_is_read(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    conf = tmp_path / "c.yaml"
    conf.write_text(f"paths:\n  root: {Path(world.cfg.paths.warehouse).parent}\n")
    out = tmp_path / "w.html"
    assert main(["report", "--conf", str(conf), "--window", "6 hours", "--out", str(out)]) == 2
    assert "--window" in capsys.readouterr().err and not out.exists()
    assert main(["report", "--conf", str(conf), "--window", "30m", "--out", str(out)]) == 0
    assert "history from" in out.read_text()


def test_report_opens_offline_in_headless_chromium_without_console_errors(world: World, tmp_path: Path) -> None:
    """A real browser, no network (every host unresolvable, a dead proxy): every figure draws
    (plotly.js inlined once), the lag/status and at-risk sections render, the console stays empty."""
    from pipelines.analytics.report import write_report
    from tests.pipelines.browser import render_offline

    page = write_report(world.cfg, tmp_path / "offline.html")
    divs = page.read_text().count('class="plotly-graph-div"')
    run = render_offline(page, tmp_path / "profile")
    assert run.console == []
    dom = run.dom
    assert divs >= 4 and dom.count('class="main-svg"') >= divs  # every figure drawn by plotly.js
    assert '<section id="lag">' in dom and '<section id="at-risk">' in dom and "Lag and status" in dom
