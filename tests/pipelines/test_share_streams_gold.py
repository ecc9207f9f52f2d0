"""Share groups (KIP-932) and streams groups (KIP-1071) in the gold tables and in ``inspect``
(issue 35): the mixed Kafka 4 cluster of ``mixed_log`` (classic, consumer, share, streams
groups), through the jobs' Arrow functions (the batch's and the stream's code, no Spark)."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pytest

from tests.pipelines.mixed_log import SHARE_GROUP, STREAMS_GROUP, RawLog, mixed_log
from tests.pipelines.pipeline_helpers import arrow_gold
from tests.pipelines.test_kafka4_jobs import DAY, raw_table


@pytest.fixture(scope="module")
def log() -> RawLog:
    return mixed_log()


@pytest.fixture(scope="module")
def gold(log: RawLog) -> dict[str, pa.Table]:
    return arrow_gold(raw_table(log), retention_ms=DAY)


def _of(gold: dict[str, pa.Table], table: str, gid: str) -> list[dict[str, Any]]:
    return [r for r in gold[table].to_pylist() if r["group_id"] == gid]


def test_every_gold_table_knows_all_four_group_types(gold: dict[str, pa.Table]) -> None:
    types = {t for name in ("group_state", "rebalances", "group_members", "group_transitions") for t in
             gold[name].column("group_type").to_pylist()}  # fmt: skip
    assert types == {"classic", "consumer", "share", "streams"}


def test_a_share_group_state_members_and_no_offsets(gold: dict[str, pa.Table]) -> None:
    (state,) = _of(gold, "group_state", SHARE_GROUP)
    assert (state["state"], state["group_type"], state["protocol_type"], state["generation"]) == (
        "Stable",
        "share",
        "share",
        3,
    )
    assert state["offsets_kept_in"] == "__share_group_state" and state["offset_count"] == 0
    assert state["next_expiry_time"] is None
    assert [m["member_id"] for m in state["members"]] == ["s2"]
    assert state["members"][0]["assigned_partitions"] == [{"topic": "orders", "partition": p} for p in range(4)]
    assert not _of(gold, "offsets_current", SHARE_GROUP) and not _of(gold, "offset_expirations", SHARE_GROUP)
    reb = _of(gold, "rebalances", SHARE_GROUP)
    assert [(r["generation"], r["cause"], r["joined"], r["left"]) for r in reb] == [
        (1, "group_created", ["s1"], []),
        (2, "members_joined", ["s2"], []),
        (3, "members_left", [], ["s1"]),
    ]
    assert all(r["protocol_type"] == "share" and r["protocol"] == "simple" for r in reb)
    # s1's leave: its partitions go to s2; the rebalance ends when s2 took epoch 3's assignment
    assert reb[2]["partitions_gained"] == [{"member_id": "s2", "topic": "orders", "partition": p} for p in (0, 1)]
    assert reb[2]["end_time"] > reb[2]["join_completed_time"] > reb[2]["start_time"]
    members = _of(gold, "group_members", SHARE_GROUP)
    assert {(m["member_id"], m["member_epoch"]) for m in members} >= {("s1", 2), ("s2", 2)}
    assert all(m["process_id"] is None and m["assigned_tasks"] is None for m in members)


def test_a_streams_group_tasks_epochs_and_offsets(gold: dict[str, pa.Table]) -> None:
    (state,) = _of(gold, "group_state", STREAMS_GROUP)
    assert (state["state"], state["group_type"], state["protocol"], state["generation"], state["member_count"]) == (
        "Stable",
        "streams",
        "sticky",
        2,
        2,
    )
    assert state["offsets_kept_in"] == "__consumer_offsets" and state["offset_count"] == 3
    assert set(state["subscribed_topics"]) == {"input", f"{STREAMS_GROUP}-KSTREAM-REPARTITION-repartition"}
    # subscribed (source) topics of a non-empty streams group never expire
    assert not [r for r in _of(gold, "offset_expirations", STREAMS_GROUP) if r["status"] == "predicted"]
    reb = _of(gold, "rebalances", STREAMS_GROUP)
    assert [(r["generation"], r["joined"], r["partitions_moved"]) for r in reb] == [(1, ["a"], 0), (2, ["b"], 2)]
    assert reb[1]["partitions_lost"] == [
        {"member_id": "a", "topic": "0", "partition": 1},
        {"member_id": "a", "topic": "1", "partition": 1},
    ]
    latest = [m for m in _of(gold, "group_members", STREAMS_GROUP) if m["generation"] == 2]
    b = next(m for m in latest if m["member_id"] == "b")
    assert (b["process_id"], b["member_state"], b["assigned_partitions"]) == ("process-b", "STABLE", None)
    assert b["assigned_tasks"] == [
        {"role": "active", "subtopology_id": "0", "partition": 1},
        {"role": "active", "subtopology_id": "1", "partition": 1},
        {"role": "standby", "subtopology_id": "1", "partition": 0},
    ]
    moves = [r["to_state"] for r in _of(gold, "group_transitions", STREAMS_GROUP)]
    # the topology creates the group; the new member is uninitialized (Reconciling: the topology
    # epoch 0 is the loader's initial validated epoch), then the epoch bump, then its assignment
    assert moves[:5] == ["Empty", "Reconciling", "Assigning", "Reconciling", "Stable"] and moves[-1] == "Stable"


def test_inspect_shows_them_as_kafkas_tools_do(log: RawLog, tmp_path_factory: pytest.TempPathFactory) -> None:
    from rich.console import Console

    from pipelines.analytics.inspect import inspect_group
    from pipelines.analytics.inspect_render import render
    from pipelines.config import load_config
    from pipelines.tableio import deltars
    from schemas import get as get_spec

    cfg = load_config(overrides={"paths.root": str(tmp_path_factory.mktemp("g4inspect")), "replay.retention_ms": DAY})
    schema = get_spec("raw_records").arrow_schema()
    raw = raw_table(log).append_column("timestampType", pa.array([0] * len(log), pa.int32()))
    deltars.create(cfg.table_path("raw_records"), schema, [])
    deltars.write_arrow(cfg.table_path("raw_records"), raw.select(schema.names).cast(schema))
    share = inspect_group(cfg, SHARE_GROUP)
    assert share.share is not None and share.consumer is None
    assert (share.share["state"], share.share["group_epoch"], share.share["assignment_epoch"]) == ("Stable", 3, 3)
    assert [(m["member_id"], m["assignment"], m["member_epoch"]) for m in share.share["members"]] == [
        ("s2", "orders:0,1,2,3", 3)
    ]
    out = io.StringIO()
    render(share, Console(file=out, width=220))
    text = out.getvalue()
    for header in ("COORDINATOR (ID)", "ASSIGNMENT-EPOCH", "MEMBER-EPOCH", "orders:0,1,2,3", "__share_group_state"):
        assert header in text, header
    streams = inspect_group(cfg, STREAMS_GROUP)
    d = streams.streams
    assert d is not None and (d["state"], d["group_epoch"], d["target_assignment_epoch"], d["topology_epoch"]) == (
        "Stable",
        2,
        2,
        0,
    )
    b = next(m for m in d["members"] if m["member_id"] == "b")
    assert (
        b["assignments"] == "ACTIVE: 0:[1]; 1:[1]; STANDBY: 1:[0]; TARGET-ACTIVE: 0:[1]; 1:[1]; TARGET-STANDBY: 1:[0]; "
    )
    out = io.StringIO()
    render(streams, Console(file=out, width=260))
    text = out.getvalue()
    for header in ("TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER-PROTOCOL", "PROCESS", "process-b", "changelog"):
        assert header in text, header
