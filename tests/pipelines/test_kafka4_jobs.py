"""Kafka 4 groups through the jobs (issue 14, the job side): a mixed cluster (classic groups,
KIP-848 consumer groups written by ``consumer_group_writer``, one converted online from classic,
share and streams groups, malformed Kafka 4 records) decodes with every record accounted for,
replays its consumer groups as consumer groups, and gives the same gold tables in the batch job,
the stream and the pure core (``decode_record(..., modern=True)`` + ``replay`` per group).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from coordinator_core import ReplaySettings, decode_record, new_snapshot, replay
from pipelines.records.decode import decode_tables
from tests.pipelines.mixed_log import (
    CONSUMER_GROUPS,
    DELETED_CONSUMER_GROUP,
    SHARE_GROUP,
    STREAMS_GROUP,
    RawLog,
    mixed_log,
)
from tests.pipelines.pipeline_helpers import arrow_gold
from tests.pipelines.test_replay_job import core_gold

DAY = 86_400_000


def raw_table(log: RawLog) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([k for k, *_ in log], pa.binary()),
            "value": pa.array([v for _, v, *_ in log], pa.binary()),
            "topic": ["__consumer_offsets"] * len(log),
            "partition": pa.array([p for _, _, p, _, _ in log], pa.int32()),
            "offset": pa.array([o for *_, o, _ in log], pa.int64()),
            "timestamp": pa.array([ts * 1000 for *_, ts in log], pa.timestamp("us", tz="UTC")),
        }
    )


def rows(table: pa.Table) -> list[str]:
    return sorted(map(str, table.to_pylist()))


@pytest.fixture(scope="module")
def log() -> RawLog:
    return mixed_log()


@pytest.fixture(scope="module")
def decoded(log: RawLog) -> dict[str, pa.Table]:
    return decode_tables(raw_table(log).to_batches()[0])


def test_kafka4_group_records_are_decoded_not_unsupported_and_every_record_is_accounted_for(
    log: RawLog, decoded: dict[str, pa.Table]
) -> None:
    modern = [(k, v) for k, v, *_ in log if 3 <= int.from_bytes(k[:2], "big") <= 24]
    assert sum(t.num_rows for t in decoded.values()) == len(log)  # counts in == counts out
    group_records = decoded["group_records"].to_pylist()
    kinds = {(r["group_type"], r["record_type_name"]) for r in group_records}
    assert ("consumer", "ConsumerGroupMetadata") in kinds and (
        "consumer",
        "ConsumerGroupCurrentMemberAssignment",
    ) in kinds
    assert ("share", "ShareGroupMetadata") in kinds and ("streams", "StreamsGroupMetadata") in kinds
    # the records the core reads as Kafka 4 records, exactly: nothing modern left "unsupported"
    # but the value version Kafka 4 cannot read
    unsupported = decoded["unsupported_records"].to_pylist()
    assert [r["reason"] for r in unsupported if 3 <= r["record_type"] <= 24] == [
        "unknown value version 1 for record type 3"
    ]
    assert len(group_records) == len(modern) - 3  # the bad key, the corrupt value, value version 1
    first = next(r for r in group_records if r["record_type"] == 3 and not r["is_tombstone"])
    assert first["value_json"].startswith('{"epoch":') and first["key"] is not None and first["value"] is not None
    member = next(r for r in group_records if r["record_type"] == 8)
    assert member["member_id"] and member["group_id"] in (*CONSUMER_GROUPS, DELETED_CONSUMER_GROUP)


def test_malformed_kafka4_records_are_quarantined_with_their_bytes_and_reason(
    log: RawLog, decoded: dict[str, pa.Table]
) -> None:
    q = [r for r in decoded["quarantine"].to_pylist() if r["record_type"] in (3, 5)]
    assert sorted((r["record_type"], r["part"]) for r in q) == [(3, "value"), (5, "key")]
    for r in q:
        assert r["key"] is not None and r["error_class"] == "CorruptRecordError" and r["error_message"]
        assert (r["key"], r["value"]) in {(k, v) for k, v, *_ in log}


def test_the_job_replay_equals_the_pure_core_on_a_mixed_cluster(log: RawLog) -> None:
    as_of = max(ts for *_, ts in log)
    got = arrow_gold(raw_table(log), retention_ms=DAY)
    want = core_gold(log, retention_ms=DAY, as_of_ms=as_of)
    for name, table in want.items():
        assert table.num_rows > 0, name
        assert rows(got[name]) == rows(table), name


def test_consumer_groups_with_members_are_never_simple_or_dead(log: RawLog) -> None:
    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    state = {r["group_id"]: r for r in gold["group_state"].to_pylist()}
    for gid, want in CONSUMER_GROUPS.items():
        r = state[gid]
        assert (r["group_type"], r["state"], r["protocol_type"]) == ("consumer", want, "consumer"), gid
        assert r["generation"] > 0 and r["unsupported_records"] == (1 if gid == "cg-orders" else 0)
    for r in state.values():
        if r["member_count"]:
            assert r["state"] != "Dead" and r["protocol_type"] is not None, r["group_id"]
    assert state["cg-orders"]["member_count"] == 2 and state["cg-converted"]["member_count"] == 1
    # a consumer group's subscribed, idle offsets are not predicted to expire (KIP-848 rule)
    expiring = {r["group_id"] for r in gold["offset_expirations"].to_pylist() if r["status"] == "predicted"}
    assert not expiring & {"cg-orders", "cg-converted"}
    # share and streams groups: folded (tests/pipelines/test_share_streams_gold.py), nothing unsupported
    assert (state[SHARE_GROUP]["group_type"], state[SHARE_GROUP]["unsupported_records"]) == ("share", 0)
    assert (state[STREAMS_GROUP]["group_type"], state[STREAMS_GROUP]["unsupported_records"]) == ("streams", 0)


def test_every_gold_row_says_its_group_type_and_the_converted_group_is_one_group(log: RawLog) -> None:
    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    for name, table in gold.items():
        assert None not in table.column("group_type").to_pylist(), name
    reb = [r for r in gold["rebalances"].to_pylist() if r["group_id"] == "cg-converted"]
    # the classic generation 3, then the consumer group's epoch bumps, told as the group's rebalances
    assert [r["group_type"] for r in reb][:1] == ["classic"] and reb[-1]["group_type"] == "consumer"
    bumps = [r for r in reb if r["group_type"] == "consumer"]
    assert [r["generation"] for r in bumps] == sorted(r["generation"] for r in bumps)
    assert all(r["protocol"] == "uniform" and r["protocol_type"] == "consumer" for r in bumps)
    orders = [r for r in gold["rebalances"].to_pylist() if r["group_id"] == "cg-orders"]
    assert any(r["joined"] for r in orders) and any(r["left"] for r in orders)
    assert any(r["partitions_moved"] for r in orders)
    moves = [
        (r["to_state"], r["group_type"])
        for r in gold["group_transitions"].to_pylist()
        if r["group_id"] == "cg-converted"
    ]
    assert (
        moves[0] == ("Stable", "classic")
        and ("Reconciling", "consumer") in moves
        and moves[-1] == ("Stable", "consumer")
    )
    # the consumer group's deletion (its tombstones) is a consumer group's event
    deaths = [r for r in gold["group_lifecycle"].to_pylist() if r["group_id"] == DELETED_CONSUMER_GROUP]
    assert [(r["event"], r["group_type"]) for r in deaths] == [("group_deleted", "consumer")]


def test_consumer_members_carry_the_cores_epoch_and_assignments(log: RawLog) -> None:
    """The members table holds what the core's consumer-group fold holds for each member."""
    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    recs = []
    for k, v, p, o, ts in log:
        try:
            r = decode_record(k, v, modern=True)
        except Exception:
            continue
        if r.key.group == "cg-orders":
            from coordinator_core import LogRecord

            recs.append(LogRecord(p, o, ts, r.key, r.value))
    snap = replay(new_snapshot("cg-orders"), recs, settings=ReplaySettings(retention_ms=DAY)).snapshot
    assert snap.consumer is not None
    members = [r for r in gold["group_members"].to_pylist() if r["group_id"] == "cg-orders"]
    last_key = max(members, key=lambda r: (r["log_partition"], r["log_offset"]))["event_key"].rsplit(":", 1)[0]
    latest = {r["member_id"]: r for r in members if r["event_key"].rsplit(":", 1)[0] == last_key}
    assert set(latest) == set(snap.consumer.members)
    for mid, m in snap.consumer.members.items():
        r = latest[mid]
        assert (r["member_epoch"], r["generation"], r["member_state"]) == (m.member_epoch, m.member_epoch, m.state)
        assigned = sorted((snap.consumer.topic_label(t), p) for t, ps in m.assigned_partitions for p in ps)
        assert sorted((a["topic"], a["partition"]) for a in r["assigned_partitions"]) == assigned
        assert r["pending_revocation_partitions"] == []
        assert r["group_type"] == "consumer" and r["protocol"] == "uniform"
    revoking = [r for r in members if r["pending_revocation_partitions"]]
    classic = [r for r in gold["group_members"].to_pylist() if r["group_type"] == "classic"]
    assert classic and all(r["member_epoch"] is None and r["pending_revocation_partitions"] is None for r in classic)
    assert not revoking  # rows are told when the group is Stable: nothing left to revoke then


# ---------------------------------------------------------------------------------------------
# inspect: a consumer group as kafka-consumer-groups --describe --state --members shows it
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def inspect_cfg(log: RawLog, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from pipelines.config import load_config
    from pipelines.tableio import deltars
    from schemas import get as get_spec

    cfg = load_config(overrides={"paths.root": str(tmp_path_factory.mktemp("k4inspect")), "replay.retention_ms": DAY})
    schema = get_spec("raw_records").arrow_schema()
    raw = raw_table(log).append_column("timestampType", pa.array([0] * len(log), pa.int32()))
    deltars.create(cfg.table_path("raw_records"), schema, [])
    deltars.write_arrow(cfg.table_path("raw_records"), raw.select(schema.names).cast(schema))
    return cfg


def _core_snapshot(log: RawLog, gid: str, at: int | None = None) -> Any:
    from coordinator_core import LogRecord, snapshot_as_of

    recs = []
    for k, v, p, o, ts in log:
        try:
            r = decode_record(k, v, modern=True)
        except Exception:
            continue
        if r.key.group == gid:
            recs.append(LogRecord(p, o, ts, r.key, r.value))
    return snapshot_as_of(recs, group_id=gid, as_of_ms=at, settings=ReplaySettings(retention_ms=DAY)), recs


def test_inspect_shows_a_consumer_group_as_kafka_consumer_groups_describes_it(inspect_cfg: Any, log: RawLog) -> None:
    import io as _io

    from rich.console import Console

    from pipelines.analytics.inspect import inspect_group
    from pipelines.analytics.inspect_render import render

    view = inspect_group(inspect_cfg, "cg-orders")
    assert (view.group_type, view.state, view.generation) == ("consumer", "Stable", 4)
    c = view.consumer
    assert c is not None
    assert (c["assignment_strategy"], c["state"], c["group_epoch"], c["target_assignment_epoch"]) == (
        "uniform",
        "Stable",
        4,
        4,
    )
    assert [m["member_id"] for m in c["members"]] == ["m0", "m2"]
    for m in c["members"]:
        assert m["current_epoch"] == m["target_epoch"] == 4 and m["member_state"] == "STABLE"
        assert m["current_assignment"] == m["target_assignment"] and m["partitions"] == len(m["current_assignment"])
    assert sorted(p for m in c["members"] for p in m["current_assignment"]) == sorted(f"orders-{p}" for p in range(6))
    out = _io.StringIO()
    render(view, Console(file=out, width=220))
    text = out.getvalue()
    for header in (
        "ASSIGNMENT-STRATEGY",
        "GROUP-EPOCH",
        "TARGET-ASSIGNMENT-EPOCH",
        "GROUP-INSTANCE-ID",
        "CURRENT-ASSIGNMENT",
        "m0",
    ):
        assert header in text, header


def test_inspect_mid_reconciliation_shows_what_a_member_still_has_to_revoke(inspect_cfg: Any, log: RawLog) -> None:
    """At a moment when a member holds partitions it must give up (UNREVOKED_PARTITIONS), the
    view shows them and its epoch behind the target, exactly as the core's fold holds them."""
    from pipelines.analytics.inspect import inspect_group

    _, recs = _core_snapshot(log, "cg-orders")
    moments = []
    for t in sorted({r.timestamp_ms for r in recs}):
        snap, _ = _core_snapshot(log, "cg-orders", t)
        if snap.consumer is not None and any(m.partitions_pending_revocation for m in snap.consumer.members.values()):
            moments.append((t, snap))
    assert moments  # the writer's joins make members revoke
    t, snap = moments[0]
    c = inspect_group(inspect_cfg, "cg-orders", t).consumer
    assert c is not None and c["state"] == snap.consumer.state.value == "Reconciling"
    revoking = {m["member_id"]: m for m in c["members"] if m["pending_revocation"]}
    assert revoking
    for mid, m in revoking.items():
        core = snap.consumer.members[mid]
        assert m["member_state"] == core.state == "UNREVOKED_PARTITIONS"
        assert m["current_epoch"] == core.member_epoch < m["target_epoch"]
        assert len(m["pending_revocation"]) == sum(len(ps) for _, ps in core.partitions_pending_revocation)


# ---------------------------------------------------------------------------------------------
# views: a consumer group's epoch bumps are its rebalances; an older warehouse still answers
# ---------------------------------------------------------------------------------------------
def _gold_warehouse(root: Path, gold: dict[str, pa.Table], drop: tuple[str, ...] = ()) -> Any:
    from pipelines.config import load_config
    from pipelines.tableio import deltars

    cfg = load_config(overrides={"paths.root": str(root), "replay.retention_ms": DAY})
    for name, table in gold.items():
        t = table.drop_columns([c for c in drop if c in table.column_names])
        deltars.create(cfg.table_path(name), t.schema, [])
        deltars.write_arrow(cfg.table_path(name), t)
    return cfg


def test_rebalance_views_count_a_consumer_groups_epoch_bumps(tmp_path: Path, log: RawLog) -> None:
    from pipelines.commands.sql import open_session

    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    cfg = _gold_warehouse(tmp_path, gold)
    got = open_session(cfg, engine="duckdb").execute(
        "SELECT group_id, sum(rebalances) AS n FROM rebalances_daily GROUP BY group_id"
    )
    counts = dict(zip(got.column("group_id").to_pylist(), got.column("n").to_pylist(), strict=True))
    bumps = [r for r in gold["rebalances"].to_pylist() if r["group_id"] == "cg-orders"]
    assert bumps and all(r["group_type"] == "consumer" for r in bumps)
    assert counts["cg-orders"] == len(bumps)


# what mixed_log's share and streams groups did (``_share_and_streams_groups``): the share group's
# epoch 1 (s1 creates it), 2 (s2 joins), 3 (s1 leaves); the streams group's 1 (process a creates
# it), 2 (b joins; the tasks a revokes move without another bump)
SHARE_BUMPS = {"joined": ["s1", "s2"], "left": ["s1"], "rebalances": 3}
STREAMS_BUMPS = {"joined": ["a", "b"], "left": [], "rebalances": 2}


def test_rebalance_views_count_share_and_streams_groups_epoch_bumps(tmp_path: Path, log: RawLog) -> None:
    """A share (KIP-932) or streams (KIP-1071) group's epoch bumps are its rebalances in
    ``rebalances_daily`` and ``membership_churn``, with the members it took in and let go."""
    from pipelines.commands.sql import open_session

    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    session = open_session(_gold_warehouse(tmp_path, gold), engine="duckdb")
    daily = session.execute(
        "SELECT group_id, sum(rebalances) AS n FROM rebalances_daily"
        f" WHERE group_id IN ('{SHARE_GROUP}', '{STREAMS_GROUP}') GROUP BY group_id"
    ).to_pylist()
    churn = session.execute(
        "SELECT group_id, sum(joined) AS joined, sum(`left`) AS `left`, sum(rebalances) AS rebalances"
        f" FROM membership_churn WHERE group_id IN ('{SHARE_GROUP}', '{STREAMS_GROUP}') GROUP BY group_id"
    ).to_pylist()
    want = {SHARE_GROUP: SHARE_BUMPS, STREAMS_GROUP: STREAMS_BUMPS}
    assert {r["group_id"]: r["n"] for r in daily} == {g: w["rebalances"] for g, w in want.items()}
    assert {r["group_id"]: (r["joined"], r["left"], r["rebalances"]) for r in churn} == {
        g: (len(w["joined"]), len(w["left"]), w["rebalances"]) for g, w in want.items()
    }
    for gid, w in want.items():  # the gold rows behind the counts: each group's own type, its members
        bumps = [r for r in gold["rebalances"].to_pylist() if r["group_id"] == gid]
        assert {r["group_type"] for r in bumps} == {"share" if gid == SHARE_GROUP else "streams"}
        assert sorted(m for r in bumps for m in r["joined"] or []) == w["joined"]
        assert sorted(m for r in bumps for m in r["left"] or []) == w["left"]


def test_views_answer_on_a_warehouse_written_before_group_type(tmp_path: Path, log: RawLog) -> None:
    """Tables without the new columns (no job has run since the upgrade): DuckDB reads them as
    NULL, as Spark's declared-schema read does, and classic rebalances still count."""
    from pipelines.commands.sql import open_session

    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    classic = {n: t.filter(pa.compute.equal(t.column("group_type"), "classic")) for n, t in gold.items()}
    cfg = _gold_warehouse(tmp_path, classic, drop=("group_type", "member_epoch", "member_state"))
    session = open_session(cfg, engine="duckdb")
    got = session.execute("SELECT sum(rebalances) AS n FROM rebalances_daily")
    want = sum(
        1 for r in classic["rebalances"].to_pylist() if r["cause"] in ("new_generation", "ended_empty", "first_record")
    )
    assert got.column("n").to_pylist() == [want] and want > 0
    types = session.execute("SELECT DISTINCT group_type FROM group_members")
    assert types.column("group_type").to_pylist() == [None]


def test_metrics_give_a_consumer_group_its_own_states_one_hot(tmp_path: Path, log: RawLog) -> None:
    """``kafka_consumergroup_group_state`` is one-hot over a consumer group's states (Empty,
    Assigning, Reconciling, Stable, Dead), its epoch bumps are its rebalances in the window."""
    from pipelines.serve.metrics import collect, render
    from pipelines.tableio import TableIO

    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    cfg = _gold_warehouse(tmp_path, gold)
    text = render(collect(TableIO(cfg, None, engine="rust"), window_s=30 * 86_400), "test")
    one_hot = [
        ln for ln in text.splitlines() if ln.startswith("kafka_consumergroup_group_state{") and "cg-orders" in ln
    ]
    states = {ln.split('state="')[1].split('"')[0]: float(ln.rsplit(" ", 1)[1]) for ln in one_hot}
    assert states == {"Empty": 0, "Assigning": 0, "Reconciling": 0, "Stable": 1, "Dead": 0}
    reb = [
        ln for ln in text.splitlines() if ln.startswith("kafka_consumergroup_group_rebalances{") and "cg-orders" in ln
    ]
    bumps = sum(1 for r in gold["rebalances"].to_pylist() if r["group_id"] == "cg-orders")
    assert [float(ln.rsplit(" ", 1)[1]) for ln in reb] == [bumps]


def test_metrics_give_share_and_streams_groups_their_own_states_one_hot(tmp_path: Path, log: RawLog) -> None:
    """A share group's ``kafka_consumergroup_group_state`` is one-hot over ``ShareGroupState``
    (Empty, Stable, Dead), a streams group's over ``StreamsGroupState`` (NotReady among them);
    their epoch bumps are their rebalances in the window."""
    from pipelines.serve.metrics import collect, render
    from pipelines.tableio import TableIO

    gold = arrow_gold(raw_table(log), retention_ms=DAY)
    cfg = _gold_warehouse(tmp_path, gold)
    lines = render(collect(TableIO(cfg, None, engine="rust"), window_s=30 * 86_400), "test").splitlines()

    def of(metric: str, gid: str) -> list[str]:
        return [ln for ln in lines if ln.startswith(metric + "{") and f'"{gid}"' in ln]

    def one_hot(gid: str) -> dict[str, float]:
        return {
            ln.split('state="')[1].split('"')[0]: float(ln.rsplit(" ", 1)[1])
            for ln in of("kafka_consumergroup_group_state", gid)
        }

    assert one_hot(SHARE_GROUP) == {"Empty": 0, "Stable": 1, "Dead": 0}
    assert one_hot(STREAMS_GROUP) == {
        "Empty": 0,
        "NotReady": 0,
        "Assigning": 0,
        "Reconciling": 0,
        "Stable": 1,
        "Dead": 0,
    }
    for gid, want in ((SHARE_GROUP, SHARE_BUMPS), (STREAMS_GROUP, STREAMS_BUMPS)):
        reb = of("kafka_consumergroup_group_rebalances", gid)
        assert [float(ln.rsplit(" ", 1)[1]) for ln in reb] == [want["rebalances"]], gid


# ---------------------------------------------------------------------------------------------
# Spark: the batch job and the stream on the mixed cluster
# ---------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_the_batch_job_on_a_mixed_cluster_equals_the_pure_core(spark: Any, tmp_path: Path, log: RawLog) -> None:
    from chispa import assert_df_equality

    from schemas.gold import GOLD_TABLES
    from tests.pipelines.test_replay_job import gold_from_job

    io = gold_from_job(spark, tmp_path, log, retention_ms=DAY)
    expected = core_gold(log, retention_ms=DAY, as_of_ms=max(ts for *_, ts in log))
    for spec in GOLD_TABLES:
        want = spark.createDataFrame(expected[spec.name].to_pylist(), spec.spark_schema())
        assert_df_equality(io.read(spec.name), want, ignore_row_order=True, ignore_nullable=True)
    counts = {n: io.count(n) for n in ("raw_records", "offset_commits", "group_metadata", "group_records")}
    counts.update({n: io.count(n) for n in ("unsupported_records", "quarantine")})
    assert counts["raw_records"] == len(log) == sum(v for n, v in counts.items() if n != "raw_records")
    assert counts["group_records"] > 0
    dead_or_simple = io.read("group_state").where(
        "group_type = 'consumer' AND exists AND (state = 'Dead' OR member_count = 0 AND state != 'Empty')"
    )
    assert dead_or_simple.count() == 0
    deleted = io.read("group_state").where(f"group_id = '{DELETED_CONSUMER_GROUP}'").collect()
    assert [(r["state"], r["exists"], r["group_type"]) for r in deleted] == [("Dead", False, "consumer")]


@pytest.mark.spark
def test_the_stream_on_a_mixed_cluster_equals_the_pure_core(spark: Any, tmp_path: Path, log: RawLog) -> None:
    """The stream (many micro-batches: a group's records arrive in several calls, the converted
    group's classic and consumer records among them) == the pure core at its final watermark,
    which is also what the batch job's functions give (``test_stream_job``'s reference)."""
    from pipelines.inputs.raw_files import RawRecord
    from pipelines.jobs import stream as stream_job
    from pipelines.tableio import TableIO
    from schemas.gold import GOLD_TABLES
    from tests.pipelines.test_stream_job import (
        DELAY_MS,
        RETENTION_MS,
        assert_gold_equal,
        final_present,
        land,
        stream_config,
    )

    records = [RawRecord(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in log]
    watermark = max(ts for *_, ts in log) - DELAY_MS
    present = final_present(watermark)
    core = core_gold(log, retention_ms=RETENTION_MS, **present)
    batch = arrow_gold(raw_table(log), retention_ms=RETENTION_MS, **present)
    assert all(rows(batch[n]) == rows(core[n]) for n in core)
    land(records, tmp_path / "landing", rows_per_file=60)
    cfg = stream_config(tmp_path)
    recorder = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    assert len([r for r in recorder.rows if r["query_name"] == stream_job.REPLAY_QUERY]) >= 3
    expected = {s.name: spark.createDataFrame(core[s.name].to_pylist(), s.spark_schema()) for s in GOLD_TABLES}
    assert_gold_equal(spark, cfg, expected)
    state = TableIO(cfg, spark).read("group_state").where("group_type = 'consumer'").collect()
    assert {r["group_id"] for r in state} >= set(CONSUMER_GROUPS)
    assert all(r["state"] != "Dead" for r in state if r["member_count"])
