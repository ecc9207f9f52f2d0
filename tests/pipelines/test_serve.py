"""``offsetlake metrics`` / ``offsetlake serve`` on a warehouse built by the real batch job.

The warehouse (module-scoped: one batch run) holds the quickstart sample log plus end-offset
samples appended through ``pipelines.tableio``: one 1 ms before every commit (lag 5 there, so
Burrow statuses are known) and, for one picked partition, a newer sample after ``as_of`` (lag 42
now). Every expected value below is read from the tables, not from the code under test.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.config import Config, load_config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RETENTION_MS = 10_000  # short: the sample has a group due for deletion and offsets at risk at as_of
PICKED_LAG = 42
AHEAD_BY = 3


class Warehouse:
    cfg: Config
    conf: Path
    picked: tuple[str, str, int]  # (group, topic, partition) with lag PICKED_LAG now
    picked_end: int
    ahead: tuple[str, str, int]  # (group, topic, partition) committed AHEAD_BY above its log end now


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def _append_samples(cfg: Config, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    from pipelines.tableio import append_arrow_at, conform_arrow
    from schemas import get as get_spec

    spec = get_spec("partition_end_offsets")
    table = pa.Table.from_pylist(rows, schema=spec.arrow_schema())
    append_arrow_at(cfg.table_path("partition_end_offsets"), conform_arrow(table, spec))


def _sample(
    at: dt.datetime,
    topic: str,
    partition: int,
    end: int,
    group: str | None = None,
    lag_ms: int | None = None,
    committed: int | None = None,
) -> dict[str, Any]:
    return {
        "sampled_at": at,
        "topic": topic,
        "partition": partition,
        "log_start_offset": 0,
        "log_end_offset": end,
        "group_id": group,
        "committed_offset": committed,  # capture-end-offsets writes the offset whose record it fetched
        "lag_offsets": None,
        "committed_record_timestamp": at - dt.timedelta(milliseconds=lag_ms) if lag_ms is not None else None,
        "bootstrap_servers": "test:9092",
    }


@pytest.fixture(scope="module")
def wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    import pyarrow.compute as pc

    from pipelines.inputs.raw_files import write_raw_records
    from pipelines.inputs.sample import sample_records
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    root = tmp_path_factory.mktemp("servewh")
    w = Warehouse()
    w.cfg = load_config(overrides={"paths.root": str(root), "replay.retention_ms": RETENTION_MS})
    w.conf = root / "serve.yaml"
    w.conf.write_text(f"paths:\n  root: {root}\nreplay:\n  retention_ms: {RETENTION_MS}\n")
    write_raw_records(sample_records(8, seed=3), w.cfg.paths.landing)
    run_batch(w.cfg, spark)

    io = TableIO(w.cfg, None, engine="rust")
    commits = io.read_arrow("offset_commits")
    assert commits is not None
    live = commits.filter(pc.invert(commits["is_tombstone"])).to_pylist()
    _append_samples(
        w.cfg,
        [
            _sample(
                c["commit_timestamp"] - dt.timedelta(milliseconds=1),
                c["topic"],
                c["partition"],
                c["committed_offset"] + 5,
            )
            for c in live
        ],
    )
    current = io.read_arrow("offsets_current")
    state = io.read_arrow("group_state")
    assert current is not None and state is not None
    as_of = max(state["last_timestamp"].to_pylist())
    # a partition only one group consumes (the lag of a shared topic-partition is every group's)
    owners = Counter((r["topic"], r["partition"]) for r in current.to_pylist())
    stable = {g["group_id"] for g in state.to_pylist() if g["state"] == "Stable"}
    pick, ahead = [
        r
        for r in sorted(current.to_pylist(), key=lambda r: (r["group_id"], r["topic"], r["partition"]))
        if owners[(r["topic"], r["partition"])] == 1 and r["group_id"] in stable
    ][:2]
    w.picked = (pick["group_id"], pick["topic"], pick["partition"])
    w.picked_end = pick["offset"] + PICKED_LAG
    w.ahead = (ahead["group_id"], ahead["topic"], ahead["partition"])
    _append_samples(
        w.cfg,
        [
            _sample(
                as_of + dt.timedelta(minutes=1),
                pick["topic"],
                pick["partition"],
                w.picked_end,
                pick["group_id"],
                lag_ms=2500,
                committed=pick["offset"],
            ),
            _sample(as_of + dt.timedelta(minutes=1), ahead["topic"], ahead["partition"], ahead["offset"] - AHEAD_BY),
        ],
    )
    return w


# ---- a reader of the exposition (prometheus_client's own parser) ---------------------------------
def _parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        assert fam.documentation, f"{fam.name} has no HELP"
        assert fam.type == "gauge", fam.name
        out[fam.name] = [(dict(s.labels), s.value) for s in fam.samples]
    return out


def _now(io: Any) -> int:
    """The one now (issue 33): the newest evidence, the last record or end-offset sample, read
    from the tables (the sample taken a minute after the log makes it that sample's time)."""
    last = max(_ms(t) for t in io.read_arrow("group_state")["last_timestamp"].to_pylist())
    sampled = max(_ms(t) for t in io.read_arrow("partition_end_offsets")["sampled_at"].to_pylist())
    return max(last, sampled)


def _io(wh: Warehouse) -> Any:
    from pipelines.tableio import TableIO

    return TableIO(wh.cfg, None, engine="rust")


@pytest.fixture(scope="module")
def exposition(wh: Warehouse) -> dict[str, list[tuple[dict[str, str], float]]]:
    from pipelines.serve import metrics

    return _parse(metrics.render(metrics.collect(_io(wh)), "test"))


def _one(fam: list[tuple[dict[str, str], float]], **labels: Any) -> float:
    want = {k: str(v) for k, v in labels.items()}
    hits = [v for lab, v in fam if all(lab.get(k) == x for k, x in want.items())]
    assert len(hits) == 1, (labels, hits)
    return hits[0]


def test_group_counts_and_one_hot_states_are_those_of_group_state(wh: Warehouse, exposition: Any) -> None:
    state = _io(wh).read_arrow("group_state").to_pylist()
    by_state = Counter(g["state"] for g in state)
    assert {lab["state"]: v for lab, v in exposition["kafka_consumergroup_groups"]} == {
        s: by_state.get(s, 0)
        for s in (
            "Empty",
            "PreparingRebalance",
            "CompletingRebalance",
            "Stable",
            "Dead",
            "Assigning",
            "Reconciling",
            "NotReady",
        )
    }
    assert sum(by_state.values()) == len(state) > 0 and len(by_state) >= 2  # the sample has Stable/Empty/Dead
    for g in state:
        assert _one(exposition["kafka_consumergroup_group_state"], group=g["group_id"], state=g["state"]) == 1
        assert sum(v for lab, v in exposition["kafka_consumergroup_group_state"] if lab["group"] == g["group_id"]) == 1
        assert _one(exposition["kafka_consumergroup_group_members"], group=g["group_id"]) == (g["member_count"] or 0)
        assert _one(exposition["kafka_consumergroup_group_generation"], group=g["group_id"]) == g["generation"]
    assert all(lab["cluster_name"] == "test" for fam in exposition.values() for lab, _ in fam)


def test_lag_is_the_newest_end_offset_minus_the_committed_offset(wh: Warehouse, exposition: Any) -> None:
    group, topic, partition = wh.picked
    lag = exposition["kafka_consumergroup_group_lag"]
    assert _one(lag, group=group, topic=topic, partition=partition) == PICKED_LAG
    assert _one(exposition["kafka_partition_latest_offset"], topic=topic, partition=partition) == wh.picked_end
    assert (
        _one(exposition["kafka_consumergroup_group_lag_seconds"], group=group, topic=topic, partition=partition) == 2.5
    )
    # every other partition: its newest sample was the one before its last commit (lag 5 then),
    # unless a later commit of ANOTHER group moved past it; recompute from the tables
    io = _io(wh)
    ends = Counter[tuple[str, int]]()
    newest: dict[tuple[str, int], tuple[dt.datetime, int]] = {}
    for s in io.read_arrow("partition_end_offsets").to_pylist():
        key = (s["topic"], s["partition"])
        ends[key] += 1
        if key not in newest or s["sampled_at"] >= newest[key][0]:
            newest[key] = (s["sampled_at"], s["log_end_offset"])
    want = {
        (o["group_id"], o["topic"], str(o["partition"])): max(newest[(o["topic"], o["partition"])][1] - o["offset"], 0)
        for o in io.read_arrow("offsets_current").to_pylist()
        if (o["topic"], o["partition"]) in newest
    }
    got = {(lab["group"], lab["topic"], lab["partition"]): v for lab, v in lag}
    assert got == want and len(got) > 10
    g, t, p = wh.ahead  # committed above the log end: lag 0, flagged by its own gauge, only there
    assert got[(g, t, str(p))] == 0
    assert [
        (lab["group"], lab["topic"], lab["partition"], v)
        for lab, v in exposition["kafka_consumergroup_group_offset_ahead_of_end"]
    ] == [(g, t, str(p), AHEAD_BY)]
    per_group: dict[str, list[int]] = {}
    for (g, _, _), v in want.items():
        per_group.setdefault(g, []).append(v)
    assert {lab["group"]: v for lab, v in exposition["kafka_consumergroup_group_max_lag"]} == {
        g: max(v) for g, v in per_group.items()
    }
    assert {lab["group"]: v for lab, v in exposition["kafka_consumergroup_group_sum_lag"]} == {
        g: sum(v) for g, v in per_group.items()
    }


def test_rebalances_expiries_and_deletions_are_what_the_tables_say(wh: Warehouse, exposition: Any) -> None:
    from pipelines.analytics.views import REBALANCE_CAUSES
    from pipelines.serve import metrics

    io = _io(wh)
    as_of = _now(io)
    assert _one(exposition["offsetlake_as_of_timestamp_seconds"]) == as_of / 1000
    assert _one(exposition["kafka_consumergroup_rebalance_window_seconds"]) == 3600
    rebalances = [r for r in io.read_arrow("rebalances").to_pylist() if r["cause"] in REBALANCE_CAUSES]
    # the whole sample, then a window ending at now that holds the later half of the rebalances
    ends = sorted(_ms(r["end_time"]) for r in rebalances)
    half = -(-(as_of - ends[len(ends) // 2]) // 1000)
    for window_s in (3600, half):
        fams = exposition if window_s == 3600 else _parse(metrics.render(metrics.collect(io, window_s=window_s), "t"))
        n: Counter[str] = Counter()
        ms: Counter[str] = Counter()
        for r in rebalances:
            if as_of - window_s * 1000 < _ms(r["end_time"]) <= as_of:
                n[r["group_id"]] += 1
                ms[r["group_id"]] += r["duration_ms"] or 0
        assert sum(n.values()) > 0 and (window_s == 3600) == (sum(n.values()) == len(rebalances))
        assert {lab["group"]: v for lab, v in fams["kafka_consumergroup_group_rebalances"] if v} == dict(n)
        assert {lab["group"]: v for lab, v in fams["kafka_consumergroup_group_rebalance_seconds"] if v} == {
            g: v / 1000 for g, v in ms.items() if v
        }
    predicted = {
        r["group_id"]: _ms(r["predicted_time"])
        for r in io.read_arrow("group_lifecycle").to_pylist()
        if r["event"] == "group_deleted" and r["status"] == "predicted"
    }
    got = {lab["group"]: v * 1000 for lab, v in exposition["kafka_consumergroup_group_deletion_timestamp_seconds"]}
    assert predicted and got == pytest.approx(predicted)
    # ... and the end of each deletion's window (group_lifecycle.forecast_to_time)
    latest = {
        r["group_id"]: _ms(r["forecast_to_time"])
        for r in io.read_arrow("group_lifecycle").to_pylist()
        if r["event"] == "group_deleted" and r["status"] == "predicted"
    }
    got = {
        lab["group"]: v * 1000 for lab, v in exposition["kafka_consumergroup_group_deletion_latest_timestamp_seconds"]
    }
    assert got == pytest.approx(latest) and all(latest[g] > predicted[g] for g in latest)
    # offsets that will expire or are due: each one is an offsets_current row of the group. With
    # the fixture's 10 s retention and now a minute after the log, held offsets are already due:
    # due is not dead, they are still committed, their removal forecast at the broker's next
    # cleanup (by due + cleanup_interval_ms), and they are at risk
    interval = wh.cfg.replay.cleanup_interval_ms
    due = exposition["kafka_consumergroup_offset_expiry_timestamp_seconds"]
    by = {
        (lab["group"], lab["topic"], lab["partition"]): v * 1000
        for lab, v in exposition["kafka_consumergroup_offset_expiry_latest_timestamp_seconds"]
    }
    held = {(o["group_id"], o["topic"], str(o["partition"])) for o in io.read_arrow("offsets_current").to_pylist()}
    assert due and all((lab["group"], lab["topic"], lab["partition"]) in held for lab, v in due)
    assert {(lab["group"], lab["topic"], lab["partition"]): v * 1000 + interval for lab, v in due} == pytest.approx(by)
    already = Counter(lab["group"] for lab, v in due if v * 1000 <= as_of)
    assert already  # due offsets are in the gauges (they were dropped as "kept past due")
    assert {lab["group"]: v for lab, v in exposition["kafka_consumergroup_group_offsets_due"] if v} == dict(already)
    risky = Counter(lab["group"] for lab, v in due if v * 1000 - as_of <= 24 * 3_600_000)
    assert risky
    assert {lab["group"]: v for lab, v in exposition["kafka_consumergroup_group_offsets_at_risk"] if v} == dict(risky)


def test_label_values_are_escaped_so_the_exposition_parses_back() -> None:
    from pipelines.serve.metrics import family

    odd = 'a "quoted" back\\slash\nnew line'
    fams = _parse(
        family("kafka_consumergroup_group_members", "gauge", "help with \\ and\nnewline", [({"group": odd}, 3)])
    )
    assert fams["kafka_consumergroup_group_members"] == [({"group": odd}, 3.0)]


def test_every_metric_family_is_documented_in_the_readme_monitoring_section() -> None:
    from pipelines.serve.metrics import FAMILIES

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Monitoring") : readme.index("## Analytics views")]
    for name in FAMILIES:
        short = "`..." + name[len("kafka_consumergroup_group") :] + "`" if name.endswith("_sum_lag") else None
        assert f"`{name}`" in section or (short and short in section), name


# ---- the HTTP face ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(wh: Warehouse) -> Iterator[Any]:
    from pipelines.serve.http import make_server

    srv = make_server(_io(wh), port=0, cluster="test", ttl_s=0.0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(srv: Any, path: str, method: str = "GET") -> tuple[int, str, bytes]:
    url = f"http://127.0.0.1:{srv.server_address[1]}{path}"
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def test_serve_answers_metrics_burrow_status_and_healthz(wh: Warehouse, server: Any) -> None:
    from pipelines.analytics import burrow

    code, ctype, body = _get(server, "/metrics")
    assert code == 200 and ctype.startswith("text/plain; version=0.0.4")
    fams = _parse(body.decode())
    group, topic, partition = wh.picked
    assert _one(fams["kafka_consumergroup_group_lag"], group=group, topic=topic, partition=partition) == PICKED_LAG

    code, _, body = _get(server, f"/v3/kafka/test/consumer/{urllib.parse.quote(group)}/status")
    doc = json.loads(body)
    assert code == 200 and doc["error"] is False
    st = doc["status"]
    io = _io(wh)
    mine = [o for o in io.read_arrow("offsets_current").to_pylist() if o["group_id"] == group]
    assert st["group"] == group and st["cluster"] == "test" and st["partition_count"] == len(mine)
    lags = {(p["topic"], p["partition"]): p["current_lag"] for p in st["partitions"]}
    assert lags[(topic, partition)] == PICKED_LAG
    assert st["totallag"] == sum(v for v in lags.values() if v is not None)
    assert st["maxlag"]["current_lag"] == max(v for v in lags.values() if v is not None)
    # the picked partition's Burrow status: the reference evaluator over its last 10 commits
    # (lag 5 at each: the sample 1 ms before it), evaluated at the one now (the newest sample, a
    # minute after the log) with the lag then (PICKED_LAG)
    commits = sorted(
        (
            c
            for c in io.read_arrow("offset_commits").to_pylist()
            if (c["group_id"], c["topic"], c["partition"]) == wh.picked and not c["is_tombstone"]
        ),
        key=lambda c: (c["commit_timestamp"], c["coordinator_partition"], c["log_offset"]),
    )[-10:]
    now = _now(io)
    window = [burrow.Commit(c["committed_offset"], _ms(c["commit_timestamp"]), 5) for c in commits]
    part = next(p for p in st["partitions"] if (p["topic"], p["partition"]) == (topic, partition))
    assert part["status"] == burrow.evaluate(window, now, PICKED_LAG) != "UNKNOWN"
    assert part["end"]["offset"] == commits[-1]["committed_offset"]
    owner = next(
        m
        for g in io.read_arrow("group_state").to_pylist()
        if g["group_id"] == group
        for m in g["members"]
        if {"topic": topic, "partition": partition} in m["assigned_partitions"]
    )
    assert (part["owner"], part["client_id"], part["member_id"]) == (
        owner["client_host"],
        owner["client_id"],
        owner["member_id"],
    )
    assert part["start"]["offset"] == commits[0]["committed_offset"]
    # Burrow's roll-up, written out: ERR if a partition is STOP/STALL/REWIND, else WARN if one is WARN
    statuses = {p["status"] for p in st["partitions"]}
    assert statuses - {"UNKNOWN"}, statuses
    want = "ERR" if statuses & {"STOP", "STALL", "REWIND"} else "WARN" if "WARN" in statuses else "OK"
    assert st["status"] == want

    assert _get(server, "/v3/kafka/test/consumer/no-such-group/status")[0] == 404
    code, _, body = _get(server, f"/v3/kafka/other/consumer/{group}/status")
    assert code == 404 and json.loads(body)["message"] == "cluster not found"
    code, _, body = _get(server, "/healthz")
    health = json.loads(body)
    assert code == 200 and health["status"] == "ok" and health["tables"]["group_state"] == io.version("group_state")
    assert _get(server, "/nope")[0] == 404
    assert _get(server, "/metrics", method="POST")[0] == 405


def test_group_status_rolls_up_partitions_as_burrow_does() -> None:
    from pipelines.analytics.burrow import group_status  # the one definition (serve, inspect, views)

    assert group_status(["OK", "OK"]) == "OK"
    assert group_status(["OK", "WARN", "UNKNOWN"]) == "WARN"
    for bad in ("STOP", "STALL", "REWIND"):
        assert group_status(["OK", "WARN", bad]) == "ERR"
    assert group_status(["UNKNOWN", None]) == "UNKNOWN"


def test_the_cache_recomputes_only_when_a_table_version_changes(wh: Warehouse, tmp_path: Path) -> None:
    from pipelines.serve.http import SnapshotCache

    cache = SnapshotCache(_io(wh), cluster="test", ttl_s=0.0)
    _, first = cache.get()
    _, again = cache.get()
    assert cache.computations == 1 and again is first
    group, topic, partition = wh.picked
    late = dt.datetime.now(dt.UTC)
    # the group's newest own sample: 100 more behind in offsets, caught up in time (no record timestamp)
    _append_samples(wh.cfg, [_sample(late, topic, partition, wh.picked_end + 100, group)])
    try:
        _, text = cache.get()
        assert cache.computations == 2
        fams = _parse(text)
        assert _one(fams["kafka_consumergroup_group_lag"], group=group, topic=topic, partition=partition) == (
            PICKED_LAG + 100
        )
        # the older sample's 2.5 s is not the lag now: the group has not moved past the record at its
        # committed offset since, so its time lag is the time since that record was written (issue 17:
        # was "absent", as if a newer sample without a record timestamp meant caught up)
        records = [
            r["committed_record_timestamp"]
            for r in _io(wh).read_arrow("partition_end_offsets").to_pylist()
            if r["group_id"] == group and r["committed_record_timestamp"] is not None
        ]
        written = max(records)
        want = (_ms(late) - _ms(written)) / 1000
        got = _one(fams["kafka_consumergroup_group_lag_seconds"], group=group, topic=topic, partition=partition)
        assert got == pytest.approx(want, abs=0.002) and got > 60
    finally:  # the module's other tests expect lag PICKED_LAG and 2.5 s: a sample as the fixture's
        _append_samples(
            wh.cfg,
            [
                _sample(
                    late + dt.timedelta(seconds=1),
                    topic,
                    partition,
                    wh.picked_end,
                    group,
                    lag_ms=2500,
                    committed=wh.picked_end - PICKED_LAG,
                )
            ],
        )
    assert cache.get()[1] != text and cache.computations == 3


# ---- the CLI ------------------------------------------------------------------------------------
def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "java" not in p.lower())
    return subprocess.run(
        [sys.executable, "-m", "pipelines", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_metrics_command_writes_the_exposition_file_without_a_jvm(wh: Warehouse, tmp_path: Path) -> None:
    from pipelines.serve import metrics

    out = tmp_path / "offsetlake.prom"
    proc = _cli("metrics", "--conf", str(wh.conf), "--cluster", "test", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == metrics.render(metrics.collect(_io(wh)), "test")
    assert [p.name for p in tmp_path.iterdir()] == ["offsetlake.prom"]  # no temp file left


def test_a_missing_warehouse_is_one_line_and_exit_2(tmp_path: Path) -> None:
    conf = tmp_path / "empty.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path}\n")
    for cmd in ("metrics", "serve"):
        proc = _cli(cmd, "--conf", str(conf))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no group_state table" in proc.stderr


def test_a_busy_port_an_unwritable_out_file_and_a_bad_window_are_one_line_and_exit_2(
    wh: Warehouse, tmp_path: Path
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cases = {
            "Address already in use": ("serve", "--port", str(busy.getsockname()[1])),
            f"cannot write {tmp_path}/missing/x.prom": ("metrics", "--out", str(tmp_path / "missing" / "x.prom")),
            "--window-seconds must be > 0": ("metrics", "--window-seconds", "0"),
        }
        for message, (cmd, *rest) in cases.items():
            proc = _cli(cmd, "--conf", str(wh.conf), *rest)
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "missing").exists()


# ---- a real Prometheus scraping offsetlake serve ------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prometheus_binary() -> str | None:
    found = shutil.which("prometheus")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-qq", "prometheus"], capture_output=True, timeout=600)
        found = shutil.which("prometheus")
    return found


@pytest.mark.slow
def test_a_real_prometheus_scrapes_serve_and_answers_the_lag_query(wh: Warehouse) -> None:
    binary = _prometheus_binary()
    if binary is None:
        pytest.skip(
            "the prometheus binary is not installed and apt-get could not install it (Debian package prometheus)"
        )
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "pipelines", "serve", "--conf", str(wh.conf), "--cluster", "test", "--port", str(port)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    prom_port = _free_port()
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
            f"  - job_name: offsetlake\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
        prom = subprocess.Popen(
            [
                binary,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={d}/data",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            group, topic, partition = wh.picked
            query = urllib.parse.urlencode({"query": "kafka_consumergroup_group_lag"})
            deadline = time.monotonic() + 90
            result: list[Any] = []
            while time.monotonic() < deadline and not result:
                time.sleep(1)
                assert prom.poll() is None, prom.stderr.read() if prom.stderr else ""
                assert serve.poll() is None, serve.stderr.read() if serve.stderr else ""
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?{query}", timeout=5) as r:
                        result = json.loads(r.read())["data"]["result"]
                except (urllib.error.URLError, ConnectionError):
                    continue
            assert result, "Prometheus never scraped kafka_consumergroup_group_lag"
            mine = [
                s
                for s in result
                if (s["metric"]["group"], s["metric"]["topic"], s["metric"]["partition"])
                == (group, topic, str(partition))
            ]
            assert len(mine) == 1 and float(mine[0]["value"][1]) == PICKED_LAG
            assert mine[0]["metric"]["job"] == "offsetlake" and mine[0]["metric"]["cluster_name"] == "test"
        finally:
            prom.terminate()
            serve.terminate()
            prom.wait(30)
            serve.wait(30)
