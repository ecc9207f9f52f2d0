"""Issue 33: "now" is now. A live deployment: the log is captured and replayed once; then
wall-clock time passes with no commit, and the end-offset sampler takes a new sample. The
statuses (Burrow's STOP, the group's ERR) must follow that sample without a new batch run,
because every view evaluates them at the one "now" of ``pipelines.log_clock`` (by default the
newest evidence: the last record or end-offset sample, whichever is later).

No Spark: the warehouse is written with delta-rs from the pure replay functions (the batch job's
own), and read by ``metrics``' DuckDB path. The expected STOP is Burrow's rule checked on the
commits read back from ``offset_commits``, not taken from the code under test.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

RETENTION_MS = 7 * 86_400_000
LAG = 5
LATER = dt.timedelta(minutes=30)


def _warehouse(root: Path) -> Any:
    from pipelines.config import load_config
    from tests.pipelines.pipeline_helpers import sample_raw, write_gold_warehouse

    cfg = load_config(overrides={"paths.root": str(root), "replay.retention_ms": RETENTION_MS})
    write_gold_warehouse(cfg, sample_raw(8, seed=3))
    return cfg


def _append_samples(cfg: Any, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa

    from pipelines.tableio import append_arrow_at, conform_arrow
    from schemas import get as get_spec

    spec = get_spec("partition_end_offsets")
    append_arrow_at(
        cfg.table_path("partition_end_offsets"),
        conform_arrow(pa.Table.from_pylist(rows, schema=spec.arrow_schema()), spec),
    )


def _sample(at: dt.datetime, topic: str, partition: int, end: int) -> dict[str, Any]:
    return {
        "sampled_at": at,
        "topic": topic,
        "partition": partition,
        "log_start_offset": 0,
        "log_end_offset": end,
        "group_id": None,
        "committed_offset": None,
        "lag_offsets": None,
        "committed_record_timestamp": None,
        "bootstrap_servers": "test:9092",
    }


def test_a_new_end_offset_sample_after_silence_turns_statuses_to_stop_without_a_batch_run(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    from pipelines.analytics.burrow import group_status
    from pipelines.serve import metrics
    from pipelines.tableio import TableIO

    cfg = _warehouse(tmp_path)
    io = TableIO(cfg, None, engine="rust")
    commits = io.read_arrow("offset_commits")
    current = io.read_arrow("offsets_current")
    state = io.read_arrow("group_state")
    assert commits is not None and current is not None and state is not None
    live = commits.filter(pc.invert(commits["is_tombstone"])).to_pylist()
    # the capture: a sample just before every commit, the log end LAG above the committed offset
    _append_samples(
        cfg,
        [
            _sample(
                c["commit_timestamp"] - dt.timedelta(milliseconds=1),
                c["topic"],
                c["partition"],
                c["committed_offset"] + LAG,
            )
            for c in live
        ],
    )
    newest_record = max(state["last_timestamp"].to_pylist())
    owners = Counter((r["topic"], r["partition"]) for r in current.to_pylist())
    stable = {g["group_id"] for g in state.to_pylist() if g["state"] == "Stable"}
    pick = next(
        r
        for r in sorted(current.to_pylist(), key=lambda r: (r["group_id"], r["topic"], r["partition"]))
        if owners[(r["topic"], r["partition"])] == 1 and r["group_id"] in stable
    )
    key = (pick["group_id"], pick["topic"], pick["partition"])
    window = sorted(c["commit_timestamp"] for c in live if (c["group_id"], c["topic"], c["partition"]) == key)[-10:]
    span = window[-1] - window[0]

    before = metrics.collect(io)
    assert before.as_of_ms == int(newest_record.timestamp() * 1000)  # the newest evidence: the last record
    part = {(p["group_id"], p["topic"], p["partition"]): p for p in before.partitions}[key]
    assert newest_record - window[-1] <= span and part["status"] != "STOP"

    # 30 minutes of silence (no commit, no batch run), then the sampler runs again
    sampled = newest_record + LATER
    _append_samples(cfg, [_sample(sampled, pick["topic"], pick["partition"], pick["offset"] + 1_033)])
    after = metrics.collect(io)
    assert after.as_of_ms == int(sampled.timestamp() * 1000)  # "now" moved with the sample
    part = {(p["group_id"], p["topic"], p["partition"]): p for p in after.partitions}[key]
    # Burrow: lag > 0 at every commit of the window and now, and now - last commit > last - first
    assert sampled - window[-1] > span
    assert part["status"] == "STOP" and part["lag"] == 1_033
    group = [p["status"] for p in after.partitions if p["group_id"] == pick["group_id"]]
    assert group_status(group) == "ERR"
    # lag metrics carry the member assigned the partition, as kafka-lag-exporter's do
    exposition = metrics.render(after, "test")
    line = next(
        x
        for x in exposition.splitlines()
        if x.startswith("kafka_consumergroup_group_lag{")
        and f'group="{pick["group_id"]}"' in x
        and f'topic="{pick["topic"]}"' in x
        and f'partition="{pick["partition"]}"' in x
    )
    assert 'member_host="' in line and 'consumer_id="' in line and 'client_id="' in line and line.endswith(" 1033")
    # no batch run in between: the gold tables are the versions the first answer read
    assert [io.version(n) for n in ("group_state", "offsets_current", "offset_commits")] == [0, 0, 0]


def test_serve_answers_burrows_discovery_and_lag_and_an_unknown_lag_is_null(tmp_path: Path) -> None:
    import json
    import threading
    import urllib.request

    from pipelines.serve.http import make_server
    from pipelines.tableio import TableIO

    cfg = _warehouse(tmp_path)  # no end-offset samples: lag unknown
    io = TableIO(cfg, None, engine="rust")
    state = io.read_arrow("group_state")
    assert state is not None
    existing = sorted(r["group_id"] for r in state.to_pylist() if r["exists"])
    server = make_server(io, port=0, cluster="test")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]

        def get(path: str) -> tuple[int, dict[str, Any]]:
            try:
                with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=60) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        code, body = get("/v3/kafka")
        assert (code, body["error"], body["clusters"]) == (200, False, ["test"])
        code, body = get("/v3/kafka/test/consumer")
        assert code == 200 and body["consumers"] == existing and body["as_of_ms"] is not None
        assert get("/v3/kafka/other/consumer")[0] == 404
        group = existing[0]
        code, body = get(f"/v3/kafka/test/consumer/{group}/lag")
        assert code == 200 and body["message"] == "consumer lag returned"
        status = body["status"]
        assert status["partition_count"] == len(status["partitions"]) > 0
        # no end-offset sample: the lag is unknown, never 0
        assert status["totallag"] is None and status["maxlag"] is None and status["status"] == "UNKNOWN"
    finally:
        server.shutdown()
        server.server_close()
