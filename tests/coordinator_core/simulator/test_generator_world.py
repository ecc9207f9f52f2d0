"""The generator writes the logs real clusters hold (issue 13, item 7): compacted captures, Kafka
4's classic-group records, idle partitions committed once, members restarting all at once,
groups that never commit, and retention checks on the broker's own schedule."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from coordinator_core.codec import record_codec as codec
from coordinator_core.codec.records import GroupMetadataKey, GroupMetadataValue, LogRecord, OffsetCommitKey
from coordinator_core.simulator.generator import GeneratedLog, generate

OFF = {"idle_partitions": 0.0, "commit_changed_only": 0.0, "offsetless_groups": 0.0, "mass_restarts": 0.0}


def records_by_group(log: GeneratedLog) -> dict[str, list[LogRecord]]:
    by: dict[str, list[LogRecord]] = defaultdict(list)
    for k, v, p, o, t in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps):
        r = codec.decode_record(k, v)
        assert r.key.group is not None
        by[r.key.group].append(LogRecord(p, o, t, r.key, r.value))
    return by


def group_records(recs: list[LogRecord]) -> list[LogRecord]:
    return [r for r in recs if isinstance(r.key, GroupMetadataKey)]


# ---------------------------------------------------------------------------------------------
# compaction
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def written_and_cleaned() -> tuple[GeneratedLog, GeneratedLog]:
    opts: dict[str, Any] = {"retention_ms": 600_000, "delete_retention_ms": 300_000}
    return generate(12, 1.0, seed=3, **opts), generate(12, 1.0, seed=3, compaction="cleaned", **opts)


def test_a_cleaned_log_keeps_only_the_latest_record_per_key_below_each_cleaner_point(
    written_and_cleaned: tuple[GeneratedLog, GeneratedLog],
) -> None:
    written, cleaned = written_and_cleaned
    points = {int(q): off for q, off in cleaned.truth["compaction"]["cleaner_points"].items()}
    seen: set[tuple[int, bytes]] = set()
    latest: dict[tuple[int, bytes], int] = {}
    for p, o, k in zip(written.partitions, written.offsets, written.keys):
        if o < points[p]:
            latest[(p, k)] = o
    for p, o, k in zip(cleaned.partitions, cleaned.offsets, cleaned.keys):
        if o < points[p]:
            assert (p, k) not in seen, (p, o)
            seen.add((p, k))
            assert latest[(p, k)] == o
    assert len(cleaned) < len(written)


def test_a_cleaned_log_keeps_the_written_offsets_and_an_untouched_dirty_tail(
    written_and_cleaned: tuple[GeneratedLog, GeneratedLog],
) -> None:
    written, cleaned = written_and_cleaned
    truth = cleaned.truth["compaction"]
    points = {int(q): off for q, off in truth["cleaner_points"].items()}
    as_written = {
        (p, o): (k, v, t)
        for k, v, p, o, t in zip(written.keys, written.values, written.partitions, written.offsets, written.timestamps)
    }
    kept = {
        (p, o): (k, v, t)
        for k, v, p, o, t in zip(cleaned.keys, cleaned.values, cleaned.partitions, cleaned.offsets, cleaned.timestamps)
    }
    assert all(as_written[pos] == rec for pos, rec in kept.items())
    assert {pos for pos in as_written if pos[1] >= points[pos[0]]} <= set(kept)
    removed = {
        (int(q), off) for q, runs in truth["removed_offsets"].items() for a, b in runs for off in range(a, b + 1)
    }
    assert removed == set(as_written) - set(kept)
    assert (
        truth["removed"]
        == len(removed)
        == len(written) - len(cleaned)
        == truth["records_written"] - truth["records_kept"]
    )
    assert sum(g["compaction_removed"] for g in cleaned.truth["groups"].values()) == truth["removed"]


def test_a_cleaned_log_drops_tombstones_older_than_delete_retention_and_keeps_recent_ones(
    written_and_cleaned: tuple[GeneratedLog, GeneratedLog],
) -> None:
    _, cleaned = written_and_cleaned
    truth = cleaned.truth["compaction"]
    assert truth["removed_tombstones"] > 0
    assert any(v is None for v in cleaned.values)
    assert (
        sum(g["compaction_removed_tombstones"] for g in cleaned.truth["groups"].values()) == truth["removed_tombstones"]
    )


def test_the_simulation_behind_a_cleaned_log_is_the_written_logs(
    written_and_cleaned: tuple[GeneratedLog, GeneratedLog],
) -> None:
    written, cleaned = written_and_cleaned
    a = {g: {k: v for k, v in t.items() if not k.startswith("compaction")} for g, t in written.truth["groups"].items()}
    b = {g: {k: v for k, v in t.items() if not k.startswith("compaction")} for g, t in cleaned.truth["groups"].items()}
    assert a == b
    assert written.truth["compaction"] == {"mode": "none"}


# ---------------------------------------------------------------------------------------------
# Kafka 4 (the new group coordinator) writes for classic groups
# ---------------------------------------------------------------------------------------------
def test_the_new_coordinator_log_opens_every_joined_group_with_an_empty_generation_0_record_and_tombstones_every_death() -> (
    None
):
    log = generate(24, 2.0, seed=8, coordinator="new", retention_ms=900_000)
    by = records_by_group(log)
    checked = 0
    for gid, t in log.truth["groups"].items():
        recs = group_records(by.get(gid, []))
        incarnation_start = True
        for r in recs:
            if incarnation_start and r.value is not None:
                assert isinstance(r.value, GroupMetadataValue)
                assert (r.value.protocol_type, r.value.generation, r.value.members, r.value.leader) == (
                    "",
                    0,
                    (),
                    None,
                ), gid
                checked += 1
            incarnation_start = r.value is None
        assert all(d["group_tombstone"] for d in t["deaths"]), gid
        assert sum(r.value is None for r in recs) == len(t["deaths"]), gid
    assert checked >= 10


def test_the_old_coordinator_writes_no_group_tombstone_when_a_generation_0_group_dies() -> None:
    log = generate(24, 2.0, seed=8, coordinator="old", retention_ms=900_000)
    deaths = [d for t in log.truth["groups"].values() for d in t["deaths"]]
    assert any(d["generation"] == 0 for d in deaths)
    assert all(d["group_tombstone"] == (d["generation"] > 0) for d in deaths)


# ---------------------------------------------------------------------------------------------
# idle partitions, consumers committing only what they consumed
# ---------------------------------------------------------------------------------------------
def _last_commits(log: GeneratedLog) -> dict[tuple[str, str, int], int]:
    last: dict[tuple[str, str, int], int] = {}
    for k, v, t in zip(log.keys, log.values, log.timestamps):
        r = codec.decode_key(k)
        if isinstance(r, OffsetCommitKey) and v is not None:
            last[(r.group, r.topic, r.partition)] = t
    return last


def test_consumers_committing_only_consumed_partitions_commit_an_idle_partition_once_more_and_never_again() -> None:
    opts: dict[str, Any] = {**OFF, "idle_partitions": 1.0, "retention_ms": 7 * 86_400_000}
    changed_only = generate(16, 2.0, seed=4, **{**opts, "commit_changed_only": 1.0})
    java = generate(16, 2.0, seed=4, **opts)
    idle = {(i["topic"], i["partition"]): i["idle_since_ms"] for i in changed_only.truth["idle_partitions"]}
    assert idle
    slack = 60_000  # the longest auto-commit interval the generator draws, and then some
    stale = 0
    for (gid, topic, q), at in _last_commits(changed_only).items():
        t = changed_only.truth["groups"][gid]
        if (topic, q) in idle and "commit_changed_only" in t["traits"]:
            assert at <= idle[(topic, q)] + slack, (gid, topic, q)
            if t["final_state"] == "Stable":
                stale += 1
    assert stale > 0
    end = java.truth["end_ms"]
    assert any(
        at > idle[(topic, q)] + 30 * 60_000 and at > end - 10 * 60_000
        for (gid, topic, q), at in _last_commits(java).items()
        if (topic, q) in idle and java.truth["groups"][gid]["kind"] in ("app", "static")
    )


def test_an_idle_partitions_old_commit_sits_before_a_stable_groups_latest_metadata() -> None:
    log = generate(
        16, 2.0, seed=4, **{**OFF, "idle_partitions": 1.0, "commit_changed_only": 1.0, "retention_ms": 7 * 86_400_000}
    )
    by = records_by_group(log)
    idle = {(i["topic"], i["partition"]) for i in log.truth["idle_partitions"]}
    found = []
    for gid, t in log.truth["groups"].items():
        if t["final_state"] != "Stable" or "commit_changed_only" not in t["traits"]:
            continue
        recs = by[gid]
        last_meta = max(r.offset for r in group_records(recs))
        last_commit: dict[tuple[str, int], int] = {}
        for r in recs:
            if isinstance(r.key, OffsetCommitKey) and r.value is not None:
                last_commit[(r.key.topic, r.key.partition)] = r.offset
        found += [(gid, tp) for tp, off in last_commit.items() if tp in idle and off < last_meta]
    assert found


# ---------------------------------------------------------------------------------------------
# mass restarts, groups that never commit
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def restarts() -> GeneratedLog:
    return generate(30, 2.0, seed=6, **{**OFF, "offsetless_groups": 0.5, "mass_restarts": 1.0}, retention_ms=900_000)


def test_offsetless_groups_have_members_and_generations_but_never_a_commit(restarts: GeneratedLog) -> None:
    by = records_by_group(restarts)
    offsetless = [g for g, t in restarts.truth["groups"].items() if "offsetless" in t["traits"]]
    assert len(offsetless) >= 3
    for gid in offsetless:
        assert restarts.truth["groups"][gid]["commits"] == 0
        assert not any(isinstance(r.key, OffsetCommitKey) for r in by[gid])
        assert any(isinstance(r.value, GroupMetadataValue) and r.value.members for r in by[gid])


def test_a_mass_rollout_empties_the_group_within_seconds_and_it_forms_again_within_seconds(
    restarts: GeneratedLog,
) -> None:
    by = records_by_group(restarts)
    rollouts = 0
    for gid, t in restarts.truth["groups"].items():
        if t["kind"] != "app":
            continue
        for e in t["planned_events"]:
            if not e.startswith("mass_rollout@"):
                continue
            at = int(e.split("@")[1])
            after = [r for r in group_records(by[gid]) if at <= r.timestamp_ms <= at + 60_000 and r.value is not None]
            emptied = [r for r in after if isinstance(r.value, GroupMetadataValue) and not r.value.members]
            if not emptied:
                continue  # the group was mid-rebalance or already restarting; nothing to compare
            rollouts += 1
            assert emptied[0].timestamp_ms - at <= 15_000, gid
            back = [r for r in after if r.offset > emptied[0].offset and r.value.members]  # type: ignore[union-attr]
            assert back and back[0].timestamp_ms - emptied[0].timestamp_ms <= 30_000, gid
    assert rollouts >= 3


def test_a_group_killed_before_its_first_commit_is_in_the_mix(restarts: GeneratedLog) -> None:
    by = records_by_group(restarts)
    early = 0
    for gid, t in restarts.truth["groups"].items():
        kills = sorted(int(e.split("@")[1]) for e in t["planned_events"] if e.startswith("mass_kill@"))
        commits = [r.timestamp_ms for r in by.get(gid, []) if isinstance(r.key, OffsetCommitKey)]
        if kills and t["kind"] == "app" and "offsetless" not in t["traits"] and commits and min(commits) > kills[0]:
            early += 1
    assert early >= 1


# ---------------------------------------------------------------------------------------------
# retention checks on the broker's schedule, and the truth about them
# ---------------------------------------------------------------------------------------------
def _on_schedule(truth: dict[str, Any], partition: int, at: int) -> bool:
    interval = truth["retention_checks"]["interval_ms"]
    sched = truth["retention_checks"]["partitions"][str(partition)]
    current = [s for s in sched if s["from_ms"] <= at][-1]
    return at >= current["first_run_ms"] and (at - current["first_run_ms"]) % interval == 0


@pytest.mark.parametrize("coordinator", ["old", "new"])
def test_every_retention_tombstone_falls_on_its_partitions_check_which_is_not_aligned_to_the_epoch(
    coordinator: str,
) -> None:
    log = generate(20, 2.0, seed=9, coordinator=coordinator, retention_ms=900_000, failovers_per_hour=3)
    truth = log.truth
    interval = truth["retention_checks"]["interval_ms"]
    firsts = {s["first_run_ms"] for sched in truth["retention_checks"]["partitions"].values() for s in sched}
    assert all(f % interval for f in firsts)
    deaths = [
        (t["partition"], d["time_ms"])
        for t in truth["groups"].values()
        for d in t["deaths"]
        if d["cause"] == "retention"
    ]
    assert deaths
    assert all(_on_schedule(truth, q, at) for q, at in deaths)
    if coordinator == "new":
        assert len(firsts) > 1


def test_turning_the_worlds_shapes_off_leaves_the_rest_of_the_plan_unchanged() -> None:
    a = generate(20, 0.5, seed=12).truth["groups"]
    b = generate(20, 0.5, seed=12, **OFF).truth["groups"]
    assert {g: (t["kind"], t["topics"], t["assignors"]) for g, t in a.items()} == {
        g: (t["kind"], t["topics"], t["assignors"]) for g, t in b.items()
    }
    assert any(t["traits"] for t in a.values()) and not any(t["traits"] for t in b.values())


def test_bad_world_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="compaction"):
        generate(2, 0.1, compaction="squashed")
    with pytest.raises(ValueError, match="idle_partitions"):
        generate(2, 0.1, idle_partitions=2.0)
    with pytest.raises(ValueError, match="coordinator"):
        generate(2, 0.1, coordinator="kraft")


def test_a_compacted_capture_keeps_an_idle_partitions_old_commit_before_the_groups_latest_metadata() -> None:
    # the first case: what a capture from earliest of a compacted topic reads
    log = generate(
        16,
        2.0,
        seed=4,
        compaction="cleaned",
        compaction_dirty_ratio=0.1,
        **{**OFF, "idle_partitions": 1.0, "commit_changed_only": 1.0, "retention_ms": 7 * 86_400_000},
    )
    points = {int(q): off for q, off in log.truth["compaction"]["cleaner_points"].items()}
    idle = {(i["topic"], i["partition"]): i["idle_since_ms"] for i in log.truth["idle_partitions"]}
    by = records_by_group(log)
    found = []
    for gid, t in log.truth["groups"].items():
        if t["final_state"] != "Stable" or "commit_changed_only" not in t["traits"]:
            continue
        meta = [r for r in group_records(by[gid]) if r.value is not None]
        commits = [
            r
            for r in by[gid]
            if isinstance(r.key, OffsetCommitKey)
            and r.value is not None
            and (r.key.topic, r.key.partition) in idle
            and r.offset < points[r.partition]
        ]
        found += [
            (gid, c.offset)
            for c in commits
            if c.offset < meta[-1].offset and meta[-1].timestamp_ms - c.timestamp_ms > 30 * 60_000
        ]
    assert found
