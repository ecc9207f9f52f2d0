"""Issue 33, the present tense: due is not dead, and "now" is now (no Spark).

The warehouse is written with delta-rs from the pure replay functions (the batch job's own) over
``sample_records(8, seed=3)``: its log ends at 22:14:26.126; ``billing-consumer-2`` went Empty at
22:14:01.380 with 6 offsets, ``shipping-consumer-5`` at 22:14:25.007 with 3; the others are
Stable consumers of their topics (their offsets never expire). With a 10 s retention billing's
offsets fall due at 22:14:11.380, inside the log, and the broker's next cleanup removes them
within ``replay.cleanup_interval_ms`` (600 s) after: at the log end they are due, still held, at
risk. Expected values are computed here from the tables and the config, not taken from the code
under test.
"""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

RETENTION_MS = 10_000
INTERVAL_MS = 600_000  # replay.cleanup_interval_ms's default: the gold tables' replay uses it
DUE_GROUP = "billing-consumer-2"
SOON_GROUP = "shipping-consumer-5"


def _raw() -> pa.Table:
    from tests.pipelines.pipeline_helpers import sample_raw

    return sample_raw(8, seed=3)


def _warehouse(root: Path, **overrides: Any) -> Any:
    """Gold tables of the sample log (retention 10 s) and ``raw_records``; ``overrides``: the
    configuration the views and commands read (the tables stay the same)."""
    from pipelines.config import load_config
    from pipelines.tableio import append_arrow_at, conform_arrow
    from schemas import get as get_spec
    from tests.pipelines.pipeline_helpers import arrow_gold

    cfg = load_config(overrides={"paths.root": str(root), "replay.retention_ms": RETENTION_MS, **overrides})
    raw = _raw()
    for name, table in arrow_gold(raw, retention_ms=RETENTION_MS).items():
        append_arrow_at(cfg.table_path(name), conform_arrow(table, get_spec(name)))
    schema = get_spec("raw_records").arrow_schema()
    records = raw.append_column("timestampType", pa.array([0] * raw.num_rows, pa.int32()))
    append_arrow_at(cfg.table_path("raw_records"), records.select(schema.names).cast(schema))
    return cfg


def _at_risk(cfg: Any) -> dict[tuple[str, str, int], dict[str, Any]]:
    from pipelines.analytics.duck import DuckDBSession
    from pipelines.analytics.transpile import to_duckdb
    from pipelines.analytics.views import view_closure
    from pipelines.tableio import TableIO

    s = DuckDBSession(TableIO(cfg, None, engine="rust"))
    s.register(view_closure(["offsets_at_risk"], cfg, replayed_commits=s.replayed_commits))
    rows = s.query(
        to_duckdb(
            "SELECT group_id, topic, partition, unix_millis(predicted_expiry_timestamp) AS due_ms, "
            "unix_millis(removal_by_timestamp) AS removal_by_ms, unix_millis(as_of) AS as_of_ms, "
            "hours_until_expiry, at_risk, kept_past_due, due, expiry_status FROM offsets_at_risk"
        )
    ).to_pylist()
    return {(r["group_id"], r["topic"], r["partition"]): r for r in rows}


def _state(cfg: Any) -> dict[str, dict[str, Any]]:
    from pipelines.tableio import TableIO

    t = TableIO(cfg, None, engine="rust").read_arrow("group_state")
    assert t is not None
    return {r["group_id"]: r for r in t.to_pylist()}


def _ms(t: Any) -> int:
    return int(t.timestamp() * 1000)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _warehouse(tmp_path_factory.mktemp("due"))


# ---- A: offsets_at_risk and the metrics --------------------------------------------------------
def test_an_offset_due_inside_its_cleanup_window_is_due_and_at_risk_not_kept(cfg: Any) -> None:
    state = _state(cfg)
    end = max(_ms(g["last_timestamp"]) for g in state.values())
    empty_since = _ms(state[DUE_GROUP]["state_timestamp"])
    assert state[DUE_GROUP]["state"] == "Empty" and state[DUE_GROUP]["exists"]
    rows = _at_risk(cfg)
    due = {k: r for k, r in rows.items() if k[0] == DUE_GROUP}
    assert len(due) == state[DUE_GROUP]["offset_count"] == 6
    for r in due.values():
        # due when the group went Empty + retention, inside the log; removal by due + interval
        assert r["as_of_ms"] == end and r["due_ms"] == empty_since + RETENTION_MS <= end
        assert r["removal_by_ms"] == r["due_ms"] + INTERVAL_MS > end
        assert r["hours_until_expiry"] < 0
        assert (r["expiry_status"], r["due"], r["at_risk"], r["kept_past_due"]) == ("due", True, True, False)
    soon = [r for k, r in rows.items() if k[0] == SOON_GROUP]
    assert soon and all(
        (r["expiry_status"], r["due"], r["at_risk"], r["kept_past_due"]) == ("held", False, True, False)
        and r["due_ms"] > end
        for r in soon
    )
    never = [r for k, r in rows.items() if k[0] not in (DUE_GROUP, SOON_GROUP)]
    assert never and all(
        r["due_ms"] is None and r["removal_by_ms"] is None and r["expiry_status"] == "held" and not r["at_risk"]
        for r in never
    )


def test_kept_past_due_only_once_the_whole_window_passed_inside_the_log(tmp_path: Path) -> None:
    """The tables were replayed with a 600 s cleanup interval; read with a 5 s one (and no
    watermark delay), billing's window ends at 22:14:16.380, before the log does, and the log
    still holds its offsets: the broker kept them (its settings differ from the configured)."""
    cfg = _warehouse(tmp_path, **{"replay.cleanup_interval_ms": 5_000, "stream.watermark_delay_ms": 0})
    rows = _at_risk(cfg)
    kept = [r for k, r in rows.items() if k[0] == DUE_GROUP]
    assert len(kept) == 6
    assert all(
        r["removal_by_ms"] == r["due_ms"] + 5_000 < r["as_of_ms"]
        and (r["expiry_status"], r["due"], r["at_risk"], r["kept_past_due"]) == ("kept_past_due", False, False, True)
        for r in kept
    )
    # a now past the window but after the log's end: nothing in the log says the cleanup ran
    later = _warehouse(
        tmp_path / "later",
        **{"replay.cleanup_interval_ms": 5_000, "replay.as_of_ms": max(r["removal_by_ms"] for r in kept) + 60_000},
    )
    assert all(r["expiry_status"] == "due" and r["at_risk"] for k, r in _at_risk(later).items() if k[0] == DUE_GROUP)


def test_metrics_count_due_offsets_at_risk_with_their_removal_window(cfg: Any) -> None:
    from pipelines.serve import metrics
    from pipelines.tableio import TableIO

    snap = metrics.collect(TableIO(cfg, None, engine="rust"))
    text = metrics.render(snap, "test")
    rows = _at_risk(cfg)

    def family(name: str) -> dict[tuple[str, ...], float]:
        out = {}
        for line in text.splitlines():
            if line.startswith(name + "{"):
                labels = dict(kv.split("=", 1) for kv in line[len(name) + 1 : line.rindex("}")].split(","))
                key = tuple(labels[k].strip('"') for k in ("group", "topic", "partition") if k in labels)
                out[key] = float(line.rsplit(" ", 1)[1])
        return out

    due = {(g, t, str(p)): r for (g, t, p), r in rows.items() if r["due_ms"] is not None}
    assert {k for k in due if k[0] == DUE_GROUP}  # the due offsets are in the expiry gauges
    assert family("kafka_consumergroup_offset_expiry_timestamp_seconds") == {
        k: r["due_ms"] / 1000 for k, r in due.items()
    }
    assert family("kafka_consumergroup_offset_expiry_latest_timestamp_seconds") == {
        k: (r["due_ms"] + INTERVAL_MS) / 1000 for k, r in due.items()
    }
    assert family("kafka_consumergroup_group_offsets_at_risk") == {(DUE_GROUP,): 6, (SOON_GROUP,): 3}
    assert family("kafka_consumergroup_group_offsets_due") == {(DUE_GROUP,): 6, (SOON_GROUP,): 0}
    # the group's deletion: its window, earliest and latest (group_lifecycle's forecast)
    from pipelines.tableio import TableIO as _IO

    life = _IO(cfg, None, engine="rust").read_arrow("group_lifecycle")
    assert life is not None
    predicted = [r for r in life.to_pylist() if r["event"] == "group_deleted" and r["status"] == "predicted"]
    assert predicted
    assert family("kafka_consumergroup_group_deletion_timestamp_seconds") == {
        (r["group_id"],): _ms(r["predicted_time"]) / 1000 for r in predicted
    }
    assert family("kafka_consumergroup_group_deletion_latest_timestamp_seconds") == {
        (r["group_id"],): (_ms(r["predicted_time"]) + INTERVAL_MS) / 1000 for r in predicted
    }


# ---- B: inspect --------------------------------------------------------------------------------
def test_inspect_labels_a_due_offset_due_with_its_removal_window(cfg: Any) -> None:
    from rich.console import Console

    from pipelines.analytics.inspect import fmt_ms, inspect_group
    from pipelines.analytics.inspect_render import render

    view = inspect_group(cfg, DUE_GROUP)
    assert view.expiring and all(e["status"] == "due" and e["expires_ms"] <= view.as_of_ms for e in view.expiring)
    out = io.StringIO()
    render(view, Console(file=out, width=400))
    text = out.getvalue()
    e = view.expiring[0]
    assert e["removal_by_ms"] == e["expires_ms"] + INTERVAL_MS
    window = f"due: removal between {fmt_ms(e['expires_ms'])} and {fmt_ms(e['removal_by_ms'])}"
    assert text.count(window) == len(view.expiring)  # each due offset, labelled, no bare "-0.0x"
    assert f"due {fmt_ms(e['expires_ms'])}, removal by {fmt_ms(e['removal_by_ms'])}" in text  # offsets table
    soon = inspect_group(cfg, SOON_GROUP)
    assert soon.expiring and all(e["status"] == "held" and e["expires_ms"] > soon.as_of_ms for e in soon.expiring)


# ---- C: serve, a share group ------------------------------------------------------------------
def test_serve_says_why_a_share_group_has_no_partitions_and_labels_group_types(tmp_path: Path) -> None:
    from pipelines.serve import metrics
    from pipelines.serve.http import make_server
    from pipelines.tableio import TableIO
    from tests.pipelines.mixed_log import SHARE_GROUP, mixed_log
    from tests.pipelines.pipeline_helpers import arrow_gold
    from tests.pipelines.test_kafka4_jobs import DAY, _gold_warehouse, raw_table

    gold = arrow_gold(raw_table(mixed_log()), retention_ms=DAY)
    types = {r["group_id"]: r["group_type"] for r in gold["group_state"].to_pylist()}
    assert types[SHARE_GROUP] == "share"
    cfg = _gold_warehouse(tmp_path, gold)
    io_ = TableIO(cfg, None, engine="rust")
    text = metrics.render(metrics.collect(io_, window_s=30 * 86_400), "test")
    one_hot = [ln for ln in text.splitlines() if ln.startswith("kafka_consumergroup_group_state{")]
    labelled = {ln.split('group="')[1].split('"')[0]: ln.split('group_type="')[1].split('"')[0] for ln in one_hot}
    assert labelled == types
    server = make_server(io_, port=0, cluster="test")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]

        def status(group: str) -> dict[str, Any]:
            url = f"http://{host}:{port}/v3/kafka/test/consumer/{group}/status"
            with urllib.request.urlopen(url, timeout=60) as r:
                body = json.loads(r.read())
            assert body["error"] is False
            return dict(body["status"])

        share = status(SHARE_GROUP)
        # Burrow's shape, unchanged: the keys Burrow clients read are all there
        assert {"cluster", "group", "status", "complete", "partitions", "partition_count", "maxlag", "totallag"} <= set(
            share
        )
        assert (share["status"], share["partition_count"], share["totallag"]) == ("UNKNOWN", 0, None)
        assert share["group_type"] == "share" and "__share_group_state" in share["message"]
        assert "__consumer_offsets" in share["message"] and "lag" in share["message"]
        other = next(g for g, t in sorted(types.items()) if t == "classic")
        classic = status(other)
        assert classic["group_type"] == "classic" and "message" not in classic
    finally:
        server.shutdown()
        server.server_close()


# ---- D: "now" in log and wall modes, and serve's cache in wall mode -------------------------------
def test_now_in_log_and_wall_modes(cfg: Any, tmp_path: Path) -> None:
    from pipelines.config import load_config
    from pipelines.log_clock import now_ms, now_sql
    from pipelines.tableio import TableIO

    read = TableIO(cfg, None, engine="rust").read_arrow
    end = max(_ms(g["last_timestamp"]) for g in _state(cfg).values())
    root = str(cfg.table_path("group_state")).rsplit("/", 1)[0]
    log = load_config(overrides={"paths.root": root, "replay.now": "log"})
    wall = load_config(overrides={"paths.root": root, "replay.now": "wall"})
    fixed = load_config(overrides={"paths.root": root, "replay.now": "wall", "replay.as_of_ms": 123})
    assert now_ms(log, read) == (end, "the newest record replayed")
    assert now_ms(wall, read, wall_ms=end + 5_000) == (end + 5_000, "the wall clock (replay.now: wall)")
    before = int(time.time() * 1000)
    got, _ = now_ms(wall, read)
    assert before <= got <= int(time.time() * 1000)
    assert now_ms(fixed, read) == (123, "replay.as_of_ms")
    # the SQL form every view uses: log reads group_state, wall the clock, as_of_ms fixes it
    assert now_sql(None, "log") == "SELECT (SELECT max(last_timestamp) FROM group_state) AS as_of"
    assert now_sql(None, "wall") == "SELECT current_timestamp() AS as_of"
    assert now_sql(123, "wall") == "SELECT timestamp_millis(123) AS as_of"
    with pytest.raises(ValueError, match=r"unknown replay\.now"):
        now_sql(None, "later")
    # an empty warehouse has no log now
    empty = load_config(overrides={"paths.root": str(tmp_path), "replay.now": "log"})
    assert now_ms(empty, TableIO(empty, None, engine="rust").read_arrow)[0] is None


def test_serve_cache_moves_now_with_the_wall_clock_between_commits(tmp_path: Path) -> None:
    from pipelines.serve.http import SnapshotCache
    from pipelines.tableio import TableIO

    cfg = _warehouse(tmp_path, **{"replay.now": "wall"})
    cache = SnapshotCache(TableIO(cfg, None, engine="rust"), cluster="test", ttl_s=0.2)
    first, _ = cache.get()
    time.sleep(0.5)  # no table changes: only the clock moved
    second, _ = cache.get()
    assert cache.computations == 2
    assert first.as_of_ms is not None and second.as_of_ms is not None and second.as_of_ms >= first.as_of_ms + 400
    # evidence mode: no table change, no recomputation (now moves only with the tables)
    ev = SnapshotCache(TableIO(_warehouse(tmp_path / "ev"), None, engine="rust"), cluster="test", ttl_s=0.2)
    a, _ = ev.get()
    time.sleep(0.5)
    b, _ = ev.get()
    assert ev.computations == 1 and a is b
