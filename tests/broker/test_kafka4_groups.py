"""Kafka 4.4 (the new group coordinator) writes ``__consumer_offsets``; offsetlake must agree with
it (issue 31, the Kafka 4.x half).

One module-scoped run drives every scenario of ``kafka4_scenarios`` at once on the session's
``kafka4`` broker (its own group ids), with real clients as processes: a KIP-848 consumer group
through joins one by one and at once, a graceful leave, a SIGKILL and its session expiry, the
group emptied, its offsets expired and the group deleted by the broker; a rolling restart of
static members under the consumer protocol; a classic group upgraded online to a consumer group
and downgraded back; the classic protocol on the new coordinator; an admin offset deletion and
group deletion; a KIP-848 member subscribed by regex matching a topic created mid-run (no
commit names that topic's id: offsetlake names it by elimination); a share group driven by
Kafka's own console share consumer; an assign-only consumer committing; a KIP-848 member's
offsets sent in a committed and an aborted transaction.
Meanwhile ``offsetlake capture`` follows the live topic from ``earliest`` and the log cleaner
compacts it; at the end the broker's own ``__consumer_offsets-N/*.log`` are copied while it runs.

The judges are outside offsetlake: the broker's Admin API answers and ``kafka-consumer-groups``
at each recorded moment, ``DumpLogSegments --offsets-decoder`` and the console consumer with
Kafka 4.4's formatters for every record. offsetlake's batch job runs on the capture, and
``inspect group G --as-of <moment>`` must say what the broker said.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines.kafka import kafka_tools
from pipelines.kafka.local_broker import LocalBroker
from tests.broker import kafka4_scenarios as S
from tests.broker.kafka4_compare import disagreements
from tests.broker.kafka4_decode import diff_records, kafka4_form, our_markers, ours_by_offset, parse_dump, parse_markers

pytestmark = [pytest.mark.broker, pytest.mark.timeout(1800)]

NUM_PARTITIONS = 3  # the broker's offsets.topic.num.partitions (pipelines.kafka.local_broker)
RETENTION_MS = 60_000  # offsets.retention.minutes=1
CONSOLE_GROUP = "k4-console-formatter"


@dataclass
class Run:
    ctx: S.Ctx
    errors: dict[str, str]
    folder: Path
    landing: Path
    live: Path
    seconds: float


def _capture(bootstrap: str, landing: Path, *, follow: bool, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "pipelines", "capture", "--bootstrap-servers", bootstrap, "--out", str(landing)]
    cmd += ["--from", "earliest", "--no-progress", "--rows-per-file", "1000000"]
    cmd += ["--flush-interval", "2"] if follow else ["--until-end"]
    return subprocess.Popen(cmd, cwd=S.REPO, stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def _probe_commit(bootstrap: str) -> None:
    """One offset commit (group ``k4-probe``): a record the following capture must land."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "k4-probe", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(S.TOPIC, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def _caught_up(landing: Path) -> bool:
    return any(landing.glob("*.parquet"))


@pytest.fixture(scope="module")
def k4(kafka4: LocalBroker, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from confluent_kafka.admin import AdminClient

    folder = tmp_path_factory.mktemp("kafka4-groups")
    landing, live = folder / "landing", folder / "live"
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    S.create_topics(admin)
    ctx = S.Ctx(kafka4.bootstrap, kafka4.bundle, admin, S.Members(kafka4.bootstrap, folder))
    follower = _capture(kafka4.bootstrap, landing, follow=True, log=folder / "capture.log")
    stop = threading.Event()
    producer = threading.Thread(target=S.producer_loop, args=(kafka4.bootstrap, stop), daemon=True)
    began = time.monotonic()
    try:
        _probe_commit(kafka4.bootstrap)
        ctx.wait("offsetlake capture following the topic", lambda: _caught_up(landing), timeout_s=90)
        producer.start()
        errors = S.run_all(ctx)
    finally:
        stop.set()
        ctx.members.stop_all()
        follower.send_signal(signal.SIGTERM)
        follower.wait(timeout=60)
    seconds = time.monotonic() - began
    truth = {"observations": [dataclasses.asdict(o) for o in ctx.observations], "notes": ctx.notes, "errors": errors}
    (folder / "truth.json").write_text(json.dumps(truth, indent=1, default=str))
    kafka4.copy_offsets_segments(live)  # the broker's own files, copied while it runs
    final = _capture(kafka4.bootstrap, landing, follow=False, log=folder / "capture.log")
    assert final.wait(timeout=120) == 0, (folder / "capture.log").read_text()[-2000:]
    yield Run(ctx, errors, folder, landing, live, seconds)


def test_every_scenario_ran_as_the_clients_saw_it(k4: Run) -> None:
    assert k4.errors == {}
    m = k4.ctx.members
    # the killed member saw partitions and never closed: every event of its came before the kill (a
    # revoke before it is the broker moving a partition to cg-d, which joined with it: seen in CI);
    # the one that left closed
    assert [e["event"] for e in m.events("cg-c") if e["event"] in ("assign", "revoke", "closed")][:1] == ["assign"]
    assert not [e for e in m.events("cg-c") if e["event"] == "closed"]
    assert all(e["t"] <= k4.ctx.notes["cg-c killed"] for e in m.events("cg-c"))
    assert m.events("cg-b")[-1]["event"] == "closed"
    # the restarted static member got the partitions its instance held
    held = {tuple(p) for e in m.events("st-1") if e["event"] == "assign" for p in e["partitions"]}
    back = {tuple(p) for e in m.events("st-1b") if e["event"] == "assign" for p in e["partitions"]}
    assert back and back <= held
    held2 = {tuple(p) for e in m.events("st-2") if e["event"] == "assign" for p in e["partitions"]}
    back2 = {tuple(p) for e in m.events("st-2b") if e["event"] == "assign" for p in e["partitions"]}
    assert back2 and back2 <= held2  # the rolling restart's second member too
    assert sorted(k4.ctx.notes["share consumed"]) == sorted(f"share-{i}" for i in range(10))
    labels = Counter(o.scenario for o in k4.ctx.observations)
    assert labels["consumer"] == 7 and labels["upgrade"] == 4 and labels["admin"] == 3, labels
    assert labels["static"] == 4 and labels["simple"] == 2 and labels["txn"] == 3, labels
    assert labels["regex"] == 3, labels


def test_the_broker_kept_the_committed_transaction_and_dropped_the_aborted(k4: Run) -> None:
    """The truth the moments check holds offsetlake to: after the abort the broker still has the
    committed transaction's offsets (and none of the aborted one's); the simple consumer's group
    has no members and its last commits."""
    by = {(o.group, o.label): o for o in k4.ctx.observations}
    want = {f"{S.TOPIC}-{p}": off for p, off in S.TXN_COMMITTED.items()}
    for label in ("transaction committed", "transaction aborted"):
        assert {tp: off for tp, (off, _) in by[("k4-txn", label)].offsets.items()} == want, label
    simple = by[("k4-simple", "second commit")]
    assert simple.description is not None and simple.description["members"] == []
    assert simple.offsets == {f"{S.TOPIC}-0": (5, "simple-b"), f"{S.TOPIC}-2": (6, "")}


def _kafka_dump(
    bundle: str, live: Path
) -> tuple[dict[tuple[int, int], dict[str, Any]], dict[tuple[int, int], tuple[str, int]]]:
    """DumpLogSegments on every copied partition: its data records and its transaction markers."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    markers: dict[tuple[int, int], tuple[str, int]] = {}
    for part_dir in sorted(live.glob("__consumer_offsets-*")):
        files = sorted(str(f) for f in part_dir.glob("*.log"))
        if files:
            args = ["--offsets-decoder", "--print-data-log", "--files", ",".join(files)]
            text = kafka_tools.run_tool(bundle, kafka_tools.dump_log_class(bundle), args)
            out.update(parse_dump(text, int(part_dir.name.rsplit("-", 1)[1])))
            markers.update(parse_markers(text, int(part_dir.name.rsplit("-", 1)[1])))
    return out, markers


def test_every_record_decodes_as_kafkas_dump_log_segments_prints_it(k4: Run, kafka4: LocalBroker) -> None:
    kafka, kafka_markers = _kafka_dump(kafka4.bundle, k4.live)
    ours = ours_by_offset(k4.live)
    assert diff_records(kafka, ours) == []
    # the transactions' COMMIT and ABORT markers (k4-txn), read as DumpLogSegments prints them
    assert our_markers(k4.live) == kafka_markers
    assert {marker for marker, _ in kafka_markers.values()} == {"COMMIT", "ABORT"}, kafka_markers
    types = Counter(r["key"]["type"] for r in kafka.values())
    # offset commits, classic groups, KIP-848 consumer groups, share groups: all written by 4.4
    assert {1, 2, 3, 5, 6, 7, 8} <= set(types) and {10, 11, 12, 13, 14, 15} & set(types), types


def test_kafkas_console_formatters_print_what_offsetlake_prints(k4: Run, kafka4: LocalBroker) -> None:
    """Every record the console consumer prints with Kafka 4.4's formatters is one offsetlake
    printed from the capture (which followed the topic all along, and takes what the broker wrote
    since, e.g. later expiries, right after the console consumer); the console consumer's own
    group is left out."""
    import pyarrow.dataset as ds

    from coordinator_core import decode_record, to_kafka_json

    formatters = (
        kafka_tools.OFFSETS_FORMATTER,
        kafka_tools.GROUP_METADATA_FORMATTER,
        "org.apache.kafka.tools.consumer.ShareGroupMessageFormatter",
    )
    printed_by = {f: _console(kafka4, f) for f in formatters}
    again = _capture(kafka4.bootstrap, k4.landing, follow=False, log=k4.folder / "capture.log")
    assert again.wait(timeout=120) == 0
    table = ds.dataset(str(k4.landing), format="parquet").to_table(columns=["key", "value"])
    ours = Counter(
        json.dumps(kafka4_form(to_kafka_json(decode_record(k, v, modern=True))), sort_keys=True)
        for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)
    )
    for formatter, printed in printed_by.items():
        mine = [p for p in printed if CONSOLE_GROUP not in p["key"]["data"].values()]
        assert mine, formatter
        missing = Counter(json.dumps(p, sort_keys=True) for p in mine) - ours
        assert not missing, (formatter, list(missing)[:3])


def _console(kafka4: LocalBroker, formatter: str) -> list[Any]:
    """``kafka_tools.console_formatted`` with a bound fit for a loaded machine (its JVM alone
    may take a minute there)."""
    args = ["--bootstrap-server", kafka4.bootstrap, "--topic", "__consumer_offsets", "--from-beginning"]
    args += ["--formatter", formatter, "--timeout-ms", "15000", "--group", CONSOLE_GROUP]
    args += ["--consumer-property", "exclude.internal.topics=false", "--isolation-level", "read_committed"]
    # no auto-commits: they are records of the topic it reads, so it would never be idle for 15 s
    args += ["--consumer-property", "enable.auto.commit=false"]
    text = kafka_tools.run_tool(kafka4.bundle, kafka_tools.CONSOLE_CONSUMER, args, timeout_s=400)
    return kafka_tools.json_objects(text)


@pytest.fixture(scope="module")
def warehouse(k4: Run, spark: Any) -> Any:
    """offsetlake's batch job on the capture (landing Parquet files of the live topic)."""
    from pipelines.cli import main
    from pipelines.config import load_config

    conf = k4.folder / "offsetlake.yaml"
    conf.write_text(
        f"paths:\n  root: {k4.folder / 'data'}\ninput:\n  path: {k4.landing}\n"
        f"offsets_topic:\n  num_partitions: {NUM_PARTITIONS}\n"
        f"replay:\n  retention_ms: {RETENTION_MS}\n  cleanup_interval_ms: 1000\n  coordinator: new\n"
    )
    assert main(["run", "batch", "--conf", str(conf)]) == 0
    return load_config(conf)


@pytest.mark.spark
def test_offsetlake_says_what_the_broker_said_at_every_moment(k4: Run, warehouse: Any) -> None:
    from pipelines.analytics.inspect import inspect_group
    from pipelines.errors import UsageError

    views: dict[tuple[str, int], dict[str, Any] | None] = {}

    def view_at(group: str) -> Any:
        def at(t: int) -> dict[str, Any] | None:
            if (group, t) not in views:
                try:
                    views[(group, t)] = inspect_group(warehouse, group, t).as_dict()
                except UsageError:
                    views[(group, t)] = None
            return views[(group, t)]

        return at

    from pipelines.analytics.inspect import read_group_records

    near_gap = _moments_near_capture_gaps(k4)
    checked = [o for o in k4.ctx.observations if (o.group, o.label) not in near_gap]
    instants = {
        g: sorted({r.timestamp_ms for r in read_group_records(warehouse, g)[1]}) for g in {o.group for o in checked}
    }
    problems = [p for o in checked for p in disagreements(view_at(o.group), o, instants[o.group])]
    assert not problems, "\n".join(problems)
    # the capture kept up with the cleaner at most moments (on an idle machine: all of them)
    assert len(checked) >= 0.6 * len(k4.ctx.observations) >= 12, sorted(near_gap)


def _moments_near_capture_gaps(k4: Run, slack_ms: int = 10_000) -> set[tuple[str, str]]:
    """Moments the capture cannot tell: the log cleaner removed records of the group's partition
    before the capture read them (a superseded record, gone for good), between captured
    neighbours written within ``slack_ms`` of the moment. A loaded machine's capture falls
    seconds behind a cleaner rolling segments every 3 s; offsetlake's log shape sees the gap."""
    import pyarrow.dataset as ds

    from coordinator_core import partition_for

    table = ds.dataset(str(k4.landing), format="parquet").to_table(columns=["partition", "offset", "timestamp"])
    rows = sorted(
        (p, o, int(t.timestamp() * 1000))
        for p, o, t in zip(*(table.column(c).to_pylist() for c in ("partition", "offset", "timestamp")), strict=True)
    )
    gaps: dict[int, list[tuple[int, int]]] = {}
    for (p, o, t), (p2, o2, t2) in itertools.pairwise(rows):
        if p == p2 and o2 > o + 1:
            gaps.setdefault(p, []).append((t, t2))
    out = set()
    for obs in k4.ctx.observations:
        for lo, hi in gaps.get(partition_for(obs.group, NUM_PARTITIONS), []):
            if lo <= obs.t_after + slack_ms and hi >= obs.t_before - slack_ms:
                out.add((obs.group, obs.label))
    return out


@pytest.mark.spark
def test_the_brokers_expiry_and_deletions_are_in_the_tables(k4: Run, warehouse: Any) -> None:
    from deltalake import DeltaTable

    root = Path(warehouse.paths.warehouse)
    expirations = DeltaTable(str(root / "offset_expirations")).to_pyarrow_table().to_pylist()
    lifecycle = DeltaTable(str(root / "group_lifecycle")).to_pyarrow_table().to_pylist()
    last_seen, gone = k4.ctx.notes["k4-cg"]
    # the broker expired k4-cg's offsets and deleted the group between these two answers
    cg = [e for e in expirations if e["group_id"] == "k4-cg" and e["status"] in ("observed", "confirmed")]
    assert cg and all(e["observed_time"] is not None for e in cg)
    assert all(last_seen - 1500 <= e["observed_time"].timestamp() * 1000 <= gone + 1500 for e in cg), cg[:2]
    deleted = [e for e in lifecycle if e["group_id"] == "k4-cg" and e["event"] == "group_deleted"]
    assert any(e["observed"] and last_seen - 1500 <= e["timestamp"].timestamp() * 1000 <= gone + 1500 for e in deleted)
    # the admin deletions: the offset deleted by kafka-consumer-groups, the group by the Admin API
    admin = [e for e in expirations if e["group_id"] == "k4-admin" and e["status"] == "observed"]
    assert any(e["partition"] == 0 and e["cause"] == "tombstone" for e in admin), admin
    assert any(e["group_id"] == "k4-admin" and e["event"] == "group_deleted" and e["observed"] for e in lifecycle)
