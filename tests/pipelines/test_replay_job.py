"""The replay of the records functions and of the batch job: a group's gold rows equal what the
pure core replay returns for it.

A multi-group log (consumer groups that rebalance, empty out and die; simple groups that only
commit; a connect group; offset/group tombstones; newer record types; a corrupt record) is
encoded with the core codec, run through the batch job (``pipelines.jobs.batch``: decode,
replay input, replay by bucket, Delta tables); the expected rows come from decoding the same
bytes with the core codec and calling ``coordinator_core.loader.replay`` per group, converted by the
same column rule.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
from typing import Any

import pyarrow as pa
import pyarrow.compute
import pytest

from coordinator_core import (
    Assignment,
    CoordinatorError,
    GroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    ReplaySettings,
    Subscription,
    TopicPartitions,
    decode_record,
    encode_assignment,
    encode_key,
    encode_subscription,
    encode_value,
    new_snapshot,
    partition_for,
    replay,
)
from coordinator_core.codec.modern_records import ConsumerGroupMetadataValue
from pipelines.records.gold import GOLD_SPECS, GoldMappingError, column_mapping, rows_to_arrow
from pipelines.records.replay import event_kinds_for, gold_rows
from schemas.gold import GOLD_TABLES

BASE_MS = 1_700_000_000_000
DAY = 86_400_000
RAW_DDL = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"


def _member(rng: random.Random, gid: str, i: int, topics: list[str], parts: list[tuple[str, int]]) -> MemberMetadata:
    sub = encode_subscription(Subscription(tuple(topics)))
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    asg = encode_assignment(Assignment(tuple(TopicPartitions(t, tuple(ps)) for t, ps in sorted(by_topic.items()))))
    static = f"{gid}-inst-{i}" if rng.random() < 0.3 else None
    return MemberMetadata(
        member_id=f"consumer-{i}-{rng.randrange(1 << 30):08x}",
        client_id=f"client-{i}",
        client_host=f"/10.0.0.{i}",
        session_timeout=45_000,
        subscription=sub,
        assignment=asg,
        rebalance_timeout=300_000,
        group_instance_id=static,
    )


def group_story(rng: random.Random, gid: str, start: int) -> list[tuple[int, Any, Any]]:
    """(timestamp_ms, key, value) records of one group's life."""
    out: list[tuple[int, Any, Any]] = []
    t = start
    topics = [f"orders-{rng.randrange(3)}", "payments"][: rng.randint(1, 2)]
    tps = [(tp, p) for tp in topics for p in range(rng.randint(1, 3))]
    kind = rng.choice(["consumer", "consumer", "consumer", "simple", "connect"])
    offsets = {tp: rng.randrange(1000) for tp in tps}

    def commits(n: int) -> None:
        nonlocal t
        for _ in range(n):
            t += rng.randint(100, 5000)
            tp = rng.choice(tps)
            offsets[tp] += rng.randint(0, 50)
            version = rng.choice([3, 3, 3, 1, 2])
            out.append(
                (
                    t,
                    OffsetCommitKey(gid, tp[0], tp[1]),
                    OffsetCommitValue(
                        offsets[tp],
                        rng.choice(["", "", "meta"]),
                        t,
                        leader_epoch=rng.choice([None, 5]) if version == 3 else None,
                        expire_timestamp=t + 7 * DAY if version == 1 else None,
                        version=version,
                    ),
                )
            )

    if kind == "simple":
        commits(rng.randint(3, 12))
    else:
        ptype = "consumer" if kind == "consumer" else "connect"
        gen = 0
        for _round in range(rng.randint(1, 3)):
            gen += rng.randint(1, 2)
            n = rng.randint(1, 3)
            members = tuple(_member(rng, gid, i, topics, tps[i::n]) for i in range(n))
            t += rng.randint(1000, 20_000)
            out.append(
                (
                    t,
                    GroupMetadataKey(gid),
                    GroupMetadataValue(
                        ptype,
                        gen,
                        rng.choice(["range", "cooperative-sticky"]),
                        members[0].member_id,
                        members,
                        current_state_timestamp=t - rng.randint(0, 3000),
                        version=3,
                    ),
                )
            )
            commits(rng.randint(2, 10))
        if rng.random() < 0.6:  # everybody leaves: Empty
            gen += 1
            t += rng.randint(1000, 60_000)
            out.append((t, GroupMetadataKey(gid), GroupMetadataValue(ptype, gen, None, None, (), t, version=3)))
    if rng.random() < 0.3:  # an offset deleted (OffsetDelete / expiry tombstone)
        t += rng.randint(1000, 10_000)
        tp = rng.choice(tps)
        out.append((t, OffsetCommitKey(gid, tp[0], tp[1]), None))
    if rng.random() < 0.2:  # the group deleted
        t += rng.randint(1000, 10_000)
        for tp in tps:
            out.append((t, OffsetCommitKey(gid, tp[0], tp[1]), None))
        out.append((t, GroupMetadataKey(gid), None))
    if rng.random() < 0.3:  # comes back much later (after retention would have expired offsets)
        t += rng.randint(2, 9) * DAY
        commits(rng.randint(1, 4))
    return out


def build_log(n_groups: int = 14, seed: int = 11) -> list[tuple[bytes, bytes | None, int, int, int]]:
    """Raw records (key, value, partition, offset, timestamp_ms) of a multi-group log, in log order."""
    rng = random.Random(seed)
    stamped: list[tuple[int, int, bytes, bytes | None]] = []
    for g in range(n_groups):
        gid = f"group-{g:02d}" if g else ""  # the empty group id is legal for offset commits
        for seq, (ts, key, value) in enumerate(group_story(rng, gid, BASE_MS + rng.randrange(DAY))):
            stamped.append((ts, g * 10_000 + seq, encode_key(key), None if value is None else encode_value(value)))
    # a Kafka 4 record (KIP-848 ConsumerGroupMetadata, record type 3, as a broker writes it), a
    # record type no Kafka release knows (25: unsupported, counted) and a corrupt record
    stamped.append(
        (BASE_MS + 5000, 10**9, encode_key(GroupKey("group-01", 3)), encode_value(ConsumerGroupMetadataValue(1)))
    )
    gk = b"\x00\x19" + len(b"group-01").to_bytes(2, "big") + b"group-01"
    stamped.append((BASE_MS + 5500, 10**9 + 2, gk, b"\x00\x00\x00\x00\x00\x01"))
    stamped.append((BASE_MS + 6000, 10**9 + 1, encode_key(OffsetCommitKey("group-02", "x", 0)), b"\x00\x03\x00"))
    stamped.sort()
    next_offset: dict[int, int] = {}
    out = []
    for ts, _, key, value in stamped:
        rec = None
        with contextlib.suppress(CoordinatorError):
            rec = decode_record(key, value, modern=True)
        gid = rec.key.group if rec is not None and rec.key.group is not None else "group-02"
        part = partition_for(gid)
        off = next_offset.get(part, 0)
        next_offset[part] = off + 1
        out.append((key, value, part, off, ts))
    return out


def core_gold(
    log: list[tuple[bytes, bytes | None, int, int, int]],
    *,
    retention_ms: int | None,
    as_of_ms: int | None,
    log_end_ms: int | None = None,
    coordinator: str = "old",
) -> dict[str, pa.Table]:
    """The pure core's gold rows: decode each record, replay each group, convert. The
    coordinator is Kafka 3's by default, as the jobs compared with it are configured
    (``gold_from_job``, test_batch_job): since issue 17 a rebalance start window depends on it
    (Kafka 4 re-arms the initial join delay from any Empty), so give the job's own setting
    (``auto`` for a job on the default config)."""
    settings = ReplaySettings(retention_ms=retention_ms, coordinator=coordinator)
    by_group: dict[str, list[LogRecord]] = {}
    for key, value, part, off, ts in log:
        try:
            rec = decode_record(key, value, modern=True)  # Kafka 4's group records folded too
        except CoordinatorError:
            continue
        if rec.key.group is None:
            continue
        by_group.setdefault(rec.key.group, []).append(LogRecord(part, off, ts, rec.key, rec.value))
    tables = [s.name for s in GOLD_TABLES]
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    for gid, recs in sorted(by_group.items()):
        recs.sort(key=lambda r: r.position)
        # the job's as_of is the end of the log, and the end of the log judges predictions
        result = replay(
            new_snapshot(gid),
            recs,
            settings=settings,
            as_of_ms=as_of_ms,
            log_end_ms=as_of_ms if log_end_ms is None else log_end_ms,
            event_kinds=event_kinds_for(tables),
        )
        for name, rs in gold_rows(result, tables=tables, settings=settings).items():
            rows[name].extend(rs)
    return {name: rows_to_arrow(GOLD_SPECS[name], rs) for name, rs in rows.items()}


def raw_df(spark: Any, log: list[tuple[bytes, bytes | None, int, int, int]]) -> Any:
    rows = [
        (k, v, "__consumer_offsets", p, o, dt.datetime.fromtimestamp(ts / 1000, dt.UTC), 0) for k, v, p, o, ts in log
    ]
    return spark.createDataFrame(rows, RAW_DDL)


def _sorted_rows(table: pa.Table, key: tuple[str, ...]) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(r[k]) for k in key))


# ---------------------------------------------------------------------------------------------
# pure tests (no Spark)
# ---------------------------------------------------------------------------------------------
def test_every_core_row_key_maps_to_exactly_one_gold_column() -> None:
    log = build_log(n_groups=10)
    core = core_gold(log, retention_ms=DAY, as_of_ms=BASE_MS + 30 * DAY)
    assert all(core[name].num_rows > 0 for name in core), {n: t.num_rows for n, t in core.items()}


def test_sorted_batches_replay_equals_one_call_per_group_across_batch_boundaries() -> None:
    """The tail group of a batch continues in the next batch: still one replay per group."""
    from coordinator_core import new_snapshot
    from pipelines.records.gold import GOLD_SPECS, to_union
    from pipelines.records.replay import replay_sorted_batches, replay_table

    def one_call(rows: pa.Table) -> pa.Table:  # the stream's entry point: one group per call
        settings = ReplaySettings(retention_ms=DAY)
        result = replay_table(new_snapshot(rows["group_id"][0].as_py()), rows, settings=settings)
        return pa.concat_tables(
            [
                to_union(n, rows_to_arrow(GOLD_SPECS[n], rs))
                for n, rs in gold_rows(result, settings=settings).items()
                if rs
            ]
        )

    log = build_log(n_groups=6, seed=5)
    table = replay_input_arrow(log)
    order = pa.compute.sort_indices(
        table, [("group_id", "ascending"), ("coordinator_partition", "ascending"), ("log_offset", "ascending")]
    )
    table = table.take(order)
    per_group = pa.concat_tables(
        one_call(table.filter(pa.compute.equal(table["group_id"], g)))
        for g in sorted(set(table["group_id"].to_pylist()))
    )
    batched = pa.concat_tables(
        replay_sorted_batches(table.to_batches(max_chunksize=7), settings=ReplaySettings(retention_ms=DAY))
    )
    assert batched.num_rows == per_group.num_rows > 0
    assert _sorted_rows(batched, ("gold_table", "group_id", "event_key", "topic", "partition")) == _sorted_rows(
        per_group, ("gold_table", "group_id", "event_key", "topic", "partition")
    )


def replay_input_arrow(log: list[tuple[bytes, bytes | None, int, int, int]]) -> pa.Table:
    """The replay input (``schemas.shapes.REPLAY_INPUT``) of a log, built without Spark."""
    import numpy as np

    from pipelines.records.decode import UNION_SCHEMA, decode_batch
    from schemas.base import parse_type, to_arrow_type
    from schemas.shapes import REPLAY_INPUT

    REPLAY_INPUT_DDL = [(c.name, c.type) for c in REPLAY_INPUT.columns]

    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for k, *_ in log], pa.binary()),
            "value": pa.array([v for _, v, *_ in log], pa.binary()),
            "partition": pa.array(np.array([p for _, _, p, _, _ in log], np.int32)),
            "offset": pa.array([o for *_, o, _ in log], pa.int64()),
            "timestamp": pa.array([ts * 1000 for *_, ts in log], pa.timestamp("us", tz="UTC")),
        }
    )
    u = pa.Table.from_batches(decode_batch(batch), schema=UNION_SCHEMA)
    u = u.filter(pa.compute.less_equal(u["kind"], 1))

    def ms(c: str) -> pa.Array:
        return pa.compute.divide(u[c].cast(pa.int64()), 1000)

    members = pa.array(
        [
            None
            if ms_ is None
            else [
                {
                    k: m[k]
                    for k in (
                        "member_id",
                        "group_instance_id",
                        "client_id",
                        "client_host",
                        "rebalance_timeout",
                        "session_timeout",
                        "subscription",
                        "assignment",
                    )
                }
                for m in ms_
            ]
            for ms_ in u["members"].to_pylist()
        ],
        to_arrow_type(parse_type(dict(REPLAY_INPUT_DDL)["members"])),
    )
    cols = {
        "log_timestamp_ms": ms("log_timestamp"),
        "rec_kind": u["kind"],
        "commit_timestamp_ms": ms("commit_timestamp"),
        "expire_timestamp_ms": ms("expire_timestamp"),
        "current_state_timestamp_ms": ms("current_state_timestamp"),
        "members": members,
    }
    # columns the decoder does not fill (a segment's producer ids, transaction markers) are null
    null = {c.name: pa.nulls(u.num_rows, REPLAY_INPUT.arrow_schema().field(c.name).type) for c in REPLAY_INPUT.columns}
    return pa.table(
        {
            name: cols[name] if name in cols else u[name] if name in u.column_names else null[name]
            for name, _ in REPLAY_INPUT_DDL
        }
    )


def test_gold_mapping_rejects_an_unknown_core_key() -> None:
    with pytest.raises(GoldMappingError):
        column_mapping(GOLD_SPECS["offsets_current"], [*GOLD_SPECS["offsets_current"].column_names, "surprise"])


def test_time_points_become_timestamps_of_the_same_instant() -> None:
    row = {
        "group_id": "g",
        "topic": "t",
        "partition": 0,
        "offset": 5,
        "leader_epoch": None,
        "metadata": "",
        "commit_timestamp": 1234,
        "expire_timestamp": None,
        "value_version": 3,
        "log_partition": 1,
        "log_offset": 2,
        "timestamp_ms": 1_700_000_000_123,
        "group_type": "classic",
        "transactional_producer_id": None,  # the core's offset row (``GroupSnapshot.offset_rows``) has it
    }
    out = rows_to_arrow(GOLD_SPECS["offsets_current"], [row]).to_pylist()[0]
    assert out["commit_timestamp"] == dt.datetime(1970, 1, 1, 0, 0, 1, 234000, tzinfo=dt.UTC)
    assert out["timestamp"] == dt.datetime.fromtimestamp(1_700_000_000.123, dt.UTC)
    assert out["offset"] == 5 and out["expire_timestamp"] is None


# ---------------------------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------------------------
def gold_from_job(
    spark: Any,
    tmp_path: Any,
    log: list[tuple[bytes, bytes | None, int, int, int]],
    *,
    retention_ms: int | None,
    echo: Any = None,
) -> Any:
    """Run the batch job (``run batch``'s path) over ``log`` landed as one file; its TableIO."""
    from pipelines.config import load_config
    from pipelines.inputs.raw_files import RawRecord, write_raw_records
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    cfg = load_config(
        overrides={"paths.root": str(tmp_path), "replay.retention_ms": retention_ms, "replay.coordinator": "old"}
    )
    write_raw_records([RawRecord(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in log], cfg.paths.landing)
    io = TableIO(cfg, spark)
    assert run_batch(cfg, spark, io=io, echo=echo).reconciled
    return io


@pytest.mark.spark
@pytest.mark.parametrize("retention_ms", [60_000, 3 * DAY])  # the job always has a retention
def test_the_batch_jobs_gold_equals_pure_core_replay_per_group(spark: Any, tmp_path: Any, retention_ms: int) -> None:
    from chispa import assert_df_equality

    log = build_log()
    io = gold_from_job(spark, tmp_path, log, retention_ms=retention_ms)
    as_of = max(ts for *_, ts in log)
    expected = core_gold(log, retention_ms=retention_ms, as_of_ms=as_of)
    for spec in GOLD_TABLES:
        got = io.read(spec.name)
        want = spark.createDataFrame(expected[spec.name].to_pylist(), spec.spark_schema())
        assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True, ignore_column_order=False)
    group_ids = {r["group_id"] for r in io.read("group_state").collect()}
    assert "" in group_ids and len(group_ids) == 14
    # the rules ran: this log holds no cleanup tombstones, so what they had due mid-log is
    # contradicted by the log (and counted), and only forecasts at its end are rows
    judged = io.read("group_state").agg({"predictions_contradicted": "sum"}).collect()[0][0]
    forecasts = io.read("offset_expirations").where("cause = 'retention'").count()
    assert judged + forecasts > 0


@pytest.mark.spark
def test_as_of_defaults_to_the_last_record_timestamp(spark: Any, tmp_path: Any) -> None:
    log = build_log(n_groups=4, seed=3)
    said: list[str] = []
    gold_from_job(spark, tmp_path, log, retention_ms=DAY, echo=said.append)
    assert any(f"as_of_ms={max(ts for *_, ts in log if ts)}" in line for line in said if "replay done" in line)


@pytest.mark.spark
def test_the_batch_jobs_gold_equals_pure_core_replay_on_a_simulator_generated_log(spark: Any, tmp_path: Any) -> None:
    """The simulator's realistic log (rebalances, static members, simple/ephemeral/connect groups,
    expiry tombstones): the job's gold rows == the pure core's, table by table."""
    from chispa import assert_df_equality

    from coordinator_core.simulator.generator import generate

    generated = generate(16, 0.05, seed=5)
    log = list(zip(generated.keys, generated.values, generated.partitions, generated.offsets, generated.timestamps))
    assert len({p for _, _, p, _, _ in log}) > 5
    retention = 60_000
    io = gold_from_job(spark, tmp_path, log, retention_ms=retention)
    expected = core_gold(log, retention_ms=retention, as_of_ms=max(generated.timestamps))
    assert expected["group_state"].num_rows == len(generated.truth["groups"])
    for spec in GOLD_TABLES:
        want = spark.createDataFrame(expected[spec.name].to_pylist(), spec.spark_schema())
        assert_df_equality(io.read(spec.name), want, ignore_row_order=True, ignore_nullable=True)


def test_gold_rows_keep_one_row_per_event_key_the_later_one() -> None:
    """An offset tombstone re-told as group_deleted by the group tombstone of its batch
    (DeleteGroups) is ONE offset_expirations row (the later one), as the streaming MERGE leaves it
    — never two rows for one key. A withdrawn forecast is no row."""
    from coordinator_core import new_snapshot, replay
    from pipelines.records.replay import gold_rows
    from tests.coordinator_core.replay_builders import GroupLog, member

    week = 7 * 86_400_000
    log = GroupLog()
    log.stable(1, [member("m1", assigned={"t": [0]})])
    log.commit("t", 0, 5)
    log.empty(2, at=log.now + 60_000)
    log.offset_tombstone("t", 0, at=log.now + 60_000)  # DeleteGroups: the offsets, then the group
    log.group_tombstone(at=log.now)
    result = replay(new_snapshot("g"), log.records, settings=ReplaySettings(retention_ms=week))
    keys = [e.to_row()["event_key"] for e in result.events if e.table == "offset_expirations"]
    assert len(keys) == 2 and len(set(keys)) == 1  # the core tells the tombstone, then group_deleted
    rows = gold_rows(result, tables=("offset_expirations",), settings=ReplaySettings(retention_ms=week))[
        "offset_expirations"
    ]
    assert len(rows) == 1
    assert rows[0]["cause"] == "group_deleted" and rows[0]["observed_ms"] == log.now
    # a forecast a later call withdrew (the group came back): its key has no row
    first = replay(
        new_snapshot("g"), log.records[:3], settings=ReplaySettings(retention_ms=week), as_of_ms=log.now + 2 * week
    )
    later = replay(
        first.snapshot,
        [],
        settings=ReplaySettings(retention_ms=week),
        as_of_ms=log.now + 2 * week,
        log_end_ms=log.now + 2 * week,
    )
    assert [e.to_row()["status"] for e in later.events if e.table == "offset_expirations"] == ["withdrawn"]
    assert (
        gold_rows(later, tables=("offset_expirations",), settings=ReplaySettings(retention_ms=week))[
            "offset_expirations"
        ]
        == []
    )
