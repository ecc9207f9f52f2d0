"""The generator: deterministic, decodable, log-ordered, realistic, and consistent with replay."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from coordinator_core.codec import record_codec as codec
from coordinator_core.codec.records import GroupMetadataKey, LogRecord, OffsetCommitKey
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.partitioner import partition_for
from coordinator_core.simulator.generator import GeneratedLog, GeneratorConfig, LogGenerator, generate


@pytest.fixture(scope="module")
def log() -> GeneratedLog:
    return generate(14, 1, seed=11, retention_ms=600_000)


@pytest.fixture(scope="module")
def by_group(log: GeneratedLog) -> dict[str, list[LogRecord]]:
    return decoded(log)


def decoded(log: GeneratedLog) -> dict[str, list[LogRecord]]:
    by: dict[str, list[LogRecord]] = defaultdict(list)
    for k, v, p, o, t in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps):
        r = codec.decode_record(k, v)
        assert r.key.group is not None
        by[r.key.group].append(LogRecord(p, o, t, r.key, r.value))
    return by


def test_same_seed_same_bytes_and_another_seed_another_log() -> None:
    a = generate(6, 0.5, seed=3)
    b = generate(6, 0.5, seed=3)
    c = generate(6, 0.5, seed=4)
    assert (a.keys, a.values, a.partitions, a.offsets, a.timestamps) == (
        b.keys,
        b.values,
        b.partitions,
        b.offsets,
        b.timestamps,
    )
    assert a.truth == b.truth
    assert a.keys != c.keys


def test_offsets_are_dense_per_partition_and_timestamps_never_go_back(log: GeneratedLog) -> None:
    last: dict[int, tuple[int, int]] = {}
    for p, o, t in zip(log.partitions, log.offsets, log.timestamps):
        prev = last.get(p, (-1, 0))
        assert o == prev[0] + 1 and t >= prev[1]
        last[p] = (o, t)
    assert len(log) == log.truth["records"]


def test_every_record_decodes_and_lives_in_its_groups_partition(by_group: dict[str, list[LogRecord]]) -> None:
    for group, records in by_group.items():
        assert {r.partition for r in records} == {partition_for(group)}


def test_the_mix_has_every_kind_of_group_and_lifecycle(log: GeneratedLog, by_group: dict[str, list[LogRecord]]) -> None:
    groups: dict[str, Any] = log.truth["groups"]
    kinds = {g["kind"] for g in groups.values()}
    assert {"app", "static", "simple", "ephemeral"} <= kinds <= {"app", "static", "simple", "ephemeral", "connect"}
    for gid, g in groups.items():
        if g["kind"] == "connect" and g["exists"]:
            assert g["protocol_type"] == "connect" and g["commits"] == 0, gid
    by = by_group
    simple = [gid for gid, g in groups.items() if g["kind"] == "simple"]
    # a simple group never has a group record with a value (Kafka 4, the generator's default,
    # writes a group tombstone when it deletes one)
    assert simple and all(
        not any(isinstance(r.key, GroupMetadataKey) and r.value is not None for r in by[gid]) for gid in simple
    )
    assert any(g["expired_ms"] is not None for g in groups.values())
    assert any(g["offset_tombstones"].get("retention") for g in groups.values())
    assert any(g["rebalances"] > 1 for g in groups.values())
    assert log.truth["deleted_topics"]
    deleted = {d["topic"] for d in log.truth["deleted_topics"]}
    topic_tombstones = {
        r.key.topic for rs in by.values() for r in rs if r.value is None and isinstance(r.key, OffsetCommitKey)
    }
    if sum(g["offset_tombstones"].get("topic_deleted", 0) for g in groups.values()):
        assert topic_tombstones & deleted


def test_default_retention_lets_groups_expire_within_the_run() -> None:
    assert GeneratorConfig(groups=1, hours=2).effective_retention_ms == 30 * 60_000
    assert GeneratorConfig(groups=1, hours=1000).effective_retention_ms == 7 * 24 * 3_600_000
    assert GeneratorConfig(groups=1, hours=2, retention_ms=5).effective_retention_ms == 5


def assert_replay_matches_truth(truth: dict[str, Any], by: dict[str, list[LogRecord]]) -> None:
    for gid, g in truth["groups"].items():
        snap = replay(new_snapshot(gid), by.get(gid, []), assume_log_start=True, event_kinds=()).snapshot
        if g["final_state"] in ("Stable", "Empty"):
            # mid-rebalance states are never persisted, so only settled groups compare
            assert (str(snap.state), snap.generation) == (g["final_state"], g["generation"]), gid
            assert len(snap.offsets) == g["live_offsets"], gid
        elif g["final_state"] == "Dead":
            # every offset is tombstoned; the group record too unless it never had one (the old
            # coordinator writes no group tombstone at generation 0)
            assert len(snap.offsets) == 0, gid
            assert not snap.exists or (g["generation"] == 0 and snap.generation == 0), gid


def test_replaying_the_generated_log_reproduces_the_simulators_final_groups(
    log: GeneratedLog, by_group: dict[str, list[LogRecord]]
) -> None:
    assert_replay_matches_truth(log.truth, by_group)


def test_coordinator_failovers_keep_the_log_and_the_simulator_consistent() -> None:
    log = generate(10, 1, seed=5, failovers_per_hour=6, retention_ms=600_000)
    assert log.truth["failovers"]
    assert any(g["failovers"] for g in log.truth["groups"].values())
    assert_replay_matches_truth(log.truth, decoded(log))


def test_chunks_stream_the_same_records_as_one_batch() -> None:
    cfg = GeneratorConfig(groups=5, hours=0.5, seed=9, chunk_records=500)
    gen = LogGenerator(cfg)
    seen: list[tuple[int, int, int]] = []
    chunks = list(gen.chunks(progress=lambda done, total, n: seen.append((done, total, n))))
    assert len(chunks) > 1 and all(len(c) for c in chunks)
    whole = generate(5, 0.5, seed=9)
    assert [k for c in chunks for k in c.keys] == whole.keys
    assert seen[-1][0] == seen[-1][1] and seen[-1][2] == len(whole)


def test_the_fast_encoded_path_writes_exactly_the_codecs_bytes() -> None:
    for options in ({}, {"offset_value_version": 1, "group_value_version": 2}, {"coordinator": "new"}):
        fast = generate(6, 0.5, seed=21, retention_ms=300_000, **options)
        slow = generate(6, 0.5, seed=21, retention_ms=300_000, fast=False, **options)
        assert fast.keys == slow.keys
        assert fast.values == slow.values
        assert (fast.partitions, fast.offsets, fast.timestamps) == (slow.partitions, slow.offsets, slow.timestamps)


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(ValueError):
        LogGenerator(GeneratorConfig(groups=0, hours=1))


def test_the_log_does_not_depend_on_the_interpreters_hash_seed() -> None:
    import hashlib
    import os
    import subprocess
    import sys

    code = (
        "import hashlib; from coordinator_core.simulator.generator import generate; "
        "g = generate(8, 0.5, seed=13, failovers_per_hour=4); h = hashlib.sha256(); "
        "[h.update(k + (v or b'-') + p.to_bytes(4, 'big') + o.to_bytes(8, 'big') + t.to_bytes(8, 'big')) "
        "for k, v, p, o, t in zip(g.keys, g.values, g.partitions, g.offsets, g.timestamps)]; print(h.hexdigest())"
    )
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    assert len(next(iter(digests))) == len(hashlib.sha256().hexdigest())
